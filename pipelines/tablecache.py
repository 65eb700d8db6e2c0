"""Lookup tables built once per machine and memory-mapped by every Python worker.

Two tables behind the quality filters cost each Python worker time before its first batch: the
language-ID model (py3langid's xz-compressed arrays, ~100 MB once unpacked: ~0.5-0.7 s) and the
character-class table (a Python loop over every code point: ~0.4-0.7 s). Spark starts a worker
per core, per executor and per application, so a short job paid them again and again, and each
worker held its own ~100 MB copy of the model.

The first worker to need a table builds it and writes it here as plain `.npy` files (one folder
per table, written under a temporary name and renamed, so a reader sees a whole folder or none).
Later workers map the files read-only (`numpy.load(mmap_mode="r")`): milliseconds instead of a
second, and one copy in the page cache for all of them. A folder's name carries a digest of
everything its arrays depend on (the model file's bytes, the Unicode version, the table's
definition and this file's format), so a changed input gets a new folder, never a stale table.

Nothing here is needed for a correct result: where the folder cannot be written (a read-only
home on a cluster node) or read, the table is built in memory as before. A folder no run has
used for `UNUSED_S` is removed by the next run that writes a table of the same name.

`CORPUSCLEAN_TABLE_CACHE`: the folder (default `$XDG_CACHE_HOME/corpusclean/tables`, else
`~/.cache/corpusclean/tables`), or `off`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

ENV = "CORPUSCLEAN_TABLE_CACHE"
# Bumped when the layout of a folder changes: older folders are then simply never read.
FORMAT = 1
# A table folder that no run has read for this long belongs to an install that is gone.
UNUSED_S = 14 * 86400.0
_OFF = {"off", "0", "false", "no", "none"}
_META = "meta.json"


def cache_dir() -> Path | None:
    """The folder tables live in, or None when the cache is off."""
    where = os.environ.get(ENV, "").strip()
    if where.lower() in _OFF:
        return None
    if where:
        return Path(where).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            home = Path.home()
        except (RuntimeError, KeyError):
            return None
        # A user with no home (a container's arbitrary uid) gets "~" back: not a place to
        # write, or the tables would land in the working directory.
        if not home.is_absolute():
            return None
        base = str(home / ".cache")
    return Path(base) / "corpusclean" / "tables"


def digest(*parts: bytes | str) -> str:
    """A short hex digest of `parts` (with this module's format), for a table's key."""
    h = hashlib.sha256(f"format {FORMAT}".encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:20]


def code(fn: Callable[..., object]) -> bytes:
    """What `fn` does, for a table's key: its bytecode, names and constants (those of the
    functions and generators it defines too), without its file or line numbers, so the key
    changes when the builder's code does and not when the lines around it move."""

    def walk(co: types.CodeType) -> list[bytes]:
        out = [co.co_code, repr(co.co_names).encode()]
        for const in co.co_consts:
            out += walk(const) if isinstance(const, types.CodeType) else [repr(const).encode()]
        return out

    return b"\0".join(walk(fn.__code__))


def _readonly(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array read-only: numba compiles a function once per argument type, and
    read-only is part of it, so a built table and a mapped one share one compilation."""
    out = {}
    for name, arr in arrays.items():
        view = arr.view()
        view.flags.writeable = False
        out[name] = view
    return out


def _read(folder: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a finished folder, mapped read-only; None when it is missing or does not
    hold what its `meta.json` lists (name, dtype and shape of every array)."""
    try:
        meta = json.loads((folder / _META).read_text())
        out = {}
        for name, spec in meta["arrays"].items():
            arr = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            if str(arr.dtype) != spec["dtype"] or list(arr.shape) != spec["shape"]:
                return None
            out[name] = np.asarray(arr)  # a plain ndarray view: one numba type
    except (OSError, ValueError, KeyError, TypeError):
        # A short file cannot be mapped (numpy checks its length against the header), so a
        # damaged folder is rebuilt rather than read.
        return None
    # Marked used, so that the sweep of unused folders leaves it.
    with contextlib.suppress(OSError):
        os.utime(folder)
    return out


def _write(root: Path, folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """`arrays` into `folder`, whole or not at all (another process may write it too)."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        spec = {}
        for name, arr in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            spec[name] = {"dtype": str(arr.dtype), "shape": list(arr.shape)}
        (tmp / _META).write_text(json.dumps({"arrays": spec}))
        try:
            tmp.rename(folder)
        except OSError:
            # Another worker renamed its folder first: theirs holds the same arrays.
            if not (folder / _META).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sweep(root: Path, name: str, keep: Path, now: float) -> None:
    """Remove the folders of table `name` other than `keep` that no run used for `UNUSED_S`,
    and temporary folders of crashed writers as old."""
    for other in root.glob(f"{name}-*"):
        if other != keep:
            with contextlib.suppress(OSError):
                if now - other.stat().st_mtime > UNUSED_S:
                    shutil.rmtree(other)
    for tmp in root.glob(f".{name}-*"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > UNUSED_S:
                shutil.rmtree(tmp)


def load(name: str, key: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of table `name` for `key` (a `digest` of what they depend on): mapped from
    the cache folder, or built with `build()` and written there for the next process.

    Always read-only arrays. Without a usable folder, `build()`'s arrays themselves.
    """
    root = cache_dir()
    if root is None:
        return _readonly(build())
    folder = root / f"{name}-{key}"
    found = _read(folder)
    if found is not None:
        return found
    arrays = build()
    try:
        if folder.exists() and _read(folder) is None:
            # Damaged (a disk error, a hand edit): replaced whole. (Read again first: another
            # worker may have just finished writing it.)
            shutil.rmtree(folder)
        _write(root, folder, arrays)
        _sweep(root, name, folder, time.time())
    except OSError:
        return _readonly(arrays)
    return _read(folder) or _readonly(arrays)
