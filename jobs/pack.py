"""`corpusclean pack`: a published clean output -> WebDataset tar shards and index.json.

    corpusclean pack --input CLEAN_DIR --output SHARD_DIR [--overwrite] [--set shard.KEY=VALUE]
    corpusclean pack --verify SHARD_DIR

One Spark pass, which brings no document to the driver. The shard order is cut into units, each
written whole by one task: ranges of a seeded hash of the doc_id with `shard.shuffle` on (the
default; one shuffle brings each range to its task, sorted by hash), or the input files in
input order (each file is one scan task that reads its own text; no shuffle). A task cuts its
units into shards as it goes, a shard closing when the next document would not fit, and
commits each shard as a numbered part of its unit under `_parts/`: written under a temporary
name, renamed on close, its stats file last, then a marker once the unit is complete. The
driver then numbers the parts of all units in unit order and renames them into place.

The driver then writes index.json (wids shard-index form) from the stats files, atomically and
last. A new pack goes straight into SHARD_DIR, because a rerun after a crash must find the
committed shards where the crashed run left them: it keeps those whose checksum still matches
and writes only the rest. A SHARD_DIR is finished exactly when it has index.json. A pack that
replaces another (`--overwrite`) is written the same way into a staging folder beside SHARD_DIR
and swapped in atomically once finished (`pack_staging`): the previous pack stays complete and
readable until then, and a rerun of the same command resumes in the staging folder.

The tar writer, the write tasks and the commit protocol (which file commits what, and what a
rerun does in each state of a pack folder) are `corpusclean.jobs.shards.pack_io`; this module plans
the Spark pass and writes the index's content.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from corpusclean.errors import (
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    CorpusCleanError,
    InputError,
    RejectedError,
)
from corpusclean.jobs.inputs.paths import check_output_vs_input, is_remote, local_files
from corpusclean.jobs.loadbench.settings import TrainSection
from corpusclean.jobs.outputs.publish import SUCCESS
from corpusclean.jobs.reports.tokens import render_token_html, token_report
from corpusclean.jobs.runtime.config import (
    Section,
    SparkSettings,
    TokenizerSection,
    dump_config,
    load_config,
)
from corpusclean.jobs.runtime.failures import disk_full
from corpusclean.jobs.runtime.log import Timer, described, fmt_rows, info, warn
from corpusclean.jobs.runtime.log import tasks as task_progress
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.shards import card as dataset_card
from corpusclean.jobs.shards import pack_io
from corpusclean.jobs.shards.integrity import (
    INDEX,
    INDEX_KIND,
    MEGATRON_KIND,
    HashingReader,
    damaged_error,
    read_samples,
    size_problem,
)
from corpusclean.jobs.shards.pack_io import (
    FORMAT_VERSION,
    ShardLayout,
    committed_parts,
    number_parts,
    open_output,
)
from corpusclean.jobs.shards.tokens import TokenWrite
from corpusclean.pipelines import shards as S
from corpusclean.pipelines.columns import (
    FILE,
    JSON,
    LINE,
    METADATA,
    PACK_ID,
    PACK_RESERVED,
    PARTITION_KEY,
    ROW,
    SHUFFLE_HASH,
    TXT,
    UNIT,
    reserved_in,
)
from corpusclean.pipelines.megatron import read_index
from corpusclean.pipelines.profile import BREAKDOWN_COLUMNS
from corpusclean.pipelines.tokenizers import load_tokenizer
from corpusclean.schemas import DEFAULT_ID_COLUMN, DEFAULT_TEXT_COLUMN

JOB = "pack"
# Shard bytes one write task takes at most when there are more units than twice the cores:
# enough to amortise a task's fixed cost, little enough to balance the cores and bound a
# task's sort (which spills beyond its memory share anyway).
_TASK_BYTES = 1 << 30
# Shards per hash range with shuffle on: each range's last shard may be less than half full,
# so 4 keeps that slack to ~1/8 of a shard per shard on average.
_UNIT_SHARDS = 4
# At most this many hash ranges (a larger corpus gets larger ranges, not more).
_MAX_UNITS = 1 << 16
# Tar bytes per byte of Parquet input, for sizing the hash ranges only: text is stored about
# 1.5-2x compressed, and each one-document sample adds ~1.5 KiB of headers and padding.
_TAR_PER_PARQUET_BYTE = 2


# --------------------------------------------------------------------------- config


class ShardSection(Section):
    """`shard.*`: how documents become WebDataset shards."""

    prefix: str = Field("shard", pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    target_bytes: int = Field(268_435_456, ge=10_240, le=1 << 40)
    docs_per_sample: int = Field(1, ge=1, le=65_536)
    shuffle: bool = True
    seed: int = Field(42, ge=0, le=2**31 - 1)
    dali_index: bool = True


class PackColumnsSection(Section):
    """`columns.*`: the clean output's id and text columns."""

    id: str = DEFAULT_ID_COLUMN
    text: str = DEFAULT_TEXT_COLUMN


class PackTokensSection(TokenizerSection):
    """`tokens.*`: a token pack's tokenizer, shard format and id dtype (conf/pack.yaml)."""

    format: Literal["megatron", "webdataset"] = "megatron"
    dtype: Literal["auto", "uint16", "int32"] = "auto"


