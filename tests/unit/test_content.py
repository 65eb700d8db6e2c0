"""Text normalisation and the content hash exact dedup relies on."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StringType, StructField, StructType

from corpusclean.pipelines.columns import BAD_CHARS, NORM_HASH, REASON, REFUSED_TEXT, STAGE
from corpusclean.pipelines.content import (
    ReadPass,
    collapse_whitespace,
    content_hashes,
    normalise_text,
)


def test_normalisation() -> None:
    out = normalise_text(
        pa.array(["  Hello\t\tWORLD \n", "ＡＢＣ，１２３", "Straße", None, ""])
    ).to_pylist()
    assert out == ["hello world", "abc,123", "strasse", None, ""]


def test_hash_equal_for_variants_and_distinct_otherwise() -> None:
    hashes = content_hashes(
        pa.array(["The cat sat.", "the  CAT\nsat.", "The cat sat!", None])
    ).to_pylist()
    assert hashes[0] == hashes[1]
    assert hashes[0] != hashes[2]
    assert hashes[3] is None
    assert len(hashes[0]) == 16


def test_hash_is_blake2b_of_the_normalised_utf8_on_slices_and_nulls() -> None:
    """The digest is pinned: BLAKE2b-128 of the normalised text's UTF-8 bytes (exact dedup's
    clusters and near dedup's survivor order depend on it)."""
    import hashlib

    arr = pa.array(["x", "Straße  Ｘ", None, "", "日本語\tテキスト", "a" * 5000, None, "é"])
    for part in (arr, arr.slice(1), arr.slice(2, 4), arr.slice(7)):
        want = [
            None if t is None else hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest()
            for t in normalise_text(part).to_pylist()
        ]
        assert content_hashes(part).to_pylist() == want


def _re2_collapse(texts: pa.Array) -> list[str | None]:
    return pc.replace_substring_regex(texts, r"\s+", " ").to_pylist()


def test_collapse_whitespace_matches_re2_on_random_strings() -> None:
    rng = random.Random(7)
    alphabet = " \t\n\r\x0b\x0cab\u00dfé日"
    for _ in range(400):
        values = [
            None
            if rng.random() < 0.1
            else "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14)))
            for _ in range(rng.randrange(0, 10))
        ]
        for typ in (pa.string(), pa.large_string()):
            arr = pa.array(values, typ)
            out = collapse_whitespace(arr)
            assert out.type == typ
            assert out.to_pylist() == _re2_collapse(arr), values


def test_collapse_whitespace_on_slices_keeps_string_boundaries() -> None:
    arr = pa.array(["a ", " b", "\t\t", None, "", "c\n\nd", "  "])
    for i in range(len(arr)):
        for j in range(i, len(arr) + 1):
            part = arr.slice(i, j - i)
            assert collapse_whitespace(part).to_pylist() == _re2_collapse(part)


def test_read_pass_counts_bad_characters_of_live_rows_only() -> None:
    texts = [
        "ok text",
        "bad \ufffd\x00 text\x7f",
        "tab\tnewline\ncr\r ok",
        "\x9f",
        None,
        "gone \ufffd",
    ]
    batch = pa.RecordBatch.from_pydict(
        {
            "text": pa.array(texts, pa.string()),
            REASON: pa.array([None, None, None, None, None, "too_short"], pa.string()),
            STAGE: pa.array([None, None, None, None, None, "rules"], pa.string()),
        }
    )
    out = ReadPass("text", bad_chars=True).batch(batch)
    assert out.column(BAD_CHARS).to_pylist() == [0, 3, 0, 1, None, None]
    assert ReadPass("text").schema(StructType([StructField("text", StringType())])).names == [
        NORM_HASH
    ]
    assert BAD_CHARS not in ReadPass("text").batch(batch).schema.names


