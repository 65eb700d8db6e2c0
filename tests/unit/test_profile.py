"""The report's lengths and breakdown from the write's grouped counts (pipelines/profile.py)."""

from __future__ import annotations

from corpusclean.pipelines import profile
from corpusclean.pipelines.profile import LENGTH_EDGES, breakdown, length_histograms


def _row(set_: str, value: object, stage: str | None, rows: int) -> dict:
    return {"set": set_, "value": value, "stage": stage, "rows": rows}


def test_lengths_per_bucket_in_out_and_removed_by_stage() -> None:
    rows = [
        _row("b", "3", None, 10),
        _row("b", "3", "exact", 2),
        _row("b", "5", "near", 1),
        _row("b", None, "rules", 7),  # no text: in no bucket
        _row("lang", "en", None, 10),  # another set
    ]
    got = length_histograms(rows, "b")
    assert got["edges"] == list(LENGTH_EDGES)
    assert got["input"][3] == 12 and got["input"][5] == 1 and sum(got["input"]) == 13
    assert got["output"][3] == 10 and sum(got["output"]) == 10
    assert got["removed"] == {
        "exact": [2 if i == 3 else 0 for i in range(len(LENGTH_EDGES))],
        "near": [1 if i == 5 else 0 for i in range(len(LENGTH_EDGES))],
    }


def test_breakdown_counts_in_out_and_names_a_null_value() -> None:
    rows = [
        _row("lang", "en", None, 8),
        _row("lang", "en", "exact", 2),
        _row("lang", None, None, 1),
        _row("lang", None, "rules", 3),
        _row("_reason", "too_short", None, 3),
    ]
    assert breakdown(rows, ["lang"]) == {
        "lang": {
            "en": {"in": 10, "out": 8, "removed": {"exact": 2}},
            "(null)": {"in": 4, "out": 1, "removed": {"rules": 3}},
        }
    }


def test_a_column_with_too_many_values_is_left_out(monkeypatch) -> None:
    monkeypatch.setattr(profile, "BREAKDOWN_MAX_VALUES", 2)
    rows = [_row("source", f"s{i}", None, 1) for i in range(3)]
    assert breakdown(rows, ["source"]) == {"source": {"too_many": 3}}
