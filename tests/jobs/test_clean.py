"""`corpusclean clean` end to end on small generated corpora."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.samples.dedup import TRUTH_FILE, generate

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

FAST = ["--set", "near_dedup.enabled=false", "--set", "audit.enabled=false"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "raw"
    generate(path, 2_000, seed=11)
    return path


def _rows(folder: Path, columns: list[str] | None = None) -> pa.Table:
    return ds.dataset(folder, format="parquet").to_table(columns=columns)


def _sorted(table: pa.Table, key: str = "doc_id") -> pa.Table:
    return table.sort_by([(key, "ascending")])


def test_passing_run_publishes_everything(spark, corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clean"
    assert clean.main(["--input", str(corpus), "--output", str(out), *FAST]) == 0
    for name in ("data", "duplicates", "rejected", "report.json", "report.html", "_SUCCESS"):
        assert (out / name).exists(), name
    report = json.loads((out / "report.json").read_text())
    for key in (
        "input_rows",
        "output_rows",
        "retention",
        "gate",
        "stages",
        "columns",
        "near_dedup",
        "config",
        "spark",
    ):
        assert key in report, key
    assert report["input_rows"] == 2_000
    assert report["gate"] == {"min_retention": 0.7, "passed": True}
    assert [s["name"] for s in report["stages"]][:5] == ["read", "rules", "doc_id", "exact", "near"]
    assert report["near_dedup"]["ran"] is False
    assert report["columns"]["license"]["flagged"] is True
    assert report["columns"]["doc_id"]["flagged"] is False

    data = _rows(out / "data")
    raw = _rows(corpus)
    assert [(f.name, f.type) for f in data.schema] == [(f.name, f.type) for f in raw.schema], (
        "data/ keeps the input's columns unchanged"
    )
    assert data.num_rows == report["output_rows"]
    ids = data["doc_id"].to_pylist()
    assert len(ids) == len(set(ids)), "one row per doc_id"
    truth = pq.read_table(corpus / TRUTH_FILE)
    junk_ids = set(truth.filter(pc.equal(truth["kind"], "junk"))["doc_id"].to_pylist()) - {None}
    assert not junk_ids & set(ids)
    rejected = _rows(out / "rejected")
    assert rejected.num_rows == sum(report["rejected"].values()) == 40
    assert set(rejected["reject_reason"].to_pylist()) <= {
        "null_id",
        "blank_id",
        "null_text",
        "blank_text",
        "too_short",
        "too_long",
    }
    # Every exact group of the truth collapses to one survivor.
    exact = truth.filter(pc.equal(truth["kind"], "exact")).to_pylist()
    kept = set(ids)
    for row in exact:
        assert (row["doc_id"] in kept) != (row["group_id"] in kept), row
    dups = _rows(out / "duplicates")
    assert set(dups["stage"].to_pylist()) == {"doc_id", "exact"}
    survivors = dups.filter(pc.field("kept"))
    assert set(survivors["cluster_id"].to_pylist()) == set(survivors["doc_id"].to_pylist())
    removed = set(dups.filter(pc.invert(pc.field("kept")))["doc_id"].to_pylist())
    assert not (removed - {r["doc_id"] for r in dups.filter(pc.field("kept")).to_pylist()}) & kept
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["output_rows"] == report["output_rows"]


def test_rejected_rows_are_whole_without_a_second_read_of_the_text(
    spark, corpus: Path, tmp_path: Path, monkeypatch
) -> None:
    """rejected/ takes each refused row's text from the read pass: its scan of the input reads
    every column but the text, and each row still comes out as it was in the input."""
    plans: list[str] = []
    build = clean._rejected_rows

    def spy(*args, **kwargs):
        frame = build(*args, **kwargs)
        plans.append(frame._jdf.queryExecution().executedPlan().toString())
        return frame

    monkeypatch.setattr(clean, "_rejected_rows", spy)
    out = tmp_path / "clean"
    assert clean.main(["--input", str(corpus), "--output", str(out), *FAST]) == 0
    scans = [ln for ln in plans[0].splitlines() if "ReadSchema" in ln and "/raw" in ln]
    assert scans, plans[0]
    assert all("text:" not in ln and "doc_id:" in ln for ln in scans), scans
    rejected = _rows(out / "rejected")
    raw = _rows(corpus)
    key = [f.name for f in raw.schema]
    inputs = {json.dumps(r, default=str, sort_keys=True) for r in raw.to_pylist()}
    refused = rejected.select(key).to_pylist()
    assert len(refused) == 40
    assert sum(r["text"] is not None for r in refused) > 20  # short, long and blank texts
    for row in refused:
        assert json.dumps(row, default=str, sort_keys=True) in inputs, row


def test_gate_rejection_keeps_previous_output(spark, corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clean"
    assert clean.main(["--input", str(corpus), "--output", str(out), *FAST]) == 0
    before = (out / "report.json").read_text()
    data_before = sorted(p.name for p in (out / "data").iterdir())
    code = clean.main(
        ["--input", str(corpus), "--output", str(out), *FAST, "--set", "gate.min_retention=0.99"]
    )
    assert code == 3
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "rejected:" in ln)
    assert "gate.min_retention" in line and "kept at" in line
    assert (out / "report.json").read_text() == before
    assert sorted(p.name for p in (out / "data").iterdir()) == data_before
    staged = Path(line.split("kept at ")[1].split(" ")[0])
    assert json.loads((staged / "report.json").read_text())["gate"]["passed"] is False
    assert (staged / "data").is_dir() and not (staged / "_SUCCESS").exists()


def test_output_is_the_same_at_3_and_7_shuffle_partitions(spark, corpus, tmp_path) -> None:
    outs = []
    for parts in (3, 7):
        out = tmp_path / f"p{parts}"
        args = ["--input", str(corpus), "--output", str(out), *FAST]
        assert clean.main([*args, "--set", f"spark.sql.shuffle.partitions={parts}"]) == 0
        outs.append(out)
    for sub in ("data", "duplicates", "rejected"):
        key = "doc_id" if sub != "duplicates" else "cluster_id"
        a = (
            _rows(outs[0] / sub)
            .to_pandas()
            .sort_values([key, "doc_id", *(["stage"] if sub == "duplicates" else [])])
        )
        b = (
            _rows(outs[1] / sub)
            .to_pandas()
            .sort_values([key, "doc_id", *(["stage"] if sub == "duplicates" else [])])
        )
        assert a.reset_index(drop=True).equals(b.reset_index(drop=True)), sub


def test_jsonl_input(spark, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    generate(raw, 300, seed=5, fmt="jsonl")
    out = tmp_path / "clean"
    assert clean.main(["--input", str(raw / "part-00000.jsonl"), "--output", str(out), *FAST]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["input_rows"] == 300


def test_median_imputation_and_drop_rules(spark, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "clean"
    args = ["--input", str(corpus), "--output", str(out), *FAST]
    assert clean.main([*args, "--set", "missing.numeric={quality: median}"]) == 0
    data = _rows(out / "data", ["quality"])
    assert data["quality"].null_count == 0
    report = json.loads((out / "report.json").read_text())
    assert 0.5 < report["imputed_medians"]["quality"] < 0.9
    out2 = tmp_path / "clean2"
    args2 = ["--input", str(corpus), "--output", str(out2), *FAST]
    assert clean.main([*args2, "--set", "missing.numeric={quality: drop}"]) == 0
    report2 = json.loads((out2 / "report.json").read_text())
    assert report2["rejected"]["null_quality"] > 0


def _one_line_error(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("corpusclean")]
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_bad_inputs_exit_1_with_one_line(spark, corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "clean"
    assert clean.main(["--input", str(tmp_path / "missing"), "--output", str(out)]) == 1
    assert "does not exist" in _one_line_error(capsys)
    assert clean.main(["--input", str(corpus), "--output", str(corpus / "out")]) == 1
    assert "inside it" in _one_line_error(capsys)
    assert (
        clean.main(["--input", str(corpus), "--output", str(out), "--set", "columns.text=body"])
        == 1
    )
    assert "no column 'body'" in _one_line_error(capsys)
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"doc_id": [1, 2], "text": ["a", "b"]}), wrong)
    assert clean.main(["--input", str(wrong), "--output", str(out)]) == 1
    assert "must be a string" in _one_line_error(capsys)
    assert clean.main(["--input", str(corpus), "--output", str(out), "--set", "gate.x=1"]) == 1
    assert "gate.x: unknown key" in _one_line_error(capsys)
    empty = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table({"doc_id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), empty
    )
    assert clean.main(["--input", str(empty), "--output", str(out), *FAST]) == 1
    assert "no rows" in _one_line_error(capsys)
    assert not out.exists(), "failed runs publish nothing"
    assert list(tmp_path.glob(".clean.runs/*")) == [], "crashed runs leave no staging behind"


def test_print_config_and_usage(capsys) -> None:
    assert clean.main(["--print-config", "--set", "near_dedup.threshold=0.9"]) == 0
    assert "threshold: 0.9" in capsys.readouterr().out
    assert clean.main(["--input", "x"]) == 2


def test_stage_lines_start_and_end_in_order_as_the_stages_run(
    spark, corpus: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    """Each stage prints `started` then `done` (or one line for work done inside another)."""
    # Periodic task lines as often as possible, to see that they stay inside their stage.
    monkeypatch.setenv("CORPUSCLEAN_PROGRESS_SECONDS", "0.2")
    out = tmp_path / "clean"
    args = ["--input", str(corpus), "--output", str(out), "--set", "audit.enabled=false"]
    assert clean.main(args) == 0
    captured = capsys.readouterr()
    json.loads(captured.out.strip())  # stdout: the JSON summary alone
    stages = {"read", "rules", "doc_id", "exact", "near", "write", "gate"}
    lines = [ln.removeprefix("[clean] ") for ln in captured.err.splitlines()]
    lines = [ln for ln in lines if ln[:10].strip() in stages]
    events: list[tuple[str, str]] = []
    open_stage = None
    for line in lines:
        name, rest = line[:10].strip(), line[11:]
        if rest.startswith("running "):
            assert open_stage == name, f"a task line outside its stage: {line}"
            continue
        if rest.startswith("started"):
            assert open_stage is None, line
            open_stage = name
            events.append((name, "start"))
        elif rest.startswith("done:"):
            assert open_stage == name, line
            open_stage = None
            events.append((name, "end"))
        elif open_stage is None:
            events.append((name, "line"))
    assert events == [
        ("read", "start"),
        ("read", "end"),
        ("rules", "line"),
        ("doc_id", "start"),
        ("doc_id", "end"),
        ("exact", "line"),
        ("near", "start"),
        ("near", "end"),
        ("write", "start"),
        ("write", "end"),
        ("gate", "line"),
    ]
    report = json.loads((out / "report.json").read_text())
    assert [s["name"] for s in report["stages"]] == [
        "read",
        "rules",
        "doc_id",
        "exact",
        "near",
        "write",
        "gate",
    ]
    for s in report["stages"]:
        assert list(s)[:4] == ["name", "rows_in", "rows_out", "seconds"]
    by_name = {s["name"]: s for s in report["stages"]}
    assert by_name["rules"]["rows_out"] == 2_000 - report["removed"]["rules"]
    assert by_name["near"]["rows_out"] == report["output_rows"]
    # Every Spark job of the run is counted once, on the line whose work started it: the
    # stages that ran inside another stage's pass start none.
    jobs = {s["name"]: s["jobs"] for s in report["stages"]}
    assert jobs["read"] >= 1 and jobs["doc_id"] >= 1 and jobs["near"] >= 1 and jobs["write"] >= 1
    assert jobs["rules"] == jobs["exact"] == jobs["gate"] == 0
    assert report["spark"]["jobs"] == sum(jobs.values())
    done = [ln for ln in lines if ln[11:].startswith("done:")]
    assert f"{report['output_rows']:,} rows" in done[2], done  # near's end line has its rows


def test_disk_full_is_one_line_and_keeps_the_previous_output(
    spark, corpus: Path, small_fs: Path, fill_disk, capsys
) -> None:
    out = small_fs / "clean"
    assert clean.main(["--input", str(corpus), "--output", str(out), *FAST]) == 0
    before = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    fill_disk(small_fs, leave=60_000)
    capsys.readouterr()
    assert clean.main(["--input", str(corpus), "--output", str(out), *FAST]) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("corpusclean clean:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith("corpusclean clean: error: disk full"), errors[0]
    assert str(out) in errors[0]
    after = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    assert sorted(p.name for p in small_fs.iterdir()) == ["clean", "filler"]  # staging removed


def test_the_audit_reads_the_read_pass_values_and_judges_as_check_does(spark, tmp_path) -> None:
    """clean's audit takes the hash and bad-character checks' values from the read pass; on
    the published output, the suite run from the text gives the same records."""
    from corpusclean.jobs.audit.quality import audit_clean_output

    words = "the quick brown fox jumps over the lazy dog while the sun sets slowly " * 3
    texts = [f"document {i}: {words} {i * 31}" for i in range(60)]
    texts[5] = texts[4].upper() + "  "  # an exact duplicate once normalised
    texts[10] = "\ufffd" * 30 + texts[10]  # decoded with the wrong charset: > 1% bad
    texts[11] = "\x00\x01\x02" * 10 + texts[11]
    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(
        pa.table({"doc_id": [f"d{i:02d}" for i in range(60)], "text": texts}), raw / "p.parquet"
    )
    out = tmp_path / "clean"
    args = ["--input", str(raw), "--output", str(out), "--set", "near_dedup.enabled=false"]
    assert clean.main(args) == 0
    report = json.loads((out / "report.json").read_text())
    audit = report["audit"]
    assert audit["precomputed"] == ["_bad_char_ratio", "_norm_hash"]
    records = {r["name"]: r for r in audit["checks"]}
    assert records["charset_sanity"]["status"] == "warn"
    assert records["charset_sanity"]["examples"] == ["d10", "d11"]
    assert records["no_exact_duplicates"]["status"] == "pass"
    assert report["removed"]["exact"] == 1
    from_text = audit_clean_output(spark, str(out), audit["parameters"])
    assert from_text["checks"] == audit["checks"]
