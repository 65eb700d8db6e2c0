"""`corpusclean bench` end to end on tiny shards, and the storage measurements it is built on."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds

from corpusclean.jobs import bench
from corpusclean.jobs.loadbench import settings, storage, table, throughput

# Small settings: one run each, few reads and files, so a whole bench takes a second or two.
FAST = [
    "--set",
    "bench.runs=1",
    "--set",
    "bench.random_reads=64",
    "--set",
    "bench.threads=2",
    "--set",
    "bench.small_files=50",
    "--set",
    "bench.workers=2",
]


def _write_shards(folder: Path, shards: int, per_shard: int, *, jsonl: bool = False) -> Path:
    """`shard-00000N.tar` WebDataset shards plus a wids `index.json`, as pack writes them."""
    folder.mkdir(parents=True)
    entries = []
    key = 0
    for s in range(shards):
        name = f"shard-{s:06d}.tar"
        with wds.TarWriter(str(folder / name)) as writer:
            for _ in range(per_shard):
                if jsonl:
                    lines = [
                        json.dumps({"doc_id": f"{key}-{j}", "text": f"doc {key} {j} " * 20})
                        for j in range(5)
                    ]
                    writer.write({"__key__": f"{key:09d}", "jsonl": "\n".join(lines) + "\n"})
                else:
                    writer.write(
                        {
                            "__key__": f"{key:09d}",
                            "txt": f"document number {key} " + "words of text " * 60,
                            "json": json.dumps({"doc_id": str(key)}),
                        }
                    )
                key += 1
        entries.append(
            {
                "url": name,
                "nsamples": per_shard,
                "filesize": (folder / name).stat().st_size,
            }
        )
    index = {"__kind__": "wids-shard-index-v1", "wids_version": 1, "shardlist": entries}
    (folder / "index.json").write_text(json.dumps(index), "utf-8")
    return folder


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory) -> Path:
    return _write_shards(tmp_path_factory.mktemp("bench") / "shards", shards=3, per_shard=40)


def _listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())}


def _on_page_cache_fs(path: Path) -> bool:
    """False on tmpfs/ramfs, whose pages cannot be evicted to a device."""
    best, fstype = "", ""
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            mount = parts[1]
            if str(path).startswith(mount) and len(mount) > len(best):
                best, fstype = mount, parts[2]
    return fstype not in ("tmpfs", "ramfs")


# --------------------------------------------------------------------------- end to end


@pytest.mark.e2e
def test_bench_end_to_end(shard_dir, tmp_path, capsys):
    before = _listing(shard_dir)
    out = tmp_path / "report" / "bench.json"
    rc = bench.main(["--shards", str(shard_dir), "--output", str(out), *FAST])
    assert rc == 0
    report = json.loads(out.read_text("utf-8"))
    for key in (
        "sequential_read_mb_s",
        "random_read_iops",
        "loader_docs_s",
        "small_files_docs_s",
        "gds",
        "required_bytes_s",
        "headroom",
    ):
        assert key in report, key
    assert set(report["loader_docs_s"]) >= {"cold", "warm"}
    assert set(report["small_files_docs_s"]) == {"cold", "warm"}
    assert report["loader_docs_s"]["cold"] > 0 and report["small_files_docs_s"]["cold"] > 0
    assert report["sequential_read_mb_s"]["cold"] > 0
    assert set(report["random_read_iops"]) == {"threads_1", "threads_2"}

    # Every reader saw every sample the index lists, and one document per txt member.
    assert report["shards"]["source"] == "index.json"
    assert report["shards"]["samples_read"] == report["shards"]["samples_indexed"] == 120
    assert report["shards"]["docs_read"] == 120
    assert set(report["readers"]) == {"tario", "tario-parallel", "webdataset"}
    for reader in report["readers"].values():
        assert reader["samples"] == 120 and reader["docs"] == 120
    assert report["readers"]["tario-parallel"]["workers"] == 2

    # GDS is absent here and recorded, not fatal (kvikio is not installed in this venv).
    assert report["gds"]["available"] is False and report["gds"]["reason"]

    # The consumption model: default run, estimated bytes/token, headroom of the best reader.
    plan = report["consumption"]
    assert plan["gpus"] == 1024 and plan["peak_tflops_per_gpu"] == 989
    assert report["bytes_per_token_source"].startswith("estimate")
    assert plan["tokens_s"] == pytest.approx(throughput.tokens_per_second(1024, 0.4, 989, 70e9))
    assert report["required_bytes_s"] == pytest.approx(
        plan["tokens_s"] * report["bytes_per_token"], rel=1e-6
    )
    assert report["headroom"] == pytest.approx(
        report["loader_bytes_s"] / report["required_bytes_s"], rel=1e-3
    )
    assert report["loader_bytes_s"] == pytest.approx(report["loader_mb_s"]["cold"] * 1e6)
    assert report["verdict"].split(":")[0] in ("OK", "OK per node", "TIGHT", "STARVED")
    assert "cold_shards_vs_small_files" in report["goals"]

    # Chart beside the JSON; shard folder untouched; scratch files gone.
    assert report["chart"] == "bench.png" and (out.parent / "bench.png").stat().st_size > 0
    # The page: every measured rate against the required rate, with its spread, and the
    # training assumptions the required rate comes from.
    assert report["page"] == "bench.html"
    page = (out.parent / "bench.html").read_text()
    for section in ("rates", "training", "iops", "gds", "goals", "run"):
        assert f"<h2 id='{section}'>" in page, section
    assert "sequential read, cold (tar bytes)" in page and "required per node" in page
    assert f"{report['consumption']['params']:,.0f}" in page  # 70,000,000,000
    assert "<script" not in page
    assert _listing(shard_dir) == before
    assert not list(shard_dir.parent.glob(".shards.bench-*"))

    printed = capsys.readouterr().out
    assert "sequential read MB/s" in printed
    assert printed.strip().splitlines()[-1] == report["verdict"]


@pytest.mark.e2e
def test_bench_without_index_and_with_jsonl_docs(tmp_path):
    folder = _write_shards(tmp_path / "jsonl", shards=2, per_shard=10, jsonl=True)
    (folder / "index.json").unlink()
    rc = bench.main(
        [
            "--shards",
            str(folder),
            *FAST,
            "--set",
            "bench.readers=[tario]",
            "--set",
            "bench.chart=false",
            "--set",
            "train.bytes_per_token=3.5",
            "--set",
            "train.gpus=8",
        ]
    )
    assert rc == 0
    out = tmp_path / "jsonl.bench.json"  # the default: beside the shard folder
    report = json.loads(out.read_text("utf-8"))
    assert report["shards"]["source"] == "glob"
    assert report["shards"]["samples_read"] == 20
    assert report["shards"]["docs_read"] == 100  # five lines per jsonl member
    assert report["bytes_per_token"] == 3.5
    assert report["bytes_per_token_source"].startswith("config")
    assert report["chart"] is None and not list(tmp_path.glob("jsonl.bench.png"))
    assert report["measurements"]["small_files"]["files"] == 50


def test_output_inside_the_shard_folder_is_refused(shard_dir, capsys):
    rc = bench.main(["--shards", str(shard_dir), "--output", str(shard_dir / "b.json")])
    assert rc == 1
    assert "inside the shard folder" in capsys.readouterr().err
    assert not (shard_dir / "b.json").exists()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "does not exist"),
        ("empty", "no index.json and no *.tar"),
        ("bad-index", "not readable JSON"),
        ("missing-shard", "does not exist under"),
        ("wrong-kind", "__kind__"),
        ("remote", "remote"),
    ],
)
def test_bad_shard_folders_fail_in_one_line(tmp_path, capsys, setup, message):
    folder = tmp_path / "shards"
    if setup != "missing":
        folder.mkdir()
    if setup == "bad-index":
        (folder / "index.json").write_text("{not json", "utf-8")
    elif setup == "missing-shard":
        (folder / "index.json").write_text(
            json.dumps({"shardlist": [{"url": "shard-000000.tar", "nsamples": 1}]}), "utf-8"
        )
    elif setup == "wrong-kind":
        (folder / "index.json").write_text(
            json.dumps({"__kind__": "other", "shardlist": []}), "utf-8"
        )
    elif setup == "remote":
        (folder / "index.json").write_text(
            json.dumps({"shardlist": [{"url": "s3://bucket/shard-000000.tar"}]}), "utf-8"
        )
    rc = bench.main(["--shards", str(folder)])
    err = capsys.readouterr().err
    assert rc == 1
    assert message in err and len(err.strip().splitlines()) == 1


def test_missing_shards_argument_is_a_usage_error(capsys):
    assert bench.main([]) == 2
    assert "--shards SHARD_DIR is required" in capsys.readouterr().err


def test_config_errors_name_the_key(shard_dir, capsys):
    assert bench.main(["--shards", str(shard_dir), "--set", "bench.nope=1"]) == 1
    assert "bench.nope: unknown key" in capsys.readouterr().err
    assert bench.main(["--shards", str(shard_dir), "--set", "train.gpu=V100"]) == 1
    assert "unknown GPU 'V100'" in capsys.readouterr().err
    assert bench.main(["--shards", str(shard_dir), "--set", "bench.max_bytes=lots"]) == 1
    assert "bench.max_bytes" in capsys.readouterr().err


def test_print_config_parses_sizes_and_counts(capsys):
    rc = bench.main(
        ["--print-config", "--set", "train.params=1.3T", "--set", "bench.max_bytes=1GiB"]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "params: 1300000000000.0" in printed
    assert "max_bytes: 1073741824" in printed


def test_parsers():
    assert settings.parse_bytes("4MiB") == 4 << 20
    assert settings.parse_bytes("1GB") == 10**9
    assert settings.parse_bytes(4096) == 4096
    assert settings.parse_count("70B") == 70e9
    assert settings.parse_count("7e9") == 7e9
    assert settings.parse_count("125M") == 125e6
    with pytest.raises(ValueError):
        settings.parse_count("seventy")


@pytest.mark.e2e
def test_fail_on_starved_exits_3(shard_dir, tmp_path, capsys):
    rc = bench.main(
        [
            "--shards",
            str(shard_dir),
            "--output",
            str(tmp_path),  # a folder: the report goes in as bench.json
            *FAST,
            "--set",
            "bench.readers=[tario]",
            "--set",
            "bench.small_files=0",
            "--set",
            "bench.random_reads=0",
            "--set",
            "bench.chart=false",
            # A million GPUs on a 1M-parameter model in one node: no loader keeps up.
            "--set",
            "train.gpus=1000000",
            "--set",
            "train.gpus_per_node=1000000",
            "--set",
            "train.params=1M",
            "--set",
            "bench.fail_on_starved=true",
        ]
    )
    assert rc == 3
    assert "STARVED" in capsys.readouterr().err
    report = json.loads((tmp_path / "bench.json").read_text("utf-8"))
    assert report["verdict"].startswith("STARVED") and report["headroom"] < 1
    assert report["random_read_iops"] is None and report["small_files_docs_s"] is None


# --------------------------------------------------------------------------- storage


def test_cold_read_eviction_on_a_temp_file(tmp_path):
    if not _on_page_cache_fs(tmp_path):
        pytest.skip("tmp_path is on tmpfs: nothing to evict to")
    path = tmp_path / "blob.bin"
    path.write_bytes(os.urandom(4 << 20))
    storage.sequential_read([path], 1 << 20)  # now cached
    resident = storage.page_residency(path)
    # Linux always has mincore: None there is a broken page_residency, not a platform gap.
    if resident is None and sys.platform != "linux":
        pytest.skip("mincore is unavailable")
    assert resident is not None, "page_residency found no mincore on Linux"
    assert resident > 0.9
    eviction = storage.evict([path])
    assert eviction.resident_after is not None and eviction.resident_after < 0.05
    cold = storage.sequential_read([path], 1 << 20)
    assert cold.bytes == 4 << 20
    check = storage.cold_check(cold.device_bytes, cold.bytes)
    if cold.device_bytes is None:
        assert check["confirmed"] is None and "unavailable" in check["note"]
    else:
        assert check["confirmed"] is True and check["device_fraction"] >= 0.9
        warm = storage.sequential_read([path], 1 << 20)
        assert storage.cold_check(warm.device_bytes, warm.bytes)["confirmed"] is False


def test_cold_check_without_proc_io():
    check = storage.cold_check(None, 100)
    assert check["confirmed"] is None and "could not be confirmed" in check["note"]


def test_random_offsets_are_distinct_aligned_and_inside_the_files():
    sizes = [10 * 4096 + 100, 0, 3 * 4096]
    offsets = storage.random_offsets(sizes, 1000, seed=1)
    assert len(offsets) == 13 == len(set(offsets))  # every whole block, once
    for index, offset in offsets:
        assert offset % 4096 == 0 and offset + 4096 <= sizes[index]
    assert storage.random_offsets(sizes, 5, seed=1) == storage.random_offsets(sizes, 5, seed=1)


def test_random_reads_count_and_latency(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(os.urandom(64 * 4096))
    offsets = storage.random_offsets([path.stat().st_size], 40, seed=0)
    for threads in (1, 4):
        result = storage.random_reads([path], offsets, threads)
        assert result.items == 40
        assert result.extra["method"] in ("O_DIRECT", "buffered, evicted, readahead off")
        assert 0 < result.extra["p50_us"] <= result.extra["p99_us"]


def test_small_files_round_trip(tmp_path):
    docs = [f"doc {i}".encode() for i in range(1203)]
    files = storage.write_small_files(docs, tmp_path / "small")
    assert len(files) == 1203 and len({f.parent for f in files}) == 2
    result = storage.read_small_files(files)
    assert result.docs == 1203 and result.text_bytes == sum(len(d) for d in docs)


def test_count_docs():
    sample = {"txt": b"abc", "jsonl": b'{"a":1}\n{"a":2}\n{"a":3}', "json": b"{}"}
    assert storage.count_docs(sample, ["txt", "jsonl"]) == (1 + 3, 3 + 23)
    assert storage.count_docs({"json": b"{}"}, ["txt"]) == (0, 0)


# --------------------------------------------------------------------------- GDS


def _importer(modules: dict[str, object]):
    def load(name: str):
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return modules[name]

    return load


def test_gds_absent_kvikio_is_a_clean_record(tmp_path):
    path = tmp_path / "s.tar"
    path.write_bytes(b"x" * 8192)
    result = storage.probe_gds([path], runs=1, importer=_importer({}))
    assert result == {
        "available": False,
        "reason": result["reason"],
    }
    assert "kvikio is not installed" in result["reason"]


def _fake_cupy(device_count):
    class DeviceArray:
        """A numpy array standing in for GPU memory."""

        def __init__(self, data: np.ndarray) -> None:
            self.data = data

        def __getitem__(self, key):
            return DeviceArray(self.data[key])

        def set(self, host: np.ndarray) -> None:
            self.data[...] = host

    def get_device_count():
        if isinstance(device_count, Exception):
            raise device_count
        return device_count

    runtime = types.SimpleNamespace(
        getDeviceCount=get_device_count,
        getDeviceProperties=lambda i: {"name": b"Fake GPU"},
        deviceSynchronize=lambda: None,
    )
    return types.SimpleNamespace(
        uint8=np.uint8,
        empty=lambda n, dtype: DeviceArray(np.empty(n, dtype=dtype)),
        asnumpy=lambda a: a.data.copy(),
        cuda=types.SimpleNamespace(runtime=runtime, alloc_pinned_memory=lambda n: bytearray(n)),
    ), DeviceArray


def _fake_kvikio(read_error: Exception | None, compat: bool):
    class CuFile:
        def __init__(self, path: str, flags: str = "r") -> None:
            self.path = path

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def read(self, buf, size=None, file_offset=0):
            if read_error is not None:
                raise read_error
            with open(self.path, "rb") as f:
                f.seek(file_offset)
                data = f.read(size)
            buf.data[: len(data)] = np.frombuffer(data, dtype=np.uint8)
            return len(data)

    defaults = types.SimpleNamespace(is_compat_mode_preferred=lambda: compat)
    driver = types.SimpleNamespace(get=lambda key: not compat)
    return types.SimpleNamespace(__version__="99.0", CuFile=CuFile, defaults=defaults), driver


def test_gds_without_a_gpu_is_a_clean_record(tmp_path):
    path = tmp_path / "s.tar"
    path.write_bytes(b"x" * 8192)
    cupy, _ = _fake_cupy(RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"))
    kvikio, driver = _fake_kvikio(None, compat=True)
    modules = {"kvikio": kvikio, "kvikio.cufile_driver": driver, "cupy": cupy, "numpy": np}
    result = storage.probe_gds([path], runs=1, importer=_importer(modules))
    assert result["available"] is False
    assert "no usable CUDA device" in result["reason"] and "cudaErrorNoDevice" in result["reason"]


def test_gds_first_read_failure_is_a_clean_record(tmp_path):
    # kvikio imports without libcuda and fails only on the first read.
    path = tmp_path / "s.tar"
    path.write_bytes(b"x" * 8192)
    cupy, _ = _fake_cupy(1)
    kvikio, driver = _fake_kvikio(RuntimeError("libcuda.so.1: cannot open shared object"), True)
    modules = {"kvikio": kvikio, "kvikio.cufile_driver": driver, "cupy": cupy, "numpy": np}
    result = storage.probe_gds([path], runs=1, importer=_importer(modules))
    assert result["available"] is False
    assert result["reason"].startswith("kvikio read failed") and "libcuda" in result["reason"]
    assert result["compat_mode"] is True and result["device"] == "Fake GPU"


@pytest.mark.parametrize("compat", [True, False])
def test_gds_measures_both_paths_and_records_compat_mode(tmp_path, compat):
    paths = []
    for i in range(2):
        path = tmp_path / f"s{i}.tar"
        path.write_bytes(os.urandom(3 * 4096 + 17))
        paths.append(path)
    cupy, _ = _fake_cupy(1)
    kvikio, driver = _fake_kvikio(None, compat=compat)
    modules = {"kvikio": kvikio, "kvikio.cufile_driver": driver, "cupy": cupy, "numpy": np}
    result = storage.probe_gds(paths, runs=2, chunk_size=4096, importer=_importer(modules))
    assert result["available"] is True and result["verified"] is True
    assert result["compat_mode"] is compat and result["gpudirect"] is (not compat)
    assert ("compat" in result["path"]) is compat
    assert result["bytes"] == 2 * (3 * 4096 + 17) and result["chunk_bytes"] == 4096
    assert len(result["kvikio_read_mb_s"]["runs"]) == 2
    assert result["host_read_copy_mb_s"]["median"] > 0


def test_parallel_loader_reports_a_worker_failure(tmp_path):
    loader = storage.ParallelLoader(1)
    try:
        with pytest.raises(RuntimeError, match="worker failed: FileNotFoundError"):
            loader.load([tmp_path / "missing.tar"], ["txt"], 1 << 20)
        shard = tmp_path / "ok.tar"
        with wds.TarWriter(str(shard)) as writer:
            writer.write({"__key__": "a", "txt": "hello"})
        result = loader.load([shard], ["txt"], 1 << 20)  # the worker survives a failed request
        assert (result.items, result.docs, result.text_bytes) == (1, 1, 5)
    finally:
        loader.close()


def _chart_report() -> dict:
    summary = {"median": 100.0}
    return {
        "verdict": "OK: 9x headroom for 8 H100 at 40% MFU on a 7B model",
        "required_bytes_s": 11e6,
        "consumption": {"required_bytes_s_per_node": 11e6},
        "measurements": {"sequential": {"cold_mb_s": {"median": 800.0}, "warm_mb_s": summary}},
        "readers": {"tario": {"cold": {"text_mb_s": summary}, "warm": {"text_mb_s": summary}}},
    }


def test_chart_falls_back_to_svg_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    path = table.write_chart(_chart_report(), tmp_path / "bench.json")
    assert path == tmp_path / "bench.svg"
    svg = path.read_text("utf-8")
    assert svg.startswith("<svg") and "sequential read, cold" in svg and "required" in svg
    assert "OK: 9x headroom" in svg


def test_chart_png_with_matplotlib(tmp_path):
    # matplotlib is a dependency: without it write_chart falls back to SVG and this fails.
    path = table.write_chart(_chart_report(), tmp_path / "bench.json")
    assert path == tmp_path / "bench.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("damage", ["truncated", "changed", "truncated-no-index"])
def test_damaged_shards_are_named_and_not_measured(shard_dir, tmp_path, capsys, damage):
    import hashlib
    import shutil

    folder = tmp_path / "shards"
    shutil.copytree(shard_dir, folder)
    index = json.loads((folder / "index.json").read_text("utf-8"))
    for entry in index["shardlist"]:
        entry["sha256"] = hashlib.sha256((folder / entry["url"]).read_bytes()).hexdigest()
    (folder / "index.json").write_text(json.dumps(index), "utf-8")
    victim = folder / "shard-000001.tar"
    data = victim.read_bytes()
    if damage == "changed":
        victim.write_bytes(data[:1000] + bytes([data[1000] ^ 0xFF]) + data[1001:])
    else:
        victim.write_bytes(data[: len(data) // 2 + 100])
    if damage == "truncated-no-index":
        (folder / "index.json").unlink()
    out = tmp_path / "bench.json"
    capsys.readouterr()
    rc = bench.main(["--shards", str(folder), "--output", str(out), *FAST])
    err = capsys.readouterr().err
    assert rc == 3
    assert "shard-000001.tar" in err and "pack --verify" in err
    assert ("sha256 differs" if damage == "changed" else "truncated?") in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()
