"""A hold point for crash tests: inert unless CORPUSCLEAN_TEST_HOLD is set.

    CORPUSCLEAN_TEST_HOLD=POINT[:N][,POINT[:N]...]@DIR

The N-th time (default the first) a process reaches a listed POINT it writes `DIR/POINT.reached`
(its pid) and waits until `DIR/POINT.go` exists. The crash-safety tests kill the process group
while it waits, which puts a kill at an exact, repeatable place of the run instead of at a moment
that depends on the machine. Spark's Python workers inherit the variable in local mode (on a
cluster, pass it as `spark.executorEnv.CORPUSCLEAN_TEST_HOLD`), so points inside tasks hold too,
counted per worker process; once the `.go` file exists, no later arrival waits.

The points of `clean`: `prepared` (lock held, staging created), `read` (features staged and
checkpointed), `decided` (a dedup unit's decisions checkpointed; `decided:2` the second),
`materialised` (a cluster stage's frame committed), `dedup` (every decision staged), `write`
(data staged and checkpointed), `audit` (the audit started), `publish` (staged output complete,
not yet swapped in), `swapped` (swapped in, the previous output not yet removed), and in its
tasks `near.verify` (a near-dedup verification task started). Of `pack`: `pack.task`
(a write task started), `pack.part` (a part committed), `pack.number` (parts being numbered),
`pack.publish` and `pack.swapped` (an --overwrite being swapped in). Of `index`:
`index.features` (its read pass checkpointed) and `index.publish` (the index written, not yet
swapped in).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "CORPUSCLEAN_TEST_HOLD"
_reached: dict[str, int] = {}


def hold(point: str) -> None:
    """Wait at `point` when the environment asks for it; otherwise return at once."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    names, _, folder = spec.rpartition("@")
    wanted = dict(item.partition(":")[::2] for item in names.split(","))
    if point not in wanted:
        return
    _reached[point] = _reached.get(point, 0) + 1
    if _reached[point] != int(wanted[point] or 1):
        return
    where = Path(folder)
    (where / f"{point}.reached").write_text(str(os.getpid()), "utf-8")
    while not (where / f"{point}.go").exists():
        time.sleep(0.05)
