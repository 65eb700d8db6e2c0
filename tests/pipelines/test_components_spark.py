"""Large-star / small-star connected components on Spark, checked against union-find."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from corpusclean.pipelines.components import (
    ComponentsNotConvergedError,
    spark_connected_components,
    union_find_components,
)

pytestmark = pytest.mark.spark


def edges_frame(spark: SparkSession, src: np.ndarray, dst: np.ndarray) -> DataFrame:
    pdf = pd.DataFrame({"src": src.astype(np.int64), "dst": dst.astype(np.int64)})
    return spark.createDataFrame(pdf, "src long, dst long")


def collected(df: DataFrame) -> dict:
    return {r["node"]: r["component"] for r in df.collect()}


def expected(src: np.ndarray, dst: np.ndarray) -> dict:
    nodes, labels = union_find_components(src, dst)
    return dict(zip(nodes.tolist(), labels.tolist(), strict=True))


@pytest.fixture
def sql_conf(spark: SparkSession) -> Iterator[callable]:
    """Set SQL confs for one test and restore them afterwards."""
    saved: dict[str, str | None] = {}

    def set_(key: str, value: str) -> None:
        saved.setdefault(key, spark.conf.get(key, None))
        spark.conf.set(key, value)

    yield set_
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def test_known_graphs_in_one_frame(spark: SparkSession) -> None:
    """A shuffled chain of 1k, a 100k-leaf star whose hub is its largest node, two small
    components, a cycle, self-loops (one isolated) and duplicate edges, side by side."""
    rng = np.random.default_rng(0)
    chain = rng.permutation(1000) + 1_000_000
    leaves = np.arange(2_000_000, 2_100_000)
    parts = [
        (chain[1:], chain[:-1]),
        (leaves, np.full(leaves.size, 3_000_000)),
        (np.array([10, 11, 20]), np.array([11, 12, 21])),
        (np.array([30, 31, 32, 33]), np.array([31, 32, 33, 30])),
        (np.array([40, 41, 41, 50]), np.array([40, 42, 42, 50])),
        (np.array([12, 11]), np.array([11, 10])),
    ]
    src = np.concatenate([p[0] for p in parts])
    dst = np.concatenate([p[1] for p in parts])
    got = collected(spark_connected_components(edges_frame(spark, src, dst)))
    assert got == expected(src, dst)
    assert got[3_000_000] == 2_000_000 and got[int(chain.max())] == 1_000_000
    assert got[50] == 50 and got[40] == 40 and got[42] == 41 and got[33] == 30


def test_string_nodes_and_custom_columns(spark: SparkSession) -> None:
    rows = [("b", "a"), ("c", "b"), ("x", "y"), ("y", "z"), ("q", "q"), (None, "a")]
    df = spark.createDataFrame(rows, "left string, right string")
    got = collected(spark_connected_components(df, src="left", dst="right"))
    assert got == {"a": "a", "b": "a", "c": "a", "x": "x", "y": "x", "z": "x", "q": "q"}


def test_random_graph_same_result_for_any_partitioning(spark: SparkSession, sql_conf) -> None:
    rng = np.random.default_rng(4)
    src = rng.integers(0, 3000, 2500)
    dst = rng.integers(0, 3000, 2500)
    want = expected(src, dst)
    sql_conf("spark.sql.adaptive.enabled", "true")
    results = []
    for partitions in ("3", "7"):
        sql_conf("spark.sql.shuffle.partitions", partitions)
        frame = spark_connected_components(edges_frame(spark, src, dst).repartition(5))
        results.append(sorted(map(tuple, frame.collect())))
    assert results[0] == results[1]
    assert dict(results[0]) == want


def test_empty_edges_and_non_convergence(spark: SparkSession) -> None:
    empty = spark.createDataFrame([], "src long, dst long")
    assert spark_connected_components(empty).count() == 0
    chain = edges_frame(spark, np.arange(1, 64), np.arange(0, 63))
    with pytest.raises(ComponentsNotConvergedError, match="did not converge in 1 "):
        spark_connected_components(chain, max_iterations=1)
    # A graph that is already a star forest needs no round at all.
    star = edges_frame(spark, np.array([5, 6, 9]), np.array([1, 1, 2]))
    out = spark_connected_components(star, max_iterations=1)
    assert collected(out.withColumn("component", F.col("component"))) == {
        1: 1,
        5: 1,
        6: 1,
        2: 2,
        9: 2,
    }
