"""Golden outputs of `corpusclean clean`: the same input and config give the same rows.

Pins what `clean` writes today to data/, duplicates/ and rejected/ for a fixed input under a few
configs, so a refactor of the job that changes any output row, row count or column fails here.
The input is built in the test: `corpusclean.jobs.samples.dedup.generate` (3,000 docs, fixed seed;
it plants doc_id, exact and near duplicates and junk), a nullable integer column `score`, and
hand-written rows that hit every row rule. Each config is one in-process run of `clean.main`.
All but one run with the audit off; `parquet_as_shipped` is the default config as users run it
(no `--set`, the audit on with its default engine), and pins report.json's audit verdict and each
check's outcome beside the tables (not its timings or observed values).

Each output table is reduced to its row count, its column types and a sha256 over its rows: every
row becomes a canonical JSON string (sorted keys; floats as repr, bytes as hex, timestamps as
isoformat), the strings are sorted (row and file order are not part of the output's contract) and
joined with newlines. rejected/'s `source_file` is compared by file name, since the input lies in a
temporary folder.

Regenerate the constants (only when an output change is intended, and say why in the commit):

    CORPUSCLEAN_GOLDEN_REGEN=1 .venv/bin/pytest tests/jobs/test_clean_golden.py -p no:cacheprovider

prints a new `GOLDEN` dict to paste over the one below instead of asserting. Extra `--set`
overrides for every run, e.g. to check that the digests do not depend on partitioning:

    CORPUSCLEAN_GOLDEN_SET="spark.sql.shuffle.partitions=7" \
        .venv/bin/pytest tests/jobs/test_clean_golden.py
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import os
import pprint
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs.samples.dedup import generate

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

REGEN = os.environ.get("CORPUSCLEAN_GOLDEN_REGEN") == "1"
EXTRA_SET = os.environ.get("CORPUSCLEAN_GOLDEN_SET", "").split()
SEED = 20261204
DOCS = 3_000
# The sample's longest text is 18,667 characters: this bound leaves every generated row alone
# and rejects only the hand-written long row.
MAX_CHARS = 20_000
TABLES = ("data", "duplicates", "rejected")
LINE_COLUMNS = ["source_file", "source_line", "raw_line"]

# Every run but AUDITED: the audit only gates publishing (it writes no row), and costs a Spark
# pass.
COMMON = ["--set", "audit.enabled=false", "--set", f"rules.max_chars={MAX_CHARS}"]
# The run as users start it: no `--set` at all, so the default path (audit on, rules.max_chars
# as shipped, which keeps the hand-written long row) is pinned too.
AUDITED = "parquet_as_shipped"
CONFIGS: dict[str, tuple[str, list[str]]] = {
    # Defaults, near dedup on.
    "parquet_defaults": ("parquet", []),
    # Bad lines rejected, newest doc_id survives, near survivor by a numeric column with nulls,
    # one numeric column imputed and one required.
    "jsonl_reject_newest": (
        "jsonl",
        [
            "--set",
            "input.bad_lines=reject",
            "--set",
            "doc_id_dedup.keep=newest",
            "--set",
            "near_dedup.keep=quality",
            "--set",
            "missing.numeric={quality: median, score: drop}",
        ],
    ),
    # Exact dedup off (near dedup sees the case/whitespace variants), character shingles.
    "parquet_no_exact_char": (
        "parquet",
        ["--set", "exact_dedup.enabled=false", "--set", "near_dedup.tokenizer=char"],
    ),
    AUDITED: ("parquet", []),
}

# Computed with CORPUSCLEAN_GOLDEN_REGEN=1 at commit d432590, before the step-protocol refactor
# of jobs/clean.py (the same at 3, 4 and 7 shuffle partitions).
GOLDEN: dict[str, dict[str, dict[str, Any]]] = {
    "parquet_defaults": {
        "data": {
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 2576,
            "sha256": "22d6a74afe9bb728152293295e2812f550cffab29b5b0333651b9daba2a09005",
        },
        "duplicates": {
            "by_stage": {
                "doc_id/False": 91,
                "doc_id/True": 91,
                "exact/False": 181,
                "exact/True": 177,
                "near/False": 96,
                "near/True": 96,
            },
            "columns": {
                "cluster_id": "string",
                "doc_id": "string",
                "kept": "bool",
                "stage": "string",
            },
            "rows": 732,
            "sha256": "cb907726d0eb62759236f2d440e416a401847e487babf7d997069f212b1dc81f",
        },
        "rejected": {
            "by_reason": {
                "rules/blank_id": 15,
                "rules/blank_text": 13,
                "rules/null_id": 10,
                "rules/null_text": 12,
                "rules/too_long": 1,
                "rules/too_short": 16,
            },
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "reject_reason": "string",
                "reject_stage": "string",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 67,
            "sha256": "7197f9c8918a31460eca3a1c7d79ca9fce1b5bf9ff9849536da73f0f4244d3be",
        },
    },
    "jsonl_reject_newest": {
        "data": {
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "int64",
                "url": "string",
            },
            "rows": 2518,
            "sha256": "c00b11da3cb9c7ef10b0caaf41c0158a46053599b4012098d6d903b0fb7830a5",
        },
        "duplicates": {
            "by_stage": {
                "doc_id/False": 88,
                "doc_id/True": 88,
                "exact/False": 167,
                "exact/True": 163,
                "near/False": 90,
                "near/True": 90,
            },
            "columns": {
                "cluster_id": "string",
                "doc_id": "string",
                "kept": "bool",
                "stage": "string",
            },
            "rows": 686,
            "sha256": "29f3bcd3d2b325c5df84c3e9a0ad21c0a482976d1f1fe3981266f4372cc6cfef",
        },
        "rejected": {
            "by_reason": {
                "input/invalid_utf8": 1,
                "input/malformed_json": 1,
                "input/multiple_objects": 1,
                "input/not_an_object": 2,
                "rules/blank_id": 15,
                "rules/blank_text": 13,
                "rules/null_id": 10,
                "rules/null_score": 81,
                "rules/null_text": 12,
                "rules/too_long": 1,
                "rules/too_short": 16,
            },
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "raw_line": "string",
                "reject_reason": "string",
                "reject_stage": "string",
                "score": "int64",
                "source": "string",
                "source_file": "string",
                "source_line": "int64",
                "text": "string",
                "timestamp": "int64",
                "url": "string",
            },
            "rows": 153,
            "sha256": "21de152be84b0f2ae0cf0fa587b46a511f8e52c9d6751bcbf58dfa6dcd9522d3",
        },
    },
    "parquet_no_exact_char": {
        "data": {
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 2500,
            "sha256": "f395aa407b415c0e5dbba30e99241b54c78fafdb560609286449e39a8dde4791",
        },
        "duplicates": {
            "by_stage": {
                "doc_id/False": 91,
                "doc_id/True": 91,
                "near/False": 353,
                "near/True": 336,
            },
            "columns": {
                "cluster_id": "string",
                "doc_id": "string",
                "kept": "bool",
                "stage": "string",
            },
            "rows": 871,
            "sha256": "6d9cf739fedb1bad5cbeb48062e7132d38af9f493ae37c2f9ee28be3ab3ece17",
        },
        "rejected": {
            "by_reason": {
                "rules/blank_id": 15,
                "rules/blank_text": 13,
                "rules/null_id": 10,
                "rules/null_text": 12,
                "rules/too_long": 1,
                "rules/too_short": 16,
            },
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "reject_reason": "string",
                "reject_stage": "string",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 67,
            "sha256": "7197f9c8918a31460eca3a1c7d79ca9fce1b5bf9ff9849536da73f0f4244d3be",
        },
    },
    # Computed with CORPUSCLEAN_GOLDEN_REGEN=1 at commit 9fe0df6. missing_rate warns: the
    # sample's license column is 92% null.
    "parquet_as_shipped": {
        "audit": {
            "checks": {
                "charset_sanity": "pass",
                "doc_id_is_string": "pass",
                "doc_id_not_null": "pass",
                "doc_id_unique": "pass",
                "lang_allowed": "skip",
                "missing_rate": "warn",
                "no_exact_duplicates": "pass",
                "no_survivor_marked_removed": "pass",
                "required_columns": "pass",
                "retention": "pass",
                "row_count_matches_report": "pass",
                "text_is_string": "pass",
                "text_length": "pass",
                "text_not_null": "pass",
            },
            "highest_failed_severity": "warning",
            "passed": True,
            "ran": True,
        },
        "data": {
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 2577,
            "sha256": "059a6543b51c5f5d94258fb41b923f1bf2adaf7f13890f8d09873566c6571c15",
        },
        "duplicates": {
            "by_stage": {
                "doc_id/False": 91,
                "doc_id/True": 91,
                "exact/False": 181,
                "exact/True": 177,
                "near/False": 96,
                "near/True": 96,
            },
            "columns": {
                "cluster_id": "string",
                "doc_id": "string",
                "kept": "bool",
                "stage": "string",
            },
            "rows": 732,
            "sha256": "cb907726d0eb62759236f2d440e416a401847e487babf7d997069f212b1dc81f",
        },
        "rejected": {
            "by_reason": {
                "rules/blank_id": 15,
                "rules/blank_text": 13,
                "rules/null_id": 10,
                "rules/null_text": 12,
                "rules/too_short": 16,
            },
            "columns": {
                "doc_id": "string",
                "lang": "string",
                "license": "string",
                "quality": "double",
                "reject_reason": "string",
                "reject_stage": "string",
                "score": "int64",
                "source": "string",
                "text": "string",
                "timestamp": "timestamp[us, tz=UTC]",
                "url": "string",
            },
            "rows": 66,
            "sha256": "babb7a54ab48f24462579b0ed84963ca57bfd131d791a765e9f026463caa6aff",
        },
    },
}


def _words(tag: str, n: int) -> str:
    """A text no generated document resembles (its tokens are not in the sample's vocabulary)."""
    return " ".join(f"{tag}{i}zq" for i in range(n))


def _ts(day: int) -> dt.datetime:
    return dt.datetime(2020, 1, day, 12, 0, tzinfo=dt.UTC)


# Hand-written rows: one per row rule, a null in each numeric column, and a doc_id pair where
# the longest row is the older one (so `longest` and `newest` keep different rows).
HAND_ROWS: list[dict[str, Any]] = [
    {"doc_id": None, "text": _words("nullid", 40)},
    {"doc_id": " \t ", "text": _words("blankid", 40)},
    {"doc_id": "h-null-text", "text": None},
    {"doc_id": "h-blank-text", "text": "   \n\t  "},
    {"doc_id": "h-invisible-text", "text": "\u200b\u2060\ufeff\u00ad \u3164"},
    {"doc_id": "h-too-short", "text": "far too short"},
    {"doc_id": "h-too-long", "text": _words("long", 3_000)[: MAX_CHARS + 4_000]},
    {"doc_id": "h-null-score", "text": _words("nullscore", 40), "score": None},
    {"doc_id": "h-null-quality", "text": _words("nullquality", 40), "quality": None},
    {"doc_id": "h-dup", "text": _words("dup", 60), "timestamp": _ts(1)},
    {"doc_id": "h-dup", "text": _words("dup", 45), "timestamp": _ts(20)},
]

# JSON Lines that are not one object each (input.bad_lines=reject sends them to rejected/).
BAD_LINES: list[bytes] = [
    b'{"doc_id": "h-truncated", "text": "cut of',
    b"[1, 2, 3]",
    b'"just a string"',
    b'{"doc_id": "h-two-a", "text": "one"} {"doc_id": "h-two-b"}',
    b'{"doc_id": "h-bad-utf8", "text": "caf\xe9 au lait"}',
]


def _input_table(folder: Path) -> pa.Table:
    summary = generate(folder / "sample", DOCS, seed=SEED)
    assert summary["files"] == 1
    table = pq.read_table(folder / "sample" / "part-00000.parquet")
    n = table.num_rows
    # A nullable integer column: null on every 37th row, else a spread of values.
    score = pa.array([None if i % 37 == 0 else (i * 7_919) % 1_000 for i in range(n)], pa.int64())
    table = table.append_column("score", score)
    defaults = {
        "url": None,
        "source": "hand",
        "lang": "en",
        "timestamp": _ts(10),
        "quality": 0.5,
        "license": None,
        "score": 7,
    }
    hand = [{**defaults, **row} for row in HAND_ROWS]
    return pa.concat_tables([table, pa.Table.from_pylist(hand, schema=table.schema)])


def _write_jsonl(table: pa.Table, path: Path) -> None:
    """One object per row (timestamps as epoch seconds: JSON has no time type, and a number is a
    valid `newest` key), the bad lines spread through the file, and one blank line."""
    lines: list[bytes] = []
    for row in table.to_pylist():
        if row["timestamp"] is not None:
            row["timestamp"] = int(row["timestamp"].timestamp())
        lines.append(json.dumps(row, ensure_ascii=False).encode())
    for i, bad in enumerate(BAD_LINES):
        lines.insert(100 + i * 500, bad)
    lines.insert(50, b"")
    path.write_bytes(b"\n".join(lines) + b"\n")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("golden")
    table = _input_table(root)
    (root / "parquet").mkdir()
    pq.write_table(table, root / "parquet" / "part-00000.parquet", row_group_size=1_000)
    (root / "jsonl").mkdir()
    _write_jsonl(table, root / "jsonl" / "part-00000.jsonl")
    return {"parquet": root / "parquet", "jsonl": root / "jsonl"}


@pytest.fixture
def restore_spark_conf(spark):
    """`--set spark.*` changes the shared session; put back what the other tests expect."""
    keys = [item.split("=", 1)[0] for item in EXTRA_SET if item.startswith("spark.")]
    before = {k: spark.conf.get(k, None) for k in keys}
    yield
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _canon(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    return value


def _digest(table: pa.Table) -> dict[str, Any]:
    rows = table.to_pylist()
    for row in rows:
        if row.get("source_file") is not None:
            row["source_file"] = Path(row["source_file"]).name
    lines = sorted(
        json.dumps(_canon(r), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        for r in rows
    )
    return {
        "rows": len(lines),
        "columns": {f.name: str(f.type) for f in table.schema},
        "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
    }


def _counts(table: pa.Table, *keys: str) -> dict[str, int]:
    grouped = table.group_by(list(keys)).aggregate([([], "count_all")]).to_pylist()
    return {
        "/".join(str(g[k]) for k in keys): g["count_all"]
        for g in sorted(grouped, key=lambda g: [str(g[k]) for k in keys])
    }


def _summary(out: Path) -> tuple[dict[str, dict[str, Any]], dict[str, pa.Table]]:
    tables = {t: ds.dataset(out / t, format="parquet").to_table() for t in TABLES}
    summary = {t: _digest(tables[t]) for t in TABLES}
    # Which reasons and stages the rows fall under: what a reviewer reads first on a mismatch.
    summary["rejected"]["by_reason"] = _counts(tables["rejected"], "reject_stage", "reject_reason")
    summary["duplicates"]["by_stage"] = _counts(tables["duplicates"], "stage", "kept")
    return summary, tables


def _audit(out: Path) -> dict[str, Any]:
    """report.json's audit: whether it ran and passed, and each check's status by name."""
    audit = json.loads((out / "report.json").read_text("utf-8"))["audit"]
    return {
        "ran": audit.get("ran"),
        "passed": audit.get("passed"),
        "highest_failed_severity": audit.get("highest_failed_severity"),
        "checks": {c["name"]: c["status"] for c in audit.get("checks", [])},
    }


def _mismatch(name: str, want: dict[str, Any], got: dict[str, Any]) -> str:
    lines = [f"clean's output for config {name!r} changed (expected -> actual):"]
    for t in TABLES:
        w, g = want.get(t, {}), got[t]
        same = "same rows" if w.get("sha256") == g["sha256"] else "ROWS DIFFER"
        lines.append(f"  {t}/: {w.get('rows')} -> {g['rows']} rows, {same}")
        if w.get("columns") != g["columns"]:
            lines.append(f"    columns: {w.get('columns')} -> {g['columns']}")
        for key in ("by_reason", "by_stage"):
            if key in g and w.get(key) != g[key]:
                lines.append(f"    {key}: {w.get(key)} -> {g[key]}")
    if "audit" in got:
        w, g = want.get("audit") or {}, got["audit"]
        for key in ("ran", "passed", "highest_failed_severity"):
            if w.get(key) != g[key]:
                lines.append(f"  audit {key}: {w.get(key)} -> {g[key]}")
        w_checks, g_checks = w.get("checks") or {}, g["checks"]
        for check in sorted(w_checks.keys() | g_checks.keys()):
            if w_checks.get(check) != g_checks.get(check):
                lines.append(
                    f"  audit check {check}: {w_checks.get(check)} -> {g_checks.get(check)}"
                )
    lines.append("If the change is intended, regenerate with CORPUSCLEAN_GOLDEN_REGEN=1.")
    return "\n".join(lines)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_clean_outputs_match_golden(
    spark, inputs: dict[str, Path], tmp_path: Path, name: str, restore_spark_conf, capsys
) -> None:
    fmt, sets = CONFIGS[name]
    extra = [a for item in EXTRA_SET for a in ("--set", item)]
    out = tmp_path / "clean"
    common = [] if name == AUDITED else COMMON
    argv = ["--input", str(inputs[fmt]), "--output", str(out), *common, *sets, *extra]
    assert clean.main(argv) == 0
    got, tables = _summary(out)
    if name == AUDITED:
        got["audit"] = _audit(out)

    # The column contract, independent of the constants: data/ holds the input's columns,
    # rejected/ adds why (and, for JSON Lines, where the line came from).
    input_schema = pq.read_schema(inputs["parquet"] / "part-00000.parquet")
    input_cols = input_schema.names
    data_cols = tables["data"].column_names
    if fmt == "parquet":
        assert data_cols == input_cols
        assert tables["data"].schema.equals(input_schema, check_metadata=False)
        assert tables["rejected"].column_names == [*input_cols, "reject_reason", "reject_stage"]
    else:
        assert sorted(data_cols) == sorted(input_cols)
        assert set(tables["rejected"].column_names) == {
            *input_cols,
            "reject_reason",
            "reject_stage",
            *LINE_COLUMNS,
        }
    assert set(tables["duplicates"].column_names) == {"doc_id", "cluster_id", "stage", "kept"}

    if REGEN:
        with capsys.disabled():
            print(f"\n{name!r}: {pprint.pformat(got, width=96)},")
        return
    assert name in GOLDEN, f"no golden digests for {name!r}; run with CORPUSCLEAN_GOLDEN_REGEN=1"
    assert got == GOLDEN[name], _mismatch(name, GOLDEN[name], got)
