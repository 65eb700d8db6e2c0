"""Missing-value statistics of every column, as aggregate expressions for one pass."""

from __future__ import annotations

from collections.abc import Iterable

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import StringType, StructType

from corpusclean.pipelines.rules import is_blank

ROWS = "__rows"


def missing_value_aggregates(schema: StructType, medians: Iterable[str] = ()) -> list[Column]:
    """Aggregates giving, per column, its null count and (strings) its blank count.

    Named `__rows`, `<col>__null`, `<col>__blank` and, for each column in `medians`,
    `<col>__median` (approximate, 1% relative error). They fit `DataFrame.agg` and
    `DataFrame.observe` alike, so the counts can ride along with a pass the job makes anyway.
    """
    aggs = [F.count(F.lit(1)).alias(ROWS)]
    for field in schema.fields:
        col = F.col(f"`{field.name}`")
        aggs.append(F.sum(col.isNull().cast("long")).alias(f"{field.name}__null"))
        if isinstance(field.dataType, StringType):
            blank = is_blank(col).cast("long")
            aggs.append(F.sum(F.coalesce(blank, F.lit(0))).alias(f"{field.name}__blank"))
    for name in medians:
        aggs.append(F.percentile_approx(F.col(f"`{name}`"), 0.5, 100).alias(f"{name}__median"))
    return aggs


def summarise_missing(
    row: dict[str, object], schema: StructType, review_threshold: float
) -> dict[str, dict[str, object]]:
    """Per column `{null_rate, empty_rate, missing_rate, flagged}` from the aggregate row."""
    rows = int(row.get(ROWS) or 0)
    out: dict[str, dict[str, object]] = {}
    for field in schema.fields:
        nulls = int(row.get(f"{field.name}__null") or 0)
        blanks = int(row.get(f"{field.name}__blank") or 0)
        null_rate = nulls / rows if rows else 0.0
        empty_rate = blanks / rows if rows else 0.0
        missing = null_rate + empty_rate
        out[field.name] = {
            "type": field.dataType.simpleString(),
            "nulls": nulls,
            "blanks": blanks,
            "null_rate": round(null_rate, 6),
            "empty_rate": round(empty_rate, 6),
            "missing_rate": round(missing, 6),
            "flagged": missing > review_threshold,
        }
    return out


def impute_with_medians(df: DataFrame, medians: dict[str, float]) -> DataFrame:
    """Fill nulls of numeric columns with their medians.

    Reads and rewrites each column named in `medians`, keeping its type.
    """
    for name, value in medians.items():
        dtype = df.schema[name].dataType
        df = df.withColumn(name, F.coalesce(F.col(f"`{name}`"), F.lit(value).cast(dtype)))
    return df
