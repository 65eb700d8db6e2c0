"""The MinHash kernel: LSH parameters, tokenising, signatures, estimates and band keys."""

from __future__ import annotations

import dataclasses
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from corpusclean.pipelines import minhash as mh
from corpusclean.pipelines.minhash import (
    EMPTY,
    band_hashes,
    estimate_jaccard_rows,
    exact_jaccard,
    optimal_bands,
    shingle_batch,
    shingle_hashes,
    signatures,
    sketch,
)
from corpusclean.pipelines.near_dedup import NearDedupParams

# The job's parameters (NearDedupParams owns the defaults), with each tokenizer.
WORD = NearDedupParams(tokenizer="word").minhash
CHAR = NearDedupParams(tokenizer="char").minhash
AUTO = NearDedupParams(tokenizer="auto").minhash


def _lower(text: str) -> str:
    return pc.utf8_lower(pa.array([text]))[0].as_py()


def ref_words(text: str) -> list[str]:
    """Reference tokenizer: runs of letters, numbers, marks and '_' of the lower-cased text."""
    tokens, cur = [], []
    for ch in _lower(text):
        if ch == "_" or unicodedata.category(ch)[0] in "LNM":
            cur.append(ch)
        elif cur:
            tokens.append("".join(cur))
            cur = []
    if cur:
        tokens.append("".join(cur))
    return tokens


def ref_chars(text: str) -> list[str]:
    return list(" ".join(_lower(text).split()))


def ref_shingles(units: list[str], n: int) -> set[tuple[str, ...]]:
    if not units:
        return set()
    if len(units) < n:
        return {tuple(units)}
    return {tuple(units[i : i + n]) for i in range(len(units) - n + 1)}


def ref_jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def random_texts(rng: np.random.Generator, count: int) -> list[str]:
    """Texts over an alphabet with ASCII, accents, combining marks, CJK, emoji, punctuation
    (ASCII and Unicode) and long tokens, so spans cross every byte-length case."""
    pieces = [
        "the", "cat", "sat", "on", "mat", "dog", "a", "an", "émigré", "naïve", "über",
        "straße", "東京", "中文字", "हिन्दी", "ру́сский", "x_y", "42", "3.14", "don't",
        "verylongtokenbeyondeightbytes", "another_token_longer_than_thirty_two_bytes_total",
        "🙂", "—", "“quoted”", "…", ",", ".", "!", "\u00a0", "\t", "\n", "  ", "ÉCOLE", "İstanbul",
    ]  # fmt: skip
    texts = []
    for _ in range(count):
        k = int(rng.integers(0, 40))
        parts = rng.choice(pieces, k)
        seps = rng.choice([" ", "", ", ", "\n"], k)
        texts.append("".join(p + s for p, s in zip(parts, seps, strict=True)))
    return texts


# ---------------------------------------------------------------------------------------------
# optimal_bands


def test_optimal_bands_matches_datasketch() -> None:
    # The `bench` extra, which `make test` installs: a missing datasketch fails here.
    from datasketch import lsh

    for threshold in (0.5, 0.7, 0.8, 0.9):
        for num_perm in (64, 128):
            for fp in (0.5, 0.3):
                expected = lsh._optimal_param(threshold, num_perm, fp, 1 - fp)
                assert optimal_bands(threshold, num_perm, fp, 1 - fp) == expected


def test_optimal_bands_known_values_and_limits() -> None:
    assert optimal_bands(0.8, 128) == (9, 13)
    assert optimal_bands(0.5, 256) == (42, 6)
    b, r = optimal_bands(0.8, 1024)
    assert b * r <= 1024
    with pytest.raises(ValueError, match="threshold"):
        optimal_bands(1.0, 128)
    with pytest.raises(ValueError, match="num_perm"):
        optimal_bands(0.8, 0)


