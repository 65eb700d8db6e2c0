"""The staging folders of `pack --overwrite` (jobs/shards/staging.py), without Spark."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from corpusclean.errors import InputError
from corpusclean.jobs.shards.staging import open_staging, runs_dir


def _staging(out: Path, run_id: str, fp: str, pid: int, finished: bool = False) -> Path:
    folder = runs_dir(out) / f"pack-{run_id}"
    folder.mkdir(parents=True)
    marker = {"job": "pack", "run_id": run_id, "fingerprint": fp, "format": 5}
    marker["owner"] = {"host": socket.gethostname(), "pid": pid}
    (folder / "_corpusclean.json").write_text(json.dumps(marker))
    if finished:
        (folder / "index.json").write_text("{}")
    return folder


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_same_pack_resumes_and_leftovers_go(tmp_path: Path, capsys) -> None:
    out = tmp_path / "shards"
    out.mkdir()
    mine = _staging(out, "r2", "fp", _dead_pid())
    other = _staging(out, "r1", "other-fp", _dead_pid())
    swapped_out = _staging(out, "r0", "fp", _dead_pid())  # a previous pack a swap moved out
    (swapped_out / "_corpusclean.json").write_text(json.dumps({"job": "pack", "run_id": "old"}))
    (runs_dir(out) / "20260101T000000Z-abcdef").mkdir()  # clean's: not pack's to remove
    staging = open_staging(out, "fp", 5)
    assert staging.folder == mine and staging.resume and not staging.finished
    assert not other.exists() and not swapped_out.exists()
    assert (runs_dir(out) / "20260101T000000Z-abcdef").is_dir()
    err = capsys.readouterr().err
    assert str(other) in err and str(swapped_out) in err


def test_a_finished_staging_is_only_published(tmp_path: Path) -> None:
    out = tmp_path / "shards"
    out.mkdir()
    (out / "old").write_text("previous pack")
    folder = _staging(out, "r1", "fp", _dead_pid(), finished=True)
    staging = open_staging(out, "fp", 5)
    assert staging.finished and staging.folder == folder
    staging.publish()
    assert (out / "index.json").is_file() and not (out / "old").exists()
    assert not runs_dir(out).exists()


def test_a_live_owner_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "shards"
    out.mkdir()
    with subprocess.Popen(["sleep", "60"]) as sleeper:
        try:
            folder = _staging(out, "r1", "other-fp", sleeper.pid)
            with pytest.raises(InputError, match=f"pid {sleeper.pid}.*wait for it"):
                open_staging(out, "fp", 5)
            assert folder.is_dir()
        finally:
            sleeper.kill()
    assert os.path.isdir(folder)
