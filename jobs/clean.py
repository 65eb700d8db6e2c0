"""`corpusclean clean`: raw documents -> gated, audited, atomically published clean corpus.

The job reads the input once for every statistic and every feature that needs the text
(missing-value counts ride along as a Spark observation; the normalised-text hash and MinHash
signatures come out of one Arrow pass), stages that narrow frame, makes every dedup decision on
it, and joins the decisions back to the full rows only once, for the final write.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.types as pa_types
import pyspark.sql.functions as F
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    NumericType,
    StringType,
    StructType,
    TimestampType,
)

from corpusclean import __version__
from corpusclean.jobs import log
from corpusclean.jobs.config import CleanConfig, dump_config, load_config
from corpusclean.jobs.errors import ConfigError, InputError, RejectedError
from corpusclean.jobs.inputs import (
    LINE_COLUMNS,
    bad_line_rows,
    explain_read_error,
    first_bad_line,
    plan_input,
    read_jsonl,
)
from corpusclean.jobs.paths import check_output_vs_input, detect_format
from corpusclean.jobs.publish import Publisher, check_output
from corpusclean.jobs.report import write_reports
from corpusclean.jobs.runner import new_parser, run_job
from corpusclean.jobs.session import (
    build_session,
    check_shared_output,
    effective_settings,
    executor_facts,
)
from corpusclean.pipelines.columns import (
    BAD_LINE,
    CLEAN_RESERVED,
    ROW_HASH,
    quoted,
    reserved_in,
)
from corpusclean.pipelines.content import FeatureSpec, compute_content_features
from corpusclean.pipelines.dedup import (
    ROW_ID,
    STAGE,
    apply_near_clusters,
    build_duplicates_table,
    mark_doc_id_duplicates,
    mark_exact_duplicates,
    stage_funnel_aggregates,
    start_stages,
    survivor_order,
)
from corpusclean.pipelines.missing import (
    impute_with_medians,
    missing_value_aggregates,
    summarise_missing,
)
from corpusclean.pipelines.rules import REASON, TEXT_LEN, mark_row_rules
from corpusclean.testhook import hold

JOB = "clean"
# The read pass's observation also counts the rows the row rules reject.
_RULES_REJECTED = "__rules_rejected"


@dataclass
class Stage:
    """One line of the report's funnel."""

    name: str
    rows_in: int | None
    rows_out: int | None
    seconds: float
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "seconds": round(self.seconds, 3),
        }
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Run:
    """What one run of the job learns as it goes; becomes report.json."""

    run_id: str
    input_path: str
    output_path: str
    config: CleanConfig
    stages: list[Stage] = field(default_factory=list)
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    flagged: list[str] = field(default_factory=list)
    medians: dict[str, float] = field(default_factory=dict)
    input_rows: int = 0
    output_rows: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    bad_lines: dict[str, Any] | None = None
    removed: dict[str, int] = field(default_factory=dict)
    near: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] | None = None
    gate_passed: bool | None = None
    started: float = field(default_factory=time.time)

    def stage(self, stage: Stage) -> None:
        """Add a line to the report's funnel (its progress lines are printed as it runs)."""
        self.stages.append(stage)


def read_input(spark: SparkSession, path: str, fmt: str, line_columns: bool = False) -> DataFrame:
    """The raw documents as a DataFrame (Parquet file/folder/glob or JSON Lines, .gz too).

    Local files are checked first (jobs/inputs.py). With `line_columns`, JSON Lines come with
    `_bad_line`, `_source_file` and `_raw_line` next to the documents' columns (`LINE_COLUMNS`);
    without, a bad line is a row of what Spark's parser made of it.
    """
    plan = plan_input(path, fmt)
    try:
        if fmt == "parquet":
            return spark.read.options(**plan.options).parquet(*plan.paths)
        docs = read_jsonl(spark, plan)
        return docs if line_columns else docs.drop(*LINE_COLUMNS)
    except InputError:
        raise
    except Exception as exc:  # Spark's AnalysisException for a path it cannot read
        explained = explain_read_error(exc)
        if explained is not None:
            raise explained from exc
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read {fmt} input {path}: {first}") from exc


