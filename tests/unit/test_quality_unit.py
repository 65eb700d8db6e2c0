"""Suite files, severity logic and `check` helpers, without Spark."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from corpusclean.errors import ConfigError, InputError
from corpusclean.jobs import check
from corpusclean.jobs.audit import quality

SHIPPED = ("clean_docs", "raw_docs")


def _suite(*expectations: dict, **extra: object) -> str:
    return json.dumps({"name": "t", "expectations": list(expectations), **extra})


NOT_NULL = {
    "type": "expect_column_values_to_not_be_null",
    "kwargs": {"column": "doc_id"},
    "meta": {"name": "id_not_null"},
}


def _rec(name: str, severity: str, success: bool | None, column: str = "doc_id") -> dict:
    return {
        "name": name,
        "column": column,
        "severity": severity,
        "observed": 0,
        "success": success,
        "status": quality._status(severity, success),
    }


# --- suite files --------------------------------------------------------------------------


@pytest.mark.gx
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_suites_are_hand_written_gx_json_that_loads_completely(name: str) -> None:
    raw = json.loads(resources.files("corpusclean.schemas").joinpath(f"{name}.json").read_text())
    suite = quality.load_suite(name, "gx")
    assert suite.name == name
    assert len(suite.checks) == len(raw["expectations"])
    assert "id" not in raw
    for exp in raw["expectations"]:
        assert "id" not in exp
        assert exp["severity"] in ("critical", "warning")
        assert exp["meta"]["name"]
    assert len({c.name for c in suite.checks}) == len(suite.checks)
    # The GX suite built from it holds every check (nothing silently dropped).
    assert len(quality._gx_suite(suite, suite.checks).expectations) == len(suite.checks)


@pytest.mark.gx
def test_clean_docs_has_the_default_checks_with_their_severities() -> None:
    suite = quality.load_suite("clean_docs")
    severity = {c.name: c.severity for c in suite.checks}
    critical = {
        "required_columns",
        "doc_id_not_null",
        "text_not_null",
        "doc_id_unique",
        "text_length",
        "no_exact_duplicates",
        "no_survivor_marked_removed",
        "retention",
    }
    assert critical <= {n for n, s in severity.items() if s == "critical"}
    for name in ("charset_sanity", "lang_allowed", "missing_rate"):
        assert severity[name] == "warning"
    by_name = {c.name: c for c in suite.checks}
    assert set(by_name["text_length"].parameters) == {"min_chars", "max_chars"}
    assert by_name["retention"].frame == "run"
    assert by_name["missing_rate"].frame == "missing"
    assert by_name["lang_allowed"].optional_column == "lang"
    assert by_name["no_exact_duplicates"].column == "text"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_suites_name_only_the_columns_the_audit_gives_them(name: str) -> None:
    """The suites cannot import the names: every column they read is one the audit's frames
    hold under that name (`docs_frame` renames the configured id and text to quality.ID and
    TEXT); none names a duplicates/ or rejected/ column, whose names live in schemas/."""
    raw = json.loads(resources.files("corpusclean.schemas").joinpath(f"{name}.json").read_text())
    frames = {
        "docs": {quality.ID, quality.TEXT, *quality.DERIVED},
        "run": set(quality.run_frame(1, 1).columns),
        "missing": set(quality.missing_frame({}).columns),
    }
    for exp in raw["expectations"]:
        meta, kwargs = exp["meta"], exp["kwargs"]
        named = set(kwargs.get("column_set", [])) | ({kwargs.get("column")} - {None})
        allowed = frames[meta.get("frame", "docs")] | {meta.get("optional_column")}
        assert named <= allowed, (meta["name"], named - allowed)
        if meta["name"] == "required_columns":
            assert set(kwargs["column_set"]) == {quality.ID, quality.TEXT}


ENGINES = [pytest.param("gx", marks=pytest.mark.gx), "spark"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_typo_in_an_expectation_type_is_an_error_naming_it(engine: str) -> None:
    typo = {"type": "expect_column_values_to_not_be_nul", "kwargs": {"column": "text"}}
    with pytest.raises(ConfigError, match=r"expectation 2 \(expect_column_values_to_not_be_nul\)"):
        quality.parse_suite(_suite(NOT_NULL, typo), "typo.json", engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_typo_in_an_argument_is_an_error(engine: str) -> None:
    typo = {
        "type": "expect_column_values_to_be_between",
        "kwargs": {"column": "x", "min_vlaue": 1},
    }
    with pytest.raises(ConfigError, match=r"expectation 1 .*min_vlaue"):
        quality.parse_suite(_suite(typo), "typo.json", engine)


@pytest.mark.gx
def test_a_suite_gx_would_shrink_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the per-expectation build, GX itself drops the bad entry and logs it; the count
    # check after loading must still refuse the suite.
    monkeypatch.setattr(quality, "_build_gx_expectation", lambda config: None)
    typo = {"type": "expect_colum_values_to_be_unique", "kwargs": {"column": "doc_id"}}
    with pytest.raises(ConfigError, match=r"GX loaded 1 of 2 expectations; dropped: expect_colum"):
        quality.parse_suite(_suite(NOT_NULL, typo), "typo.json", "gx")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        (_suite(), "non-empty list"),
        (_suite(NOT_NULL, expectation=[]), "unknown key"),
        (_suite({**NOT_NULL, "severity": "fatal"}), "severity 'fatal'"),
        (_suite({**NOT_NULL, "meta": {"frame": "rows"}}), "meta.frame 'rows'"),
        (_suite({**NOT_NULL, "meta": {"nmae": "x"}}), "unknown meta key"),
        (_suite(NOT_NULL, NOT_NULL), "used twice"),
        (_suite({**NOT_NULL, "kwarg": {}}), "unknown key"),
    ],
)
def test_malformed_suites_are_errors(text: str, message: str, engine: str) -> None:
    with pytest.raises(ConfigError, match=message):
        quality.parse_suite(text, "bad.json", engine)


def test_suite_source_by_name_path_or_error(tmp_path: Path) -> None:
    text, where = quality.suite_source("clean_docs")
    assert json.loads(text)["name"] == "clean_docs" and "shipped" in where
    path = tmp_path / "mine.json"
    path.write_text(_suite(NOT_NULL))
    assert quality.suite_source(str(path)) == (path.read_text(), str(path))
    with pytest.raises(ConfigError, match="neither a shipped suite"):
        quality.suite_source("cleen_docs")
    with pytest.raises(ConfigError, match="does not exist"):
        quality.suite_source(str(tmp_path / "none.json"))


@pytest.mark.parametrize("engine", ENGINES)
def test_parameter_names_and_exported_ids_are_handled(engine: str) -> None:
    exp = {
        "id": "7f1c",  # a GX export carries ids; they mean nothing here
        "type": "expect_column_values_to_be_between",
        "kwargs": {"column": "x", "min_value": {"$PARAMETER": "lo"}, "max_value": 3},
    }
    suite = quality.parse_suite(_suite(exp), "export.json", engine)
    assert suite.checks[0].parameters == ("lo",)
    assert suite.checks[0].name == "expect_column_values_to_be_between:x"
    assert "id" not in suite.checks[0].config


# --- severity logic --------------------------------------------------------------------------


def test_verdict_is_the_highest_failed_severity() -> None:
    warn_only = [_rec("a", "critical", True), _rec("b", "warning", False)]
    assert quality.summarise(warn_only) == (True, "warning")
    critical = [*warn_only, _rec("c", "critical", False)]
    assert quality.summarise(critical) == (False, "critical")
    clean = [_rec("a", "critical", True), _rec("s", "critical", None)]  # a skip is no failure
    assert quality.summarise(clean) == (True, None)
    assert quality.summarise([_rec("i", "info", False)]) == (True, "info")


def test_statuses_and_strict_failing() -> None:
    assert [quality._status(s, False) for s in quality.SEVERITIES] == ["fail", "warn", "info"]
    assert quality._status("critical", True) == "pass"
    assert quality._status("warning", None) == "skip"
    recs = [_rec("a", "critical", False), _rec("b", "warning", False), _rec("c", "info", False)]
    assert [r["name"] for r in check.failing(recs, strict=False)] == ["a"]
    assert [r["name"] for r in check.failing(recs, strict=True)] == ["a", "b"]


def test_expected_text_describes_bounds_and_sets() -> None:
    assert quality._expected({"min_value": 100, "max_value": 5}) == "in [100, 5]"
    assert quality._expected({"min_value": 0.7}) == ">= 0.7"
    assert quality._expected({"max_value": 0.01, "mostly": 0.99}) == "<= 0.01 for >= 99% of rows"
    assert quality._expected({"value_set": ["en", "de"]}) == "in [en, de]"
    assert quality._expected({"value": 12}) == "= 12"
    assert quality._expected({"column": "x"}) is None


def test_record_from_a_gx_result() -> None:
    check_ = quality.Check(
        name="no_exact_duplicates",
        type="expect_column_values_to_be_unique",
        severity="critical",
        frame="docs",
        column="text",
        enabled_by=None,
        optional_column=None,
        parameters=(),
        config={},
    )
    result = {
        "success": False,
        "result": {"element_count": 10, "unexpected_count": 2, "unexpected_percent": 20.0},
        "exception_info": {"raised_exception": False},
        "expectation_config": {"kwargs": {"column": "_norm_hash"}},
    }
    rec = quality._record(check_, {"doc_id": "id", "text": "body"}, result)
    assert rec["column"] == "body"  # the configured text column, not the derived one
    assert (rec["observed"], rec["success"], rec["status"]) == (2, False, "fail")
    assert rec["detail"].startswith("2 of 10 rows")
    raised = {"m1": {"raised_exception": True, "exception_message": "boom"}}
    crashed = {**result, "exception_info": raised}
    rec = quality._record(check_, {}, crashed)
    assert rec["error"] == "boom" and rec["success"] is False


# --- check helpers ---------------------------------------------------------------------------


def test_params_from_report_reads_config_counts_and_missing_rates() -> None:
    report = {
        "input_rows": 100,
        "output_rows": 80,
        "columns": {
            "url": {"null_rate": 0.25, "empty_rate": 0.1},
            "text": {"null_rate": 0.0, "empty_rate": 0.0, "missing_rate": 0.0},
        },
        "config": {
            "columns": {"id": "id", "text": "body"},
            "rules": {"min_chars": 50, "max_chars": 900},
            "gate": {"min_retention": 0.75},
            "missing": {"review_threshold": 0.3},
            "audit": {"allowed_langs": ["en"]},
            "exact_dedup": {"enabled": False},
        },
    }
    params = check.params_from_report(report)
    assert params["id_column"] == "id" and params["text_column"] == "body"
    assert (params["rows_in"], params["rows_out"], params["min_retention"]) == (100, 80, 0.75)
    assert params["missing_rates"] == {"url": pytest.approx(0.35), "text": 0.0}
    assert params["allowed_langs"] == ["en"] and params["exact_dedup"] is False
    assert "min_chars" not in check.params_from_report({"config": {}})


def test_parse_params_reads_yaml_values() -> None:
    got = check.parse_params(["min_retention=0.8", "allowed_langs=[en, de]", "exact_dedup=false"])
    assert got == {"min_retention": 0.8, "allowed_langs": ["en", "de"], "exact_dedup": False}
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        check.parse_params(["oops"])


def test_the_default_report_goes_beside_the_input_never_into_it(tmp_path: Path) -> None:
    raw_file = tmp_path / "corpus.parquet"
    raw_dir = tmp_path / "raw"
    # A clean output is a published folder: only a new publish may change it.
    assert check.default_report_path(str(tmp_path / "out"), True) == tmp_path / "out.check.json"
    assert check.default_report_path(str(raw_file), False) == tmp_path / "corpus.parquet.check.json"
    assert check.default_report_path(str(raw_dir), False) == tmp_path / "raw.check.json"
    assert check.default_report_path("s3a://b/x", False) == Path.cwd() / "check.json"
    raw_dir.mkdir()
    with pytest.raises(InputError, match="read as data"):
        check.check_report_path(raw_dir / "check.json", str(raw_dir), False)
    with pytest.raises(InputError, match="read as data"):
        check.check_report_path(tmp_path / "out" / "data" / "c.json", str(tmp_path / "out"), True)
    check.check_report_path(tmp_path / "out" / "check.json", str(tmp_path / "out"), True)


def test_lines_name_the_check_column_and_observed_value() -> None:
    rec = {
        **_rec("doc_id_unique", "critical", False),
        "observed": 2,
        "expected": None,
        "detail": "2 of 10 rows unexpected",
        "examples": ["a", "b"],
    }
    line = check.format_line(rec)
    for part in ("FAIL", "critical", "doc_id_unique", "doc_id", "observed=2", "e.g. a, b"):
        assert part in line
    result = {"suite": "clean_docs", "checks": [rec, _rec("x", "critical", True)], "seconds": 1.0}
    verdict = check.verdict_line(result, [rec])
    assert verdict.startswith("verdict: FAIL") and "doc_id_unique (doc_id)" in verdict
    assert "1 pass" in verdict and "1 fail" in verdict


def test_text_check_values_counts_exactly_the_bad_characters() -> None:
    import unicodedata

    import pyarrow as pa

    every_char = "".join(chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF)
    expected = sum(
        1
        for ch in every_char
        if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r")
    )
    out = quality.text_check_values(pa.array([every_char, "", None, "ok\t\n\r", "a\x00\ufffd"]))
    assert out.field("bad_chars").to_pylist() == [expected, 0, None, 0, 2]
    hashes = out.field("norm_hash").to_pylist()
    assert hashes[2] is None and len(hashes[0]) == 16 and hashes[3] != hashes[4]
