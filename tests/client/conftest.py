"""What the client tier's loaders share: one venv of the loaders, built once per session from
the package registry, and a small pack whose shards they all read."""

from __future__ import annotations

import json
import subprocess
import venv
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpusclean.jobs.pack import main as pack_main

# Every loader the tier reads with, in one venv: each venv costs a pip resolve and install.
LOADERS = ("datasets>=3", "webdataset>=1,<2", "nvidia-dali-cuda120")


@pytest.fixture(scope="session")
def client_python(tmp_path_factory) -> Path:
    """The python of a new venv holding the training-side loaders (`LOADERS`) from the
    registry, and not corpusclean."""
    root = tmp_path_factory.mktemp("client-venv")
    venv.create(root, with_pip=True)
    python = root / "bin" / "python"
    # --no-compile: these are other projects' packages, whose byte-code pip would compile
    # whole (about 10 s) for the few modules the loaders import.
    pip = [str(python), "-m", "pip", "install", "-q", "--no-compile", *LOADERS]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def clean_output(root: Path, n: int) -> Path:
    """A published-looking clean output whose `license` is set on three documents only."""
    licensed = {"doc-00041", "doc-00047", "doc-00053"}
    ids = [f"doc-{i:05d}" for i in range(n)]
    table = pa.table(
        {
            "doc_id": ids,
            "text": [f"Document {i} " + "lorem ipsum dolor " * (10 + i) for i in range(n)],
            "quality": [i / n for i in range(n)],
            "license": [("cc-by-4.0" if d in licensed else None) for d in ids],
        }
    )
    (root / "data").mkdir(parents=True)
    pq.write_table(table, root / "data" / "part-00000.parquet")
    (root / "report.json").write_text(json.dumps({"run_id": "clean-run-1"}))
    (root / "_SUCCESS").write_text("")
    return root


@pytest.fixture(scope="session")
def make_pack(spark) -> Callable[..., Path]:
    """`make_pack(root, n, *sets)`: `clean_output` of `n` documents under `root`, packed into
    `root/shards` with the `--set` values `sets`."""

    def make(root: Path, n: int, *sets: str) -> Path:
        out = root / "shards"
        args = ["--input", str(clean_output(root / "clean", n)), "--output", str(out)]
        for value in sets:
            args += ["--set", value]
        assert pack_main(args) == 0
        return out

    return make
