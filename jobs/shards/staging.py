"""Where `pack --overwrite` builds a pack that replaces another: a staging folder beside it.

A pack replacing a finished one is written into `.SHARD_DIR.runs/pack-RUN_ID/` (the runs folder
`clean`'s publish uses) with the same commit protocol as a pack written in place, and swapped
with SHARD_DIR in one `renameat2(RENAME_EXCHANGE)` once its index.json is written; the previous
pack is removed only then. Until the swap SHARD_DIR is the previous pack, complete and readable.

The staging folder's marker holds its run id (also in its name) and the resume fingerprint, so
a rerun of the same `pack --overwrite` after a crash finds it and resumes in it, or, if it was
finished, only swaps it in. Every other pack staging folder there is a leftover: one of another
input or config, an empty one, or the previous pack a swap moved out; a rerun removes it and
says so, unless the process that owns it is still running on this host.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpusclean.errors import InputError
from corpusclean.jobs.outputs.publish import MARKER, _exchange, new_run_id
from corpusclean.jobs.runtime.log import info
from corpusclean.testhook import hold

JOB = "pack"
PREFIX = "pack-"
REPLACED = ".replaced"


def runs_dir(out: Path) -> Path:
    """The folder beside `out` that holds its staging folders (shared with `clean`)."""
    return out.parent / f".{out.name}.runs"


def owner() -> dict[str, Any]:
    """This process as the owner of a staging folder (written into its marker)."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _alive(marker: dict[str, Any]) -> bool:
    """True when the marker's owner is another process still running on this host."""
    own = marker.get("owner")
    if not isinstance(own, dict) or own.get("host") != socket.gethostname():
        return False
    pid = own.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _marker(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MARKER).read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _is_staging(folder: Path, marker: dict[str, Any] | None) -> bool:
    """A folder this protocol made and still owns: its marker names the run its name names."""
    return (
        marker is not None
        and marker.get("job") == JOB
        and folder.name == f"{PREFIX}{marker.get('run_id')}"
    )


def _remove(path: Path, why: str) -> None:
    info(JOB, f"removing {why} {path}")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@dataclass
class Staging:
    """The staging folder of one `pack --overwrite` that replaces the pack in `output`."""

    output: Path
    folder: Path
    run_id: str
    resume: bool
    finished: bool

    def publish(self) -> None:
        """Swap the finished staging folder with the output, then remove the previous pack."""
        out, folder = self.output, self.folder
        hold("pack.publish")
        if _exchange(folder, out):
            # `folder` now holds the previous pack; a crash here leaves it for the next run.
            hold("pack.swapped")
            shutil.rmtree(folder)
        else:
            # No renameat2 here: two renames, and a crash between them is repaired by
            # `repair` (the finished staging folder is then moved into place).
            old = folder.with_name(folder.name + REPLACED)
            os.rename(out, old)
            os.rename(folder, out)
            shutil.rmtree(old)
        info(JOB, f"replaced the previous pack in {out}")
        _remove_runs_dir(out)

    def discard(self) -> None:
        """Remove the staging folder (a run that cannot be resumed, e.g. a full disk)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        _remove_runs_dir(self.output)


def _remove_runs_dir(out: Path) -> None:
    with contextlib.suppress(OSError):
        runs_dir(out).rmdir()  # only when nothing else is kept there


def repair(out: Path) -> None:
    """Finish a two-rename swap that a crash cut between its renames (`out` is missing)."""
    runs = runs_dir(out)
    if out.exists() or not runs.is_dir():
        return
    finished = [
        p
        for p in sorted(runs.glob(f"{PREFIX}*"))
        if p.is_dir() and _is_staging(p, _marker(p)) and (p / "index.json").is_file()
    ]
    replaced = sorted(runs.glob(f"{PREFIX}*{REPLACED}"))
    if finished:
        info(JOB, f"completing the replacement of {out} that a crash interrupted")
        os.rename(finished[-1], out)
        for old in replaced:
            _remove(old, "the previous pack, replaced, at")
        _remove_runs_dir(out)
    elif replaced:
        info(JOB, f"restoring the previous pack in {out}, which a crash left moved out")
        os.rename(replaced[-1], out)


def open_staging(out: Path, fingerprint: str, format_version: int) -> Staging:
    """The staging folder for a pack of `fingerprint` replacing `out`: the one a crashed run
    of the same pack left (to resume or, if finished, to publish), else a new empty one.

    Leftover pack staging folders beside `out` are removed; one whose owner process is still
    running on this host is refused (another pack is replacing `out`).
    """
    repair(out)
    runs = runs_dir(out)
    found: Path | None = None
    if runs.is_dir():
        for child in sorted(runs.iterdir()):
            if not child.name.startswith(PREFIX):
                continue  # not pack's (clean keeps its runs here too)
            marker = _marker(child) if child.is_dir() else None
            if child.is_dir() and marker is not None and _alive(marker):
                raise InputError(
                    f"another corpusclean pack (pid {marker['owner']['pid']}) is replacing "
                    f"{out} in {child}; wait for it to finish"
                )
            mine = (
                _is_staging(child, marker)
                and marker is not None
                and marker.get("fingerprint") == fingerprint
                and marker.get("format") == format_version
            )
            if mine and found is None:
                found = child
            elif child.name.endswith(REPLACED) or (marker and not _is_staging(child, marker)):
                _remove(child, "the previous pack a crashed run left at")
            else:
                _remove(child, "the staging folder of an earlier run")
    if found is not None:
        marker = _marker(found) or {}
        finished = (found / "index.json").is_file()
        return Staging(out, found, str(marker["run_id"]), resume=not finished, finished=finished)
    run_id = new_run_id()
    folder = runs / f"{PREFIX}{run_id}"
    folder.mkdir(parents=True)
    return Staging(out, folder, run_id, resume=False, finished=False)
