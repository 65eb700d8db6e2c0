"""report.html speaks `check`'s status words and prints counts as people read them."""

from __future__ import annotations

import re

from corpusclean.jobs.report import _number, render_html, status_word


def _report() -> dict:
    return {
        "run_id": "r1",
        "input_rows": 20_000,
        "output_rows": 17_731,
        "retention": 0.88655,
        "gate": {"passed": True, "min_retention": 0.7},
        "stages": [
            {"name": "read", "rows_out": 20_000},
            {"name": "exact", "rows_out": 18_480},
            {"name": "near", "rows_out": 17_731},
        ],
        "removed": {"exact": 1_520, "near": 749},
        "audit": {
            "passed": True,
            "checks": [
                {
                    "name": "doc_id_unique",
                    "column": "doc_id",
                    "severity": "critical",
                    "observed": 0,
                    "success": True,
                    "status": "pass",
                },
                {
                    "name": "lang_allowed",
                    "column": "lang",
                    "severity": "warning",
                    "observed": None,
                    "success": None,
                    "status": "skip",
                },
                {
                    "name": "missing_rate",
                    "column": "license",
                    "severity": "warning",
                    "observed": 1,
                    "success": False,
                    "status": "warn",
                },
            ],
        },
    }


def _audit_rows(page: str) -> dict[str, str]:
    audit = page[page.index("<h2>Audit</h2>") :]
    rows = re.findall(r"<tr><td>([^<]*)</td>(?:<td>[^<]*</td>){3}<td>([^<]*)</td></tr>", audit)
    return dict(rows)


def test_a_skipped_check_and_a_warning_are_not_failures_under_a_published_headline() -> None:
    page = render_html(_report())
    assert "PUBLISHED" in page
    assert _audit_rows(page) == {
        "doc_id_unique": "PASS",
        "lang_allowed": "SKIP",
        "missing_rate": "WARN",
    }


def test_the_same_words_as_check_prints() -> None:
    for status in ("pass", "warn", "info", "fail", "skip"):
        assert status_word({"status": status, "success": status == "pass"}) == status.upper()
    # A report written before records had a status.
    assert status_word({"success": True}) == "PASS"
    assert status_word({"success": False}) == "FAIL"


def test_funnel_labels_have_thousands_separators_not_exponents() -> None:
    page = render_html(_report())
    assert not re.search(r"\de[+-]\d", page), "an exponent reached the page"
    funnel = page[page.index("<h2>Funnel</h2>") : page.index("</svg>", page.index("<h2>Funnel"))]
    for label in ("20,000", "18,480", "17,731"):
        assert f">{label}<" in funnel, label


def test_numbers() -> None:
    assert _number(20_000) == "20,000"
    assert _number(20_000.0) == "20,000"
    assert _number(17_731.0) == "17,731"
    assert _number(1_234.56) == "1,234.6"
    assert _number(0.85505) == "0.8551" or _number(0.85505) == "0.855"
    assert _number(0.25) == "0.25"
    assert _number(float("nan")) == "nan"
