"""The fixed cost of a Spark Python task, with and without corpusclean's zipimport fix.

    python bench/python_tasks.py [--tasks 48]

Runs --tasks empty `mapInArrow` tasks (one tiny partition each) on local Spark, three times per
case, best time kept:

* `jvm only`: the same tasks written to Spark's noop sink, no Python;
* `python, stock`: a function that never imports corpusclean, so the workers keep Python's own
  `zipimporter.invalidate_caches`, which PySpark calls before every task (it re-reads the whole
  directory of pyspark.zip on Python 3.10/3.11, CPython gh-103200);
* `python, corpusclean imported`: the function imports corpusclean, as every corpusclean UDF
  does, which installs `corpusclean._zipimport_fix` in the worker.

The session has the local runs' properties but Spark's own worker daemon, and its workers
start with the first case (not in the background, as a job's do). The stock case runs first:
a worker keeps the fix once it has imported corpusclean. Also reports the median gap between
one task's end and the next task's start on the same worker. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa


def _stock(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    start = time.time()
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "t0": [start], "t1": [time.time()]})


def _patched(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import corpusclean  # noqa: F401 - installs the fix in this worker

    yield from _stock(batches)


def _gap_ms(rows: list[Any]) -> float:
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for row in rows:
        by_pid.setdefault(row["pid"], []).append((row["t0"], row["t1"]))
    gaps = []
    for spans in by_pid.values():
        spans.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    return 1000 * statistics.median(gaps) if gaps else float("nan")


def main() -> int:
    """Run the three cases; print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Importing corpusclean here patches this driver only: the workers are separate processes
    # that import what a task's function needs. Not `build_session`: its background start of
    # the workers imports corpusclean into them, and local runs' worker daemon
    # (corpusclean.sparkdaemon) imports it before it forks them; either would patch the stock
    # case's workers too.
    from pyspark.sql import SparkSession

    from corpusclean.jobs.runtime.session import read_properties

    settings = {**read_properties("local"), "spark.python.daemon.module": "pyspark.daemon"}
    builder = SparkSession.builder.appName("corpusclean-bench-python-tasks")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(0, args.tasks * 1000, 1, args.tasks)
    schema = "pid long, t0 double, t1 double"

    def best(fn: Callable[[], Any]) -> tuple[float, Any]:
        times, result = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
        return min(times), result

    jvm, _ = best(lambda: df.write.format("noop").mode("overwrite").save())
    stock, stock_rows = best(lambda: df.mapInArrow(_stock, schema).collect())
    fixed, fixed_rows = best(lambda: df.mapInArrow(_patched, schema).collect())
    rows = [
        {"case": "jvm only", "seconds": jvm, "gap_ms": None},
        {"case": "python, stock", "seconds": stock, "gap_ms": _gap_ms(stock_rows)},
        {"case": "python, corpusclean imported", "seconds": fixed, "gap_ms": _gap_ms(fixed_rows)},
    ]
    print(f"\n{args.tasks} tasks, {spark.sparkContext.master}, Python {sys.version.split()[0]}")
    print(f"{'case':<30} {'s':>7} {'ms/task':>8} {'gap ms':>7}")
    for row in rows:
        per = 1000 * float(row["seconds"]) / args.tasks
        row["ms_per_task"] = per
        gap = row["gap_ms"]
        print(
            f"{row['case']:<30} {row['seconds']:>7.2f} {per:>8.1f} "
            f"{'' if gap is None else f'{gap:.0f}':>7}"
        )
    print(json.dumps({"bench": "python_tasks", "tasks": args.tasks, "cases": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
