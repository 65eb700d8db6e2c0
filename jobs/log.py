"""Progress lines on stderr: one per stage, with rows and seconds."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def info(job: str, message: str) -> None:
    """One progress line, prefixed by the job's name."""
    print(f"[{job}] {message}", file=sys.stderr, flush=True)


def warn(job: str, message: str) -> None:
    """A line that needs a person's attention but does not stop the job."""
    print(f"[{job}] WARNING: {message}", file=sys.stderr, flush=True)


class Timer:
    """Wall-clock seconds of a block, read after it ends."""

    def __init__(self) -> None:
        self.seconds = 0.0

    @contextmanager
    def __call__(self) -> Iterator[Timer]:
        start = time.perf_counter()
        try:
            yield self
        finally:
            self.seconds = time.perf_counter() - start


def fmt_rows(n: int | None) -> str:
    """`1,234,567` or `?` for an unknown count."""
    return "?" if n is None else f"{n:,}"
