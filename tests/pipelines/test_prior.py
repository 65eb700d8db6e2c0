"""Matches against a prior index on tiny frames: lookups and the doc_id/hash matches."""

from __future__ import annotations

import re

import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from corpusclean.pipelines.columns import AGAINST, STAGE
from corpusclean.pipelines.prior import PUSHED_KEYS, PriorIndex, lookup, mark_prior_matches

pytestmark = pytest.mark.spark


def _prior(spark: SparkSession, name: str, order: int, docs: list[tuple[int, str, int]]):
    frame = spark.createDataFrame(docs, "ix long, doc_id string, hash long").withColumn(
        "sig", F.lit(None).cast("binary")
    )
    bands = spark.createDataFrame([], "band int, key long, ix long")
    return PriorIndex(name, order, frame, bands)


def _batch(spark: SparkSession) -> DataFrame:
    rows = [
        ("a", 10, None),  # its hash is in both indexes: the first named wins
        ("b", 20, None),  # in the second index only
        ("c", 30, "rules"),  # matches, but an earlier stage removed it: left alone
        ("d", 40, None),  # matches nothing
        ("e", None, None),  # no key
        ("f", 20, None),  # the same key as b
    ]
    return spark.createDataFrame(rows, f"doc_id string, h long, {STAGE} string")


def _marked(df: DataFrame) -> list[tuple]:
    cols = ["doc_id", STAGE, AGAINST, "_exact_cluster"]
    return sorted(tuple(r) for r in df.select(*cols).collect())


@pytest.mark.parametrize("batch_rows", [None, 6, 10**9])
def test_matches_are_the_same_whether_the_batch_is_broadcast_or_not(spark, batch_rows) -> None:
    priors = [
        _prior(spark, "one", 0, [(0, "p1", 10), (1, "p3", 30)]),
        _prior(spark, "two", 1, [(0, "q1", 10), (1, "q2", 20), (2, "q0", 20)]),
    ]
    out = mark_prior_matches(
        _batch(spark), priors, "h", "hash", "exact", "_exact_cluster", batch_rows
    )
    assert _marked(out) == [
        ("a", "exact", "one", "p1"),
        ("b", "exact", "two", "q0"),  # the smallest doc_id of the index for a repeated hash
        ("c", "rules", None, None),
        ("d", None, None, None),
        ("e", None, None, None),
        ("f", "exact", "two", "q0"),
    ]


@pytest.mark.parametrize(("batch_rows", "broadcast"), [(6, True), (None, False)])
def test_a_small_batch_is_broadcast_to_the_index_scan(spark, batch_rows, broadcast) -> None:
    """The index's column is read once and never shuffled: both joins are broadcast. (Spark's
    own broadcast of small frames is off here: a real batch's distinct keys have no size
    estimate, so Spark would shuffle the index.)"""
    priors = [_prior(spark, "one", 0, [(0, "p1", 10)])]
    key = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(key)
    spark.conf.set(key, "-1")
    try:
        out = mark_prior_matches(_batch(spark), priors, "h", "hash", "exact", None, batch_rows)
        plan = out._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set(key, before)
    assert ("SortMergeJoin" not in plan) is broadcast, plan
    semi = re.search(r"BroadcastHashJoin \[.*\], LeftSemi, BuildRight", plan)
    assert (semi is not None) is broadcast, plan


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        ("long", list(range(0, 3 * (PUSHED_KEYS + 50), 3))),
        ("string", [f"doc-{i:05d}" for i in range(0, 3 * (PUSHED_KEYS + 50), 3)]),
        ("long", [3, 9, 12]),
        ("int", list(range(1, 2 * PUSHED_KEYS + 100, 2))),
    ],
)
def test_lookup_returns_the_rows_of_its_keys(spark, dtype: str, values: list) -> None:
    """Few keys: a pushed-down `IN`; more than PUSHED_KEYS: a broadcast semi-join."""
    n = 3 * (PUSHED_KEYS + 100)
    ids = [f"doc-{i:05d}" for i in range(n)] if dtype == "string" else list(range(n))
    df = spark.createDataFrame([(k, i) for i, k in enumerate(ids)], f"k {dtype}, v long")
    got = sorted(r["k"] for r in lookup(spark, df, "k", values).collect())
    assert got == sorted(values)


def test_prior_nodes_are_negative_and_distinct_per_index(spark) -> None:
    """A prior document's node in near-dedup's graph never meets a batch row's id (a row id,
    never negative) nor a node of another index."""
    ixs = spark.createDataFrame([(0,), (1,), (2**40,)], "ix long")
    order = range(3)
    nodes = ixs.select(*[_prior(spark, f"p{o}", o, []).node(F.col("ix")) for o in order])
    found = {n for row in nodes.collect() for n in row}
    assert len(found) == 9 and max(found) < 0
