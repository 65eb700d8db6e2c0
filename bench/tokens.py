"""The tokenizing pack against the tokenizer library's own rate and datatrove's Megatron writer,
and its memory per Python worker as the corpus grows.

    python bench/tokens.py [--docs 100000] [--memory-docs 100000 1000000]
                             [--corpus ../shared/corpora/bible] [--tokenizer deepseek-v3]
                             [--memory-tokenizer qwen2.5] [--skip-datatrove]

Three measurements, the same documents for the first two:

1. **The library alone**: the tokenizer's own batch encode (`tokenizers`' `encode_batch_fast`,
   tiktoken's `encode_ordinary`, one thread) over every text in one process pinned to one core:
   the physical limit of tokenizing, in MB/s of text.
2. **corpusclean pack --tokenizer** (Megatron shards) on local Spark with every core, and
   **datatrove's `MegatronDocumentTokenizer`** (0.10.1, its own venv, bench/out/venv-datatrove)
   reading the same Parquet files with `tasks = workers = cores`, its fastest setting here:
   both tokenize with the same tokenizer file and write Megatron's .bin/.idx. Per core is the
   text's MB over the wall seconds and the cores. For corpusclean both the whole command (Spark's
   start included) and its write stage (the tokenize-and-write Spark job, from its log line)
   are shown; the goals take the write stage against the library and the whole command against
   datatrove's whole run.
3. **Memory**: `pack --tokenizer` on `corpusclean sample` corpora of each `--memory-docs` size,
   the peak resident memory of every Spark Python worker sampled every 100 ms; the largest is
   the figure that must stay under 1.5 GB whatever the corpus size.

The documents of 1 and 2 are web-like pages built from the corpus's real sentences
(bench/weblike.py). Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

from bible import chapters  # noqa: E402  (bench/ is not a package)
from peer_venv import ensure_venv  # noqa: E402
from weblike import generate, sentence_pool  # noqa: E402

CLI = str(Path(sys.executable).with_name("corpusclean"))
GOALS = {"vs_datatrove": 1.5, "vs_library": 0.8, "worker_peak_gb": 1.5}

_LIBRARY = """
import json, os, sys, time, unicodedata
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import pyarrow.parquet as pq
from corpusclean.pipelines.tokenizers import TokenizerSpec, load_tokenizer
args = json.loads(sys.argv[1])
texts = [t for f in args["files"] for t in pq.read_table(f, columns=["text"]).column(0).to_pylist()]
tok = load_tokenizer(TokenizerSpec(args["tokenizer"]))
engine = tok._engine
start = time.perf_counter()
tokens = 0
for i in range(0, len(texts), 4096):
    batch = texts[i : i + 4096]
    if tok.nfc:
        batch = [unicodedata.normalize("NFC", t) for t in batch]
    if tok.kind == "hf":
        out = [e.ids for e in engine.encode_batch_fast(batch, add_special_tokens=False)]
    elif tok.kind == "tiktoken":
        out = [engine.encode_ordinary(t) for t in batch]
    else:
        out = engine.encode(batch)
    tokens += sum(len(x) for x in out)
