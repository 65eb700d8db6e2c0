"""datatrove's MinHash dedup, run the way its users run it: the peer column of bench/near_dedup.py.

    bench/out/venv-datatrove/bin/python bench/peer_datatrove.py --input DOCS.parquet \
        --work DIR --result RESULT.json [--tasks 2] [--workers 2]

DOCS.parquet holds `doc_id` (unique) and `text`. The four stages of datatrove's MinHash
pipeline run one after another with `LocalPipelineExecutor`, each timed: signatures (a task
per input file), buckets (a task per bucket), cluster (one task, by datatrove's design) and
filter (a task per input file, kept and removed documents written as JSONL with their cluster
id). `MinhashConfig` is left at datatrove's defaults. RESULT.json gives the seconds, the
config, the removed doc_ids and the cluster of every document in a cluster of two or more.

datatrove is imported only inside `run()`: `ensure_venv()` runs under the project's
interpreter, which does not have it (its own venv keeps datatrove's pins away from ours).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-datatrove.txt"


def ensure_venv() -> Path:
    """The python of datatrove's venv, created and installed from the requirements if missing."""
    from peer_venv import ensure_venv as ensure

    return ensure("datatrove", REQUIREMENTS)


def split_input(source: Path, folder: Path, files: int) -> None:
    """The documents as `files` Parquet files: datatrove hands out whole files to its tasks."""
    import pyarrow.parquet as pq

    table = pq.read_table(source, columns=["doc_id", "text"])
    folder.mkdir(parents=True)
    per = -(-table.num_rows // files) if table.num_rows else 0
    for i in range(files):
        pq.write_table(table.slice(i * per, per), folder / f"part-{i:05d}.parquet")


def read_jsonl(folder: Path) -> list[dict]:
    """Every record of the (gzipped) JSONL files datatrove's writer left in `folder`."""
    records = []
    for path in sorted(folder.rglob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records


def run(source: Path, work: Path, tasks: int, workers: int) -> dict:
    """The four stages; returns the RESULT.json content."""
    from importlib.metadata import version

    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    shutil.rmtree(work, ignore_errors=True)
    docs = work / "docs"
    split_input(source, docs, tasks)
    config = MinhashConfig()
    logs = work / "logs"

    def reader() -> ParquetReader:
        return ParquetReader(str(docs), text_key="text", id_key="doc_id")

    stages = {
        "signatures": LocalPipelineExecutor(
            pipeline=[reader(), MinhashDedupSignature(str(work / "sigs"), config=config)],
            tasks=tasks,
            workers=workers,
            logging_dir=str(logs / "signatures"),
        ),
        "buckets": LocalPipelineExecutor(
            pipeline=[
                MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=config)
            ],
            tasks=config.num_buckets,
            workers=workers,
            logging_dir=str(logs / "buckets"),
        ),
        "cluster": LocalPipelineExecutor(
            pipeline=[
                MinhashDedupCluster(
                    str(work / "buckets"), str(work / "remove"), config=config, save_cluster_id=True
                )
            ],
            tasks=1,
            logging_dir=str(logs / "cluster"),
        ),
        "filter": LocalPipelineExecutor(
            pipeline=[
                reader(),
                MinhashDedupFilter(
                    str(work / "remove"),
                    exclusion_writer=JsonlWriter(str(work / "removed")),
                    load_cluster_ids=True,
                ),
                JsonlWriter(str(work / "kept")),
            ],
            tasks=tasks,
            workers=workers,
            logging_dir=str(logs / "filter"),
        ),
    }
    stage_seconds = {}
    for name, executor in stages.items():
        start = time.perf_counter()
        executor.run()
        stage_seconds[name] = round(time.perf_counter() - start, 3)

    kept, removed = read_jsonl(work / "kept"), read_jsonl(work / "removed")
    clusters = {}
    for record in kept + removed:
        cluster = (record.get("metadata") or {}).get("minhash_cluster_id", -1)
        if cluster != -1:
            clusters[str(record["id"])] = int(cluster)
    return {
        "tool": "datatrove",
        "version": version("datatrove"),
        "config": {
            "bands": config.num_buckets,
            "rows": config.hashes_per_bucket,
            "num_perm": config.num_buckets * config.hashes_per_bucket,
            "ngram": config.n_grams,
            "hash": f"{config.hash_config.hash_fc}/{config.hash_config.precision}",
            "tasks": tasks,
            "workers": workers,
        },
        "seconds": round(sum(stage_seconds.values()), 3),
        "stage_seconds": stage_seconds,
        "docs": len(kept) + len(removed),
        "removed": sorted(str(r["id"]) for r in removed),
        "clusters": clusters,
    }


def main() -> int:
    """CLI: run datatrove on --input and write --result; exit 1 with one line on failure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--result", type=Path, required=True)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    try:
        from loguru import logger

        # datatrove logs every task to the console; its own logging_dir keeps the files.
        logger.remove()
        result = run(args.input, args.work, args.tasks, args.workers)
    except Exception as exc:  # a peer's failure is reported, not a traceback flood
        print(f"datatrove: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    args.result.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
