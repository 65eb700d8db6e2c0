"""Write-audit-publish: a run writes to its own staging folder; passing runs swap it in.

The published folder is replaced in one `renameat2(RENAME_EXCHANGE)` (Linux), so readers see
either the previous good output or the new one, never a mix; where the call is missing, two
renames are used and a crash between them is repaired by the next run. A rejected or crashed run
leaves the published folder as it was; a crashed run's staging is kept (owner state `failed`)
for the next run of the same work to resume (see jobs/outputs/resume.py and `prepare(adopt=...)`).

Beside OUTPUT live `.OUTPUT.lock` (held by the one run writing OUTPUT, see `runlock`) and
`.OUTPUT.runs/`, the staging folders: `RUN_ID/` with its owner file `RUN_ID.owner.json` (pid,
host, process start time, state). The owner file sits beside its folder rather than inside it
because the folder becomes the published output by a rename (and, after the swap, holds the
previous output until it is removed), while the record must stay valid throughout. A run clears
the staging of runs that are gone: on this host, when the owner's process is dead (or its pid now
belongs to a younger process); of another host, once older than `publish.stale_hours`. A rejected
run's staging is kept for inspection, the newest `publish.keep_rejected` of them.

An output that is a symlink is published into its target, so the link keeps pointing at the
current output and the data stays on the filesystem the link chose. A mount point cannot be
renamed and is refused before the run starts; so is a published output holding files that
corpusclean did not write (its marker lists the files it published), which a run would delete.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpusclean.errors import InputError
from corpusclean.jobs.outputs.lock import RunLock, describe, owner_alive, owner_record
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.testhook import hold

MARKER = "_corpusclean.json"
SUCCESS = "_SUCCESS"
OWNER_SUFFIX = ".owner.json"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# What `clean` publishes, for outputs whose marker predates the file list.
_LAYOUT_FILES = {"report.json", "report.html", SUCCESS, MARKER}
_LAYOUT_DIRS = {"data", "duplicates", "rejected", "index"}
_SPARK_FILE = re.compile(r"(\.?part-.+|\._SUCCESS\.crc|_SUCCESS)")
_SHOW_FOREIGN = 3
# Owner states of a staging folder another run may resume: killed while running, or crashed.
RESUMABLE = ("running", "failed")
# Why a staging folder cannot be resumed (None: it can).
Adopt = Callable[[Path], str | None]


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a random suffix."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{secrets.token_hex(3)}"


def _own_failed(owner: dict[str, Any]) -> bool:
    """A run of this very process that failed (a notebook's, a test's): it is over, though
    its process lives on."""
    me = owner_record("", "")
    return owner.get("state") == "failed" and all(
        owner.get(key) == me[key] for key in ("pid", "host", "proc_start")
    )


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False when the platform lacks renameat2."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def _files_under(root: Path) -> list[str]:
    """Every file below `root`, as sorted POSIX paths relative to it."""
    found: list[str] = []
    for folder, _, names in os.walk(root):
        rel = Path(folder).relative_to(root)
        found += [(rel / n).as_posix() for n in names]
    return sorted(found)


def foreign_files(output: Path, marker: dict[str, Any]) -> list[str]:
    """Files in a published output that its run did not write (sorted)."""
    present = _files_under(output)
    listed = marker.get("files")
    if isinstance(listed, list):
        known = set(listed) | {MARKER}
        return [f for f in present if f not in known]
    foreign = []
    for rel in present:
        parts = rel.split("/")
        if len(parts) == 1:
            ok = parts[0] in _LAYOUT_FILES
        else:
            ok = len(parts) == 2 and parts[0] in _LAYOUT_DIRS and bool(_SPARK_FILE.match(parts[1]))
        if not ok:
            foreign.append(rel)
    return foreign


def _real_output(output: str | Path, job: str, quiet: bool = False) -> Path:
    requested = Path(output).expanduser().absolute()
    try:
        real = requested.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise InputError(f"output {requested}: cannot follow its symlinks ({exc})") from exc
    if requested.is_symlink() and not quiet:
        log.info(job, f"output {requested} is a symlink: publishing into its target {real}")
    return real


def check_output(output: str, job: str) -> None:
    """Up-front checks of an output, before Spark starts: nothing is created or changed.

    Refuses a mount point, a file, a folder corpusclean did not write or that holds files it
    did not write, and an output another live run is writing (the lock is tried and dropped;
    the run takes it for real when it prepares its staging).
    """
    publisher = Publisher(output, job)
    publisher.check()
    if publisher.output.parent.is_dir():
        RunLock(
            publisher.lock_path, job, publisher.run_id, f"output {publisher.output}"
        ).acquire().release()


class Publisher:
    """Staging and publishing of one run of a job into `output`."""

    def __init__(
        self,
        output: str | Path,
        job: str,
        run_id: str | None = None,
        stale_hours: float = 24.0,
        keep_rejected: int = 3,
    ) -> None:
        self.job = job
        self.output = _real_output(output, job, quiet=True)
        self._requested = output
        self.run_id = run_id or new_run_id()
        self.runs_dir = self.output.parent / f".{self.output.name}.runs"
        self.lock_path = self.output.parent / f".{self.output.name}.lock"
        self.staging = self.runs_dir / self.run_id
        self.owner_file = self.runs_dir / f"{self.run_id}{OWNER_SUFFIX}"
        self.stale_hours = stale_hours
        self.keep_rejected = keep_rejected
        self._old = self.runs_dir / f"{self.run_id}.replaced"
        self._lock = RunLock(self.lock_path, job, self.run_id, f"output {self.output}")
        # The run whose staging this run adopted in prepare(adopt=...), if any.
        self.resumed_from: str | None = None

    def check(self, overwrite_foreign: bool = False) -> None:
        """Refuse an output this job may not replace, in one line naming the fix."""
        out = self.output
        if os.path.ismount(out):
            raise InputError(
                f"output {out} is a mount point, which publishing cannot replace (it swaps the "
                f"output folder by a rename); publish into a folder inside it, e.g. {out / 'clean'}"
            )
        if not out.exists():
            return
        if not out.is_dir():
            raise InputError(f"output {out} exists and is not a folder")
        if overwrite_foreign or not any(out.iterdir()):
            return
        marker_path = out / MARKER
        if not marker_path.is_file():
            raise InputError(
                f"output {out} is a non-empty folder that corpusclean did not write; "
                "choose another folder or empty it"
            )
        try:
            marker = json.loads(marker_path.read_text("utf-8"))
        except ValueError as exc:
            raise InputError(
                f"output {out}: {MARKER} is not valid JSON; choose another folder or remove it"
            ) from exc
        owner = marker.get("job")
        if owner != self.job:
            raise InputError(
                f"output {out} holds the output of `corpusclean {owner}`, not "
                f"`{self.job}`; choose another folder"
            )
        foreign = foreign_files(out, marker)
        if foreign:
            shown = ", ".join(foreign[:_SHOW_FOREIGN])
            more = (
                f" and {len(foreign) - _SHOW_FOREIGN} more" if len(foreign) > _SHOW_FOREIGN else ""
            )
            raise InputError(
                f"output {out} holds {len(foreign)} file(s) corpusclean did not write ({shown}"
                f"{more}); publishing replaces the whole folder, so move them out of it (or "
                "choose another --output) and rerun"
            )

    def prepare(self, overwrite_foreign: bool = False, adopt: Adopt | None = None) -> Path:
        """Take the output's lock, check it may be replaced, clear stale runs, create staging.

        With `adopt`, the staging of the newest run that is gone (killed, crashed) and that
        `adopt` accepts becomes this run's staging, work files and all (`resumed_from` names
        that run); `adopt` returns why it refuses a folder, or None to take it.
        """
        _real_output(self._requested, self.job)  # says so once when the output is a symlink
        self.check(overwrite_foreign)  # before any write: a refused output gets nothing beside it
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        try:
            self._repair()
            self.check(overwrite_foreign)  # again under the lock: the repair may restore it
            if adopt is not None and self.runs_dir.is_dir():
                self._adopt(adopt)
            self._sweep()
            self.runs_dir.mkdir(exist_ok=True)
            self._write_owner("running")
            if self.resumed_from is None:
                self.staging.mkdir(exist_ok=False)
        except BaseException:
            with contextlib.suppress(OSError):
                self.owner_file.unlink()
            self._cleanup_runs_dir()
            self._lock.release()
            raise
        return self.staging

    def _adopt(self, adopt: Adopt) -> None:
        """Take over the staging of the newest gone run that `adopt` accepts (see prepare).

        Holding the output's lock means no other run is writing here, so a run whose owner
        check cannot tell (another host) is gone too; only a provably live owner is skipped.
        """
        gone = [
            (float(owner.get("started_ts") or 0), run_id)
            for run_id, (_, owner) in self._runs().items()
            if owner is not None
            and owner.get("state") in RESUMABLE
            and (_own_failed(owner) or owner_alive(owner) is not True)
            and (self.runs_dir / run_id).is_dir()
        ]
        for _, run_id in sorted(gone, reverse=True):
            folder = self.runs_dir / run_id
            refused = adopt(folder)
            if refused is not None:
                log.info(self.job, f"not resuming run {run_id}: {refused}")
                continue
            os.rename(folder, self.staging)
            with contextlib.suppress(FileNotFoundError):
                (self.runs_dir / f"{run_id}{OWNER_SUFFIX}").unlink()
            self.resumed_from = run_id
            return

    def _repair(self) -> None:
        """Finish a two-rename publish that crashed between its renames."""
        if self.output.exists() or not self.runs_dir.is_dir():
            return
        replaced = sorted(self.runs_dir.glob("*.replaced"))
        if replaced:
            os.rename(replaced[-1], self.output)
            log.info(self.job, f"restored {self.output} from a publish that was interrupted")

    def _write_owner(self, state: str) -> None:
        record = owner_record(self.job, self.run_id, state=state, staging=str(self.staging))
        write_text_atomic(self.owner_file, json.dumps(record) + "\n")

    def _runs(self) -> dict[str, tuple[list[Path], dict[str, Any] | None]]:
        """Other runs in the staging area: run id -> (its paths, its owner record)."""
        runs: dict[str, tuple[list[Path], dict[str, Any] | None]] = {}
        for entry in self.runs_dir.iterdir():
            run_id = entry.name.lstrip(".").split(".", 1)[0]
            if run_id == self.run_id:
                continue
            paths = runs.setdefault(run_id, ([], None))[0]
            paths.append(entry)
            if entry.name == f"{run_id}{OWNER_SUFFIX}":
                with contextlib.suppress(OSError, ValueError):
                    runs[run_id] = (paths, json.loads(entry.read_text("utf-8")))
        return runs

    def _remove(self, paths: list[Path], message: str) -> None:
        for path in sorted(paths, key=lambda p: p.name.endswith(OWNER_SUFFIX)):  # record last
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        log.info(self.job, message)

    def _sweep(self) -> None:
        """Remove the staging of runs that are gone, and rejected runs beyond the newest few."""
        if not self.runs_dir.is_dir():
            return
        max_age = self.stale_hours * 3600
        rejected: list[tuple[float, str, list[Path]]] = []
        for run_id, (paths, owner) in sorted(self._runs().items()):
            folder = self.runs_dir / run_id
            if owner is None:
                # A record-less folder: from a corpusclean before owner files, or the half of a
                # crashed two-rename publish; only its age can tell it is abandoned.
                age = time.time() - max(p.lstat().st_mtime for p in paths)
                if age > max_age:
                    self._remove(
                        paths,
                        f"removed stale staging {folder} (no owner record, untouched for "
                        f"{age / 3600:.0f}h > publish.stale_hours={self.stale_hours:g})",
                    )
                continue
            if owner.get("state") == "rejected":
                rejected.append((float(owner.get("started_ts") or 0), run_id, paths))
                continue
            alive = False if _own_failed(owner) else owner_alive(owner)
            age = time.time() - float(owner.get("started_ts") or 0)
            if alive is False:
                why = "its process is gone"
            elif alive is None and age > max_age:
                why = f"another host's run older than publish.stale_hours={self.stale_hours:g}"
            else:
                continue
            self._remove(paths, f"removed stale staging {folder} ({describe(owner)}): {why}")
        self._prune_rejected(rejected, keep=self.keep_rejected)

    def _prune_rejected(self, rejected: list[tuple[float, str, list[Path]]], keep: int) -> None:
        for _, run_id, paths in sorted(rejected, reverse=True)[max(keep, 0) :]:
            self._remove(
                paths,
                f"removed rejected run {self.runs_dir / run_id}: keeping the newest "
                f"{self.keep_rejected} rejected runs (publish.keep_rejected)",
            )

    def reject(self) -> Path:
        """Keep this rejected run's staging to inspect; drop older rejected ones past the cap."""
        self._write_owner("rejected")
        rejected = [
            (float(owner.get("started_ts") or 0), run_id, paths)
            for run_id, (paths, owner) in self._runs().items()
            if owner is not None and owner.get("state") == "rejected"
        ]
        self._prune_rejected(rejected, keep=self.keep_rejected - 1)
        return self.staging

    def publish(self) -> Path:
        """Mark the staged run complete and make it the published output."""
        files = sorted({*_files_under(self.staging), SUCCESS})
        (self.staging / MARKER).write_text(
            json.dumps({"job": self.job, "run_id": self.run_id, "files": files}) + "\n", "utf-8"
        )
        # _SUCCESS last: a reader that sees it sees a complete output.
        (self.staging / SUCCESS).write_text("", "utf-8")
        self.output.parent.mkdir(parents=True, exist_ok=True)
        hold("publish")
        if not self.output.exists():
            os.rename(self.staging, self.output)
        elif _exchange(self.staging, self.output):
            hold("swapped")
            shutil.rmtree(self.staging, ignore_errors=True)
        else:
            os.rename(self.output, self._old)
            os.rename(self.staging, self.output)
            shutil.rmtree(self._old, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.owner_file.unlink()
        self._cleanup_runs_dir()
        self.close()
        return self.output

    def _cleanup_runs_dir(self) -> None:
        with contextlib.suppress(OSError):
            self.runs_dir.rmdir()  # only when no rejected run is kept there

    def keep_failed(self) -> Path:
        """Keep a crashed run's staging for the next run to resume (state `failed`); the next
        run removes it when it cannot resume from it."""
        self._write_owner("failed")
        self.close()
        return self.staging

    def discard(self) -> None:
        """Remove the staging folder (a run that failed before producing anything useful)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.owner_file.unlink()
        self._cleanup_runs_dir()
        self.close()

    def close(self) -> None:
        """Release the output's lock (every exit path of a run ends here)."""
        self._lock.release()
