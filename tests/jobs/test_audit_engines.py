"""The audit's two engines: the spark engine on its own, and both on the same frames (gx tier),
which must give identical records."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs.audit import expectations as native
from corpusclean.jobs.audit import quality
from corpusclean.jobs.audit.quality import audit_clean_output, precomputed_frame, run_suite
from corpusclean.pipelines.content import bad_char_counts, content_hashes

pytestmark = [pytest.mark.spark]

DOCS = "doc_id string, text string, lang string, url string"
DUPS = "doc_id string, cluster_id string, stage string, kept boolean"


def _text(i: int) -> str:
    return f"Document number {i} talks about topic {i * 7} at some length."


GOOD = [(f"d{i}", _text(i), "en", f"https://x/{i}") for i in range(8)]
GOOD_DUPS = [
    ("d1", "d1", "doc_id", False),
    ("d2", "c2", "near", True),
    ("gone", "c2", "near", False),
]
# One or more rows for every check of clean_docs to fail on.
BAD = [
    *GOOD[:3],
    ("dup", _text(100), "en", "u"),
    ("dup", _text(101), "en", "u"),
    (None, _text(102), "en", "u"),
    ("nulltext", None, "en", "u"),
    ("short", "too short", "en", "u"),
    ("long", "y" * 1001, "en", "u"),
    ("exact_a", "Same   words, SAME text here ok", "en", "u"),
    ("exact_b", "same words, same text here ok ", "en", "u"),
    ("removed", _text(103), "en", "u"),
    ("garbled", "\ufffd" * 10 + _text(104), "en", "u"),
    ("foreign", _text(105), "xx", None),
]
BAD_DUPS = [("removed", "c9", "exact", False), ("exact_a", "c8", "exact", True)]
PARAMS: dict[str, Any] = {
    "min_chars": 20,
    "max_chars": 1000,
    "min_retention": 0.7,
    "allowed_langs": ["en"],
    "review_threshold": 0.3,
}


def _cases(spark: Any) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """name: (documents, suite parameters, duplicates) for clean_docs."""
    return {
        "clean": (
            spark.createDataFrame(GOOD, DOCS),
            {**PARAMS, "rows_in": 9, "rows_out": 8, "missing_rates": {"url": 0.0, "text": 0.0}},
            spark.createDataFrame(GOOD_DUPS, DUPS),
        ),
        # Wrong row count, low retention, a column over the missing threshold, a null rate.
        "failing": (
            spark.createDataFrame(BAD, DOCS),
            {
                **PARAMS,
                "rows_in": 100,
                "rows_out": len(BAD) + 1,
                "missing_rates": {"url": 0.9, "text": 0.0, "title": None},
            },
            spark.createDataFrame(BAD_DUPS, DUPS),
        ),
        # Nothing to check: map checks pass vacuously, retention 0 fails.
        "empty": (
            spark.createDataFrame([], DOCS),
            {**PARAMS, "rows_in": 0, "rows_out": 0, "missing_rates": {}},
            spark.createDataFrame([], DUPS),
        ),
        # No text column, a numeric id column; no duplicates table.
        "mistyped": (
            spark.createDataFrame([(1, "en"), (1, "de"), (None, None)], "id long, lang string"),
            {**PARAMS, "id_column": "id", "rows_in": 3, "rows_out": 3, "allowed_langs": []},
            None,
        ),
    }


def _by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in result["checks"]}


def test_spark_engine_fails_each_check_on_its_crafted_rows(spark: Any) -> None:
    df, params, dups = _cases(spark)["failing"]
    result = run_suite(df, "clean_docs", params, duplicates=dups, engine="spark")
    got = _by_name(result)
    expected = {
        "doc_id_not_null": (1, []),
        "text_not_null": (1, ["nulltext"]),
        "doc_id_unique": (2, ["dup"]),
        "text_length": (2, ["long", "short"]),
        "no_exact_duplicates": (2, ["exact_a", "exact_b"]),
        "no_survivor_marked_removed": (1, ["removed"]),
        "charset_sanity": (1, ["garbled"]),
        "lang_allowed": (1, ["foreign"]),
        "missing_rate": (1, ["url"]),
    }
    for name, (observed, examples) in expected.items():
        assert got[name]["success"] is False, got[name]
        assert (got[name]["observed"], got[name]["examples"]) == (observed, examples), name
    assert got["text_length"]["detail"] == f"2 of {len(BAD)} rows unexpected"
    assert got["row_count_matches_report"]["observed"] == len(BAD)
    assert got["retention"]["observed"] == pytest.approx((len(BAD) + 1) / 100)
    assert got["missing_rate"]["column"] == "url"
    for name in ("required_columns", "doc_id_is_string", "text_is_string"):
        assert got[name]["status"] == "pass"
    assert result["passed"] is False and not [r for r in result["checks"] if r.get("error")]


def test_examples_are_the_smallest_offending_ids_whatever_the_partitioning(spark: Any) -> None:
    rows = [(f"s{i:03d}", "short", "en", "u") for i in range(60)]
    params = {**PARAMS, "rows_in": 60, "rows_out": 60}
    seen = []
    for parts in (1, 7):
        df = spark.createDataFrame(list(reversed(rows)), DOCS).repartition(parts)
        rec = _by_name(run_suite(df, "clean_docs", params, engine="spark"))["text_length"]
        seen.append(rec["examples"])
        assert rec["observed"] == 60
    assert seen[0] == seen[1] == [f"s{i:03d}" for i in range(quality.EXAMPLES)]


def test_repeats_are_counted_only_when_count_distinct_falls_short(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    failures = native.docs_failures

    def spy(frame: Any, checks: list[Any], *args: Any) -> Any:
        calls.append([c.name for c in checks])
        return failures(frame, checks, *args)

    monkeypatch.setattr(native, "docs_failures", spy)
    df, params, dups = _cases(spark)["clean"]
    assert run_suite(df, "clean_docs", params, duplicates=dups, engine="spark")["passed"]
    assert calls == [], "a passing suite runs no second job"
    # Two rows share a doc_id: unique fails unless `mostly` allows it.
    rows = [*GOOD, ("d0", _text(50), "en", "u")]
    suite = quality.parse_suite(
        json.dumps(
            {
                "name": "u",
                "expectations": [
                    {
                        "type": "expect_column_values_to_be_unique",
                        "kwargs": {"column": "doc_id", "mostly": {"$PARAMETER": "m"}},
                    }
                ],
            }
        ),
        "u.json",
    )
    for mostly, success, examples in ((0.7, True, None), (0.9, False, ["d0"])):
        df = spark.createDataFrame(rows, DOCS)
        rec = run_suite(df, suite, {"m": mostly}, engine="spark")["checks"][0]
        assert (rec["observed"], rec["success"], rec.get("examples")) == (2, success, examples)
    assert calls[-2:] == [["expect_column_values_to_be_unique:doc_id"]] * 2


def test_a_passing_audit_runs_one_aggregation(spark: Any) -> None:
    df, params, dups = _cases(spark)["clean"]
    sc = spark.sparkContext
    sc.setJobGroup("audit-engine-jobs", "count the audit's jobs")
    try:
        assert run_suite(df, "clean_docs", params, duplicates=dups, engine="spark")["passed"]
        jobs = sc.statusTracker().getJobIdsForGroup("audit-engine-jobs")
    finally:
        sc.setJobGroup("", "")
    # One action; adaptive execution runs its shuffle stages (the duplicates' group-by, the
    # join, the distinct counts) as jobs of their own. GX ran 15 on the same frames.
    assert 1 <= len(jobs) <= 6, len(jobs)


def _staged(folder: Path, rows: list[tuple], dups: list[tuple]) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "duplicates").mkdir()
    names = ["doc_id", "text", "lang", "url"]
    docs = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows])
    pq.write_table(docs, folder / "data" / "part-0.parquet")
    dup_names = ["doc_id", "cluster_id", "stage", "kept"]
    table = pa.Table.from_pylist([dict(zip(dup_names, r, strict=True)) for r in dups])
    pq.write_table(table, folder / "duplicates" / "part-0.parquet")
    return folder


class _Refuse:
    """A meta-path finder that records, and refuses, every import of `package`."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.tried: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == self.package or name.startswith(self.package + "."):
            self.tried.append(name)
            raise ImportError(f"{name} imported during a default audit")


