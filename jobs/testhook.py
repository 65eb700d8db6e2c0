"""A hold point for crash tests: inert unless CORPUSCLEAN_TEST_HOLD is set.

    CORPUSCLEAN_TEST_HOLD=POINT[,POINT...]@DIR

On reaching a listed POINT the process writes `DIR/POINT.reached` (its pid) and waits until
`DIR/POINT.go` exists. The crash-safety tests kill the process group while it waits, which puts a
kill at an exact, repeatable place of the run instead of at a moment that depends on the machine.
The points of `clean`: `prepared` (lock held, staging created), `read` (features staged),
`dedup` (decisions staged), `write` (data staged), `publish` (staged output complete, not yet
swapped in), `swapped` (swapped in, the previous output not yet removed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "CORPUSCLEAN_TEST_HOLD"


def hold(point: str) -> None:
    """Wait at `point` when the environment asks for it; otherwise return at once."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    names, _, folder = spec.rpartition("@")
    if point not in names.split(","):
        return
    where = Path(folder)
    (where / f"{point}.reached").write_text(str(os.getpid()), "utf-8")
    while not (where / f"{point}.go").exists():
        time.sleep(0.05)
