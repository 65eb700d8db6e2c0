"""The clean job's steps on tiny DataFrames."""

from __future__ import annotations

import datetime as dt

import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, Row
from pyspark.testing import assertDataFrameEqual

from corpusclean.pipelines.base import Roles
from corpusclean.pipelines.dedup import (
    DedupParams,
    DocIdDedup,
    ExactDedup,
    build_duplicates_table,
    mark_doc_id_duplicates,
    mark_exact_duplicates,
    survivor_order,
)
from corpusclean.pipelines.missing import (
    impute_with_medians,
    missing_value_aggregates,
    summarise_missing,
)
from corpusclean.pipelines.rules import RowRules, RulesParams

pytestmark = pytest.mark.spark


def test_row_rules_mark_the_first_reason(spark) -> None:
    df = spark.createDataFrame(
        [
            ("a", "x" * 20, 1.0),
            (None, "x" * 20, 1.0),
            ("  ", "x" * 20, 1.0),
            ("b", None, 1.0),
            ("c", " \t ", 1.0),
            ("d", "x" * 4, 1.0),
            ("e", "x" * 40, 1.0),
            ("f", "x" * 20, None),
        ],
        "doc_id string, text string, q double",
    )
    rules = RowRules(RulesParams(min_chars=10, max_chars=30), Roles(required=("q",)))
    out = df.withColumn("_reject_reason", rules.reason())
    reasons = [r["_reject_reason"] for r in out.orderBy(F.col("text").desc()).collect()]
    got = {r["doc_id"]: r["_reject_reason"] for r in out.collect()}
    assert got["a"] is None
    assert got["b"] == "null_text"
    assert got["c"] == "blank_text"
    assert got["d"] == "too_short"
    assert got["e"] == "too_long"
    assert got["f"] == "null_q"
    assert sorted(r for r in reasons if r in ("null_id", "blank_id")) == ["blank_id", "null_id"]


def start_stages(df: DataFrame) -> DataFrame:
    """`_stage` as the job's read pass leaves it: `rules` on rows with a reject reason."""
    return df.withColumn("_stage", F.when(F.col("_reject_reason").isNotNull(), F.lit("rules")))


def _frame(spark, rows):
    return spark.createDataFrame(
        rows,
        "doc_id string, _text_len int, _norm_hash string, _row_hash long, "
        "timestamp timestamp, score double, _reject_reason string",
    )


T0 = dt.datetime(2020, 1, 1)
T1 = dt.datetime(2024, 1, 1)


@pytest.mark.parametrize(
    ("keep", "survivor_hash"),
    [("longest", "h-long"), ("newest", "h-new"), ("score", "h-score")],
)
def test_doc_id_survivor_follows_the_configured_order(spark, keep, survivor_hash) -> None:
    rows = [
        ("a", 100, "h-long", 1, T0, 0.1, None),
        ("a", 50, "h-new", 2, T1, 0.2, None),
        ("a", 60, "h-score", 3, T0, 0.9, None),
        ("b", 10, "h-b", 4, T0, 0.5, None),
        ("a", 500, "h-rejected", 5, T1, 1.0, "too_long"),
    ]
    out = (
        _frame(spark, rows)
        .transform(start_stages)
        .transform(lambda d: mark_doc_id_duplicates(d, "doc_id", survivor_order(keep, "doc_id")))
    )
    live = out.filter(F.col("_stage").isNull()).collect()
    assert sorted((r["doc_id"], r["_norm_hash"]) for r in live) == [
        ("a", survivor_hash),
        ("b", "h-b"),
    ]
    stages = {r["_norm_hash"]: r["_stage"] for r in out.collect()}
    assert stages["h-rejected"] == "rules", "rejected rows never take part in dedup"
    assert sum(1 for r in out.collect() if r["_docid_group"]) == 3


def test_ties_fall_back_to_hash_then_row_hash(spark) -> None:
    rows = [("a", 10, "h2", 9, T0, 0.0, None), ("a", 10, "h1", 8, T0, 0.0, None)]
    out = (
        _frame(spark, rows)
        .transform(start_stages)
        .transform(
            lambda d: mark_doc_id_duplicates(d, "doc_id", survivor_order("longest", "doc_id"))
        )
    )
    assert out.filter(F.col("_stage").isNull()).first()["_norm_hash"] == "h1"


