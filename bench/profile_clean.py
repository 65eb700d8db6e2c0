"""Where every second of one `corpusclean clean` run goes, next to the floor for each part.

    python bench/profile_clean.py --docs 1000000 [--set KEY=VALUE]...

Runs `clean` once on the cached sample (bench/clean.py's `ensure_sample`) in a fresh process with
Spark's event log on, then reads three sources:

- report.json: each funnel line's wall seconds and Spark jobs (the whole wall is the process's);
- the event log: per funnel stage (each Spark job carries `corpusclean clean: STAGE` as its
  description), the jobs' wall seconds, the CPU seconds of the tasks' JVM threads (Spark does
  not count its Python workers' CPU), and the bytes the tasks read from files, wrote to files
  and moved through shuffles;
- the floors, measured here on the same documents: the Python kernels of the read pass (the
  content hash's normalisation, its BLAKE2b, the MinHash signatures and band keys) in docs/s on
  one core, scaled to the run's documents and cores; and the disk's sequential read MB/s over
  the input's files (page cache dropped where this process may do so, else warm, and said so).

A stage's floor is the larger of its bytes over the disk's speed and, for the read pass, its
kernel seconds over the cores; a stage with neither (a shuffle of narrow rows, the driver's
union-find) shows its bytes only. The rest of a stage's wall is Spark's: scheduling, JVM <->
Python transfer, (de)serialisation, the per-job fixed cost. Prints a table and, last, one JSON
line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clean import OUT, ensure_sample, timed_process

PREFIX = "corpusclean clean: "


def stage_metrics(event_dir: Path) -> dict[str, dict[str, float]]:
    """Per funnel stage: jobs, job wall seconds, executor CPU seconds and task I/O bytes."""
    files = sorted(event_dir.glob("*/events_*")) + sorted(event_dir.glob("events_*"))
    if not files:
        files = [p for p in event_dir.iterdir() if p.is_file()]
    stage_of_spark_stage: dict[int, str] = {}
    job_start: dict[int, tuple[str, int]] = {}
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in files:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                desc = (event.get("Properties") or {}).get("spark.job.description") or ""
                name = desc.removeprefix(PREFIX) if desc.startswith(PREFIX) else "(other)"
                job_start[event["Job ID"]] = (name, event["Submission Time"])
                for sid in event.get("Stage IDs", []):
                    stage_of_spark_stage[sid] = name
                out[name]["jobs"] += 1
            elif kind == "SparkListenerJobEnd":
                name, started = job_start[event["Job ID"]]
                out[name]["job_s"] += (event["Completion Time"] - started) / 1000
            elif kind == "SparkListenerTaskEnd":
                name = stage_of_spark_stage.get(event["Stage ID"], "(other)")
                m = event.get("Task Metrics") or {}
                out[name]["cpu_s"] += m.get("Executor CPU Time", 0) / 1e9
                out[name]["read_mb"] += (m.get("Input Metrics") or {}).get("Bytes Read", 0) / 1e6
                out[name]["write_mb"] += (m.get("Output Metrics") or {}).get(
                    "Bytes Written", 0
                ) / 1e6
                sr = m.get("Shuffle Read Metrics") or {}
                sw = m.get("Shuffle Write Metrics") or {}
                local, remote = sr.get("Local Bytes Read", 0), sr.get("Remote Bytes Read", 0)
                out[name]["shuffle_mb"] += (
                    local + remote + sw.get("Shuffle Bytes Written", 0)
                ) / 1e6
    return {k: dict(v) for k, v in out.items()}


def disk_mb_s(sample: Path) -> tuple[float, str]:
    """Sequential read MB/s over the sample's files, and whether the page cache was dropped."""
    files = sorted(sample.glob("part-*.parquet"))
    how = "warm (page cache not dropped: not root)"
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            os.sync()
            f.write("3\n")
        how = "cold (page cache dropped)"
    except OSError:
        pass
    total = 0
    start = time.perf_counter()
    for path in files:
        with path.open("rb", buffering=0) as f:
            while chunk := f.read(8 << 20):
                total += len(chunk)
    return total / 1e6 / (time.perf_counter() - start), how


