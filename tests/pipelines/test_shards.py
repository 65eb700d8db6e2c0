"""Shard steps on a local SparkSession: payloads, the shuffle order, units and task keys."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from corpusclean.pipelines import shards as S

pytestmark = pytest.mark.spark

COLUMNS = ["doc_id", "text", "url", "timestamp", "quality"]


@pytest.fixture(scope="module")
def docs(spark: SparkSession) -> DataFrame:
    rows = [
        ("a.b/c", "héllo " * 100, "http://e/1", dt.datetime(2024, 1, 2, 3, 4, 5, 123456), 0.5),
        ("文档", "文" * 171, None, None, None),
        ("doc-3", "x", "http://e/3", dt.datetime(2020, 5, 6), 1.0),
        ("doc-4", "", "u", dt.datetime(2021, 1, 1), 0.25),
    ]
    schema = "doc_id string, text string, url string, timestamp timestamp, quality double"
    return spark.createDataFrame(rows, schema)


def test_text_payload_is_the_utf8_text(docs: DataFrame) -> None:
    for row in S.add_shard_payload(docs, COLUMNS, "text", 1).collect():
        assert bytes(row["_txt"]) == row["text"].encode("utf-8")


def test_metadata_json_has_every_other_column(docs: DataFrame) -> None:
    out = {r["doc_id"]: r for r in S.add_shard_payload(docs, COLUMNS, "text", 1).collect()}
    meta = json.loads(bytes(out["a.b/c"]["_json"]))
    assert meta == {
        "doc_id": "a.b/c",
        "url": "http://e/1",
        "timestamp": "2024-01-02T03:04:05.123456Z",
        "quality": 0.5,
    }
    # null fields are kept, so every sample has the same keys
    assert json.loads(bytes(out["文档"]["_json"])) == {
        "doc_id": "文档",
        "url": None,
        "timestamp": None,
        "quality": None,
    }


def test_jsonl_lines_carry_the_text(docs: DataFrame) -> None:
    out = S.add_shard_payload(docs, COLUMNS, "text", 8).collect()
    for row in out:
        line = bytes(row["_line"])
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line)["text"] == row["text"]


def test_shuffle_order_is_seeded(docs: DataFrame) -> None:
    a = {r["doc_id"]: r["_h"] for r in S.add_shuffle_order(docs, "doc_id", 1).collect()}
    b = {r["doc_id"]: r["_h"] for r in S.add_shuffle_order(docs, "doc_id", 2).collect()}
    assert a != b and len(set(a.values())) == len(a)


def test_units_are_equal_ranges_of_the_unsigned_hash(spark: SparkSession) -> None:
    hashes = [-(2**63), -1, 0, 1, 2**62, 2**63 - 1, -(2**62)]
    df = spark.createDataFrame(pa.table({"_h": pa.array(hashes, pa.int64())}))
    got = {r["_h"]: r["_unit"] for r in S.add_unit(df, 7).collect()}
    assert got == {h: ((h % 2**64) >> 32) * 7 >> 32 for h in hashes}
    assert all(0 <= u < 7 for u in got.values())
    # unit order is unsigned hash order
    ordered = sorted(hashes, key=lambda h: h % 2**64)
    assert [got[h] for h in ordered] == sorted(got.values())


def test_numpy_hash_matches_spark(spark: SparkSession) -> None:
    values = np.array([-(2**31), -7, 0, 1, 12345, 2**31 - 1], dtype=np.int32)
    df = spark.createDataFrame(pa.table({"v": pa.array(values, pa.int32())}))
    got = [r[0] for r in df.select(F.hash("v")).collect()]
    assert got == S.spark_hash_int(values).tolist()


def test_partition_keys_give_each_task_its_own_partition(spark: SparkSession) -> None:
    n = 9
    keys = S.partition_keys(n)
    table = pa.table({"group": pa.array(range(n), pa.int64()), "_pkey": pa.array(keys, pa.int32())})
    df = spark.createDataFrame(table).repartition(n, "_pkey")
    placed = {
        r["group"]: r["p"] for r in df.select("group", F.spark_partition_id().alias("p")).collect()
    }
    assert placed == {g: g for g in range(n)}
