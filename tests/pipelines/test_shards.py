"""Shard steps on a local SparkSession: sizes, order, buckets and the partition keys."""

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


def test_sample_size_is_the_exact_tar_size(docs: DataFrame) -> None:
    out = S.add_shard_payload(docs, COLUMNS, "text", 1, 1_000_000).collect()
    for row in out:
        expected = S.member_bytes(len(row["_txt"])) + S.member_bytes(len(row["_json"]))
        assert row["_size"] == expected == row["_vsize"]
        assert bytes(row["_txt"]) == row["text"].encode("utf-8")


def test_metadata_json_has_every_other_column(docs: DataFrame) -> None:
    out = {r["doc_id"]: r for r in S.add_shard_payload(docs, COLUMNS, "text", 1, 10**6).collect()}
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
    out = S.add_shard_payload(docs, COLUMNS, "text", 8, 10**6).collect()
    for row in out:
        line = bytes(row["_line"])
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line)["text"] == row["text"]
        assert row["_size"] == len(line) + 96  # 768 bytes of member overhead over 8 docs


def test_virtual_size_is_capped_at_half_the_target(docs: DataFrame) -> None:
    out = S.add_shard_payload(docs, COLUMNS, "text", 1, 2048).collect()
    assert max(r["_size"] for r in out) > 1024
    assert max(r["_vsize"] for r in out) == 1024


def test_shuffle_order_is_seeded_and_bucketed(docs: DataFrame) -> None:
    a = {
        r["doc_id"]: (r["_h"], r["_bucket"])
        for r in S.add_shuffle_order(docs, "doc_id", 1).collect()
    }
    b = {r["doc_id"]: r["_h"] for r in S.add_shuffle_order(docs, "doc_id", 2).collect()}
    assert all(0 <= bucket < 2**S.BUCKET_BITS for _, bucket in a.values())
    assert all((h & 0xFFFFFFFFFFFFFFFF) >> 48 == bucket for h, bucket in a.values())
    assert {k: v[0] for k, v in a.items()} != b


def test_buckets_are_summed(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [(1, 10, 12), (1, 5, 5), (0, 3, 3)], "_bucket long, _vsize long, _size long"
    )
    table = S.sort_buckets(S.summarize_buckets(df, ["_bucket"]).toArrow(), ["_bucket"])
    assert table.to_pylist() == [
        {"_bucket": 0, "docs": 1, "vbytes": 3, "bytes": 3},
        {"_bucket": 1, "docs": 2, "vbytes": 15, "bytes": 17},
    ]


def test_numpy_hash_matches_spark(spark: SparkSession) -> None:
    values = np.array([-(2**31), -7, 0, 1, 12345, 2**31 - 1], dtype=np.int32)
    df = spark.createDataFrame(pa.table({"v": pa.array(values, pa.int32())}))
    got = [r[0] for r in df.select(F.hash("v")).collect()]
    assert got == S.spark_hash_int(values).tolist()


def test_partition_keys_give_each_group_its_own_task(spark: SparkSession) -> None:
    n = 9
    keys = S.partition_keys(n)
    table = pa.table({"group": pa.array(range(n), pa.int64()), "_pkey": pa.array(keys, pa.int32())})
    df = spark.createDataFrame(table).repartition(n, "_pkey")
    placed = {
        r["group"]: r["p"] for r in df.select("group", F.spark_partition_id().alias("p")).collect()
    }
    assert placed == {g: g for g in range(n)}
