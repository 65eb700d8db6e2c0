"""Opening dedup indexes (`clean --against`): found, readable, comparable; no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpusclean.errors import InputError
from corpusclean.jobs.outputs.dedup_index import (
    CONTENT_HASH_VERSION,
    FORMAT,
    MINHASH_KERNEL_VERSION,
    PARAMS,
    locate,
    minhash_params,
    mismatch,
    read_params,
)
from corpusclean.pipelines.minhash import MinHashParams

RUN = MinHashParams(
    num_perm=128, seed=42, tokenizer="auto", ngram=5, char_ngram=5, bands=16, rows=8
)


def _params(**minhash: object) -> dict[str, object]:
    return {
        "format": FORMAT,
        "format_version": 1,
        "content_hash": {"version": CONTENT_HASH_VERSION},
        "minhash": {**minhash_params(RUN), **minhash},
    }


def test_matching_parameters_pass() -> None:
    assert mismatch(_params(), RUN) is None
    assert mismatch({**_params(), "minhash": None}, None) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_perm", 64),
        ("seed", 1),
        ("tokenizer", "word"),
        ("ngram", 3),
        ("char_ngram", 4),
        ("bands", 9),
        ("rows", 13),
    ],
)
def test_each_differing_minhash_parameter_is_named(key: str, value: object) -> None:
    why = mismatch(_params(**{key: value}), RUN)
    assert why is not None
    assert f"near_dedup.{key}" in why and repr(value) in why
    assert f"--set near_dedup.{key}={value}" in why


def test_kernel_content_hash_and_missing_signatures_are_named() -> None:
    why = mismatch(_params(kernel_version=MINHASH_KERNEL_VERSION + 1), RUN)
    assert why is not None and "kernel" in why
    old = {**_params(), "content_hash": {"version": CONTENT_HASH_VERSION + 1}}
    why = mismatch(old, None)
    assert why is not None and "content hash" in why
    why = mismatch({**_params(), "minhash": None}, RUN)
    assert why is not None and "no MinHash signatures" in why


def test_locate_takes_an_output_or_an_index_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "index").mkdir(parents=True)
    (out / "index" / PARAMS).write_text("{}")
    assert locate(str(out)) == out / "index"
    assert locate(str(out / "index")) == out / "index"
    with pytest.raises(InputError, match="no such folder"):
        locate(str(tmp_path / "missing"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="no dedup index there"):
        locate(str(tmp_path / "plain"))
    with pytest.raises(InputError, match="POSIX"):
        locate("s3a://bucket/out")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{oops", "not valid JSON"),
        (json.dumps({"format": "other"}), "not a corpusclean dedup index"),
        (json.dumps([1]), "not a corpusclean dedup index"),
        (json.dumps({"format": FORMAT, "format_version": 99}), "newer|upgrade"),
    ],
)
def test_unreadable_params_are_one_line_errors(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / PARAMS).write_text(text)
    with pytest.raises(InputError, match=words) as info:
        read_params("X", tmp_path)
    assert "\n" not in str(info.value)
