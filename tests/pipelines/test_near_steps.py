"""Near-dedup steps on tiny frames: star edges, endpoint selection, Jaccard estimates."""

from __future__ import annotations

import numpy as np
import pyspark.sql.functions as F
import pytest
from pyspark.sql import SparkSession

from corpusclean.pipelines.near_dedup import (
    build_star_edges,
    estimate_edge_jaccard,
    select_edge_nodes,
)

pytestmark = pytest.mark.spark


def _band_rows(spark: SparkSession, rows: list[tuple[int, int, int]]):
    return spark.createDataFrame(rows, "band int, key long, _rid long")


def _pairs(df) -> set[tuple[int, int]]:
    return {(r["src"], r["dst"]) for r in df.collect()}


def test_star_edges_link_each_bucket_to_its_smallest_member(spark) -> None:
    rows = [
        # band 0: bucket 7 holds 5, 3, 9 -> edges 5-3 and 9-3; bucket 8 holds only 4.
        (0, 7, 5),
        (0, 7, 3),
        (0, 7, 9),
        (0, 8, 4),
        # band 1: the same key 7 is another bucket; 5 and 9 share it, so 9-5.
        (1, 7, 5),
        (1, 7, 9),
        # band 2: 5-3 again (deduplicated) and a bucket of one.
        (2, 1, 3),
        (2, 1, 5),
        (2, 2, 9),
    ]
    assert _pairs(build_star_edges(_band_rows(spark, rows))) == {(5, 3), (9, 3), (9, 5)}


def test_a_100k_member_bucket_gives_k_minus_1_edges_and_max_bucket_skips_it(spark) -> None:
    big = spark.range(100_000).select(
        F.lit(0).alias("band"),
        F.lit(42).cast("long").alias("key"),
        (F.col("id") + 100).alias("_rid"),
    )
    rows = big.unionByName(_band_rows(spark, [(1, 5, 1), (1, 5, 2)]))
    edges = build_star_edges(rows)
    hubs = edges.groupBy("dst").count().collect()
    assert sorted((r["dst"], r["count"]) for r in hubs) == [(1, 1), (100, 99_999)]
    assert _pairs(build_star_edges(rows, max_bucket=10)) == {(2, 1)}


def test_star_edges_do_not_depend_on_partitioning(spark) -> None:
    rng = np.random.default_rng(3)
    rows = [(int(b), int(k), int(r)) for b, k, r in rng.integers(0, 40, size=(3000, 3))]
    df = _band_rows(spark, rows)
    assert _pairs(build_star_edges(df.repartition(1))) == _pairs(
        build_star_edges(df.repartition(7))
    )


def test_edge_nodes_and_estimates(spark) -> None:
    sig = {
        1: np.arange(8, dtype="<u4"),
        2: np.array([0, 1, 2, 3, 9, 9, 9, 9], dtype="<u4"),
        3: np.full(8, 5, dtype="<u4"),
    }
    docs = spark.createDataFrame(
        [(rid, bytearray(s.tobytes())) for rid, s in sig.items()] + [(4, bytearray(8 * 4))],
        "_rid long, _minhash binary",
    )
    edges = spark.createDataFrame([(2, 1), (3, 1)], "src long, dst long")
    nodes = select_edge_nodes(edges, docs)
    assert sorted(r["_rid"] for r in nodes.collect()) == [1, 2, 3]
    est = {
        (r["src"], r["dst"]): r["jaccard"] for r in estimate_edge_jaccard(edges, nodes).collect()
    }
    assert est == {(2, 1): 0.5, (3, 1): 0.125}
