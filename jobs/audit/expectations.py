"""The `spark` audit engine: the quality suites evaluated with Spark expressions, without GX.

It runs the same suite files as the GX engine (jobs/audit/quality.py) and hands back results shaped
like GX's (`success`, `result`, `exception_info`, `expectation_config.kwargs`), so one function,
`quality._record`, turns the results of both engines into records and they cannot drift apart.

Why it exists: importing GX takes seconds and validating clean_docs through GX on Spark runs
a Spark job per expectation, a large share of a small run (docs/figures.md). Here every
`docs` check is one aggregate expression and all of them run in ONE `agg` over the docs frame
(Spark prunes the columns no check reads); column and type checks read the schema (no job); the
`run` and `missing` frames, a handful of numbers, are checked in plain Python. Only a failed
check costs a second job, which names offending doc_ids and, for a uniqueness check whose
count_distinct fell short of its count, counts the rows whose value repeats.

Semantics follow GX 1.x's (the `gx` test tier runs both engines on the same frames and compares
the records): map checks ignore nulls except not_be_null / be_null; a map check passes vacuously
on no rows (or no non-null values), else when (considered - unexpected) / considered >= mostly;
a repeated value makes every row holding it unexpected; `expect_column_min_to_be_between` fails
on an all-null column. Examples are the doc_ids (for `missing`, the columns) of at most EXAMPLES
offending rows, nulls dropped, sorted: with more offending rows than that, this engine names the
smallest ones, whatever the partitioning.

Supported: exactly the expectation types the shipped suites use (SPECS). Another type, a GX-only
argument (`row_condition`, `result_format`, ...) or a parameter expression is a one-line suite
error that names it and points at the gx engine, not a silent fallback that would bring back
GX's import and jobs.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyspark.sql.functions as F
import pyspark.sql.types as T
from pyspark.sql import Column, DataFrame, Window

ENGINES = ("spark", "gx")
_BOUNDS = ("min_value", "max_value", "strict_min", "strict_max")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Arguments every GX expectation takes that change how GX runs or reports it; this engine
# reports one way and has no row conditions.
_GX_ONLY = {
    "batch_id",
    "catch_exceptions",
    "condition_parser",
    "include_config",
    "result_format",
    "row_condition",
    "windows",
}


@dataclass(frozen=True)
class Spec:
    """How this engine evaluates one expectation type, and the arguments it takes."""

    kind: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    frames: tuple[str, ...] = ("docs", "run", "missing")


SPECS: dict[str, Spec] = {
    "expect_table_columns_to_match_set": Spec("columns", (), ("column_set", "exact_match")),
    "expect_table_row_count_to_equal": Spec("row_count", ("value",)),
    "expect_table_row_count_to_be_between": Spec("row_count", (), _BOUNDS),
    # On pandas frames GX compares numpy dtypes; the run/missing frames have fixed types.
    "expect_column_values_to_be_of_type": Spec("type", ("column", "type_"), ("mostly",), ("docs",)),
    "expect_column_values_to_not_be_null": Spec("not_null", ("column",), ("mostly",)),
    "expect_column_values_to_be_null": Spec("null", ("column",), ("mostly",)),
    "expect_column_values_to_be_unique": Spec("unique", ("column",), ("mostly",)),
    "expect_column_value_lengths_to_be_between": Spec("lengths", ("column",), (*_BOUNDS, "mostly")),
    "expect_column_values_to_be_between": Spec("between", ("column",), (*_BOUNDS, "mostly")),
    "expect_column_values_to_be_in_set": Spec("in_set", ("column", "value_set"), ("mostly",)),
    "expect_column_min_to_be_between": Spec("min", ("column",), _BOUNDS),
}
# The key of a uniqueness result whose repeats are not counted yet (its non-null count).
OPEN = "open_nonnull"


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "column": (lambda v: isinstance(v, str) and bool(v), "a column name"),
    "type_": (lambda v: isinstance(v, str) and bool(v), "a Spark type name"),
    "value": (_number, "a number"),
    "min_value": (lambda v: v is None or _number(v), "a number"),
    "max_value": (lambda v: v is None or _number(v), "a number"),
    "strict_min": (lambda v: isinstance(v, bool), "true or false"),
    "strict_max": (lambda v: isinstance(v, bool), "true or false"),
    "exact_match": (lambda v: v is None or isinstance(v, bool), "true or false"),
    "mostly": (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "value_set": (lambda v: v is None or isinstance(v, list | tuple), "a list"),
    "column_set": (lambda v: v is None or isinstance(v, list | tuple), "a list"),
}


def _parameter(value: Any) -> bool:
    return isinstance(value, dict) and "$PARAMETER" in value


def _bad_value(name: str, value: Any) -> str | None:
    test, what = _VALUES[name]
    return None if test(value) else f"{name} must be {what}, not {value!r}"


def problem(type_: str, kwargs: Mapping[str, Any], frame: str) -> str | None:
    """Why this engine cannot run an expectation (type, arguments, frame), or None."""
    spec = SPECS.get(type_)
    if spec is None:
        return (
            f"not supported by the spark audit engine (it runs {', '.join(SPECS)}); "
            "run this suite with --engine gx (clean: audit.engine=gx)"
        )
    if frame not in spec.frames:
        return f"not supported on the {frame} frame by the spark audit engine; use --engine gx"
    unknown = sorted(set(kwargs) - {*spec.required, *spec.optional})
    gx_only = [k for k in unknown if k in _GX_ONLY]
    if gx_only:
        return f"{', '.join(gx_only)}: not supported by the spark audit engine; use --engine gx"
    if unknown:
        return f"unknown argument(s) {', '.join(unknown)}"
    missing = [k for k in spec.required if k not in kwargs]
    if missing:
        return f"missing argument(s) {', '.join(missing)}"
    for name, value in kwargs.items():
        if _parameter(value):
            expr = str(value["$PARAMETER"]).strip()
            if not _IDENTIFIER.match(expr):
                return (
                    f"{name}: the parameter expression {expr!r} is not supported by the spark "
                    "audit engine (a parameter name is); use --engine gx"
                )
        elif (why := _bad_value(name, value)) is not None:
            return why
    return None


def substituted(kwargs: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` with each `{"$PARAMETER": name}` replaced by the parameter's value."""

    def sub(value: Any) -> Any:
        if _parameter(value):
            return copy.deepcopy(values[str(value["$PARAMETER"]).strip()])
        if isinstance(value, dict):
            return {k: sub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sub(v) for v in value]
        return value

    return {k: sub(v) for k, v in kwargs.items()}


