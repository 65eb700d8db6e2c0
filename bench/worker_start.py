"""What starting Spark's Python workers under corpusclean.sparkdaemon saves a local run.

    python bench/worker_start.py [--repeats 3] [--clean-docs 20000]

Spark puts `pyspark.zip` and py4j's source zip first on its Python workers' path, and Python
caches no byte-code for modules imported from a zip: the worker daemon and each worker compile
every pyspark module they import from source. src/corpusclean/sparkdaemon.py moves the zips
behind the installed pyspark of the same release (conf/spark/local.properties names it as
`spark.python.daemon.module`). Two modes, alternating, each in fresh processes:

- `zip`: `spark.python.daemon.module=pyspark.daemon`, Spark's default;
- `installed`: `corpusclean.sparkdaemon`, what local runs use.

`session probe`: a local session as every job starts it (`build_session`, which also starts the
workers in the background), then one `mapInArrow` job on every core whose function imports
what clean's read pass imports. Reports that job's wall and the CPU seconds of the Python
daemon and its workers (psutil, after the job). With `--clean-docs N` (0 skips it), whole
`corpusclean clean` runs of the cached N-doc sample (bench/clean.py's `ensure_sample`): their
wall and the CPU seconds of every process of the run (driver, JVM, Python workers; sampled
every 0.1 s). Prints a table of medians (min-max) and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean import OUT, ensure_sample
from startup import _summary

MODES = {"zip": "pyspark.daemon", "installed": "corpusclean.sparkdaemon"}

PROBE = """
import json, sys, time
import psutil
from corpusclean.jobs.runtime.session import build_session
spark = build_session("worker-start-bench", {"spark.python.daemon.module": sys.argv[1]})


def read_like(batches):
    import corpusclean.pipelines.content
    import corpusclean.pipelines.near_dedup  # noqa: F401

    yield from batches


cores = spark.sparkContext.defaultParallelism
t0 = time.perf_counter()
spark.range(cores, numPartitions=cores).mapInArrow(read_like, "id long").collect()
first_job = time.perf_counter() - t0
tracker = spark.sparkContext.statusTracker()
while tracker.getActiveJobsIds():  # the background start of the workers (build_session)
    time.sleep(0.05)
cpu = 0.0
for p in psutil.Process().children(recursive=True):
    try:
        if "daemon" in " ".join(p.cmdline()) and "python" in p.name():
            t = p.cpu_times()
            cpu += t.user + t.system + t.children_user + t.children_system
    except psutil.Error:  # a process that ended meanwhile
        pass
print(json.dumps({"first_job": first_job, "python_cpu": cpu}))
"""


def _probe(module: str) -> dict[str, float]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


class TreeCpu(threading.Thread):
    """The CPU seconds of a process and all its descendants, sampled until `stop` is set."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            self.seen[p.pid] = max(self.seen.get(p.pid, 0.0), t.user + t.system)

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            time.sleep(0.1)

    @property
    def total(self) -> float:
        return sum(self.seen.values())


def _clean(module: str, sample: Path, out: Path) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "corpusclean", "clean", "--input", str(sample)]
    cmd += ["--output", str(out), "--set", f"spark.python.daemon.module={module}"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu = TreeCpu(proc.pid)
    cpu.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    cpu.stop.set()
    cpu.join()
    if proc.returncode != 0:
        raise SystemExit(f"clean failed with exit {proc.returncode}: {err[-2000:]}")
    return {"wall": wall, "cpu": cpu.total}


def _cell(v: dict[str, float]) -> str:
    return f"{v['median']:6.2f} ({v['min']:.2f}-{v['max']:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clean-docs", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    probes: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    cleans: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    sample = ensure_sample(args.clean_docs, args.seed) if args.clean_docs else None
    out = OUT / f"worker-start-clean-{args.clean_docs}"
    for _ in range(args.repeats):
        for mode, module in MODES.items():
            probes[mode].append(_probe(module))
    if sample is not None:
        for _ in range(args.repeats):
            for mode, module in MODES.items():
                cleans[mode].append(_clean(module, sample, out))
        shutil.rmtree(out, ignore_errors=True)

    table: dict[str, dict[str, dict[str, float]]] = {}
    for mode in MODES:
        row = {k: _summary([r[k] for r in probes[mode]]) for k in ("first_job", "python_cpu")}
        if cleans[mode]:
            row["clean_wall"] = _summary([r["wall"] for r in cleans[mode]])
            row["clean_cpu"] = _summary([r["cpu"] for r in cleans[mode]])
        table[mode] = row
    cols = list(table["zip"])
    print(
        f"Python worker start, {os.cpu_count()} cores; median (min-max) seconds, "
        f"{args.repeats} runs per mode alternating; clean on {args.clean_docs:,} docs"
    )
    print(f"{'mode':<10} " + " ".join(f"{c:>19}" for c in cols))
    for mode, row in table.items():
        print(f"{mode:<10} " + " ".join(f"{_cell(row[c]):>19}" for c in cols))
    saved = {c: round(table["zip"][c]["median"] - table["installed"][c]["median"], 2) for c in cols}
    print("saved (zip - installed): " + ", ".join(f"{c} {v:.2f} s" for c, v in saved.items()))
    print(
        json.dumps(
            {
                "bench": "worker_start",
                "cores": os.cpu_count(),
                "repeats": args.repeats,
                "clean_docs": args.clean_docs,
                "modes": table,
                "saved_s": saved,
            }
        )
    )


if __name__ == "__main__":
    main()