def _has_map(dtype: DataType) -> bool:
    if isinstance(dtype, MapType):
        return True
    if isinstance(dtype, ArrayType):
        return _has_map(dtype.elementType)
    if isinstance(dtype, StructType):
        return any(_has_map(f.dataType) for f in dtype.fields)
    return False


def row_hash(schema: StructType, names: list[str]) -> Any:
    """A hash of a row's columns, the last tie-break between otherwise equal survivors.

    Spark refuses to hash maps (equal maps may differ in entry order), so a column holding one
    anywhere is hashed through its JSON, which is deterministic for the same stored row.
    """
    types = {f.name: f.dataType for f in schema.fields}
    cols = [F.to_json(F.col(quoted(c))) if _has_map(types[c]) else F.col(quoted(c)) for c in names]
    return F.xxhash64(*cols)


def check_schema(df: DataFrame, cfg: CleanConfig, path: str, internal: Sequence[str] = ()) -> None:
    """The raw-docs contract: id and text columns exist and are strings; configured columns fit.

    `internal` names the columns read_input added itself (not the input's).
    """
    fields = {f.name: f.dataType for f in df.schema.fields if f.name not in internal}
    clash = reserved_in(fields, CLEAN_RESERVED)
    if clash:
        raise InputError(_reserved_message(path, clash[0]))
    have = ", ".join(fields) or "none"
    for key, name in (("columns.id", cfg.columns.id), ("columns.text", cfg.columns.text)):
        if name not in fields:
            raise InputError(
                f"input {path} has no column {name!r} (its columns: {have}); set {key}=NAME"
            )
        if not isinstance(fields[name], StringType):
            raise InputError(
                f"input {path}: column {name!r} ({key}) must be a string, "
                f"found {fields[name].simpleString()}"
            )
    for name in cfg.missing.numeric:
        if name not in fields:
            raise ConfigError(f"missing.numeric names column {name!r}, which the input lacks")
        if not isinstance(fields[name], NumericType):
            raise ConfigError(
                f"missing.numeric.{name}: column is {fields[name].simpleString()}, not numeric"
            )
    for key, keep in (
        ("doc_id_dedup.keep", cfg.doc_id_dedup.keep),
        ("exact_dedup.keep", cfg.exact_dedup.keep),
        ("near_dedup.keep", cfg.near_dedup.keep),
    ):
        if keep == "longest":
            continue
        name = cfg.columns.timestamp if keep == "newest" else keep
        if name not in fields:
            raise ConfigError(f"{key}={keep} needs column {name!r}, which the input lacks")
        dtype = fields[name]
        ok = (
            isinstance(dtype, TimestampType | NumericType)
            if keep == "newest"
            else (isinstance(dtype, NumericType))
        )
        if not ok:
            raise ConfigError(f"{key}={keep}: column {name!r} is {dtype.simpleString()}")


def _order_columns(cfg: CleanConfig) -> list[str]:
    cols: list[str] = []
    for keep in (cfg.doc_id_dedup.keep, cfg.exact_dedup.keep, cfg.near_dedup.keep):
        name = cfg.columns.timestamp if keep == "newest" else None if keep == "longest" else keep
        if name and name not in cols:
            cols.append(name)
    return cols


def _minhash_params(cfg: CleanConfig) -> Any:
    from corpusclean.pipelines.minhash import MinHashParams, optimal_bands

    nd = cfg.near_dedup
    if nd.bands is None or nd.rows is None:
        bands, rows = optimal_bands(
            nd.threshold, nd.num_perm, nd.false_positive_weight, 1 - nd.false_positive_weight
        )
    else:
        bands, rows = nd.bands, nd.rows
    return MinHashParams(
        num_perm=nd.num_perm,
        seed=nd.seed,
        tokenizer=nd.tokenizer,
        ngram=nd.ngram,
        char_ngram=nd.char_ngram,
        bands=bands,
        rows=rows,
    )


