"""Lookup tables built once per machine and memory-mapped by every Python worker.

Two tables behind the quality filters cost each Python worker time before its first batch: the
language-ID model (py3langid's xz-compressed arrays, ~100 MB once unpacked) and the
character-class table (a Python loop over every code point). Spark starts a worker
per core, per executor and per application, so a short job paid them again and again, and each
worker held its own ~100 MB copy of the model.

The first worker to need a table builds it and writes it here as plain `.npy` files (one folder
per table, written under a temporary name, synced to disk and renamed, so a reader sees a whole
folder or none).
Later workers map the files read-only (`numpy.load(mmap_mode="r")`): milliseconds instead of a
second, and one copy in the page cache for all of them. A folder's name carries a digest of
everything its arrays depend on (the model file's bytes, the Unicode version, the table's
definition and this file's format), so a changed input gets a new folder, never a stale table.

Nothing here is needed for a correct result: where the folder cannot be written (a read-only
home on a cluster node) or read (no permission), the table is built in memory as before, and
the folder is left as it is. A folder whose files are not what its list says (a short file,
another shape) is moved aside and built again. A folder no run has used for `UNUSED_S` is
removed by the next run that loads a table of the same name, as is what a killed writer left
once `STALE_S` old.

`CORPUSCLEAN_TABLE_CACHE`: the folder (default `$XDG_CACHE_HOME/corpusclean/tables`, else
`~/.cache/corpusclean/tables`), or `off`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ENV = "CORPUSCLEAN_TABLE_CACHE"
# Bumped when the layout of a folder changes: older folders are then simply never read.
FORMAT = 1
# A table folder that no run has read for this long belongs to an install that is gone.
UNUSED_S = 14 * 86400.0
# What a killed writer left (a temporary folder), or a damaged folder moved aside, this old is
# no longer being written or read.
STALE_S = 3600.0
_OFF = {"off", "0", "false", "no", "none"}
_META = "meta.json"


def user_cache_dir(env: str, *sub: str) -> Path | None:
    """The folder named by the environment variable `env`, or `sub` under the user's cache
    (`$XDG_CACHE_HOME`, else `~/.cache`); None when `env` says `off` or there is no home."""
    where = os.environ.get(env, "").strip()
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
        # write, or the files would land in the working directory.
        if not home.is_absolute():
            return None
        base = str(home / ".cache")
    return Path(base).joinpath(*sub)


def cache_dir() -> Path | None:
    """The folder tables live in, or None when the cache is off."""
    return user_cache_dir(ENV, "corpusclean", "tables")


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

    def const_bytes(const: object) -> list[bytes]:
        if isinstance(const, types.CodeType):
            return walk(const)
        if isinstance(const, frozenset):
            # `x in {...}` compiles to a frozenset, whose repr's order follows string hashing,
            # which differs from process to process: its members are sorted instead.
            return [repr(sorted(repr(m) for m in const)).encode()]
        return [repr(const).encode()]

    def walk(co: types.CodeType) -> list[bytes]:
        out = [co.co_code, repr(co.co_names).encode()]
        for const in co.co_consts:
            out += const_bytes(const)
        return out

    return b"\0".join(walk(fn.__code__))


def readonly(arr: np.ndarray) -> np.ndarray:
    """A read-only view of `arr`. Numba compiles (and caches) a function once per argument
    type, and read-only is part of an array's type: a built table and a mapped one (or an
    Arrow buffer and a rewritten copy) then share one compilation per worker."""
    view = arr.view()
    view.flags.writeable = False
    return view


def _readonly(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array of `arrays` read-only (`readonly`)."""
    return {name: readonly(arr) for name, arr in arrays.items()}


class _DamagedError(Exception):
    """A finished folder that does not hold what its `meta.json` lists."""