def test_refused_rows_keep_their_text_in_the_columns_order_the_schema_gives() -> None:
    """Spark reads a pass's columns by position: the batch's names must be the schema's."""
    from corpusclean.jobs.runtime.config import load_clean_config

    texts = ["fine text here", "tiny", None, "another kept one", "refused by a scorer " * 3]
    batch = pa.RecordBatch.from_pydict(
        {
            "id": pa.array(["a", "b", "c", "d", "e"], pa.string()),
            "text": pa.array(texts, pa.string()),
            REASON: pa.array([None, "too_short", "null_text", None, None], pa.string()),
            STAGE: pa.array([None, "rules", "input", None, None], pa.string()),
        }
    )
    schema = StructType([StructField(n, StringType()) for n in batch.schema.names])
    pipe = load_clean_config("fineweb", ["lang.languages=[]"]).pipeline()
    for spec in (
        ReadPass("text", refused_text=True, bad_chars=True),
        ReadPass("text", tuple(pipe.scorers()), tuple(pipe.text_features()), True, True),
    ):
        out = spec.batch(batch)
        assert out.schema.names == spec.schema(schema).names
        got = out.column(REFUSED_TEXT).to_pylist()
        reasons = out.column(REASON).to_pylist()
        assert got == [t if r is not None else None for t, r in zip(texts, reasons, strict=True)]
        assert got[1] == "tiny"
    assert REFUSED_TEXT not in ReadPass("text").schema(schema).names


def test_scorers_see_a_large_batch_in_slices_with_the_same_result(monkeypatch) -> None:
    """The scorers take a batch a slice of text at a time; scores, reasons and the rows a
    later scorer leaves unscored (rejected by an earlier one) come out as from one piece."""
    from corpusclean.jobs.runtime.config import load_clean_config
    from corpusclean.pipelines import content

    rng = random.Random(7)
    words = ["the", "river", "and", "of", "mill", "ran", "with", "a", "#tag", "{x}"]
    texts = [
        "\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) + "."
            for _ in range(rng.randint(1, 30))
        )
        for _ in range(300)
    ]
    texts[5] = None  # a null text, rejected by the rules before the pass
    n = len(texts)
    reason = [None] * n
    reason[5] = "null_text"
    batch = pa.RecordBatch.from_pydict(
        {
            "text": pa.array(texts, pa.string()),
            REASON: pa.array(reason, pa.string()),
            STAGE: pa.array([None if r is None else "rules" for r in reason], pa.string()),
        }
    )
    cfg = load_clean_config("fineweb", ["lang.languages=[]"])
    pipe = cfg.pipeline()
    spec = ReadPass("text", tuple(pipe.scorers()))
    whole = spec.batch(batch)
    monkeypatch.setattr(content, "SCORE_SLICE_BYTES", 500)
    assert len(content._slices(batch, "text", 500)) > 10
    sliced = spec.batch(batch)
    assert sliced.to_pydict() == whole.to_pydict()
    # Some rows were rejected by one scorer and left unscored by the next.
    rejected = [r for r in whole.column(REASON).to_pylist() if r not in (None, "null_text")]
    assert rejected


def test_survivors_taken_out_keep_their_decoding_and_score_as_decoded_afresh(monkeypatch) -> None:
    """Once a quarter of a slice is rejected, the survivors are copied out for the scorers
    left with their decoded text carried along (`heuristics.carry`): the batch is decoded once,
    and every score and reason is what decoding the survivors afresh gives."""
    from corpusclean.jobs.runtime.config import load_clean_config
    from corpusclean.pipelines import heuristics

    rng = random.Random(3)
    words = ["the", "river", "and", "of", "mill", "ran", "with", "a", "naïve", "水"]
    texts: list[str | None] = []
    for i in range(400):
        lines = [
            " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + "."
            for _ in range(rng.randint(1, 12))
        ]
        if i % 3 == 0:  # repeated lines: the repetition filter rejects a third of the rows
            lines = lines[:1] * 6
        texts.append("\n".join(lines))
    batch = pa.RecordBatch.from_pydict(
        {
            "text": pa.array(texts, pa.string()),
            REASON: pa.nulls(len(texts), pa.string()),
            STAGE: pa.nulls(len(texts), pa.string()),
        }
    )
    cfg = load_clean_config("fineweb", ["lang.languages=[]"])
    spec = ReadPass("text", tuple(cfg.pipeline().scorers()))
    decodes = []
    real_decode = heuristics._decode
    monkeypatch.setattr(heuristics, "_decode", lambda *a: decodes.append(1) or real_decode(*a))
    heuristics.forget()
    carried = spec.batch(batch)
    assert len(decodes) == 1
    reasons = carried.column(REASON).to_pylist()
    assert 0.25 * len(texts) < sum(r is not None for r in reasons) < len(texts)
    monkeypatch.setattr(heuristics, "carry", lambda *a: None)
    afresh = spec.batch(batch)
    assert len(decodes) > 2
    assert carried.to_pydict() == afresh.to_pydict()
