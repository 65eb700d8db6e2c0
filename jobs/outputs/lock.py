"""One run at a time per output: a lock file beside it, held with flock(2) by the running process.

Why flock on an open file rather than a file created with O_CREAT|O_EXCL: the kernel drops an
flock when its process dies, however it dies (SIGKILL, OOM killer, a node reboot on NFS once the
server's lease runs out), so no crash leaves the lock stuck and no one has to guess from a pid
whether an owner is gone. On NFS the Linux client turns flock into an NFS byte-range lock, which
every client sees; Lustre and GPFS honour it when mounted with `flock`. The lock file also holds
the owner (pid, host, run id, start time) for the refusal message. Where the filesystem has no
locks at all (ENOLCK, EOPNOTSUPP: Lustre without `flock`, some FUSE mounts), the lock falls back
to the file's exclusive creation; a record left by a crash is then stale when its process is gone
from this host, and a record of another host must be removed by hand (the message says so).

A released lock removes its file. A run that opened the file just before it was removed could
flock the removed inode, so a lock counts only once the path still names the inode it holds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import psutil

from corpusclean.errors import CorpusCleanError
from corpusclean.jobs.runtime import log

_CREATE = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
# An empty or torn record younger than this is a run between creating the file and writing it.
_CREATING_SECONDS = 30.0


class LockedError(CorpusCleanError):
    """Another live run holds the output's lock: exit 1, nothing touched."""


def process_start(pid: int | None = None) -> float | None:
    """The start time of a process (this one by default), or None where it cannot be read."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def owner_record(job: str, run_id: str, **extra: Any) -> dict[str, Any]:
    """Who this process is: what a lock file and a staging owner file hold."""
    now = time.time()
    return {
        "job": job,
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "proc_start": process_start(),
        "started": dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "started_ts": now,
        **extra,
    }


def owner_alive(owner: dict[str, Any]) -> bool | None:
    """Whether the owner's process still runs: None when it ran on another host (unknowable)."""
    if owner.get("host") != socket.gethostname():
        return None
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        started = proc.create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # access denied: it exists, and it is not ours to judge
        return True
    recorded = owner.get("proc_start")
    # A pid the kernel gave to a newer process is not the owner any more.
    return not isinstance(recorded, int | float) or abs(started - recorded) < 1.0


def describe(owner: dict[str, Any] | None) -> str:
    """`pid N on host H, run R, started T` (or what is known of it)."""
    if not owner:
        return "an owner that has not written its record yet"
    return (
        f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}, "
        f"run {owner.get('run_id', '?')}, started {owner.get('started', '?')}"
    )


def _parse(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class RunLock:
    """An exclusive, crash-safe lock on `path` for one run of `job` (a context manager too)."""

    def __init__(self, path: str | Path, job: str, run_id: str, target: str) -> None:
        self.path = Path(path)
        self.job = job
        self.run_id = run_id
        self.target = target  # what the lock protects, for messages: "output /x/clean"
        self._fd: int | None = None
        self._record = b""

    @property
    def held(self) -> bool:
        """True between a successful acquire() and release()."""
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Take the lock or raise LockedError naming its owner; a dead owner's lock is taken."""
        if self.held:
            return self
        self._record = (json.dumps(owner_record(self.job, self.run_id)) + "\n").encode()
        while True:
            try:
                fd = os.open(self.path, _CREATE | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
                except FileNotFoundError:  # released in between
                    continue
                created = False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._busy(_parse(self._read())) from None
            except OSError as exc:
                if exc.errno not in _NO_LOCKS:
                    os.close(fd)
                    raise
                if created:  # no locks here, but creating the file made it ours
                    self._hold(fd)
                else:
                    os.close(fd)
                    self._acquire_exclusive()
                return self
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # released and removed between our open and our flock: try again
                os.close(fd)
                continue
            previous = os.pread(fd, 1 << 16, 0).decode("utf-8", "replace").strip()
            if previous:
                # Only a run that died without releasing leaves a record behind an unheld lock.
                log.warn(
                    self.job,
                    f"stale lock {self.path} of {describe(_parse(previous))}: its process is "
                    "gone; taking it over",
                )
            self._hold(fd)
            return self

    def _hold(self, fd: int) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._record, 0)
        os.fsync(fd)
        self._fd = fd

    def _acquire_exclusive(self) -> None:
        """The fallback where flock is unsupported: the lock is the file's exclusive creation."""
        for _ in range(10):
            try:
                fd = os.open(self.path, _CREATE | os.O_EXCL, 0o644)
            except FileExistsError:
                text = self._read()
                owner = _parse(text)
                if owner is None:
                    with contextlib.suppress(FileNotFoundError):
                        if time.time() - self.path.stat().st_mtime < _CREATING_SECONDS:
                            raise self._busy(None) from None
                else:
                    alive = owner_alive(owner)
                    if alive is not False:
                        raise self._busy(owner, remote=alive is None) from None
                log.warn(
                    self.job,
                    f"stale lock {self.path} of {describe(owner)}: its process is gone; "
                    "taking it over",
                )
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                continue
            self._hold(fd)
            return
        raise self._busy(_parse(self._read()))

    def _read(self) -> str:
        try:
            return self.path.read_text("utf-8", errors="replace")
        except OSError:
            return ""

    def _busy(self, owner: dict[str, Any] | None, remote: bool = False) -> LockedError:
        hint = (
            "if that run is gone, remove the lock file"
            if remote
            else "wait for it to finish or choose another output"
        )
        return LockedError(
            f"{self.target} is being written by another corpusclean {self.job} run "
            f"({describe(owner)}; lock {self.path}); {hint}"
        )

    def release(self) -> None:
        """Remove the lock file and drop the lock; safe to call more than once."""
        if self._fd is None:
            return
        try:
            # Removed while still held, so no run can take the file we are about to drop.
            if os.stat(self.path).st_ino == os.fstat(self._fd).st_ino:
                self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
