"""The training-side loaders read every sample of a pack: webdataset, and NVIDIA DALI's
`fn.readers.webdataset` on the CPU with the `.idx` files pack writes beside the shards.
(wids and a torch DataLoader need torch, whose Linux wheels on PyPI pull about 3 GB of CUDA
libraries: too much for this tier's venv.)

They run in a venv of their own (nvidia-dali-cuda120 runs its CPU reader without a GPU), built
once per session from the registry. Each prints what it read as one JSON line: the count, the
doc_ids, the members of each sample and the JSON types of its metadata.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.client, pytest.mark.e2e]

N = 90

READ = r"""
import json, sys
root, how = sys.argv[1], sys.argv[2]
index = json.load(open(f"{root}/index.json"))
tars = [f"{root}/{e['url']}" for e in index["shardlist"]]
samples = []  # (key, {member: bytes})
if how == "webdataset":
    import webdataset as wds
    for s in wds.WebDataset(tars, shardshuffle=False, empty_check=False):
        samples.append((s["__key__"], {k: v for k, v in s.items() if not k.startswith("__")}))
elif how == "dali":
    import numpy as np
    from nvidia.dali import fn, pipeline_def
    idxs = [f"{root}/{e['dali_index']}" for e in index["shardlist"]]

    @pipeline_def(batch_size=16, num_threads=1, device_id=None)
    def pipe():
        txt, js = fn.readers.webdataset(
            paths=tars, index_paths=idxs, ext=["txt", "json"], name="r",
            missing_component_behavior="error",
        )
        return txt, js

    p = pipe()
    p.build()
    n = p.epoch_size("r")
    while len(samples) < n:
        txt, js = p.run()
        for i in range(len(js)):
            if len(samples) < n:
                meta = bytes(np.array(js.at(i)))
                key = json.loads(meta)["doc_id"]
                samples.append((key, {"txt": bytes(np.array(txt.at(i))), "json": meta}))
metas = [json.loads(m["json"]) for _, m in samples]
print(json.dumps({
    "count": len(samples),
    "ids": sorted(m["doc_id"] for m in metas),
    "members": sorted({",".join(sorted(m)) for _, m in samples}),
    "types": sorted({f"{k}:{type(v).__name__}" for m in metas for k, v in m.items()}),
    "text_ok": all(m["txt"].decode("utf-8").startswith("Document ") for _, m in samples),
}))
"""


@pytest.fixture(scope="module")
def shards(tmp_path_factory, make_pack) -> Path:
    # Small shards: several of them, so every loader crosses shard boundaries.
    return make_pack(tmp_path_factory.mktemp("loaders"), N, "shard.target_bytes=40000")


@pytest.mark.parametrize("loader", ["webdataset", "dali"])
def test_the_loader_reads_every_sample_once_with_its_types(
    client_python: Path, shards: Path, loader: str
) -> None:
    index = json.loads((shards / "index.json").read_text())
    assert len(index["shardlist"]) > 2
    proc = subprocess.run(
        [str(client_python), "-c", READ, str(shards), loader],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["count"] == N
    assert got["ids"] == [f"doc-{i:05d}" for i in range(N)], "every doc once"
    assert got["members"] == ["json,txt"]
    assert {"doc_id:str", "quality:float", "license:str", "license:NoneType"} <= set(got["types"])
    assert got["text_ok"]