class PackConfig(Section):
    """The resolved config of `corpusclean pack`."""

    shard: ShardSection = Field(default_factory=ShardSection)
    columns: PackColumnsSection = Field(default_factory=PackColumnsSection)
    tokens: PackTokensSection = Field(default_factory=PackTokensSection)
    # The planned run a token pack's report sizes against (conf/bench.yaml's `train`).
    train: TrainSection = Field(default_factory=TrainSection)
    spark: SparkSettings = Field(default_factory=dict)


@dataclass(frozen=True)
class TokenPlan:
    """A token pack's tokenizer, as loaded on the driver: what the tasks get, what the output
    records."""

    write: TokenWrite
    identity: dict[str, Any]
    vocab_size: int


def token_plan(config: PackConfig, columns: Sequence[str] = ()) -> TokenPlan | None:
    """The token side of a pack (None for text shards): the tokenizer loaded once on the
    driver, so an unknown name, a file that is no tokenizer or a dtype too small for its
    vocabulary is refused before anything is written. `columns`: the clean data's, whose
    `source`/`lang` the report breaks the counts down by."""
    spec = config.tokens.spec()
    if spec is None:
        return None
    if config.shard.docs_per_sample != 1:
        raise ConfigError(
            "a token pack writes one document a sample: set shard.docs_per_sample=1 (or pack "
            "text without --tokenizer)"
        )
    tok = load_tokenizer(spec)
    dtype = tok.dtype(config.tokens.dtype)
    roles = (config.columns.id, config.columns.text)
    breakdown = tuple(c for c in BREAKDOWN_COLUMNS if c in columns and c not in roles)
    write = TokenWrite(spec, config.tokens.format, dtype.name, breakdown)
    return TokenPlan(write, {**tok.identity(), "dtype": dtype.name}, tok.vocab_size)


def shard_layout(config: PackConfig) -> ShardLayout:
    """How the pack's shards are named: tars, or Megatron's .bin/.idx pairs."""
    if config.tokens.tokenizer is not None and config.tokens.format == "megatron":
        return ShardLayout(config.shard.prefix, "bin", True)
    return ShardLayout(config.shard.prefix, "tar", config.shard.dali_index)


# --------------------------------------------------------------------------- input and output


@dataclass(frozen=True)
class CleanSource:
    """A published clean output: its folder, data folder, report id and data files."""

    path: Path
    data: Path
    run_id: str | None
    files: list[tuple[str, int]]


def open_source(input_dir: str) -> CleanSource:
    """Check `input_dir` is a published clean output and list its data files."""
    if is_remote(input_dir):
        raise InputError(
            f"input {input_dir}: pack reads a clean output on a local or shared filesystem; "
            "copy it there or mount it"
        )
    path = Path(input_dir.removeprefix("file://")).expanduser().absolute()
    if not path.is_dir():
        raise InputError(f"input {input_dir} does not exist or is not a folder")
    if not (path / SUCCESS).is_file():
        raise InputError(
            f"input {path} is not a published clean output (no {SUCCESS}); point --input at "
            "the folder `corpusclean clean` published"
        )
    data = path / "data"
    if not data.is_dir():
        raise InputError(
            f"input {path} has no data/ folder; is it the output of corpusclean clean?"
        )
    run_id = None
    report = path / "report.json"
    if report.is_file():
        try:
            run_id = json.loads(report.read_text("utf-8")).get("run_id")
        except (json.JSONDecodeError, AttributeError):
            warn(JOB, f"{report} is not valid JSON; the index will not name the clean run")
    files = [
        (p.relative_to(data).as_posix(), p.stat().st_size)
        for p in local_files(str(data))
        if p.name.endswith(".parquet")
    ]
    return CleanSource(path, data, run_id, files)


def fingerprint(source: CleanSource, config: PackConfig, tokens: TokenPlan | None = None) -> str:
    """What a resumable run must share with the crashed one: input files, shard config and,
    for tokens, the tokenizer's identity (its file's SHA-256 among it): a pack never mixes
    the ids of two tokenizers."""
    payload: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "input": str(source.path),
        "report_run_id": source.run_id,
        "files": source.files,
        "shard": config.shard.model_dump(mode="json"),
        "columns": config.columns.model_dump(mode="json"),
    }
    if tokens is not None:
        payload["tokens"] = {**config.tokens.model_dump(mode="json"), "identity": tokens.identity}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class PackResult:
    """What a pack run produced."""

    output: Path
    shards: int
    docs: int
    written: int
    index: dict[str, Any]
    seconds: dict[str, float]


def _spark_failure(exc: Exception) -> CorpusCleanError:
    text = str(exc)
    if pack_io.DUPLICATE_MARK in text:
        line = next(ln for ln in text.splitlines() if pack_io.DUPLICATE_MARK in ln)
        dup = line.split(f"{pack_io.DUPLICATE_MARK}:", 1)[-1].strip()
        return InputError(
            f"doc_id {dup} occurs more than once in the input; pack needs the unique doc_ids "
            "of a clean output"
        )
    errors = re.findall(r"^\s*(\w+(?:Error|Exception): .+)$", text, flags=re.MULTILINE)
    first = text.splitlines()[0] if text else ""
    reason = errors[-1].strip() if errors else f"{type(exc).__name__}: {first}"
    return CorpusCleanError(
        f"writing shards failed ({reason[:300]}); committed shards are kept: rerun the same "
        "command to resume"
    )