def _read(folder: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a finished folder, mapped read-only; None when there is none.

    Raises `_DamagedError` when the folder is there but its files are not what `meta.json` lists
    (an unreadable list, a missing or short file, another dtype or shape). Any other error
    (no permission, too many open files, a network file system's hiccup) raises OSError, and
    says nothing about the folder, which is then left alone.
    """
    try:
        text = (folder / _META).read_text()
    except FileNotFoundError:
        if folder.is_dir():  # published folders always have their list: a file was removed
            raise _DamagedError(folder) from None
        return None
    try:
        meta = json.loads(text)
        out = {}
        for name, spec in meta["arrays"].items():
            arr = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            if str(arr.dtype) != spec["dtype"] or list(arr.shape) != spec["shape"]:
                raise _DamagedError(folder)
            out[name] = np.asarray(arr)  # a plain ndarray view: one numba type
    except FileNotFoundError as exc:
        raise _DamagedError(folder) from exc
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # A short file is never mapped: numpy checks its length against its header first
        # (mapping it would fault on the first read past its end).
        raise _DamagedError(folder) from exc
    # Marked used, so that the sweep of unused folders leaves it.
    with contextlib.suppress(OSError):
        os.utime(folder)
    return out


def _save(path: Path, write: Callable[[Any], None]) -> None:
    """`write(file)` into a new file at `path`, on disk before this returns: a folder must
    not be published whose files a crash could still leave empty."""
    with path.open("wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _write(root: Path, folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """`arrays` into `folder`, whole or not at all (another process may write it too)."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        spec = {}
        for name, arr in arrays.items():
            data = np.ascontiguousarray(arr)
            _save(tmp / f"{name}.npy", lambda f, a=data: np.save(f, a, allow_pickle=False))
            spec[name] = {"dtype": str(arr.dtype), "shape": list(arr.shape)}
        listing = json.dumps({"arrays": spec}).encode()
        _save(tmp / _META, lambda f: f.write(listing))
        # mkdtemp makes the folder private, but the tables hold only public data (a released
        # model, Unicode's classes) and are meant for every user of a shared cache folder.
        for path in tmp.iterdir():
            path.chmod(0o644)
        tmp.chmod(0o755)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            tmp.rename(folder)
        except OSError:
            # Another worker renamed its folder first: theirs holds the same arrays.
            if not (folder / _META).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _discard(root: Path, folder: Path) -> None:
    """Move a damaged `folder` out of the way (renamed: a process that mapped its files keeps
    them); the sweep removes it later."""
    trash = Path(tempfile.mkdtemp(prefix=f".trash-{folder.name}-", dir=root))
    folder.rename(trash / folder.name)


def _sweep(root: Path, name: str, now: float) -> None:
    """Remove the folders of table `name` that no run used for `UNUSED_S`, and what crashed
    writers and discarded folders left, once `STALE_S` old."""
    mine = re.compile(rf"{re.escape(name)}-[0-9a-f]{{20}}")
    left = re.compile(rf"\.(trash-)?{re.escape(name)}-[0-9a-f]{{20}}-.+")
    for entry in root.iterdir():
        if mine.fullmatch(entry.name):
            limit = UNUSED_S
        elif left.fullmatch(entry.name):
            limit = STALE_S
        else:
            continue
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime > limit:
                shutil.rmtree(entry)


def load(name: str, key: str, build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of table `name` for `key` (a `digest` of what they depend on): mapped from
    the cache folder, or built with `build()` and written there for the next process.

    Always read-only arrays. Without a usable folder, `build()`'s arrays themselves.
    """
    root = cache_dir()
    if root is None:
        return _readonly(build())
    folder = root / f"{name}-{key}"
    try:
        found = _read(folder)
        if found is not None:
            _sweep(root, name, time.time())
            return found
    except _DamagedError:
        with contextlib.suppress(OSError):
            _discard(root, folder)
    except OSError:
        # Whatever keeps this process from reading the folder says nothing about the folder:
        # it stays for the others.
        return _readonly(build())
    arrays = build()
    try:
        # Another worker may have finished writing it meanwhile.
        found = _read(folder)
        if found is not None:
            return found
        _write(root, folder, arrays)
        _sweep(root, name, time.time())
        return _read(folder) or _readonly(arrays)
    except (OSError, _DamagedError):
        return _readonly(arrays)
