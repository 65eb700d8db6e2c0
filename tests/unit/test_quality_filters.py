"""The heuristic quality filters on hand-made documents, at each threshold's edge.

Each rule is checked on both sides of its bound (English), and the CJK counting on Chinese
text. The expected values follow the reference definitions (Gopher, C4, FineWeb as datatrove
implements them); bench/filters.py compares against datatrove itself on real text.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from corpusclean.pipelines import heuristics as h
from corpusclean.pipelines.base import Roles, load_steps
from corpusclean.pipelines.columns import score_column


def run(name: str, texts: list[str | None], **params: Any) -> tuple[list, dict[str, list]]:
    """(reasons, scores) of filter `name` on `texts`."""
    cls = load_steps()[name]
    step = cls(cls.Params(**params), Roles())
    batch = pa.record_batch({"text": pa.array(texts, pa.string())})
    scores = step.score(batch)
    assert set(scores) == {f.name for f in step.score_fields()}
    return step.verdict(scores).to_pylist(), {k: v.to_pylist() for k, v in scores.items()}


def reason(name: str, text: str, **params: Any) -> str | None:
    return run(name, [text], **params)[0][0]


def score(name: str, column: str, text: str, **params: Any) -> float:
    return run(name, [text], **params)[1][score_column(column)][0]


# Fifty words of prose with the stop words it needs: "the", "and", "of".
PROSE = (
    "The river ran past the mill and the children of the village watched it rise. "
    "They had seen floods before, and they knew the signs of the coming rain. "
    "Their parents moved the grain to the upper floor of the barn, and waited with patience "
    "for the water to fall back into its banks again before planting."
)


def words(n: int) -> str:
    """`n` words of plain prose (stop words included), one sentence a line of ten."""
    base = PROSE.replace(".", "").replace(",", "").split()
    out = [base[i % len(base)] for i in range(n)]
    return "\n".join(" ".join(out[i : i + 10]) + "." for i in range(0, n, 10))


# ---------------------------------------------------------------------------------------------
# Words


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, world.", ["Hello", ",", "world", "."]),
        ("It's John's; don't!", ["It", "'s", "John", "'s", ";", "do", "n't", "!"]),
        (
            "Mr. Smith paid $3.50 (cash).",
            ["Mr.", "Smith", "paid", "$", "3.50", "(", "cash", ")", "."],
        ),
        (
            "well-known U.S. e.g. end.Start",
            ["well", "-", "known", "U.S.", "e.g", ".", "end", ".", "Start"],
        ),
        (
            "see https://example.com/a-b?x=1, then",
            ["see", "https://example.com/a-b?x=1", ",", "then"],
        ),
        ("wait... what…", ["wait", "...", "what", "…"]),
        ("今天天气很好。", ["今", "天", "天", "气", "很", "好", "。"]),
        ("用Python写代码", ["用", "Python", "写", "代", "码"]),
    ],
)
def test_words_follow_the_english_tokenizer_rules_and_cjk_characters(text, expected) -> None:
    assert h.tokens(text) == expected


# ---------------------------------------------------------------------------------------------
# Gopher quality


def test_gopher_word_count_bounds_count_words_not_punctuation() -> None:
    assert score("gopher_quality", "gopher_words", words(50)) == 50  # the periods do not count
    assert reason("gopher_quality", words(50)) is None
    assert reason("gopher_quality", words(49)) == "gopher_short_doc"
    assert reason("gopher_quality", words(60), max_doc_words=59) == "gopher_long_doc"
    assert reason("gopher_quality", words(49), min_doc_words=None) is None


def test_gopher_mean_word_length_bounds() -> None:
    long_words = " ".join(["characteristically"] * 48 + ["the", "and"])
    assert score("gopher_quality", "gopher_mean_word_length", long_words) == pytest.approx(
        (48 * 18 + 6) / 50
    )
    assert reason("gopher_quality", long_words) == "gopher_above_avg_threshold"
    short = " ".join(["at", "on", "the", "and"] * 13)
    assert reason("gopher_quality", short) == "gopher_below_avg_threshold"
    assert reason("gopher_quality", short, min_avg_word_length=2.5) is None


def test_gopher_hashes_and_ellipses_per_word() -> None:
    text = words(60)  # 60 words + 6 periods = 66 tokens
    six = text + " #a #b #c #d #e #f"  # 6 more words, 6 '#' tokens: 6/78
    assert score("gopher_quality", "gopher_hash_ratio", six) == pytest.approx(6 / 78)
    assert reason("gopher_quality", six) is None
    nine = text + " #" * 9  # 9 '#' tokens of their own: 9/75 > 0.1
    assert reason("gopher_quality", nine) == "gopher_too_many_hashes"
    dots = text + " ..." * 9
    assert reason("gopher_quality", dots) == "gopher_too_many_ellipsis"


def test_gopher_bullet_and_ellipsis_lines() -> None:
    lines = words(100).split("\n")  # ten lines
    nine = "\n".join(["- " + line for line in lines[:9]] + lines[9:])
    assert score("gopher_quality", "gopher_bullet_lines", nine) == pytest.approx(0.9)
    assert reason("gopher_quality", nine) is None  # 0.9 is not above 0.9
    ten = "\n".join("• " + line for line in lines)
    assert reason("gopher_quality", ten) == "gopher_too_many_bullets"
    three = "\n".join([line + "..." for line in lines[:3]] + lines[3:])
    assert reason("gopher_quality", three) is None
    four = "\n".join([line + " …" for line in lines[:4]] + lines[4:])
    assert reason("gopher_quality", four) == "gopher_too_many_end_ellipsis"


def test_gopher_alpha_words_and_stop_words() -> None:
    text = words(80)  # 88 tokens with letters or periods; add numbers until under 80%
    ok = text + " 1" * 3
    assert reason("gopher_quality", ok) is None
    numbers = text + " 1" * 40
    assert score("gopher_quality", "gopher_alpha_words", numbers) == pytest.approx(80 / 128)
    assert reason("gopher_quality", numbers) == "gopher_below_alpha_threshold"
    no_stop = " ".join(["river"] * 30 + ["mill"] * 30) + " the"
    assert score("gopher_quality", "gopher_stop_words", no_stop) == 1
    assert reason("gopher_quality", no_stop) == "gopher_enough_stop_words"
    assert reason("gopher_quality", no_stop + " and") is None
    # Stop words match whole words, case-sensitively, as the reference's set lookup does.
    assert reason("gopher_quality", " ".join(["river"] * 60) + " The And") == (
        "gopher_enough_stop_words"
    )


def test_a_chinese_page_has_words_and_passes_with_the_zh_bounds() -> None:
    zh = (
        "今天的天气很好，我们和朋友一起去公园散步。公园里有很多人在跑步和唱歌。"
        "孩子们在草地上玩耍，老人们坐在长椅上聊天。我不想回家，因为这里的风景太美了。"
    )
    reasons, scores = run("gopher_quality", [zh])
    # Every Han character is a word: far from "too few words" despite having no spaces.
    assert scores[score_column("gopher_words")][0] == len(zh) - sum(zh.count(p) for p in "，。")
    assert scores[score_column("gopher_mean_word_length")][0] == 1.0
    assert reasons == ["gopher_below_avg_threshold"]  # the English bounds do not fit it
    zh_bounds = {
        "min_avg_word_length": None,
        "max_avg_word_length": 5,
        "stop_words": ["的", "了", "是", "在", "和", "有", "我", "不"],
    }
    assert reason("gopher_quality", zh, **zh_bounds) is None
    assert reason("gopher_quality", zh[:40], **zh_bounds) == "gopher_short_doc"


# ---------------------------------------------------------------------------------------------
# Gopher repetition


def test_duplicate_lines_and_paragraphs() -> None:
    lines = [f"line number {w} of the page" for w in "abcdefghij"]
    three = "\n".join(lines[:7] + lines[:3])  # 3 of 10 lines repeat: not above 0.3
    reasons, scores = run(
        "gopher_repetition", [three], dup_line_char_frac=None, top_n_grams={}, dup_n_grams={}
    )
    assert scores[score_column("gopher_dup_line_frac")][0] == pytest.approx(0.3)
    assert reasons == [None]
    four = "\n".join(lines[:6] + lines[:4])
    assert reason("gopher_repetition", four, dup_line_char_frac=None) == "dup_line_frac"
    assert reason("gopher_repetition", four) == "dup_line_frac"
    # Paragraphs are split on blank lines and checked first.
    paras = "\n\n".join(lines[:6] + lines[:4])
    assert reason("gopher_repetition", paras, dup_para_char_frac=None) == "dup_para_frac"
    chars = score("gopher_repetition", "gopher_dup_line_char_frac", four)
    assert chars == pytest.approx(sum(len(x) for x in lines[:4]) / len(four))


def test_top_and_duplicated_n_grams() -> None:
    # "buy now" x 20 in a page of other words: the top 2-gram covers 140 of ~600 characters.
    filler = " ".join(f"w{i:03d}" for i in range(90))
    spam = filler + " " + " ".join(["buy now"] * 20)
    top = score("gopher_repetition", "gopher_top_2_gram", spam)
    assert top == pytest.approx(7 * 20 / len(spam))
    assert reason("gopher_repetition", spam, dup_n_grams={}) == "top_2_gram"
    # A repeated 12-word run: its second copy's characters are duplicated 5-gram characters.
    run12 = " ".join(f"t{i:02d}" for i in range(12))
    body = filler + " " + run12 + " " + run12
    dup = score("gopher_repetition", "gopher_dup_5_gram", body)
    assert dup == pytest.approx(36 / len(body), abs=6 / len(body))
    assert reason("gopher_repetition", filler) is None


def _duplicated_chars(words: list[str], n: int) -> int:
    """The Gopher definition (datatrove's `find_all_duplicate`): n-grams joined with "",
    a repeat's characters counted and its n words skipped."""
    unique: set[str] = set()
    repeated, idx = 0, 0
    while idx < len(words) - n + 1:
        gram = "".join(words[idx : idx + n])
        if gram in unique:
            repeated += len(gram)
            idx += n
        else:
            unique.add(gram)
            idx += 1
    return repeated


@pytest.mark.parametrize("sizes", [(5, 6, 7, 8, 9, 10), (3, 4, 7), (1, 2), (10,)])
def test_duplicated_n_grams_are_the_reference_on_repetitive_pages(sizes) -> None:
    """Pages of a few short words, where n-grams joined with "" meet across word boundaries
    ("ab" "c" is "a" "bc") and repeats overlap: every size's fraction is the reference's."""
    rng = random.Random(sum(sizes))
    texts = []
    for _ in range(400):
        vocab = [rng.choice("abc") * rng.randint(1, 3) for _ in range(rng.randint(1, 6))]
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 60))]
        texts.append(" ".join(words) + rng.choice(["", " the end of it all."]))
    texts += [PROSE, PROSE + " " + PROSE]
    _, scores = run("gopher_repetition", texts, dup_n_grams={n: 1.0 for n in sizes})
    for n in sizes:
        got = scores[score_column(f"gopher_dup_{n}_gram")]
        want = [None if not t else _duplicated_chars(h.tokens(t), n) / len(t) for t in texts]
        assert got == pytest.approx(want), n


