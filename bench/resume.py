"""What a rerun of `clean` saves after a crash late in the run: resume against a full run.

Three runs of the real command on the same sample, each a fresh process (Spark start-up
included): an uninterrupted run; a run killed (SIGKILL, whole process group) when its audit
starts, held there by the CORPUSCLEAN_TEST_HOLD hook so the kill lands at the same place on any
machine; and the rerun of the same command, which resumes after the staged output's checkpoint
(gate, audit, report, publish). The rerun's output is checked against the uninterrupted run's
(same rows in data/, duplicates/ and rejected/). `--at` kills at another hold point instead
(`read`, `decided`, `write`, `audit`).

    python bench/resume.py --docs 1000000 [--at audit] [--near]

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pyarrow.dataset as ds
from clean import OUT, ensure_sample

from corpusclean.testhook import ENV


def _command(sample: Path, out: Path, near: bool) -> list[str]:
    cmd = [sys.executable, "-m", "corpusclean.jobs.clean", "--input", str(sample)]
    cmd += ["--output", str(out)]
    return cmd if near else [*cmd, "--set", "near_dedup.enabled=false"]


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def full_run(cmd: list[str], log: Path) -> float:
    start = time.perf_counter()
    proc = _run(cmd, log)
    if proc.wait() != 0:
        raise SystemExit(f"clean failed: {log.read_text()[-3000:]}")
    return time.perf_counter() - start


def killed_run(cmd: list[str], log: Path, point: str) -> float:
    """Seconds until the run reached `point`, where it was killed."""
    hold = Path(tempfile.mkdtemp(prefix="resume-hold-"))
    env = {**os.environ, ENV: f"{point}@{hold}"}
    start = time.perf_counter()
    proc = _run(cmd, log, env)
    reached = hold / f"{point.split(':')[0]}.reached"
    while not reached.exists():
        if proc.poll() is not None:
            raise SystemExit(f"the run ended before {point}: {log.read_text()[-3000:]}")
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    shutil.rmtree(hold, ignore_errors=True)
    return seconds


def same_rows(a: Path, b: Path) -> bool:
    for table in ("data", "duplicates", "rejected"):
        ta = ds.dataset(a / table, format="parquet").to_table()
        tb = ds.dataset(b / table, format="parquet").to_table()
        keys = [(c, "ascending") for c in ("doc_id", "cluster_id") if c in ta.column_names]
        if not ta.sort_by(keys).equals(tb.sort_by(keys)):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--at", default="audit", help="hold point to kill at (default audit)")
    parser.add_argument("--near", action="store_true", help="near-dedup on (default: on)")
    parser.add_argument("--no-near", dest="near", action="store_false")
    parser.set_defaults(near=True)
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    sample = ensure_sample(args.docs, args.seed)
    ref, out = OUT / "resume-full", OUT / "resume-killed"
    for path in (ref, out, out.parent / f".{out.name}.runs", out.parent / f".{out.name}.lock"):
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    full = full_run(_command(sample, ref, args.near), OUT / "resume-full.log")
    killed = killed_run(_command(sample, out, args.near), OUT / "resume-killed.log", args.at)
    rerun = full_run(_command(sample, out, args.near), OUT / "resume-rerun.log")
    log = (OUT / "resume-rerun.log").read_text()
    resumed = next((ln for ln in log.splitlines() if "resuming run" in ln), None)
    report = json.loads((out / "report.json").read_text())
    result = {
        "bench": "resume",
        "docs": args.docs,
        "near_dedup": args.near,
        "killed_at": args.at,
        "cores": psutil.cpu_count(),
        "full_run_s": round(full, 2),
        "killed_after_s": round(killed, 2),
        "rerun_s": round(rerun, 2),
        "saved_s": round(full - rerun, 2),
        "saved_share": round((full - rerun) / full, 4),
        "resumed_from": report.get("resumed_from"),
        "same_rows": same_rows(ref, out),
    }
    print(f"\nclean at {args.docs:,} docs, killed at '{args.at}', cores={result['cores']}")
    print(f"{'run':<34} {'wall s':>8}")
    print(f"{'uninterrupted':<34} {full:>8.1f}")
    print(f"{'killed (until the kill)':<34} {killed:>8.1f}")
    print(f"{'rerun, resumed':<34} {rerun:>8.1f}")
    print(f"saved by resuming: {full - rerun:.1f} s ({(full - rerun) / full:.1%} of the full run)")
    print(f"resumed: {resumed}")
    print(f"rerun's rows equal the uninterrupted run's: {result['same_rows']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