def pack(
    input_dir: str, output_dir: str, config: PackConfig, overwrite: bool = False
) -> PackResult:
    """Pack a published clean output into WebDataset shards; resumes an unfinished run."""
    source = open_source(input_dir)
    check_output_vs_input([str(source.path)], output_dir)
    # (check_output_vs_input refuses an object-store output: tasks write shards as files.)
    out = Path(output_dir.removeprefix("file://")).expanduser().absolute()
    # Everything about the input is checked before the output is touched: a bad input leaves
    # a previous pack (even with --overwrite) and an unfinished one as they were.
    paths = [str(source.data / rel) for rel, _ in source.files]
    rows, schema = _check_input(paths, config)
    tokens = token_plan(config, [] if schema is None else schema.names)
    fp = fingerprint(source, config, tokens)
    where, resume, staging = open_output(out, fp, source.path, overwrite)
    if staging is not None and staging.finished:
        index = json.loads((where / INDEX).read_text("utf-8"))
        n_shards, docs, written, seconds = index["totals"]["shards"], rows, 0, {}
    else:
        if resume and staging is None:
            info(JOB, f"resuming the unfinished pack in {out}")
        try:
            n_shards, docs, written, seconds = _write(
                where, source, config, fp, resume, rows, tokens
            )
            index = build_index(where, source, config, n_shards, docs, fp, schema, tokens, out)
        except Exception as exc:
            full = disk_full(exc, out)
            if full is None:
                raise
            # Nothing to resume from a full disk, and the space is better given back; a pack
            # written in place keeps what it committed (it is the only copy there is).
            if staging is not None:
                staging.discard()
            raise full from exc
    if staging is not None:
        staging.publish()
    total = index["totals"]
    if total["docs"] == 0:
        warn(JOB, f"input {source.path} holds no documents; the index lists no shards")
    return PackResult(out, total["shards"], total["docs"], written, index, seconds)


def _write(
    out: Path,
    source: CleanSource,
    config: PackConfig,
    fp: str,
    resume: bool,
    rows: int,
    tokens: TokenPlan | None = None,
) -> tuple[int, int, int, dict[str, float]]:
    """Write (or finish) the shards of an unfinished pack in `out`; (shards, docs, written,
    seconds), as `_pack_units`."""
    from corpusclean.jobs.runtime.session import build_session, check_shared_output

    if not source.files:
        if resume:
            committed_parts(None, out, fp, 0, shard_layout(config))
        return 0, 0, 0, {}
    spark = build_session("corpusclean-pack", config.spark, [str(source.data)])
    check_shared_output(spark, str(out))
    scan_conf = {} if config.shard.shuffle else _whole_file_scan(source)
    with _session_conf(spark, scan_conf), described(spark, JOB, "write"):
        return _pack_units(spark, source, out, config, fp, resume, rows, tokens)


def _whole_file_scan(source: CleanSource) -> dict[str, str]:
    """Spark file-scan settings under which every input file is exactly one task, unsplit.

    A scan split is at most maxPartitionBytes, and an open cost that large stops Spark from
    adding a second file to a task. Input order then writes each file in its own task: see
    `_pack_units`.
    """
    largest = max(size for _, size in source.files)
    value = str(max(1 << 20, largest + 1))
    return {
        "spark.sql.files.maxPartitionBytes": value,
        "spark.sql.files.openCostInBytes": value,
        # A cap on scan tasks below the file count would merge files into one task again.
        "spark.sql.files.maxPartitionNum": str(max(1, len(source.files))),
    }