# ---------------------------------------------------------------------------------------------
# C4


def test_c4_sentences_count_on_the_lines_it_keeps() -> None:
    four = "One two three. Four five six.\nSeven eight nine! Ten eleven twelve?"
    assert score("c4_quality", "c4_sentences", four) == 4
    assert reason("c4_quality", four) == "too_few_sentences"
    five = four + "\nThirteen fourteen fifteen."
    assert reason("c4_quality", five) is None
    # A line with under three words, or without terminal punctuation, does not count.
    assert reason("c4_quality", four + "\nToo short.") == "too_few_sentences"
    assert reason("c4_quality", four + "\nno final punctuation here") == "too_few_sentences"
    # FineWeb's setting keeps lines without terminal punctuation.
    no_punct = four + "\nno final punctuation here"
    assert reason("c4_quality", no_punct, filter_no_terminal_punct=False) is None
    # Abbreviations do not end a sentence.
    assert score("c4_quality", "c4_sentences", "Mr. Smith went home today.") == 1


def test_c4_lorem_ipsum_curly_brackets_javascript_and_policy_lines() -> None:
    five = "\n".join(f"Sentence number {i} is here." for i in range(5))
    assert reason("c4_quality", five + "\nLorem ipsum dolor sit amet.") == "lorem_ipsum"
    assert reason("c4_quality", five + "\nThe rule is {a: b} here.") == "curly_bracket"
    # Whichever comes first decides the reason.
    both = "The rule is {a: b} here.\n" + five + "\nLorem ipsum dolor sit amet."
    reasons, scores = run("c4_quality", [both])
    assert reasons == ["curly_bracket"]
    assert scores[score_column("c4_curly_bracket_line")] == [1]
    assert scores[score_column("c4_lorem_ipsum_line")] == [7]
    # A javascript line is dropped before its bracket is seen; so is a short one.
    assert reason("c4_quality", five + "\nEnable JavaScript: {x} to view.") is None
    assert reason("c4_quality", five + "\n{x}.") is None
    # Policy lines do not count as sentences.
    four = "\n".join(f"Sentence number {i} is here." for i in range(4))
    assert reason("c4_quality", four + "\nThis site uses cookies for you.") == "too_few_sentences"
    assert reason("c4_quality", five + "\n{x} here now.", filter_curly_bracket=False) is None


