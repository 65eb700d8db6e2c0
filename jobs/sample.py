"""`corpusclean sample`: a generated corpus whose answers are known, for demos, tests and benches.

Two kinds: `dedup` (jobs/samples/dedup.py: English-like and Chinese-like documents with injected
duplicates of every kind and their ground truth) and `web` (jobs/samples/web.py: English web
pages with the junk the quality filters remove).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from corpusclean.errors import InputError
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.samples.dedup import TRUTH_FILE, generate

JOB = "sample"


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean sample --output PATH --docs N [--seed S] [--format parquet|jsonl]`."""
    parser = new_parser(JOB, "Write a synthetic corpus with known duplicates and its ground truth.")
    parser.add_argument("--output", required=True, help="folder to create (must be new or empty)")
    parser.add_argument("--docs", type=int, required=True, help="number of rows to write")
    parser.add_argument("--seed", type=int, default=0, help="the same seed gives the same files")
    parser.add_argument("--format", choices=["parquet", "jsonl"], default="parquet")
    parser.add_argument(
        "--kind",
        choices=["dedup", "web"],
        default="dedup",
        help="dedup: duplicates of every kind (the default); web: English web pages with the "
        "junk the quality filters remove (parquet only)",
    )

    def body(args) -> int:
        start = time.perf_counter()
        if args.kind == "web":
            if args.format != "parquet":
                raise InputError("--kind web writes Parquet only")
            from corpusclean.jobs.samples.web import generate_web

            summary = generate_web(args.output, args.docs, seed=args.seed)
        else:
            summary = generate(args.output, args.docs, seed=args.seed, fmt=args.format)
        secs = time.perf_counter() - start
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(summary["kinds"].items()))  # type: ignore[union-attr]
        log.info(
            JOB,
            f"wrote {args.docs:,} docs to {args.output} in {secs:.1f}s "
            f"({args.docs / secs:,.0f} docs/s): {kinds}; truth in {TRUTH_FILE}",
        )
        return 0

    return run_job(JOB, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