KERNEL_ENV = "CORPUSCLEAN_MINHASH_KERNEL"


def kernel_rates(sample: Path, docs: int = 20_000) -> dict[str, float]:
    """docs/s on one core of each Python kernel of the read pass, on the sample's own texts."""
    from corpusclean.jobs.runtime.config import load_clean_config
    from corpusclean.pipelines.content import content_hashes, normalise_text
    from corpusclean.pipelines.minhash import signatures

    texts = (
        ds.dataset(sorted(sample.glob("part-*.parquet")), format="parquet")
        .head(docs, columns=["text"])
        .column("text")
        .combine_chunks()
    )
    feature = next(iter(load_clean_config(None, []).pipeline().text_features()))
    params = feature.params  # type: ignore[attr-defined]

    def rate(fn: Any) -> float:
        fn(texts.slice(0, 500))  # warm caches and lazy imports
        start = time.process_time()
        fn(texts)
        return len(texts) / (time.process_time() - start)

    norm = rate(normalise_text)
    hashed = rate(content_hashes)  # normalisation included
    # A worker past the compiled MinHash kernel's break-even (all but the first 32 MB of each
    # worker's text in a large run): its steady rate. Set for these calls only, so the clean
    # runs this script starts choose their kernel as users' runs do.
    before = os.environ.get(KERNEL_ENV)
    os.environ[KERNEL_ENV] = "compiled"
    try:
        minhash = rate(lambda t: signatures(t, params))
        feature_rate = rate(feature.compute)
    finally:
        if before is None:
            os.environ.pop(KERNEL_ENV)
        else:
            os.environ[KERNEL_ENV] = before
    return {
        "normalise": norm,
        "content_hash": hashed,
        "minhash_signatures": minhash,
        "minhash_feature": feature_rate,
        "doc_bytes": float(pa.compute.sum(pa.compute.binary_length(texts)).as_py()) / len(texts),
    }


def run(sample: Path, extra: list[str], cores: int) -> dict[str, Any]:
    """One clean run with the event log on; its report, the per-stage metrics and its wall."""
    out = OUT / f"profile-{sample.name}"
    events = OUT / f"profile-{sample.name}-events"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    cmd = [sys.executable, "-m", "corpusclean.jobs.clean", "--input", str(sample)]
    cmd += ["--output", str(out)]
    for setting in (
        "spark.eventLog.enabled=true",
        f"spark.eventLog.dir=file://{events}",
        "spark.eventLog.compress=false",
        *extra,
    ):
        cmd += ["--set", setting]
    wall, mem = timed_process(cmd)
    report = json.loads((out / "report.json").read_text())
    return {
        "wall": wall,
        "peak_mb": mem.tree_peak / 2**20,
        "driver_mb": mem.python_peak / 2**20,
        "report": report,
        "metrics": stage_metrics(events),
    }


