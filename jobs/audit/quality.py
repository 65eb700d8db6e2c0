"""Data-quality suites: Great Expectations (GX 1.x) suite JSON from `schemas/*.json` on Spark.

The clean job's audit (`audit_clean_output`) and `corpusclean check` (`run_suite`) share this
module, so a published output and a CI check are judged by the same code and report the same
records.

A suite file is plain GX suite JSON, hand-written, with these corpusclean conventions in each
expectation's `meta`:

- `name`: the check's name in reports (unique in the suite);
- `frame`: which frame it validates: `docs` (default: the documents, with the id and text
  columns renamed to `doc_id` and `text` and derived columns added), `run` (one row:
  rows_in, rows_out, retention) or `missing` (one row per input column: column, missing_rate);
- `enabled_by` / `optional_column`: skip the check when that parameter is empty or false, or
  when the frame lacks that column;
- `column`: the column the report names, when the expectation reads a derived column.

Two engines run a suite and give the same records (`_record` builds both from GX-shaped
results): `spark`, the default (jobs/audit/expectations.py: every docs check in one Spark
aggregation, no GX import), and `gx`, Great Expectations itself (any GX expectation type).

Run-dependent thresholds are GX suite parameters (`{"$PARAMETER": "min_chars"}`); the file's
`suite_parameters` hold defaults, the caller's parameters override them.

GX pitfalls handled here: an expectation with a typo in its type is logged and silently dropped
by `ExpectationSuite`, so every expectation is built on its own first and a failure is an
error; `result.success` is False when only warnings fail, so the verdict is the highest failed
severity; `add_spark(persist=True)` persists frames and never unpersists them, so the datasource
is created with `persist=False`. The documents are checked on Spark; the `run` and `missing`
frames, a handful of numbers, on GX's pandas engine. GX is imported inside functions, on the gx
engine's path only: importing it costs seconds, which runs that do not use it should not pay.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyspark.sql.functions as F
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import BinaryType, DoubleType, LongType, StructField, StructType

from corpusclean.errors import ConfigError, InputError
from corpusclean.jobs.audit import expectations as native
from corpusclean.pipelines.content import bad_char_counts, content_hashes
from corpusclean.schemas import (
    CLUSTER_ID,
    DEFAULT_ID_COLUMN,
    DEFAULT_TEXT_COLUMN,
    DOC_ID,
    DUP_STAGE,
    KEPT,
)

SEVERITIES = ("critical", "warning", "info")
FRAMES = ("docs", "run", "missing")
# The id and text columns as the suites name them (`docs_frame` renames the configured ones
# to these): the names an input has under the default config.
ID = DEFAULT_ID_COLUMN
TEXT = DEFAULT_TEXT_COLUMN
DERIVED = ("_norm_hash", "_bad_char_ratio", "_removed_in")
# The frame name of the checks that run on a `precomputed` frame.
PRECOMPUTED = "precomputed"
# How many offending keys (doc_ids, column names) a failed check names in its record.
EXAMPLES = 20

_SUITE_KEYS = {"name", "expectations", "suite_parameters", "meta", "notes"}
_EXPECTATION_KEYS = {"type", "kwargs", "meta", "notes", "description", "severity"}
_META_KEYS = {"name", "frame", "enabled_by", "optional_column", "column"}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Suite parameters that are inputs to frames, not values GX substitutes.
_FRAME_INPUTS = ("missing_rates", "id_column", "text_column")


@dataclass(frozen=True)
class Check:
    """One expectation of a suite, with the corpusclean conventions read from its meta."""

    name: str
    type: str
    severity: str
    frame: str
    column: str | None
    enabled_by: str | None
    optional_column: str | None
    parameters: tuple[str, ...]
    config: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its checks in file order and its parameter defaults."""

    name: str
    source: str
    checks: tuple[Check, ...]
    defaults: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def suite_source(name_or_path: str | Path) -> tuple[str, str]:
    """(text, where) of a suite: a name shipped in `schemas/` or a path to a JSON file."""
    value = str(name_or_path)
    if _IDENTIFIER.match(value) and not Path(value).exists():
        res = resources.files("corpusclean.schemas").joinpath(f"{value}.json")
        if not res.is_file():
            shipped = sorted(
                p.name[: -len(".json")]
                for p in resources.files("corpusclean.schemas").iterdir()
                if p.name.endswith(".json")
            )
            raise ConfigError(
                f"suite {value!r} is neither a shipped suite ({', '.join(shipped)}) nor a file"
            )
        return res.read_text("utf-8"), f"{value} (shipped)"
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(f"suite file {path} does not exist")
    try:
        return path.read_text("utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"suite file {path} cannot be read: {exc}") from exc


def _parameter_names(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        if "$PARAMETER" in value:
            yield str(value["$PARAMETER"]).strip()
            return
        for v in value.values():
            yield from _parameter_names(v)
    elif isinstance(value, list):
        for v in value:
            yield from _parameter_names(v)


def _build_gx_expectation(config: dict[str, Any]) -> None:
    """Build one expectation the way GX does when loading a suite; raise what GX would log."""
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    ExpectationConfiguration(**copy.deepcopy(config)).to_domain_obj()


def _gx_message(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())[:300]


def _engine(engine: str) -> str:
    if engine not in native.ENGINES:
        raise ConfigError(f"audit engine {engine!r} is not one of {', '.join(native.ENGINES)}")
    return engine


def parse_suite(text: str, where: str, engine: str = "spark") -> Suite:
    """A suite from its JSON text; every problem is a `ConfigError` naming the check.

    The `engine` that will run it checks each expectation: GX builds it (and a type or
    argument GX does not know is an error), the spark engine (jobs/audit/expectations.py) accepts
    the types and arguments it evaluates and names any other; neither drops one silently.
    """
    name, raw, defaults = _suite_fields(text, where)
    checks: list[Check] = []
    problems: list[str] = []
    seen: set[str] = set()
    for i, exp in enumerate(raw, start=1):
        parsed = _parse_check(i, exp, seen, _engine(engine))
        if isinstance(parsed, Check):
            checks.append(parsed)
        else:
            problems.append(parsed)
    if problems:
        raise ConfigError(f"suite {where}: " + "; ".join(problems))
    suite = Suite(name=name, source=where, checks=tuple(checks), defaults=dict(defaults))
    if engine == "gx":
        _gx_suite(suite, suite.checks)  # fails loudly if GX would still drop an entry
    return suite


def _suite_fields(text: str, where: str) -> tuple[str, list[Any], dict[str, Any]]:
    """(name, expectations, suite_parameters) of a suite's JSON text, each checked for its
    type; a problem is a `ConfigError`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"suite {where} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"suite {where} must be a JSON object with name and expectations")
    unknown = sorted(set(data) - _SUITE_KEYS - {"id"})
    if unknown:
        raise ConfigError(f"suite {where}: unknown key(s) {', '.join(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"suite {where}: `name` must be a non-empty string")
    raw = data.get("expectations")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"suite {where}: `expectations` must be a non-empty list")
    defaults = data.get("suite_parameters") or {}
    if not isinstance(defaults, dict):
        raise ConfigError(f"suite {where}: `suite_parameters` must be an object")
    return name, raw, defaults


def _parse_check(i: int, exp: Any, seen: set[str], engine: str) -> Check | str:
    """Expectation number `i` of a suite as a `Check`, or the problem with it; adds the
    check's name to `seen`, the names taken so far."""
    label = f"expectation {i}"
    if not isinstance(exp, dict):
        return f"{label} is not an object"
    exp = {k: v for k, v in exp.items() if k != "id"}  # GX exports carry ids; ignore them
    label = f"expectation {i} ({exp.get('type', '?')})"
    bad_keys = sorted(set(exp) - _EXPECTATION_KEYS)
    if bad_keys:
        return f"{label}: unknown key(s) {', '.join(bad_keys)}"
    kwargs = exp.get("kwargs")
    if not isinstance(exp.get("type"), str) or not isinstance(kwargs, dict):
        return f"{label}: needs a string `type` and an object `kwargs`"
    meta = dict(exp.get("meta") or {})
    severity = str(exp.get("severity", "critical"))
    if severity not in SEVERITIES:
        return f"{label}: severity {severity!r} is not one of {', '.join(SEVERITIES)}"
    bad_meta = sorted(k for k in meta if k not in _META_KEYS and not k.startswith("x_"))
    if bad_meta:
        return f"{label}: unknown meta key(s) {', '.join(bad_meta)}"
    frame = str(meta.get("frame", "docs"))
    if frame not in FRAMES:
        return f"{label}: meta.frame {frame!r} is not one of {', '.join(FRAMES)}"
    column = kwargs.get("column")
    check_name = str(meta.get("name") or (f"{exp['type']}:{column}" if column else exp["type"]))
    if check_name in seen:
        return f"{label}: meta.name {check_name!r} is used twice"
    seen.add(check_name)
    meta["name"] = check_name
    config = {**exp, "meta": meta, "severity": severity}
    if engine == "spark":
        why = native.problem(exp["type"], kwargs, frame)
        if why is not None:
            return f"{label}: {why}"
    else:
        try:
            _build_gx_expectation(config)
        except Exception as exc:  # GX raises several kinds; each is a broken suite entry
            return f"{label}: {_gx_message(exc)}"
    return Check(
        name=check_name,
        type=exp["type"],
        severity=severity,
        frame=frame,
        column=str(meta["column"]) if meta.get("column") else column,
        enabled_by=meta.get("enabled_by"),
        optional_column=meta.get("optional_column"),
        parameters=tuple(dict.fromkeys(_parameter_names(kwargs))),
        config=config,
    )


def load_suite(name_or_path: str | Path, engine: str = "spark") -> Suite:
    """A shipped suite by name (`clean_docs`, `raw_docs`) or a suite JSON file by path,
    checked for the audit `engine` that will run it."""
    text, where = suite_source(name_or_path)
    return parse_suite(text, where, engine)


def _gx_suite(suite: Suite, checks: Iterable[Check]) -> Any:
    """A fresh GX ExpectationSuite for `checks` (GX rewrites configs in place when it runs)."""
    import great_expectations as gx

    configs = [copy.deepcopy(c.config) for c in checks]
    gx_logger = logging.getLogger("great_expectations.core.expectation_suite")
    level = gx_logger.level
    gx_logger.setLevel(logging.CRITICAL)  # a drop is reported below, in one line
    try:
        built = gx.ExpectationSuite(name=suite.name, expectations=configs)
    finally:
        gx_logger.setLevel(level)
    if len(built.expectations) != len(configs):
        loaded = {e.meta.get("name") for e in built.expectations}
        dropped = [c["meta"]["name"] for c in configs if c["meta"]["name"] not in loaded]
        raise ConfigError(
            f"suite {suite.source}: GX loaded {len(built.expectations)} of {len(configs)} "
            f"expectations; dropped: {', '.join(dropped)}"
        )
    return built


# ---------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------


_TEXT_CHECKS = StructType(
    [StructField("norm_hash", BinaryType(), True), StructField("bad_chars", LongType(), True)]
)


def text_check_values(texts: pa.Array) -> pa.Array:
    """Per text, as a struct: the exact-dedup hash and the count of bad characters.

    The hash is the exact-dedup stage's own (NFKC, case folding, whitespace collapsed), so the
    audit can never call two texts duplicates that the dedup stage considers different. Both
    come from one Arrow UDF: the text crosses to Python once, and the frame is persisted, so
    neither is computed again by the checks that read them.
    """
    return pa.StructArray.from_arrays(
        [content_hashes(texts), bad_char_counts(texts)], names=["norm_hash", "bad_chars"]
    )


def _bad_char_ratio(bad_chars: Column, length: Column) -> Column:
    """The share of bad characters; 0.0 for an empty or null text."""
    ratio = F.when(length > 0, bad_chars / length)
    return ratio.otherwise(F.lit(0.0)).cast(DoubleType())


def precomputed_frame(
    df: DataFrame, id_column: str, hash_column: str, bad_chars_column: str, length_column: str
) -> DataFrame:
    """The text-derived columns of `docs_frame` from values computed earlier: `doc_id`,
    `_norm_hash` (hex of the binary `hash_column`) and `_bad_char_ratio` (`bad_chars_column`
    over `length_column`, the text's length in characters), one row per document of `df`."""
    return df.select(
        F.col(f"`{id_column}`").alias(ID),
        F.hex(F.col(f"`{hash_column}`")).alias("_norm_hash"),
        _bad_char_ratio(F.col(f"`{bad_chars_column}`"), F.col(f"`{length_column}`")).alias(
            "_bad_char_ratio"
        ),
    )


def precomputed_columns(precomputed: DataFrame | None) -> list[str]:
    """The derived columns a `precomputed` frame gives (all but doc_id), sorted."""
    return sorted(c for c in (precomputed.columns if precomputed is not None else ()) if c != ID)


def docs_frame(
    df: DataFrame,
    id_column: str,
    text_column: str,
    *,
    duplicates: DataFrame | None = None,
    derived: Iterable[str] = DERIVED,
) -> DataFrame:
    """The frame `docs` checks run on.

    Reads `id_column`, `text_column` and, for `_removed_in`, the duplicates table (doc_id,
    stage, kept). Renames the id and text columns to `doc_id` and `text` (an unrelated input
    column already called so becomes `_input_doc_id` / `_input_text`) and adds the requested
    derived columns: `_norm_hash` (hash of the normalised text), `_bad_char_ratio`, and
    `_removed_in` (the exact/near stage that marked this doc_id removed, null if none).
    """
    renames = {id_column: ID, text_column: TEXT}
    cols = []
    for name in df.columns:
        if name in renames:
            cols.append(F.col(f"`{name}`").alias(renames[name]))
        elif name in (ID, TEXT):
            # Not the configured column: checks must never read it as the id or the text.
            cols.append(F.col(f"`{name}`").alias(f"_input_{name}"))
        else:
            cols.append(F.col(f"`{name}`"))
    out = df.select(cols)
    wanted = set(derived)
    if TEXT in out.columns and wanted & {"_norm_hash", "_bad_char_ratio"}:
        values = F.arrow_udf(text_check_values, _TEXT_CHECKS)(F.col(TEXT))
        out = out.withColumn("_text_checks", values)
        if "_norm_hash" in wanted:
            out = out.withColumn("_norm_hash", F.hex(F.col("_text_checks.norm_hash")))
        if "_bad_char_ratio" in wanted:
            ratio = _bad_char_ratio(F.col("_text_checks.bad_chars"), F.length(F.col(TEXT)))
            out = out.withColumn("_bad_char_ratio", ratio)
        out = out.drop("_text_checks")
    if "_removed_in" in wanted and duplicates is not None and ID in out.columns:
        # A loser that shares its survivor's id (the doc_id stage's groups) is no removed
        # document: doc_id uniqueness is checked on its own.
        removed = (
            duplicates.where(~F.col(KEPT) & (F.col(DOC_ID) != F.col(CLUSTER_ID)))
            .groupBy(F.col(DOC_ID).alias("_dup_doc_id"))
            .agg(F.min(DUP_STAGE).alias("_removed_in"))
        )
        out = out.join(removed, out[ID] == removed["_dup_doc_id"], "left").drop("_dup_doc_id")
    return out


def run_frame(rows_in: int, rows_out: int) -> pd.DataFrame:
    """One row: rows_in, rows_out, retention (0 for an empty input: nothing to publish)."""
    retention = rows_out / rows_in if rows_in > 0 else 0.0
    return pd.DataFrame(
        {"rows_in": [int(rows_in)], "rows_out": [int(rows_out)], "retention": [float(retention)]}
    )


def missing_frame(rates: Mapping[str, float]) -> pd.DataFrame:
    """One row per column: column, missing_rate (null + blank share from the job's stats)."""
    items = sorted(rates.items())
    return pd.DataFrame(
        {
            "column": [str(k) for k, _ in items],
            "missing_rate": [float("nan") if v is None else float(v) for _, v in items],
        }
    )


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

_GX_STATE: dict[str, Any] = {}


def _datasource(spark: SparkSession) -> Any:
    """One ephemeral GX context and Spark datasource per Spark session, reused across runs."""
    key = id(spark.sparkContext)
    if _GX_STATE.get("key") != key:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        _GX_STATE.clear()
        # persist=False: GX's default persists every frame and never unpersists it; run_suite
        # persists the docs frame itself and unpersists it when the suite is done.
        _GX_STATE.update(
            key=key,
            context=context,
            spark=context.data_sources.add_spark("corpusclean", persist=False),
            pandas=context.data_sources.add_pandas("corpusclean-run"),
            batches={},
        )
    return _GX_STATE


def _batch(spark: SparkSession, frame: str, df: DataFrame | pd.DataFrame) -> Any:
    state = _datasource(spark)
    definition = state["batches"].get(frame)
    if definition is None:
        # The run figures are a handful of numbers: GX's pandas engine checks them without
        # the Spark jobs (4 per frame and pass) a one-row Spark frame would cost.
        source = state["pandas"] if isinstance(df, pd.DataFrame) else state["spark"]
        asset = source.add_dataframe_asset(frame)
        definition = asset.add_batch_definition_whole_dataframe(frame)
        state["batches"][frame] = definition
    return definition.get_batch(batch_parameters={"dataframe": df})


def _validate(
    suite: Suite,
    spark: SparkSession,
    frame: str,
    df: DataFrame | pd.DataFrame,
    checks: list[Check],
    params: dict[str, Any],
    result_format: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    from great_expectations.exceptions import SuiteParameterError

    batch = _batch(spark, frame, df)
    gx_suite = _gx_suite(suite, checks)
    try:
        result = batch.validate(
            gx_suite, result_format=result_format, expectation_parameters=params
        )
    except SuiteParameterError as exc:
        raise ConfigError(f"suite {suite.source}: {_gx_message(exc)}") from exc
    # GX reorders results (by column), so they are matched to checks by name.
    return {r.expectation_config.meta["name"]: r.to_json_dict() for r in result.results}


def _exception_messages(info: Any) -> list[str]:
    if not isinstance(info, dict):
        return []
    if "raised_exception" in info:
        return [str(info.get("exception_message") or "error")] if info["raised_exception"] else []
    out: list[str] = []
    for value in info.values():
        out += _exception_messages(value)
    return list(dict.fromkeys(out))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalars from GX's pandas engine
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        shown = ", ".join(_fmt(v) for v in value[:8])
        return f"[{shown}{', ...' if len(value) > 8 else ''}]"
    return str(value)


def _expected(kwargs: Mapping[str, Any]) -> str | None:
    parts = []
    if "value" in kwargs:
        parts.append(f"= {_fmt(kwargs['value'])}")
    lo, hi = kwargs.get("min_value"), kwargs.get("max_value")
    if lo is not None and hi is not None:
        parts.append(f"in [{_fmt(lo)}, {_fmt(hi)}]")
    elif lo is not None:
        parts.append(f">= {_fmt(lo)}")
    elif hi is not None:
        parts.append(f"<= {_fmt(hi)}")
    if "value_set" in kwargs:
        parts.append(f"in {_fmt(list(kwargs['value_set'] or []))}")
    if "column_set" in kwargs:
        parts.append(f"has {_fmt(list(kwargs['column_set'] or []))}")
    if "type_" in kwargs:
        parts.append(f"type {kwargs['type_']}")
    if kwargs.get("mostly") not in (None, 1, 1.0):
        parts.append(f"for >= {_fmt(float(kwargs['mostly']) * 100)}% of rows")
    return " ".join(parts) or None


def _status(severity: str, success: bool | None) -> str:
    if success is None:
        return "skip"
    if success:
        return "pass"
    return {"critical": "fail", "warning": "warn"}.get(severity, "info")


def _record(check: Check, columns: Mapping[str, str], result: dict[str, Any] | None) -> dict:
    """The check's record: name, column, severity, observed, success, plus details."""
    shown = check.column
    if shown:
        shown = ", ".join(columns.get(c.strip(), c.strip()) for c in shown.split(","))
    record: dict[str, Any] = {
        "name": check.name,
        "column": shown,
        "severity": check.severity,
        "observed": None,
        "success": None,
        "status": "skip",
        "expectation": check.type,
        "expected": None,
        "detail": None,
    }
    if result is None:
        return record
    body = result.get("result") or {}
    errors = _exception_messages(result.get("exception_info"))
    success = bool(result.get("success")) and not errors
    record["success"] = success
    record["status"] = _status(check.severity, success)
    record["expected"] = _expected(result["expectation_config"].get("kwargs", {}))
    if "observed_value" in body:
        observed = body["observed_value"]
        if check.type.startswith("expect_table_column"):
            # The input's columns under their own names, without the ones the audit derived.
            observed = [columns.get(c, c) for c in observed if c not in DERIVED]
        record["observed"] = _jsonable(observed)
        mismatch = (body.get("details") or {}).get("mismatched") or {}
        missing = [columns.get(c, c) for c in mismatch.get("missing") or []]
        record["detail"] = f"missing: {', '.join(missing)}" if missing else None
    elif "unexpected_count" in body:
        n, total = body["unexpected_count"], body.get("element_count") or 0
        record["observed"] = n
        record["detail"] = f"{n} of {total} rows unexpected"
    if errors:
        record["error"] = "; ".join(" ".join(e.split()) for e in errors)[:500]
        record["detail"] = "could not run"
    return record


def _examples(result: dict[str, Any], key: str) -> list[Any]:
    body = result.get("result") or {}
    rows = body.get("partial_unexpected_index_list") or []
    values = [row.get(key) for row in rows if isinstance(row, dict)]
    # Sorted: GX names them in scan order, which changes with the partitioning.
    return _jsonable(native.sorted_distinct(values))[:EXAMPLES]


def _is_map_failure(result: dict[str, Any] | None) -> bool:
    if result is None or result.get("success"):
        return False
    body = result.get("result") or {}
    return bool(body.get("unexpected_count")) and not _exception_messages(
        result.get("exception_info")
    )


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off")
    return bool(value)


def summarise(records: list[dict[str, Any]]) -> tuple[bool, str | None]:
    """(passed, highest failed severity): passed means no critical check failed."""
    failed = {r["severity"] for r in records if r["success"] is False}
    highest = next((s for s in SEVERITIES if s in failed), None)
    return highest != "critical", highest


def run_suite(
    df: DataFrame,
    suite_path_or_name: str | Path | Suite,
    params: Mapping[str, object],
    *,
    duplicates: DataFrame | None = None,
    engine: str = "spark",
    precomputed: DataFrame | None = None,
) -> dict[str, object]:
    """Run a suite on `df` (and on the run/missing frames built from `params`).

    `engine`: `spark` evaluates the suite natively (jobs/audit/expectations.py: one aggregation over
    the documents, no GX import), `gx` through Great Expectations; both give the same records.

    `params` supplies the suite parameters (`min_chars`, `rows_out`, ...), `id_column` and
    `text_column` (the columns checks know as doc_id and text), `rows_in`/`rows_out` for the
    `run` frame and `missing_rates` ({column: rate}) for the `missing` frame. Returns a
    JSON-able dict: suite, source, passed, highest_failed_severity, checks (one record per
    check in file order: name, column, severity, observed, success, status, expectation,
    expected, detail, and examples for a failed per-row check), parameters, seconds. A failed
    check never raises; a broken suite or a missing parameter raises `ConfigError`.

    `precomputed` (`precomputed_frame`: doc_id and text-derived columns for exactly the
    documents of `df`): the checks on those columns run on it, so the text is not hashed again.
    """
    start = time.perf_counter()
    suite = (
        suite_path_or_name
        if isinstance(suite_path_or_name, Suite)
        else load_suite(suite_path_or_name, _engine(engine))
    )
    values: dict[str, Any] = {**suite.defaults, **dict(params)}
    id_column = str(values.get("id_column") or ID)
    text_column = str(values.get("text_column") or TEXT)
    values["id_column"], values["text_column"] = id_column, text_column
    spark = df.sparkSession
    active, skipped = _active_checks(suite, values)
    absent: dict[str, str] = {}
    persist = _engine(engine) == "gx"
    frames, by_frame = _check_frames(
        df, active, values, duplicates, skipped, absent, persist, precomputed
    )
    try:
        gx_params = {k: v for k, v in values.items() if k not in _FRAME_INPUTS}
        if persist:
            results = _results(suite, spark, frames, by_frame, gx_params)
            examples = _failure_examples(suite, spark, frames, by_frame, results, gx_params)
        else:
            results, examples = _native_results(suite, frames, by_frame, gx_params)
    finally:
        for name in ("docs", PRECOMPUTED):
            persisted = frames.get(name)
            if isinstance(persisted, DataFrame):
                persisted.unpersist()
    columns = {ID: id_column, TEXT: text_column}
    records = [
        _suite_record(check, columns, results, skipped, absent, examples) for check in suite.checks
    ]
    passed, highest = summarise(records)
    return {
        "suite": suite.name,
        "source": suite.source,
        "passed": passed,
        "highest_failed_severity": highest,
        "checks": records,
        "parameters": _jsonable(values),
        "seconds": round(time.perf_counter() - start, 3),
    }


def _active_checks(suite: Suite, values: Mapping[str, Any]) -> tuple[list[Check], dict[str, str]]:
    """(the checks to run, {skipped check: why}): a check whose `enabled_by` parameter is
    unset is skipped. A parameter a check to run needs but lacks is a `ConfigError`."""
    active: list[Check] = []
    skipped: dict[str, str] = {}
    for check in suite.checks:
        if check.enabled_by and not _truthy(values.get(check.enabled_by)):
            skipped[check.name] = f"{check.enabled_by} is not set"
            continue
        active.append(check)
    needed = sorted({p for c in active for p in c.parameters if _IDENTIFIER.match(p)})
    if {"run"} & {c.frame for c in active}:
        needed += ["rows_in", "rows_out"]
    missing = [p for p in dict.fromkeys(needed) if values.get(p) is None]
    if missing:
        raise ConfigError(
            f"suite {suite.source} needs parameter(s) {', '.join(missing)} "
            "(check: --param NAME=VALUE)"
        )
    return active, skipped


def _check_frames(
    df: DataFrame,
    active: list[Check],
    values: Mapping[str, Any],
    duplicates: DataFrame | None,
    skipped: dict[str, str],
    absent: dict[str, str],
    persist: bool,
    precomputed: DataFrame | None = None,
) -> tuple[dict[str, DataFrame | pd.DataFrame], dict[str, list[Check]]]:
    """(frames, checks by frame): the frames the `active` checks validate, built once each,
    and the checks that can run on them. A check that cannot is added to `skipped` (with
    why) or, when its column is missing, to `absent` (with the column). The docs frame is
    persisted when `persist` (GX runs several jobs over it; the spark engine one). A docs
    check on a column of `precomputed` runs on that frame (under the name PRECOMPUTED)."""
    id_column, text_column = str(values["id_column"]), str(values["text_column"])
    frames: dict[str, DataFrame | pd.DataFrame] = {}
    by_frame: dict[str, list[Check]] = {}
    given = set(precomputed_columns(precomputed))
    derived = {str(c.config["kwargs"].get("column")) for c in active if c.frame == "docs"}
    derived -= given
    for check in active:
        column = check.config["kwargs"].get("column")
        if precomputed is not None and check.frame == "docs" and column in given:
            if PRECOMPUTED not in frames:
                frames[PRECOMPUTED] = (
                    precomputed.persist(StorageLevel.MEMORY_AND_DISK) if persist else precomputed
                )
            by_frame.setdefault(PRECOMPUTED, []).append(check)
            continue
        if check.frame not in frames:
            if check.frame == "docs":
                # Persisted for GX: its checks run several Spark jobs over it, and without it
                # each would read the text and run the hash UDF again (3 times on clean_docs;
                # bench/clean.py reports the audit's seconds). The spark engine reads it once.
                docs = docs_frame(
                    df, id_column, text_column, duplicates=duplicates, derived=derived
                )
                frames["docs"] = docs.persist(StorageLevel.MEMORY_AND_DISK) if persist else docs
            elif check.frame == "run":
                frames["run"] = run_frame(int(values["rows_in"]), int(values["rows_out"]))
            else:
                frames["missing"] = missing_frame(dict(values.get("missing_rates") or {}))
        frame_df = frames[check.frame]
        if check.optional_column and check.optional_column not in frame_df.columns:
            skipped[check.name] = f"no {check.optional_column} column"
            continue
        if column == "_removed_in" and duplicates is None:
            skipped[check.name] = "no duplicates table given"
            continue
        if isinstance(column, str) and column not in frame_df.columns:
            # Fails here rather than inside GX, so a GX exception always means "could not run".
            absent[check.name] = column
            continue
        by_frame.setdefault(check.frame, []).append(check)
    return frames, by_frame


def _results(
    suite: Suite,
    spark: SparkSession,
    frames: Mapping[str, DataFrame | pd.DataFrame],
    by_frame: Mapping[str, list[Check]],
    gx_params: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """Every runnable check's GX result by check name: one validation per frame."""
    results: dict[str, dict[str, Any]] = {}
    for frame, checks in by_frame.items():
        # BASIC with no partial list: observed values and unexpected counts, and no per-check
        # scan for examples (Spark turns LIMIT 0 into an empty relation).
        fmt = {"result_format": "BASIC", "partial_unexpected_count": 0}
        results.update(_validate(suite, spark, frame, frames[frame], checks, gx_params, fmt))
    return results


def _native_results(
    suite: Suite,
    frames: Mapping[str, DataFrame | pd.DataFrame],
    by_frame: Mapping[str, list[Check]],
    params: Mapping[str, Any],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[Any]]]:
    """(results by check name, examples by check name) from the spark engine: the docs checks
    in one Spark job (and one more when one failed), the run/missing checks in Python."""
    kwargs: dict[str, dict[str, Any]] = {}
    for checks in by_frame.values():
        for check in checks:
            # A suite parsed for GX may hold what this engine cannot run.
            why = native.problem(check.type, check.config["kwargs"], check.frame)
            if why is not None:
                raise ConfigError(f"suite {suite.source}: {check.name} ({check.type}): {why}")
            kwargs[check.name] = native.substituted(check.config["kwargs"], params)
    results: dict[str, dict[str, Any]] = {}
    examples: dict[str, list[Any]] = {}
    for frame, checks in by_frame.items():
        data = frames[frame]
        if isinstance(data, DataFrame):
            results.update(native.docs_results(data, checks, kwargs))
            examples.update(_native_docs_examples(data, checks, kwargs, results))
        else:
            key = "column" if frame == "missing" else None
            table = {str(c): data[c].tolist() for c in data.columns}
            found, named = native.rows_results(table, checks, kwargs, key, EXAMPLES)
            results.update(found)
            examples.update(named)
    return results, {name: _jsonable(keys)[:EXAMPLES] for name, keys in examples.items()}


def _native_docs_examples(
    frame: DataFrame,
    checks: list[Check],
    kwargs: Mapping[str, dict[str, Any]],
    results: dict[str, dict[str, Any]],
) -> dict[str, list[Any]]:
    """The examples of the failed docs checks, and the repeats of uniqueness checks that the
    aggregation left open (it updates their `results`): one Spark job, only when needed."""
    open_ = [c for c in checks if native.OPEN in results[c.name]]
    failed = [c for c in checks if _is_map_failure(results[c.name])]
    if not open_ and not (failed and ID in frame.columns):
        return {}
    counts, named = native.docs_failures(frame, [*open_, *failed], kwargs, ID, EXAMPLES)
    for check in open_:
        results[check.name] = native.unique_result(
            kwargs[check.name], results[check.name], counts[check.name]
        )
    if ID not in frame.columns:
        return {}
    return {c.name: named[c.name] for c in checks if _is_map_failure(results[c.name])}


def _failure_examples(
    suite: Suite,
    spark: SparkSession,
    frames: Mapping[str, DataFrame | pd.DataFrame],
    by_frame: Mapping[str, list[Check]],
    results: Mapping[str, dict[str, Any]],
    gx_params: dict[str, Any],
) -> dict[str, list[Any]]:
    """The offending keys (doc_ids, column names) of each failed per-row check, by name."""
    examples: dict[str, list[Any]] = {}
    keys = {"docs": ID, PRECOMPUTED: ID, "missing": "column"}
    for frame, checks in by_frame.items():
        key = keys.get(frame)
        failed = [c for c in checks if _is_map_failure(results.get(c.name))]
        if key is None or key not in frames[frame].columns or not failed:
            continue
        # Only failed per-row checks pay for a second pass that names offending rows.
        fmt = {
            "result_format": "SUMMARY",
            "partial_unexpected_count": EXAMPLES,
            "unexpected_index_column_names": [key],
        }
        detail = _validate(suite, spark, frame, frames[frame], failed, gx_params, fmt)
        for name, result in detail.items():
            examples[name] = _examples(result, key)
    return examples


def _suite_record(
    check: Check,
    columns: Mapping[str, str],
    results: Mapping[str, dict[str, Any]],
    skipped: Mapping[str, str],
    absent: Mapping[str, str],
    examples: Mapping[str, list[Any]],
) -> dict[str, Any]:
    """The check's record in `run_suite`'s result: `_record` of its GX result, with why it
    was skipped, its missing column, or its examples."""
    record = _record(check, columns, results.get(check.name))
    if check.name in skipped:
        record["detail"] = skipped[check.name]
    if check.name in absent:
        name = absent[check.name]
        shown = columns.get(name, record["column"] if name.startswith("_") else name)
        record.update(
            success=False,
            status=_status(check.severity, False),
            detail=f"column {shown} does not exist",
        )
    if check.name in examples:
        record["examples"] = examples[check.name]
        if check.frame == "missing" and examples[check.name]:
            record["column"] = ", ".join(str(v) for v in examples[check.name])
    return record


def audit_clean_output(
    spark: SparkSession,
    staged_dir: str,
    params: dict[str, object],
    engine: str = "spark",
    precomputed: DataFrame | None = None,
) -> dict[str, object]:
    """Run the clean_docs suite on a staged clean output; never raises for failed checks.

    Reads `staged_dir/data` (Parquet) and `staged_dir/duplicates` (Parquet: doc_id,
    cluster_id, stage, kept). `params`: id_column, text_column, min_chars, max_chars, rows_in,
    rows_out, min_retention, allowed_langs (empty: skip), missing_rates ({column: rate}),
    review_threshold, and optionally exact_dedup (False skips the exact-duplicate check).
    Returns `run_suite`'s dict and the `engine` that ran it (`spark` or `gx`, see
    `run_suite`); `passed` is False when a critical check failed. `precomputed`: see
    `run_suite`; the result's `precomputed` lists the columns taken from it.
    """
    from corpusclean.schemas import DUPLICATES

    base = Path(staged_dir)
    data_path, dup_path = base / "data", base / "duplicates"
    if not data_path.exists():
        raise InputError(f"audit: {data_path} does not exist")
    data = spark.read.parquet(str(data_path))
    duplicates = spark.read.schema(DUPLICATES).parquet(str(dup_path)) if dup_path.exists() else None
    result = run_suite(
        data, "clean_docs", params, duplicates=duplicates, engine=engine, precomputed=precomputed
    )
    return {**result, "engine": engine, "precomputed": precomputed_columns(precomputed)}
