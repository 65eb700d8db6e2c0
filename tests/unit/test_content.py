"""Text normalisation and the content hash exact dedup relies on."""

from __future__ import annotations

import pyarrow as pa

from corpusclean.pipelines.content import content_hashes, normalise_text


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
