"""`corpusclean bench`: will this storage keep the GPUs fed?

Measures, on the shards `corpusclean pack` wrote (or any WebDataset shard folder):

- sequential read bandwidth, cold (evicted and confirmed through /proc/self/io) and warm;
- 4 KiB random-read IOPS and latency, one thread and several;
- loader throughput (documents/s, MB/s, time to first sample) through the package's own tar
  reader, the same in worker processes, and the webdataset library;
- the same documents as one file each, cold and warm: the metadata cost shards avoid;
- GPUDirect Storage through kvikio where a GPU exists;

and compares the best cold loader rate with what the planned training run consumes (the 6ND
rule), ending with a one-line verdict. Writes JSON (default: `SHARD_DIR.bench.json`, beside the
shard folder, never inside it) and a chart beside it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpusclean.errors import RejectedError, UsageError
from corpusclean.jobs.loadbench.measure import Bench
from corpusclean.jobs.loadbench.page import render_bench_html
from corpusclean.jobs.loadbench.settings import JOB, BenchConfig
from corpusclean.jobs.loadbench.shardset import (
    check_outside,
    check_shards,
    default_output,
    discover_shards,
    select_shards,
)
from corpusclean.jobs.loadbench.table import (
    environment,
    fmt_bytes,
    no_nan,
    render_table,
    write_chart,
    write_json,
)
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.jobs.runtime.config import dump_config, load_config
from corpusclean.jobs.runtime.runner import new_parser, run_job


def run_bench(cfg: BenchConfig, shards_dir: str, output: str | None) -> tuple[dict[str, Any], Path]:
    """Run every measurement and write the JSON (and chart); returns the report and its path."""
    started = time.perf_counter()
    shards = discover_shards(shards_dir)
    out = Path(output).expanduser() if output else default_output(shards.folder)
    if out.is_dir():
        out = out / "bench.json"
    check_outside(out, shards.folder, "--output")
    paths = select_shards(shards.paths, cfg.bench.max_bytes)
    check_shards(shards, paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    bench = Bench(cfg, shards, paths)
    used = bench.used_bytes
    bench.report["shards"] = {
        "dir": str(shards.folder),
        "source": shards.source,
        "files_total": len(shards.paths),
        "bytes_total": shards.total_bytes,
        "files_used": len(paths),
        "bytes_used": used,
    }
    try:
        import psutil

        available = psutil.virtual_memory().available
        if used > 0.5 * available:
            log.warn(
                JOB,
                f"{fmt_bytes(used)} of shards against {fmt_bytes(available)} free memory: "
                "warm passes may be partly cold; lower bench.max_bytes",
            )
    except ImportError:
        pass
    bench.sequential()
    bench.random()
    bench.loaders()
    bench.token_estimate()
    bench.small_files()
    bench.gds()
    bench.consumption()
    bench.goals()
    report = bench.report
    report["cold_checks"] = bench.cold_checks
    report["environment"] = environment()
    report["config"] = cfg.model_dump(mode="json")
    report["seconds"] = round(time.perf_counter() - started, 3)
    report = no_nan(report)
    chart = write_chart(report, out) if cfg.bench.chart else None
    report["chart"] = chart.name if chart is not None else None
    # The page for people (jobs/loadbench/page.py), beside the JSON: `bench.html` for bench.json.
    page = out.with_suffix(".html")
    report["page"] = page.name
    write_json(out, report)
    write_text_atomic(page, render_bench_html(report))
    return report, out


def _body(args: Any) -> int:
    cfg = load_config(BenchConfig, "bench", args.config, args.set)
    if args.print_config:
        print(dump_config(cfg), end="")
        return 0
    if not args.shards:
        raise UsageError("--shards SHARD_DIR is required")
    report, out = run_bench(cfg, args.shards, args.output)
    print(render_table(report))
    also = [name for name in (report.get("page"), report.get("chart")) if name]
    log.info(JOB, f"wrote {out}" + (f" and {', '.join(also)}" if also else ""))
    print(report["verdict"])
    if report["verdict"].startswith("STARVED") and cfg.bench.fail_on_starved:
        raise RejectedError(f"{report['verdict']} (bench.fail_on_starved=true)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean bench --shards SHARD_DIR [--output bench.json] [--set key=value]...`."""
    parser = new_parser(JOB, "Measure whether the shards load fast enough to keep the GPUs fed.")
    parser.add_argument("--shards", help="folder of WebDataset .tar shards (with index.json)")
    parser.add_argument(
        "--output",
        help="report JSON path, or a folder for bench.json (default: SHARD_DIR.bench.json "
        "beside the shard folder, never inside it); the chart is written beside it",
    )
    parser.add_argument("--config", help="YAML file with train/bench sections")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.gpus=64 (repeatable)",
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved config")
    return run_job(JOB, parser, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
