"""`corpusclean clean`: raw documents -> gated, audited, atomically published clean corpus.

The job reads the input once for every statistic and every feature that needs the text
(missing-value counts ride along as a Spark observation; the normalised-text hash and MinHash
signatures come out of one Arrow pass), stages that narrow frame, makes every dedup decision on
it, and joins the decisions back to the full rows only once, for the final write. Each of those
steps ends in a checkpoint, so a rerun after a crash resumes after the last
(jobs/outputs/resume.py).
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

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from corpusclean import __version__
from corpusclean.errors import InputError, RejectedError
from corpusclean.jobs.inputs.files import LINE_COLUMNS, bad_line_rows, first_bad_line
from corpusclean.jobs.inputs.read import Input, check_columns, check_schema, open_input, read_input
from corpusclean.jobs.outputs.dedup_index import (
    OpenedIndex,
    open_indexes,
    prior_frames,
    write_index,
)
from corpusclean.jobs.outputs.publish import check_output
from corpusclean.jobs.outputs.resume import (
    LAYOUT,
    Checkpoint,
    Checkpoints,
    current_layout,
    fingerprint,
    frame_done,
    layout_column,
    layout_digest,
    mark_frame_done,
)
from corpusclean.jobs.outputs.staged import WORK, StagedRun, Staging, reread
from corpusclean.jobs.reports import charts
from corpusclean.jobs.reports import data as report_data
from corpusclean.jobs.reports.page import report_views, write_reports
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.config import (
    CleanConfig,
    audit_stage_params,
    dump_config,
    load_clean_config,
)
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.runtime.session import (
    build_session,
    check_shared_output,
    count_jobs,
    effective_settings,
    executor_facts,
    run_together,
)
from corpusclean.pipelines.base import (
    Dedup,
    ExamplePick,
    Pipeline,
    funnel_aggregates,
    score_aggregates,
    score_summary,
)
from corpusclean.pipelines.columns import (
    AGAINST,
    BAD_CHARS,
    BAD_LINE,
    NORM_HASH,
    REASON,
    REFUSED_TEXT,
    ROW_HASH,
    ROW_ID,
    STAGE,
    TEXT_BYTES,
    TEXT_LEN,
    TOKENS,
    quoted,
)
from corpusclean.pipelines.content import ReadPass, run_read_pass, spark_fields
from corpusclean.pipelines.dedup import apply_clusters, build_duplicates_table
from corpusclean.pipelines.missing import (
    ROWS,
    impute_with_medians,
    missing_value_aggregates,
    summarise_missing,
)
from corpusclean.pipelines.profile import (
    BREAKDOWN_COLUMNS,
    breakdown,
    length_bucket,
    length_histograms,
    outcome_counts,
)
from corpusclean.pipelines.tokenizers import TokenCount, load_tokenizer
from corpusclean.schemas import (
    CLUSTER_ID,
    DOC_ID,
    N_TOKENS,
    RAW_LINE,
    REJECT_REASON,
    REJECT_STAGE,
    SOURCE_FILE,
    SOURCE_LINE,
)
from corpusclean.testhook import hold

JOB = "clean"
# The funnel's line for JSON Lines input: lines that are not one JSON object.
INPUT_STAGE = "input"
_BAD_LINES = "__bad_lines"
_BAD_LINE_ROWS = "bad_lines"  # the work folder of the bad lines' rows
INDEX = "index"  # the output's own dedup index (jobs/outputs/dedup_index.py)


@dataclass
class Stage:
    """One line of the report's funnel."""

    name: str
    rows_in: int | None
    rows_out: int | None
    seconds: float
    note: str | None = None
    jobs: int = 0  # Spark jobs this line's work started (0 for work done in another line)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
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
    audit: dict[str, Any] | None = None
    gate_passed: bool | None = None
    # Each cluster stage's figures for the report (near's `near_dedup`), by stage name.
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_schema: StructType = field(default_factory=StructType)
    lines: bool = False  # JSON Lines input: its bad lines have a funnel line
    features_schema: StructType = field(default_factory=StructType)  # the read pass's output
    started: float = field(default_factory=time.time)
    # Spark jobs counted so far (the run's job group is its run id): each funnel line gets the
    # jobs started since the line before it.
    spark: SparkSession | None = None
    jobs: int = 0
    # The killed run this one continues (report.json's `resumed_from`), and its checkpoints.
    resumed_from: dict[str, Any] | None = None
    checkpoints: Checkpoints | None = None
    # The last dedup unit's decisions: `{schema, name}` of their folder under the work folder.
    decided: dict[str, str] | None = None
    # The read pass's layout digest (jobs/outputs/resume.py), and its bad lines' schema (JSON
    # Lines).
    layout: int | None = None
    bad_lines_schema: str | None = None
    # The prior indexes of `--against` (jobs/outputs/dedup_index.py), the rows each stage removed
    # against each (`{index: {stage: rows}}`), and the output's own index's params.
    against: list[OpenedIndex] = field(default_factory=list)
    against_removed: dict[str, dict[str, int]] = field(default_factory=dict)
    index: dict[str, Any] | None = None
    # The quality filters' score distributions (report.json's `quality`, before `removed`).
    quality: dict[str, Any] = field(default_factory=dict)
    # Text lengths per bucket of input and output (`lengths`), rows per `lang`/`source`
    # value and outcome (`breakdown`), and each stage's example pairs with their texts
    # (`examples`, by stage name).
    lengths: dict[str, Any] = field(default_factory=dict)
    breakdown: dict[str, Any] = field(default_factory=dict)
    examples: dict[str, Any] = field(default_factory=dict)
    # With `tokens.tokenizer`: its identity, and report.json's `tokens` (`_token_summary`).
    tokenizer: dict[str, Any] | None = None
    tokens: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.pipeline: Pipeline = self.config.pipeline()

    def snapshot(self) -> dict[str, Any]:
        """What the run has learned so far, as JSON: a checkpoint's state (`restore`)."""
        return {
            **{name: getattr(self, name) for name in _SAVED},
            "stages": [s.as_dict() for s in self.stages],
            "features_schema": self.features_schema.json(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Take up a checkpoint's state: the funnel so far, column health, figures."""
        for name in _SAVED:
            if name in state:  # a checkpoint written before a fact was kept lacks it
                setattr(self, name, state[name])
        self.stages = [Stage(**s) for s in state["stages"]]
        self.features_schema = _schema(state["features_schema"])

    def checkpoint(self, order: int, name: str) -> None:
        """Record a completed unit of work (its files are committed) for a rerun to resume."""
        if self.checkpoints is not None:
            self.checkpoints.save(order, name, self.snapshot())

    @property
    def filter_stages(self) -> list[str]:
        """The funnel's lines computed in the read pass: the input's bad lines (JSON Lines),
        then every listed filter."""
        lines = [INPUT_STAGE] if self.lines else []
        return lines + [f.name for f in self.pipeline.filters]

    def stage(self, stage: Stage) -> None:
        """Add a line to the report's funnel (its progress lines are printed as it runs), with
        the Spark jobs started since the previous line."""
        if self.spark is not None:
            now = count_jobs(self.spark, self.run_id)
            stage.jobs, self.jobs = now - self.jobs, now
        self.stages.append(stage)


# The facts of a run a checkpoint keeps (besides the funnel and the features' schema).
_SAVED = (
    "input_rows",
    "output_rows",
    "columns",
    "flagged",
    "medians",
    "rejected",
    "bad_lines",
    "removed",
    "figures",
    "decided",
    "layout",
    "bad_lines_schema",
    "against_removed",
    "index",
    "quality",
    "lengths",
    "breakdown",
    "examples",
    "tokenizer",
    "tokens",
)
# Checkpoint order: the read pass first, a dedup unit by the stage index it ends before, the
# staged output last.
_READ_ORDER, _WRITE_ORDER = 0, 99


def _schema(text: str) -> StructType:
    return StructType.fromJson(json.loads(text))


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


@dataclass(frozen=True)
class Preflight:
    """What clean's pre-flight found, handed to the run so that nothing is read twice: the
    input opened (its format, its files' footers), and the prior indexes of `--against`."""

    source: Input
    against: list[OpenedIndex]
    # The identity of the tokenizer `tokens.tokenizer` names (loaded once here: an unknown
    # name or a file that is no tokenizer is refused before Spark starts).
    tokenizer: dict[str, Any] | None = None


def preflight(input_path: str, output: str, cfg: CleanConfig) -> Preflight:
    """Every check that needs no Spark, run before a session starts: the format, the output's
    place, the input's files (footers, checksums, names) and, for Parquet, the raw-docs
    contract on the footers' columns; then the output (its lock, foreign files, mount point)
    and the `--against` indexes, so refusals come at once. `clean` checks the contract again
    on Spark's schema."""
    source = open_input(input_path, cfg.input.format, output)
    check_columns(source, cfg)
    check_output(output, JOB)
    # A mismatched or damaged index is one line, before anything is written.
    against = open_indexes(cfg.dedup.against, cfg.pipeline().signature_params(), output)
    spec = cfg.tokens.spec()
    tokenizer = None if spec is None else load_tokenizer(spec).identity()
    return Preflight(source, against, tokenizer)


def clean(
    spark: SparkSession,
    input_path: str,
    output: str,
    cfg: CleanConfig,
    resume: bool = True,
    checked: Preflight | None = None,
) -> Run:
    """Run the whole job; returns the run's facts. Raises RejectedError when a gate refuses.

    `checked` is pre-flight's result for this input, output and config (computed here when
    not given). With `resume`, a run that was killed or crashed on the same work
    (jobs/outputs/resume.py) is continued after its last checkpoint instead of started afresh.
    """
    checked = checked or preflight(input_path, output, cfg)
    source, against = checked.source, checked.against
    with StagedRun(spark, JOB, output, cfg.publish) as staged_run:
        raw = read_input(spark, source, line_columns=True)
        fp = fingerprint(spark, raw, source.format, cfg.resolved())
        # A prior index rebuilt since a killed run makes its decisions stale: not resumed.
        fp["against"] = [i.params.get("run_id") for i in against]
        with staged_run.staging(fp, resume) as staging:
            run = Run(staged_run.run_id, input_path, str(Path(output).absolute()), cfg, spark=spark)
            run.checkpoints = staging.checkpoints
            run.against = against
            run.tokenizer = checked.tokenizer
            signatures = run.pipeline.signature_params() is not None
            priors = [prior_frames(spark, idx, i, signatures) for i, idx in enumerate(against)]
            for step in run.pipeline.dedups:
                step.against(priors)
            for idx in against:
                log.info(
                    JOB, f"dedup against {idx.name}: {idx.documents:,} documents ({idx.given})"
                )
            log.info(
                JOB,
                f"run {run.run_id}: {input_path} ({source.format}) -> {output}; "
                f"staging {staging.folder}",
            )
            hold("prepared")
            _execute(spark, run, raw, source, staging)
    log.info(JOB, f"published {run.output_rows:,} docs to {output}")
    return run


def _execute(
    spark: SparkSession, run: Run, raw: DataFrame, source: Input, staging: Staging
) -> None:
    """Mark, read pass, dedup stages, write, gate, audit: the run up to publishing; after
    the last checkpoint of the run it resumes when there is one."""
    # Part of the output contract, not tuning: Spark's INT96 default would turn the input's
    # timestamp columns into another Parquet type ("the input's columns unchanged").
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    work = staging.work
    frames = _mark(run, raw, source)
    done = _resume_point(spark, run, frames, work, staging.resumed_from)
    if done is None:
        bad_lines = _read_pass(spark, run, frames, work)
    else:
        bad_lines = _reread_bad_lines(spark, run, work)
    decisions = _dedup(spark, run, frames, work, done)
    hold("dedup")
    if done is None or done.order < _WRITE_ORDER:
        _write(run, frames, decisions, bad_lines, staging.folder)
    hold("write")
    _gate_and_audit(spark, run, staging.folder, decisions)


def _resume_point(
    spark: SparkSession, run: Run, frames: Frames, work: Path, resumed_from: str | None
) -> Checkpoint | None:
    """The adopted run's last checkpoint, its state taken up; None to start afresh (no run
    adopted, or this run would read the input into other row ids: its work is dropped)."""
    assert run.checkpoints is not None
    done = run.checkpoints.last() if resumed_from is not None else None
    if done is None:
        return None
    if current_layout(frames.marked) != done.state["layout"]:
        log.info(
            JOB,
            f"not resuming run {resumed_from}: this session splits the input differently "
            "(spark.sql.files.* or the default parallelism changed), so its row ids would "
            "name other rows; starting afresh",
        )
        fp = Checkpoints.read_fingerprint(work)
        shutil.rmtree(work)
        if fp is not None:
            run.checkpoints.write_fingerprint(fp)
        return None
    run.restore(done.state)
    following = _next_stage(run, done)
    run.resumed_from = {"run_id": resumed_from, "stage": following, "after": done.name}
    log.info(JOB, f"resuming run {resumed_from} from stage {following} ({done.name} was done)")
    return done


def _next_stage(run: Run, done: Checkpoint) -> str:
    """The funnel line a resumed run starts with, after checkpoint `done`."""
    if done.order == _WRITE_ORDER:
        return "gate"
    after = 0 if done.order == _READ_ORDER else done.order
    later = run.pipeline.dedups[after:]
    return later[0].name if later else "write"


@dataclass(frozen=True)
class Frames:
    """The input as the stages see it."""

    # Every input row with `_rid`, `_row_hash`, `_text_len` and the expression filters'
    # `_reject_reason` / `_stage`. Re-reading it gives the same rows with the same row ids
    # (the same plan reads the same splits): the row id is only a join key inside this run,
    # every survivor is chosen by content ordering, never by it.
    marked: DataFrame
    raw: DataFrame
    input_cols: list[str]
    input_schema: StructType
    lines: bool


def _mark(run: Run, raw: DataFrame, source: Input) -> Frames:
    """Check the input (`read_input`'s frame) against the contract and the stages, and add
    the row keys and the expression filters' verdicts (Spark expressions: no pass of their
    own)."""
    cfg, pipe = run.config, run.pipeline
    lines = source.lines
    internal = LINE_COLUMNS if lines else ()
    check_schema(raw, cfg, pipe, run.input_path, internal)
    input_cols = [c for c in raw.columns if c not in internal]
    input_schema = StructType([f for f in raw.schema.fields if f.name in input_cols])
    run.input_schema, run.lines = input_schema, lines
    # A line that is not one JSON object is a rejected row like any other, with its reason.
    verdicts = [(INPUT_STAGE, F.col(BAD_LINE))] if lines else []
    verdicts += [(f.name, f.reason()) for f in pipe.filters if f.enabled and not f.scores]
    verdicts = [(name, reason) for name, reason in verdicts if reason is not None]
    reason: Column = F.lit(None).cast("string")
    stage: Column = F.lit(None).cast("string")
    if verdicts:
        reason = F.coalesce(*[r for _, r in verdicts])
        stage = F.when(verdicts[0][1].isNotNull(), F.lit(verdicts[0][0]))
        for name, r in verdicts[1:]:
            stage = stage.when(r.isNotNull(), F.lit(name))
    marked = (
        raw.withColumn(ROW_ID, F.monotonically_increasing_id())
        .withColumn(ROW_HASH, row_hash(raw.schema, input_cols))
        .withColumn(TEXT_LEN, F.length(F.col(quoted(cfg.columns.text))))
        .withColumn(REASON, reason)
        .withColumn(STAGE, stage)
    )
    return Frames(marked, raw, input_cols, input_schema, lines)


# The read pass's output, under the run's work folder.
_FEATURES = "features"


def _read_spec(pipe: Pipeline, text_col: str, audit: bool, cfg: CleanConfig) -> ReadPass:
    """The read pass of the enabled stages: their scorers and their text features, the
    bad-character counts when the audit will read them, and each document's tokens when
    `tokens.tokenizer` names a tokenizer."""
    features = list(pipe.text_features())
    spec = cfg.tokens.spec()
    if spec is not None:
        features.append(TokenCount(spec))
    return ReadPass(text_col, tuple(pipe.scorers()), tuple(features), audit, refused_text=True)


def _read_pass(spark: SparkSession, run: Run, frames: Frames, work: Path) -> DataFrame | None:
    """Pass 1: every statistic and feature that needs the full rows, in one scan; the
    filters' counts ride on an observation of the same write. Returns the bad lines for
    rejected/ (JSON Lines with `input.bad_lines: reject`)."""
    cfg, pipe = run.config, run.pipeline
    id_col, text_col = cfg.columns.id, cfg.columns.text
    median_cols = [c for c, how in cfg.missing.numeric.items() if how == "median"]
    aggregates = missing_value_aggregates(frames.input_schema, median_cols)
    if frames.lines:
        aggregates.append(F.sum(F.col(BAD_LINE).isNotNull().cast("long")).alias(_BAD_LINES))
    spec = _read_spec(pipe, text_col, cfg.audit.enabled, cfg)
    reads = [c for f in spec.scorers for c in f.reads() if c != text_col]
    narrow = [id_col, ROW_ID, ROW_HASH, TEXT_LEN, REASON, STAGE, *pipe.order_columns(), *reads]
    narrow += _breakdown_columns(frames)
    with log.stage(JOB, "read", spark=spark) as st:
        stats, filtered = Observation("missing"), Observation("filters")
        # The layout digest lets a rerun check its row ids name the same rows (resume).
        observed = frames.marked.withColumn(LAYOUT, layout_column()).observe(
            stats, *aggregates, layout_digest()
        )
        features = observed.select(*[F.col(quoted(c)) for c in dict.fromkeys(narrow)], text_col)
        passed = run_read_pass(features, spec)
        # Score quantiles of 1 row in 8, chosen by the row's content hash (the same rows on
        # every run): they cost a third of what sketching every row does.
        quality = score_aggregates(spec.scorers, F.pmod(F.col(ROW_HASH), F.lit(8)) == 0)
        passed.observe(filtered, *funnel_aggregates(run.filter_stages), *quality).write.mode(
            "overwrite"
        ).parquet(str(work / _FEATURES))
        run.features_schema = passed.schema
        metrics, counts = stats.get, filtered.get
        run.quality = score_summary(spec.scorers, counts)
        run.input_rows = st.rows_out = int(metrics[ROWS])
        st.note = "one pass: stats, filters, features"
    run.stage(Stage("read", None, run.input_rows, st.seconds, st.note))
    if run.input_rows == 0:
        raise InputError(f"input {run.input_path} holds no rows")
    bad_lines = None
    if frames.lines:
        bad_lines = _bad_lines(spark, run, frames.raw, int(metrics.get(_BAD_LINES) or 0), work)
    _summarise_columns(run, metrics, median_cols)
    _filter_lines(run, counts)
    run.layout = None if metrics.get(LAYOUT) is None else int(metrics[LAYOUT])
    run.bad_lines_schema = None if bad_lines is None else bad_lines.schema.json()
    run.checkpoint(_READ_ORDER, "read")
    hold("read")
    return bad_lines


def _reread_bad_lines(spark: SparkSession, run: Run, work: Path) -> DataFrame | None:
    """The bad lines the read pass listed for rejected/ (see `_bad_lines`), from its work."""
    schema = run.bad_lines_schema
    return None if schema is None else reread(spark, _schema(schema), str(work / _BAD_LINE_ROWS))


def _summarise_columns(run: Run, metrics: dict[str, Any], median_cols: list[str]) -> None:
    """Missing-value rates per column, the medians to impute, and the flagged columns."""
    threshold = run.config.missing.review_threshold
    run.columns = summarise_missing(metrics, run.input_schema, threshold)
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
            f"blank {c['empty_rate']:.1%}) > {threshold:.0%}: flagged for manual review",
        )


def _filter_lines(run: Run, counts: dict[str, Any]) -> None:
    """The funnel's line of each filter (and of the input's bad lines): computed in the read
    pass, so rows and no seconds of their own."""
    rows = run.input_rows
    for name in run.filter_stages:
        step = run.pipeline.step(name)
        removed = int(counts.get(name) or 0)
        run.removed[name] = removed
        if step is None:
            note = "lines that are not one JSON object (input.bad_lines)"
        else:
            note = "computed in the read pass" if step.enabled else "disabled"
        _stage_within(run, name, rows, rows - removed, note)
        rows -= removed
    run.output_rows = rows


def _features_frame(spark: SparkSession, run: Run, work: Path) -> DataFrame:
    """The read pass's narrow frame (every input row's features, verdicts and the refused
    rows' texts), read back from the run's work folder."""
    return reread(spark, run.features_schema, str(work / _FEATURES))


class _StageRun:
    """What a cluster stage gets from the job (pipelines/base.py `StageRun`): frames it
    materialises go to the run's work folder, under the stage's name."""

    def __init__(
        self, spark: SparkSession, work: Path, texts: DataFrame, rows_in: int, stage: str
    ) -> None:
        self.spark = spark
        self.stage = stage
        self.rows_in = rows_in
        self.work = work
        self._texts = texts

    def materialise(self, df: DataFrame, name: str) -> DataFrame:
        """Write `df` once and read it back; a frame a resumed run's predecessor committed
        (the same plan on the same rows) is read back without computing it again."""
        path = self.work / name
        if frame_done(path):
            log.info(JOB, f"{self.stage:<10} reusing {name} from the resumed run")
        else:
            df.write.mode("overwrite").parquet(str(path))
            mark_frame_done(path)
            hold("materialised")
        return reread(self.spark, df.schema, str(path))

    def texts(self) -> DataFrame:
        return self._texts


def _dedup(
    spark: SparkSession, run: Run, frames: Frames, work: Path, done: Checkpoint | None
) -> DataFrame:
    """Decisions on the narrow frame, stage by stage. Consecutive window stages are one write
    (counted by an observation on it: no pass of their own); a cluster stage finds its
    clusters, marks its losers and writes the decisions again. Returns the last decisions.

    Each unit's write is checkpointed (order: the index of the stage after it); a resumed run
    starts after `done`'s unit with its decisions."""
    pipe, text_col = run.pipeline, run.config.columns.text
    # The refused rows' texts wait there for rejected/; no dedup step reads them.
    feats = _features_frame(spark, run, work).drop(REFUSED_TEXT)
    heavy = [f.name for d in pipe.dedups for x in d.text_features() for f in x.fields()]
    decisions = feats.drop(*[c for c in heavy if c in feats.columns])
    texts = frames.marked.select(ROW_ID, text_col)
    stages, i = pipe.dedups, 0
    if done is not None and done.order != _READ_ORDER:
        i = len(stages) if done.order == _WRITE_ORDER else done.order
        if run.decided is not None:
            decided = run.decided
            decisions = reread(spark, _schema(decided["schema"]), str(work / decided["name"]))
    while i < len(stages):
        head = stages[i]
        i += 1
        if not head.enabled:
            _stage_within(run, head.name, run.output_rows, run.output_rows, "disabled")
            run.removed[head.name] = 0
            if head.clusters_on_driver:
                run.figures[head.name] = {"enabled": False, "ran": False}
            continue
        unit = [head]
        while not head.clusters_on_driver and i < len(stages) and _joins(stages[i]):
            unit.append(stages[i])
            i += 1
        run_for = _StageRun(spark, work / head.name, texts, run.output_rows, head.name)
        name = f"decided-{i}"
        decisions = _run_unit(spark, run, unit, decisions, feats, run_for, work / name)
        # Names under the work folder, which a resuming run adopts under another run id.
        run.decided = {"schema": decisions.schema.json(), "name": name}
        run.checkpoint(i, name)
        hold("decided")
    return decisions


def _joins(step: Dedup) -> bool:
    """Whether a stage is computed in the same write as the window stage before it."""
    return step.enabled and not step.clusters_on_driver


def _run_unit(
    spark: SparkSession,
    run: Run,
    unit: list[Dedup],
    decisions: DataFrame,
    feats: DataFrame,
    stage_run: _StageRun,
    path: Path,
) -> DataFrame:
    """One cluster stage, or a run of window stages, ending in one write of the decisions."""
    head, rows_in = unit[0], run.output_rows
    id_col = run.config.columns.id
    with log.stage(JOB, head.name, rows_in=rows_in, spark=spark) as st:
        if head.clusters_on_driver:
            live = decisions.filter(F.col(STAGE).isNull()).select(ROW_ID)
            candidates = feats.join(live, ROW_ID, "left_semi")
            clusters, figures = head.find_clusters(candidates, stage_run)
            run.figures[head.name] = figures
            line = head.summary(figures)
            if line:
                log.info(JOB, f"{head.name:<10} {line}")
            marked = apply_clusters(decisions, clusters, id_col, head.name, head.cluster_col)
        else:
            marked = decisions
            for step in unit:
                # The frame's rows: `decisions` holds every input row, removed ones included.
                step.batch_rows = run.input_rows
                marked = marked.transform(step.mark)
        counted = Observation(f"dedup-{head.name}")
        names = [s.name for s in unit]
        # Per prior index, the rows each stage removed against it (same observation).
        prior = [
            (f"{n}@{i}", n, idx.name, F.col(STAGE) == n)
            for n in names
            for i, idx in enumerate(run.against)
        ]
        per_prior = [
            F.sum((cond & (F.col(AGAINST) == F.lit(name))).cast("long")).alias(key)
            for key, _, name, cond in prior
            if AGAINST in marked.columns
        ]
        marked.observe(counted, *funnel_aggregates(names), *per_prior).write.mode(
            "overwrite"
        ).parquet(str(path))
        removed = {n: int(counted.get.get(n) or 0) for n in names}
        for key, n, name, _ in prior:
            run.against_removed.setdefault(name, {})[n] = int(counted.get.get(key) or 0)
        st.rows_out = rows_in - removed[head.name]
        if len(unit) > 1:
            st.note = f"{', '.join(names[1:])} computed in the same pass"
    run.stage(Stage(head.name, rows_in, st.rows_out, st.seconds, st.note))
    run.removed.update(removed)
    rows = st.rows_out
    for name in names[1:]:
        _stage_within(run, name, rows, rows - removed[name], f"computed with {head.name}")
        rows -= removed[name]
    run.output_rows = rows
    return reread(spark, marked.schema, str(path))


def _data_rows(
    run: Run,
    frames: Frames,
    decisions: DataFrame,
    picks: list[ExamplePick],
    found: Observation,
    survivors: Observation,
) -> DataFrame:
    """data/: the rows still in the corpus, whole, with their medians imputed and the scores
    published beside them. The texts of the example `picks` (removed rows) are observed as
    `found`, their survivors' as `survivors`, in the same scan."""
    cfg = run.config
    id_col = cfg.columns.id
    # Scores published beside the document (language ID's, `quality.keep_scores`), and each
    # document's tokens when they are counted.
    published = run.pipeline.published(cfg.quality.keep_scores)
    if cfg.tokens.tokenizer is not None:
        published.append((TOKENS, N_TOKENS))
    kept = decisions.filter(F.col(STAGE).isNull()).select(
        ROW_ID, *[F.col(score) for score, _ in published]
    )
    # The sampled duplicates' texts ride on the data write: its scan reads every input row
    # before the join drops the removed ones, and the survivors' after it.
    rows = frames.marked
    text = F.substring(F.col(quoted(cfg.columns.text)), 1, _EXAMPLE_MAX_CHARS)
    if picks:
        wanted = F.col(ROW_ID).isin(sorted({p.rid for p in picks}))
        picked = F.struct(F.col(ROW_ID).alias("rid"), text.alias("text"))
        rows = rows.observe(found, F.collect_list(F.when(wanted, picked)).alias("removed"))
    data = (
        rows.join(kept, ROW_ID, "inner" if published else "left_semi")
        .transform(lambda d: impute_with_medians(d, run.medians))
        .select(
            *[F.col(quoted(c)) for c in frames.input_cols],
            *[F.col(score).alias(name) for score, name in published],
        )
        .sortWithinPartitions(id_col)
    )
    if picks:
        wanted = F.col(quoted(id_col)).isin(sorted({p.kept for p in picks}))
        picked = F.struct(F.col(quoted(id_col)).alias("doc_id"), text.alias("text"))
        data = data.observe(survivors, F.collect_list(F.when(wanted, picked)).alias("kept"))
    return data


def _write(
    run: Run, frames: Frames, decisions: DataFrame, bad_lines: DataFrame | None, staging: Path
) -> None:
    """Write the staged output (a rejected run keeps it for inspection)."""
    for name in ("data", "rejected", "duplicates"):
        # What a killed run's write left behind (a resumed run writes them again whole).
        shutil.rmtree(staging / name, ignore_errors=True)
    with log.stage(JOB, "write", rows_in=run.output_rows, spark=decisions.sparkSession) as st:
        found, survivors = Observation("examples-removed"), Observation("examples-kept")
        picked: dict[str, list[ExamplePick]] = {}

        def counted_then_data() -> None:
            # The outcome counts pick the examples whose texts the data write observes, so
            # the two run in order, beside the other writes.
            picked.update(_count_outcomes(run, frames, decisions))
            picks = [p for stage in picked.values() for p in stage]
            data = _data_rows(run, frames, decisions, picks, found, survivors)
            data.write.parquet(str(staging / "data"))

        rejected = _rejected_rows(run, frames, staging / WORK, bad_lines)
        duplicates = build_duplicates_table(decisions, run.pipeline.dedups)
        writes = [
            counted_then_data,
            lambda: rejected.write.parquet(str(staging / "rejected")),
            lambda: duplicates.sortWithinPartitions(CLUSTER_ID, DOC_ID).write.parquet(
                str(staging / "duplicates")
            ),
        ]
        if run.config.dedup.index:
            writes.append(lambda: _write_index(run, decisions, staging))
        # Independent writes, each its own job: planned and run side by side, the driver's
        # planning of one overlapping the tasks of another.
        run_together(writes)
        if any(picked.values()):
            removed = {int(r["rid"]): r["text"] for r in found.get.get("removed") or []}
            kept = {r["doc_id"]: r["text"] for r in survivors.get.get("kept") or []}
            for step in run.pipeline.dedups:
                if picked.get(step.name):
                    pairs = step.example_pairs(picked[step.name], removed, kept)
                    run.examples[step.name] = [_cut_texts(pair) for pair in pairs]
        st.rows_out = run.output_rows
    run.stage(Stage("write", run.output_rows, run.output_rows, st.seconds))
    run.checkpoint(_WRITE_ORDER, "write")


def _cut_texts(pair: dict[str, Any]) -> dict[str, Any]:
    """An example pair with its texts cut to the page's preview length."""
    return {k: report_data.cut(v) if k.endswith("_text") else v for k, v in pair.items()}


# Removed rows sampled for the report, per stage that shows pairs: this many (by a hash of
# their id, the same on every run), of which the stage shows a few. Their texts are kept up to
# _EXAMPLE_MAX_CHARS for the stage's figures (a Jaccard), cut shorter for the page.
_EXAMPLE_POOL = 24
_EXAMPLE_CANDIDATES = 96  # rows the aggregation lists, of which the pool is the first by hash
_EXAMPLE_MAX_CHARS = 200_000
_OUTCOME_ROWS = 20_000  # at most this many grouped rows reach the driver (reasons first)
_LENGTH_BUCKET = "__length_bucket"


def _breakdown_columns(frames: Frames) -> list[str]:
    """The input's columns the report breaks the funnel down by (`lang`, `source`)."""
    return [c for c in BREAKDOWN_COLUMNS if c in frames.input_cols]


def _count_outcomes(run: Run, frames: Frames, decisions: DataFrame) -> dict[str, list[ExamplePick]]:
    """Rows per rejection reason (report.json's `rejected`) and, in the same aggregation, per
    text-length bucket and per `lang`/`source` value, each by the stage that removed them
    (`lengths`, `breakdown`). Returns, per stage that shows example pairs, a few of the rows
    it removed (`_example_picks`), listed in the same job."""
    by = [c for c in _breakdown_columns(frames) if c in decisions.columns]
    bucketed = decisions.withColumn(_LENGTH_BUCKET, length_bucket(F.col(TEXT_LEN)))
    picks = _example_picks(run)
    extra = [column.alias(alias) for alias, (_, column) in picks.items()]
    counting = TOKENS in decisions.columns
    if counting:
        extra += [F.sum(TOKENS).alias(_TOKENS), F.sum(TEXT_BYTES).alias(_TOKEN_BYTES)]
    rows = [
        r.asDict(recursive=True)
        for r in outcome_counts(bucketed, REASON, STAGE, [_LENGTH_BUCKET, *by], extra)
        # Reasons first, then the length buckets: only a breakdown can be cut by the limit.
        .orderBy(
            F.when(F.col("set") == REASON, 0).when(F.col("set") == _LENGTH_BUCKET, 1).otherwise(2)
        )
        .limit(_OUTCOME_ROWS)
        .collect()
    ]
    run.lengths = length_histograms(rows, _LENGTH_BUCKET)
    run.rejected = dict(
        sorted(
            (r["value"], int(r["rows"]))
            for r in rows
            if r["set"] == REASON and r["value"] is not None
        )
    )
    if len(rows) == _OUTCOME_ROWS:
        run.breakdown = {c: {"too_many": f"over {_OUTCOME_ROWS:,} groups"} for c in by}
    else:
        run.breakdown = breakdown(rows, by)
    if counting:
        run.tokens = _token_summary(run, rows, by)
    out: dict[str, list[ExamplePick]] = {}
    for alias, (step, _) in picks.items():
        # Every set sees every row: the reason set's groups hold each picked row once.
        listed = [p for r in rows if r["set"] == REASON for p in r.get(alias) or []]
        pool = sorted(listed, key=lambda p: (p["h"], p["doc_id"]))[:_EXAMPLE_POOL]
        out[step.name] = [
            ExamplePick(int(p["rid"]), str(p["doc_id"]), str(p["kept"])) for p in pool
        ]
    return out


# The token sums the outcome aggregation carries when clean counts tokens.
_TOKENS, _TOKEN_BYTES = "__tokens", "__token_bytes"


def _token_summary(run: Run, rows: list[dict[str, Any]], by: list[str]) -> dict[str, Any]:
    """report.json's `tokens`: the tokens of the published documents (exact, BOS/EOS framed as
    the tokenizing pack writes them), of the documents the filters let through, what each
    dedup stage removed, the measured UTF-8 bytes per token of the output, and the output's
    tokens per `lang`/`source` value. From the length buckets' groups, which hold every row."""
    output = counted = out_bytes = 0
    removed: dict[str, int] = {}
    for r in rows:
        if r["set"] != _LENGTH_BUCKET:
            continue
        tokens = int(r.get(_TOKENS) or 0)
        counted += tokens
        if r["stage"] is None:
            output += tokens
            out_bytes += int(r.get(_TOKEN_BYTES) or 0)
        elif tokens:
            removed[r["stage"]] = removed.get(r["stage"], 0) + tokens
    per: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["set"] in by and r["stage"] is None:
            value = "(null)" if r["value"] is None else str(r["value"])
            per.setdefault(r["set"], {})[value] = int(r.get(_TOKENS) or 0)
    return {
        "tokenizer": run.tokenizer,
        "output": output,
        "counted": counted,
        "removed": removed,
        "bytes_per_token": round(out_bytes / output, 4) if output else None,
        "by": {c: dict(sorted(v.items(), key=lambda kv: -kv[1])) for c, v in per.items()},
    }


def _example_picks(run: Run) -> dict[str, tuple[Dedup, Column]]:
    """Per enabled stage that shows example pairs and removed rows: an aggregate listing about
    _EXAMPLE_CANDIDATES of the rows it removed (`h`: a hash of their doc_id, `rid`, doc_id,
    and `kept`: the doc_id that survived their cluster), one row in every n by that hash: the
    same rows on every run, and a list that stays small whatever the corpus. By the
    aggregate's alias."""
    doc_id = F.col(quoted(run.config.columns.id))
    h = F.xxhash64(doc_id)
    picks: dict[str, tuple[Dedup, Column]] = {}
    for i, step in enumerate(run.pipeline.dedups):
        removed = run.removed.get(step.name, 0)
        if not (step.enabled and step.shows_pairs and removed):
            continue
        every = max(1, removed // _EXAMPLE_CANDIDATES)
        chosen = (F.col(STAGE) == F.lit(step.name)) & (F.pmod(h, F.lit(every)) == 0)
        row = F.struct(
            h.alias("h"),
            F.col(ROW_ID).alias("rid"),
            doc_id.alias("doc_id"),
            F.col(step.cluster_col).alias("kept"),
        )
        picks[f"__picked_{i}"] = (step, F.collect_list(F.when(chosen, row)))
    return picks


def _write_index(run: Run, decisions: DataFrame, staging: Path) -> None:
    """DIR/index/ (jobs/outputs/dedup_index.py) of the published documents: their features
    from the read pass, no text read again. Its texts are the output's own data/."""
    spark = decisions.sparkSession
    cfg = run.config
    shutil.rmtree(staging / INDEX, ignore_errors=True)
    feats = _features_frame(spark, run, staging / WORK)
    kept = decisions.filter(F.col(STAGE).isNull()).select(ROW_ID)
    texts = {"path": "../data", "format": "parquet", "id": cfg.columns.id, "text": cfg.columns.text}
    params = write_index(
        feats.join(kept, ROW_ID, "left_semi"),
        staging / INDEX,
        cfg.columns.id,
        run.pipeline.signature_params(),
        texts,
        run.output_path,
        run.run_id,
    )
    run.index = {
        "path": INDEX,
        "documents": params["documents"],
        "bytes": params["bytes"],
        "bytes_per_document": params["bytes_per_document"],
    }


def _gate_and_audit(spark: SparkSession, run: Run, staging: Path, decisions: DataFrame) -> None:
    """The retention gate, then the audit, then report.json; raises RejectedError when either
    refuses (the caller publishes otherwise). `decisions`: the last decisions (the audit reads
    the read pass's values of the rows they keep)."""
    cfg = run.config
    retention = run.output_rows / run.input_rows
    run.gate_passed = retention >= cfg.gate.min_retention
    gate_note = f"retention {retention:.2%} vs min {cfg.gate.min_retention:.0%}"
    kept = run.output_rows if run.gate_passed else 0
    run.stage(Stage("gate", run.output_rows, kept, 0.0, gate_note))
    log.info(JOB, f"{'gate':<10} {'passed' if run.gate_passed else 'FAILED'}: {gate_note}")
    if run.gate_passed and cfg.audit.enabled:
        run.audit = _audit(spark, run, staging, decisions)
    elif not cfg.audit.enabled:
        run.audit = {"ran": False, "reason": "audit.enabled is false"}
    report = report_dict(spark, run)
    report.update(report_views(staging, run.config.columns.id, run.config.columns.text))
    # The example pairs only the run saw (`Dedup.example_pairs`), beside the views' examples.
    for step in run.pipeline.dedups:
        if step.shows_pairs:
            report["examples"][step.name] = run.examples.get(step.name, [])
    report_path = write_reports(staging, report)
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
    # Written, not cached: a resumed run reads them back (`_reread_bad_lines`).
    listed = bad_line_rows(spark, bad, work)
    listed.write.mode("overwrite").parquet(str(work / _BAD_LINE_ROWS))
    rows = reread(spark, listed.schema, str(work / _BAD_LINE_ROWS))
    files = rows.select(SOURCE_FILE).distinct().count()
    run.bad_lines["files"] = files
    log.warn(
        JOB,
        f"{count:,} input lines in {files} file(s) are not one JSON object each; "
        "they go to rejected/ with their file, line and reason (input.bad_lines=reject)",
    )
    return rows


def _rejected_rows(run: Run, frames: Frames, work: Path, bad_lines: DataFrame | None) -> DataFrame:
    """rejected/: rows a filter refused, with its reason and stage, and, for JSON Lines, the
    lines that are no document.

    The read pass kept each refused row's verdict, scores and text (`__refused_text`), so the
    input is read again without its text column, for the refused rows' other columns: reading
    every row's text again, for the few refused, was most of the write stage's scan.
    """
    refused = F.col(REASON).isNotNull() & (F.col(STAGE) != INPUT_STAGE)
    scores = [f for s in run.pipeline.scorers() for f in s.score_fields()]
    scored = [f.name for f in scores]
    text_col = run.config.columns.text
    spark = frames.marked.sparkSession
    # A read pass resumed from an earlier build may not have kept the texts: read them again.
    carries = REFUSED_TEXT in run.features_schema.fieldNames()
    carried = (
        _features_frame(spark, run, work)
        .filter(refused)
        .select(ROW_ID, REASON, STAGE, *scored, *([REFUSED_TEXT] if carries else []))
    )
    others = [c for c in frames.input_cols if c != text_col or not carries]
    full = frames.marked.select(ROW_ID, *[F.col(quoted(c)) for c in others]).join(carried, ROW_ID)
    rejected = full.select(
        *[
            F.col(REFUSED_TEXT).alias(c) if c == text_col and carries else F.col(quoted(c))
            for c in frames.input_cols
        ],
        F.col(REASON).alias(REJECT_REASON),
        F.col(STAGE).alias(REJECT_STAGE),
        *scored,
    )
    if not frames.lines:
        return rejected
    # JSON Lines rejects always carry where a line came from (null for filter rejects).
    rejected = rejected.select(
        "*",
        F.lit(None).cast("string").alias(SOURCE_FILE),
        F.lit(None).cast("long").alias(SOURCE_LINE),
        F.lit(None).cast("string").alias(RAW_LINE),
    )
    if bad_lines is None:
        return rejected
    typed = [F.lit(None).cast(f.dataType).alias(f.name) for f in frames.input_schema.fields]
    return rejected.unionByName(
        bad_lines.select(
            *typed,
            F.col(REJECT_REASON),
            F.lit(INPUT_STAGE).alias(REJECT_STAGE),
            *[F.lit(None).cast(f.dataType).alias(f.name) for f in spark_fields(scores)],
            SOURCE_FILE,
            SOURCE_LINE,
            RAW_LINE,
        ),
        allowMissingColumns=False,
    )


def _audit(spark: SparkSession, run: Run, staging: Path, decisions: DataFrame) -> dict[str, Any]:
    """The clean_docs quality suite on the staged output (write-audit-publish).

    The checks on the normalised-text hash and the bad-character share read the values the
    read pass computed for the kept rows (the rows of data/, as `row_count_matches_report`
    and `doc_id_unique` hold them to), not the text again: hashing it is most of the audit's
    cost. Every other check reads data/ itself; `corpusclean check` computes all from the text.
    """
    try:
        from corpusclean.jobs.audit.quality import audit_clean_output, precomputed_frame
    except ModuleNotFoundError:
        return {"ran": False, "reason": "quality module not installed"}
    cfg = run.config
    params: dict[str, object] = {
        **audit_stage_params(run.pipeline),
        "id_column": cfg.columns.id,
        "text_column": cfg.columns.text,
        "rows_in": run.input_rows,
        "rows_out": run.output_rows,
        "min_retention": cfg.gate.min_retention,
        "allowed_langs": list(cfg.audit.allowed_langs),
        "missing_rates": {k: v["missing_rate"] for k, v in run.columns.items()},
        "review_threshold": cfg.missing.review_threshold,
    }
    with log.stage(JOB, "audit", rows_in=run.output_rows, spark=spark) as st:
        hold("audit")
        kept = decisions.filter(F.col(STAGE).isNull())
        derived = precomputed_frame(kept, cfg.columns.id, NORM_HASH, BAD_CHARS, TEXT_LEN)
        result = audit_clean_output(spark, str(staging), params, cfg.audit.engine, derived)
        result.setdefault("ran", True)
        st.rows_out = run.output_rows
        st.note = "passed" if result.get("passed") else "FAILED"
    run.stage(Stage("audit", run.output_rows, run.output_rows, st.seconds, st.note))
    return result


def report_dict(spark: SparkSession, run: Run) -> dict[str, Any]:
    """report.json: the run's funnel, column health, stage figures and resolved config."""
    cfg = run.config
    retention = run.output_rows / run.input_rows if run.input_rows else 0.0
    report: dict[str, Any] = {
        "tool": "corpusclean",
        "version": __version__,
        "job": JOB,
        "run_id": run.run_id,
        # The killed run whose finished stages this run took up (`{run_id, stage, after}`).
        "resumed_from": run.resumed_from,
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
    }
    # Per prior index (`--against`): what each stage removed against it, and the cluster
    # stage's figures against it (`near`: its candidate pairs and verified edges).
    report["against"] = [
        {
            "name": idx.name,
            "path": idx.given,
            "documents": idx.documents,
            "removed": run.against_removed.get(idx.name, {}),
            "near": _cluster_figures_against(run).get(idx.name),
        }
        for idx in run.against
    ]
    report["index"] = run.index
    # Text lengths per bucket (`edges`: each bucket's lower bound) of input and output, and
    # rows in and out per value of the input's `lang` / `source` with what removed the rest.
    report["lengths"] = run.lengths
    report["breakdown"] = run.breakdown
    # Exact tokens of the output, when `tokens.tokenizer` names a tokenizer (null otherwise).
    report["tokens"] = run.tokens
    # Per quality filter (an Arrow scorer): the rows it removed and its scores' distribution
    # over the rows it scored, against each keep-rule bound (quantiles of 1 row in 8).
    report["quality"] = {
        name: {"removed": run.removed.get(name, 0), "quantiles_of": "1 row in 8", **figures}
        for name, figures in run.quality.items()
    }
    # Each cluster stage's figures, under its config section's name (near's `near_dedup`).
    for step in run.pipeline.dedups:
        if step.name in run.figures:
            report[step.section_name()] = run.figures[step.name]
    report.update(
        {
            "audit": run.audit,
            "config": cfg.resolved(),
            "spark": {
                "version": spark.version,
                "master": spark.sparkContext.master,
                "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                # What the running session holds for each setting the config asked for.
                "settings": effective_settings(spark, list(cfg.spark)),
                **executor_facts(spark),
                # Spark jobs the run started (each funnel line has its own `jobs`).
                "jobs": count_jobs(spark, run.run_id),
            },
            "seconds": round(time.time() - run.started, 3),
        }
    )
    return report


def _cluster_figures_against(run: Run) -> dict[str, Any]:
    """A cluster stage's figures per prior index (its figures' `against`), by index name."""
    for figures in run.figures.values():
        if isinstance(figures.get("against"), dict):
            return figures["against"]
    return {}


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `corpusclean clean` (and `spark-submit jobs/clean.py`)."""
    parser = new_parser(JOB, "Clean and deduplicate raw documents into a gated, published output.")
    parser.add_argument(
        "--input", help="Parquet or JSON Lines: file, folder, glob, hdfs://, s3a://"
    )
    parser.add_argument("--output", help="folder to publish into (replaced atomically on success)")
    parser.add_argument(
        "--config",
        help="YAML run config (same layout as conf/default.yaml), or a built-in preset by name: "
        "fineweb, zh-web (conf/presets/)",
    )
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
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="DIR_OR_INDEX",
        help="also dedup against an output already published (its index/), or an index "
        "folder from `corpusclean index`; repeatable, the first named wins ties",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start afresh even when a killed run of the same work left its finished stages",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean clean --input PATH --output DIR [--config F] [--set k=v]...`."""
    parser = build_parser()

    def body(args: argparse.Namespace) -> int:
        cfg = load_clean_config(args.config, args.set)
        if args.against:
            cfg.dedup.against = [*cfg.dedup.against, *args.against]
        if args.print_config:
            sys.stdout.write(dump_config(cfg))
            return 0
        if not args.input or not args.output:
            parser.error("--input and --output are required (or --print-config)")
        # Everything that needs no Spark is checked before it starts (seconds, not half a minute).
        checked = preflight(args.input, args.output, cfg)
        spark = build_session("corpusclean-clean", cfg.spark, [args.input])
        charts.preload()  # report.html's charts, drawn at the end
        check_shared_output(spark, args.output)
        run = clean(spark, args.input, args.output, cfg, not args.no_resume, checked)
        summary = {
            "input_rows": run.input_rows,
            "output_rows": run.output_rows,
            "retention": round(run.output_rows / run.input_rows, 4),
            "removed": run.removed,
        }
        if run.tokens is not None:
            summary["output_tokens"] = run.tokens["output"]
        print(json.dumps(summary))
        return 0

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
