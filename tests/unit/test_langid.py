"""Language ID (pipelines/langid.py) and the `lang` filter (pipelines/filters/lang.py).

The compiled kernel must give py3langid's own `classify` (norm_probs=True) on every text: the
same language, the probability within 1e-5. The texts cover many scripts, upper case, mixes,
combining characters (NFC), emoji, whitespace, empty and long documents. No Spark.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from corpusclean.pipelines import langid
from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.base import Roles, load_steps
from corpusclean.pipelines.filters.lang import LANG, LANG_SCORE, Lang, LangParams

SENTENCES = [
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Le gouvernement a annoncé de nouvelles mesures pour soutenir les petites entreprises.",
    "Où est la bibliothèque ? Je voudrais emprunter quelques livres pour les vacances.",
    "Die Bundesregierung hat heute neue Maßnahmen zur Förderung erneuerbarer Energien beschlossen.",
    "Ich möchte gerne ein Glas Wasser und ein Stück Käsekuchen, bitte.",
    "El presidente anunció ayer un nuevo plan económico para las regiones del norte.",
    "O governo brasileiro lançou um programa de incentivo à leitura nas escolas públicas.",
    "Il treno per Milano partirà con un ritardo di circa venti minuti.",
    "De gemeente heeft besloten om het park in het centrum opnieuw in te richten.",
    "Regeringen har beslutat att öka anslagen till forskning och utbildning.",
    "Hallitus päätti lisätä tutkimuksen ja koulutuksen rahoitusta ensi vuonna.",
    "Rząd przyjął nowy program wsparcia dla rodzin z dziećmi w całym kraju.",
    "Vláda schválila nový zákon o ochraně životního prostředí a přírody.",
    "A kormány új programot indított a vidéki települések fejlesztésére.",
    "Guvernul a aprobat un nou pachet de măsuri pentru sprijinirea agriculturii.",
    "Hükümet, kırsal bölgelerde yeni okullar inşa etmeyi planladığını açıkladı.",
    "Правительство объявило о новых мерах поддержки малого и среднего бизнеса.",
    "Уряд оголосив про нові заходи підтримки малого та середнього бізнесу.",
    "Правителството обяви нови мерки за подкрепа на малкия и средния бизнес.",
    "Η κυβέρνηση ανακοίνωσε νέα μέτρα για τη στήριξη των μικρών επιχειρήσεων.",
    "这是一个关于自然语言处理的简短中文句子，用来测试语言识别模型的效果。",
    "我们今天下午在公园里散步，看到了很多美丽的花和快乐的孩子们。",
    "今日は天気が良いので、友達と一緒に公園へ散歩に行きました。",
    "東京の桜は三月の終わりから四月の初めにかけて満開になります。",
    "오늘은 날씨가 좋아서 친구와 함께 공원에 산책하러 갔습니다.",
    "الحكومة أعلنت عن إجراءات جديدة لدعم الشركات الصغيرة والمتوسطة في البلاد.",
    "הממשלה הודיעה על צעדים חדשים לתמיכה בעסקים קטנים ובינוניים.",
    "सरकार ने छोटे और मध्यम व्यवसायों की सहायता के लिए नए उपायों की घोषणा की।",
    "সরকার ছোট ও মাঝারি ব্যবসার সহায়তার জন্য নতুন পদক্ষেপ ঘোষণা করেছে।",
    "அரசு சிறு மற்றும் நடுத்தர தொழில்களுக்கு புதிய உதவித் திட்டங்களை அறிவித்தது.",
    "รัฐบาลประกาศมาตรการใหม่เพื่อสนับสนุนธุรกิจขนาดเล็กและขนาดกลาง",
    "Chính phủ đã công bố các biện pháp mới để hỗ trợ doanh nghiệp nhỏ và vừa.",
    "Pemerintah mengumumkan langkah-langkah baru untuk mendukung usaha kecil dan menengah.",
    "Serikali imetangaza hatua mpya za kusaidia biashara ndogo na za kati nchini.",
    "Ríkisstjórnin tilkynnti nýjar aðgerðir til að styðja lítil fyrirtæki.",
    "Llywodraeth Cymru a gyhoeddodd gynllun newydd ar gyfer ysgolion y wlad.",
    "Հայաստանի կառավարությունը հայտարարեց նոր միջոցառումների մասին։",
    "საქართველოს მთავრობამ ახალი ღონისძიებები გამოაცხადა.",
    "Владата објави нови мерки за поддршка на малите бизниси во земјата.",
]

ODD = [
    "",
    " ",
    "   \n\t  ",
    "Hello",
    "Hi!",
    "ok",
    "a",
    "12345 67890",
    "!!! ??? ...",
    "😀",
    "😀🎉🚀 🙂",
    "THIS IS ALL UPPER CASE ENGLISH TEXT ABOUT THE WEATHER TODAY",
    "LE GOUVERNEMENT A ANNONCÉ DE NOUVELLES MESURES",
    "ПРАВИТЕЛЬСТВО ОБЪЯВИЛО О НОВЫХ МЕРАХ",
    "STRAßE",  # upper? ß is lower-case, so not isupper()
    "İSTANBUL BÜYÜKŞEHIR BELEDIYESI",  # lower() of İ gives i + combining dot: NFC after lower
    "ΟΔΟΣ ΑΘΗΝΩΝ",
    "e\u0301te\u0301 a\u0300 Paris, c\u0327a va tre\u0300s bien",  # decomposed: NFC changes it
    "\u212b ngstr\u00f6m \u2126",  # singletons NFC replaces (Angstrom sign, Ohm sign)
    "Ｅｎｇｌｉｓｈ　ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ",
    "hello 世界 bonjour мир",
    "def main():\n    return [x * 2 for x in range(10)]\n",
    "<html><body><p>Hello world</p></body></html>",
    "https://example.com/path?query=1&other=2",
    "\x00\x01 control \x7f",
    "\ud7ff\ue000\uffff",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛",
]


def _varied() -> list[str]:
    """A few hundred texts: whole sentences, prefixes, upper case, emoji, mixes, random."""
    rng = random.Random(7)
    texts = list(SENTENCES) + list(ODD)
    for s in SENTENCES:
        texts.append(s[: max(1, len(s) // 3)])
        texts.append(s[:7])
        texts.append(s.upper())
        texts.append(s + " 😀👍")
        texts.append(" ".join([s] * 5))
    for _ in range(60):
        a, b = rng.sample(SENTENCES, 2)
        texts.append(a + " " + b)
    for _ in range(40):
        n = rng.randint(1, 60)
        texts.append(
            "".join(
                chr(rng.choice([rng.randint(32, 0x2FF), rng.randint(0x400, 0x9FFF)]))
                for _ in range(n)
            )
        )
    return texts


@pytest.fixture(scope="module")
def reference() -> Callable[[str], tuple[str, float]]:
    """py3langid's own classify, probabilities normalised."""
    return langid._identifier().classify