print(json.dumps({"seconds": time.perf_counter() - start, "tokens": tokens}))
"""

_DATATROVE = """
import json, os, sys, time
os.environ["HF_HUB_OFFLINE"] = "1"
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.tokens import MegatronDocumentTokenizer
args = json.loads(sys.argv[1])
start = time.perf_counter()
LocalPipelineExecutor(
    pipeline=[
        ParquetReader(args["data"], glob_pattern="*.parquet", text_key="text", id_key="doc_id"),
        MegatronDocumentTokenizer(
            output_folder=args["output"],
            tokenizer_name_or_path=args["tokenizer"],
            eos_token=args["eos"],
        ),
    ],
    tasks=args["tasks"],
    workers=args["tasks"],
    logging_dir=args["logs"],
).run()
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def web_corpus(docs: int, corpus: Path, root: Path, files: int) -> tuple[Path, int]:
    """A published-looking clean output of `docs` web-like pages; (folder, text bytes)."""
    texts_of = [" ".join(verses) for _, _, _, verses in chapters(corpus)]
    if not texts_of:
        raise SystemExit(f"{corpus} holds no chapters")
    ids, texts = generate(docs, seed=0, sentences=sentence_pool(texts_of))
    clean = root / f"web-{docs}"
    data = clean / "data"
    data.mkdir(parents=True)
    step = -(-docs // files)
    table = pa.table({"doc_id": ids, "text": texts})
    for i in range(files):
        pq.write_table(table.slice(i * step, step), data / f"part-{i:05d}.parquet")
    (clean / "report.json").write_text(json.dumps({"run_id": "bench"}))
    (clean / "_SUCCESS").write_text("")
    return clean, sum(len(t.encode()) for t in texts)


def library_rate(clean: Path, tokenizer: str) -> dict[str, float]:
    """The library's own batch encode over the corpus, one process on one core."""
    files = [str(p) for p in sorted((clean / "data").glob("*.parquet"))]
    cmd = ["taskset", "-c", "0", sys.executable, "-c", _LIBRARY]
    if shutil.which("taskset") is None:
        cmd = cmd[3:]
    done = subprocess.run(
        [*cmd, json.dumps({"files": files, "tokenizer": tokenizer})],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


class WorkerPeaks(threading.Thread):
    """The peak RSS of each Spark Python worker under a process, sampled every 100 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.peaks: dict[int, int] = {}
        self.tree_peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            tree = 0
            try:
                children = self.root.children(recursive=True)
            except psutil.Error:
                break
            for child in children:
                try:
                    rss = child.memory_info().rss
                    tree += rss
                    if "python" in child.name() and "daemon" in " ".join(child.cmdline()):
                        self.peaks[child.pid] = max(self.peaks.get(child.pid, 0), rss)
                except psutil.Error:
                    continue
            self.tree_peak = max(self.tree_peak, tree)
            time.sleep(0.1)


def run_pack(clean: Path, out: Path, tokenizer: str, *sets: str) -> dict[str, float]:
    """`corpusclean pack --tokenizer` in a fresh process: wall, write stage, worker peaks."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [CLI, "pack", "--input", str(clean), "--output", str(out), "--tokenizer", tokenizer]
    for item in sets:
        cmd += ["--set", item]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks = WorkerPeaks(proc.pid)
    peaks.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - start
    peaks.stop.set()
    peaks.join()
    if proc.returncode != 0:
        raise SystemExit(f"pack failed: {stderr[-2000:]}")
    match = re.search(r"write: .* \(([0-9.]+)s\)$", stderr, re.MULTILINE)
    index = json.loads((out / "index.json").read_text())
    return {
        "wall_s": wall,
        "write_s": float(match.group(1)) if match else wall,
        "tokens": index["totals"]["tokens"],
        "worker_peak_mb": max(peaks.peaks.values(), default=0) / 2**20,
        "workers_seen": len(peaks.peaks),
        "tree_peak_mb": peaks.tree_peak / 2**20,
    }


def datatrove_rate(clean: Path, tokenizer_file: str, eos: str, tasks: int) -> dict[str, float]:
    """datatrove's Megatron tokenizer over the same Parquet files, tasks = workers = cores."""
    python = ensure_venv("datatrove", HERE / "requirements-datatrove.txt")
    work = Path(tempfile.mkdtemp(prefix="dt-tok-", dir=OUT))
    args = {
        "data": str(clean / "data"),
        "output": str(work / "out"),
        "logs": str(work / "logs"),
        "tokenizer": tokenizer_file,
        "eos": eos,
        "tasks": tasks,
    }
    try:
        done = subprocess.run(
            [str(python), "-c", _DATATROVE, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=7200,
        )
        if done.returncode != 0:
            raise SystemExit(f"datatrove failed: {done.stderr[-2000:]}")
        seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
        written = sum(p.stat().st_size for p in (work / "out").glob("*.bin"))
        return {"seconds": seconds, "bin_bytes": written}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def sample_corpus(docs: int) -> Path:
    """A `corpusclean sample` corpus of `docs` rows as a published-looking clean output."""
    clean = OUT / f"tok-sample-{docs}"
    if (clean / "_SUCCESS").exists():
        return clean
    shutil.rmtree(clean, ignore_errors=True)
    raw = OUT / f"tok-sample-{docs}-raw"
    shutil.rmtree(raw, ignore_errors=True)
    subprocess.run([CLI, "sample", "--output", str(raw), "--docs", str(docs), "-q"], check=True)
    (clean / "data").mkdir(parents=True)
    first = 0
    for part in sorted(raw.glob("part-*.parquet")):
        # The sample plants repeated doc_ids (a clean output has none): each row its own id.
        table = pq.read_table(part)
        ids = pa.array([f"m{first + i:09d}" for i in range(table.num_rows)])
        table = table.set_column(table.schema.get_field_index("doc_id"), "doc_id", ids)
        pq.write_table(table, clean / "data" / part.name)
        first += table.num_rows
    shutil.rmtree(raw)
    (clean / "report.json").write_text(json.dumps({"run_id": "bench"}))
    (clean / "_SUCCESS").write_text("")
    return clean


def main() -> None:
    from corpusclean.pipelines.tokenizers import TokenizerSpec, load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--memory-docs", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--corpus", default=str(HERE.parents[1] / "shared" / "corpora" / "bible"))
    parser.add_argument("--tokenizer", default="deepseek-v3", help="a tokenizer.json preset/file")
    parser.add_argument("--memory-tokenizer", default="qwen2.5")
    parser.add_argument("--skip-datatrove", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    cores = os.cpu_count() or 1
    tok = load_tokenizer(TokenizerSpec(args.tokenizer))
    if tok.kind != "hf":
        raise SystemExit("--tokenizer must be a tokenizer.json (datatrove reads no other kind)")
    eos = next(t for t, i in tok.specials.items() if i == tok.eos_id)

    root = Path(tempfile.mkdtemp(prefix="tokenize-", dir=OUT))
    rows: list[tuple[str, str, str, str]] = []
    result: dict[str, object] = {"docs": args.docs, "cores": cores, "tokenizer": args.tokenizer}
    try:
        clean, text_bytes = web_corpus(args.docs, Path(args.corpus), root, files=cores)
        mb = text_bytes / 1e6
        lib = library_rate(clean, args.tokenizer)
        lib_mb_s = mb / lib["seconds"]
        rows.append(("library encode, 1 core", f"{lib['seconds']:.1f}", f"{lib_mb_s:.2f}", "-"))
        # Input order (each input file one task, no shuffle: datatrove's order too), and the
        # default shuffled order (one shuffle of the text brings each hash range to its task).
        modes = {"input order": ("shard.shuffle=false",), "shuffled": ()}
        best: dict[str, float] = {}
        for mode, sets in modes.items():
            ours = run_pack(clean, root / "ours", args.tokenizer, *sets)
            whole = mb / ours["wall_s"] / cores
            write = mb / ours["write_s"] / cores
            rows.append((f"pack {mode}, whole", f"{ours['wall_s']:.1f}", f"{whole:.2f}", "-"))
            rows.append((f"pack {mode}, write", f"{ours['write_s']:.1f}", f"{write:.2f}", "-"))
            result[f"pack_{mode.replace(' ', '_')}"] = {
                "wall_s": round(ours["wall_s"], 2),
                "write_s": round(ours["write_s"], 2),
                "whole_mb_s_per_core": round(whole, 3),
                "write_mb_s_per_core": round(write, 3),
            }
            if whole > best.get("whole", 0):
                best = {"whole": whole, "write": write, "tokens": ours["tokens"]}
        whole, write = best["whole"], best["write"]
        result.update(
            text_mb=round(mb, 1),
            tokens=best["tokens"],
            library_mb_s_per_core=round(lib_mb_s, 3),
            vs_library=round(write / lib_mb_s, 3),
        )
        if lib["tokens"] + args.docs * (1 if tok.add_eos else 0) != best["tokens"]:
            raise SystemExit("the pack's tokens differ from the library's own count")
        if not args.skip_datatrove:
            dt = datatrove_rate(clean, str(tok.path), eos, cores)
            dt_mb_s = mb / dt["seconds"] / cores
            rows.append(
                ("datatrove Megatron tokenizer", f"{dt['seconds']:.1f}", f"{dt_mb_s:.2f}", "-")
            )
            result.update(
                datatrove_mb_s_per_core=round(dt_mb_s, 3), vs_datatrove=round(whole / dt_mb_s, 3)
            )
        memory: dict[str, dict[str, float]] = {}
        for n in args.memory_docs:
            run = run_pack(sample_corpus(n), root / f"mem-{n}", args.memory_tokenizer)
            memory[str(n)] = {k: round(v, 1) for k, v in run.items()}
            rows.append(
                (
                    f"memory: {n:,} docs ({args.memory_tokenizer})",
                    f"{run['wall_s']:.1f}",
                    "-",
                    f"{run['worker_peak_mb']:.0f}",
                )
            )
        result["memory"] = memory
        peak_gb = max((m["worker_peak_mb"] for m in memory.values()), default=0) / 1024
        result["goals"] = {
            "vs_datatrove": {
                "ratio": result.get("vs_datatrove"),
                "target": GOALS["vs_datatrove"],
                "met": result.get("vs_datatrove") is not None
                and float(result["vs_datatrove"]) >= GOALS["vs_datatrove"],  # type: ignore[arg-type]
            },
            "vs_library": {
                "ratio": result["vs_library"],
                "target": GOALS["vs_library"],
                "met": float(result["vs_library"]) >= GOALS["vs_library"],  # type: ignore[arg-type]
            },
            "worker_peak_gb": {
                "value": round(peak_gb, 3),
                "target": GOALS["worker_peak_gb"],
                "met": peak_gb <= GOALS["worker_peak_gb"],
            },
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'measurement':<34} {'seconds':>9} {'MB/s/core':>10} {'worker MB':>10}")
    for name, secs, rate, peak in rows:
        print(f"{name:<34} {secs:>9} {rate:>10} {peak:>10}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
