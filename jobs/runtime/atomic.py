"""Atomic file replacement: a reader sees the old file or the whole new one, never half of it.

    with replacing(path) as tmp:          # write tmp any way (a zip, an archive tool's output)
        ...
    write_text_atomic(path, text)         # or, for text or bytes in memory
    write_bytes_atomic(path, data)

The new content goes to a temporary file `.{name}.{pid}.{token}.tmp` (see `temp_name`), in
`temp_dir` or else in the target's own folder (the rename must stay on one filesystem), which
is flushed to disk (fsync) and then renamed over the target with `os.replace`. The pid and a
random token make the name unique per writer, so two processes, or two threads, replacing the
same file never write into each other's temporary file: the last rename wins, whole. On any
failure the temporary file is removed and the target is left as it was. A process killed
mid-write leaves its temporary file behind; `is_temp_of` recognises such leftovers of a given
target, for the code that cleans them up.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def temp_name(name: str, suffix: str = "") -> str:
    """A fresh temporary file name for target `name`: `.{name}.{pid}.{8 hex}.tmp{suffix}`."""
    return f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp{suffix}"


def is_temp_of(name: str, candidate: str) -> bool:
    """True when `candidate` is a temporary file name `temp_name(name, ...)` gives."""
    return re.fullmatch(rf"\.{re.escape(name)}\.\d+\.[0-9a-f]+\.tmp(\..+)?", candidate) is not None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path: Path, temp_dir: Path | None = None, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path to write `path`'s new content into; on a clean exit it is synced
    and renamed over `path`, on an exception removed (and `path` left untouched).

    `suffix` ends the temporary name, for tools that go by a file's extension.
    """
    folder = temp_dir if temp_dir is not None else path.parent
    tmp = folder / temp_name(path.name, suffix)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes, temp_dir: Path | None = None) -> None:
    """Replace `path` with `data` atomically (see the module docstring)."""
    with replacing(path, temp_dir) as tmp, open(tmp, "xb") as f:
        f.write(data)


def write_text_atomic(path: Path, text: str, temp_dir: Path | None = None) -> None:
    """Replace `path` with `text`, UTF-8 encoded, atomically (see the module docstring).

    Written as bytes: no newline translation, so checksums of the text hold on every system.
    """
    write_bytes_atomic(path, text.encode("utf-8"), temp_dir)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half of it."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