@pytest.fixture(scope="module")
def exact() -> Callable[[str], float]:
    """The probability py3langid's steps give in float64 arithmetic: its `_encode` and
    `visit_counts`, the weights rounded to float32 as it rounds them, every sum in float64.
    py3langid sums in float32, which moves its answer by up to ~1.5e-5 on short mixed texts;
    this is the value both approximate."""
    from py3langid.langid import visit_counts

    ident = langid._identifier()
    prior = ident.nb_pc.astype(np.float64)

    def probability(text: str) -> float:
        data = ident._encode(text)
        visits = visit_counts(ident.tk_nextmove, ident._rowbase, ident.tk_output, data)
        if visits:
            idx = np.fromiter(visits.keys(), dtype=np.intp)
            counts = np.fromiter(visits.values(), dtype=np.float32)
            rows = ident.nb_ptc[idx].astype(np.float64)
            scores = np.log1p(counts).astype(np.float64) @ rows + prior
        else:
            scores = np.zeros(prior.size)
        scores = np.exp((scores - scores.max()) / np.sqrt(len(data) or 1))
        scores /= scores.sum()
        for i, j in ident._alias_pairs:
            scores[i] += scores[j]
            scores[j] = 0.0
        return float(scores.max())

    return probability


def _check_equal(texts: list[str], lang: pa.Array, score: pa.Array, ref, exact=None) -> None:
    """Same language as py3langid everywhere; the probability within 1e-5 of py3langid's on
    99% of texts and within its float32 noise (5e-5) on all; within 3e-6 of `exact`."""
    far = 0
    for text, got_lang, got_score in zip(texts, lang.to_pylist(), score.to_pylist(), strict=True):
        want_lang, want_score = ref(text)
        assert got_lang == want_lang, (text, got_lang, want_lang)
        assert abs(got_score - want_score) < 5e-5, (text, got_score, want_score)
        far += abs(got_score - want_score) >= 1e-5
        if exact is not None:
            assert abs(got_score - exact(text)) < 3e-6, (text, got_score, exact(text))
    assert far <= len(texts) // 100, f"{far} of {len(texts)} texts 1e-5 or more off py3langid"