def test_c4_counts_chinese_words_and_sentences_by_character() -> None:
    zh = "今天天气很好。我们去公园吧！孩子们在玩。老人在聊天。风景太美了。"
    assert score("c4_quality", "c4_sentences", zh) == 5
    assert reason("c4_quality", zh) is None  # 。！ are terminal punctuation
    assert reason("c4_quality", "好。\n对。\n是。\n行。\n嗯。") == "too_few_sentences"


# ---------------------------------------------------------------------------------------------
# FineWeb


def test_fineweb_line_punctuation_short_lines_duplicates_and_lists() -> None:
    long = "a line that is comfortably longer than thirty characters"
    assert reason("fineweb_quality", "\n \n") == "empty"
    # 1 of 8 non-blank lines ends in punctuation: 0.125 is not under 0.12.
    eight = "\n".join([long + "."] + [f"{long} {i}" for i in range(7)])
    assert score("fineweb_quality", "fineweb_line_punct_ratio", eight) == 0.125
    assert reason("fineweb_quality", eight, new_line_ratio=1) is None
    nine = "\n".join([long + "."] + [f"{long} {i}" for i in range(8)])
    assert reason("fineweb_quality", nine) == "line_punct_ratio"
    menu = "\n".join(["Home.", "About.", "News.", long + "."])
    assert reason("fineweb_quality", menu) == "short_line_ratio"
    dup = "\n".join([f"{long} {i}." for i in range(60)] + ["Read more."] * 2)
    ratio = score("fineweb_quality", "fineweb_char_dup_ratio", dup)
    assert ratio == pytest.approx(10 / (len(dup) - dup.count("\n")))
    assert reason("fineweb_quality", dup) is None
    dup3 = dup + "\nRead more.\nRead more.\nRead more.\nRead more."
    assert reason("fineweb_quality", dup3) == "char_dup_ratio"
    listing = "\n".join(f"Item {i} here." for i in range(20))  # 19 newlines / 80 words
    assert score("fineweb_quality", "fineweb_list_ratio", listing) == pytest.approx(19 / 80)
    assert reason("fineweb_quality", listing, short_line_thr=1) is None
    tight = "\n".join(f"Item {i}." for i in range(20))  # 19 newlines / 60 words
    assert reason("fineweb_quality", tight, short_line_thr=1) == "list_ratio"
    assert reason("fineweb_quality", tight) == "short_line_ratio"  # checked before


