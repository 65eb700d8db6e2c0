"""Near-dedup inside `corpusclean clean`: the sample's injected near-duplicates are found."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.samples.dedup import TRUTH_FILE, generate
from corpusclean.pipelines.minhash import exact_jaccard
from corpusclean.pipelines.near_dedup import NearDedupParams

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("near") / "raw"
    generate(path, 3_000, seed=31)
    return path


def _near(out: Path, stage: str = "near") -> dict[str, str]:
    dups = ds.dataset(out / "duplicates").to_table()
    near = dups.filter(pc.equal(dups["stage"], stage))
    return dict(zip(near["doc_id"].to_pylist(), near["cluster_id"].to_pylist(), strict=True))


def test_injected_near_duplicates_are_found(spark, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "clean"
    assert clean.main(["--input", str(corpus), "--output", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    nd = report["near_dedup"]
    assert nd["ran"] and nd["bands"] * nd["rows"] <= nd["num_perm"]
    assert nd["verified_edges"] <= nd["candidate_pairs"]
    assert nd["removed"] == report["removed"]["near"] > 0
    assert report["audit"]["passed"] is True
    clusters = _near(out)
    # A document removed as an exact copy reached the near stage as its exact survivor.
    exact = _near(out, "exact")
    texts: dict[str, str] = {}
    for r in ds.dataset(corpus).to_table(columns=["doc_id", "text"]).to_pylist():
        # A repeated doc_id keeps its longest text, as the doc_id stage does.
        if r["doc_id"] and r["text"] and len(r["text"]) > len(texts.get(r["doc_id"], "")):
            texts[r["doc_id"]] = r["text"]
    params = NearDedupParams().minhash
    truth = pq.read_table(corpus / TRUTH_FILE).to_pylist()
    found = missed = false_pos = 0
    for row in truth:
        if row["kind"] != "near":
            continue
        a, b = row["doc_id"], row["group_id"]
        j = exact_jaccard(texts[a], texts[b], params)
        a, b = exact.get(a, a), exact.get(b, b)
        if a == b:
            continue
        together = a in clusters and clusters.get(a) == clusters.get(b)
        if j >= 0.9:
            found += together
            missed += not together
        elif j < 0.6:
            false_pos += together
    assert found > 20
    assert missed <= 0.03 * (found + missed), (found, missed)
    assert false_pos == 0
    # Survivors are members of their own cluster and are published; the others are not.
    kept = set(ds.dataset(out / "data").to_table(columns=["doc_id"])["doc_id"].to_pylist())
    for doc, cluster in clusters.items():
        assert (doc in kept) == (doc == cluster)


def test_near_dedup_is_the_same_at_3_and_7_partitions(spark, corpus: Path, tmp_path: Path) -> None:
    results = []
    for parts in (3, 7):
        out = tmp_path / f"p{parts}"
        args = ["--input", str(corpus), "--output", str(out), "--set", "audit.enabled=false"]
        assert clean.main([*args, "--set", f"spark.sql.shuffle.partitions={parts}"]) == 0
        results.append(_near(out))
    assert results[0] == results[1]
