"""`clean --against`: a second batch deduplicated against a published first one.

One sample corpus with planted duplicates (`corpusclean sample`, cached under bench/out/) is
split at random (seeded) into A (90% of the rows) and B (the rest); planted groups straddle it.
Four real `corpusclean clean` runs, each a fresh process (Spark start-up included):

- `clean A` (publishes A' and its index), `clean B` alone, `clean B --against A'`,
  `clean A+B` (the whole sample) from scratch, and `clean A` without its index (what writing
  the index costs).

Correctness, on the planted cross pairs (a document of B and its group's other documents that
A' published), against the exact shingle Jaccard of each pair (brute force on those pairs):
the recall and precision of "the B document was removed against A". Then A' + B' is compared
with the published documents of `clean A+B`: every difference must lie in a cluster of that run
which has members in both A and B (there the survivor differs by design: A's document wins).

    python bench/incremental.py [--docs 1000000] [--seed 0] [--threshold 0.8]

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean import OUT, ensure_sample, timed_process
from near_dedup import jaccard, shingle_sets

from corpusclean.jobs.runtime.config import load_clean_config


def split(sample: Path, fraction: float, seed: int) -> tuple[Path, Path, np.ndarray]:
    """A (a seeded random `fraction` of the rows, input order kept) and B (the rest), streamed
    to disk; and which rows went to B. Random rather than a cut: the sample plants each
    duplicate near its original (within a chunk of rows), so a cut would leave few pairs
    across it."""
    root = OUT / f"incr-{sample.name}"
    a_dir, b_dir = root / "A", root / "B"
    files = sorted(p for p in sample.glob("*.parquet") if not p.name.startswith("_"))
    total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    in_b = np.random.default_rng(seed).random(total) >= fraction
    if (a_dir / "_done").exists() and (b_dir / "_done").exists():
        return a_dir, b_dir, in_b
    shutil.rmtree(root, ignore_errors=True)
    a_dir.mkdir(parents=True)
    b_dir.mkdir(parents=True)
    seen = 0
    writers: dict[str, pq.ParquetWriter] = {}
    for f in files:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=20_000):
            table = pa.Table.from_batches([batch])
            mask = in_b[seen : seen + table.num_rows]
            for part, piece in (("A", table.filter(~mask)), ("B", table.filter(mask))):
                if piece.num_rows:
                    if part not in writers:
                        folder = a_dir if part == "A" else b_dir
                        writers[part] = pq.ParquetWriter(folder / "part-0.parquet", piece.schema)
                    writers[part].write_table(piece)
            seen += table.num_rows
    for w in writers.values():
        w.close()
    (a_dir / "_done").touch()
    (b_dir / "_done").touch()
    return a_dir, b_dir, in_b


def clean(source: Path, out: Path, extra: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "corpusclean.jobs.clean", "--input", str(source)]
    cmd += ["--output", str(out), "--set", "gate.min_retention=0.0", *extra]
    wall, mem = timed_process(cmd)
    report = json.loads((out / "report.json").read_text())
    return {
        "wall_s": round(wall, 2),
        "rows_in": report["input_rows"],
        "rows_out": report["output_rows"],
        "jvm_peak_mb": round(mem.jvm_peak / 2**20, 1),
        "python_driver_peak_mb": round(mem.python_peak / 2**20, 1),
        "report": report,
    }


def ids(folder: Path, column: str = "doc_id") -> pa.Array:
    return ds.dataset(folder).to_table(columns=[column])[column].combine_chunks()


def cross_quality(
    sample: Path, a_out: Path, b_out: Path, in_b: np.ndarray, threshold: float
) -> dict[str, float | int]:
    """Recall on the planted cross pairs, precision on every reported prior match.

    Recall: of the B documents (past B's own filters) with a planted partner published in A' at
    exact shingle Jaccard >= threshold (or the same doc_id), the share removed against A.
    Precision: of the B documents removed against A, the share whose reported prior document
    (duplicates/ cluster_id) is the same doc_id or at exact Jaccard >= threshold; a removal
    that holds only through a chain of new documents counts as wrong here."""
    truth = pq.read_table(sample / "_truth.parquet")
    doc = truth["doc_id"].to_numpy(zero_copy_only=False)
    group = truth["group_id"].to_numpy(zero_copy_only=False)
    kept_a = set(ids(a_out / "data").to_pylist())
    dups = ds.dataset(b_out / "duplicates").to_table()
    against = dups.filter(pc.is_valid(dups["against"])).to_pylist()
    prior_of = {r["doc_id"]: (r["cluster_id"], r["stage"]) for r in against}
    rejected_b = set(ids(b_out / "rejected").to_pylist())
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(group):
        by_group.setdefault(g, []).append(i)
    pairs: list[tuple[str, str]] = []
    for members in by_group.values():
        if len(members) < 2:
            continue
        a_side = [doc[i] for i in members if not in_b[i] and doc[i] in kept_a]
        b_side = [doc[i] for i in members if in_b[i] and doc[i] not in rejected_b]
        pairs += [(x, a) for x in b_side for a in a_side]
    reported = [(x, p) for x, (p, _) in prior_of.items()]
    wanted = sorted({d for pair in pairs + reported for d in pair})
    texts = _texts(sample, wanted)
    params = load_clean_config().near_dedup.minhash
    found = [d for d in wanted if texts.get(d) is not None]
    sets = dict(zip(found, shingle_sets(pa.array([texts[d] for d in found]), params), strict=True))

    def same(x: str, a: str) -> bool:
        if x == a:
            return True
        return x in sets and a in sets and jaccard(sets[x], sets[a]) >= threshold

    positives = {x for x, a in pairs if same(x, a)}
    hit = sum(x in prior_of for x in positives)
    right = sum(same(x, p) or stage == "exact" for x, (p, stage) in prior_of.items())
    return {
        "cross_pairs": len(pairs),
        "true_docs": len(positives),
        "recall": round(hit / len(positives), 4) if positives else 1.0,
        "precision": round(right / len(prior_of), 4) if prior_of else 1.0,
        "removed_against": len(prior_of),
    }


def _texts(sample: Path, wanted: list[str]) -> dict[str, str]:
    if not wanted:
        return {}
    table = ds.dataset(sample, format="parquet", exclude_invalid_files=True).to_table(
        columns=["doc_id", "text"], filter=pc.field("doc_id").isin(pa.array(wanted))
    )
    return dict(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True))


def equivalence(a_in: Path, b_in: Path, a_out: Path, b_out: Path, ab_out: Path) -> dict[str, int]:
    """A' + B' against `clean A+B`'s published docs: differences outside duplicate groups
    spanning both batches (must be zero)."""
    inc = set(ids(a_out / "data").to_pylist()) | set(ids(b_out / "data").to_pylist())
    full = set(ids(ab_out / "data").to_pylist())
    diff = inc ^ full
    in_a = set(ids(a_in).to_pylist())
    in_b = set(ids(b_in).to_pylist())
    dups = ds.dataset(ab_out / "duplicates").to_table(columns=["doc_id", "stage", "cluster_id"])
    # A doc kept by one stage can be removed by the next (exact, then near), so a duplicate
    # group is the union of the clusters it passes through: join them on shared members.
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for doc, stage, cluster in zip(*(dups[c].to_pylist() for c in dups.column_names), strict=True):
        parent[root(doc)] = root(f"{stage}:{cluster}")
    groups: dict[str, set[str]] = {}
    for doc in dups["doc_id"].to_pylist():
        groups.setdefault(root(doc), set()).add(doc)
    spanning: set[str] = set()
    for members in groups.values():
        if members & in_a and members & in_b:
            spanning |= members
    return {
        "incremental_docs": len(inc),
        "full_docs": len(full),
        "differing_docs": len(diff),
        "unexplained": len(diff - spanning),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args()
    sample = ensure_sample(args.docs, args.seed)
    a_in, b_in, in_b = split(sample, 0.9, args.seed)
    root = a_in.parent
    runs = {
        "clean A": clean(a_in, root / "outA", []),
        "clean B alone": clean(b_in, root / "outB-alone", []),
        "clean B --against A": clean(b_in, root / "outB", ["--against", str(root / "outA")]),
        "clean A+B": clean(sample, root / "outAB", []),
        # What writing the index costs A's run.
        "clean A, no index": clean(a_in, root / "outA-noindex", ["--set", "dedup.index=false"]),
    }
    index = runs["clean A"]["report"]["index"]
    print(
        f"{'run':<22} {'rows in':>9} {'rows out':>9} {'wall s':>8} {'JVM MB':>8} {'driver MB':>9}"
    )
    for name, r in runs.items():
        print(
            f"{name:<22} {r['rows_in']:>9,} {r['rows_out']:>9,} {r['wall_s']:>8.1f} "
            f"{r['jvm_peak_mb']:>8.0f} {r['python_driver_peak_mb']:>9.0f}"
        )
    against = runs["clean B --against A"]
    vs_alone = against["wall_s"] / runs["clean B alone"]["wall_s"]
    vs_full = runs["clean A+B"]["wall_s"] / against["wall_s"]
    quality = cross_quality(sample, root / "outA", root / "outB", in_b, args.threshold)
    same = equivalence(a_in, b_in, root / "outA", root / "outB", root / "outAB")
    prior = against["report"]["against"][0]
    index_s = runs["clean A"]["wall_s"] - runs["clean A, no index"]["wall_s"]
    print(
        f"\nindex of A': {index['documents']:,} docs, {index['bytes'] / 2**20:,.1f} MiB, "
        f"{index['bytes_per_document']:.0f} bytes a document; writing it cost clean A "
        f"{index_s:+.1f} s"
    )
    print(f"removed against A: {prior['removed']}; near: {prior['near']}")
    print(
        f"cross pairs: {quality['cross_pairs']:,} planted, {quality['true_docs']:,} B docs with "
        f"a partner at J >= {args.threshold}: recall {quality['recall']:.4f} (goal >= 0.99); "
        f"{quality['removed_against']:,} removed against A, precision "
        f"{quality['precision']:.4f} (goal >= 0.99)"
    )
    print(
        f"A' + B' vs clean A+B: {same['incremental_docs']:,} vs {same['full_docs']:,} docs, "
        f"{same['differing_docs']:,} differ, {same['unexplained']:,} outside duplicate groups "
        "spanning both batches (goal 0)"
    )
    print(
        f"cost: --against / B alone = {vs_alone:.2f}x (goal <= 1.5x); "
        f"A+B from scratch / --against = {vs_full:.2f}x (goal >= 5x)"
    )
    summary = {
        "bench": "incremental",
        "docs": args.docs,
        "split": {"A": int((~in_b).sum()), "B": int(in_b.sum())},
        "runs": {k: {x: y for x, y in v.items() if x != "report"} for k, v in runs.items()},
        "index": {**index, "write_s": round(index_s, 2)},
        "against": prior,
        "quality": quality,
        "equivalence": same,
        "against_vs_alone": round(vs_alone, 3),
        "full_vs_against": round(vs_full, 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
