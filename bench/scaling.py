"""Per-stage costs of `corpusclean clean` from Spark's own task metrics, at several sizes.

Each size runs the real command in a fresh process with Spark's event log on. Every Spark job a
stage starts carries the stage's name in its job description (`corpusclean clean: near`), so the
event log's task metrics add up per stage: executor core-seconds (run time of every task),
shuffle bytes written, bytes spilled, and the largest peak execution memory of one task (one
partition). Wall seconds come from report.json. Costs per document at two sizes show whether a
stage is linear; the projection divides core-seconds per document by the cores of a cluster.

    python bench/scaling.py --docs 250000 1000000

Prints a table per size, the linearity table, the projection, and last one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from clean import OUT, ensure_sample

PREFIX = "corpusclean clean: "
PROJECT_DOCS = (100_000_000, 1_000_000_000, 10_000_000_000)
PROJECT_CORES = (100, 1_000)


def _stage_of(description: str) -> str:
    if description.startswith(PREFIX):
        return description[len(PREFIX) :].split()[0]
    return "other"


def task_metrics(events_dir: Path) -> dict[str, dict[str, float]]:
    """Per stage: core_s, shuffle_write_b, spill_b (memory + disk), peak_task_mem_b, tasks."""
    (log,) = [p for p in events_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    stage_name: dict[int, str] = {}
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerStageSubmitted":
            props = event.get("Properties") or {}
            stage_name[event["Stage Info"]["Stage ID"]] = _stage_of(
                props.get("spark.job.description", "")
            )
        elif kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            name = stage_name.get(event["Stage ID"], "other")
            row = out[name]
            row["tasks"] += 1
            row["core_s"] += metrics.get("Executor Run Time", 0) / 1000
            shuffle = metrics.get("Shuffle Write Metrics") or {}
            row["shuffle_write_b"] += shuffle.get("Shuffle Bytes Written", 0)
            row["spill_b"] += metrics.get("Memory Bytes Spilled", 0) + metrics.get(
                "Disk Bytes Spilled", 0
            )
            row["peak_task_mem_b"] = max(
                row["peak_task_mem_b"], metrics.get("Peak Execution Memory", 0)
            )
    return {k: dict(v) for k, v in out.items()}


def run(docs: int, seed: int) -> dict[str, Any]:
    """One `clean` run at `docs` documents: wall seconds per stage and its task metrics."""
    sample = ensure_sample(docs, seed)
    work = OUT / f"scaling-{docs}"
    shutil.rmtree(work, ignore_errors=True)
    events = work / "events"
    events.mkdir(parents=True)
    out = work / "clean"
    cmd = [
        sys.executable,
        "-m",
        "corpusclean",
        "clean",
        "--input",
        str(sample),
        "--output",
        str(out),
        "--set",
        "spark.eventLog.enabled=true",
        "--set",
        f"spark.eventLog.dir=file://{events}",
        # Spark 4 rolls and zstd-compresses event logs by default: one plain file is read here.
        "--set",
        "spark.eventLog.rolling.enabled=false",
        "--set",
        "spark.eventLog.compress=false",
        "-q",
    ]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    report = json.loads((out / "report.json").read_text())
    metrics = task_metrics(events)
    stages = []
    for stage in report["stages"]:
        m = metrics.get(stage["name"], {})
        stages.append({"name": stage["name"], "seconds": stage["seconds"], **m})
    if "other" in metrics:
        stages.append({"name": "other", "seconds": None, **metrics["other"]})
    shutil.rmtree(out, ignore_errors=True)
    return {
        "docs": docs,
        "wall_s": round(wall, 1),
        "cores": report["spark"]["cores"],
        "output_rows": report["output_rows"],
        "stages": stages,
    }


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value / scale:,.{digits}f}"


def print_size(result: dict[str, Any]) -> None:
    docs = result["docs"]
    print(f"\n{docs:,} docs: {result['wall_s']} s wall on {result['cores']} cores")
    head = (
        f"{'stage':<10}{'wall s':>9}{'core s':>9}{'docs/s/core':>13}{'shuffle B/doc':>15}"
        f"{'spill MB':>10}{'peak task MB':>14}{'tasks':>7}"
    )
    print(head)
    for s in result["stages"]:
        core = s.get("core_s")
        rate = docs / core if core else None
        print(
            f"{s['name']:<10}{_fmt(s['seconds']):>9}{_fmt(core):>9}{_fmt(rate, digits=0):>13}"
            f"{_fmt(s.get('shuffle_write_b', 0) / docs):>15}{_fmt(s.get('spill_b'), 1e6):>10}"
            f"{_fmt(s.get('peak_task_mem_b'), 1e6):>14}{int(s.get('tasks', 0)):>7}"
        )


def per_doc(result: dict[str, Any]) -> dict[str, float]:
    """Core-seconds per document of each stage, and the whole job's wall-clock core-seconds."""
    costs = {s["name"]: s.get("core_s", 0.0) / result["docs"] for s in result["stages"]}
    costs["job (wall x cores)"] = result["wall_s"] * result["cores"] / result["docs"]
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    results = [run(d, args.seed) for d in args.docs]
    for r in results:
        print_size(r)
    small, large = results[0], results[-1]
    a, b = per_doc(small), per_doc(large)
    print(f"\ncore-us per doc, {small['docs']:,} vs {large['docs']:,} docs (1.00 = linear)")
    print(f"{'stage':<20}{'small':>10}{'large':>10}{'ratio':>8}")
    for name in b:
        if a.get(name):
            print(
                f"{name:<20}{a[name] * 1e6:>10,.0f}{b[name] * 1e6:>10,.0f}{b[name] / a[name]:>8.2f}"
            )
    job = b["job (wall x cores)"]
    print("\nprojection from the large run (whole job, core-seconds per doc / cores)")
    print(f"{'docs':>16}" + "".join(f"{f'{c:,} cores':>14}" for c in PROJECT_CORES))
    projection = {}
    for n in PROJECT_DOCS:
        cells = {c: n * job / c for c in PROJECT_CORES}
        projection[str(n)] = {str(c): round(v) for c, v in cells.items()}
        print(f"{n:>16,}" + "".join(f"{v / 3600:>12,.1f} h" for v in cells.values()))
    print(
        json.dumps(
            {
                "bench": "scaling",
                "sizes": results,
                "core_s_per_doc": {"small": a, "large": b},
                "projection_s": projection,
            }
        )
    )


if __name__ == "__main__":
    main()
