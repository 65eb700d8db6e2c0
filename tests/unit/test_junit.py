"""`check --junit`: the XML form of a check result, built from a result dict (no Spark)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from corpusclean.jobs.audit.junit import write_junit


def _record(name: str, status: str, severity: str = "critical", **extra: object) -> dict:
    return {"name": name, "column": "doc_id", "severity": severity, "status": status, **extra}


RESULT = {
    "input": "/data/clean",
    "suite": "clean_docs",
    "source": "clean_docs.json",
    "verdict": "error",
    "seconds": 1.5,
    "checks": [
        _record("a_pass", "pass", observed=0),
        _record("b_fail", "fail", observed=3, expected="= 0", examples=["x1", "x2"]),
        _record("c_warn", "warn", "warning", observed=0.2, detail="2 of 10 rows unexpected"),
        _record("d_info", "info", "info", observed=5),
        _record("e_skip", "skip", detail="no duplicates table given"),
        _record("f_error", "fail", error="AnalysisException: no such column"),
    ],
}


def _parse(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    return suite, {c.get("name", ""): c for c in suite.findall("testcase")}


def test_counts_and_elements_match_the_result(tmp_path: Path) -> None:
    path = tmp_path / "ci" / "check.xml"
    write_junit(path, RESULT, strict=False)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite, cases = _parse(path)
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures")) == ("6", "1")
        assert (element.get("errors"), element.get("skipped")) == ("1", "1")
        assert element.get("time") == "1.500"
    assert list(cases) == [r["name"] for r in RESULT["checks"]]
    assert [len(c) for c in cases.values()] == [0, 1, 1, 1, 1, 1]
    failure = cases["b_fail"].find("failure")
    assert failure is not None and failure.get("type") == "critical"
    assert failure.get("message") == "b_fail (doc_id) fail, observed=3, expected = 0, e.g. x1, x2"
    assert "examples: x1, x2" in (failure.text or "")
    assert cases["c_warn"].findtext("system-out", "").startswith("WARNING: c_warn (doc_id) warn")
    assert cases["d_info"].findtext("system-out", "").startswith("INFO: d_info")
    assert cases["e_skip"].find("skipped").get("message") == "no duplicates table given"
    assert cases["f_error"].find("error").get("message") == "AnalysisException: no such column"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {
        "input": "/data/clean",
        "source": "clean_docs.json",
        "verdict": "error",
        "strict": "false",
    }
    assert not list(tmp_path.joinpath("ci").glob(".*.tmp"))


def test_strict_turns_warnings_into_failures(tmp_path: Path) -> None:
    path = tmp_path / "check.xml"
    write_junit(path, RESULT, strict=True)
    suite, cases = _parse(path)
    assert suite.get("failures") == "2"
    assert cases["c_warn"].find("failure").get("type") == "warning"
    assert cases["d_info"].find("failure") is None, "info never fails, as in the exit code"