def test_kernel_equals_py3langid_on_varied_texts(reference, exact) -> None:
    texts = _varied()
    assert len(texts) >= 300
    lang, score = langid.identify(pa.array(texts))
    assert lang.type == pa.string() and score.type == pa.float64()
    assert lang.null_count == 0
    _check_equal(texts, lang, score, reference, exact)


def test_long_documents_and_array_types(reference) -> None:
    # Over 64 KiB: walked alone, straight into the counts; large_string, chunked, sliced.
    long_en = " ".join(SENTENCES[:2]) * 500
    long_mixed = (SENTENCES[21] + " " + SENTENCES[2]) * 400
    texts = [long_en, "short", long_mixed, SENTENCES[17]]
    assert len(long_en.encode()) > 65536 and len(long_mixed.encode()) > 65536
    for arr in (
        pa.array(texts, pa.large_string()),
        pa.chunked_array([texts[:1], texts[1:]]),
        pa.array(["pad", *texts])[1:],
    ):
        lang, score = langid.identify(arr)
        _check_equal(texts, lang, score, reference)


def test_python_path_equals_kernel() -> None:
    texts = [*SENTENCES[::4], *ODD[:6], SENTENCES[21] + SENTENCES[0]]
    buf, starts, ends, _ = langid.prepare(pa.array(texts))
    best_c, prob_c = langid.classify_prepared(buf, starts, ends, compiled=True)
    best_p, prob_p = langid.classify_prepared(buf, starts, ends, compiled=False)
    assert best_c.tolist() == best_p.tolist()
    np.testing.assert_allclose(prob_c, prob_p, atol=1e-6)


def test_sensible_labels() -> None:
    texts = [
        SENTENCES[21],
        SENTENCES[0] + " " + SENTENCES[1],
        SENTENCES[2],
        SENTENCES[4],
        SENTENCES[17],
        SENTENCES[23],
        SENTENCES[25],
        "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG WHILE THE FARMER WATCHES",
        # Mostly Chinese with an English name in it.
        "我们昨天在北京见到了 John Smith 先生，他对中国的历史和文化非常感兴趣。",
    ]
    lang, score = langid.identify(pa.array(texts))
    assert lang.to_pylist() == ["zh", "en", "fr", "de", "ru", "ja", "ko", "en", "zh"]
    scores = score.to_numpy()
    assert (scores > 0.5).all() and (scores <= 1.0 + 1e-9).all()


def test_max_bytes_cuts_at_character_boundaries(reference) -> None:
    texts = ["中文字符测试", "héllo wörld", "😀😀😀", "HELLO world", "abc", ""]
    for cap in (1, 2, 4, 5, 7, 1000):
        buf, starts, ends, _ = langid.prepare(pa.array(texts), max_bytes=cap)
        for text, lo, hi in zip(texts, starts, ends, strict=True):
            raw = text.encode()
            want = raw[:cap].decode("utf-8", errors="ignore")  # drops a split character
            got = buf[lo:hi].tobytes().decode("utf-8")  # a split character would not decode
            # The prefix, then py3langid's preparation (an all-caps prefix is lower-cased).
            assert got == (want.lower() if want.isupper() else want)
        lang, score = langid.identify(pa.array(texts), max_bytes=cap)
        cut = [t.encode()[:cap].decode("utf-8", errors="ignore") for t in texts]
        _check_equal(cut, lang, score, reference)
    # 0 reads everything; a negative cap is refused.
    buf, starts, ends, _ = langid.prepare(pa.array(texts), max_bytes=0)
    assert (ends - starts).tolist() == [len(t.encode()) for t in texts]
    with pytest.raises(ValueError, match="max_bytes"):
        langid.identify(pa.array(texts), max_bytes=-1)


def test_nulls_give_null_labels() -> None:
    arr = pa.array(["Hello there, how are you doing today?", None, "", None, SENTENCES[21]])
    lang, score = langid.identify(arr)
    assert lang.to_pylist()[1] is None and lang.to_pylist()[3] is None
    assert score.to_pylist()[1] is None and score.to_pylist()[3] is None
    assert lang.to_pylist()[0] == "en" and lang.to_pylist()[4] == "zh"
    assert lang.to_pylist()[2] == "sr"  # featureless: py3langid's uniform answer
    empty_lang, empty_score = langid.identify(pa.array([], pa.string()))
    assert len(empty_lang) == 0 and len(empty_score) == 0
    all_null, _ = langid.identify(pa.array([None, None], pa.string()))
    assert all_null.to_pylist() == [None, None]