# ---------------------------------------------------------------------------------------------
# Results in GX's shape
# ---------------------------------------------------------------------------------------------


def _result(
    kwargs: Mapping[str, Any], success: bool, body: dict[str, Any], error: str | None = None
) -> dict[str, Any]:
    return {
        "success": bool(success) and error is None,
        "result": body if error is None else {},
        "exception_info": {"raised_exception": error is not None, "exception_message": error},
        "expectation_config": {"kwargs": dict(kwargs)},
    }


def _error(kwargs: Mapping[str, Any], message: str) -> dict[str, Any]:
    return _result(kwargs, False, {}, " ".join(message.split())[:300])


def _argument_error(kind: str, kw: Mapping[str, Any]) -> str | None:
    """What GX raises at validation for these (substituted) arguments, or a wrong type."""
    for name, value in kw.items():
        if name in _VALUES and (why := _bad_value(name, value)) is not None:
            return why
    lo, hi = kw.get("min_value"), kw.get("max_value")
    if kind in ("lengths", "between") and lo is None and hi is None:
        return "min_value and max_value cannot both be None"
    if kind == "between" and lo is not None and hi is not None and lo > hi:
        return "min_value cannot be greater than max_value"
    if kind == "lengths" and any(v is not None and not float(v).is_integer() for v in (lo, hi)):
        return "min_value and max_value must be integers"
    return None


def _within(x: Any, kw: Mapping[str, Any]) -> Any:
    """GX's between condition on `x` (a Column or a Python value) with kw's bounds."""
    lo, hi = kw.get("min_value"), kw.get("max_value")
    above = None if lo is None else (x > lo if kw.get("strict_min") else x >= lo)
    below = None if hi is None else (x < hi if kw.get("strict_max") else x <= hi)
    if above is None:
        return below
    return above if below is None else above & below