def test_a_default_audit_never_imports_great_expectations(spark: Any, tmp_path: Path) -> None:
    """GX's modules are hidden from this process (this session may have imported them) and
    any import of them is recorded while the default audit runs, on the shared session."""
    staged = _staged(tmp_path / "staged", GOOD, GOOD_DUPS)
    params = {**PARAMS, "rows_in": 9, "rows_out": 8, "missing_rates": {"url": 0.0}}
    hidden = {
        k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] == "great_expectations"
    }
    refuse = _Refuse("great_expectations")
    sys.meta_path.insert(0, refuse)
    try:
        result = audit_clean_output(spark, str(staged), params)
    finally:
        sys.meta_path.remove(refuse)
        sys.modules.update(hidden)
    assert result["passed"] and result["engine"] == "spark", result
    assert not refuse.tried, refuse.tried


def _precomputed(spark: Any, rows: list[tuple]) -> Any:
    """What clean's read pass computes for these documents: hash, bad characters, length."""
    texts = pa.array([r[1] for r in rows], pa.string())
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.string()),
            "h": content_hashes(texts),
            "bad": bad_char_counts(texts),
            "len": pc.utf8_length(texts).cast(pa.int64()),
        }
    )
    return precomputed_frame(spark.createDataFrame(table.to_pandas()), "id", "h", "bad", "len")


