"""Known causes behind an exception from Python, Py4J or Spark, as one-line job errors.

A Spark job that fails for an ordinary reason (a full disk) surfaces as a Py4JJavaError or a
task failure whose text holds a Java or Python stack trace; the cause is somewhere in that text
or in the exception's chain. `known_failure` recognises such causes and returns the
`CorpusCleanError` to report instead, so that every job says the same thing for the same cause.
"""

from __future__ import annotations

import contextlib
import errno
import re
from collections.abc import Iterator
from pathlib import Path

from corpusclean.errors import CorpusCleanError

# Java's text for ENOSPC (java.io.IOException, Hadoop's FSError), and Python's strerror.
_NO_SPACE = re.compile(r"No space left on device|ENOSPC|Disk quota exceeded")
# A path in a Spark/Java message: `file:/x/y`, or Python's `...: '/x/y'`.
_PATH_IN_TEXT = re.compile(r"file:(/[^\s'\",;)]+)|device: '(/[^']+)'")
_STAGED = re.compile(r"^(.*)/\.([^/]+)\.runs(?:/.*)?$")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and the exceptions it was raised from or while handling."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__]


def _text(exc: BaseException) -> str:
    text = str(exc)
    # A Py4JJavaError's str() holds the Java stack trace; its java_exception may say more.
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):  # the gateway may already be gone
            text += "\n" + str(java.toString())
    return text


def disk_full(exc: BaseException, path: str | Path | None = None) -> CorpusCleanError | None:
    """A "disk full" error naming `path` (else the path the exception names) when `exc` was
    caused by a full filesystem (ENOSPC, EDQUOT) in Python, Py4J or Spark; None otherwise."""
    for item in _chain(exc):
        if isinstance(item, OSError) and item.errno in (errno.ENOSPC, errno.EDQUOT):
            where = path if path is not None else item.filename
            return _disk_full_error(where)
        text = _text(item)
        if _NO_SPACE.search(text):
            if path is None:
                match = _PATH_IN_TEXT.search(text)
                path = next((g for g in match.groups() if g), None) if match else None
            return _disk_full_error(_output_of(str(path).rstrip(".:")) if path else None)
    return None


def _output_of(path: str) -> str:
    """The output a path inside its staging folder (`DIR/.NAME.runs/RUN/...`) stands for."""
    match = _STAGED.match(path)
    return f"{match.group(1)}/{match.group(2)}" if match else path


def _disk_full_error(path: str | Path | None) -> CorpusCleanError:
    where = f" writing {path}" if path else ""
    return CorpusCleanError(
        f"disk full: no space left on the device{where}; free space there or choose an "
        "output on a larger filesystem, then rerun"
    )


def known_failure(exc: BaseException) -> CorpusCleanError | None:
    """The one-line error for an exception whose cause is recognised, else None."""
    return disk_full(exc)