def _map_result(
    kind: str, kw: Mapping[str, Any], total: int, nonnull: int, unexpected: int | None
) -> dict[str, Any]:
    """A map check's result from its counts, with GX's vacuous truths and `mostly`.

    `unexpected` is None where GX's is: a Spark sum over no rows."""
    considered = total if kind in ("not_null", "null") else nonnull
    body = {
        "element_count": total,
        "missing_count": total - nonnull,
        "unexpected_count": unexpected,
    }
    if unexpected is None or total == 0 or considered == 0:
        success = True
    else:
        success = (float(considered) - float(unexpected)) / float(considered) >= kw.get("mostly", 1)
    return _result(kw, success, body)


def _bounded_result(kw: Mapping[str, Any], observed: Any) -> dict[str, Any]:
    """GX's `_validate_metric_value_between`: a row count or a column's min against bounds."""
    if _missing(observed):
        return _result(kw, False, {"observed_value": None})
    return _result(kw, bool(_within(observed, kw) in (None, True)), {"observed_value": observed})


def _row_count_result(kw: Mapping[str, Any], rows: int) -> dict[str, Any]:
    """expect_table_row_count_to_equal (`value`) or _to_be_between (bounds)."""
    if "value" in kw:
        return _result(kw, rows == kw["value"], {"observed_value": rows})
    return _bounded_result(kw, rows)


def _columns_result(columns: Sequence[str], kw: Mapping[str, Any]) -> dict[str, Any]:
    """GX's expect_table_columns_to_match_set (observed: the frame's columns, sorted)."""
    expected = set(kw.get("column_set") or ())
    actual = set(columns)
    body: dict[str, Any] = {"observed_value": sorted(str(c) for c in actual)}
    unexpected, missing = sorted(actual - expected), sorted(expected - actual)
    if not unexpected and not missing:
        return _result(kw, True, body)
    mismatched: dict[str, list[str]] = {}
    if unexpected:
        mismatched["unexpected"] = unexpected
    if missing:
        mismatched["missing"] = missing
    body["details"] = {"mismatched": mismatched}
    exact = kw.get("exact_match", True)
    return _result(kw, not exact and not missing, body)


def _type_result(schema: T.StructType, kw: Mapping[str, Any]) -> dict[str, Any]:
    """GX's Spark type check: isinstance of the column's type and `pyspark.sql.types.<type_>`."""
    actual = schema[str(kw["column"])].dataType
    expected = getattr(T, str(kw["type_"]), None)
    if not isinstance(expected, type):
        return _error(kw, "No recognized spark types in expected_types_list")
    return _result(kw, isinstance(actual, expected), {"observed_value": type(actual).__name__})


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def sorted_distinct(values: Iterable[Any]) -> list[Any]:
    """Distinct non-null values, sorted when they can be (the order examples are shown in)."""
    out = list(dict.fromkeys(v for v in values if v is not None))
    try:
        return sorted(out)
    except TypeError:
        return out


# ---------------------------------------------------------------------------------------------
# The docs frame: one aggregation, and a second job only for failed checks
# ---------------------------------------------------------------------------------------------


class _Aggs:
    """Aggregate expressions by meaning, each computed once however many checks read it."""

    def __init__(self) -> None:
        self.exprs: dict[str, Column] = {}
        self.names: dict[str, str] = {}

    def add(self, key: str, expr: Column) -> str:
        if key not in self.names:
            self.names[key] = f"_a{len(self.names)}"
            self.exprs[self.names[key]] = expr.alias(self.names[key])
        return self.names[key]


def _unexpected(kind: str, col: Column, kw: Mapping[str, Any]) -> Column:
    """GX's unexpected-row condition of a (non-window) map check."""
    if kind == "not_null":
        return col.isNull()
    if kind == "null":
        return col.isNotNull()
    if kind == "lengths":
        return col.isNotNull() & ~_within(F.length(col), kw)
    if kind == "between":
        return col.isNotNull() & ~_within(col, kw)
    value_set = kw.get("value_set")
    return col.isNotNull() & ~(F.lit(True) if value_set is None else col.isin(list(value_set)))


def _duplicated(col: Column) -> Column:
    """GX's uniqueness condition: the rows whose non-null value occurs more than once."""
    return col.isNotNull() & (F.count(F.lit(1)).over(Window.partitionBy(col)) > 1)


Finish = Callable[[Mapping[str, Any]], dict[str, Any]]