def preflight(input_path: str, output: str, cfg: CleanConfig) -> None:
    """Every check that needs no Spark, run before a session starts: the input's files, then
    the output (its lock, foreign files, mount point), so refusals come at once."""
    _preflight_input(input_path, output, cfg)
    check_output(output, JOB)


def _preflight_input(input_path: str, output: str, cfg: CleanConfig) -> None:
    """The format, the output's place, and for a local input its files (footers, checksums,
    names) and, for Parquet, the raw-docs contract on the footers' columns. `clean` checks
    again on Spark's schema."""
    fmt = detect_format(input_path, cfg.input.format)
    check_output_vs_input([input_path], output)
    plan = plan_input(input_path, fmt)
    if plan.rows == 0:
        raise InputError(f"input {input_path} holds no rows")
    if plan.schema is None:
        return
    fields = {f.name: f.type for f in plan.schema}
    clash = reserved_in(fields, CLEAN_RESERVED)
    if clash:
        raise InputError(_reserved_message(input_path, clash[0]))
    if plan.partitioned:
        return  # partition columns come from folder names, which footers do not hold
    have = ", ".join(fields)
    for key, name in (("columns.id", cfg.columns.id), ("columns.text", cfg.columns.text)):
        if name not in fields:
            raise InputError(
                f"input {input_path} has no column {name!r} (its columns: {have}); set {key}=NAME"
            )
        if not pa_types.is_string(fields[name]) and not pa_types.is_large_string(fields[name]):
            raise InputError(
                f"input {input_path}: column {name!r} ({key}) must be a string, "
                f"found {fields[name]}"
            )


def _reserved_message(path: str, name: str) -> str:
    return (
        f"input {path} has a column {name!r}, a name clean uses for its own bookkeeping "
        f"(reserved: {', '.join(sorted(CLEAN_RESERVED))}); rename that column in the input "
        "and rerun"
    )


def clean(spark: SparkSession, input_path: str, output: str, cfg: CleanConfig) -> Run:
    """Run the whole job; returns the run's facts. Raises RejectedError when a gate refuses."""
    fmt = detect_format(input_path, cfg.input.format)
    check_output_vs_input([input_path], output)
    publisher = Publisher(
        output, JOB, stale_hours=cfg.publish.stale_hours, keep_rejected=cfg.publish.keep_rejected
    )
    staging = publisher.prepare()  # holds the output's lock until close()
    try:
        work = staging / "_work"
        run = Run(publisher.run_id, input_path, str(Path(output).absolute()), cfg)
        log.info(JOB, f"run {run.run_id}: {input_path} ({fmt}) -> {output}; staging {staging}")
        hold("prepared")
        try:
            _execute(spark, run, fmt, staging, work, cfg)
        except RejectedError:
            publisher.reject()  # kept for inspection, as the message says
            raise
        except BaseException as exc:
            # A crash leaves nothing half-published; its staging is of no use to anyone.
            publisher.discard()
            explained = explain_read_error(exc)
            if explained is not None:
                raise explained from exc
            raise
        shutil.rmtree(work, ignore_errors=True)
        publisher.publish()
    finally:
        publisher.close()
    log.info(JOB, f"published {run.output_rows:,} docs to {output}")
    return run


