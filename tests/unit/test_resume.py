"""Resume bookkeeping without Spark: fingerprints, checkpoints, and which staging a run adopts."""

from __future__ import annotations

import copy
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from corpusclean.jobs.outputs.publish import Publisher
from corpusclean.jobs.outputs.resume import (
    Checkpoints,
    difference,
    frame_done,
    mark_frame_done,
)

FP: dict[str, Any] = {
    "version": "0.1.0",
    "input": {"format": "parquet"},
    "config": {"near_dedup": {"threshold": 0.8}, "rules": {"min_chars": 50}},
    "files": [["file:///in/a.parquet", 10, 111], ["file:///in/b.parquet", 20, 222]],
}


def _changed(**edits: Any) -> dict[str, Any]:
    fp = copy.deepcopy(FP)
    for key, value in edits.items():
        fp[key] = value
    return fp


def test_difference_names_what_changed() -> None:
    assert difference(FP, copy.deepcopy(FP)) is None
    assert difference(FP, _changed(version="0.2.0")) == "it ran corpusclean 0.1.0, this is 0.2.0"
    assert "input was {'format': 'parquet'}" in str(
        difference(FP, _changed(input={"format": "jsonl"}))
    )
    cfg = copy.deepcopy(FP["config"])
    cfg["near_dedup"]["threshold"] = 0.9
    assert difference(FP, _changed(config=cfg)) == "its config section 'near_dedup' differs"
    files = [f[:] for f in FP["files"]]
    files[1][2] = 333
    assert difference(FP, _changed(files=files)) == (
        "input file file:///in/b.parquet changed (size or modification time)"
    )
    assert difference(FP, _changed(files=files[:1])) == "input file file:///in/b.parquet is gone"
    more = [*FP["files"], ["file:///in/c.parquet", 1, 1]]
    assert difference(FP, _changed(files=more)) == "input file file:///in/c.parquet is new"


def test_checkpoints_in_run_order_and_an_unreadable_one_ends_them(tmp_path: Path) -> None:
    ck = Checkpoints(tmp_path / "_work")
    assert ck.last() is None and Checkpoints.read_fingerprint(tmp_path / "_work") is None
    ck.write_fingerprint(FP)
    assert Checkpoints.read_fingerprint(tmp_path / "_work") == FP
    ck.save(99, "write", {"n": 3})
    ck.save(0, "read", {"n": 1})
    ck.save(2, "decided-2", {"n": 2})
    # A killed atomic write leaves a temporary file: not a checkpoint.
    (ck.folder / ".03-decided-3.json.123.abcd.tmp").write_text("{")
    assert [(c.order, c.name, c.state["n"]) for c in ck.all()] == [
        (0, "read", 1),
        (2, "decided-2", 2),
        (99, "write", 3),
    ]
    (ck.folder / "02-decided-2.json").write_text("{not json")
    assert [c.name for c in ck.all()] == ["read"], "nothing after a damaged checkpoint counts"


def test_frame_marker(tmp_path: Path) -> None:
    frame = tmp_path / "near" / "clusters"
    frame.mkdir(parents=True)
    assert not frame_done(frame)
    mark_frame_done(frame)
    assert frame_done(frame)


def _gone_run(runs: Path, run_id: str, state: str = "running", **fields: Any) -> Path:
    """A staging folder whose owner process has ended (a pid start time that cannot match)."""
    runs.mkdir(exist_ok=True)
    (runs / run_id / "_work").mkdir(parents=True)
    owner = {
        "job": "clean",
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "proc_start": psutil.Process().create_time() - 1000,
        "started": "2026-01-01T00:00:00Z",
        "started_ts": time.time(),
        "state": state,
        **fields,
    }
    (runs / f"{run_id}.owner.json").write_text(json.dumps(owner))
    return runs / run_id


def test_the_newest_acceptable_gone_run_is_adopted(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    runs = tmp_path / ".out.runs"
    older = _gone_run(runs, "20260101T000000Z-aaaaaa", started_ts=time.time() - 60)
    newer = _gone_run(runs, "20260101T000001Z-bbbbbb", state="failed")
    (newer / "_work" / "features").mkdir()
    refused = _gone_run(runs, "20260101T000002Z-cccccc", started_ts=time.time() + 60)
    rejected = _gone_run(runs, "20260101T000003Z-dddddd", state="rejected")
    asked: list[str] = []

    def adopt(folder: Path) -> str | None:
        asked.append(folder.name)
        return "its config section 'rules' differs" if folder == refused else None

    p = Publisher(out, "clean")
    staging = p.prepare(adopt=adopt)
    err = capsys.readouterr().err
    assert asked == [refused.name, newer.name], "newest first; rejected runs are never asked"
    assert p.resumed_from == newer.name
    assert (staging / "_work" / "features").is_dir(), "the adopted work is this run's staging"
    assert not newer.exists() and not (runs / f"{newer.name}.owner.json").exists()
    assert f"not resuming run {refused.name}: its config section 'rules' differs" in err
    # The sweep then removes what was not adopted; a rejected run stays for inspection.
    assert not older.exists() and not refused.exists()
    assert rejected.exists()
    owner = json.loads((runs / f"{p.run_id}.owner.json").read_text())
    assert owner["state"] == "running" and owner["pid"] == os.getpid()
    p.discard()


def test_without_adopt_or_with_a_live_owner_nothing_is_adopted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    runs = tmp_path / ".out.runs"
    gone = _gone_run(runs, "20260101T000000Z-aaaaaa")
    p = Publisher(out, "clean")
    p.prepare()  # --no-resume: the gone run's staging is swept as before
    assert p.resumed_from is None and not gone.exists()
    p.discard()

    live = _gone_run(runs, "20260101T000001Z-bbbbbb", proc_start=psutil.Process().create_time())
    q = Publisher(out, "clean")
    q.prepare(adopt=lambda folder: None)
    assert q.resumed_from is None and live.exists(), "a live owner's staging is not taken"
    q.discard()


def test_a_failed_run_keeps_its_staging_for_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = Publisher(out, "clean")
    staging = p.prepare()
    (staging / "_work").mkdir()
    assert p.keep_failed() == staging
    owner = json.loads((p.runs_dir / f"{p.run_id}.owner.json").read_text())
    assert owner["state"] == "failed" and staging.is_dir()
    # The lock is released: the next run adopts it (its process, this one, is still alive,
    # so make its record say otherwise, as after the process has exited).
    owner["proc_start"] = owner["proc_start"] - 1000
    (p.runs_dir / f"{p.run_id}.owner.json").write_text(json.dumps(owner))
    q = Publisher(out, "clean")
    q.prepare(adopt=lambda folder: None)
    assert q.resumed_from == p.run_id and q.staging.is_dir()
    q.discard()


@pytest.mark.parametrize("state", ["rejected", "published"])
def test_only_running_or_failed_runs_are_resumable(tmp_path: Path, state: str) -> None:
    runs = tmp_path / ".out.runs"
    _gone_run(runs, "20260101T000000Z-aaaaaa", state=state)
    p = Publisher(tmp_path / "out", "clean")
    p.prepare(adopt=lambda folder: None)
    assert p.resumed_from is None
    p.discard()
