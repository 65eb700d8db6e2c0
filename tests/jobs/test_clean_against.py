"""`clean --against`: a new batch deduplicated against published outputs and built indexes.

A small sample is split in two; the second batch also gets hand-made duplicates of documents
the first output published (the same doc_id, the same content under a new id, a near copy, and
a hard negative), so every kind of cross match is known exactly.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean, index
from corpusclean.jobs.runtime.config import load_clean_config
from corpusclean.jobs.samples.dedup import generate

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

CUT = 480


def _words(n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    vocab = [f"w{rng.randrange(50_000)}" for _ in range(n)]
    return " ".join(vocab)


def _edit(text: str, every: int) -> str:
    """Every `every`-th word replaced: about 5/every of the 5-shingles change."""
    words = text.split(" ")
    return " ".join(f"zz{i}" if i % every == 0 else w for i, w in enumerate(words))


@pytest.fixture(scope="module")
def batches(tmp_path_factory, spark) -> dict[str, Any]:
    """Raw batches A and B (B with planted cross duplicates), and A's published output."""
    root = tmp_path_factory.mktemp("against")
    generate(root / "sample", 600, seed=1717)
    table = pq.read_table(root / "sample" / "part-00000.parquet")
    a, b = table.slice(0, CUT), table.slice(CUT)
    # Three long, distinct documents in A that B will duplicate.
    base = [_words(400, seed) for seed in (1, 2, 3, 4)]
    extra_a = {
        "doc_id": ["prior-id", "prior-exact", "prior-near", "prior-far"],
        "text": base,
    }
    a = pa.concat_tables([a, _rows(a.schema, extra_a)])
    planted = {
        # same doc_id, another text: doc_id
        "doc_id": ["prior-id", "new-exact", "new-near", "new-far"],
        "text": [
            _words(300, 9),
            "  " + base[1].upper() + "  ",  # exact after NFKC, case folding, whitespace
            _edit(base[2], 80),  # 5 of 400 words: Jaccard ~0.88, near
            _edit(base[3], 4),  # Jaccard ~0.4: a hard negative, must stay
        ],
    }
    b = pa.concat_tables([b, _rows(b.schema, planted)])
    for name, part in (("A", a), ("B", b), ("AB", pa.concat_tables([a, b]))):
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-0.parquet")
    out_a = root / "outA"
    assert clean.main(["--input", str(root / "A"), "--output", str(out_a)]) == 0
    return {"root": root, "A": root / "A", "B": root / "B", "AB": root / "AB", "outA": out_a}


def _rows(schema: pa.Schema, cols: dict[str, list[str]]) -> pa.Table:
    n = len(cols["doc_id"])
    arrays = [
        pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type) for f in schema
    ]
    return pa.table(arrays, schema=schema)


def _table(out: Path, name: str) -> list[dict[str, Any]]:
    return ds.dataset(out / name, format="parquet").to_table().to_pylist()


def _ids(out: Path) -> set[str]:
    return {r["doc_id"] for r in _table(out, "data")}


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_every_output_carries_its_index(batches) -> None:
    out = batches["outA"]
    params = json.loads((out / "index" / "_params.json").read_text())
    report = json.loads((out / "report.json").read_text())
    docs = _table(out / "index", "docs")
    assert params["documents"] == report["output_rows"] == len(docs) == report["index"]["documents"]
    assert {d["doc_id"] for d in docs} == _ids(out)
    assert len({d["ix"] for d in docs}) == len(docs)
    mh = params["minhash"]
    assert (mh["num_perm"], mh["bands"], mh["rows"]) == (128, 16, 8)
    assert all(d["sig"] is None or len(d["sig"]) == 4 * mh["num_perm"] for d in docs)
    with_sig = sum(d["sig"] is not None for d in docs)
    bands = ds.dataset(out / "index" / "bands", format="parquet").to_table()
    assert bands.num_rows == with_sig * mh["bands"]
    assert params["texts"]["path"] == "../data"
    assert 0 < params["bytes_per_document"] < 2000