@pytest.mark.parametrize("engine", native.ENGINES)
def test_precomputed_values_give_the_records_the_text_gives(spark: Any, engine: str) -> None:
    df, params, dups = _cases(spark)["failing"]
    from_text = run_suite(df, "clean_docs", params, duplicates=dups, engine=engine)
    given = run_suite(
        df,
        "clean_docs",
        params,
        duplicates=dups,
        engine=engine,
        precomputed=_precomputed(spark, BAD),
    )
    assert given["checks"] == from_text["checks"]
    names = {r["name"]: r for r in given["checks"]}
    assert names["no_exact_duplicates"]["examples"] == ["exact_a", "exact_b"]
    assert names["charset_sanity"]["examples"] == ["garbled"]


def test_precomputed_values_are_what_the_checks_read(spark: Any, tmp_path: Path) -> None:
    """The text has an exact duplicate pair and a garbled row; the precomputed values (as a
    dedup that missed nothing would leave them) say otherwise, and the checks believe them:
    the text is not hashed again."""
    rows = [*GOOD, ("exact_a", "Same words here, long enough", "en", "u")]
    rows.append(("exact_b", "same   words here, LONG enough", "en", "u"))
    rows.append(("garbled", "\ufffd" * 10 + _text(104), "en", "u"))
    staged = _staged(tmp_path / "staged", rows, GOOD_DUPS)
    params = {**PARAMS, "rows_in": 12, "rows_out": 11, "missing_rates": {"url": 0.0}}
    clean_rows = [(r[0], f"unique text {r[0]}", *r[2:]) for r in rows]
    result = audit_clean_output(
        spark, str(staged), params, precomputed=_precomputed(spark, clean_rows)
    )
    assert result["precomputed"] == ["_bad_char_ratio", "_norm_hash"]
    names = _by_name(result)
    assert names["no_exact_duplicates"]["success"] and names["charset_sanity"]["success"]
    # From the text itself, both fail.
    names = _by_name(audit_clean_output(spark, str(staged), params))
    assert names["no_exact_duplicates"]["examples"] == ["exact_a", "exact_b"]
    assert names["charset_sanity"]["examples"] == ["garbled"]


