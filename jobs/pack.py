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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from corpusclean.jobs.config import Section, SparkSettings, dump_config, load_config
from corpusclean.jobs.errors import EXIT_OK, EXIT_USAGE, CorpusCleanError, InputError, RejectedError
from corpusclean.jobs.failures import disk_full
from corpusclean.jobs.log import Timer, described, fmt_rows, info, warn
from corpusclean.jobs.log import tasks as task_progress
from corpusclean.jobs.pack_staging import Staging, open_staging, owner, repair
from corpusclean.jobs.paths import check_output_vs_input, is_remote, local_files
from corpusclean.jobs.publish import MARKER, SUCCESS, new_run_id
from corpusclean.jobs.runner import new_parser, run_job
from corpusclean.jobs.shardcheck import damaged_error, size_problem
from corpusclean.pipelines import shards as S
from corpusclean.pipelines.columns import PACK_RESERVED, reserved_in
from corpusclean.testhook import hold

JOB = "pack"
INDEX = "index.json"
INDEX_KIND = "wids-shard-index-v1"
# Part of every resume fingerprint: a change to the shard layout must not resume old shards.
# 2: in input order, shards no longer span input files.
# 3: in input order, each file is cut greedily as it is written (no plan pass).
# 4: with shuffle on too, hash ranges are cut greedily as they are written (no plan pass).
# 5: a batch holding several hash ranges is cut per range; jsonl samples are sized by their
#    worst-case padding, so shards of several documents per sample keep to target_bytes.
FORMAT_VERSION = 5
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
    dali_index: bool = False


class PackColumnsSection(Section):
    """`columns.*`: the clean output's id and text columns."""

    id: str = "doc_id"
    text: str = "text"


class PackConfig(Section):
    """The resolved config of `corpusclean pack`."""

    shard: ShardSection = Field(default_factory=ShardSection)
    columns: PackColumnsSection = Field(default_factory=PackColumnsSection)
    spark: SparkSettings = Field(default_factory=dict)


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