def _against_output(batches: dict[str, Any], where: str) -> Path:
    """`clean B --against outA`, cross edges resolved on the driver or in Spark; run once."""
    out = batches["root"] / f"outB-{where}"
    if not out.exists():
        extra = ["--set", "near_dedup.driver_max_keys=0"] if where == "spark" else []
        args = [
            "--input",
            str(batches["B"]),
            "--output",
            str(out),
            "--against",
            str(batches["outA"]),
        ]
        assert clean.main([*args, *extra]) == 0
    return out


@pytest.mark.parametrize("where", ["driver", "spark"])
def test_against_removes_what_a_published_output_holds(batches, where) -> None:
    out_a = batches["outA"]
    before = _digest(out_a)
    out = _against_output(batches, where)
    assert _digest(out_a) == before  # nothing already published is changed
    dups = {(r["doc_id"], r["stage"]): r for r in _table(out, "duplicates")}
    kept = _ids(out)
    for doc, stage, prior in (
        ("prior-id", "doc_id", "prior-id"),
        ("new-exact", "exact", "prior-exact"),
        ("new-near", "near", "prior-near"),
    ):
        row = dups[(doc, stage)]
        assert (row["cluster_id"], row["against"], row["kept"]) == (prior, "outA", False)
        assert doc not in kept or doc == "prior-id"
    assert "new-far" in kept  # the hard negative stays
    # No published doc_id of A' is published again, and B's own duplicates are still removed.
    assert not kept & _ids(out_a)
    report = json.loads((out / "report.json").read_text())
    (prior,) = report["against"]
    assert prior["name"] == "outA" and prior["documents"] == len(_ids(out_a))
    removed = prior["removed"]
    listed = [r for r in dups.values() if r["against"] == "outA"]
    for stage in ("doc_id", "exact", "near"):
        assert removed[stage] == sum(r["stage"] == stage for r in listed)
        assert removed[stage] <= report["removed"][stage]
    assert prior["near"]["verified_edges"] >= 1
    # The planted near copy (Jaccard ~0.88) is within the margin: its texts were compared.
    assert prior["near"]["exact_checked_edges"] >= 1
    assert report["near_dedup"]["against"]["outA"] == prior["near"]
    assert any(not r["against"] for r in dups.values())  # within-batch duplicates too
    if where == "spark":  # the same outputs whichever side resolves the cross edges
        driver = _against_output(batches, "driver")
        for table in ("data", "duplicates"):
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
            assert sorted(_table(out, table), key=key) == sorted(_table(driver, table), key=key)


def test_two_batches_equal_one_joint_clean_up_to_spanning_survivors(batches) -> None:
    root = batches["root"]
    out_b, joint = _against_output(batches, "driver"), root / "outAB"
    assert clean.main(["--input", str(batches["AB"]), "--output", str(joint)]) == 0
    a_ids = {r["doc_id"] for r in pq.read_table(batches["A"]).to_pylist()}
    b_ids = {r["doc_id"] for r in pq.read_table(batches["B"]).to_pylist()}
    clusters: dict[tuple[str, str], set[str]] = {}
    for r in _table(joint, "duplicates"):
        clusters.setdefault((r["stage"], r["cluster_id"]), set()).add(r["doc_id"])
    spanning = set().union(*[m for m in clusters.values() if m & a_ids and m & b_ids])
    differ = (_ids(batches["outA"]) | _ids(out_b)) ^ _ids(joint)
    assert differ <= spanning

    # A third batch names both outputs: a copy of each's document goes, against its own.
    b_doc = next(r for r in _table(out_b, "data") if r["doc_id"] not in a_ids)
    c_dir, out_c = root / "C", root / "outC"
    c_dir.mkdir()
    schema = pq.read_schema(batches["B"] / "part-0.parquet")
    c_rows = {
        "doc_id": ["c-1", "c-2", "c-3"],
        "text": [b_doc["text"], _words(400, 2), _words(300, 77)],
    }
    pq.write_table(_rows(schema, c_rows), c_dir / "part-0.parquet")
    both = ["--against", str(batches["outA"]), "--against", str(out_b)]
    args = ["--input", str(c_dir), "--output", str(out_c), *both, "--set", "gate.min_retention=0.1"]
    assert clean.main(args) == 0
    dups = {r["doc_id"]: r for r in _table(out_c, "duplicates")}
    assert (dups["c-1"]["cluster_id"], dups["c-1"]["against"]) == (b_doc["doc_id"], out_b.name)
    assert (dups["c-2"]["cluster_id"], dups["c-2"]["against"]) == ("prior-exact", "outA")
    assert _ids(out_c) == {"c-3"}
    report = json.loads((out_c / "report.json").read_text())
    assert [p["name"] for p in report["against"]] == ["outA", out_b.name]
    html = (out_c / "report.html").read_text()
    assert "Deduplicated against" in html and out_b.name in html


