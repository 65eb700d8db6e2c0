"""The report's previews read a handful of texts from an output's files (jobs/reports/data.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpusclean.jobs.reports.data import fetch_rows


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


_PEAK = """
import json, os, sys
from pathlib import Path
import pyarrow as pa
from corpusclean.jobs.reports import data as report_data
out = Path(sys.argv[1])
texts = report_data.fetch_rows(out / "data", "doc_id", {"d00007", "d11990"}, ["text"])
views = report_data.rejected(out, "doc_id", "text")
print(json.dumps({
    "peak": pa.default_memory_pool().max_memory(),
    "found": sorted(texts),
    "rejected": sorted(r["doc_id"] for rows in views.values() for r in rows),
}))
sys.stdout.flush()
os._exit(0)
"""


def test_a_preview_holds_a_batch_of_texts_not_the_row_group(tmp_path: Path) -> None:
    """A Spark output's row groups reach 128 MB of text; a preview of two documents of one must
    not hold it all on the driver (read whole, a 100k-document run's driver went from 230 MB
    to 580 MB). The peak of pyarrow's pool is measured in a fresh interpreter: streamed, it is
    a few batches of texts (~18 MB here, the same for a 145 MB row group); read whole, 119 MB."""
    rows = 12_000  # one row group of ~48 MB of text, stored uncompressed
    ids = [f"d{i:05d}" for i in range(rows)]
    text = pa.array([f"{i} " + "x" * 4000 for i in ids])
    for name, extra in (("data", {}), ("rejected", {"reject_reason": ["too_long"] * rows})):
        (tmp_path / name).mkdir()
        table = pa.table({"doc_id": ids, "text": text, **extra})
        pq.write_table(table, tmp_path / name / "part-0.parquet", compression="none")
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(tmp_path)], capture_output=True, text=True, check=True
    )
    got = json.loads(proc.stdout)
    assert got["found"] == ["d00007", "d11990"]
    assert len(got["rejected"]) == 2
    assert got["peak"] < 32 << 20, got["peak"]


def test_the_report_command_never_imports_pyspark() -> None:
    """`corpusclean report` reads files with pyarrow; the output's column names come from
    schemas/, which must not pull Spark's start-up cost into the command."""
    code = (
        "import sys\n"
        "import corpusclean.jobs.report\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
