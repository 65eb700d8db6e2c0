"""What the local JVM's class-data archive (jobs/runtime/classcache.py) saves at start-up.

    python bench/startup.py [--repeats 3] [--clean-docs 20000]

Each measurement is a fresh process that starts a local session the way every corpusclean job
does (`build_session`) and runs two small jobs, the first of which also starts the Python
workers (one Arrow batch through `mapInArrow`). Three modes, in one run:

- `off`: no archive (`CORPUSCLEAN_CLASS_CACHE=off`);
- `recording`: the first run on a machine, which records the archive (its JVM writes it after
  the run returned: not in the `process` column);
- `mapped`: every later run, which maps it.

With `--clean-docs N` (0 skips it) it also times a whole `corpusclean clean` of the cached
N-doc sample (bench/clean.py's `ensure_sample`), off and mapped, alternating. Prints a table
of medians (min-max) and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean import OUT, ensure_sample

from corpusclean.jobs.runtime.classcache import MAGIC

PROBE = """
import json, sys, time
t0 = time.perf_counter()
import pyarrow as pa
from corpusclean.jobs.runtime.session import build_session
spark = build_session("startup-bench")
t1 = time.perf_counter()
spark.range(1000).mapInArrow(lambda it: it, "id long").count()
t2 = time.perf_counter()
spark.range(1000).selectExpr("id % 7 as k").groupBy("k").count().collect()
t3 = time.perf_counter()
print(json.dumps({"session": t1 - t0, "first_job": t2 - t1, "second_job": t3 - t2}))
"""


def _probe(cache: str) -> dict[str, float]:
    env = {**os.environ, "CORPUSCLEAN_CLASS_CACHE": cache, "PYSPARK_PYTHON": sys.executable}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, check=True, capture_output=True, text=True
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    got["process"] = time.perf_counter() - start
    return got


def _wait_written(folder: Path, timeout: float = 180) -> None:
    """Until the recording run's JVM, which writes the recording after the run returned, has
    written it; then mark it old enough to be adopted by the next run (which checks it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(folder.glob("*.recording"))
        if found and found[0].read_bytes()[:4] == MAGIC:
            time.sleep(1)
            past = time.time() - 3600
            os.utime(found[0], (past, past))
            return
        time.sleep(1)
    raise SystemExit(f"no recording written in {folder} after {timeout}s")


def _clean(cache: str, sample: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "CORPUSCLEAN_CLASS_CACHE": cache}
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "corpusclean", "clean", "--input", str(sample)]
    subprocess.run([*cmd, "--output", str(out)], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clean-docs", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="corpusclean-startup-"))
    try:
        runs: dict[str, list[dict[str, float]]] = {"off": [], "recording": [], "mapped": []}
        runs["recording"].append(_probe(str(folder)))
        _wait_written(folder)
        for _ in range(args.repeats):
            runs["off"].append(_probe("off"))
            runs["mapped"].append(_probe(str(folder)))
        archive_mb = sum(p.stat().st_size for p in folder.glob("*.jsa")) / 1e6
        cleans: dict[str, list[float]] = {"off": [], "mapped": []}
        if args.clean_docs:
            sample = ensure_sample(args.clean_docs, args.seed)
            out = OUT / f"startup-clean-{args.clean_docs}"
            for _ in range(args.repeats):
                cleans["off"].append(_clean("off", sample, out))
                cleans["mapped"].append(_clean(str(folder), sample, out))
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    keys = ("session", "first_job", "second_job", "process")
    table = {m: {k: _summary([r[k] for r in rs]) for k in keys} for m, rs in runs.items()}
    print(f"local start-up, {os.cpu_count()} cores; median (min-max) seconds of fresh processes")
    print(f"{'mode':<10} {'runs':>4} " + " ".join(f"{k:>19}" for k in keys))
    for mode, rows in table.items():
        cells = [f"{v['median']:6.2f} ({v['min']:.2f}-{v['max']:.2f})" for v in rows.values()]
        print(f"{mode:<10} {len(runs[mode]):>4} " + " ".join(f"{c:>19}" for c in cells))
    print(f"archive: {archive_mb:,.0f} MB")
    clean_table = {m: _summary(v) for m, v in cleans.items() if v}
    for mode, v in clean_table.items():
        print(
            f"clean {args.clean_docs:,} docs, {mode:<6}: {v['median']:.2f} s "
            f"({v['min']:.2f}-{v['max']:.2f}, {args.repeats} runs)"
        )
    saved = table["off"]["process"]["median"] - table["mapped"]["process"]["median"]
    print(f"saved per process start: {saved:.2f} s")
    print(
        json.dumps(
            {
                "bench": "startup",
                "cores": os.cpu_count(),
                "repeats": args.repeats,
                "probe": table,
                "archive_mb": round(archive_mb, 1),
                "clean_docs": args.clean_docs,
                "clean_s": clean_table,
                "saved_per_start_s": round(saved, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