def test_exact_dedup_and_duplicates_table(spark) -> None:
    rows = [
        ("a", 10, "h1", 1, T0, 0.0, None),
        ("b", 12, "h1", 2, T0, 0.0, None),
        ("c", 11, "h1", 3, T0, 0.0, None),
        ("d", 10, "h2", 4, T0, 0.0, None),
        ("d", 9, "h3", 5, T0, 0.0, None),
    ]
    # The registered stages, as the job builds them: each from its own section.
    stages = [DocIdDedup(DedupParams(), Roles()), ExactDedup(DedupParams(), Roles())]
    out = _frame(spark, rows).transform(start_stages)
    for stage in stages:
        out = out.transform(stage.mark)
    live = sorted(r["doc_id"] for r in out.filter(F.col("_stage").isNull()).collect())
    assert live == ["b", "d"]
    expected = spark.createDataFrame(
        [
            Row(doc_id="d", cluster_id="d", stage="doc_id", kept=True),
            Row(doc_id="d", cluster_id="d", stage="doc_id", kept=False),
            Row(doc_id="a", cluster_id="b", stage="exact", kept=False),
            Row(doc_id="b", cluster_id="b", stage="exact", kept=True),
            Row(doc_id="c", cluster_id="b", stage="exact", kept=False),
        ]
    )
    assertDataFrameEqual(build_duplicates_table(out, stages), expected)
    assert build_duplicates_table(out, []).count() == 0


def test_dedup_is_independent_of_partitioning(spark) -> None:
    rows = [
        (f"id{i % 37}", (i * 7919) % 101, f"h{i % 23}", i, T0, float(i % 5), None)
        for i in range(400)
    ]
    base = _frame(spark, rows)

    def run(parts: int):
        return (
            base.repartition(parts)
            .transform(start_stages)
            .transform(
                lambda d: mark_doc_id_duplicates(d, "doc_id", survivor_order("score", "doc_id"))
            )
            .transform(
                lambda d: mark_exact_duplicates(
                    d, "doc_id", survivor_order("longest", "doc_id", row_hash_col=None)
                )
            )
            .select("_row_hash", "_stage", "_exact_cluster", "_docid_kept")
        )

    assertDataFrameEqual(run(3), run(7))


def _shuffles(df) -> int:
    """Hash exchanges in `df`'s physical plan (AQE's initial plan: one job each when run)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return plan.count("Exchange hashpartitioning")


def test_each_window_stage_shuffles_the_frame_once(spark) -> None:
    """doc_id's rank and group size share one shuffle and sort, and so do exact's rank, size
    and first id: each stage's windows partition on one column, not each on its own copy of
    the "still live" expression (which cost the narrow frame two more shuffles, two jobs)."""
    rows = [(f"id{i % 5}", i % 7, f"h{i % 3}", i, T0, 0.0, None) for i in range(30)]
    base = _frame(spark, rows).transform(start_stages)
    by_id = base.transform(
        lambda d: mark_doc_id_duplicates(d, "doc_id", survivor_order("longest", "doc_id"))
    )
    both = by_id.transform(
        lambda d: mark_exact_duplicates(d, "doc_id", survivor_order("longest", "doc_id"))
    )
    assert _shuffles(by_id) == 1
    assert _shuffles(both) == 2
    assert "__live" not in both.columns


def test_missing_stats_and_median_imputation(spark) -> None:
    df = spark.createDataFrame(
        [("a", 1.0, ""), ("b", None, None), ("c", 3.0, " "), ("d", 5.0, "x")],
        "doc_id string, q double, note string",
    )
    row = df.agg(*missing_value_aggregates(df.schema, ["q"])).first().asDict()
    cols = summarise_missing(row, df.schema, review_threshold=0.3)
    assert cols["q"]["null_rate"] == pytest.approx(0.25)
    assert cols["note"]["null_rate"] == pytest.approx(0.25)
    assert cols["note"]["empty_rate"] == pytest.approx(0.5)
    assert cols["note"]["flagged"] and not cols["doc_id"]["flagged"]
    assert not cols["q"]["flagged"]
    assert row["q__median"] == pytest.approx(3.0)
    filled = impute_with_medians(df, {"q": row["q__median"]})
    assert sorted(r["q"] for r in filled.collect()) == [1.0, 3.0, 3.0, 5.0]
