"""`corpusclean demo`: sample -> clean -> pack -> check -> bench on a generated corpus, and the
FineWeb preset's quality filters on generated web pages.

The corpus is measured in tokens as well as documents: clean counts every document's tokens
with a tokenizer preset (`DEMO_TOKENIZER`), the clean corpus is packed twice, as WebDataset
text shards and as Megatron token shards of the same tokenizer, and bench measures both, the
token shards in tokens/s.

Runs every stage on local Spark with the embedded defaults and ends with a summary table. The
demo folder is its own: a rerun replaces the previous demo's folder, never anything else.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from corpusclean.errors import EXIT_OK, CorpusCleanError, InputError
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.runner import new_parser, run_job

JOB = "demo"
MARKER = "_corpusclean_demo"
# A preset whose vocabulary installs with corpusclean (nothing downloaded), multilingual and
# strong on Chinese, as the sample is English-like and Chinese-like text.
DEMO_TOKENIZER = "qwen2.5"
# One step of the demo: (name, run it -> exit code, its summary detail once it passed).
Step = tuple[str, Callable[[], int], Callable[[], str]]


def _prepare(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise InputError(
                f"{out} exists and is not a demo folder; pass --output to a new folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by corpusclean demo; safe to delete\n")


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"corpusclean.jobs.{module}") is not None


def _step(
    rows: list[tuple[str, str, float, str]],
    name: str,
    fn: Callable[[], int],
    detail: Callable[[], str],
) -> int:
    log.info(JOB, f"--- {name}")
    t = time.perf_counter()
    code = fn()
    secs = time.perf_counter() - t
    rows.append(
        (name, "ok" if code == EXIT_OK else f"exit {code}", secs, detail() if code == 0 else "")
    )
    return code


def run_demo(out: Path, docs: int, seed: int) -> int:
    """Run the whole flow into `out`; returns the first non-zero exit code, or 0."""
    raw, cleaned, shards = out / "raw", out / "clean", out / "shards"
    tokens = out / "tokens"
    steps = _core_steps(raw, cleaned, docs, seed)
    # The quality filters' preset on web-like pages (a quarter as many as the main sample).
    steps += _preset_steps(out / "raw-web", out / "clean-web", max(500, docs // 4), seed)
    _prepare(out)
    rows: list[tuple[str, str, float, str]] = []
    if _available("pack"):
        steps += _pack_steps(cleaned, shards)
        steps += _token_pack_steps(cleaned, tokens)
    if _available("check"):
        steps.append(_check_step(cleaned))
    if _available("bench") and _available("pack"):
        steps.append(_bench_step(shards, out / "bench.json"))
        steps.append(_bench_step(tokens, out / "bench-tokens.json", "bench tokens"))

    code = EXIT_OK
    for name, fn, detail in steps:
        code = _step(rows, name, fn, detail)
        if code != EXIT_OK:
            break
    _print_summary(rows, out)
    return code


def _core_steps(raw: Path, cleaned: Path, docs: int, seed: int) -> list[Step]:
    """The steps every install has: sample `docs` documents into `raw`, clean into `cleaned`."""
    from corpusclean.jobs import clean, sample

    def clean_detail() -> str:
        r = json.loads((cleaned / "report.json").read_text())
        near = r["near_dedup"]
        tokens = (r.get("tokens") or {}).get("output")
        return (
            f"{r['input_rows']:,} -> {r['output_rows']:,} docs ({r['retention']:.1%}); removed "
            + ", ".join(f"{k} {v:,}" for k, v in r["removed"].items())
            + (f"; {near.get('clusters', 0):,} near clusters" if near.get("ran") else "")
            + (f"; {tokens:,} tokens" if tokens is not None else "")
        )

    return [
        (
            "sample",
            lambda: sample.main(["--output", str(raw), "--docs", str(docs), "--seed", str(seed)]),
            lambda: f"{docs:,} docs with injected duplicates and junk",
        ),
        (
            "clean",
            lambda: clean.main(
                [
                    "--input",
                    str(raw),
                    "--output",
                    str(cleaned),
                    "--set",
                    f"tokens.tokenizer={DEMO_TOKENIZER}",
                ]
            ),
            clean_detail,
        ),
    ]


def _preset_steps(raw: Path, cleaned: Path, docs: int, seed: int) -> list[Step]:
    """The FineWeb preset's funnel: sample English web pages with the junk the quality
    filters remove, and clean them with `--config fineweb`."""
    from corpusclean.jobs import clean, sample

    def detail() -> str:
        r = json.loads((cleaned / "report.json").read_text())
        removed = {k: v for k, v in r["removed"].items() if v}
        return f"{r['input_rows']:,} -> {r['output_rows']:,} pages; removed " + ", ".join(
            f"{k} {v:,}" for k, v in removed.items()
        )

    return [
        (
            "sample web",
            lambda: sample.main(
                ["--kind", "web", "--output", str(raw), "--docs", str(docs), "--seed", str(seed)]
            ),
            lambda: f"{docs:,} English web pages, a third of them junk",
        ),
        (
            "clean fineweb",
            lambda: clean.main(
                ["--input", str(raw), "--output", str(cleaned), "--config", "fineweb"]
            ),
            detail,
        ),
    ]


def _pack_steps(cleaned: Path, shards: Path) -> list[Step]:
    """Pack `cleaned` into `shards` (small shards, so the demo has several), then verify."""
    from corpusclean.jobs import pack

    def pack_detail() -> str:
        idx = json.loads((shards / "index.json").read_text())
        n = len(idx.get("shardlist", []))
        total = sum(s.get("nsamples", 0) for s in idx.get("shardlist", []))
        return f"{n} shard(s), {total:,} samples"

    return [
        (
            "pack",
            lambda: pack.main(
                [
                    "--input",
                    str(cleaned),
                    "--output",
                    str(shards),
                    "--set",
                    "shard.target_bytes=16000000",
                ]
            ),
            pack_detail,
        ),
        ("verify", lambda: pack.main(["--verify", str(shards)]), lambda: "shards match index"),
    ]


def _token_pack_steps(cleaned: Path, tokens: Path) -> list[Step]:
    """Pack `cleaned` as Megatron token shards of `DEMO_TOKENIZER`, then verify them."""
    from corpusclean.jobs import pack

    def detail() -> str:
        idx = json.loads((tokens / "index.json").read_text())
        report = json.loads((tokens / "report.json").read_text())
        plan = report["planner"]
        return (
            f"{idx['totals']['shards']} .bin/.idx pairs, {idx['totals']['tokens']:,} tokens "
            f"({report['tokens']['bytes_per_token']} bytes a token); compute-optimal for "
            f"{plan['chinchilla_params']:,.0f} params"
        )

    return [
        (
            "pack tokens",
            lambda: pack.main(
                [
                    "--input",
                    str(cleaned),
                    "--output",
                    str(tokens),
                    "--tokenizer",
                    DEMO_TOKENIZER,
                    "--set",
                    "shard.target_bytes=16000000",
                ]
            ),
            detail,
        ),
        (
            "verify tokens",
            lambda: pack.main(["--verify", str(tokens)]),
            lambda: "every id in the vocabulary, shards match index",
        ),
    ]


def _check_step(cleaned: Path) -> Step:
    """Check `cleaned` with its suite (clean_docs)."""
    from corpusclean.jobs import check

    return (
        "check",
        lambda: check.main(["--input", str(cleaned)]),
        lambda: "clean_docs suite: no critical failure",
    )


def _bench_step(shards: Path, bench_json: Path, name: str = "bench") -> Step:
    """Benchmark loading `shards` into `bench_json`, cut down to seconds for the demo."""
    from corpusclean.jobs import bench

    def bench_detail() -> str:
        b = json.loads(bench_json.read_text())
        tokens = (b.get("loader_tokens_s") or {}).get("cold")
        rate = f"{tokens:,.0f} tokens/s cold; " if tokens else ""
        return (rate + str(b.get("verdict", "")))[:110]

    return (
        name,
        lambda: bench.main(
            [
                "--shards",
                str(shards),
                "--output",
                str(bench_json),
                "--set",
                "bench.runs=1",
                "--set",
                "bench.small_files=500",
                "--set",
                "bench.random_reads=500",
                "--set",
                "bench.max_bytes=64MiB",
            ]
        ),
        bench_detail,
    )


def _print_summary(rows: list[tuple[str, str, float, str]], out: Path) -> None:
    """The table of steps run (result, seconds, detail) and where the outputs are."""
    width = max(len(r[0]) for r in rows)
    print(f"\n{'step':<{width}}  {'result':<7} {'seconds':>8}  detail")
    for name, result, secs, detail in rows:
        print(f"{name:<{width}}  {result:<7} {secs:>8.1f}  {detail}")
    print(
        f"\noutputs under {out}: raw/ clean/ (report.html) raw-web/ clean-web/ (report.html) "
        "shards/ tokens/ (report.html) bench.json (bench.html) bench-tokens.json"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean demo [--output DIR] [--docs N] [--seed S]`."""
    parser = new_parser(JOB, "Run sample -> clean -> pack -> check -> bench on a generated corpus.")
    parser.add_argument(
        "--output", default="demo-output", help="demo folder (default ./demo-output)"
    )
    parser.add_argument("--docs", type=int, default=20_000, help="sample size (default 20,000)")
    parser.add_argument("--seed", type=int, default=0)

    def body(args: argparse.Namespace) -> int:
        if args.docs < 100:
            raise CorpusCleanError("--docs must be at least 100")
        return run_demo(Path(args.output), args.docs, args.seed)

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