def test_an_empty_text_is_rejected_as_empty_by_the_repetition_filter() -> None:
    distinct = " ".join(f"word{i}" for i in range(40))
    reasons, scores = run("gopher_repetition", ["", distinct])
    assert reasons == ["empty", None]
    assert scores[score_column("gopher_dup_line_frac")] == [None, 0.0]


def test_symbols_outside_the_punctuation_list_are_words() -> None:
    # `•`, `©` and `→` are symbols to Unicode but words to the reference's counts; `#`,
    # `１` (full-width) and `。` are not.
    assert score("gopher_quality", "gopher_words", "a • © → # １ 。 b") == 5


def test_null_text_gets_null_scores() -> None:
    reasons, scores = run("gopher_quality", [None, words(60)])
    assert scores[score_column("gopher_words")] == [None, 60]
    assert reasons[1] is None


def test_bytes_that_are_not_utf8_become_replacement_characters_not_a_crash() -> None:
    """Spark does not check its strings: Latin-1 bytes, a truncated sequence, an encoded
    surrogate and a code point past U+10FFFF decode to U+FFFD (each would index past the
    character table if trusted)."""
    import numpy as np

    raw = [
        b"sch\xf6n gr\xfcn",
        b"\xe9",
        b"ok \xf0\x9f\x98\x80",
        b"cut \xe4\xb8",
        b"\xed\xa0\x80",
        b"\xf4\x90\x80\x80",
    ]
    offsets = np.cumsum([0] + [len(r) for r in raw]).astype(np.int32)
    arr = pa.Array.from_buffers(
        pa.string(), len(raw), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(raw))]
    )
    decoded = h.decode(arr)
    high = [
        [int(c) for c in decoded.cps[decoded.cpo[i] : decoded.cpo[i + 1]] if c > 0x7F]
        for i in range(len(raw))
    ]
    assert high == [[0xFFFD] * 2, [0xFFFD], [0x1F600], [0xFFFD] * 2, [0xFFFD] * 3, [0xFFFD] * 4]
    for name in ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"):
        cls = load_steps()[name]
        step = cls(cls.Params(), Roles())
        assert len(step.verdict(step.score(pa.record_batch({"text": arr})))) == len(raw)