def _execute(
    spark: SparkSession, run: Run, fmt: str, staging: Path, work: Path, cfg: CleanConfig
) -> None:
    id_col, text_col = cfg.columns.id, cfg.columns.text
    # Part of the output contract, not tuning: Spark's INT96 default would turn the input's
    # timestamp columns into another Parquet type ("the input's columns unchanged").
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    raw = read_input(spark, run.input_path, fmt, line_columns=True)
    lines = fmt == "jsonl"
    internal = LINE_COLUMNS if lines else ()
    check_schema(raw, cfg, run.input_path, internal)
    input_cols = [c for c in raw.columns if c not in internal]
    input_schema = StructType([f for f in raw.schema.fields if f.name in input_cols])

    # The row key is only a join key inside this run (the same plan reads the same splits);
    # every survivor is chosen by content ordering, never by it.
    drop_numeric = [c for c, how in cfg.missing.numeric.items() if how == "drop"]
    median_cols = [c for c, how in cfg.missing.numeric.items() if how == "median"]
    marked = (
        raw.withColumn(ROW_ID, F.monotonically_increasing_id())
        .withColumn(ROW_HASH, row_hash(raw.schema, input_cols))
        .transform(
            lambda d: mark_row_rules(
                d, id_col, text_col, cfg.rules.min_chars, cfg.rules.max_chars, drop_numeric
            )
        )
    )
    if lines:
        # A line that is not one JSON object is a rejected row like any other, with its reason.
        marked = marked.withColumn(REASON, F.coalesce(F.col(BAD_LINE), F.col(REASON)))

    # Pass 1: every statistic and feature that needs the full rows, in one scan. The row
    # rules' count rides on the same observation, so their line needs no pass of its own.
    aggregates = [
        *missing_value_aggregates(input_schema, median_cols),
        F.sum(F.col(REASON).isNotNull().cast("long")).alias(_RULES_REJECTED),
    ]
    if lines:
        aggregates.append(F.sum(F.col(BAD_LINE).isNotNull().cast("long")).alias("__bad_lines"))
    minhash = _minhash_params(cfg) if cfg.near_dedup.enabled else None
    with log.stage(JOB, "read", spark=spark) as st:
        stats = Observation("missing")
        observed = marked.observe(stats, *aggregates)
        narrow = [id_col, ROW_ID, ROW_HASH, TEXT_LEN, REASON, *_order_columns(cfg)]
        features = observed.select(*[F.col(f"`{c}`") for c in dict.fromkeys(narrow)], text_col)
        spec = FeatureSpec(text_col=text_col, valid_col=REASON, minhash=minhash)
        features.transform(lambda d: compute_content_features(d, spec)).write.mode(
            "overwrite"
        ).parquet(str(work / "features"))
        hold("read")
        metrics = stats.get
        run.input_rows = st.rows_out = int(metrics["__rows"])
        st.note = "one pass: stats, rules, features"
    run.stage(Stage("read", None, run.input_rows, st.seconds, st.note))
    if run.input_rows == 0:
        raise InputError(f"input {run.input_path} holds no rows")
    bad_lines = (
        _bad_lines(spark, run, raw, int(metrics.get("__bad_lines") or 0), work) if lines else None
    )
    run.columns = summarise_missing(metrics, input_schema, cfg.missing.review_threshold)
    run.medians = {
        c: float(metrics[f"{c}__median"])
        for c in median_cols
        if metrics.get(f"{c}__median") is not None
    }
    run.flagged = [name for name, col in run.columns.items() if col["flagged"]]
    for name in run.flagged:
        c = run.columns[name]
        log.warn(
            JOB,
            f"column {name!r} is {c['missing_rate']:.1%} missing (null {c['null_rate']:.1%}, "
            f"blank {c['empty_rate']:.1%}) > {cfg.missing.review_threshold:.0%}: "
            "flagged for manual review",
        )
    n = run.input_rows
    after_rules = n - int(metrics.get(_RULES_REJECTED) or 0)
    note = "computed in the read pass"
    if run.bad_lines and run.bad_lines["count"]:
        note += f"; {run.bad_lines['count']:,} bad input lines"
    _stage_within(run, "rules", n, after_rules, note)

    # Decisions on the narrow frame: doc_id and exact dedup in one write, counted by an
    # observation on that write (no pass of their own); near dedup then reads them back.
    feats = spark.read.parquet(str(work / "features"))
    light = feats.drop(*[c for c in ("_minhash", "_bands", "_shingles") if c in feats.columns])
    decided = light.transform(start_stages).transform(
        lambda d: mark_doc_id_duplicates(d, id_col, survivor_order(cfg.doc_id_dedup.keep, id_col))
    )
    if cfg.exact_dedup.enabled:
        decided = decided.transform(
            lambda d: mark_exact_duplicates(
                d, id_col, survivor_order(cfg.exact_dedup.keep, id_col, row_hash_col=None)
            )
        )
    else:
        decided = decided.withColumn("_exact_cluster", F.lit(None).cast("string"))
    near_on = cfg.near_dedup.enabled
    # Without near dedup these are the final decisions.
    dedup_path = work / ("dedup" if near_on else "decisions")
    with log.stage(JOB, "doc_id", rows_in=after_rules, spark=spark) as st:
        counted = Observation("dedup")
        decided.observe(counted, *stage_funnel_aggregates()).write.mode("overwrite").parquet(
            str(dedup_path)
        )
        funnel = counted.get
        after_docid = after_rules - int(funnel.get("doc_id") or 0)
        st.rows_out = after_docid
        if cfg.exact_dedup.enabled:
            st.note = "exact dedup computed in the same pass"
    run.stage(Stage("doc_id", after_rules, after_docid, st.seconds))
    after_exact = after_docid - int(funnel.get("exact") or 0)
    _stage_within(
        run,
        "exact",
        after_docid,
        after_exact,
        "computed with doc_id" if cfg.exact_dedup.enabled else "disabled",
    )
    decisions = spark.read.parquet(str(dedup_path))

    if near_on:
        from corpusclean.jobs.near import run_near_dedup

        with log.stage(JOB, "near", rows_in=after_exact, spark=spark) as st:
            live = decisions.filter(F.col(STAGE).isNull()).select(ROW_ID)
            candidates = feats.join(live, ROW_ID, "left_semi")
            clusters, run.near = run_near_dedup(
                spark,
                candidates,
                id_col,
                minhash,
                cfg,
                work / "near",
                texts=marked.select(ROW_ID, text_col),
            )
            counted = Observation("near")
            decisions.transform(lambda d: apply_near_clusters(d, clusters, id_col)).observe(
                counted, *stage_funnel_aggregates()
            ).write.mode("overwrite").parquet(str(work / "decisions"))
            funnel = counted.get
            st.rows_out = after_exact - int(funnel.get("near") or 0)
        near_seconds = st.seconds
        decisions = spark.read.parquet(str(work / "decisions"))
    else:
        near_seconds = 0.0
        run.near = {"enabled": False, "ran": False}
    run.removed = {s: int(funnel[s] or 0) for s in ("rules", "doc_id", "exact", "near")}
    after_near = after_exact - run.removed["near"]
    run.output_rows = after_near
    run.stage(
        Stage(
            "near",
            after_exact,
            after_near,
            near_seconds,
            None if near_on else "disabled",
        )
    )
    if not near_on:
        log.info(JOB, f"{'near':<10} disabled")
    hold("dedup")

    # Write the staged output (a rejected run keeps it for inspection).
    with log.stage(JOB, "write", rows_in=after_near, spark=spark) as st:
        reasons = {
            r[REASON]: int(r["n"])
            for r in decisions.filter(F.col(REASON).isNotNull())
            .groupBy(REASON)
            .agg(F.count(F.lit(1)).alias("n"))
            .collect()
        }
        run.rejected = dict(sorted(reasons.items()))
        full = marked
        kept = decisions.filter(F.col(STAGE).isNull()).select(ROW_ID)
        data = (
            full.join(kept, ROW_ID, "left_semi")
            .transform(lambda d: impute_with_medians(d, run.medians))
            .select(*[F.col(f"`{c}`") for c in input_cols])
            .sortWithinPartitions(id_col)
        )
        data.write.parquet(str(staging / "data"))
        _rejected_rows(full, input_cols, input_schema, lines, bad_lines).write.parquet(
            str(staging / "rejected")
        )
        build_duplicates_table(decisions, id_col).sortWithinPartitions(
            "cluster_id", "doc_id"
        ).write.parquet(str(staging / "duplicates"))
        st.rows_out = after_near
    run.stage(Stage("write", after_near, after_near, st.seconds))
    hold("write")

    # Gate, then audit, then (in the caller) publish.
    retention = run.output_rows / run.input_rows
    run.gate_passed = retention >= cfg.gate.min_retention
    gate_note = f"retention {retention:.2%} vs min {cfg.gate.min_retention:.0%}"
    run.stage(Stage("gate", after_near, after_near if run.gate_passed else 0, 0.0, gate_note))
    log.info(JOB, f"{'gate':<10} {'passed' if run.gate_passed else 'FAILED'}: {gate_note}")
    if run.gate_passed and cfg.audit.enabled:
        run.audit = _audit(spark, run, staging, cfg)
    elif not cfg.audit.enabled:
        run.audit = {"ran": False, "reason": "audit.enabled is false"}
    report_path = write_reports(staging, report_dict(spark, run))
    if not run.gate_passed:
        raise RejectedError(
            f"retention {retention:.2%} is below gate.min_retention "
            f"{cfg.gate.min_retention:.0%} ({run.output_rows:,} of {run.input_rows:,} rows kept); "
            f"nothing published; staged output and report kept at {staging} ({report_path.name})"
        )
    if run.audit is not None and not run.audit.get("passed", True):
        failed = [
            f"{c['name']}({c.get('column') or '-'})"
            for c in run.audit.get("checks", [])
            if not c.get("success") and c.get("severity") == "critical"
        ]
        raise RejectedError(
            f"audit failed: {', '.join(failed) or 'critical check'}; nothing published; "
            f"staged output and report kept at {staging}"
        )


