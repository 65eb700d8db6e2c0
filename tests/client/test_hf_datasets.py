"""Hugging Face `datasets` reads a pack folder: `load_dataset(SHARD_DIR)` with the right types.

Runs in its own venv (the package's own dependencies stay small), built once per session from
the package registry. The pack is made so that its first samples, the ones `datasets` infers a
WebDataset's types from, have a null `license`: without the dataset card that column is typed
null and the load fails on the first sample that has one.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.client, pytest.mark.e2e]

N = 60

LOAD = """
import json, sys, datasets
path, how = sys.argv[1], sys.argv[2]
try:
    if how == "dir":
        ds = datasets.load_dataset(path, split="train")
    else:
        import glob
        files = sorted(glob.glob(path + "/*.tar"))
        ds = datasets.load_dataset("webdataset", data_files={"train": files}, split="train")
    rows = ds.to_list()
    print(json.dumps({
        "ok": True,
        "rows": len(rows),
        "features": {k: str(v) for k, v in ds.features["json"].items()},
        "txt": str(ds.features["txt"]),
        "licenses": sorted(r["json"]["license"] for r in rows if r["json"]["license"]),
        "ids": sorted(r["json"]["doc_id"] for r in rows),
    }))
except Exception as exc:
    chain = []
    while exc is not None and len(chain) < 5:
        chain.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    print(json.dumps({"ok": False, "error": " <- ".join(chain)[:3000]}))
"""


def _load(python: Path, folder: Path, how: str, cache: Path | None = None) -> dict:
    home = cache if cache is not None else folder.parent / "hf-home"
    env = {"HF_DATASETS_OFFLINE": "1", "HF_HOME": str(home)}
    proc = subprocess.run(
        [str(python), "-c", LOAD, str(folder), how],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_load_dataset_reads_a_pack_folder_with_its_types(
    client_python: Path, make_pack, tmp_path: Path
) -> None:
    out = make_pack(tmp_path, N)
    got = _load(client_python, out, "dir")
    assert got["ok"], got.get("error")
    assert got["rows"] == N
    assert got["ids"] == [f"doc-{i:05d}" for i in range(N)]
    assert got["features"]["license"] == "Value('string')"
    assert got["features"]["quality"] == "Value('float64')"
    assert got["txt"] == "Value('string')"
    assert got["licenses"] == ["cc-by-4.0"] * 3


def test_without_the_card_the_first_samples_decide_the_types(
    client_python: Path, make_pack, tmp_path: Path
) -> None:
    """Why the card is there: the same shards named by data_files, with no card, fail."""
    out = make_pack(tmp_path, N)
    # The precondition: the samples `datasets` infers types from all have a null license.
    with tarfile.open(next(out.glob("*.tar"))) as tar:
        metas = [json.loads(tar.extractfile(m).read()) for m in tar if m.name.endswith(".json")]
    assert all(m["license"] is None for m in metas[:5])
    got = _load(client_python, out, "data_files")
    assert not got["ok"], "datasets typed the mostly-null column right without the card"
    assert "null" in got["error"], got["error"]


def test_a_repacked_folder_is_not_read_from_the_cache_of_the_first(
    client_python: Path, make_pack, tmp_path: Path
) -> None:
    """`datasets` caches a local folder's dataset by folder and config name: two packs in
    folders of one name, loaded with one cache, each give their own rows."""
    cache = tmp_path / "hf-home"
    first, second = make_pack(tmp_path / "a", N), make_pack(tmp_path / "b", N - 7)
    assert _load(client_python, first, "dir", cache)["rows"] == N
    got = _load(client_python, second, "dir", cache)
    assert got["ok"], got.get("error")
    assert got["rows"] == N - 7