def test_a_long_chinese_paragraph_is_many_words_to_c4() -> None:
    """A line over 1,000 characters of Chinese is not one over-long word: its sentences count."""
    zh = "今天天气很好，我们去公园散步。" * 100  # 1,500 characters, no space
    assert score("c4_quality", "c4_sentences", zh) == 100
    assert score("c4_quality", "c4_sentences", "x" * 1001 + " is a word. Then more words.") == 0


def test_a_score_without_a_value_is_null_not_nan() -> None:
    # No word that is not all punctuation: no mean word length.
    assert score("gopher_quality", "gopher_mean_word_length", "... !!! ??? ---") is None


def test_crlf_lines_end_in_their_punctuation_not_in_their_carriage_return() -> None:
    long = "a line that is comfortably longer than thirty characters"
    lf = "\n".join(f"{long} {i}." for i in range(10))
    crlf = lf.replace("\n", "\r\n")
    assert score("fineweb_quality", "fineweb_line_punct_ratio", crlf) == 1.0
    assert reason("fineweb_quality", crlf) == reason("fineweb_quality", lf) is None


def test_carried_rows_decode_as_if_decoded_afresh() -> None:
    """`carry` hands the rows taken out of the batch decoded last their code points and
    tokens by copy: the same arrays a fresh decode and tokenize of the taken rows gives,
    non-ASCII, CJK, empty and repeated rows included, in the order taken."""
    texts = ["The river ran.\nIt rose!", "", "日本語の文です。 mixed", "naïve café — ok", "x y"]
    arr = pa.array(texts * 3, pa.string())
    rows = np.array([13, 2, 0, 7, 7, 1, 4], dtype=np.int64)
    h.forget()
    h.decode(arr).tokens()
    taken = arr.take(pa.array(rows))
    h.carry(arr, taken, rows)
    carried = h.decode(taken)
    h.forget()
    fresh = h.decode(taken)
    assert carried is not fresh
    assert carried.cps[: carried.cpo[-1]].tolist() == fresh.cps[: fresh.cpo[-1]].tolist()
    assert carried.cpo.tolist() == fresh.cpo.tolist()
    assert carried.valid.tolist() == fresh.valid.tolist()
    for a, b in zip(carried.tokens(), fresh.tokens(), strict=True):
        assert a.tolist() == b.tolist()
    # A batch that is not the one decoded last is not carried.
    h.forget()
    remembered = h.decode(arr)
    other = pa.array(texts, pa.string())
    h.carry(other, other.take(pa.array([0])), np.array([0]))
    assert h.decode(arr) is remembered
    h.forget()


def test_paragraph_and_line_keys_from_the_prefix_hash_are_the_span_hashes() -> None:
    # The repetition filter keys each paragraph and line from one prefix hash of the page;
    # they must be `_span_hash`'s keys (those of the other filters and of the stop-word lists).
    rng = random.Random(5)
    pieces = ["", " ", "a", "ab", "the cat", "é ü", "中文", "x" * 40, "\t", "same line"]
    texts = [""]
    for _ in range(300):
        parts = [rng.choice(pieces) for _ in range(rng.randint(1, 12))]
        texts.append("".join(p + rng.choice(["\n", "\n\n", "\n\n\n", " \n"]) for p in parts))
    d = h.decode(pa.array(texts))
    widest = int(np.diff(d.cpo).max()) + 2
    pw = np.ones(2 * widest, dtype=np.uint64)
    with np.errstate(over="ignore"):  # the polynomial is mod 2**64
        for i in range(1, pw.size):
            pw[i] = pw[i - 1] * h._B
    for t in range(len(texts)):
        lo, hi = int(d.cpo[t]), int(d.cpo[t + 1])
        pre = np.zeros(hi - lo + 1, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(hi - lo):
                pre[i + 1] = pre[i] * h._B + np.uint64(d.cps[lo + i]) + np.uint64(1)
        starts = np.empty(widest, dtype=np.int64)
        ends = np.empty(widest, dtype=np.int64)
        for min_run in (1, 2):
            n = h._split_runs(d.cps, lo, hi, min_run, starts, ends)
            keys = np.empty(n, dtype=np.uint64)
            lens = np.empty(n, dtype=np.int64)
            got = h._dup_fracs_prefix(pre, lo, pw, starts, ends, n, keys, lens)
            want = [h._span_hash(d.cps, starts[k], ends[k]) for k in range(n)]
            assert keys.tolist() == want, texts[t]
            assert got == h._dup_fracs(d.cps, starts, ends, n)
