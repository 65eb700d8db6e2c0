"""jobs/inputs/ without Spark: paths, footers, checksums, line numbers, the raw-docs contract."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import LongType, StringType

from corpusclean.errors import InputError
from corpusclean.jobs.inputs.files import (
    explain_read_error,
    hadoop_escape,
    line_numbers,
    local_path,
    plan_input,
)
from corpusclean.jobs.inputs.paths import local_files
from corpusclean.jobs.inputs.read import check_roles
from corpusclean.pipelines.columns import CLEAN_RESERVED, PACK_RESERVED, quoted


def test_hadoop_escape_and_local_path() -> None:
    assert hadoop_escape("/d/run[1]/a{b}*?.parquet") == r"/d/run\[1\]/a\{b\}\*\?.parquet"
    assert local_path("file:///tmp/a%20b/x.jsonl") == "/tmp/a b/x.jsonl"
    assert local_path("hdfs://nn/x") == "hdfs://nn/x"
    assert quoted("meta.source") == "`meta.source`" and quoted("a`b") == "`a``b`"
    assert "_rid" in CLEAN_RESERVED and "_h" not in PACK_RESERVED


def test_existing_path_with_bracket_is_literal(tmp_path: Path) -> None:
    folder = tmp_path / "run[1]"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1]}), folder / "x.parquet")
    assert local_files(str(folder)) == [folder / "x.parquet"]
    with pytest.raises(InputError, match="matches no files"):
        local_files(str(tmp_path / "nothing*" / "*.parquet"))


def test_plan_merges_missing_columns_and_ignores_non_parquet(tmp_path: Path) -> None:
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["t"]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"doc_id": ["b"], "text": ["u"], "url": ["x"]}), tmp_path / "b.parquet")
    (tmp_path / "README.txt").write_text("notes")
    plan = plan_input(str(tmp_path), "parquet")
    assert plan.options["mergeSchema"] == "true"
    assert plan.rows == 2 and plan.schema.names == ["doc_id", "text", "url"]
    assert [Path(p).name for p in plan.paths] == ["a.parquet", "b.parquet"]


def test_stale_crc_is_found_from_its_size(tmp_path: Path) -> None:
    data = tmp_path / "a.parquet"
    pq.write_table(pa.table({"a": list(range(100))}), data)
    chunks = -(-data.stat().st_size // 512)
    crc = tmp_path / ".a.parquet.crc"
    crc.write_bytes(b"crc\x00" + (512).to_bytes(4, "big") + b"\x00" * 4 * chunks)
    plan_input(str(tmp_path), "parquet")  # a crc of the right size passes
    crc.write_bytes(b"crc\x00" + (512).to_bytes(4, "big") + b"\x00" * 4 * (chunks + 1))
    with pytest.raises(InputError, match=r"checksum file \.a\.parquet\.crc"):
        plan_input(str(tmp_path), "parquet")


def test_line_numbers_match_hadoop_line_splitting(tmp_path: Path) -> None:
    lines = [b'{"a": 1}', b'{"a": \xff}', b'{"a": 3}', b'{"a": \xff}']
    plain = tmp_path / "x.jsonl"
    plain.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\n")
    packed = tmp_path / "x.jsonl.gz"
    packed.write_bytes(gzip.compress(b"\n".join(lines)))
    wanted = {hashlib.md5(lines[1]).hexdigest(), hashlib.md5(lines[0]).hexdigest()}
    for path in (plain, packed):
        assert [n for n, _ in line_numbers(str(path), wanted)] == [1, 2, 4]


def test_spark_read_errors_become_one_line() -> None:
    text = (
        "An error occurred while calling o67.json.\n: org.apache.spark.SparkException: "
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///data/in/b.jsonl.gz.  SQLSTATE: KD001\n\tat org.apache...\n"
        "Caused by: java.io.EOFException: Unexpected end of input stream\n"
    )
    err = explain_read_error(RuntimeError(text))
    assert err is not None and str(err).startswith("input file /data/in/b.jsonl.gz cannot be read")
    assert "truncated" in str(err) and "\n" not in str(err)
    assert explain_read_error(RuntimeError("something else")) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"doc_id": pa.string(), "text": pa.large_string(), "n": pa.int64()},
        {"doc_id": StringType(), "text": StringType("UTF8_LCASE"), "n": LongType()},
    ],
    ids=["footer", "spark"],
)
def test_the_id_and_text_columns_must_be_strings(fields: dict[str, object]) -> None:
    check_roles("in", fields, "doc_id", "text")
    with pytest.raises(InputError, match=r"no column 'body' .*; set columns.text=NAME"):
        check_roles("in", fields, "doc_id", "body")
    with pytest.raises(InputError, match=r"column 'n' \(columns.id\) must be a string, found"):
        check_roles("in", fields, "n", "text")
