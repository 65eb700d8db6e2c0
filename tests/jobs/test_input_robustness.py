"""Inputs that used to be lost, altered or refused silently (issue 19, the input side).

In-process runs of the jobs on the shared session; the CLI's exit codes and stderr for bad
inputs are covered by tests/jobs/test_bad_inputs.py.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs import clean
from corpusclean.jobs import pack as pack_job
from corpusclean.pipelines.columns import CLEAN_RESERVED, PACK_RESERVED

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

FAST = [
    "--set",
    "near_dedup.enabled=false",
    "--set",
    "audit.enabled=false",
    "--set",
    "rules.min_chars=5",
]


def _text(i: int) -> str:
    return f"document number {i} " + "lorem ipsum dolor " * (3 + i % 7) + f"end {i * 7919}"


def _line(i: int) -> str:
    return json.dumps({"doc_id": f"d{i:04d}", "text": _text(i)})


def _rows(folder: Path) -> pa.Table:
    return ds.dataset(folder, format="parquet").to_table()


def _report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def _err(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("corpusclean")]
    assert len(lines) == 1, lines
    return lines[0]


def _jsonl_with(tmp_path: Path, bad: dict[int, bytes], n: int = 200) -> Path:
    path = tmp_path / "raw.jsonl"
    with path.open("wb") as f:
        for i in range(n):
            f.write(bad.get(i, _line(i).encode()) + b"\n")
    return path


def test_two_objects_on_one_line_are_not_silently_dropped(spark, tmp_path: Path, capsys) -> None:
    two = (_line(900) + _line(901)).encode()
    path = _jsonl_with(tmp_path, {17: two})
    out = tmp_path / "clean"
    assert clean.main(["--input", str(path), "--output", str(out), *FAST]) == 1
    msg = _err(capsys)
    assert f"{path}" in msg and "line 18" in msg and "multiple_objects" in msg, msg
    assert not out.exists()


def test_bad_lines_fail_naming_file_and_line(spark, tmp_path: Path, capsys) -> None:
    path = _jsonl_with(tmp_path, {5: b'{"doc_id": "x", "text": "\xff\xfe broken"}'})
    out = tmp_path / "clean"
    assert clean.main(["--input", str(path), "--output", str(out), *FAST]) == 1
    msg = _err(capsys)
    assert "line 6" in msg and "invalid_utf8" in msg and str(path) in msg, msg
    assert "o54" not in msg and "Py4J" not in msg


def test_bad_lines_reject_mode_counts_every_line(spark, tmp_path: Path) -> None:
    bad = {
        3: b'{"doc_id": "x3", "text": ',
        10: (_line(910) + _line(911)).encode(),
        20: b'{"doc_id": "x20", "text": "\xc3\x28 nope"}',
        30: b'[{"doc_id": "x30", "text": "in an array"}]',
        31: b'{"doc_id": "x31", "text": "trailing"} 5',
    }
    path = _jsonl_with(tmp_path, bad)
    with path.open("ab") as f:
        f.write(b"\n   \n")  # blank lines are not documents
    out = tmp_path / "clean"
    args = ["--input", str(path), "--output", str(out), *FAST, "--set", "input.bad_lines=reject"]
    assert clean.main(args) == 0
    report = _report(out)
    assert report["input_rows"] == 200
    assert report["rejected"]["malformed_json"] == 1
    assert report["rejected"]["multiple_objects"] == 2  # `{..}{..}` and `{..} 5`
    assert report["rejected"]["invalid_utf8"] == 1
    assert report["rejected"]["not_an_object"] == 1
    assert report["bad_lines"] == {"mode": "reject", "count": 5, "files": 1}
    assert report["output_rows"] + sum(report["rejected"].values()) == 200
    rejected = _rows(out / "rejected").to_pylist()
    by_line = {r["source_line"]: r for r in rejected if r["reject_stage"] == "input"}
    assert sorted(by_line) == [4, 11, 21, 31, 32]
    assert by_line[11]["reject_reason"] == "multiple_objects"
    assert by_line[11]["source_file"] == str(path)
    assert "x20" in by_line[21]["raw_line"]
    assert _rows(out / "data").num_rows == report["output_rows"]


def test_truncated_gzip_is_a_file_level_error(spark, tmp_path: Path, capsys) -> None:
    body = b"".join(_line(i).encode() + b"\n" for i in range(3000))
    packed = gzip.compress(body)
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "a.jsonl.gz").write_bytes(gzip.compress(body[:2000]))
    (folder / "b.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    out = tmp_path / "clean"
    for mode in ("fail", "reject"):
        args = ["--input", str(folder), "--output", str(out), *FAST]
        assert clean.main([*args, "--set", f"input.bad_lines={mode}"]) == 1
        msg = _err(capsys)
        assert str(folder / "b.jsonl.gz") in msg and "truncated" in msg, msg
    assert not out.exists()


def test_parquet_files_with_different_columns_keep_every_column(
    spark, tmp_path: Path, caplog
) -> None:
    folder = tmp_path / "raw"
    folder.mkdir()
    # The first file (in name order) lacks `url`: read with its schema, `url` would vanish.
    pq.write_table(
        pa.table({"doc_id": ["a", "b"], "text": [_text(1), _text(2)]}), folder / "p0.parquet"
    )
    pq.write_table(
        pa.table({"doc_id": ["c"], "text": [_text(3)], "url": ["https://x/c"]}),
        folder / "p1.parquet",
    )
    out = tmp_path / "clean"
    assert clean.main(["--input", str(folder), "--output", str(out), *FAST]) == 0
    data = _rows(out / "data")
    assert "url" in data.column_names
    assert {r["doc_id"]: r["url"] for r in data.to_pylist()}["c"] == "https://x/c"


def test_parquet_type_conflict_is_refused_naming_file_and_column(
    spark, tmp_path: Path, capsys
) -> None:
    folder = tmp_path / "raw"
    folder.mkdir()
    pq.write_table(pa.table({"doc_id": ["a"], "text": [_text(1)], "n": [1]}), folder / "p0.parquet")
    pq.write_table(
        pa.table({"doc_id": ["b"], "text": [_text(2)], "n": ["one"]}), folder / "p1.parquet"
    )
    assert clean.main(["--input", str(folder), "--output", str(tmp_path / "o"), *FAST]) == 1
    msg = _err(capsys)
    assert "p1.parquet" in msg and "'n'" in msg, msg


def _map_table() -> pa.Table:
    m = pa.map_(pa.string(), pa.int64())
    return pa.table(
        {
            "doc_id": ["a", "b", "c"],
            "text": [_text(1), _text(2), _text(3)],
            "tags": pa.array([[("x", 1)], [], None], m),
            "list_of_maps": pa.array([[[("k", 1)]], [], None], pa.list_(m)),
            "meta": pa.array(
                [{"m": [("a", 2)], "s": "x"}, {"m": None, "s": "y"}, None],
                pa.struct([("m", m), ("s", pa.string())]),
            ),
            "meta.source": ["web", "books", None],
        }
    )


def test_map_and_dotted_columns_pass_through_clean_and_pack(spark, tmp_path: Path) -> None:
    raw = tmp_path / "raw.parquet"
    table = _map_table()
    pq.write_table(table, raw)
    out = tmp_path / "clean"
    assert clean.main(["--input", str(raw), "--output", str(out), *FAST]) == 0
    data = _rows(out / "data").sort_by("doc_id")
    assert data.schema.equals(table.schema)
    assert data.to_pylist() == table.to_pylist()
    shards = tmp_path / "shards"
    assert pack_job.main(["--input", str(out), "--output", str(shards)]) == 0
    assert pack_job.main(["--verify", str(shards)]) == 0
    in_order = tmp_path / "shards-in-order"
    args = ["--input", str(out), "--output", str(in_order), "--set", "shard.shuffle=false"]
    assert pack_job.main(args) == 0


@pytest.mark.parametrize("name", sorted(CLEAN_RESERVED))
def test_clean_refuses_a_user_column_with_a_bookkeeping_name(
    spark, tmp_path: Path, capsys, name: str
) -> None:
    raw = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"doc_id": ["a"], "text": [_text(1)], name: ["mine"]}), raw)
    out = tmp_path / "clean"
    assert clean.main(["--input", str(raw), "--output", str(out), *FAST]) == 1
    msg = _err(capsys)
    assert repr(name) in msg and "rename" in msg, msg
    assert not out.exists()


def test_pack_refuses_a_column_named_like_spark_s_file_metadata(
    spark, tmp_path: Path, capsys
) -> None:
    # A column `_h` (pack's hash) comes back unchanged: see test_pack.py. Only `_metadata`,
    # Spark's hidden column that pack reads file paths and row numbers from, cannot be shared.
    assert {"_metadata"} == PACK_RESERVED
    src = tmp_path / "clean"
    (src / "data").mkdir(parents=True)
    pq.write_table(
        pa.table({"doc_id": ["a", "b"], "text": ["x", "y"], "_metadata": ["user", "value"]}),
        src / "data" / "part-00000.parquet",
    )
    (src / "_SUCCESS").write_text("")
    out = tmp_path / "shards"
    assert pack_job.main(["--input", str(src), "--output", str(out)]) == 1
    msg = _err(capsys)
    assert "'_metadata'" in msg and "rename" in msg, msg
    assert not out.exists()


def test_invisible_only_texts_are_blank(spark, tmp_path: Path) -> None:
    invisible = ["\u200b" * 200, "\ufeff \u2060\u200b\n" * 50, "\u200c\u200d\u00ad" * 80]
    ids = [f"d{i}" for i in range(20)]
    texts = [_text(i) for i in range(17)] + invisible
    raw = tmp_path / "raw.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": texts}), raw)
    out = tmp_path / "clean"
    assert clean.main(["--input", str(raw), "--output", str(out), *FAST]) == 0
    report = _report(out)
    assert report["rejected"] == {"blank_text": 3}
    assert report["output_rows"] == 17
