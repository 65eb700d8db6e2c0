"""Resuming `clean` after a crash: the run's fingerprint and its stage checkpoints.

A run keeps its expensive intermediates in its staging folder (`.OUTPUT.runs/RUN_ID/_work/`):
the read pass's features, the decisions after each dedup unit, a cluster stage's materialised
frames, then the staged output itself. Each gets a checkpoint written last, once its files are
committed, holding what the run had learned up to it (the funnel, column health, figures, the
schema to read the frame back with). Next to them, `fingerprint.json` says what the work was
done on: corpusclean's version, the resolved config (less `spark` and `publish`, which change
how a run executes, not what it computes: a rerun with more memory resumes) and every input
file with its size and modification time.

A rerun of the same command adopts the newest staging folder of a run that is gone (killed,
crashed, interrupted) whose fingerprint is equal, and continues after its last checkpoint. Row
ids come from the input's split layout, so a rerun reuses the read pass only when the same
layout reproduces them: the read pass records a digest of every row's id with its file and
split, and the resuming run computes the same digest in a job that reads no column (the
Parquet footers' row counts, or JSON Lines' line breaks) before it trusts a single work file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, SparkSession

from corpusclean import __version__
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.pipelines.columns import ROW_ID

FINGERPRINT = "fingerprint.json"
CHECKPOINTS = "_checkpoints"
# Config sections that change how a run executes, never what it computes.
UNFINGERPRINTED = ("spark", "publish")
_NAME = re.compile(r"(\d{2})-([\w.-]+)\.json")
# The layout digest's helper column (present only inside the read pass's plan).
LAYOUT = "__layout"


def _file_facts(spark: SparkSession, uris: list[str]) -> list[list[Any]]:
    """`[uri, size, mtime]` of each input file: os.stat for local files, Hadoop's FileStatus
    for the rest (mtime in ns locally, ms from Hadoop: only equality matters)."""
    facts: list[list[Any]] = []
    conf = None
    for uri in sorted(uris):
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            st = os.stat(unquote(parsed.path))
            facts.append([uri, st.st_size, st.st_mtime_ns])
            continue
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        if conf is None:
            conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        path = jvm.org.apache.hadoop.fs.Path(uri)
        status = path.getFileSystem(conf).getFileStatus(path)
        facts.append([uri, int(status.getLen()), int(status.getModificationTime())])
    return facts


def fingerprint(
    spark: SparkSession, raw: DataFrame, fmt: str, config: dict[str, Any]
) -> dict[str, Any]:
    """What a run's work depends on: version, config (less `UNFINGERPRINTED`), input files.

    `raw` is the input as read (its file list is known without a job). The path the user
    typed is not part of it: the same files by another path (relative, a glob) are the same
    work.
    """
    return {
        "version": __version__,
        "input": {"format": fmt},
        "config": {k: v for k, v in config.items() if k not in UNFINGERPRINTED},
        "files": _file_facts(spark, raw.inputFiles()),
    }


def difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The first thing that differs between two fingerprints, in words; None when equal."""
    if old.get("version") != new.get("version"):
        return f"it ran corpusclean {old.get('version')}, this is {new.get('version')}"
    if old.get("input") != new.get("input"):
        return f"its input was {old.get('input')}"
    old_cfg, new_cfg = old.get("config") or {}, new.get("config") or {}
    for section in sorted(set(old_cfg) | set(new_cfg)):
        if old_cfg.get(section) != new_cfg.get(section):
            return f"its config section {section!r} differs"
    if old.get("against") != new.get("against"):
        # clean --against: a prior index rebuilt since would make the decisions stale.
        return "an --against index has been rebuilt since"
    old_files = {f[0]: f[1:] for f in old.get("files") or []}
    new_files = {f[0]: f[1:] for f in new.get("files") or []}
    for uri in sorted(set(old_files) | set(new_files)):
        if uri not in new_files:
            return f"input file {uri} is gone"
        if uri not in old_files:
            return f"input file {uri} is new"
        if old_files[uri] != new_files[uri]:
            return f"input file {uri} changed (size or modification time)"
    return None


def refusal(folder: Path, fp: dict[str, Any]) -> str | None:
    """Why a gone run's staging `folder` cannot be resumed by a run with fingerprint `fp`, in
    words (None: it can)."""
    work = folder / "_work"
    old = Checkpoints.read_fingerprint(work)
    if old is None:
        return "it left no finished stage to reuse"
    why = difference(old, fp)
    if why is not None:
        return why
    if Checkpoints(work).last() is None:
        return "it finished no stage"
    return None


def layout_column() -> Column:
    """Each row's id hashed with the file and split it was read from (a column, since an
    aggregate may not take the non-deterministic file functions directly)."""
    return F.xxhash64(F.col(ROW_ID), F.input_file_name(), F.input_file_block_start())


def layout_digest() -> Column:
    """The aggregate over `LAYOUT`: equal digests mean every row id names the same row."""
    return F.bit_xor(F.col(LAYOUT)).alias(LAYOUT)


def current_layout(marked: DataFrame) -> int | None:
    """The layout digest of the input as this run reads it: one job, no column read."""
    row = marked.select(layout_column().alias(LAYOUT)).agg(layout_digest()).first()
    return None if row is None or row[0] is None else int(row[0])


@dataclass(frozen=True)
class Checkpoint:
    """One completed unit of work: its order in the run, its name, what the run knew then."""

    order: int
    name: str
    state: dict[str, Any]


class Checkpoints:
    """The checkpoints in a staging folder's `_work/` (`_checkpoints/NN-NAME.json`), and its
    fingerprint. Every file is replaced atomically, and a checkpoint is written only after the
    files it vouches for are committed."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.folder = work / CHECKPOINTS

    def write_fingerprint(self, fp: dict[str, Any]) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.work / FINGERPRINT, json.dumps(fp, sort_keys=True) + "\n")

    @staticmethod
    def read_fingerprint(work: Path) -> dict[str, Any] | None:
        try:
            data = json.loads((work / FINGERPRINT).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def save(self, order: int, name: str, state: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.folder / f"{order:02d}-{name}.json", json.dumps(state) + "\n")

    def all(self) -> list[Checkpoint]:
        """Every readable checkpoint, in run order (an unreadable one ends the list)."""
        if not self.folder.is_dir():
            return []
        found: list[Checkpoint] = []
        for path in sorted(self.folder.iterdir()):
            m = _NAME.fullmatch(path.name)
            if m is None:
                continue  # an atomic write's leftover temporary file
            try:
                state = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                break
            found.append(Checkpoint(int(m.group(1)), m.group(2), state))
        return found

    def last(self) -> Checkpoint | None:
        found = self.all()
        return found[-1] if found else None


def frame_done(folder: Path) -> bool:
    """Whether a materialised frame's folder was committed whole (`mark_frame_done`)."""
    return (folder.parent / f"{folder.name}.done").is_file()


def mark_frame_done(folder: Path) -> None:
    """Write the marker `frame_done` looks for, after the frame's write committed."""
    write_text_atomic(folder.parent / f"{folder.name}.done", "")