def _docs_plan(
    kind: str, name: str, kw: dict[str, Any], schema: T.StructType, aggs: _Aggs
) -> Finish | dict[str, Any]:
    """A docs check as a result (schema checks, bad arguments) or as aggregates to compute
    and a function from their values to its result."""
    if (why := _argument_error(kind, kw)) is not None:
        return _error(kw, why)
    if kind == "columns":
        return _columns_result(schema.names, kw)
    if kind == "type":
        return _type_result(schema, kw)
    n = aggs.add("count", F.count(F.lit(1)))
    if kind == "row_count":
        return lambda row: _row_count_result(kw, row[n])
    column = str(kw["column"])
    col = F.col(f"`{column}`")
    if kind == "min":
        low = aggs.add(f"min:{column}", F.min(col))
        return lambda row: _bounded_result(kw, row[low])
    # count(when(...)), not count(col): the distinct counts' Expand then carries a flag per
    # row, not the text.
    nonnull = aggs.add(f"nonnull:{column}", F.count(F.when(col.isNotNull(), F.lit(1))))
    if kind == "unique":
        distinct = aggs.add(f"distinct:{column}", F.count_distinct(col))
        # Equal counts prove uniqueness; otherwise `docs_failures` counts the repeats.
        return lambda row: (
            _map_result(kind, kw, row[n], row[nonnull], 0)
            if row[nonnull] == row[distinct]
            else {**_result(kw, False, {"element_count": row[n]}), OPEN: row[nonnull]}
        )
    bad = aggs.add(f"{name}:unexpected", F.sum(F.when(_unexpected(kind, col, kw), 1).otherwise(0)))
    # A sum over no rows is null, and GX reports that null.
    return lambda row: _map_result(kind, kw, row[n], row[nonnull], row[bad])


