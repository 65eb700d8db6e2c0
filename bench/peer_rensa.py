"""rensa's MinHash dedup, run the way a user with one machine runs it: a peer of near_dedup.py.

    bench/out/venv-rensa/bin/python bench/peer_rensa.py --input DOCS.parquet \
        --result RESULT.json [--num-perm 128] [--seed 42] [--threshold 0.8] [--bands N]

DOCS.parquet holds `doc_id` (unique) and `text`. One Python process, one pass over the file in
record batches:
- shingles in Python: the text lowercased, split on whitespace, every 5 consecutive words
  joined by one space (a document of 1-4 words gives one shingle of all of them, one without
  a word gives none and is never a duplicate);
- one `RMinHash(num_perm, seed)` per document, `update()`d with its shingles;
- `RMinHashDeduplicator(threshold, num_perm, use_lsh=True, num_bands)`: `get_duplicates()`
  gives the indexed documents whose estimated Jaccard reaches the threshold; a document with
  none is `add()`ed to the index (rensa indexes only documents that are not duplicates);
- union-find over those matches: the clusters are the connected components, the first
  document of each is kept and the others removed.
`--bands` left out takes rensa's own default for the threshold. RESULT.json gives the seconds
(reading included, interpreter start-up not), the seconds of each step, the config, the removed
doc_ids and the cluster (its kept doc_id) of every document in a cluster of two or more.

Text without spaces (Chinese, Japanese) is one word, so one shingle of the whole document: such
a document matches only its exact copies. rensa is imported only inside `run()`: near_dedup.py
imports this module (for `ensure_venv()`) under the project's interpreter, which lacks it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-rensa.txt"
NGRAM = 5


def ensure_venv() -> Path:
    """The python of rensa's venv, created and installed from the requirements if missing."""
    from peer_venv import ensure_venv as ensure

    return ensure("rensa", REQUIREMENTS)


def word_shingles(text: str, n: int = NGRAM) -> list[str]:
    """The word n-grams of `text`: lowercased, split on whitespace, n words joined by a space.

    Fewer than n words give one shingle of all of them; no word gives none.
    """
    words = text.lower().split()
    if len(words) < n:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]


def run(source: Path, num_perm: int, seed: int, threshold: float, bands: int | None) -> dict:
    """Shingle, sketch, deduplicate and cluster every document; returns the RESULT.json content."""
    from importlib.metadata import version

    import pyarrow.parquet as pq
    from rensa import RMinHash, RMinHashDeduplicator

    seconds = {"read": 0.0, "shingle": 0.0, "sketch": 0.0, "dedup": 0.0}
    start = time.perf_counter()
    dedup = RMinHashDeduplicator(
        threshold=threshold, num_perm=num_perm, use_lsh=True, num_bands=bands, seed=seed
    )
    ids: list[str] = []
    parent: list[int] = []

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    t = time.perf_counter()
    for batch in pq.ParquetFile(source).iter_batches(10_000, columns=["doc_id", "text"]):
        texts = batch.column("text").to_pylist()
        ids += batch.column("doc_id").to_pylist()
        t1 = time.perf_counter()
        seconds["read"] += t1 - t
        for text in texts:
            i = len(parent)
            parent.append(i)
            t0 = time.perf_counter()
            grams = word_shingles(text or "")
            t1 = time.perf_counter()
            seconds["shingle"] += t1 - t0
            if not grams:
                continue
            m = RMinHash(num_perm=num_perm, seed=seed)
            m.update(grams)
            t2 = time.perf_counter()
            seconds["sketch"] += t2 - t1
            matches = dedup.get_duplicates(m)
            if matches:
                for key in matches:
                    # Union by the smaller index: a cluster's root is its first document.
                    a, b = find(i), find(int(key))
                    if a != b:
                        parent[max(a, b)] = min(a, b)
            else:
                dedup.add(str(i), m)
            seconds["dedup"] += time.perf_counter() - t2
        t = time.perf_counter()
    seconds["read"] += time.perf_counter() - t
    t = time.perf_counter()
    roots = [find(i) for i in range(len(parent))]
    size: dict[int, int] = {}
    for r in roots:
        size[r] = size.get(r, 0) + 1
    removed = sorted(ids[i] for i, r in enumerate(roots) if r != i)
    clusters = {ids[i]: ids[r] for i, r in enumerate(roots) if size[r] > 1}
    seconds["cluster"] = time.perf_counter() - t
    total = time.perf_counter() - start
    return {
        "tool": "rensa",
        "version": version("rensa"),
        "config": {
            "num_perm": num_perm,
            "seed": seed,
            "threshold": threshold,
            "bands": bands if bands is not None else "rensa default",
            "ngram": NGRAM,
            "shingles": "lowercase, whitespace words, 5 joined by a space",
        },
        "seconds": round(total, 3),
        "stage_seconds": {k: round(v, 3) for k, v in seconds.items()},
        "docs": len(ids),
        "removed": removed,
        "clusters": clusters,
    }


def main() -> int:
    """CLI: run rensa on --input and write --result; exit 1 with one line on failure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--result", type=Path, required=True)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--bands", type=int, help="LSH bands (default: rensa's for the threshold)")
    args = ap.parse_args()
    try:
        result = run(args.input, args.num_perm, args.seed, args.threshold, args.bands)
    except Exception as exc:  # a peer's failure is reported, not a traceback flood
        print(f"rensa: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    args.result.write_text(json.dumps(result))
    print(
        f"rensa {result['version']}: {result['docs']:,} docs, {len(result['removed']):,} removed "
        f"in {result['seconds']:.2f} s {result['stage_seconds']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
