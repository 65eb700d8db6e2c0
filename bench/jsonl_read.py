"""What the bad-line checks cost on a clean JSON Lines corpus (the happy path).

    python bench/jsonl_read.py --input DIR_OR_FILE [--rounds 2]

Reads the input and scans every column to Spark's noop sink, the way clean's read pass does:

* `before`: Spark's JSON reader in FAILFAST mode (what clean did until the bad-line checks;
  it kept the first of two objects on a line and dropped the second without a word);
* `after`: `jobs/inputs.read_jsonl`: the same schema inference, then the raw lines through
  `from_json` (PERMISSIVE), the UTF-8 check and the skeleton check for a second value.

Both include schema inference. Rounds alternate, best time kept. Prints a table and one JSON
line. Make an input with `corpusclean sample --output DIR --docs 200000 --format jsonl`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from pyspark.sql import DataFrame, SparkSession


def _before(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.option("mode", "FAILFAST").json(path)


def _after(spark: SparkSession, path: str) -> DataFrame:
    from corpusclean.jobs.inputs.files import plan_input, read_jsonl

    return read_jsonl(spark, plan_input(path, "jsonl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    cases = {"before": _before, "after": _after}
    best: dict[str, float] = {}
    rows: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, read in cases.items():
            t = time.perf_counter()
            df = read(spark, args.input)
            df.write.format("noop").mode("overwrite").save()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - t)
            rows.setdefault(name, df.count() if name == "before" else -1)
    n = rows["before"]
    print(f"{'case':<8} {'seconds':>8} {'docs/s':>10}")
    for name, secs in best.items():
        print(f"{name:<8} {secs:>8.1f} {n / secs:>10,.0f}")
    overhead = best["after"] / best["before"] - 1
    print(
        json.dumps(
            {"docs": n, **{k: round(v, 2) for k, v in best.items()}, "overhead": round(overhead, 3)}
        )
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