def _fails(capsys, args: list[str], out: Path, *words: str) -> str:
    assert clean.main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    line = [x for x in err if x.startswith("corpusclean") or "error" in x.lower()][-1]
    for word in words:
        assert word in line, line
    assert not out.exists()
    return line


def test_a_parameter_mismatch_is_named_before_any_work(batches, capsys) -> None:
    out = batches["root"] / "outB-mismatch"
    args = ["--input", str(batches["B"]), "--output", str(out), "--against", str(batches["outA"])]
    _fails(capsys, [*args, "--set", "near_dedup.num_perm=64"], out, "near_dedup.num_perm", "64")
    _fails(capsys, [*args, "--set", "near_dedup.seed=7"], out, "near_dedup.seed")
    # Without near-dedup only the content hash must match: this runs.
    ok = batches["root"] / "outB-nonear"
    assert clean.main([*args[:3], str(ok), *args[4:], "--set", "near_dedup.enabled=false"]) == 0
    assert "new-exact" not in _ids(ok)


def test_damaged_or_foreign_indexes_are_one_line_errors(batches, capsys) -> None:
    root = batches["root"]
    out = root / "outB-bad"
    bad = root / "bad-index"

    def against(folder: Path, *words: str) -> None:
        args = ["--input", str(batches["B"]), "--output", str(out), "--against", str(folder)]
        _fails(capsys, args, out, *words)

    against(root / "nowhere", "no such folder")
    shutil.copytree(batches["outA"] / "index", bad)
    (bad / "_params.json").unlink()
    against(bad, "no dedup index there")
    (bad / "_params.json").write_text(json.dumps({"format": "datatrove-minhash", "version": 2}))
    against(bad, "not a corpusclean dedup index")
    (bad / "_params.json").write_text("{not json")
    against(bad, "not valid JSON")
    shutil.copy(batches["outA"] / "index" / "_params.json", bad / "_params.json")
    part = next((bad / "docs").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    against(bad, "not readable Parquet", part.name)
    # The output itself cannot be an index it is deduplicated against.
    args = ["--input", str(batches["B"]), "--output", str(batches["outA"])]
    assert clean.main([*args, "--against", str(batches["outA"])]) == 1
    assert "is the output itself" in capsys.readouterr().err


def test_index_builds_a_released_corpus_and_resumes(batches, spark, monkeypatch, capsys) -> None:
    root = batches["root"]
    idx = root / "released-index"
    calls = {"n": 0}
    real = index.write_index

    def crash_once(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("executor lost")
        return real(*args, **kwargs)

    monkeypatch.setattr(index, "write_index", crash_once)
    with pytest.raises(RuntimeError):
        index.build_index(spark, str(batches["A"]), str(idx), load_clean_config())
    assert not idx.exists()
    assert index.main(["--input", str(batches["A"]), "--output", str(idx)]) == 0
    assert "its read pass is reused" in capsys.readouterr().err
    params = json.loads((idx / "_params.json").read_text())
    raw = pq.read_table(batches["A"]).to_pylist()
    # Rows without an id or a text are left out; repeated ids stay (a released corpus's own).
    named = [r for r in raw if r["doc_id"] and r["doc_id"].strip() and r["text"] is not None]
    assert params["documents"] == len(named)
    assert params["texts"]["path"] == str(batches["A"].absolute())
    # The raw corpus (its duplicates included) is the prior: B's planted copies go.
    out = root / "outB-index"
    assert (
        clean.main(["--input", str(batches["B"]), "--output", str(out), "--against", str(idx)]) == 0
    )
    dups = {(r["doc_id"], r["stage"]): r for r in _table(out, "duplicates")}
    assert dups[("new-near", "near")]["against"] == "released-index"
    assert dups[("new-exact", "exact")]["cluster_id"] == "prior-exact"