@contextmanager
def _session_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL settings for the duration of a block, then restore (or unset) them."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def shuffle_units(source: CleanSource, target_bytes: int) -> int:
    """How many hash ranges ("units") the shuffled shard order is cut into, from the input.

    A unit is written whole by one task, its last shard the only one that may be less than
    half full, so units of about `_UNIT_SHARDS` shards keep that slack small while leaving
    enough tasks to spread. The count must not depend on the cluster (it decides the bytes),
    so it comes from the input's file sizes, times the usual tar-over-Parquet growth of text.
    """
    estimate = _estimated_bytes(source)
    return int(min(_MAX_UNITS, max(1, -(-estimate // (_UNIT_SHARDS * target_bytes)))))


def _estimated_bytes(source: CleanSource) -> int:
    """The shards' bytes as the input's file sizes predict them (bench/pack.py prints both
    sizes of its runs)."""
    return sum(size for _, size in source.files) * _TAR_PER_PARQUET_BYTE


def _pack_units(
    spark: Any,
    source: CleanSource,
    out: Path,
    config: PackConfig,
    fp: str,
    resume: bool,
    rows: int,
    tokens: TokenPlan | None = None,
) -> tuple[int, int, int, dict[str, float]]:
    """Write every unit's shards in one Spark pass; returns (shards, docs, written, seconds).

    A unit is a stretch of the shard order that one task writes whole, cutting shards as it
    goes and committing them as numbered parts of the unit; the driver then numbers all parts
    in unit order and renames them (`number_parts`).

    * Shuffle on: units are ranges of a seeded hash of the doc_id. One shuffle brings each
      unit to one task (consecutive units share a task), sorted by hash.
    * Input order: each input file is a unit and one scan task (`_whole_file_scan`). Spark
      reads only the metadata columns (`_json`, or the `_line` of several docs per sample),
      and the task reads the text itself with pyarrow, row-aligned, since a plain Parquet
      read is several times cheaper than bringing the text through Spark rows and Arrow
      batches (bench/pack.py). No exchange at all.

    A token pack tokenizes in the same tasks (`tokens`), each Python worker loading the
    tokenizer once, so the text crosses to Python once and only ids are written.
    """
    shard_cfg = config.shard
    layout = shard_layout(config)
    target = S.planning_target(shard_cfg.target_bytes)
    seconds: dict[str, float] = {}
    paths = [str(source.data / rel) for rel, _ in source.files]
    everything = spark.read.parquet(str(source.data))
    columns = list(everything.columns)
    n_units = shuffle_units(source, target) if shard_cfg.shuffle else len(paths)
    timer = Timer()
    done, skip = (
        _resumed_units(spark, out, fp, n_units, shard_cfg.shuffle, layout)
        if resume
        else (set(), set())
    )
    todo = [u for u in range(n_units) if u not in done]
    spec = _unit_write_spec(out, config, fp, target, paths, skip, tokens)
    written = 0
    tasks: int | None = None  # stays None when every unit was packed already
    with timer():
        if todo:
            df, tasks = _write_input(
                spark, source, everything, columns, config, paths, n_units, todo, tokens
            )
            written = _write_units(spark, df, spec, out, rows, todo, done, skip)
        n_shards, docs = number_parts(out, layout, fp, n_units)
    seconds["write"] = timer.seconds
    if docs != rows:
        raise CorpusCleanError(f"the shards hold {docs} docs but the input has {rows} rows")
    how = _write_how(shard_cfg.shuffle, n_units, len(paths), tasks)
    info(
        JOB,
        f"write: {fmt_rows(docs)} docs -> {n_shards:,} shards ({written:,} written; {how}) "
        f"({timer.seconds:.1f}s)",
    )
    return n_shards, docs, written, seconds


def _resumed_units(
    spark: Any, out: Path, fp: str, n_units: int, shuffle: bool, layout: ShardLayout
) -> tuple[set[int], set[tuple[int, int]]]:
    """What a resumed pack keeps, as `committed_parts` finds it: (finished units, committed
    parts); logs how many units are already packed."""
    done, skip = committed_parts(spark, out, fp, n_units, layout)
    what = "hash ranges" if shuffle else "input files"
    info(JOB, f"resume: {len(done):,} of {n_units:,} {what} already packed")
    return done, skip


def _unit_write_spec(
    out: Path,
    config: PackConfig,
    fp: str,
    target: int,
    paths: list[str],
    skip: set[tuple[int, int]],
    tokens: TokenPlan | None = None,
) -> pack_io.UnitWriteSpec:
    """What every write task gets besides its documents: the output, shard settings, the
    input files (input order only), the committed parts it must not write again and, for a
    token pack, the tokenizer."""
    shard_cfg = config.shard
    return pack_io.UnitWriteSpec(
        output_dir=str(out),
        docs_per_sample=shard_cfg.docs_per_sample,
        dali_index=shard_cfg.dali_index,
        fingerprint=fp,
        id_col=config.columns.id,
        capacity=target,
        files=() if shard_cfg.shuffle else tuple(os.path.realpath(p) for p in paths),
        text_col=config.columns.text,
        skip=frozenset(skip),
        tokens=None if tokens is None else tokens.write,
    )


def _write_input(
    spark: Any,
    source: CleanSource,
    everything: Any,
    columns: list[str],
    config: PackConfig,
    paths: list[str],
    n_units: int,
    todo: list[int],
    tokens: TokenPlan | None = None,
) -> tuple[Any, int]:
    """The write tasks' input for units `todo` of `n_units`: hash ranges (`shard.shuffle` on)
    or the input files `paths`, one unit each; returns (DataFrame, tasks)."""
    if config.shard.shuffle:
        estimate = _estimated_bytes(source) * len(todo) // n_units
        return _shuffled_units(spark, everything, columns, config, n_units, todo, estimate, tokens)
    files = [paths[u] for u in todo]
    scan = everything if len(files) == len(paths) else None
    return _file_units(spark, source, columns, config, files, scan, tokens)


def _payload_columns(config: PackConfig, tokens: TokenPlan | None, shuffled: bool) -> list[str]:
    """The payload a write task gets from Spark: the text (`_txt`, which input order reads
    from the file itself) and the other columns as JSON (`_json`: not in Megatron's shards),
    or several documents' JSON lines (`_line`); then the columns a token report breaks the
    counts down by."""
    if config.shard.docs_per_sample != 1:
        return [LINE]
    payload = [TXT] if shuffled else []
    if tokens is None or tokens.write.format != "megatron":
        payload.append(JSON)
    return payload + ([] if tokens is None else list(tokens.write.breakdown))


def _write_units(
    spark: Any,
    df: Any,
    spec: pack_io.UnitWriteSpec,
    out: Path,
    rows: int,
    todo: list[int],
    done: set[int],
    skip: set[tuple[int, int]],
) -> int:
    """Run the write tasks over `df` (the pass's one Spark job) and mark the units that
    reached no task; returns how many parts this run wrote."""
    write = partial(pack_io.write_unit_parts, spec=spec)
    results = df.mapInArrow(write, pack_io.UNIT_RESULT_SCHEMA)
    info(JOB, f"write: started ({fmt_rows(rows)} docs, {len(todo):,} units to write)")
    try:
        with task_progress(JOB, "write:", spark):
            finished = results.collect()
    except Exception as exc:
        raise _spark_failure(exc) from exc
    written = sum(int(r["parts"]) for r in finished)
    written -= len([u for u, _ in skip if u not in done])
    # A unit with no rows (an empty hash range or file) reaches no task: mark it here,
    # so that every unit has its marker before numbering starts (`committed_parts`).
    seen = {int(r["unit"]) for r in finished}
    for u in todo:
        if u not in seen:
            pack_io.write_unit_marker(out, u, 0, 0, spec.fingerprint)
    return written


def _write_how(shuffle: bool, n_units: int, n_files: int, tasks: int | None) -> str:
    """How the write ran, for its log line; `tasks` is None when nothing was left to write."""
    if tasks is None:
        return "nothing left to write"
    if shuffle:
        return f"{n_units:,} hash ranges in {tasks:,} tasks"
    return f"{n_files:,} files, one task per file"


def _shuffled_units(
    spark: Any,
    raw: Any,
    columns: list[str],
    config: PackConfig,
    n_units: int,
    todo: list[int],
    unit_bytes: int,
    tokens: TokenPlan | None = None,
) -> tuple[Any, int]:
    """The shuffled write input: units `todo` of `n_units` hash ranges (about `unit_bytes` of
    samples in all), each whole in one task in hash order; returns (DataFrame, tasks)."""
    import pyarrow as pa
    import pyspark.sql.functions as F

    shard_cfg = config.shard
    n_tasks = write_task_count(len(todo), unit_bytes, spark.sparkContext.defaultParallelism)
    task_of = np.arange(len(todo)) * n_tasks // len(todo)
    lookup = pa.table(
        {
            UNIT: pa.array(todo, pa.int64()),
            PARTITION_KEY: pa.array(S.partition_keys(n_tasks)[task_of], pa.int32()),
        }
    )
    # The payload first, and then only it and the id: the user's own columns (some may be
    # named like pack's `_h` or `_unit`) are then in the payload, unchanged, and nowhere else.
    doc_id = S.column(config.columns.id)
    df = S.add_shard_payload(raw, columns, config.columns.text, shard_cfg.docs_per_sample)
    payload = _payload_columns(config, tokens, shuffled=True)
    df = df.select(doc_id.alias(PACK_ID), *[S.column(c) for c in payload])
    df = S.add_unit(S.add_shuffle_order(df, PACK_ID, shard_cfg.seed), n_units)
    staged = (
        df.join(F.broadcast(spark.createDataFrame(lookup)), on=UNIT, how="inner")
        .repartition(n_tasks, PARTITION_KEY)
        .sortWithinPartitions(UNIT, SHUFFLE_HASH, PACK_ID)
        .select(UNIT, F.col(PACK_ID).alias(config.columns.id), *payload)
    )
    return staged, n_tasks


def _file_units(
    spark: Any,
    source: CleanSource,
    columns: list[str],
    config: PackConfig,
    todo: list[str],
    scan_all: Any = None,
    tokens: TokenPlan | None = None,
) -> tuple[Any, int]:
    """The input-order write input: files `todo`, each one scan task; returns (DataFrame,
    number of tasks). `scan_all`, a read of all the input, is reused when `todo` is all."""
    raw = scan_all
    if raw is None:
        raw = spark.read.option("basePath", str(source.data)).parquet(*todo)
    # Planning only (no job): the scan's tasks, one per file under `_whole_file_scan`.
    if raw.rdd.getNumPartitions() != len(todo):
        raise CorpusCleanError(
            "input order needs each input file whole in one Spark task, but the scan has "
            f"{raw.rdd.getNumPartitions()} tasks for {len(todo)} files; check the "
            "spark.sql.files.* settings"
        )
    k = config.shard.docs_per_sample
    # The payload before `_file` and `_row`, which the user's columns may be named like.
    df = S.add_shard_payload(raw, columns, config.columns.text, k)
    payload = _payload_columns(config, tokens, shuffled=False)
    df = df.select(
        raw[f"{METADATA}.file_path"].alias(FILE),
        raw[f"{METADATA}.row_index"].alias(ROW),
        S.column(config.columns.id),
        *[S.column(c) for c in payload],
    )
    return df, len(todo)


def _footer(path: str) -> tuple[int, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
        return meta.num_rows, meta.schema.to_arrow_schema()
    except (OSError, pa.ArrowException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"input file {path} is not a readable Parquet file ({first})") from exc


def _check_input(paths: list[str], config: PackConfig) -> tuple[int, Any]:
    """Check every input file's footer (readable, one schema, the id and text columns) and
    return their rows and their Arrow schema (None without files). Footers are read in
    parallel: on a shared filesystem each is a round trip."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        footers = list(pool.map(_footer, paths))
    if not footers:
        return 0, None
    schema = footers[0][1]
    shape = [(f.name, f.type) for f in schema]
    for path, (_, other) in zip(paths, footers, strict=True):
        if [(f.name, f.type) for f in other] != shape:
            raise InputError(
                f"input file {path} has columns {_columns(other)}, but {paths[0]} has "
                f"{_columns(schema)}; the files of a clean output share one schema"
            )
    _check_columns(schema, config)
    return sum(rows for rows, _ in footers), schema


def _columns(schema: Any) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _check_columns(schema: Any, config: PackConfig) -> None:
    import pyarrow as pa

    fields = {f.name: f.type for f in schema}
    clash = reserved_in(fields, PACK_RESERVED)
    if clash:
        raise InputError(
            f"the clean data has a column {clash[0]!r}, a name pack uses for its own "
            f"bookkeeping (reserved: {', '.join(sorted(PACK_RESERVED))}); rename that column "
            "in the input and rerun"
        )
    for role, name in (("columns.id", config.columns.id), ("columns.text", config.columns.text)):
        if name not in fields:
            raise InputError(
                f"the clean data has no column {name!r} ({role}); its columns are "
                f"{', '.join(fields)}; set {role}=NAME"
            )
        if not (pa.types.is_string(fields[name]) or pa.types.is_large_string(fields[name])):
            raise InputError(f"column {name!r} ({role}) is {fields[name]}, not string")
    if config.columns.id == config.columns.text:
        raise InputError("columns.id and columns.text name the same column")


def shuffle_tasks(source: CleanSource, target_bytes: int, parallelism: int) -> int:
    """Tasks a whole shuffled pack of `source` writes in (bench/pack.py gives its shuffled
    rewrite as many)."""
    units = shuffle_units(source, S.planning_target(target_bytes))
    return write_task_count(units, _estimated_bytes(source), parallelism)


def write_task_count(units: int, unit_bytes: int, parallelism: int) -> int:
    """Tasks the shuffled write spreads `units` hash ranges of `unit_bytes` in all over.

    Consecutive units share a task: every Python task costs a fixed worker round trip (of a
    core's time; bench/python_tasks.py measures it, with and without corpusclean's zipimport
    fix), while a task per unit would buy nothing once every core has two. Which task a
    unit goes to changes no byte of the output.
    """
    return max(1, min(units, max(2 * parallelism, -(-unit_bytes // _TASK_BYTES))))


def build_index(
    out: Path,
    source: CleanSource,
    config: PackConfig,
    n_shards: int,
    planned: int,
    fp: str,
    schema: Any = None,
    tokens: TokenPlan | None = None,
    final: Path | None = None,
) -> dict[str, Any]:
    """Write index.json and the dataset card (with the input's Arrow `schema`, its column
    types) from the committed shards' stats files; fails if any shard is missing. A token
    pack also gets its report (report.json, report.html) and, for Megatron, data_path.txt:
    `final` is the folder the pack is published as (its prefixes' absolute paths)."""
    layout = shard_layout(config)
    prefix = layout.prefix
    entries = pack_io.shard_entries(out, layout, fp, n_shards)
    docs = sum(e["ndocs"] for e in entries)
    if docs != planned:
        raise CorpusCleanError(f"the shards hold {docs} docs but their units hold {planned}")
    members = ["json", "txt"] if config.shard.docs_per_sample == 1 else ["jsonl"]
    if tokens is not None:
        members = ["bin", "idx"] if layout.ext == "bin" else ["json", "npy"]
    totals = {
        "shards": len(entries),
        "samples": sum(e["nsamples"] for e in entries),
        "docs": docs,
        "bytes": sum(e["filesize"] for e in entries),
    }
    if tokens is not None:
        totals["tokens"] = sum(int(e.get("ntokens", 0)) for e in entries)
    index: dict[str, Any] = {
        "__kind__": MEGATRON_KIND if layout.ext == "bin" else INDEX_KIND,
        "wids_version": 1,
        "name": prefix,
        "shardlist": entries,
        "totals": totals,
        "source": {"clean_dir": str(source.path), "report_run_id": source.run_id},
        "format": {
            "members": members,
            "docs_per_sample": config.shard.docs_per_sample,
            "key": "doc_id if it matches [A-Za-z0-9_-]{1,64}, else its readable part + '~' + "
            "16 hex digits of BLAKE2b(doc_id); the doc_id itself is in the metadata",
            "checksum": "sha256",
            "dali_index": config.shard.dali_index and layout.ext == "tar",
        },
        "config": {
            "shard": config.shard.model_dump(mode="json"),
            "columns": config.columns.model_dump(mode="json"),
        },
    }
    extra: dict[str, str] = {}
    if tokens is not None:
        index["format"]["tokens"] = {"format": config.tokens.format, "dtype": tokens.write.dtype}
        index["tokenizer"] = tokens.identity
        index["config"]["tokens"] = config.tokens.model_dump(mode="json")
        extra = _token_files(out, config, tokens, index, entries, fp, final or out)
    if layout.ext == "bin":
        card = dataset_card.render_megatron(
            prefix, index["totals"], tokens.identity if tokens else {}
        )
    else:
        card = dataset_card.render(
            prefix,
            [e["sha256"] for e in entries],
            schema if tokens is None else None,
            config.columns.text,
            config.shard.docs_per_sample,
            index["totals"],
        )
    pack_io.write_index(out, index, card, extra)
    return index


def _token_files(
    out: Path,
    config: PackConfig,
    tokens: TokenPlan,
    index: dict[str, Any],
    entries: list[dict[str, Any]],
    fp: str,
    final: Path,
) -> dict[str, str]:
    """A token pack's report (json and html) from its units' counts, and for Megatron the
    `--data-path` of its prefixes, each weighted by its tokens (index.json's `megatron` too)."""
    counts = pack_io.unit_token_counts(out, fp)
    if counts.tokens != index["totals"]["tokens"]:
        raise CorpusCleanError(
            f"the units counted {counts.tokens:,} tokens but the shards hold "
            f"{index['totals']['tokens']:,}; rerun with --overwrite"
        )
    run = {"input": index["source"]["clean_dir"], "output": str(final)}
    report = token_report(
        counts,
        tokens.identity,
        config.tokens.format,
        index["totals"]["shards"],
        index["totals"]["bytes"],
        config.train,
        run,
    )
    files = {
        "report.json": json.dumps(report, indent=2, ensure_ascii=False) + "\n",
        "report.html": render_token_html(report),
    }
    if config.tokens.format == "megatron":
        prefixes = [
            {
                "prefix": e["url"].removesuffix(".bin"),
                "tokens": int(e["ntokens"]),
                "documents": int(e["ndocs"]),
            }
            for e in entries
            if e["ndocs"]
        ]
        # Megatron-LM's `--data-path W1 PREFIX1 W2 PREFIX2 ...`: weights by tokens draw every
        # shard in proportion to its size (Megatron normalises them).
        data_path = " ".join(f"{p['tokens']} {final / p['prefix']}" for p in prefixes)
        index["megatron"] = {"prefixes": prefixes, "data_path": data_path}
        files["data_path.txt"] = data_path + "\n"
    index["report"] = "report.json"
    return files


# --------------------------------------------------------------------------- verify


def _ids_problem(url: str, ids: np.ndarray, vocab: int | None) -> str | None:
    """An id outside the tokenizer's vocabulary, named."""
    if vocab is None or not ids.size:
        return None
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab:
        return f"{url}: holds id {low if low < 0 else high}, outside the vocabulary of {vocab:,}"
    return None


def _bin_digest(path: Path, dtype: np.dtype) -> tuple[str, int, int]:
    """(sha256, smallest id, largest id) of a Megatron .bin, in one read of the file."""
    sha = hashlib.sha256()
    low, high = 0, -1
    dtype = dtype.newbyteorder("<")
    # Whole ids a block, so no id is cut between two reads.
    block = (8 << 20) - (8 << 20) % dtype.itemsize
    with open(path, "rb") as fh:
        while data := fh.read(block):
            sha.update(data)
            ids = np.frombuffer(data, dtype)
            if ids.size:
                low = int(ids.min()) if high < 0 else min(low, int(ids.min()))
                high = max(high, int(ids.max()))
    return sha.hexdigest(), low, high


def _verify_megatron(root: Path, entry: dict[str, Any], vocab: int | None) -> str | None:
    """One Megatron shard against its entry: sizes and checksums of the .bin and .idx, the
    .idx's own consistency with the .bin, documents and tokens, every id in the vocabulary
    (the .bin read once, for its checksum and its ids together)."""
    url = entry["url"]
    path = root / url
    problem = size_problem(path, entry)
    if problem is not None:
        return problem
    idx = root / entry.get("idx", Path(url).with_suffix(".idx").name)
    if not idx.is_file():
        return f"{idx.name}: missing Megatron index"
    data = idx.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry.get("idx_sha256"):
        return f"{idx.name}: sha256 differs from the index"
    try:
        parsed = read_index(data)
    except ValueError as exc:
        return f"{idx.name}: not a Megatron index ({exc})"
    sha, low, high = _bin_digest(path, parsed.dtype)
    if sha != entry.get("sha256"):
        return f"{url}: sha256 differs from the index"
    if parsed.bin_bytes != entry["filesize"]:
        return (
            f"{idx.name}: counts {parsed.bin_bytes:,} bytes of ids, {url} has {entry['filesize']:,}"
        )
    if parsed.lengths.size != entry["ndocs"]:
        return f"{idx.name}: {parsed.lengths.size} documents, the index says {entry['ndocs']}"
    if parsed.tokens != entry.get("ntokens"):
        return f"{idx.name}: {parsed.tokens} tokens, the index says {entry.get('ntokens')}"
    return _ids_problem(url, np.array([low, high]) if high >= 0 else np.zeros(0), vocab)


def _npy_tokens(url: str, data: bytes, vocab: int | None) -> tuple[int, str | None]:
    """(ids, problem) of one sample's `.npy` member."""
    try:
        ids = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError) as exc:
        return 0, f"{url}: an npy member is not a NumPy array ({exc})"
    return int(ids.size), _ids_problem(url, ids, vocab)


def _verify_shard(
    root: Path, entry: dict[str, Any], dali: bool, vocab: int | None = None
) -> str | None:
    url = entry["url"]
    path = root / url
    problem = size_problem(path, entry)
    if problem is not None:
        return problem
    nsamples = ndocs = ntokens = 0
    try:
        with open(path, "rb") as raw:
            stream = HashingReader(raw)
            for sample in read_samples(stream, url):
                nsamples += 1
                ndocs += sample["jsonl"].count(b"\n") if "jsonl" in sample else 1
                if "npy" in sample:
                    n, problem = _npy_tokens(url, sample["npy"], vocab)
                    if problem is not None:
                        return problem
                    ntokens += n
            stream.drain()
    except Exception as exc:  # any reader failure is this shard's defect, reported by name
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{url}: unreadable by webdataset ({type(exc).__name__}: {first[:200]})"
    if stream.sha.hexdigest() != entry.get("sha256"):
        return f"{url}: sha256 differs from the index"
    if nsamples != entry["nsamples"]:
        return f"{url}: {nsamples} samples, the index says {entry['nsamples']}"
    if "ndocs" in entry and ndocs != entry["ndocs"]:
        return f"{url}: {ndocs} docs, the index says {entry['ndocs']}"
    if "ntokens" in entry and ntokens != entry["ntokens"]:
        return f"{url}: {ntokens} tokens, the index says {entry['ntokens']}"
    if dali:
        idx = root / entry.get("dali_index", Path(url).with_suffix(".idx").name)
        if not idx.is_file():
            return f"{idx.name}: missing DALI index"
        data = idx.read_bytes()
        if "dali_sha256" in entry and hashlib.sha256(data).hexdigest() != entry["dali_sha256"]:
            return f"{idx.name}: sha256 differs from the index"
        head = data.split(b"\n", 1)[0].decode("utf-8", errors="replace")
        if head != f"v1.2 {nsamples}":
            return f"{idx.name}: header {head!r} does not match {nsamples} samples"
    return None


def verify(shard_dir: str) -> dict[str, int]:
    """Re-read every shard with webdataset; RejectedError naming the shards that differ."""
    root = Path(shard_dir).expanduser().absolute()
    index_path = root / INDEX
    if not index_path.is_file():
        raise InputError(
            f"{root} has no {INDEX}: not a finished pack (an unfinished one is completed by "
            "rerunning the same pack command)"
        )
    try:
        index = json.loads(index_path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise RejectedError(f"{index_path} is not valid JSON (line {exc.lineno})") from exc
    kind = index.get("__kind__")
    if kind not in (INDEX_KIND, MEGATRON_KIND) or not isinstance(index.get("shardlist"), list):
        raise RejectedError(f"{index_path} is not a {INDEX_KIND} file")
    entries = index["shardlist"]
    dali = bool(index.get("format", {}).get("dali_index"))
    vocab = (index.get("tokenizer") or {}).get("vocab_size")

    def one(entry: dict[str, Any]) -> str | None:
        if kind == MEGATRON_KIND:
            return _verify_megatron(root, entry, vocab)
        return _verify_shard(root, entry, dali, vocab)

    timer = Timer()
    with timer(), ThreadPoolExecutor(max_workers=4) as pool:
        problems = [p for p in pool.map(one, entries) if p]
    if problems:
        raise damaged_error(problems, len(entries))
    totals = {
        "shards": len(entries),
        "samples": sum(e["nsamples"] for e in entries),
        "docs": sum(e.get("ndocs", e["nsamples"]) for e in entries),
        "bytes": sum(e["filesize"] for e in entries),
    }
    if "tokens" in index.get("totals", {}):
        totals["tokens"] = sum(int(e.get("ntokens", 0)) for e in entries)
    if totals != {k: index.get("totals", totals).get(k) for k in totals}:
        raise RejectedError(f"{index_path}: totals do not add up to its shard list")
    info(JOB, f"verify: {totals['shards']:,} shards match {INDEX} ({timer.seconds:.1f}s)")
    return totals


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    parser = new_parser(JOB, "Pack a published clean output into WebDataset tar shards.")
    parser.add_argument(
        "--input", metavar="CLEAN_DIR", help="a folder `corpusclean clean` published"
    )
    parser.add_argument("--output", metavar="SHARD_DIR", help="where the shards and index.json go")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a finished or different pack in SHARD_DIR"
    )
    parser.add_argument(
        "--verify", metavar="SHARD_DIR", help="re-read the shards of SHARD_DIR and check index.json"
    )
    parser.add_argument("--config", metavar="FILE", help="YAML config (layout of conf/pack.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key, e.g. --set shard.target_bytes=64000000 (repeatable)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="NAME|PATH",
        help="pack token ids instead of text: a preset (deepseek-v3, qwen2.5, qwen3.6) or a "
        "tokenizer.json, .tiktoken or SentencePiece .model file (sets tokens.tokenizer; "
        "tokens.format: megatron or webdataset)",
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved config")
    return parser


def _usage_error(message: str) -> int:
    print(f"corpusclean {JOB}: usage error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _body(args: argparse.Namespace) -> int:
    if args.verify is not None:
        if args.input or args.output or args.overrides or args.overwrite or args.tokenizer:
            return _usage_error("--verify SHARD_DIR takes no other arguments")
        totals = verify(args.verify)
        of_tokens = f", {totals['tokens']} tokens" if "tokens" in totals else ""
        print(
            f"{args.verify}: {totals['shards']} shards, {totals['samples']} samples, "
            f"{totals['docs']} docs{of_tokens} verified"
        )
        return EXIT_OK
    overrides = list(args.overrides)
    if args.tokenizer:
        overrides.append(f"tokens.tokenizer={json.dumps(args.tokenizer)}")
    config = load_config(PackConfig, "pack", args.config, overrides)
    if args.print_config:
        print(dump_config(config), end="")
        return EXIT_OK
    if not args.input or not args.output:
        return _usage_error("--input CLEAN_DIR and --output SHARD_DIR are required")
    result = pack(args.input, args.output, config, overwrite=args.overwrite)
    tokens = result.index["totals"].get("tokens")
    of_tokens = "" if tokens is None else f", {tokens} tokens"
    print(f"{result.output}: {result.shards} shards, {result.docs} docs{of_tokens}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean pack ...` (or `spark-submit jobs/pack.py ...`); returns the exit code."""
    return run_job(JOB, _parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
