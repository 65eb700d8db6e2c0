"""report.json's views and report.html's sections, checked against the run's own files and its
input: lengths, the lang/source breakdown, near-duplicate pairs, clusters, exact duplicates and
rejected rows; and `corpusclean report DIR` on an output written before the views existed."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from corpusclean.jobs import report as report_command
from corpusclean.jobs.reports.data import cut
from corpusclean.pipelines.minhash import MinHashParams, exact_jaccard
from corpusclean.pipelines.profile import LENGTH_EDGES

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

SECTIONS = (
    "facts",
    "funnel",
    "removed",
    "timings",
    "lengths",
    "by-lang",
    "by-source",
    "rejected",
    "missing",
    "near",
    "clusters",
    "index",
    "config",
)


def _table(folder: Path) -> pa.Table:
    return ds.dataset(folder, format="parquet").to_table()


def _bucket(n: int) -> int:
    return 0 if n <= 0 else min(n.bit_length(), len(LENGTH_EDGES) - 1)


@pytest.fixture(scope="module")
def run(viewed_run) -> tuple[Path, Path, dict]:
    return viewed_run


def test_lengths_count_every_text_before_and_after(run) -> None:
    raw, out, report = run
    lengths = report["lengths"]
    assert lengths["edges"] == list(LENGTH_EDGES)
    texts = [t for t in _table(raw)["text"].to_pylist() if t is not None]
    expected_in = Counter(_bucket(len(t)) for t in texts)
    assert lengths["input"] == [expected_in.get(i, 0) for i in range(len(LENGTH_EDGES))]
    expected_out = Counter(_bucket(len(t)) for t in _table(out / "data")["text"].to_pylist())
    assert lengths["output"] == [expected_out.get(i, 0) for i in range(len(LENGTH_EDGES))]
    assert sum(lengths["output"]) == report["output_rows"]
    for stage in ("doc_id", "exact", "near"):
        assert sum(lengths["removed"][stage]) == report["removed"][stage], stage


def test_breakdown_matches_the_input_and_the_output(run) -> None:
    raw, out, report = run
    for col in ("lang", "source"):
        per = report["breakdown"][col]
        assert dict(Counter(_table(raw)[col].to_pylist())) == {k: v["in"] for k, v in per.items()}
        assert dict(Counter(_table(out / "data")[col].to_pylist())) == {
            k: v["out"] for k, v in per.items() if v["out"]
        }
        for stage, n in report["removed"].items():
            assert sum(v["removed"].get(stage, 0) for v in per.values()) == n, (col, stage)


def test_near_pairs_are_a_removed_document_and_its_survivor_with_their_jaccard(run) -> None:
    raw, out, report = run
    pairs = report["examples"]["near"]
    assert pairs, "a run that removed near duplicates shows some"
    dup = _table(out / "duplicates").filter(pc.equal(_table(out / "duplicates")["stage"], "near"))
    removed = {
        d: c
        for d, c, k in zip(
            dup["doc_id"].to_pylist(),
            dup["cluster_id"].to_pylist(),
            dup["kept"].to_pylist(),
            strict=True,
        )
        if not k
    }
    texts = dict(zip(*[_table(raw)[c].to_pylist() for c in ("doc_id", "text")], strict=True))
    nd = report["near_dedup"]
    params = MinHashParams.of(nd)
    for pair in pairs:
        assert removed[pair["removed"]] == pair["kept"]
        kept_text, removed_text = texts[pair["kept"]], texts[pair["removed"]]
        assert pair["jaccard"] == round(exact_jaccard(kept_text, removed_text, params), 4)
        assert pair["removed_text"] == cut(removed_text)
        assert pair["band"]
    jaccards = [p["jaccard"] for p in pairs]
    assert jaccards == sorted(jaccards, reverse=True)
    assert max(Counter(p["band"] for p in pairs).values()) <= 3


def test_clusters_exact_and_rejected_samples_come_from_the_files(run) -> None:
    _, out, report = run
    dup = _table(out / "duplicates")
    for stage, figures in report["clusters"].items():
        rows = dup.filter(pc.equal(dup["stage"], stage))
        sizes = Counter(Counter(rows["cluster_id"].to_pylist()).values())
        assert figures["sizes"] == {str(k): v for k, v in sorted(sizes.items())}
        assert figures["clusters"] == sum(sizes.values())
        assert [c["size"] for c in figures["largest"]] == sorted(
            (c["size"] for c in figures["largest"]), reverse=True
        )
    data = _table(out / "data")
    by_id = dict(zip(data["doc_id"].to_pylist(), data["text"].to_pylist(), strict=True))
    for sample in report["examples"]["exact"]:
        assert sample["text"] == cut(by_id[sample["kept"]])
    rejected = _table(out / "rejected")
    reasons = set(rejected["reject_reason"].to_pylist())
    assert set(report["examples"]["rejected"]) == reasons
    for reason, rows in report["examples"]["rejected"].items():
        assert 1 <= len(rows) <= 2
        of_reason = rejected.filter(pc.equal(rejected["reject_reason"], reason))
        pairs = set(zip(*[of_reason[c].to_pylist() for c in ("doc_id", "text")], strict=True))
        for row in rows:
            full = next(t for d, t in pairs if d == row["doc_id"] and cut(t) == row["text"])
            assert (row["doc_id"], full) in pairs


def test_the_page_has_every_section_and_its_charts(run) -> None:
    _, out, report = run
    page = (out / "report.html").read_text()
    ids = re.findall(r"<h2 id='([^']+)'>", page)
    for section in SECTIONS:
        assert section in ids, section
    assert page.count("<svg") >= 8
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")
    assert page.count("class='pair'") == len(report["examples"]["near"])
    assert "<mark>" in page


def test_report_renders_an_older_output_again_without_touching_its_report_json(
    run, tmp_path: Path, capsys
) -> None:
    _, out, report = run
    report = copy.deepcopy(report)
    old = tmp_path / "old"
    shutil.copytree(out, old)
    for key in ("lengths", "breakdown", "examples", "clusters"):
        report.pop(key)
    (old / "report.json").write_text(json.dumps(report))
    (old / "report.html").write_text("<html>old</html>")
    before = hashlib.sha256((old / "report.json").read_bytes()).hexdigest()
    assert report_command.main([str(old)]) == 0
    page = (old / "report.html").read_text()
    assert hashlib.sha256((old / "report.json").read_bytes()).hexdigest() == before
    # From the files: cluster sizes, the largest clusters, exact duplicates, rejected rows.
    for needle in ("Cluster sizes", "Largest clusters", "Exact duplicates", "a few per reason"):
        assert needle in page, needle
    # Only the run saw these.
    assert "holds no length distribution" in page
    assert "class='pair'" not in page
    # The same page twice: the same bytes.
    again = tmp_path / "again.html"
    assert report_command.main([str(old), "--output", str(again)]) == 0
    assert again.read_bytes() == (old / "report.html").read_bytes()


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: None, "is not a folder"),
        (lambda p: p.mkdir(), "holds no report.json"),
        (lambda p: (p.mkdir(), (p / "report.json").write_text("{")), "is not JSON"),
        (lambda p: (p.mkdir(), (p / "report.json").write_text('{"job": "pack"}')), "not the rep"),
    ],
)
def test_report_of_something_else_is_one_line_and_exit_1(tmp_path: Path, capsys, make, needle):
    target = tmp_path / "x"
    make(target)
    assert report_command.main([str(target)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (target / "report.html").exists()


def test_a_breakdown_too_large_for_the_driver_is_dropped_not_the_reasons_or_lengths(
    run, tmp_path: Path, monkeypatch
) -> None:
    """The grouped rows reaching the driver are capped: reasons and length buckets come first,
    so only a breakdown is ever cut (and then it is left out, not reported partly)."""
    from corpusclean.jobs import clean

    raw, _, full = run
    monkeypatch.setattr(clean, "_OUTCOME_ROWS", 40)  # reasons and buckets fit; lang/source not
    out = tmp_path / "capped"
    args = ["--input", str(raw), "--output", str(out), "--set", "audit.enabled=false"]
    assert clean.main(args) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["rejected"] == full["rejected"]
    assert report["lengths"] == full["lengths"]
    assert all("too_many" in v for v in report["breakdown"].values())