def _stage_within(run: Run, name: str, rows_in: int, rows_out: int, note: str) -> None:
    """A stage whose work ran inside another one: its rows now, no seconds of its own."""
    run.stage(Stage(name, rows_in, rows_out, 0.0, note))
    log.stage_note(JOB, name, rows_in, rows_out, note)


def _bad_lines(
    spark: SparkSession, run: Run, raw: DataFrame, count: int, work: Path
) -> DataFrame | None:
    """Act on the JSON Lines that are not one object each: fail naming the first, or list them.

    Returns the bad lines for rejected/ (`input.bad_lines: reject`), None when there are none.
    """
    mode = run.config.input.bad_lines
    run.bad_lines = {"mode": mode, "count": count}
    if count == 0:
        return None
    bad = raw.filter(F.col(BAD_LINE).isNotNull())
    if mode == "fail":
        path, line, reason, total, files = first_bad_line(bad)
        where = f"{path} line {line}" if line is not None else path
        raise InputError(
            f"input file {where}: {reason} ({total:,} bad line{'s' if total != 1 else ''} in "
            f"{files} file{'s' if files != 1 else ''}); fix the input, or set "
            "input.bad_lines=reject to send bad lines to rejected/"
        )
    rows = bad_line_rows(spark, bad, work).cache()
    files = rows.select("source_file").distinct().count()
    run.bad_lines["files"] = files
    log.warn(
        JOB,
        f"{count:,} input lines in {files} file(s) are not one JSON object each; "
        "they go to rejected/ with their file, line and reason (input.bad_lines=reject)",
    )
    return rows