def _verdict(params: LangParams, langs: list[str | None], scores: list[float | None]) -> list:
    step = Lang(params, Roles())
    got = step.verdict({LANG: pa.array(langs, pa.string()), LANG_SCORE: pa.array(scores)})
    return got.to_pylist()


def test_filter_verdict_at_the_min_score_edge() -> None:
    params = LangParams(languages=["en", "de"], min_score=0.65)
    got = _verdict(
        params,
        ["en", "en", "de", "fr", "fr", None],
        [0.65, 0.6499999, 0.99, 0.99, 0.1, None],
    )
    assert got == [None, "lang_low_score", None, "lang_not_allowed", "lang_not_allowed", None]
    assert Lang(params, Roles()).bounds() == [(LANG_SCORE, ">=", 0.65)]


def test_filter_keeps_everything_without_languages() -> None:
    params = LangParams()
    assert params.languages == [] and params.min_score == 0.65 and params.max_bytes == 0
    assert _verdict(params, ["en", "zh", "sr", None], [0.01, 0.2, 0.99, None]) == [None] * 4
    assert Lang(params, Roles()).bounds() == []


def test_filter_scores_a_batch() -> None:
    step = Lang(LangParams(languages=["zh"], max_bytes=2000), Roles(text="body"))
    assert step.reads() == ["body"]
    assert [(f.name, f.type) for f in step.score_fields()] == [
        (LANG, pa.string()),
        (LANG_SCORE, pa.float64()),
    ]
    batch = pa.record_batch({"body": pa.array([SENTENCES[21], SENTENCES[0], None])})
    scores = step.score(batch)
    assert scores[LANG].to_pylist() == ["zh", "en", None]
    assert step.verdict(scores).to_pylist() == [None, "lang_not_allowed", None]
    assert step.publishes == {LANG: "lang", LANG_SCORE: "lang_score"}
    assert load_steps()["lang"] is Lang


def test_an_input_lang_column_is_refused_unless_the_stage_names_its_own() -> None:
    """The stage would overwrite an input's `lang` in data/: refused in one line naming the
    way out; with its columns named otherwise both are kept."""
    from pyspark.sql.types import DoubleType, StringType

    from corpusclean.jobs.runtime.config import load_clean_config

    fields = {"doc_id": StringType(), "text": StringType(), "lang": StringType()}
    pipe = load_clean_config("fineweb").pipeline()
    step, why = pipe.check(fields)
    assert step.name == "lang"
    assert "adds column 'lang'" in why and "section lang" in why
    renamed = load_clean_config("fineweb", ["lang.column=lid_lang"]).pipeline()
    assert renamed.check(fields) is None
    assert renamed.published(False) == [(LANG, "lid_lang"), (LANG_SCORE, "lang_score")]
    clash = {**fields, "lang_score": DoubleType()}
    assert renamed.check(clash)[1].startswith("stage lang adds column 'lang_score'")
    with pytest.raises(ValueError, match="name the same column"):
        Lang.Params(column="x", score_column="x")


def test_unknown_language_code_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"'xx'.*labels\(\)"):
        LangParams(languages=["en", "xx"])
    with pytest.raises(ValidationError, match="min_score"):
        LangParams(min_score=1.5)
    assert LangParams(languages=["zh", "yue", "sr"]).languages == ["zh", "yue", "sr"]
    assert {"en", "zh", "de", "fr", "ja"} <= set(langid.labels())


def test_scan_without_numba_agrees() -> None:
    # The bytes-method scan (where numba is missing) sorts documents as the compiled one does.
    texts = ["abc", "ABC 12", "Abc", "123", "", "héllo", "ÀB", "X"]
    offsets, data = value_buffers(pa.array(texts))
    starts, ends = offsets[:-1].copy(), offsets[1:].copy()
    compiled = np.zeros(len(texts), dtype=np.int8)
    plain = np.zeros(len(texts), dtype=np.int8)
    langid._scan(data, starts, ends, compiled)
    langid._scan_bytes(data, starts, ends, plain)
    assert compiled.tolist() == plain.tolist() == [0, 1, 0, 0, 0, 2, 2, 1]


def test_labels_from_the_class_list_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before the model is loaded (a driver checking a config), only the class list is read.
    loaded = langid.model().labels
    monkeypatch.setattr(langid, "_model", None)
    monkeypatch.setattr(langid, "_labels", None)
    assert langid.labels() == loaded
    assert len(loaded) == 140 and loaded.count("sr") == 1
