"""The write's one aggregation: reasons, and per lang/length bucket by stage (grouping sets)."""

from __future__ import annotations

import pyspark.sql.functions as F
import pytest

from corpusclean.pipelines.profile import LENGTH_EDGES, length_bucket, outcome_counts

pytestmark = pytest.mark.spark


def test_length_buckets_at_their_edges(spark) -> None:
    lengths = [None, 0, 1, 2, 3, 4, 1023, 1024, 1 << 24, 1 << 30]
    df = spark.createDataFrame([(n,) for n in lengths], "n long")
    got = [r[0] for r in df.select(length_bucket(F.col("n"))).collect()]
    last = len(LENGTH_EDGES) - 1
    assert got == [None, 0, 1, 2, 2, 3, 10, 11, last, last]
    for n, b in zip(lengths[2:8], got[2:8], strict=True):
        assert LENGTH_EDGES[b] <= n < LENGTH_EDGES[b + 1]


def test_a_null_value_is_a_value_not_the_grouped_out_marker(spark) -> None:
    rows = [
        ("en", None, None),
        ("en", None, "exact"),
        (None, None, None),
        (None, "too_short", "rules"),
        ("zh", "too_short", "rules"),
    ]
    df = spark.createDataFrame(rows, "lang string, _reason string, _stage string")
    got = sorted(
        (r["set"], r["value"] or "-", r["stage"] or "-", r["rows"])
        for r in outcome_counts(df, "_reason", "_stage", ["lang"]).collect()
    )
    assert got == [
        ("_reason", "-", "-", 3),  # rows with no reason: kept or removed by a dedup stage
        ("_reason", "too_short", "-", 2),
        ("lang", "-", "-", 1),  # the null lang, kept
        ("lang", "-", "rules", 1),
        ("lang", "en", "-", 1),
        ("lang", "en", "exact", 1),
        ("lang", "zh", "rules", 1),
    ]
