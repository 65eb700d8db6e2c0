"""`corpusclean check` and the clean job's audit, on tiny clean outputs and crafted frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import check
from corpusclean.jobs.audit.quality import audit_clean_output, run_suite

pytestmark = [pytest.mark.spark, pytest.mark.gx]

DOCS = pa.schema(
    [("doc_id", pa.string()), ("text", pa.string()), ("lang", pa.string()), ("url", pa.string())]
)
DUPS = pa.schema(
    [
        ("doc_id", pa.string()),
        ("cluster_id", pa.string()),
        ("stage", pa.string()),
        ("kept", pa.bool_()),
    ]
)
MIN_CHARS = 20


def _text(i: int) -> str:
    return f"Document number {i} talks about topic {i * 7} at some length."


GOOD = [(f"d{i}", _text(i), "en", f"https://x/{i}") for i in range(8)]
# A doc_id-stage loser shares its survivor's id (and must not count as "removed"); a near
# loser is absent from data; survivors are marked kept.
GOOD_DUPS = [
    ("d1", "d1", "doc_id", False),
    ("d1", "d1", "doc_id", True),
    ("d2", "c2", "near", True),
    ("gone", "c2", "near", False),
]


def _report(rows_in: int, rows_out: int, **config: Any) -> dict[str, Any]:
    cfg = {
        "columns": {"id": "doc_id", "text": "text"},
        "rules": {"min_chars": MIN_CHARS, "max_chars": 1000},
        "gate": {"min_retention": 0.7},
        "missing": {"review_threshold": 0.3},
        "exact_dedup": {"enabled": True},
        "audit": {"allowed_langs": ["en"]},
    }
    cfg.update(config)
    return {
        "input_rows": rows_in,
        "output_rows": rows_out,
        "columns": {"url": {"null_rate": 0.05, "empty_rate": 0.0, "missing_rate": 0.05}},
        "config": cfg,
    }


def _table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)


def _clean_output(
    folder: Path, docs: list[tuple], dups: list[tuple], report: dict[str, Any] | None = None
) -> Path:
    """A clean output folder as `corpusclean clean` publishes it."""
    (folder / "data").mkdir(parents=True)
    (folder / "duplicates").mkdir()
    pq.write_table(
        _table(docs, DOCS),
        folder / "data" / "part-00000.parquet",
    )
    pq.write_table(
        _table(dups, DUPS),
        folder / "duplicates" / "part-00000.parquet",
    )
    report = report if report is not None else _report(len(docs) + 1, len(docs))
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "_corpusclean.json").write_text('{"job": "clean"}')
    (folder / "_SUCCESS").write_text("")
    return folder


def _default_report(folder: Path) -> Path:
    """Where check writes its JSON by default: beside the folder, never inside it."""
    return folder.parent / f"{folder.name}.check.json"


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in result["checks"]}


def test_good_output_passes_every_check_and_writes_check_json(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _clean_output(tmp_path / "clean", GOOD, GOOD_DUPS)
    assert check.main(["--input", str(out)]) == 0
    report = json.loads(_default_report(out).read_text())
    assert report["suite"] == "clean_docs" and report["verdict"] == "pass"
    assert report["passed"] is True and report["highest_failed_severity"] is None
    assert isinstance(report["seconds"], float)
    records = _by_name(report)
    assert {r["status"] for r in records.values()} == {"pass"}, records
    for rec in records.values():
        assert {"name", "column", "severity", "observed", "success"} <= set(rec)
    assert records["retention"]["observed"] == pytest.approx(8 / 9)
    assert records["row_count_matches_report"]["observed"] == 8
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(records) + 1
    assert lines[-1].startswith("verdict: PASS")
    assert any("doc_id_unique" in ln and "observed=0" in ln for ln in lines)


def test_each_default_check_fails_on_its_crafted_bad_rows(spark: Any) -> None:
    rows = [
        *GOOD[:3],
        ("dup", _text(100), "en", "u"),
        ("dup", _text(101), "en", "u"),
        (None, _text(102), "en", "u"),
        ("nulltext", None, "en", "u"),
        ("short", "too short", "en", "u"),
        ("exact_a", "Same   words, SAME text here ok", "en", "u"),
        ("exact_b", "same words, same text here ok ", "en", "u"),
        ("removed", _text(103), "en", "u"),
        ("garbled", "\ufffd" * 10 + _text(104), "en", "u"),
        ("foreign", _text(105), "xx", "u"),
    ]
    df = spark.createDataFrame(rows, "doc_id string, text string, lang string, url string")
    dups = spark.createDataFrame(
        [("removed", "c9", "exact", False), ("exact_a", "c8", "exact", True)],
        "doc_id string, cluster_id string, stage string, kept boolean",
    )
    params = {
        "min_chars": MIN_CHARS,
        "max_chars": 1000,
        "rows_in": 100,
        "rows_out": len(rows) + 1,
        "min_retention": 0.7,
        "allowed_langs": ["en"],
        "missing_rates": {"url": 0.9, "text": 0.0},
        "review_threshold": 0.3,
    }
    result = run_suite(df, "clean_docs", params, duplicates=dups)
    got = _by_name(result)
    expected_examples = {
        "doc_id_unique": ["dup"],
        "doc_id_not_null": [],
        "text_not_null": ["nulltext"],
        "text_length": ["short"],
        "no_exact_duplicates": ["exact_a", "exact_b"],
        "no_survivor_marked_removed": ["removed"],
        "charset_sanity": ["garbled"],
        "lang_allowed": ["foreign"],
        "missing_rate": ["url"],
    }
    for name, examples in expected_examples.items():
        assert got[name]["success"] is False, got[name]
        assert sorted(got[name].get("examples", [])) == examples, got[name]
    assert got["row_count_matches_report"]["observed"] == len(rows)
    assert got["row_count_matches_report"]["success"] is False
    assert got["retention"]["observed"] == pytest.approx((len(rows) + 1) / 100)
    assert got["retention"]["status"] == "fail"
    assert got["missing_rate"]["column"] == "url"
    for name in ("charset_sanity", "lang_allowed", "missing_rate"):
        assert got[name]["status"] == "warn"
    assert got["doc_id_unique"]["status"] == "fail"
    assert result["passed"] is False and result["highest_failed_severity"] == "critical"
    assert not [r for r in result["checks"] if r.get("error")]


def test_missing_or_mistyped_columns_fail_without_crashing(spark: Any) -> None:
    df = spark.createDataFrame([(1, "x")], "id long, lang string")
    params = {
        "id_column": "id",
        "rows_in": 1,
        "rows_out": 1,
        "min_retention": 0.5,
        "min_chars": 1,
        "max_chars": 10,
        "review_threshold": 0.3,
    }
    got = _by_name(run_suite(df, "clean_docs", params))
    assert got["required_columns"]["status"] == "fail"
    assert got["required_columns"]["detail"] == "missing: text"
    assert got["doc_id_is_string"]["status"] == "fail"
    assert got["doc_id_is_string"]["column"] == "id"  # reported under its configured name
    assert got["text_not_null"]["detail"] == "column text does not exist"
    assert got["no_survivor_marked_removed"]["status"] == "skip"  # no duplicates table
    assert got["lang_allowed"]["status"] == "skip"  # no allowed languages given
    assert got["missing_rate"]["status"] == "skip"  # no missing rates given
    assert got["retention"]["status"] == "pass"


def test_warning_only_failures_exit_0_and_3_with_strict(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [*GOOD[:7], ("d7", "\ufffd" * 30 + _text(7), "fr", "u")]
    out = _clean_output(tmp_path / "clean", docs, [])
    assert check.main(["--input", str(out)]) == 0
    report = json.loads(_default_report(out).read_text())
    assert report["passed"] is True and report["highest_failed_severity"] == "warning"
    assert {r["name"] for r in report["checks"] if r["status"] == "warn"} == {
        "charset_sanity",
        "lang_allowed",
    }
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("verdict: PASS")

    strict_report = tmp_path / "ci" / "strict.json"
    code = check.main(["--input", str(out), "--strict", "--report", str(strict_report)])
    assert code == 3
    captured = capsys.readouterr()
    assert "verdict: FAIL" in captured.out
    assert "charset_sanity (text)" in captured.err and "lang_allowed (lang)" in captured.err
    assert json.loads(strict_report.read_text())["verdict"] == "fail"


def test_critical_failure_exits_3_naming_check_and_column(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [*GOOD, ("d0", _text(50), "en", "u")]
    out = _clean_output(tmp_path / "clean", docs, GOOD_DUPS, _report(9, 9))
    assert check.main(["--input", str(out)]) == 3
    err = capsys.readouterr().err
    assert "rejected" in err and "doc_id_unique (doc_id)" in err
    assert json.loads(_default_report(out).read_text())["verdict"] == "fail"


def test_audit_rejects_a_staged_output_and_never_raises(spark: Any, tmp_path: Path) -> None:
    staged = _clean_output(tmp_path / "staged", GOOD, [*GOOD_DUPS, ("d3", "c3", "near", False)])
    params = {
        "id_column": "doc_id",
        "text_column": "text",
        "min_chars": MIN_CHARS,
        "max_chars": 1000,
        "rows_in": 10,
        "rows_out": len(GOOD),
        "min_retention": 0.7,
        "allowed_langs": [],
        "missing_rates": {"url": 0.0},
        "review_threshold": 0.3,
    }
    result = audit_clean_output(spark, str(staged), params)
    json.dumps(result)  # JSON-able, for report.json
    assert result["passed"] is False and result["highest_failed_severity"] == "critical"
    failed = [r for r in result["checks"] if r["success"] is False]
    assert [(r["name"], r["column"], r.get("examples")) for r in failed] == [
        ("no_survivor_marked_removed", "doc_id", ["d3"])
    ]
    assert set(result) >= {"suite", "passed", "highest_failed_severity", "checks", "seconds"}


def test_raw_input_defaults_to_raw_docs_and_reports_beside_it(spark: Any, tmp_path: Path) -> None:
    raw = tmp_path / "corpus.parquet"
    pq.write_table(_table(GOOD, DOCS), raw)
    code = check.main(["--input", str(raw), "--set", f"rules.min_chars={MIN_CHARS}"])
    assert code == 0
    report = json.loads((tmp_path / "corpus.parquet.check.json").read_text())
    assert report["suite"] == "raw_docs" and report["passed"] is True
    assert _by_name(report)["text_length"]["status"] == "pass"


def test_unreadable_input_or_suite_exits_1(spark: Any, tmp_path: Path) -> None:
    assert check.main(["--input", str(tmp_path / "nothing")]) == 1
    bad_suite = tmp_path / "suite.json"
    bad_suite.write_text(
        json.dumps({"name": "s", "expectations": [{"type": "expect_nothing", "kwargs": {}}]})
    )
    out = _clean_output(tmp_path / "clean", GOOD, GOOD_DUPS)
    assert check.main(["--input", str(out), "--suite", str(bad_suite)]) == 1
    assert not (out / "check.json").exists() and not _default_report(out).exists()
    broken = tmp_path / "broken"
    (broken / "data").mkdir(parents=True)
    (broken / "data" / "part-0.parquet").write_bytes(b"not parquet at all")
    (broken / "report.json").write_text("{}")
    assert check.main(["--input", str(broken)]) == 1


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_check_never_writes_into_a_published_output(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _clean_output(tmp_path / "clean", GOOD, GOOD_DUPS)
    before = _tree(out)
    junit = tmp_path / "ci" / "check.xml"
    assert check.main(["--input", str(out), "--junit", str(junit)]) == 0
    assert _tree(out) == before, "the published folder is unchanged"
    assert _default_report(out).is_file() and junit.is_file()
    capsys.readouterr()
    for flag, name in (("--report", "check.json"), ("--junit", "check.xml")):
        inside = out / name
        assert check.main(["--input", str(out), flag, str(inside)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"corpusclean check: error: {flag} {inside} is inside the published output {out}, "
            f"which only a new publish may change; write it elsewhere, e.g. {flag} "
            f"{tmp_path / ('clean.' + name)}"
        ]
    assert _tree(out) == before


def test_default_report_path_stays_out_of_published_outputs(tmp_path: Path) -> None:
    out = _clean_output(tmp_path / "clean", GOOD, GOOD_DUPS)
    assert check.default_report_path(str(out), True) == tmp_path / "clean.check.json"
    # Raw input inside a published output: beside the outermost published folder instead.
    assert check.default_report_path(str(out / "data"), False) == tmp_path / "clean.data.check.json"
    nested = out / "data" / "part-00000.parquet"
    assert check.default_report_path(str(nested), False) == (
        tmp_path / "clean.data.part-00000.parquet.check.json"
    )
    staged = tmp_path / "staged"
    (staged / "data").mkdir(parents=True)
    assert check.default_report_path(str(staged / "data"), False) == staged / "data.check.json"


def test_check_on_a_pack_output_points_to_pack_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "index.json").write_text("{}")
    (shards / "shard-000000.tar").write_bytes(b"")
    (shards / "_corpusclean.json").write_text('{"job": "pack"}')
    before = _tree(shards)
    assert check.main(["--input", str(shards)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"corpusclean check: error: {shards} is a pack output (index.json, shard-*.tar); check "
        f"validates documents: verify shards with `corpusclean pack --verify {shards}`"
    ]
    assert _tree(shards) == before
    assert not (tmp_path / "shards.check.json").exists()


def _junit(path: Path) -> tuple[Any, dict[str, Any]]:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    return suite, cases


def test_junit_has_one_testcase_per_check_with_failures_skips_and_warnings(
    spark: Any, tmp_path: Path
) -> None:
    # One critical failure (a duplicate doc_id), one warning (charset), lang_allowed skipped.
    docs = [*GOOD[:7], ("d0", "\ufffd" * 30 + _text(7), "fr", "u")]
    report = _report(9, 8, audit={"allowed_langs": []})
    out = _clean_output(tmp_path / "clean", docs, [], report)
    junit = tmp_path / "junit.xml"
    assert check.main(["--input", str(out), "--junit", str(junit)]) == 3
    result = json.loads(_default_report(out).read_text())
    suite, cases = _junit(junit)
    records = _by_name(result)
    assert list(cases) == [r["name"] for r in result["checks"]]
    statuses = [r["status"] for r in result["checks"]]
    assert suite.get("tests") == str(len(records))
    assert suite.get("failures") == str(statuses.count("fail")) == "1"
    assert suite.get("skipped") == str(statuses.count("skip"))
    assert suite.get("errors") == "0"
    failure = cases["doc_id_unique"].find("failure")
    assert failure is not None and failure.get("type") == "critical"
    observed = records["doc_id_unique"]["observed"]
    assert failure.get("message") == f"doc_id_unique (doc_id) fail, observed={observed}, e.g. d0"
    assert "examples: d0" in (failure.text or "")
    assert cases["lang_allowed"].find("skipped") is not None
    warned = cases["charset_sanity"]
    assert warned.find("failure") is None, "a warning passes without --strict"
    assert "WARNING: charset_sanity (text) warn" in (warned.findtext("system-out") or "")

    strict = tmp_path / "strict.xml"
    args = [
        "--input",
        str(out),
        "--strict",
        "--junit",
        str(strict),
        "--report",
        str(tmp_path / "s.json"),
    ]
    assert check.main(args) == 3
    suite, cases = _junit(strict)
    assert suite.get("failures") == "2"
    assert cases["charset_sanity"].find("failure").get("type") == "warning"