# --- both engines --------------------------------------------------------------------------


@pytest.mark.gx
@pytest.mark.parametrize("case", ["clean", "failing", "empty", "mistyped"])
def test_both_engines_give_identical_records(spark: Any, case: str) -> None:
    df, params, dups = _cases(spark)[case]
    got = {
        engine: run_suite(df, "clean_docs", params, duplicates=dups, engine=engine)
        for engine in native.ENGINES
    }
    spark_records, gx_records = got["spark"]["checks"], got["gx"]["checks"]
    for mine, theirs in zip(spark_records, gx_records, strict=True):
        assert mine == theirs
    for key in ("suite", "source", "passed", "highest_failed_severity", "parameters"):
        assert got["spark"][key] == got["gx"][key], key
    if case == "failing":
        # The crafted frame fails every check clean_docs has (required columns and types
        # fail on the mistyped frame).
        passed = [r["name"] for r in spark_records if r["status"] == "pass"]
        assert passed == ["required_columns", "doc_id_is_string", "text_is_string"]


@pytest.mark.gx
def test_both_engines_audit_a_staged_output_alike(spark: Any, tmp_path: Path) -> None:
    staged = _staged(tmp_path / "staged", GOOD, [*GOOD_DUPS, ("d3", "c3", "near", False)])
    params = {**PARAMS, "rows_in": 10, "rows_out": 8, "missing_rates": {"url": 0.0}}
    spark_result = audit_clean_output(spark, str(staged), params)
    gx_result = audit_clean_output(spark, str(staged), params, "gx")
    assert (spark_result["engine"], gx_result["engine"]) == ("spark", "gx")
    assert spark_result["checks"] == gx_result["checks"]
    failed = [(r["name"], r.get("examples")) for r in spark_result["checks"] if not r["success"]]
    assert failed == [("no_survivor_marked_removed", ["d3"])]


@pytest.mark.gx
def test_raw_docs_alike_on_both_engines(spark: Any) -> None:
    rows = [*GOOD, ("x1", "tiny", "en", "u"), ("x2", "\x00" * 40, "en", "u")]
    df = spark.createDataFrame(rows, DOCS)
    params = {"min_chars": 20, "max_chars": 1000, "min_retention": 0.95, "allowed_langs": ["en"]}
    got = [run_suite(df, "raw_docs", params, engine=e)["checks"] for e in native.ENGINES]
    assert got[0] == got[1]
    assert {r["name"] for r in got[0] if r["status"] == "warn"} == {"text_length", "charset_sanity"}


@pytest.mark.gx
def test_check_prints_and_exits_alike_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from corpusclean.jobs import check

    rows = [*GOOD, ("d0", "\ufffd" * 30 + _text(9), "fr", "u")]
    out = _staged(tmp_path / "clean", rows, GOOD_DUPS)
    report = {
        "input_rows": 10,
        "output_rows": 9,
        "config": {
            "rules": {"min_chars": 20, "max_chars": 1000},
            "gate": {"min_retention": 0.7},
            "audit": {"allowed_langs": ["en"]},
        },
    }
    (out / "report.json").write_text(json.dumps(report))
    got = {}
    for engine in native.ENGINES:
        report_path = tmp_path / f"{engine}.json"
        code = check.main(["--input", str(out), "--engine", engine, "--report", str(report_path)])
        lines = capsys.readouterr().out.strip().splitlines()
        result = json.loads(report_path.read_text())
        got[engine] = (code, lines[:-1], lines[-1].rsplit(";", 1)[0], result["checks"])
        assert "engine" not in result, "check's JSON is unchanged"
    assert got["spark"] == got["gx"]
    assert got["spark"][0] == 3 and "doc_id_unique" in got["spark"][2]