def _rejected_rows(
    full: DataFrame,
    input_cols: list[str],
    input_schema: StructType,
    lines: bool,
    bad_lines: DataFrame | None,
) -> DataFrame:
    """rejected/: rows the row rules refused and, for JSON Lines, lines that are no document."""
    rule_rejects = full.filter(F.col(REASON).isNotNull())
    extra: list[Any] = []
    if lines:
        rule_rejects = rule_rejects.filter(F.col(BAD_LINE).isNull())
        # JSON Lines rejects always carry where a line came from (null for rule rejects).
        extra = [
            F.lit(None).cast("string").alias("source_file"),
            F.lit(None).cast("long").alias("source_line"),
            F.lit(None).cast("string").alias("raw_line"),
        ]
    rejected = rule_rejects.select(
        *[F.col(quoted(c)) for c in input_cols],
        F.col(REASON).alias("reject_reason"),
        F.lit("rules").alias("reject_stage"),
        *extra,
    )
    if bad_lines is None:
        return rejected
    typed = [F.lit(None).cast(f.dataType).alias(f.name) for f in input_schema.fields]
    return rejected.unionByName(
        bad_lines.select(
            *typed,
            F.col("reject_reason"),
            F.lit("input").alias("reject_stage"),
            "source_file",
            "source_line",
            "raw_line",
        )
    )


