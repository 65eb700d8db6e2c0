"""The report's previews read a handful of texts from an output's files (jobs/report_data.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpusclean.jobs.report_data import fetch_rows


def _output(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    ids = [f"d{i:03d}" for i in range(300)]
    table = pa.table({"doc_id": ids, "text": [f"text of {i} " * 50 for i in ids]})
    pq.write_table(table, folder / "part-00000.parquet", row_group_size=100)  # 3 row groups
    return folder


def test_every_wanted_row_within_the_budget(tmp_path: Path) -> None:
    got = fetch_rows(_output(tmp_path), "doc_id", {"d005", "d150", "d299", "nope"}, ["text"])
    assert set(got) == {"d005", "d150", "d299"}
    assert got["d150"]["text"].startswith("text of d150")


def test_past_the_budget_the_row_group_with_most_wanted_ids_is_read_alone(tmp_path: Path) -> None:
    wanted = {"d005", "d150", "d151", "d152", "d299"}
    got = fetch_rows(_output(tmp_path), "doc_id", wanted, ["text"], budget=1)
    assert set(got) == {"d150", "d151", "d152"}