def table(
    result: dict[str, Any], rates: dict[str, float], disk: float, cores: int, input_mb: float
) -> list[dict]:
    """The breakdown rows: each funnel line with work of its own, then start-up and the rest.

    The read pass's bytes are the input's file sizes: Spark's vectorised Parquet reader leaves
    its tasks' `Bytes Read` near zero."""
    report, metrics = result["report"], result["metrics"]
    docs = report["input_rows"]
    near_on = bool((report.get("near_dedup") or {}).get("ran"))
    kernel_s = docs / rates["content_hash"] / cores
    if near_on:
        kernel_s += docs / rates["minhash_feature"] / cores
    rows = []
    for st in report["stages"]:
        if st["seconds"] == 0 and not st.get("jobs"):
            continue
        m = dict(metrics.get(st["name"], {}))
        if st["name"] == "read":
            m["read_mb"] = max(m.get("read_mb", 0.0), input_mb)
        io_floor = m.get("read_mb", 0.0) / disk
        floor = max(io_floor, kernel_s) if st["name"] == "read" else io_floor
        basis = "kernels / cores" if st["name"] == "read" and kernel_s >= io_floor else "disk"
        rows.append(
            {
                "part": st["name"],
                "wall_s": st["seconds"],
                "jobs": st.get("jobs", int(m.get("jobs", 0))),
                "job_s": m.get("job_s", 0.0),
                "cpu_s": m.get("cpu_s", 0.0),
                "read_mb": m.get("read_mb", 0.0),
                "shuffle_mb": m.get("shuffle_mb", 0.0),
                "write_mb": m.get("write_mb", 0.0),
                "floor_s": floor,
                "floor_basis": basis,
            }
        )
    staged = sum(r["wall_s"] for r in rows)
    rows.append(
        {
            "part": "start-up, publish, report (rest of the wall)",
            "wall_s": result["wall"] - staged,
            "jobs": 0,
            "job_s": 0.0,
            "cpu_s": 0.0,
            "read_mb": 0.0,
            "shuffle_mb": 0.0,
            "write_mb": 0.0,
            "floor_s": 0.0,
            "floor_basis": "-",
        }
    )
    return rows


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], help="extra --set for clean")
    args = ap.parse_args()
    sample = ensure_sample(args.docs, args.seed)
    cores = os.cpu_count() or 1
    rates = kernel_rates(sample)
    disk, how = disk_mb_s(sample)
    result = run(sample, args.set, cores)
    input_mb = sum(p.stat().st_size for p in sample.glob("part-*.parquet")) / 1e6
    rows = table(result, rates, disk, cores, input_mb)
    head = ["part", "wall s", "jobs", "job s", "JVM CPU s", "read MB", "shuffle MB"]
    head += ["write MB", "floor s", "floor basis"]
    print(f"clean on {args.docs:,} docs, {cores} cores: {result['wall']:.1f} s wall")
    print(f"{head[0]:<46}" + "".join(f"{h:>11}" for h in head[1:-1]) + f"  {head[-1]}")
    for r in rows:
        cells = [r["wall_s"], r["jobs"], r["job_s"], r["cpu_s"], r["read_mb"], r["shuffle_mb"]]
        cells += [r["write_mb"], r["floor_s"]]
        print(
            f"{r['part']:<46}"
            + "".join(f"{c:>11,.1f}" if isinstance(c, float) else f"{c:>11,}" for c in cells)
            + f"  {r['floor_basis']}"
        )
    per_core = ", ".join(f"{k} {v:,.0f}" for k, v in rates.items() if k != "doc_bytes")
    print(f"kernels, docs/s on one core ({rates['doc_bytes']:,.0f} B a doc): {per_core}")
    print(f"disk: {disk:,.0f} MB/s sequential, {how}")
    report = result["report"]
    near = report.get("near_dedup") or {}
    print(
        f"near_dedup.seconds {near.get('seconds')} (signatures are computed in the read pass); "
        f"spark.jobs {report['spark'].get('jobs')}; peak MB {result['peak_mb']:,.0f} "
        f"(driver {result['driver_mb']:,.0f})"
    )
    line = {
        "bench": "profile_clean",
        "docs": args.docs,
        "cores": cores,
        "wall_s": round(result["wall"], 2),
        "spark_jobs": report["spark"].get("jobs"),
        "parts": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in rows
        ],
        "kernel_docs_per_s_per_core": {k: round(v, 1) for k, v in rates.items()},
        "disk_mb_s": round(disk, 1),
        "disk_cache": how,
        "near_dedup_seconds": near.get("seconds"),
        "peak_mb": round(result["peak_mb"], 1),
        "driver_peak_mb": round(result["driver_mb"], 1),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
