"""A test hook for the crash-safety tests: hold a run at a named point so a test can kill it.

Inert unless the environment variable `CORPUSCLEAN_PAUSE_AT` is set (one lookup per call).
"""

from __future__ import annotations

import os
import sys
import time

ENV = "CORPUSCLEAN_PAUSE_AT"
_reached: dict[str, int] = {}


def pause_point(name: str) -> None:
    """With `CORPUSCLEAN_PAUSE_AT=NAME[:N]`, the N-th time (default the first) this process
    reaches point `name`: print `corpusclean: paused at NAME:N` on stderr and sleep until
    killed. Points: pack.task, pack.part, pack.number, pack.publish, pack.swapped."""
    wanted = os.environ.get(ENV)
    if not wanted or wanted.partition(":")[0] != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == int(wanted.partition(":")[2] or 1):
        print(f"corpusclean: paused at {name}:{_reached[name]}", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)
