"""The local driver JVM's JIT: the whole `clean` with C1 alone against the full tiered JIT (C2).

    python bench/jit.py [--docs 20000 300000] [--repeats 3 1]

A local run's one JVM runs every task. jobs/runtime/session.py gives it C1 alone
(`-XX:TieredStopAtLevel=1`) when the input is at most `SMALL_INPUT_BYTES`; this measures
why, and where the line is. For each sample size (bench/clean.py's cached samples), fresh
`corpusclean clean` processes (default config, near-dedup and audit on, class archive as a
user has it) are timed with each choice forced through `spark.driver.extraJavaOptions`,
alternating, and with no choice (what the run picks by itself). Prints a table of medians
(min-max) and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean import OUT, ensure_sample

from corpusclean.jobs.runtime.session import QUICK_JIT, SMALL_INPUT_BYTES, input_bytes

MODES = {
    "c1": ["--set", f"spark.driver.extraJavaOptions={QUICK_JIT}"],
    "c2": ["--set", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=4"],
    "default": [],
}


def _clean(sample: Path, out: Path, extra: list[str]) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "corpusclean", "clean", "--input", str(sample)]
    cmd += ["--output", str(out), "-q", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[20_000, 300_000])
    ap.add_argument(
        "--repeats", type=int, nargs="+", default=[3, 1], help="per size (the last repeats)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = []
    for i, docs in enumerate(args.docs):
        repeats = args.repeats[min(i, len(args.repeats) - 1)]
        sample = ensure_sample(docs, args.seed)
        size = input_bytes([str(sample)]) or 0
        out = OUT / f"jit-clean-{docs}"
        times: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(repeats):
            for mode, extra in MODES.items():
                times[mode].append(_clean(sample, out, extra))
        shutil.rmtree(out, ignore_errors=True)
        med = {m: round(statistics.median(v), 2) for m, v in times.items()}
        rows.append(
            {
                "docs": docs,
                "input_mb": round(size / 1e6, 1),
                "picks": "c1" if size <= SMALL_INPUT_BYTES else "c2",
                "seconds": {m: [round(x, 2) for x in v] for m, v in times.items()},
                "median_s": med,
                "c2_over_c1": round(med["c2"] / med["c1"], 3),
            }
        )
    print(f"whole `clean`, fresh processes, {os.cpu_count()} cores; median (min-max) seconds")
    head = f"{'docs':>9} {'input MB':>9} {'C1 alone':>20} {'C2 (tiered)':>20} {'picks':>6}"
    print(head + f" {'default run':>20} {'C2/C1':>6}")
    for r in rows:
        cells = []
        for m in MODES:
            v = r["seconds"][m]
            cells.append(f"{r['median_s'][m]:6.2f} ({min(v):.2f}-{max(v):.2f})")
        print(
            f"{r['docs']:>9,} {r['input_mb']:>9,.1f} {cells[0]:>20} {cells[1]:>20} "
            f"{r['picks']:>6} {cells[2]:>20} {r['c2_over_c1']:>6.2f}"
        )
    limit = SMALL_INPUT_BYTES / 1e6
    print(f"C1 alone up to {limit:,.0f} MB of input (jobs/runtime/session.py SMALL_INPUT_BYTES)")
    line = {"bench": "jit", "cores": os.cpu_count(), "small_input_mb": limit, "runs": rows}
    print(json.dumps(line))


if __name__ == "__main__":
    main()
