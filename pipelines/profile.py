"""What a corpus looks like before and after cleaning, from the aggregation the write makes
anyway (its count of rejection reasons, as grouping sets over the narrow decisions frame):
rows per text-length bucket and per value of a breakdown column (`lang`, `source`), each by the
stage that removed them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

# Bucket i holds lengths in [LENGTH_EDGES[i], LENGTH_EDGES[i + 1]): 0, then powers of two up
# to 2^24 characters, the last bucket open-ended. Powers of two keep a short web page and a
# book apart on one axis.
LENGTH_EDGES: tuple[int, ...] = (0, *(1 << k for k in range(25)))
# The columns a breakdown is made by, where the input has them.
BREAKDOWN_COLUMNS = ("lang", "source")
# A column with more distinct values than this is not broken down (a URL-like `source`).
BREAKDOWN_MAX_VALUES = 200


def length_bucket(length: Column) -> Column:
    """The LENGTH_EDGES bucket of a text length (null for a null length)."""
    last = F.lit(len(LENGTH_EDGES) - 1)
    log_bucket = F.least(F.floor(F.log2(length)).cast("int") + F.lit(1), last)
    return (
        F.when(length.isNull(), F.lit(None).cast("int"))
        .when(length <= 0, F.lit(0))
        .otherwise(log_bucket)
    )


def length_histograms(rows: Sequence[Mapping[str, Any]], bucket_set: str) -> dict[str, Any]:
    """`{edges, input, output, removed: {stage: counts}}` from `outcome_counts`' rows of the
    bucket column `bucket_set` (rows without a text are in no bucket)."""
    n = len(LENGTH_EDGES)
    total, kept = [0] * n, [0] * n
    removed: dict[str, list[int]] = {}
    for r in rows:
        if r["set"] != bucket_set or r["value"] is None:
            continue
        i, count = int(r["value"]), int(r["rows"])
        total[i] += count
        if r["stage"] is None:
            kept[i] += count
        else:
            removed.setdefault(r["stage"], [0] * n)[i] += count
    return {"edges": list(LENGTH_EDGES), "input": total, "output": kept, "removed": removed}


def outcome_counts(
    decisions: DataFrame,
    reason: str,
    stage: str,
    by: Sequence[str],
    extra: Sequence[Column] = (),
) -> DataFrame:
    """Rows per rejection reason, and per value of each column of `by` and the stage that
    removed the row (null `stage`: kept), in one aggregation (grouping sets), reasons first.

    Reads `reason`, `stage` and the `by` columns; returns `set` (`reason` or a column of `by`),
    `value`, `stage` and `rows`, and the named `extra` aggregates (computed over each group's
    original rows, in every set: a caller reads them from one set).
    """
    sets: list[list[str]] = [[reason], *[[c, stage] for c in by]]
    cols = list(dict.fromkeys([reason, stage, *by]))
    grouped = decisions.groupingSets(sets, *cols).agg(
        F.count(F.lit(1)).alias("rows"), F.grouping_id().alias("gid"), *extra
    )
    # grouping_id has a bit per column, the first column highest, set where the column is not
    # in the row's grouping set (a real null value stays a value).
    which: Column = F.lit(None).cast("string")
    value: Column = F.lit(None).cast("string")
    for group in sets:
        bits = sum(1 << (len(cols) - 1 - i) for i, c in enumerate(cols) if c not in group)
        hit = F.col("gid") == F.lit(bits)
        which = F.when(hit, F.lit(group[0])).otherwise(which)
        value = F.when(hit, F.col(group[0]).cast("string")).otherwise(value)
    names = [c for c in grouped.columns if c not in (*cols, "rows", "gid")]
    return grouped.select(
        which.alias("set"), value.alias("value"), F.col(stage).alias("stage"), "rows", *names
    )


def breakdown(rows: Sequence[Mapping[str, Any]], by: Sequence[str]) -> dict[str, Any]:
    """`{column: {value: {"in": n, "out": n, "removed": {stage: n}}}}` from `outcome_counts`'
    rows; a column with more than BREAKDOWN_MAX_VALUES values is left out (`too_many`)."""
    out: dict[str, Any] = {}
    for col in by:
        per: dict[str, dict[str, Any]] = {}
        for r in rows:
            if r["set"] != col:
                continue
            value = "(null)" if r["value"] is None else str(r["value"])
            entry = per.setdefault(value, {"in": 0, "out": 0, "removed": {}})
            entry["in"] += int(r["rows"])
            if r["stage"] is None:
                entry["out"] += int(r["rows"])
            else:
                entry["removed"][r["stage"]] = int(r["rows"])
        if len(per) > BREAKDOWN_MAX_VALUES:
            out[col] = {"too_many": len(per)}
        else:
            out[col] = dict(sorted(per.items(), key=lambda kv: (-kv[1]["in"], kv[0])))
    return out