def _audit(spark: SparkSession, run: Run, staging: Path, cfg: CleanConfig) -> dict[str, Any]:
    """The clean_docs quality suite on the staged output (write-audit-publish)."""
    try:
        from corpusclean.jobs.quality import audit_clean_output
    except ModuleNotFoundError:
        return {"ran": False, "reason": "quality module not installed"}
    params: dict[str, object] = {
        "id_column": cfg.columns.id,
        "text_column": cfg.columns.text,
        "min_chars": cfg.rules.min_chars,
        "max_chars": cfg.rules.max_chars,
        "rows_in": run.input_rows,
        "rows_out": run.output_rows,
        "min_retention": cfg.gate.min_retention,
        "allowed_langs": list(cfg.audit.allowed_langs),
        "missing_rates": {k: v["missing_rate"] for k, v in run.columns.items()},
        "review_threshold": cfg.missing.review_threshold,
        "exact_dedup": cfg.exact_dedup.enabled,
    }
    with log.stage(JOB, "audit", rows_in=run.output_rows, spark=spark) as st:
        result = audit_clean_output(spark, str(staging), params)
        result.setdefault("ran", True)
        st.rows_out = run.output_rows
        st.note = "passed" if result.get("passed") else "FAILED"
    run.stage(Stage("audit", run.output_rows, run.output_rows, st.seconds, st.note))
    return result


def report_dict(spark: SparkSession, run: Run) -> dict[str, Any]:
    """report.json: the run's funnel, column health, near-dedup figures and resolved config."""
    cfg = run.config
    retention = run.output_rows / run.input_rows if run.input_rows else 0.0
    return {
        "tool": "corpusclean",
        "version": __version__,
        "job": JOB,
        "run_id": run.run_id,
        "input": run.input_path,
        "output": run.output_path,
        "input_rows": run.input_rows,
        "output_rows": run.output_rows,
        "retention": round(retention, 6),
        "gate": {"min_retention": cfg.gate.min_retention, "passed": bool(run.gate_passed)},
        "stages": [s.as_dict() for s in run.stages],
        "rejected": run.rejected,
        "bad_lines": run.bad_lines,
        "removed": run.removed,
        "columns": run.columns,
        "flagged_columns": run.flagged,
        "imputed_medians": run.medians,
        "near_dedup": run.near,
        "audit": run.audit,
        "config": cfg.model_dump(mode="json"),
        "spark": {
            "version": spark.version,
            "master": spark.sparkContext.master,
            "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            # What the running session holds for each setting the config asked for.
            "settings": effective_settings(spark, list(cfg.spark)),
            **executor_facts(spark),
        },
        "seconds": round(time.time() - run.started, 3),
    }


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `corpusclean clean` (and `spark-submit jobs/clean.py`)."""
    parser = new_parser(JOB, "Clean and deduplicate raw documents into a gated, published output.")
    parser.add_argument(
        "--input", help="Parquet or JSON Lines: file, folder, glob, hdfs://, s3a://"
    )
    parser.add_argument("--output", help="folder to publish into (replaced atomically on success)")
    parser.add_argument("--config", help="YAML run config (same layout as conf/default.yaml)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set near_dedup.threshold=0.85 (repeatable)",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the resolved config and exit"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean clean --input PATH --output DIR [--config F] [--set k=v]...`."""
    parser = build_parser()

    def body(args: argparse.Namespace) -> int:
        cfg = load_config(CleanConfig, "default", args.config, args.set)
        if args.print_config:
            sys.stdout.write(dump_config(cfg))
            return 0
        if not args.input or not args.output:
            parser.error("--input and --output are required (or --print-config)")
        # Everything that needs no Spark is checked before it starts (seconds, not half a minute).
        preflight(args.input, args.output, cfg)
        spark = build_session("corpusclean-clean", cfg.spark)
        check_shared_output(spark, args.output)
        run = clean(spark, args.input, args.output, cfg)
        summary = {
            "input_rows": run.input_rows,
            "output_rows": run.output_rows,
            "retention": round(run.output_rows / run.input_rows, 4),
            "removed": run.removed,
        }
        print(json.dumps(summary))
        return 0

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