def test_the_job_defaults_resolve_to_the_optimal_bands() -> None:
    nd = NearDedupParams()
    p = nd.minhash
    w = nd.false_positive_weight
    assert (p.bands, p.rows) == optimal_bands(nd.threshold, p.num_perm, w, 1 - w) == (16, 8)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tokenizer": "words"}, "tokenizer"),
        ({"num_perm": 0}, "num_perm"),
        ({"ngram": 0}, "ngram"),
        ({"bands": 20, "rows": 7}, "bands x rows"),
    ],
)
def test_params_reject_bad_values(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(AUTO, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Tokenising and shingles


def test_word_shingles_match_reference_tokenizer() -> None:
    rng = np.random.default_rng(3)
    texts = random_texts(rng, 300)
    g, off = shingle_batch(pa.array(texts), WORD)
    for i, text in enumerate(texts):
        ref = ref_shingles(ref_words(text), WORD.ngram)
        assert np.unique(g[off[i] : off[i + 1]]).size == len(ref), text
    for i in range(0, 300, 2):
        a, b = texts[i], texts[i + 1] if i % 4 else texts[i][: len(texts[i]) // 2]
        want = ref_jaccard(ref_shingles(ref_words(a), 5), ref_shingles(ref_words(b), 5))
        assert exact_jaccard(a, b, WORD) == pytest.approx(want), (a, b)


def test_char_shingles_match_reference_and_collapse_whitespace() -> None:
    rng = np.random.default_rng(4)
    texts = random_texts(rng, 200)
    g, off = shingle_batch(pa.array(texts), CHAR)
    for i, text in enumerate(texts):
        ref = ref_shingles(ref_chars(text), CHAR.char_ngram)
        assert np.unique(g[off[i] : off[i + 1]]).size == len(ref), repr(text)
    same = shingle_hashes("  天气\u3000非常   好。\n\t今天 ", CHAR)
    assert np.array_equal(same, shingle_hashes("天气 非常 好。 今天", CHAR))


def test_words_are_lowercased_and_split_on_unicode_punctuation() -> None:
    a = "The “Quick” Brown—Fox… jumps over the lazy dog"
    b = "the quick brown fox jumps over the lazy dog"
    assert np.array_equal(shingle_hashes(a, WORD), shingle_hashes(b, WORD))
    # Combining marks stay inside their word: Devanagari vowel signs do not split it.
    assert shingle_hashes("हिन्दी", WORD).size == 1
    assert not np.array_equal(shingle_hashes("hindi", WORD), shingle_hashes("hindī", WORD))


def test_short_documents_get_one_shingle_of_all_tokens() -> None:
    texts = ["one", "one two", "one two three four", "one two three four five", "two one"]
    sig, n = signatures(pa.array(texts), WORD)
    assert n.tolist() == [1, 1, 1, 1, 1]
    assert len({row.tobytes() for row in sig}) == 5
    again, _ = signatures(pa.array(["One, two!"]), WORD)
    assert np.array_equal(again[0], sig[1])
    assert exact_jaccard("one two", "one two", WORD) == 1.0
    assert exact_jaccard("one two", "two one", WORD) == 0.0


def test_documents_without_shingles_are_empty_rows() -> None:
    texts = pa.array([None, "", "   ", "!!! ... ---", "real words here"], pa.string())
    sig, n = signatures(texts, WORD)
    assert n.tolist() == [0, 0, 0, 0, 1]
    assert (sig[:4] == EMPTY).all()
    assert (sig[4] != EMPTY).all()
    _, n_char = signatures(texts, CHAR)
    assert n_char.tolist() == [0, 0, 0, 7, 11]


def test_repeated_ngrams_count_but_do_not_change_the_set() -> None:
    _, n = signatures(pa.array(["a b c d e a b c d e", "a b c d e"]), WORD)
    assert n.tolist() == [6, 1]
    assert shingle_hashes("a b c d e a b c d e", WORD).size == 5


def test_auto_uses_characters_for_cjk_majority_documents() -> None:
    zh = "我们今天去公园散步，天气非常好。"
    ja = "東京は日本の首都です。東京タワーへ行きましょう"
    ko = "한국어 텍스트 입니다 한국어 문장"
    en_with_cjk = "English text with a few words of 中文 inside it, mostly English anyway"
    for text in (zh, ja, ko):
        assert np.array_equal(shingle_hashes(text, AUTO), shingle_hashes(text, CHAR)), text
    assert np.array_equal(shingle_hashes(en_with_cjk, AUTO), shingle_hashes(en_with_cjk, WORD))
    # Majority counts non-space characters: spaces do not dilute CJK text.
    spaced = "中 文 字 符 测 试 " + " " * 50
    assert np.array_equal(shingle_hashes(spaced, AUTO), shingle_hashes(spaced, CHAR))


def test_signatures_do_not_depend_on_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    texts = random_texts(rng, 120) + ["我们今天去公园散步，天气非常好。"] * 3 + [None]  # type: ignore[list-item]
    whole, n_whole = signatures(pa.array(texts), AUTO)
    order = rng.permutation(len(texts))
    shuffled, _ = signatures(pa.array([texts[i] for i in order]), AUTO)
    assert np.array_equal(shuffled, whole[order])
    singles = np.vstack([signatures(pa.array([t], pa.string()), AUTO)[0] for t in texts[:40]])
    assert np.array_equal(singles, whole[:40])
    # Small slices of text force many chunks inside one call.
    monkeypatch.setattr(mh, "_CHUNK_BYTES", 64)
    chunked, n_chunked = signatures(pa.array(texts), AUTO)
    assert np.array_equal(chunked, whole)
    assert np.array_equal(n_chunked, n_whole)


def test_input_types() -> None:
    texts = ["alpha beta gamma delta epsilon zeta", "eta theta iota kappa lambda mu", None]
    ref, _ = signatures(pa.array(texts, pa.string()), AUTO)
    for arr in (
        pa.array(texts, pa.large_string()),
        pa.chunked_array([pa.array(texts[:1]), pa.array(texts[1:], pa.string())]),
        pa.array(["skip me", *texts], pa.string()).slice(1),
        pa.array(texts, pa.string_view()),
    ):
        sig, _ = signatures(arr, AUTO)
        assert np.array_equal(sig, ref)
    empty, n = signatures(pa.array([], pa.string()), AUTO)
    assert empty.shape == (0, 128) and n.shape == (0,)
    with pytest.raises(TypeError, match="string"):
        signatures(pa.array([1, 2]), AUTO)


def test_signatures_are_pinned() -> None:
    """The same seed gives the same values everywhere: these must never change silently,
    or signatures stored by an earlier run stop matching new ones."""
    sig, _ = signatures(pa.array(["The quick brown fox jumps over the lazy dog."]), AUTO)
    assert sig[0, :4].tolist() == PINNED_SIG
    assert band_hashes(sig, 9, 13)[0, :2].tolist() == PINNED_BANDS
    other, _ = signatures(
        pa.array(["The quick brown fox jumps over the lazy dog."]),
        dataclasses.replace(AUTO, seed=7),
    )
    assert not np.array_equal(other, sig)


PINNED_SIG = [4080748, 215461262, 50603510, 276368994]
PINNED_BANDS = [7570442043794753121, -4367500356527662293]


# ---------------------------------------------------------------------------------------------
# The sketch and the estimates


def _pairs(m: int, jaccard: float, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    c = round(2 * m * jaccard / (1 + jaccard))
    sets = []
    for _ in range(trials):
        u = rng.integers(0, 2**63, 2 * m - c, dtype=np.uint64)
        sets += [u[:m], np.concatenate([u[:c], u[m:]])]
    return np.concatenate(sets), np.arange(0, 2 * trials * m + 1, m), c / (2 * m - c)


@pytest.mark.parametrize(("m", "trials"), [(8, 600), (50, 600), (1000, 60)])
def test_sketch_is_unbiased_with_kperm_level_error(m: int, trials: int) -> None:
    g, off, exact = _pairs(m, 0.8, trials, seed=m)
    sig = sketch(g, off, 128, seed=1)
    est = estimate_jaccard_rows(sig[0::2], sig[1::2])
    kperm_se = np.sqrt(exact * (1 - exact) / 128)
    assert abs(est.mean() - exact) < 4 * kperm_se / np.sqrt(trials)
    assert est.std() < 1.15 * kperm_se


def test_sketch_fills_every_slot_and_is_order_free() -> None:
    g = np.array([5, 9, 5, 1, 2, 3], dtype=np.uint64)
    off = np.array([0, 1, 3, 3, 6])
    sig = sketch(g, off, 64, seed=3)
    assert (sig[[0, 1, 3]] != EMPTY).all() and (sig[2] == EMPTY).all()
    swapped = sketch(np.array([3, 1, 2], dtype=np.uint64), np.array([0, 3]), 64, seed=3)
    assert np.array_equal(swapped[0], sig[3])
    dup = sketch(np.array([9, 5, 9, 9], dtype=np.uint64), np.array([0, 4]), 64, seed=3)
    assert np.array_equal(dup[0], sig[1])


def test_estimates_track_exact_jaccard_on_edited_documents() -> None:
    rng = np.random.default_rng(11)
    words = np.array([f"w{i}" for i in range(3000)])
    base = [" ".join(rng.choice(words, 300)) for _ in range(60)]
    edited = []
    for doc in base:
        toks = doc.split()
        for i in rng.choice(len(toks), int(rng.integers(0, 15)), replace=False):
            toks[i] = "edit"
        edited.append(" ".join(toks))
    sig, _ = signatures(pa.array(base + edited), WORD)
    est = estimate_jaccard_rows(sig[:60], sig[60:])
    exact = np.array([exact_jaccard(a, b, WORD) for a, b in zip(base, edited, strict=True)])
    assert exact.min() < 0.7 and exact.max() == 1.0
    assert np.abs(est - exact).max() < 0.15
    assert abs((est - exact).mean()) < 0.015
    assert np.mean(sig[0] == sig[60]) == pytest.approx(est[0])


def test_estimate_jaccard_rows_checks_shapes() -> None:
    a = np.zeros((3, 8), np.uint32)
    assert estimate_jaccard_rows(a, a).tolist() == [1.0, 1.0, 1.0]
    b = a.copy()
    b[1, :2] = 1
    assert estimate_jaccard_rows(a, b).tolist() == [1.0, 0.75, 1.0]
    with pytest.raises(ValueError, match="matrices"):
        estimate_jaccard_rows(a, a[:2])


# ---------------------------------------------------------------------------------------------
# Band keys


def test_band_hashes_equal_bands_equal_keys() -> None:
    rng = np.random.default_rng(2)
    sig = rng.integers(0, 2**32, (4, 128), dtype=np.uint64).astype(np.uint32)
    sig[1] = sig[0]
    sig[2] = sig[0]
    sig[2, 13] ^= 1  # a slot of band 1 (rows 13)
    keys = band_hashes(sig, 9, 13)
    assert keys.shape == (4, 9) and keys.dtype == np.int64
    assert np.array_equal(keys[0], keys[1])
    assert (keys[2] == keys[0]).tolist() == [True, False] + [True] * 7
    assert len(np.unique(keys[3])) == 9
    # The same slot values in different bands give different keys.
    flat = np.tile(sig[3, :8], 16)[None, :]
    k = band_hashes(flat, 16, 8)
    assert len(np.unique(k)) == 16


def test_band_hashes_even_rows_and_bad_shapes() -> None:
    sig = np.arange(64, dtype=np.uint32).reshape(2, 32)
    keys = band_hashes(sig, 4, 8)
    assert keys.shape == (2, 4) and len(np.unique(keys)) == 8
    with pytest.raises(ValueError, match="does not fit"):
        band_hashes(sig, 5, 8)
