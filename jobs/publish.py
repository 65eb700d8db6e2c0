"""Write-audit-publish: a run writes to its own staging folder; passing runs swap it in.

The published folder is replaced in one `renameat2(RENAME_EXCHANGE)` (Linux), so readers see
either the previous good output or the new one, never a mix; where the call is missing, two
renames are used and a crash between them is repaired by the next run. A rejected or crashed run
leaves the published folder as it was and keeps its staging folder for inspection.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import errno
import json
import os
import secrets
import shutil
from pathlib import Path

from corpusclean.jobs.errors import InputError

MARKER = "_corpusclean.json"
SUCCESS = "_SUCCESS"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a random suffix."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{secrets.token_hex(3)}"


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


class Publisher:
    """Staging and publishing of one run of a job into `output`."""

    def __init__(self, output: str | Path, job: str, run_id: str | None = None) -> None:
        self.output = Path(output).expanduser().absolute()
        self.job = job
        self.run_id = run_id or new_run_id()
        self.runs_dir = self.output.parent / f".{self.output.name}.runs"
        self.staging = self.runs_dir / self.run_id
        self._old = self.runs_dir / f"{self.run_id}.replaced"

    def prepare(self, overwrite_foreign: bool = False) -> Path:
        """Check the output may be replaced by this job and create the staging folder."""
        self._repair()
        if self.output.exists():
            if not self.output.is_dir():
                raise InputError(f"output {self.output} exists and is not a folder")
            if any(self.output.iterdir()) and not overwrite_foreign:
                marker = self.output / MARKER
                if not marker.is_file():
                    raise InputError(
                        f"output {self.output} is a non-empty folder that corpusclean did not "
                        "write; choose another folder or empty it"
                    )
                owner = json.loads(marker.read_text("utf-8")).get("job")
                if owner != self.job:
                    raise InputError(
                        f"output {self.output} holds the output of `corpusclean {owner}`, not "
                        f"`{self.job}`; choose another folder"
                    )
        self.staging.mkdir(parents=True, exist_ok=False)
        return self.staging

    def _repair(self) -> None:
        """Finish a two-rename publish that crashed between its renames."""
        if self.output.exists() or not self.runs_dir.is_dir():
            return
        replaced = sorted(self.runs_dir.glob("*.replaced"))
        if replaced:
            os.rename(replaced[-1], self.output)

    def publish(self) -> Path:
        """Mark the staged run complete and make it the published output."""
        (self.staging / MARKER).write_text(
            json.dumps({"job": self.job, "run_id": self.run_id}) + "\n", "utf-8"
        )
        # _SUCCESS last: a reader that sees it sees a complete output.
        (self.staging / SUCCESS).write_text("", "utf-8")
        self.output.parent.mkdir(parents=True, exist_ok=True)
        if not self.output.exists():
            os.rename(self.staging, self.output)
        elif _exchange(self.staging, self.output):
            shutil.rmtree(self.staging, ignore_errors=True)
        else:
            os.rename(self.output, self._old)
            os.rename(self.staging, self.output)
            shutil.rmtree(self._old, ignore_errors=True)
        self._cleanup_runs_dir()
        return self.output

    def _cleanup_runs_dir(self) -> None:
        with contextlib.suppress(OSError):
            self.runs_dir.rmdir()  # only when no rejected run is kept there

    def discard(self) -> None:
        """Remove the staging folder (a run that failed before producing anything useful)."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self._cleanup_runs_dir()
