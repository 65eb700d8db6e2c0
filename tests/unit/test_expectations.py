"""The spark audit engine's suite checks and its plain-Python checks of the run/missing frames,
without Spark or GX."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest

from corpusclean.errors import ConfigError
from corpusclean.jobs.audit import expectations as native
from corpusclean.jobs.audit import quality


def _types_in_shipped_suites() -> set[str]:
    types: set[str] = set()
    for res in resources.files("corpusclean.schemas").iterdir():
        if res.name.endswith(".json") and res.name != "__init__.py":
            types |= {e["type"] for e in json.loads(res.read_text())["expectations"]}
    return types


def test_the_engine_runs_exactly_the_types_the_shipped_suites_use() -> None:
    assert set(native.SPECS) == _types_in_shipped_suites()
    for name in ("clean_docs", "raw_docs"):
        suite = quality.load_suite(name, "spark")
        assert all(
            native.problem(c.type, c.config["kwargs"], c.frame) is None for c in suite.checks
        )


@pytest.mark.parametrize(
    ("type_", "kwargs", "frame", "message"),
    [
        (
            "expect_column_values_to_match_regex",
            {"column": "t", "regex": "x"},
            "docs",
            "--engine gx",
        ),
        (
            "expect_column_values_to_not_be_null",
            {"column": "t", "row_condition": "a>1"},
            "docs",
            "row_condition: not supported",
        ),
        (
            "expect_column_values_to_be_unique",
            {"column": "t", "mostyl": 0.5},
            "docs",
            "unknown argument",
        ),
        ("expect_column_values_to_be_in_set", {"column": "t"}, "docs", "missing argument"),
        (
            "expect_column_values_to_be_between",
            {"column": "t", "min_value": "a"},
            "docs",
            "min_value must be a number",
        ),
        (
            "expect_column_values_to_be_between",
            {"column": "t", "mostly": 2},
            "docs",
            "mostly must be a number in",
        ),
        (
            "expect_column_values_to_be_of_type",
            {"column": "t", "type_": "StringType"},
            "run",
            "run frame",
        ),
        (
            "expect_table_row_count_to_equal",
            {"value": {"$PARAMETER": "rows * 2"}},
            "docs",
            "parameter expression",
        ),
    ],
)
def test_what_the_engine_cannot_run_is_named(
    type_: str, kwargs: dict, frame: str, message: str
) -> None:
    why = native.problem(type_, kwargs, frame)
    assert why is not None and message in why and "\n" not in why


def test_an_unsupported_type_in_a_suite_is_one_line_naming_it() -> None:
    text = json.dumps(
        {
            "name": "s",
            "expectations": [{"type": "expect_column_to_exist", "kwargs": {"column": "a"}}],
        }
    )
    with pytest.raises(
        ConfigError, match=r"expectation 1 \(expect_column_to_exist\): not supported"
    ):
        quality.parse_suite(text, "s.json", "spark")
    with pytest.raises(ConfigError, match="engine 'pandas' is not one of spark, gx"):
        quality.parse_suite(text, "s.json", "pandas")


def test_parameters_are_substituted_in_nested_values() -> None:
    kwargs = {
        "column": "x",
        "value_set": {"$PARAMETER": "langs"},
        "min_value": {"$PARAMETER": " lo"},
    }
    values = {"langs": ["en"], "lo": 3}
    got = native.substituted(kwargs, values)
    assert got == {"column": "x", "value_set": ["en"], "min_value": 3}
    got["value_set"].append("de")
    assert values["langs"] == ["en"], "the caller's parameters are not aliased"


def _check(name: str, type_: str, frame: str = "missing") -> quality.Check:
    return quality.Check(name, type_, "warning", frame, None, None, None, (), {})


def test_missing_rates_over_the_threshold_name_their_columns() -> None:
    frame = quality.missing_frame({"url": 0.9, "text": 0.0, "title": 0.5, "z": None})
    table = {str(c): frame[c].tolist() for c in frame.columns}
    check = _check("missing_rate", "expect_column_values_to_be_between")
    kwargs = {"missing_rate": {"column": "missing_rate", "max_value": 0.3}}
    results, examples = native.rows_results(table, [check], kwargs, "column", 20)
    result = results["missing_rate"]
    # The NaN rate is null: not counted, as in GX's pandas engine.
    assert result["success"] is False
    assert result["result"] == {"element_count": 4, "missing_count": 1, "unexpected_count": 2}
    assert examples == {"missing_rate": ["title", "url"]}
    passing = {"missing_rate": {"column": "missing_rate", "max_value": 0.95}}
    results, examples = native.rows_results(table, [check], passing, "column", 20)
    assert results["missing_rate"]["success"] is True and examples == {}


def test_retention_min_and_its_vacuous_and_null_cases() -> None:
    check = _check("retention", "expect_column_min_to_be_between", "run")
    kwargs = {"retention": {"column": "retention", "min_value": 0.7}}
    for rows_in, rows_out, ok in ((10, 8, True), (10, 6, False), (0, 0, False)):
        frame = quality.run_frame(rows_in, rows_out)
        table = {str(c): frame[c].tolist() for c in frame.columns}
        results, _ = native.rows_results(table, [check], kwargs, None, 20)
        assert results["retention"]["success"] is ok
    results, _ = native.rows_results({"retention": [None]}, [check], kwargs, None, 20)
    assert results["retention"]["result"] == {"observed_value": None}
    assert results["retention"]["success"] is False


def test_map_checks_follow_gx_null_and_mostly_rules() -> None:
    table = {"k": ["a", "b", "c", "d"], "v": [1, 1, None, 5]}
    checks = [
        _check("unique", "expect_column_values_to_be_unique"),
        _check("not_null", "expect_column_values_to_not_be_null"),
        _check("null", "expect_column_values_to_be_null"),
        _check("in_set", "expect_column_values_to_be_in_set"),
        _check("between", "expect_column_values_to_be_between"),
    ]
    kwargs = {
        "unique": {"column": "v"},
        "not_null": {"column": "v", "mostly": 0.75},
        "null": {"column": "v"},
        "in_set": {"column": "v", "value_set": [1], "mostly": 0.6},
        "between": {"column": "v", "min_value": 1, "max_value": 5, "strict_max": True},
    }
    results, examples = native.rows_results(table, checks, kwargs, "k", 20)
    counts = {n: (r["success"], r["result"]["unexpected_count"]) for n, r in results.items()}
    assert counts == {
        "unique": (False, 2),  # both rows holding the repeated value
        "not_null": (True, 1),  # 3 of 4 rows not null: mostly 0.75 holds
        "null": (False, 3),
        "in_set": (True, 1),  # of the 3 non-null values, 2 are in the set
        "between": (False, 1),  # 5 is not < 5
    }
    assert examples == {"unique": ["a", "b"], "null": ["a", "b", "d"], "between": ["d"]}


def test_an_argument_gx_refuses_at_run_time_is_an_error_result() -> None:
    check = _check("b", "expect_column_values_to_be_between")
    kwargs = {"b": {"column": "v", "min_value": 5, "max_value": 1}}
    results, _ = native.rows_results({"v": [1]}, [check], kwargs, None, 20)
    rec = quality._record(check, {}, results["b"])
    assert rec["error"] == "min_value cannot be greater than max_value"
    assert rec["detail"] == "could not run" and rec["success"] is False


def test_columns_match_set_reports_sorted_columns_and_what_is_missing() -> None:
    kw = {"column_set": ["doc_id", "text"], "exact_match": False}
    ok = native._columns_result(["text", "url", "doc_id"], kw)
    assert ok["success"] is True
    assert ok["result"]["observed_value"] == ["doc_id", "text", "url"]
    bad = native._columns_result(["id", "lang"], kw)
    assert bad["success"] is False
    assert bad["result"]["details"]["mismatched"]["missing"] == ["doc_id", "text"]
    assert (
        native._columns_result(["doc_id", "text", "x"], {"column_set": ["doc_id", "text"]})[
            "success"
        ]
        is False
    ), "exact_match defaults to true, as in GX"


def test_the_spark_engine_path_never_imports_great_expectations() -> None:
    # A fresh interpreter: this test session may have imported GX already.
    code = (
        "import sys\n"
        "from corpusclean.jobs import check, clean\n"
        "from corpusclean.jobs.audit import expectations, quality\n"
        "suite = quality.load_suite('clean_docs', 'spark')\n"
        "frame = quality.missing_frame({'url': 0.9})\n"
        "table = {str(c): frame[c].tolist() for c in frame.columns}\n"
        "checks = [c for c in suite.checks if c.frame == 'missing']\n"
        "kw = {c.name: expectations.substituted(c.config['kwargs'], {'review_threshold': 0.3})"
        " for c in checks}\n"
        "expectations.rows_results(table, checks, kw, 'column', 20)\n"
        "assert 'great_expectations' not in sys.modules, 'GX was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
