"""Wall time and peak memory of `corpusclean clean` on sample corpora of several sizes.

Each size runs the real command in a fresh process (Spark start-up included) and samples the
resident memory of the Python driver and of the JVM it starts, every 100 ms. In local mode the
JVM hosts the executors too, so its figure includes the partitions being processed; the Python
driver's figure is the one that must stay flat as the corpus grows.

    python bench/clean.py --docs 100000 1000000 [--near] [--keep-data]

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "out"


def ensure_sample(docs: int, seed: int) -> Path:
    """A cached sample corpus of `docs` rows under bench/out/."""
    path = OUT / f"sample-{docs}-s{seed}"
    if not (path / "_truth.parquet").exists():
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "corpusclean.jobs.sample",
                "--output",
                str(path),
                "--docs",
                str(docs),
                "--seed",
                str(seed),
            ],
            check=True,
        )
    return path


class PeakMemory(threading.Thread):
    """Samples RSS of a process (the Python driver), of its java children and of its whole tree.

    The tree counts every descendant too: Spark's Python workers (children of the JVM in local
    mode) or a peer's worker processes.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.python_peak = 0
        self.jvm_peak = 0
        self.tree_peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                own = self.proc.memory_info().rss
                self.python_peak = max(self.python_peak, own)
                jvm = tree = 0
                for child in self.proc.children(recursive=True):
                    try:
                        rss = child.memory_info().rss
                        tree += rss
                        if "java" in child.name():
                            jvm += rss
                    except psutil.Error:  # a worker that ended between listing and reading
                        continue
                self.jvm_peak = max(self.jvm_peak, jvm)
                self.tree_peak = max(self.tree_peak, own + tree)
            except psutil.Error:
                pass
            self.stop.wait(0.1)


def timed_process(cmd: list[str]) -> tuple[float, PeakMemory]:
    """Run `cmd` to the end; its wall seconds and peak memory. Exits on a non-zero status."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mem = PeakMemory(proc.pid)
    mem.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - start
    mem.stop.set()
    mem.join()
    if proc.returncode != 0:
        sys.stderr.write(stderr[-4000:])
        raise SystemExit(f"{' '.join(cmd[:3])} failed with exit {proc.returncode}")
    return wall, mem


def run_clean(sample: Path, near: bool, extra: list[str]) -> dict[str, object]:
    """One `corpusclean clean` run; returns wall seconds, peak memory and the report."""
    out = OUT / f"clean-{sample.name}-{'near' if near else 'nonear'}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "corpusclean.jobs.clean",
        "--input",
        str(sample),
        "--output",
        str(out),
    ]
    if not near:
        cmd += ["--set", "near_dedup.enabled=false"]
    cmd += extra
    wall, mem = timed_process(cmd)
    report = json.loads((out / "report.json").read_text())
    return {
        "docs": report["input_rows"],
        "output_rows": report["output_rows"],
        "wall_s": round(wall, 2),
        "docs_per_s": round(report["input_rows"] / wall, 1),
        "python_driver_peak_mb": round(mem.python_peak / 2**20, 1),
        "jvm_peak_mb": round(mem.jvm_peak / 2**20, 1),
        "stages": {s["name"]: s["seconds"] for s in report["stages"]},
        "near_dedup": report["near_dedup"],
    }


def main() -> None:
    """Run the sizes asked for and print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--near", action="store_true", help="near-dedup on (default off)")
    parser.add_argument("--set", action="append", default=[], help="extra --set for clean")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    extra = [x for kv in args.set for x in ("--set", kv)]
    results = []
    for docs in args.docs:
        sample = ensure_sample(docs, args.seed)
        results.append(run_clean(sample, args.near, extra))
    print(
        f"\ncorpusclean clean (near-dedup {'on' if args.near else 'off'}), "
        f"cores={psutil.cpu_count()}"
    )
    print(
        f"{'docs':>10} {'wall s':>8} {'docs/s':>9} {'py driver MB':>13} {'JVM MB':>8}"
        "  stage seconds"
    )
    for r in results:
        stages = " ".join(f"{k}={v:.1f}" for k, v in r["stages"].items() if v)  # type: ignore[union-attr]
        print(
            f"{r['docs']:>10,} {r['wall_s']:>8.1f} {r['docs_per_s']:>9,.0f} "
            f"{r['python_driver_peak_mb']:>13.0f} {r['jvm_peak_mb']:>8.0f}  {stages}"
        )
    print(json.dumps({"bench": "clean", "near_dedup": args.near, "results": results}))


if __name__ == "__main__":
    main()