def fingerprint(source: CleanSource, config: PackConfig) -> str:
    """What a resumable run must share with the crashed one: input files and shard config."""
    payload = {
        "format": FORMAT_VERSION,
        "input": str(source.path),
        "report_run_id": source.run_id,
        "files": source.files,
        "shard": config.shard.model_dump(mode="json"),
        "columns": config.columns.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _read_marker(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out / MARKER).read_text("utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _check_owner(out: Path) -> bool:
    """Check `out` may hold a pack (missing, empty, or a pack's folder); True if it holds one.

    A first run killed while writing its marker leaves only the marker's temporary file in an
    otherwise empty folder, which is removed; beside anything else, nothing is touched.
    """
    if out.exists() and not out.is_dir():
        raise InputError(f"output {out} exists and is not a folder")
    if not out.is_dir():
        return False
    if not (out / MARKER).exists():
        leftovers = list(out.iterdir())
        if leftovers and all(
            re.fullmatch(rf"\.{re.escape(MARKER)}\..+\.tmp", p.name) for p in leftovers
        ):
            for leftover in leftovers:
                leftover.unlink()
    if not any(out.iterdir()):
        return False
    marker = _read_marker(out)
    if marker is None or marker.get("job") != JOB:
        owner = f"`corpusclean {marker.get('job')}`" if marker else "something else"
        raise InputError(
            f"output {out} is a non-empty folder written by {owner}, not corpusclean pack; "
            "choose another folder or empty it"
        )
    return True


def prepare_output(out: Path, fp: str, source: CleanSource, run_id: str | None = None) -> bool:
    """Make `out` ready to write into; True when it holds an unfinished run to resume.

    `run_id` names a new run (a staging folder's own); a resumed run keeps its marker, with
    this process as its owner.
    """
    resume = False
    if _check_owner(out):
        marker = _read_marker(out) or {}
        if (out / INDEX).exists():
            raise InputError(
                f"output {out} already holds a finished pack; pass --overwrite to replace it"
            )
        if marker.get("format") != FORMAT_VERSION:
            raise InputError(
                f"output {out} holds an unfinished pack in shard format "
                f"{marker.get('format', 'before 5')}, and this corpusclean writes format "
                f"{FORMAT_VERSION}; pass --overwrite to pack it again"
            )
        if marker.get("fingerprint") != fp:
            raise InputError(
                f"output {out} holds an unfinished pack of another input or config; rerun with "
                "the same --input and --set values to resume it, or pass --overwrite"
            )
        resume = True
        if "owner" in marker:  # a staging folder: its owner is now this process
            S.write_text_atomic(out / MARKER, json.dumps({**marker, "owner": owner()}) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        # The marker before anything else, so no crash leaves a folder that is not ours.
        marker = {
            "job": JOB,
            "run_id": run_id or new_run_id(),
            "fingerprint": fp,
            "format": FORMAT_VERSION,
            "input": str(source.path),
        }
        if run_id is not None:
            marker["owner"] = owner()
        S.write_text_atomic(out / MARKER, json.dumps(marker) + "\n")
    for folder in (S.STATS_DIR, S.TMP_DIR, S.PARTS_DIR):
        (out / folder).mkdir(exist_ok=True)
    return resume


def _not_the_pack(out: Path) -> list[str]:
    """The top-level entries of a pack folder that its index.json does not account for."""
    own = {MARKER, INDEX, S.STATS_DIR, S.TMP_DIR, S.PARTS_DIR}
    index = _load_json(out / INDEX) or {}
    for entry in index.get("shardlist", []):
        if isinstance(entry, dict):
            own.update(str(entry.get(key)) for key in ("url", "dali_index") if entry.get(key))
    if not index:  # an unfinished pack: its shards are named by its stats files
        own.update(p.with_suffix(".tar").name for p in (out / S.STATS_DIR).glob("*.json"))
        own.update(p.with_suffix(".idx").name for p in (out / S.STATS_DIR).glob("*.json"))
    return sorted(p.name for p in out.iterdir() if p.name not in own)


def open_output(
    out: Path, fp: str, source: CleanSource, overwrite: bool
) -> tuple[Path, bool, Staging | None]:
    """Where this run writes: (folder, resume?, staging or None).

    A pack replacing a non-empty pack folder (`--overwrite`) is written into a staging folder
    beside it (resumed if a crashed run of the same pack left one), else into `out` itself.
    """
    repair(out)
    if not (_check_owner(out) and overwrite):
        return out, prepare_output(out, fp, source), None
    foreign = _not_the_pack(out)
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        warn(
            JOB,
            f"--overwrite: {out} also holds {len(foreign)} file(s) that are not part of its "
            f"pack, which go with it: {', '.join(foreign[:5])}{more}",
        )
    staging = open_staging(out, fp, FORMAT_VERSION)
    if staging.finished:
        info(JOB, f"--overwrite: the replacement pack in {staging.folder} is finished")
        return staging.folder, True, staging
    resume = prepare_output(staging.folder, fp, source, staging.run_id)
    what = "resuming the replacement" if resume else "writing the replacement"
    info(JOB, f"--overwrite: {what} in {staging.folder}; {out} stays as it is until it is done")
    return staging.folder, resume, staging


# --------------------------------------------------------------------------- resume


def _check_committed(item: tuple[int, str, str]) -> tuple[int, bool]:
    shard, path, sha = item
    try:
        return shard, S.file_sha256(path)[1] == sha
    except OSError:
        return shard, False


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
    if S.DUPLICATE_MARK in text:
        line = next(ln for ln in text.splitlines() if S.DUPLICATE_MARK in ln)
        dup = line.split(f"{S.DUPLICATE_MARK}:", 1)[-1].strip()
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
    fp = fingerprint(source, config)
    # Everything about the input is checked before the output is touched: a bad input leaves
    # a previous pack (even with --overwrite) and an unfinished one as they were.
    paths = [str(source.data / rel) for rel, _ in source.files]
    rows = _check_input(paths, config)
    where, resume, staging = open_output(out, fp, source, overwrite)
    if staging is not None and staging.finished:
        index = json.loads((where / INDEX).read_text("utf-8"))
        n_shards, docs, written, seconds = index["totals"]["shards"], rows, 0, {}
    else:
        if resume and staging is None:
            info(JOB, f"resuming the unfinished pack in {out}")
        try:
            n_shards, docs, written, seconds = _write(where, source, config, fp, resume, rows)
            index = build_index(where, source, config, n_shards, docs, fp)
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
    out: Path, source: CleanSource, config: PackConfig, fp: str, resume: bool, rows: int
) -> tuple[int, int, int, dict[str, float]]:
    """Write (or finish) the shards of an unfinished pack in `out`; (shards, docs, written,
    seconds), as `_pack_units`."""
    from corpusclean.jobs.session import build_session, check_shared_output

    if not source.files:
        if resume:
            committed_parts(None, out, fp, 0, config.shard)
        return 0, 0, 0, {}
    spark = build_session("corpusclean-pack", config.spark)
    check_shared_output(spark, str(out))
    scan_conf = {} if config.shard.shuffle else _whole_file_scan(source)
    with _session_conf(spark, scan_conf), described(spark, JOB, "write"):
        return _pack_units(spark, source, out, config, fp, resume, rows)


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
    """The shards' bytes as the input's file sizes predict them (bench/pack.py: ~1.9x)."""
    return sum(size for _, size in source.files) * _TAR_PER_PARQUET_BYTE


def _pack_units(
    spark: Any,
    source: CleanSource,
    out: Path,
    config: PackConfig,
    fp: str,
    resume: bool,
    rows: int,
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
    """
    shard_cfg = config.shard
    target = S.planning_target(shard_cfg.target_bytes)
    k = shard_cfg.docs_per_sample
    seconds: dict[str, float] = {}
    paths = [str(source.data / rel) for rel, _ in source.files]
    everything = spark.read.parquet(str(source.data))
    columns = list(everything.columns)
    n_units = shuffle_units(source, target) if shard_cfg.shuffle else len(paths)
    timer = Timer()
    done, skip = committed_parts(spark, out, fp, n_units, shard_cfg) if resume else (set(), set())
    if resume:
        what = "hash ranges" if shard_cfg.shuffle else "input files"
        info(JOB, f"resume: {len(done):,} of {n_units:,} {what} already packed")
    todo = [u for u in range(n_units) if u not in done]
    spec = S.UnitWriteSpec(
        output_dir=str(out),
        docs_per_sample=k,
        dali_index=shard_cfg.dali_index,
        fingerprint=fp,
        id_col=config.columns.id,
        capacity=target,
        files=() if shard_cfg.shuffle else tuple(os.path.realpath(p) for p in paths),
        text_col=config.columns.text,
        skip=frozenset(skip),
    )
    written = 0
    with timer():
        if todo:
            if shard_cfg.shuffle:
                estimate = _estimated_bytes(source) * len(todo) // n_units
                df, tasks = _shuffled_units(
                    spark, everything, columns, config, n_units, todo, estimate
                )
            else:
                files = [paths[u] for u in todo]
                scan = everything if len(files) == len(paths) else None
                df, tasks = _file_units(spark, source, columns, config, files, scan)
            results = df.mapInArrow(partial(S.write_unit_parts, spec=spec), S.UNIT_RESULT_SCHEMA)
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
                    S.write_unit_marker(out, u, 0, 0, fp)
        n_shards, docs = number_parts(out, shard_cfg.prefix, fp, n_units)
    seconds["write"] = timer.seconds
    if docs != rows:
        raise CorpusCleanError(f"the shards hold {docs} docs but the input has {rows} rows")
    how = (
        (
            f"{n_units:,} hash ranges in {tasks:,} tasks"
            if shard_cfg.shuffle
            else f"{len(paths):,} files, one task per file"
        )
        if todo
        else "nothing left to write"
    )
    info(
        JOB,
        f"write: {fmt_rows(docs)} docs -> {n_shards:,} shards ({written:,} written; {how}) "
        f"({timer.seconds:.1f}s)",
    )
    return n_shards, docs, written, seconds


def _shuffled_units(
    spark: Any,
    raw: Any,
    columns: list[str],
    config: PackConfig,
    n_units: int,
    todo: list[int],
    unit_bytes: int,
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
            "_unit": pa.array(todo, pa.int64()),
            "_pkey": pa.array(S.partition_keys(n_tasks)[task_of], pa.int32()),
        }
    )
    # The payload first, and then only it and the id: the user's own columns (some may be
    # named like pack's `_h` or `_unit`) are then in the payload, unchanged, and nowhere else.
    doc_id = S.column(config.columns.id)
    df = S.add_shard_payload(raw, columns, config.columns.text, shard_cfg.docs_per_sample)
    payload = ["_txt", "_json"] if shard_cfg.docs_per_sample == 1 else ["_line"]
    df = df.select(doc_id.alias("_id"), *payload)
    df = S.add_unit(S.add_shuffle_order(df, "_id", shard_cfg.seed), n_units)
    staged = (
        df.join(F.broadcast(spark.createDataFrame(lookup)), on="_unit", how="inner")
        .repartition(n_tasks, "_pkey")
        .sortWithinPartitions("_unit", "_h", "_id")
        .select("_unit", F.col("_id").alias(config.columns.id), *payload)
    )
    return staged, n_tasks


def _file_units(
    spark: Any,
    source: CleanSource,
    columns: list[str],
    config: PackConfig,
    todo: list[str],
    scan_all: Any = None,
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
    payload = ["_json"] if k == 1 else ["_line"]
    df = df.select(
        raw["_metadata.file_path"].alias("_file"),
        raw["_metadata.row_index"].alias("_row"),
        S.column(config.columns.id),
        *payload,
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


def _check_input(paths: list[str], config: PackConfig) -> int:
    """Check every input file's footer (readable, one schema, the id and text columns) and
    return their rows. Footers are read in parallel: on a shared filesystem each is a round
    trip."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        footers = list(pool.map(_footer, paths))
    if not footers:
        return 0
    schema = footers[0][1]
    shape = [(f.name, f.type) for f in schema]
    for path, (_, other) in zip(paths, footers, strict=True):
        if [(f.name, f.type) for f in other] != shape:
            raise InputError(
                f"input file {path} has columns {_columns(other)}, but {paths[0]} has "
                f"{_columns(schema)}; the files of a clean output share one schema"
            )
    _check_columns(schema, config)
    return sum(rows for rows, _ in footers)


def _columns(schema: Any) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _unit_markers(out: Path, fp: str, n_units: int) -> dict[int, dict[str, Any]]:
    """The markers of this run's finished units; other files in their place are removed."""
    markers = {}
    for u in range(n_units):
        marker = _load_json(S.unit_marker(out, u))
        if marker is not None and marker.get("fingerprint") == fp and marker.get("unit") == u:
            markers[u] = marker
        else:
            S.unit_marker(out, u).unlink(missing_ok=True)
    return markers


def _numbering_file(out: Path) -> Path:
    return out / S.PARTS_DIR / "numbering.json"


def _first_shards(
    out: Path, fp: str, markers: dict[int, dict[str, Any]], n_units: int
) -> list[int] | None:
    """Each unit's first shard number (and the total last): from the part counts saved when
    numbering began, which outlive markers removed to redo a unit, else from the markers once
    every unit has one; None while numbering cannot have begun."""
    saved = _load_json(_numbering_file(out)) or {}
    if saved.get("fingerprint") == fp and len(saved.get("parts", [])) == n_units:
        counts = [int(c) for c in saved["parts"]]
    elif len(markers) == n_units:
        counts = [int(markers[u]["parts"]) for u in range(n_units)]
    else:
        return None
    return _starts(counts)


def _starts(counts: list[int]) -> list[int]:
    """Prefix sums: each unit's first shard number from the units' part counts, total last."""
    return [0, *(int(f) for f in np.cumsum(counts, dtype=np.int64))]


def committed_parts(
    spark: Any, out: Path, fp: str, n_units: int, shard_cfg: ShardSection
) -> tuple[set[int], set[tuple[int, int]]]:
    """What an unfinished pack already holds: (finished units, committed parts).

    A part is committed while its stats file is there and its tar (and .idx) still match:
    under `_parts/`, or already renamed to its shard name by a numbering cut short (parts map
    to shard numbers by the counts `number_parts` saved before its first rename). A unit is
    finished when its marker is there and every part of it is committed or numbered, .idx
    included. A part or numbered shard that changed since it was written is deleted and its
    unit written again. Removed too: temporary files, parts without a stats file, stats and
    markers of another run.
    """
    dali = shard_cfg.dali_index
    for tmp in (out / S.TMP_DIR).iterdir():
        tmp.unlink()
    for tmp in out.glob(f".{INDEX}.*.tmp"):  # a run killed while writing index.json
        tmp.unlink()
    parts_dir = out / S.PARTS_DIR
    parts_dir.mkdir(exist_ok=True)
    markers = _unit_markers(out, fp, n_units)
    firsts = _first_shards(out, fp, markers, n_units)

    def final(u: int, j: int) -> S.ShardFiles | None:
        if firsts is None or j >= firsts[u + 1] - firsts[u]:
            return None
        return S.final_files(out, shard_cfg.prefix, firsts[u] + j)

    pattern = re.compile(r"^u(\d{6})-(\d{6})\.json$")
    # (unit, part) -> the files (tar, and .idx with dali_index) to check, with their sha256
    candidates: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for stats_file in sorted(parts_dir.glob("u*-*.json")):
        match = pattern.match(stats_file.name)
        stats = _load_json(stats_file)
        key = (int(match.group(1)), int(match.group(2))) if match else (-1, -1)
        ok = stats is not None and stats.get("fingerprint") == fp and 0 <= key[0] < n_units
        if ok:
            part, numbered = S.part_files(out, *key), final(*key)
            places = [part] if numbered is None else [part, numbered]
            # The tar is renamed before the .idx, so either may be found at the shard name.
            tar = next((f.tar for f in places if _has_size(f.tar, stats.get("filesize"))), None)
            idx = next((f.dali for f in places if f.dali.is_file()), None)
            ok = tar is not None and (not dali or idx is not None)
            if ok and tar != part.tar:
                # Renamed already: a file left at the part's name is not the committed one.
                part.tar.unlink(missing_ok=True)
        if ok:
            candidates[key] = _checked_files(stats, tar, idx if dali else None)
        else:
            stats_file.unlink()
    finals: dict[int, list[tuple[str, str]]] = {}
    at_final = {files[0][0] for files in candidates.values()}
    for stats_file in sorted((out / S.STATS_DIR).glob("*.json")):
        stats = _load_json(stats_file)
        tar = out / str((stats or {}).get("url", ""))
        idx = tar.with_suffix(".idx")
        mine = stats is not None and stats.get("fingerprint") == fp
        whole = tar.is_file() and (not dali or idx.is_file())
        if mine and whole and str(tar) not in at_final:
            finals[int(stats["shard"])] = _checked_files(stats, tar, idx if dali else None)
    items = [("part", u, j, *f) for (u, j), files in sorted(candidates.items()) for f in files]
    items += [("final", g, 0, *f) for g, files in sorted(finals.items()) for f in files]
    redo: set[int] = set()
    for kind, a, b, path, _ in _changed_files(spark, items):
        if kind == "part":
            warn(JOB, f"part {Path(path).name} changed since it was committed; writing it again")
            candidates.pop((a, b), None)
            redo.add(a)
            continue
        # A numbered shard: its unit is the one whose shard numbers hold it.
        unit = None if firsts is None else int(np.searchsorted(firsts, a, "right")) - 1
        if unit is None or not 0 <= unit < n_units:
            raise CorpusCleanError(
                f"{Path(path).name} changed since it was written; rerun with --overwrite"
            )
        warn(JOB, f"{Path(path).name} changed since it was written; writing it again")
        Path(path).unlink(missing_ok=True)
        S.final_files(out, shard_cfg.prefix, a).stats.unlink(missing_ok=True)
        finals.pop(a, None)
        redo.add(unit)
    done = set(markers)
    for u in sorted(done - redo):
        first = final(u, 0)
        for j in range(int(markers[u]["parts"])):
            if (u, j) not in candidates and (first is None or first.number + j not in finals):
                warn(JOB, f"part {j} of unit {u} is missing or truncated; writing the unit again")
                redo.add(u)
                break
    for u in sorted(redo & done):
        done.discard(u)
        S.unit_marker(out, u).unlink(missing_ok=True)
    keep = {S.part_files(out, u, j).tar.stem for u, j in candidates}
    for path in parts_dir.iterdir():
        if path.stem not in keep and pattern.match(path.stem + ".json"):
            path.unlink()
    return done, set(candidates)


def _checked_files(stats: dict[str, Any], tar: Path, idx: Path | None) -> list[tuple[str, str]]:
    """The (path, sha256) pairs a resume checks for one shard: its tar, and its .idx."""
    files = [(str(tar), str(stats.get("sha256")))]
    if idx is not None:
        files.append((str(idx), str(stats.get("dali_sha256"))))
    return files


def _has_size(path: Path, size: Any) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def _changed_files(spark: Any, items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The items (..., path, sha256) whose file no longer has that checksum, checked by Spark
    tasks, since a resumed pack can be most of the output."""
    if not items:
        return []
    checks = [(i, path, sha) for i, (*_, path, sha) in enumerate(items)]
    slices = min(len(checks), max(1, spark.sparkContext.defaultParallelism * 2))
    results = spark.sparkContext.parallelize(checks, slices).map(_check_committed).collect()
    return [items[i] for i, good in results if not good]


def number_parts(out: Path, prefix: str, fp: str, n_units: int) -> tuple[int, int]:
    """Number every unit's parts in unit order and rename them; returns (shards, docs).

    Every step can be redone: a part's final stats file is written before its tar and then
    its .idx are renamed, and its part stats go last, so a run that stopped half-way numbers
    the rest on resume (`committed_parts` finds the parts already at their shard names).
    """
    markers = _unit_markers(out, fp, n_units)
    missing = sorted(set(range(n_units)) - set(markers))
    if missing:
        raise CorpusCleanError(
            f"{len(missing)} unit(s) of the pack have no marker after the write (first: unit "
            f"{missing[0]}); rerun the same command to resume"
        )
    counts = [int(markers[u]["parts"]) for u in range(n_units)]
    saved = _first_shards(out, fp, {}, n_units)
    firsts = _starts(counts)
    if saved is not None and saved != firsts:
        raise CorpusCleanError(
            "the units' part counts changed since numbering began; rerun with --overwrite"
        )
    tmp = out / S.TMP_DIR
    # Saved before the first rename: from here on, resume maps parts to shard numbers by it.
    payload = {"fingerprint": fp, "parts": counts}
    S.write_text_atomic(_numbering_file(out), json.dumps(payload) + "\n", tmp)
    for u in range(n_units):
        for j in range(firsts[u + 1] - firsts[u]):
            part, final = S.part_files(out, u, j), S.final_files(out, prefix, firsts[u] + j)
            stats = _load_json(part.stats)
            if stats is None:
                continue  # numbered already; build_index checks its stats file
            size = stats["filesize"]
            if not _has_size(part.tar, size) and not _has_size(final.tar, size):
                raise CorpusCleanError(
                    f"part {part.tar.name} of the unfinished pack is missing; rerun the same "
                    "command to write it again"
                )
            numbered = S.ShardStats(
                final.number,
                final.tar.name,
                stats["nsamples"],
                stats["ndocs"],
                stats["filesize"],
                stats["sha256"],
                stats.get("dali_sha256"),
            )
            S.write_text_atomic(final.stats, numbered.to_json(fp), tmp)
            if _has_size(part.tar, size):
                os.replace(part.tar, final.tar)
            else:
                part.tar.unlink(missing_ok=True)
            if part.dali.is_file():
                os.replace(part.dali, final.dali)
            part.stats.unlink()
            hold("pack.number")
    docs = sum(int(m["docs"]) for m in markers.values())
    return firsts[-1], docs


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

    Consecutive units share a task: every Python task costs a fixed worker round trip
    (bench/python_tasks.py: ~70 ms of a core here with corpusclean's zipimport fix, ~230 ms
    without), while a task per unit would buy nothing once every core has two. Which task a
    unit goes to changes no byte of the output.
    """
    return max(1, min(units, max(2 * parallelism, -(-unit_bytes // _TASK_BYTES))))


def build_index(
    out: Path, source: CleanSource, config: PackConfig, n_shards: int, planned: int, fp: str
) -> dict[str, Any]:
    """Write index.json from the committed shards' stats files; fails if any shard is missing."""
    prefix = config.shard.prefix
    entries = []
    missing = []
    for shard in range(n_shards):
        try:
            stats = json.loads((out / S.STATS_DIR / S.stats_name(prefix, shard)).read_text("utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            stats = {}
        if stats.get("fingerprint") != fp:
            missing.append(S.shard_name(prefix, shard))
            continue
        entry = {
            "url": stats["url"],
            "nsamples": stats["nsamples"],
            "filesize": stats["filesize"],
            "sha256": stats["sha256"],
            "ndocs": stats["ndocs"],
        }
        if config.shard.dali_index:
            entry["dali_index"] = S.dali_name(prefix, shard)
            entry["dali_sha256"] = stats["dali_sha256"]
        entries.append(entry)
    if missing:
        raise CorpusCleanError(
            f"{len(missing)} shard(s) have no commit marker after the write "
            f"({', '.join(missing[:3])}); rerun the same command to resume"
        )
    docs = sum(e["ndocs"] for e in entries)
    if docs != planned:
        raise CorpusCleanError(f"the shards hold {docs} docs but their units hold {planned}")
    members = ["json", "txt"] if config.shard.docs_per_sample == 1 else ["jsonl"]
    index = {
        "__kind__": INDEX_KIND,
        "wids_version": 1,
        "name": prefix,
        "shardlist": entries,
        "totals": {
            "shards": len(entries),
            "samples": sum(e["nsamples"] for e in entries),
            "docs": docs,
            "bytes": sum(e["filesize"] for e in entries),
        },
        "source": {"clean_dir": str(source.path), "report_run_id": source.run_id},
        "format": {
            "members": members,
            "docs_per_sample": config.shard.docs_per_sample,
            "key": "doc_id if it matches [A-Za-z0-9_-]{1,64}, else its readable part + '~' + "
            "16 hex digits of BLAKE2b(doc_id); the doc_id itself is in the metadata",
            "checksum": "sha256",
            "dali_index": config.shard.dali_index,
        },
        "config": {
            "shard": config.shard.model_dump(mode="json"),
            "columns": config.columns.model_dump(mode="json"),
        },
    }
    tmp = out / S.TMP_DIR
    if tmp.is_dir():
        for leftover in tmp.iterdir():
            leftover.unlink()
        tmp.rmdir()
    # Written last and atomically: a folder with index.json is a finished pack.
    S.write_text_atomic(out / INDEX, json.dumps(index, indent=2) + "\n")
    # The unit markers of input order, kept until now so that a numbering cut short resumes.
    shutil.rmtree(out / S.PARTS_DIR, ignore_errors=True)
    return index


# --------------------------------------------------------------------------- verify


def _verify_shard(root: Path, entry: dict[str, Any], dali: bool) -> str | None:
    url = entry["url"]
    path = root / url
    problem = size_problem(path, entry)
    if problem is not None:
        return problem
    nsamples = ndocs = 0
    try:
        with open(path, "rb") as raw:
            stream = S.HashingReader(raw)
            for sample in S.read_samples(stream, url):
                nsamples += 1
                ndocs += sample["jsonl"].count(b"\n") if "jsonl" in sample else 1
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
    if index.get("__kind__") != INDEX_KIND or not isinstance(index.get("shardlist"), list):
        raise RejectedError(f"{index_path} is not a {INDEX_KIND} file")
    entries = index["shardlist"]
    dali = bool(index.get("format", {}).get("dali_index"))
    timer = Timer()
    with timer(), ThreadPoolExecutor(max_workers=4) as pool:
        problems = [p for p in pool.map(lambda e: _verify_shard(root, e, dali), entries) if p]
    if problems:
        raise damaged_error(problems, len(entries))
    totals = {
        "shards": len(entries),
        "samples": sum(e["nsamples"] for e in entries),
        "docs": sum(e.get("ndocs", e["nsamples"]) for e in entries),
        "bytes": sum(e["filesize"] for e in entries),
    }
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
    parser.add_argument("--print-config", action="store_true", help="print the resolved config")
    return parser


def _usage_error(message: str) -> int:
    print(f"corpusclean {JOB}: usage error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _body(args: argparse.Namespace) -> int:
    if args.verify is not None:
        if args.input or args.output or args.overrides or args.overwrite:
            return _usage_error("--verify SHARD_DIR takes no other arguments")
        totals = verify(args.verify)
        print(
            f"{args.verify}: {totals['shards']} shards, {totals['samples']} samples, "
            f"{totals['docs']} docs verified"
        )
        return EXIT_OK
    config = load_config(PackConfig, "pack", args.config, args.overrides)
    if args.print_config:
        print(dump_config(config), end="")
        return EXIT_OK
    if not args.input or not args.output:
        return _usage_error("--input CLEAN_DIR and --output SHARD_DIR are required")
    result = pack(args.input, args.output, config, overwrite=args.overwrite)
    print(f"{result.output}: {result.shards} shards, {result.docs} docs")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean pack ...` (or `spark-submit jobs/pack.py ...`); returns the exit code."""
    return run_job(JOB, _parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
