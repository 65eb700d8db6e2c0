"""The run lock: one holder, a refusal naming it, and no lock left stuck by a crash."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from corpusclean.jobs.outputs import lock as runlock
from corpusclean.jobs.outputs.lock import LockedError, RunLock, owner_alive


def _lock(path: Path, run_id: str = "r1") -> RunLock:
    return RunLock(path, "clean", run_id, "output /x")


def test_one_holder_and_a_one_line_refusal(tmp_path: Path) -> None:
    path = tmp_path / ".x.lock"
    with _lock(path) as held:
        record = json.loads(path.read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert record["run_id"] == "r1" and record["started"].endswith("Z")
        with pytest.raises(LockedError) as info:
            _lock(path, "r2").acquire()
        assert str(info.value) == (
            f"output /x is being written by another corpusclean clean run (pid {os.getpid()} "
            f"on host {socket.gethostname()}, run r1, started {record['started']}; lock {path}); "
            "wait for it to finish or choose another output"
        )
        assert held.held
    assert not path.exists()
    _lock(path, "r3").acquire().release()


def test_the_kernel_releases_the_lock_of_a_killed_process(tmp_path: Path, capsys) -> None:
    path = tmp_path / ".x.lock"
    code = (
        "import os, signal, sys\n"
        "from corpusclean.jobs.outputs.lock import RunLock\n"
        "RunLock(sys.argv[1], 'clean', 'dead', 'output /x').acquire()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=False)
    assert json.loads(path.read_text())["run_id"] == "dead"
    with _lock(path):
        assert json.loads(path.read_text())["run_id"] == "r1"
    assert "stale lock" in capsys.readouterr().err


def _no_flock(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", refuse)


def _record(path: Path, **fields: object) -> None:
    base = runlock.owner_record("clean", "old")
    base.update(fields)
    path.write_text(json.dumps(base))


def test_without_flock_exclusive_creation_and_pid_liveness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _no_flock(monkeypatch)
    path = tmp_path / ".x.lock"
    with _lock(path), pytest.raises(LockedError, match="wait for it to finish"):
        _lock(path, "r2").acquire()
    assert not path.exists()
    # A record of this host whose process is gone, or whose pid now names a younger process.
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout
    for fields in ({"pid": int(dead)}, {"proc_start": psutil.Process().create_time() - 500}):
        _record(path, **fields)
        _lock(path).acquire().release()
        assert "stale lock" in capsys.readouterr().err
    # Another host's record cannot be judged from here.
    _record(path, host="elsewhere")
    with pytest.raises(LockedError, match="if that run is gone, remove the lock file"):
        _lock(path).acquire()
    # A record being written right now is a live run; a torn one from long ago is not.
    path.write_text("")
    with pytest.raises(LockedError, match="not written its record"):
        _lock(path).acquire()
    old = time.time() - 3600
    os.utime(path, (old, old))
    _lock(path).acquire().release()


def test_owner_alive() -> None:
    me = runlock.owner_record("clean", "r")
    assert owner_alive(me) is True
    assert owner_alive({**me, "host": "elsewhere"}) is None
    assert owner_alive({**me, "proc_start": me["proc_start"] - 10}) is False
    assert owner_alive({**me, "pid": "x"}) is False
