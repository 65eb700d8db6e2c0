"""`corpusclean pack --tokenizer`: Megatron and WebDataset token shards of a clean output, end to
end. Every document read back decodes to its text; counts equal the tokenizer's own; the same
bytes whatever the partitioning; a killed pack resumes; bad input is one line."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import webdataset as wds

from corpusclean.jobs.pack import main
from corpusclean.pipelines.tokenizers import TokenizerSpec, load_tokenizer

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

CLI = str(Path(sys.executable).with_name("corpusclean"))
# CJK, emoji, mixed scripts, blank lines: every document must decode back to itself.
PIECES = [
    "The committee met on Tuesday to review the budget.",
    "大型语言模型的训练数据需要清洗和去重。",
    "Mixed 文本 with emoji 🙂👩‍💻 and numbers 1,234.56",
    "Второй абзац, русский текст.\n\nA new paragraph after a blank line.",
    "Tabs\tand   spaces, trailing   ",
]


def _docs(n: int) -> pa.Table:
    texts = [
        " ".join(PIECES[(i + k) % len(PIECES)] for k in range(1 + i % 7)) + f" #{i}"
        for i in range(n)
    ]
    return pa.table(
        {
            "doc_id": [f"doc-{i:05d}" for i in range(n)],
            "text": texts,
            "source": [("web", "books", "code")[i % 3] for i in range(n)],
            "lang": [("en", "zh")[i % 2] for i in range(n)],
        }
    )


def make_clean(root: Path, table: pa.Table, files: int = 2, success: bool = True) -> Path:
    """A published-looking clean output of `table` in `files` data files."""
    data = root / "data"
    data.mkdir(parents=True)
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), data / f"part-{i:05d}.parquet")
    (root / "report.json").write_text(json.dumps({"run_id": "clean-run-1"}))
    if success:
        (root / "_SUCCESS").write_text("")
    return root


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, pa.Table]:
    root = tmp_path_factory.mktemp("tok")
    table = _docs(400)
    return make_clean(root / "clean", table), table


def pack(clean: Path, out: Path, *sets: str, tokenizer: str = "qwen2.5") -> int:
    args = ["--input", str(clean), "--output", str(out), "--tokenizer", tokenizer]
    for item in ("shard.target_bytes=65536", *sets):
        args += ["--set", item]
    return main(args)


def spec_read(prefix: Path) -> list[list[int]]:
    """The documents of a Megatron `.bin`/`.idx` pair, read as the format's description says
    (not through corpusclean's reader)."""
    idx = prefix.with_suffix(".idx").read_bytes()
    data = prefix.with_suffix(".bin").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    version, code, n, docs = struct.unpack_from("<QBQQ", idx, 9)
    assert version == 1 and docs == n + 1
    dtype = np.dtype({4: "<i4", 8: "<u2"}[code])
    lengths = np.frombuffer(idx, "<i4", n, 34)
    pointers = np.frombuffer(idx, "<i8", n, 34 + 4 * n)
    assert np.frombuffer(idx, "<i8", docs, 34 + 12 * n).tolist() == list(range(n + 1))
    return [
        np.frombuffer(data, dtype, int(k), int(p)).tolist()
        for k, p in zip(lengths, pointers, strict=True)
    ]


def megatron_docs(out: Path) -> list[list[int]]:
    index = json.loads((out / "index.json").read_text())
    docs: list[list[int]] = []
    for entry in index["shardlist"]:
        docs += spec_read(out / entry["url"].removesuffix(".bin"))
    return docs


def test_megatron_shards_decode_to_the_clean_texts_and_count_exactly(
    corpus: tuple[Path, pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean, table = corpus
    out = tmp_path / "meg"
    assert pack(clean, out) == 0
    assert "400 docs" in capsys.readouterr().out
    tok = load_tokenizer(TokenizerSpec("qwen2.5"))
    docs = megatron_docs(out)
    assert len(docs) == table.num_rows
    assert all(d[-1] == tok.eos_id for d in docs), "every document ends with EOS"
    decoded = sorted(tok.decode(d) for d in docs)
    assert decoded == sorted(table["text"].to_pylist())
    own = tok.count(table["text"])
    index = json.loads((out / "index.json").read_text())
    assert index["__kind__"] == "corpusclean-megatron-index-v1"
    assert index["totals"]["tokens"] == int(own.sum()) == sum(map(len, docs))
    assert index["tokenizer"]["name"] == "qwen2.5" and index["tokenizer"]["dtype"] == "int32"
    # data_path.txt: Megatron's --data-path, every prefix weighted by its tokens
    words = (out / "data_path.txt").read_text().split()
    weights, prefixes = words[0::2], words[1::2]
    assert [int(w) for w in weights] == [e["ntokens"] for e in index["shardlist"]]
    assert all(Path(p + ".bin").is_file() and Path(p).is_absolute() for p in prefixes)
    report = json.loads((out / "report.json").read_text())
    assert report["tokens"]["total"] == index["totals"]["tokens"]
    by_source = report["tokens"]["by"]["source"]
    for source in ("web", "books", "code"):
        mask = np.array(table["source"].to_pylist()) == source
        assert by_source[source]["tokens"] == int(own[mask].sum())
    text_bytes = sum(len(t.encode()) for t in table["text"].to_pylist())
    assert report["tokens"]["bytes_per_token"] == round(text_bytes / int(own.sum()), 4)
    plan = report["planner"]
    assert plan["chinchilla_params"] == pytest.approx(int(own.sum()) / 20)
    assert plan["days"] == pytest.approx(6 * 70e9 * own.sum() / (1024 * 989e12 * 0.4) / 86400)
    page = (out / "report.html").read_text()
    assert "compute-optimal" in page and "<script" not in page
    assert main(["--verify", str(out)]) == 0


def test_the_same_bytes_whatever_the_partitioning(
    corpus: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    clean, _ = corpus
    a, b = tmp_path / "a", tmp_path / "b"
    assert pack(clean, a) == 0
    assert pack(clean, b, "spark.sql.shuffle.partitions=7", "spark.default.parallelism=3") == 0
    names = sorted(p.name for p in a.iterdir() if p.suffix in (".bin", ".idx"))
    assert names == sorted(p.name for p in b.iterdir() if p.suffix in (".bin", ".idx"))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_webdataset_token_shards_read_back_through_webdataset(
    corpus: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    clean, table = corpus
    out = tmp_path / "wds"
    assert pack(clean, out, "tokens.format=webdataset", "shard.shuffle=false") == 0
    tok = load_tokenizer(TokenizerSpec("qwen2.5"))
    texts = dict(zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True))
    shards = sorted(str(p) for p in out.glob("*.tar"))
    seen = []
    for sample in wds.WebDataset(shards, shardshuffle=False).decode():
        ids = sample["npy"]
        assert ids.dtype == np.int32
        assert tok.decode(ids.tolist()) == texts[sample["json"]["doc_id"]]
        seen.append(sample["json"]["doc_id"])
    assert seen == table["doc_id"].to_pylist(), "input order"
    index = json.loads((out / "index.json").read_text())
    assert index["format"]["members"] == ["json", "npy"] and index["format"]["dali_index"]
    assert main(["--verify", str(out)]) == 0


def test_a_tampered_megatron_shard_fails_verify(
    corpus: tuple[Path, pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean, _ = corpus
    out = tmp_path / "tampered"
    assert pack(clean, out) == 0
    index = json.loads((out / "index.json").read_text())
    target = out / index["shardlist"][0]["url"]
    data = bytearray(target.read_bytes())
    data[4:8] = np.array([2**30], "<i4").tobytes()  # an id outside the vocabulary
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["--verify", str(out)]) == 3
    assert "sha256 differs" in capsys.readouterr().err


def test_clean_counts_what_pack_writes(tmp_path: Path, corpus: tuple[Path, pa.Table]) -> None:
    """clean's `n_tokens` (read pass) and pack's ids agree document by document."""
    from corpusclean.jobs import clean

    _, table = corpus
    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(table, raw / "part-0.parquet")
    out = tmp_path / "clean"
    args = ["--input", str(raw), "--output", str(out), "--set", "audit.enabled=false"]
    args += ["--set", "tokens.tokenizer=qwen2.5", "--set", "near_dedup.enabled=false"]
    assert clean.main(args) == 0
    data = pq.read_table(out / "data")
    counts = dict(zip(data["doc_id"].to_pylist(), data["n_tokens"].to_pylist(), strict=True))
    tok = load_tokenizer(TokenizerSpec("qwen2.5"))
    own = tok.count(data["text"]).tolist()
    assert [counts[d] for d in data["doc_id"].to_pylist()] == own
    report = json.loads((out / "report.json").read_text())
    assert report["tokens"]["output"] == sum(own)
    assert report["tokens"]["tokenizer"]["sha256"] == tok.identity()["sha256"]
    packed = tmp_path / "packed"
    assert pack(out, packed) == 0
    index = json.loads((packed / "index.json").read_text())
    assert index["totals"]["tokens"] == sum(own)


def _killed_at(clean: Path, out: Path, point: str, *sets: str) -> None:
    """Run the token pack in its own process group until it holds at `point`, then SIGKILL
    the whole group."""
    import signal
    import tempfile
    import time

    args = [CLI, "pack", "--input", str(clean), "--output", str(out), "--tokenizer", "qwen2.5"]
    for item in ("shard.target_bytes=65536", *sets, "spark.ui.showConsoleProgress=false"):
        args += ["--set", item]
    holds = Path(tempfile.mkdtemp(prefix="tok-hold-"))
    reached = holds / f"{point.partition(':')[0]}.reached"
    env = {**os.environ, "CORPUSCLEAN_TEST_HOLD": f"{point}@{holds}"}
    proc = subprocess.Popen(
        args,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while not reached.exists():
            assert proc.poll() is None, f"ended before {point}"
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(holds, ignore_errors=True)


def test_a_killed_token_pack_resumes_to_the_same_bytes(
    corpus: tuple[Path, pa.Table], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean, _ = corpus
    small = "shard.target_bytes=16384"
    whole = tmp_path / "whole"
    assert pack(clean, whole, small) == 0
    assert json.loads((whole / "index.json").read_text())["totals"]["shards"] >= 6
    out = tmp_path / "resumed"
    _killed_at(clean, out, "pack.part:2", small)
    assert not (out / "index.json").exists()
    assert list(out.glob("_parts/u*-*.json")), "the killed run committed parts"
    # never resumed under another tokenizer: its ids would mix with these
    capsys.readouterr()
    assert pack(clean, out, small, tokenizer="deepseek-v3") == 1
    assert "unfinished pack of another input or config" in capsys.readouterr().err
    assert pack(clean, out, small) == 0
    for name in sorted(p.name for p in whole.iterdir() if p.suffix in (".bin", ".idx")):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    ours = json.loads((out / "report.json").read_text())["tokens"]
    theirs = json.loads((whole / "report.json").read_text())["tokens"]
    assert ours == theirs, "the units the killed run wrote are counted from their markers"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("corpusclean pack:")]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_token_input_is_one_line_and_nothing_is_written(
    corpus: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    clean, table = corpus
    out = tmp_path / "out"
    base = ["pack", "--input", str(clean), "--output", str(out)]
    _one_line(_run(*base, "--tokenizer", "gpt-5"), "unknown tokenizer 'gpt-5'", "qwen2.5")
    junk = tmp_path / "tokenizer.json"
    junk.write_text('{"model": "nothing"}')
    _one_line(_run(*base, "--tokenizer", str(junk)), "not a readable tokenizer.json")
    _one_line(
        _run(*base, "--tokenizer", "qwen2.5", "--set", "tokens.dtype=uint16"),
        "tokens.dtype=uint16 holds ids below 65,536",
    )
    unpublished = make_clean(tmp_path / "unpublished", table, success=False)
    proc = _run("pack", "--input", str(unpublished), "--output", str(out), "--tokenizer", "qwen2.5")
    _one_line(proc, "not a published clean output")
    assert not out.exists(), "nothing written"


BENCH_FAST = [
    "--set",
    "bench.runs=1",
    "--set",
    "bench.small_files=0",
    "--set",
    "bench.random_reads=50",
]


@pytest.mark.parametrize("fmt", ["megatron", "webdataset"])
def test_bench_measures_token_shards_in_tokens_per_second(
    corpus: tuple[Path, pa.Table], tmp_path: Path, fmt: str
) -> None:
    from corpusclean.jobs import bench

    clean, table = corpus
    out = tmp_path / fmt
    assert pack(clean, out, f"tokens.format={fmt}") == 0
    report_path = tmp_path / "bench.json"
    args = ["--shards", str(out), "--output", str(report_path), *BENCH_FAST]
    assert bench.main(args) == 0
    report = json.loads(report_path.read_text())
    tokens = json.loads((out / "index.json").read_text())["totals"]["tokens"]
    expected = ["megatron"] if fmt == "megatron" else ["tario", "webdataset"]
    assert sorted(report["readers"]) == sorted(expected)
    for reader in report["readers"].values():
        assert reader["docs"] == table.num_rows
        assert reader["text_bytes"] == tokens * 4, "the ids' bytes: int32"
        assert reader["cold"]["tokens_s"]["median"] > 0
    assert report["loader_tokens_s"]["cold"] > 0
    assert report["bytes_per_token"] == 4.0 and "token shards" in report["bytes_per_token_source"]


def test_bench_of_text_shards_takes_cleans_measured_bytes_per_token(
    tmp_path: Path, corpus: tuple[Path, pa.Table]
) -> None:
    from corpusclean.jobs import bench, clean

    _, table = corpus
    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(table, raw / "part-0.parquet")
    cleaned = tmp_path / "clean"
    args = ["--input", str(raw), "--output", str(cleaned), "--set", "audit.enabled=false"]
    args += ["--set", "near_dedup.enabled=false"]
    assert clean.main([*args, "--set", "tokens.tokenizer=qwen2.5"]) == 0
    shards = tmp_path / "text"
    assert main(["--input", str(cleaned), "--output", str(shards)]) == 0
    report_path = tmp_path / "bench.json"
    assert bench.main(["--shards", str(shards), "--output", str(report_path), *BENCH_FAST]) == 0
    report = json.loads(report_path.read_text())
    measured = json.loads((cleaned / "report.json").read_text())["tokens"]["bytes_per_token"]
    assert report["bytes_per_token"] == measured
    assert report["bytes_per_token_source"].startswith("measured: clean counted")