def docs_results(
    frame: DataFrame, checks: Sequence[Any], kwargs: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every docs check's result by name, from one `agg` over `frame`: one Spark action
    (adaptive execution runs its shuffle stages, the distinct counts', as jobs of their own).

    A uniqueness check whose count_distinct is below its non-null count comes back failed and
    OPEN: `docs_failures` counts its repeats (`unique_result`). When the
    aggregation cannot run (a check's expression does not apply to its column), each check
    runs on its own, so only the checks that cannot run report an error.
    """
    aggs = _Aggs()
    results: dict[str, dict[str, Any]] = {}
    finishes: dict[str, Finish] = {}
    for check in checks:
        plan = _docs_plan(
            SPECS[check.type].kind, check.name, kwargs[check.name], frame.schema, aggs
        )
        if isinstance(plan, dict):
            results[check.name] = plan
        else:
            finishes[check.name] = plan
    if not finishes:
        return results
    try:
        row = frame.agg(*aggs.exprs.values()).collect()[0].asDict()
    except Exception:  # an analysis or runtime error of some check: find which, one by one
        return {**results, **_one_by_one(frame, checks, kwargs, finishes)}
    return {**results, **{name: finish(row) for name, finish in finishes.items()}}


def _one_by_one(
    frame: DataFrame,
    checks: Sequence[Any],
    kwargs: Mapping[str, dict[str, Any]],
    finishes: Mapping[str, Finish],
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for check in checks:
        if check.name not in finishes:
            continue
        aggs = _Aggs()
        kw = kwargs[check.name]
        finish = _docs_plan(SPECS[check.type].kind, check.name, kw, frame.schema, aggs)
        assert not isinstance(finish, dict)
        try:
            out[check.name] = finish(frame.agg(*aggs.exprs.values()).collect()[0].asDict())
        except Exception as exc:  # Spark raises several kinds; each is "could not run"
            out[check.name] = _error(kw, str(exc).strip().splitlines()[0] if str(exc) else "error")
    return out


def docs_failures(
    frame: DataFrame,
    checks: Sequence[Any],
    kwargs: Mapping[str, dict[str, Any]],
    key: str,
    limit: int,
) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """({check: unexpected rows}, {check: examples}) of the given failed docs map checks, in
    one Spark action: each offending row becomes (check, its `key` value), and a window per
    check keeps the `limit` smallest keys and counts all of them."""
    flags = []
    for i, check in enumerate(checks):
        kind, kw = SPECS[check.type].kind, kwargs[check.name]
        col = F.col(f"`{kw['column']}`")
        flag = _duplicated(col) if kind == "unique" else _unexpected(kind, col, kw)
        flags.append(F.when(flag, F.lit(i)))
    key_col = F.col(f"`{key}`") if key in frame.columns else F.lit(None)
    # The windows of uniqueness flags cannot sit inside the explode: flags first.
    flagged = frame.select(key_col.alias("_key"), F.array(*flags).alias("_checks"))
    rows = flagged.select("_key", F.explode("_checks").alias("_check"))
    by_check = Window.partitionBy("_check")
    ranked = (
        rows.where(F.col("_check").isNotNull())
        .select(
            "_check",
            "_key",
            F.count(F.lit(1)).over(by_check).alias("_rows"),
            F.row_number().over(by_check.orderBy(F.col("_key").asc_nulls_last())).alias("_rank"),
        )
        .where(F.col("_rank") <= limit)
        .collect()
    )
    counts: dict[str, int] = {}
    keys: dict[str, list[Any]] = {}
    for r in ranked:
        name = checks[r["_check"]].name
        counts[name] = int(r["_rows"])
        keys.setdefault(name, []).append(r["_key"])
    names = [c.name for c in checks]
    return (
        {n: counts.get(n, 0) for n in names},
        {n: sorted_distinct(keys.get(n, [])) if key in frame.columns else [] for n in names},
    )


def unique_result(
    kw: Mapping[str, Any], pending: dict[str, Any], unexpected: int
) -> dict[str, Any]:
    """A uniqueness result the aggregation left open (OPEN), with its count of repeats."""
    return _map_result("unique", kw, pending["result"]["element_count"], pending[OPEN], unexpected)


# ---------------------------------------------------------------------------------------------
# The run and missing frames: plain Python
# ---------------------------------------------------------------------------------------------


def rows_results(
    columns: Mapping[str, list[Any]],
    checks: Sequence[Any],
    kwargs: Mapping[str, dict[str, Any]],
    key: str | None,
    limit: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
    """(results, examples) of checks on a small frame given as {column: values}; examples
    name the `key` values of a failed map check's first `limit` offending rows."""
    total = len(next(iter(columns.values()), []))
    results: dict[str, dict[str, Any]] = {}
    examples: dict[str, list[Any]] = {}
    for check in checks:
        kind, kw = SPECS[check.type].kind, kwargs[check.name]
        try:
            result, flags = _row_check(kind, kw, columns, total)
        except (TypeError, ValueError) as exc:
            result, flags = _error(kw, f"{type(exc).__name__}: {exc}"), None
        results[check.name] = result
        failed = not result["success"] and result["result"].get("unexpected_count")
        if failed and flags is not None and key is not None and key in columns:
            offending = [k for k, bad in zip(columns[key], flags, strict=True) if bad]
            examples[check.name] = sorted_distinct(offending[:limit])
    return results, examples


def _row_check(
    kind: str, kw: dict[str, Any], columns: Mapping[str, list[Any]], total: int
) -> tuple[dict[str, Any], list[bool] | None]:
    """One check on a small frame: its result and, for a map check, which rows offend."""
    if (why := _argument_error(kind, kw)) is not None:
        return _error(kw, why), None
    if kind == "columns":
        return _columns_result(list(columns), kw), None
    if kind == "row_count":
        return _row_count_result(kw, total), None
    values = [None if _missing(v) else v for v in columns[str(kw["column"])]]
    if kind == "min":
        present = [v for v in values if v is not None]
        return _bounded_result(kw, min(present) if present else None), None
    flags = _row_flags(kind, kw, values)
    nonnull = sum(v is not None for v in values)
    return _map_result(kind, kw, total, nonnull, sum(flags)), flags


def _row_flags(kind: str, kw: Mapping[str, Any], values: list[Any]) -> list[bool]:
    if kind == "not_null":
        return [v is None for v in values]
    if kind == "null":
        return [v is not None for v in values]
    if kind == "unique":
        seen = Counter(v for v in values if v is not None)
        return [v is not None and seen[v] > 1 for v in values]
    if kind == "lengths":
        return [v is not None and not _within(len(v), kw) for v in values]
    if kind == "between":
        return [v is not None and not _within(v, kw) for v in values]
    value_set = kw.get("value_set")
    allowed = None if value_set is None else list(value_set)
    return [v is not None and allowed is not None and v not in allowed for v in values]
