"""Speed of the read pass's text kernels on one core: whitespace collapsing against RE2's regex
replace (the same strings), and the whole content hash (NFKC, case folding, collapsing, BLAKE2b).

    python bench/normalise.py [--docs 100000] [--seed 7]

Texts come from the project's sample generator (`corpusclean.jobs.samples.dedup`), in 4,096-row
Arrow batches as Spark hands them to `mapInArrow`. Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from corpusclean.jobs.samples.dedup import generate
from corpusclean.pipelines.content import collapse_whitespace, content_hashes

BATCH = 4_096


def _batches(docs: int, seed: int) -> list[pa.Array]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sample"
        generate(path, docs, seed=seed)
        texts = ds.dataset(path / "part-00000.parquet").to_table(columns=["text"])["text"]
    texts = texts.combine_chunks().fill_null("")
    return [texts.slice(i, BATCH) for i in range(0, len(texts), BATCH)]


def _time(fn, batches: list[pa.Array], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for b in batches:
            fn(b)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    batches = _batches(args.docs, args.seed)
    mb = sum(b.nbytes for b in batches) / 1e6
    for b in batches[:5]:  # the two give the same strings
        assert collapse_whitespace(b).equals(pc.replace_substring_regex(b, r"\s+", " "))
    kernels = {
        "collapse_whitespace (numpy)": lambda b: collapse_whitespace(b),
        "replace_substring_regex (RE2)": lambda b: pc.replace_substring_regex(b, r"\s+", " "),
        "content_hashes (whole hash)": lambda b: content_hashes(b),
    }
    rows = []
    print(
        f"{args.docs:,} docs, {mb:.1f} MB of text, {BATCH}-row batches, one core, best of "
        f"{args.repeats}"
    )
    print(f"{'kernel':<32} {'seconds':>8} {'docs/s':>11} {'MB/s':>8}")
    for name, fn in kernels.items():
        sec = _time(fn, batches, args.repeats)
        rows.append(
            {"kernel": name, "seconds": round(sec, 3), "docs_per_s": round(args.docs / sec)}
        )
        print(f"{name:<32} {sec:>8.2f} {args.docs / sec:>11,.0f} {mb / sec:>8.1f}")
    ratio = rows[1]["seconds"] / rows[0]["seconds"]
    print(f"collapse_whitespace is {ratio:.1f}x RE2")
    print(
        json.dumps(
            {
                "bench": "normalise",
                "docs": args.docs,
                "mb": round(mb, 1),
                "results": rows,
                "collapse_vs_re2": round(ratio, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
