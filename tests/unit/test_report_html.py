"""report.html speaks `check`'s status words and prints counts as people read them."""

from __future__ import annotations

import re

from corpusclean.jobs.reports.page import _number, render_html, status_word


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
    audit = page[page.index("Audit</h2>") :]
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
    funnel = page[page.index("Funnel</h2>") : page.index("</svg>", page.index("Funnel</h2>"))]
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


def _views() -> dict:
    report = _report()
    edges = [0, 1, 2, 4, 8]
    report["lengths"] = {"edges": edges, "input": [0, 1, 5, 9, 2], "output": [0, 0, 4, 8, 2]}
    report["breakdown"] = {
        "lang": {
            "en": {"in": 15_000, "out": 13_000, "removed": {"exact": 1_500, "near": 500}},
            "(null)": {"in": 5_000, "out": 4_731, "removed": {"exact": 20, "near": 249}},
        },
        "source": {"too_many": 201},
    }
    report["clusters"] = {
        "exact": {
            "clusters": 3,
            "sizes": {"2": 2, "40": 1},
            "largest": [{"cluster_id": "k1", "size": 40, "text": "boilerplate"}],
        }
    }
    report["examples"] = {
        "near": [
            {
                "kept": "k1",
                "removed": "r1",
                "jaccard": 0.91,
                "band": "≥ 0.90",
                "kept_text": "the quick brown fox jumps",
                "removed_text": "the quick red fox jumps",
            },
            {
                "kept": "k2",
                "removed": "r2",
                "jaccard": 0.88,
                "band": "≥ 0.85",
                "kept_text": "我们今天去公园散步",
                "removed_text": "我们明天去公园散步",
            },
        ],
        "exact": [{"kept": "k1", "removed": ["r7", "r8"], "text": "<b>same</b>"}],
        "rejected": {
            "too_short": [{"doc_id": "d9", "text": "hi", "found": True}],
            "null_text": [{"doc_id": "d3", "text": None, "found": True}],
        },
    }
    return report


def test_every_view_is_on_the_page_with_its_chart() -> None:
    page = render_html(_views())
    for section in ("facts", "funnel", "timings", "lengths", "by-lang", "by-source", "clusters"):
        assert f"<h2 id='{section}'>" in page, section
    assert "source has too many values to break down" in page
    assert "Cluster sizes" in page and "Largest clusters" in page and "Exact duplicates" in page
    assert "&lt;b&gt;same&lt;/b&gt;" in page, "texts are escaped"
    assert "(text null)" in page
    assert page.count("class='pair'") == 2
    # Only the differing words are marked; CJK is compared character by character.
    assert "<mark>brown</mark>" in page and "<mark>red</mark>" in page
    assert "<mark>quick</mark>" not in page
    assert "<mark>今</mark>" in page and "<mark>明</mark>" in page
    assert "<mark>公</mark>" not in page
    assert "<script" not in page


def test_the_same_report_gives_the_same_page() -> None:
    assert render_html(_views()) == render_html(_views())


def test_an_old_report_renders_with_a_note_where_a_view_needs_the_run() -> None:
    page = render_html(_report())
    assert "holds no length distribution" in page
    assert "No duplicate clusters." in page
