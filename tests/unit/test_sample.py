"""The sample generator: deterministic, the promised mix, a truth table aligned with the rows."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpusclean.errors import InputError
from corpusclean.jobs.samples.dedup import TRUTH_FILE, generate


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    generate(tmp_path / "a", 1_000, seed=3)
    generate(tmp_path / "b", 1_000, seed=3)
    generate(tmp_path / "c", 1_000, seed=4)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_mix_lengths_metadata_and_truth(tmp_path: Path) -> None:
    summary = generate(tmp_path / "s", 5_000, seed=1)
    data = pq.read_table(tmp_path / "s" / "part-00000.parquet")
    truth = pq.read_table(tmp_path / "s" / TRUTH_FILE)
    assert data.num_rows == truth.num_rows == 5_000
    assert data["doc_id"].to_pylist() == truth["doc_id"].to_pylist()
    kinds = summary["kinds"]
    assert kinds["doc_id"] == 150 and kinds["exact"] == 250 and kinds["near"] == 400
    assert kinds["junk"] == 100
    originals = pc.equal(truth["kind"], "original")
    lengths = pc.utf8_length(data.filter(originals)["text"]).to_numpy()
    assert lengths.min() >= 200 and lengths.max() <= 25_000
    assert np.median(lengths) < np.mean(lengths), "lengths should be long-tailed"
    assert set(data["lang"].to_pylist()) == {"en", "zh"}
    assert 0 < data["quality"].null_count < 0.1 * data.num_rows
    assert data["license"].null_count > 0.8 * data.num_rows
    # doc_id duplicates reuse an original id; exact copies normalise to the original.
    dup_ids = set(truth.filter(pc.equal(truth["kind"], "doc_id"))["doc_id"].to_pylist())
    orig_ids = set(truth.filter(originals)["doc_id"].to_pylist())
    assert dup_ids <= orig_ids
    near = truth.filter(pc.equal(truth["kind"], "near"))
    assert set(near["target_similarity"].to_pylist()) <= {0.95, 0.9, 0.85, 0.7, 0.5}
    assert (tmp_path / "s" / TRUTH_FILE).exists()


def test_exact_copies_normalise_to_their_original(tmp_path: Path) -> None:
    from corpusclean.pipelines.content import content_hashes

    generate(tmp_path / "s", 1_000, seed=2)
    data = pq.read_table(tmp_path / "s" / "part-00000.parquet")
    truth = pq.read_table(tmp_path / "s" / TRUTH_FILE)
    text = dict(zip(data["doc_id"].to_pylist(), data["text"].to_pylist(), strict=True))
    exact = truth.filter(pc.equal(truth["kind"], "exact")).to_pylist()
    assert exact
    for row in exact:
        a, b = text[row["doc_id"]], text[row["group_id"]]
        assert a != b
        ha, hb = content_hashes(pa.array([a, b])).to_pylist()
        assert ha == hb


def test_refuses_tiny_or_existing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least 100"):
        generate(tmp_path / "x", 10)
    generate(tmp_path / "y", 200)
    with pytest.raises(InputError, match="not empty"):
        generate(tmp_path / "y", 200)
