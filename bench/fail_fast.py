"""How long each command takes to answer a bad input: every check that needs no Spark runs first.

Each case runs the installed `corpusclean` in a fresh process (interpreter start and imports
included) and records wall seconds, the exit code and the one line on stderr.

    python bench/fail_fast.py [--repeat 3]

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent / "corpusclean"


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """(name, arguments) of bad inputs, one per command and kind of mistake."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp / "empty").mkdir()
    (tmp / "raw").mkdir()
    pq.write_table(pa.table({"doc_id": ["a"], "text": ["x" * 200]}), tmp / "raw" / "p.parquet")
    (tmp / "notes.txt").write_text("not a corpus\n")
    (tmp / "bad.yaml").write_text("near_dedup: {treshold: 0.9}\n")
    clean = ["clean", "--input", "raw", "--output"]
    return [
        ("clean: missing input", ["clean", "--input", "missing", "--output", "out"]),
        ("clean: missing .parquet", ["clean", "--input", "missing.parquet", "--output", "out"]),
        ("clean: glob matches nothing", ["clean", "--input", "nothing-*.parquet", "--output", "o"]),
        ("clean: empty folder", ["clean", "--input", "empty", "--output", "out"]),
        ("clean: not a data file", ["clean", "--input", "notes.txt", "--output", "out"]),
        ("clean: output is the input", [*clean, "raw"]),
        ("clean: output inside input", [*clean, "raw/out"]),
        ("clean: config typo", [*clean, "out", "--config", "bad.yaml"]),
        ("clean: bad spark setting", [*clean, "out", "--set", "spark.driver.memory=lots"]),
        ("clean: unknown spark key", [*clean, "out", "--set", "spark.sql.shufle.partitions=4"]),
        ("pack: missing input", ["pack", "--input", "missing", "--output", "shards"]),
        ("check: missing input", ["check", "--input", "missing"]),
        ("bench: missing shards", ["bench", "--shards", "missing"]),
        (
            "submit: bad --conf",
            [
                "submit",
                "--master",
                "spark://127.0.0.1:7",
                "--conf",
                "spark.executor.memory=x",
                "clean",
            ],
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the best is kept")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="corpusclean-failfast-"))
    rows = []
    try:
        for name, argv in cases(tmp):
            best, proc = float("inf"), None
            for _ in range(args.repeat):
                start = time.perf_counter()
                proc = subprocess.run(
                    [str(BIN), *argv], cwd=tmp, capture_output=True, text=True, timeout=120
                )
                best = min(best, time.perf_counter() - start)
            assert proc is not None
            lines = proc.stderr.strip().splitlines()
            rows.append(
                {
                    "case": name,
                    "seconds": round(best, 2),
                    "exit": proc.returncode,
                    "stderr_lines": len(lines),
                    "message": lines[-1] if lines else "",
                }
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'case':<30}{'s':>6}{'exit':>6}{'lines':>7}  message")
    for r in rows:
        cells = f"{r['case']:<30}{r['seconds']:>6.2f}{r['exit']:>6}{r['stderr_lines']:>7}"
        print(f"{cells}  {r['message'][:110]}")
    worst = max(r["seconds"] for r in rows)
    print(json.dumps({"bench": "fail_fast", "worst_s": worst, "cases": rows}))


if __name__ == "__main__":
    main()
