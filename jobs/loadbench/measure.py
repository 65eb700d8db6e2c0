"""The measurements of one bench run (`Bench`): storage, loaders, small files, GDS, and the
consumption the planned training run asks of them."""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from corpusclean.errors import CorpusCleanError, InputError
from corpusclean.jobs.loadbench import storage, throughput
from corpusclean.jobs.loadbench.settings import (
    JOB,
    READER_GOAL,
    SMALL_FILES_GOAL,
    BenchConfig,
)
from corpusclean.jobs.loadbench.shardset import INDEX_FILE, ShardSet, check_outside
from corpusclean.jobs.loadbench.table import fmt_bytes
from corpusclean.jobs.runtime import log
from corpusclean.jobs.shards import tario


def summarize(values: Sequence[float], digits: int = 2) -> dict[str, Any]:
    """Median, min, max, relative spread ((max - min) / median) and the runs themselves."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"median": None, "min": None, "max": None, "spread": None, "runs": []}
    med = statistics.median(finite)
    return {
        "median": round(med, digits),
        "min": round(min(finite), digits),
        "max": round(max(finite), digits),
        "spread": round((max(finite) - min(finite)) / med, 4) if med else None,
        "runs": [round(v, digits) for v in finite],
    }


def _rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else math.inf


def _mb(n: float) -> float:
    return n / 1e6


class Bench:
    """One bench run over a shard set: each measurement fills a part of the report."""

    def __init__(self, cfg: BenchConfig, shards: ShardSet, paths: list[Path]) -> None:
        self.cfg = cfg
        self.b = cfg.bench
        self.shards = shards
        self.paths = paths
        self.used_bytes = sum(p.stat().st_size for p in paths)
        self.report: dict[str, Any] = {}
        self.cold_checks: list[dict[str, Any]] = []

    def _evict(self, paths: Sequence[Path] | None = None) -> storage.Eviction:
        return storage.evict(paths or self.paths, use_drop_caches=self.b.drop_caches)

    def _cold_warm(
        self, name: str, once: Callable[[], storage.Pass], paths: Sequence[Path] | None = None
    ) -> tuple[list[storage.Pass], list[storage.Pass], dict[str, Any]]:
        """`runs` cold passes (each after eviction) and `runs` warm passes of `once`."""
        cold: list[storage.Pass] = []
        eviction: storage.Eviction | None = None
        for _ in range(self.b.runs):
            eviction = self._evict(paths)
            cold.append(once())
        warm = [once() for _ in range(self.b.runs)]
        logical = [p.bytes for p in cold]
        device = [p.device_bytes for p in cold]
        check = storage.cold_check(
            None if any(d is None for d in device) else sum(d for d in device if d is not None),
            sum(logical),
        )
        check["measurement"] = name
        if eviction is not None:
            check["eviction"] = eviction.to_dict()
        self.cold_checks.append(check)
        return cold, warm, check

    def sequential(self) -> None:
        """Large-block reads of the shard files, cold and warm."""
        log.info(JOB, f"sequential reads: {len(self.paths)} shards, {fmt_bytes(self.used_bytes)}")
        cold, warm, check = self._cold_warm(
            "sequential", lambda: storage.sequential_read(self.paths, self.b.block_size)
        )
        cold_mb = summarize([_mb(_rate(p.bytes, p.seconds)) for p in cold])
        warm_mb = summarize([_mb(_rate(p.bytes, p.seconds)) for p in warm])
        self.report["sequential_read_mb_s"] = {"cold": cold_mb["median"], "warm": warm_mb["median"]}
        self.report.setdefault("measurements", {})["sequential"] = {
            "block_bytes": self.b.block_size,
            "bytes": self.used_bytes,
            "cold_mb_s": cold_mb,
            "warm_mb_s": warm_mb,
            "cold_check": check,
        }

    def random(self) -> None:
        """4 KiB reads at random offsets: IOPS and latency, one thread and several."""
        if self.b.random_reads == 0:
            self.report["random_read_iops"] = None
            return
        sizes = [p.stat().st_size for p in self.paths]
        settings = [1] if self.b.threads == 1 else [1, self.b.threads]
        log.info(JOB, f"random 4 KiB reads: {self.b.random_reads} per run at {settings} threads")
        # Distinct blocks across every run and setting, while the files have enough of them.
        need = self.b.random_reads * self.b.runs * len(settings)
        offsets = storage.random_offsets(sizes, need, self.b.seed)
        if len(offsets) < need:
            offsets = (offsets * (need // max(1, len(offsets)) + 1))[:need]
        out: dict[str, Any] = {}
        iops: dict[str, Any] = {}
        k = 0
        for threads in settings:
            passes = []
            for _ in range(self.b.runs):
                chunk = offsets[k : k + self.b.random_reads]
                k += self.b.random_reads
                self._evict()
                passes.append(storage.random_reads(self.paths, chunk, threads))
            rates = [_rate(p.items, p.seconds) for p in passes]
            key = f"threads_{threads}"
            iops[key] = summarize(rates, 0)["median"]
            out[key] = {
                "iops": summarize(rates, 0),
                "p50_us": summarize([p.extra.get("p50_us", math.nan) for p in passes], 1),
                "p99_us": summarize([p.extra.get("p99_us", math.nan) for p in passes], 1),
                "method": passes[0].extra.get("method"),
                "device_bytes": [p.device_bytes for p in passes],
            }
        out["block_bytes"] = storage.RANDOM_BLOCK
        out["reads_per_run"] = self.b.random_reads
        out["distinct_blocks"] = len(set(offsets))
        self.report["random_read_iops"] = iops
        self.report["random_read_latency_us"] = {
            key: {"p50": v["p50_us"]["median"], "p99": v["p99_us"]["median"]}
            for key, v in out.items()
            if key.startswith("threads_")
        }
        self.report.setdefault("measurements", {})["random"] = out

    def _token_readers(self) -> dict[str, Callable[[], storage.Pass]]:
        """The readers of token shards: Megatron's documents through their index, or the
        `.npy` samples of token tars through tario and webdataset."""
        if self.shards.kind == "megatron":
            return {"megatron": lambda: storage.load_megatron(self.paths)}
        chunk = max(self.b.block_size, tario.DEFAULT_CHUNK)
        return {
            reader: partial(storage.load_token_tars, self.paths, chunk, reader)
            for reader in self.b.readers
            if reader in ("tario", "webdataset")
        }

    def loaders(self) -> None:
        """Documents/s, MB/s and time to first sample of each reader, cold and warm; ids/s
        too for token shards."""
        exts = list(self.b.text_exts)
        chunk = max(self.b.block_size, tario.DEFAULT_CHUNK)
        readers: dict[str, dict[str, Any]] = {}
        pool: storage.ParallelLoader | None = None
        tokens = self.shards.kind != "text"
        planned = self._token_readers() if tokens else {r: None for r in self.b.readers}
        try:
            for reader, token_once in planned.items():
                once: Callable[[], storage.Pass]
                if token_once is not None:
                    once = token_once
                elif reader == "tario":
                    once = lambda: storage.load_with_tario(self.paths, exts, chunk)  # noqa: E731
                elif reader == "webdataset":
                    once = lambda: storage.load_with_webdataset(self.paths, exts)  # noqa: E731
                else:
                    workers = self._workers()
                    if workers < 2:
                        log.info(JOB, "tario-parallel skipped: one shard or one CPU core")
                        continue
                    pool = storage.ParallelLoader(workers)
                    once = partial(pool.load, self.paths, exts, chunk)
                log.info(JOB, f"loader {reader}: {self.b.runs} cold + {self.b.runs} warm passes")
                cold, warm, check = self._cold_warm(f"loader:{reader}", once)
                if pool is not None:
                    pool.close()
                    pool = None
                readers[reader] = self._reader_summary(cold, warm, check)
        finally:
            if pool is not None:
                pool.close()
        self.report["readers"] = readers
        if not readers:
            raise CorpusCleanError("no reader could run; check bench.readers")
        best_name = max(readers, key=lambda r: readers[r]["cold"]["text_mb_s"]["median"] or 0.0)
        best = readers[best_name]
        self.report["loader_docs_s"] = {
            "cold": best["cold"]["docs_s"]["median"],
            "warm": best["warm"]["docs_s"]["median"],
            "reader": best_name,
        }
        self.report["loader_mb_s"] = {
            "cold": best["cold"]["text_mb_s"]["median"],
            "warm": best["warm"]["text_mb_s"]["median"],
            "reader": best_name,
        }
        self.report["time_to_first_sample_s"] = {
            "cold": best["cold"]["first_sample_s"]["median"],
            "warm": best["warm"]["first_sample_s"]["median"],
            "reader": best_name,
        }
        if tokens:
            self.report["loader_tokens_s"] = {
                "cold": best["cold"]["tokens_s"]["median"],
                "warm": best["warm"]["tokens_s"]["median"],
                "reader": best_name,
            }
        first = next(iter(readers.values()))
        self.report["shards"].update(
            samples_read=first["samples"],
            docs_read=first["docs"],
            text_bytes_read=first["text_bytes"],
        )
        indexed = [self.shards.nsamples.get(p) for p in self.paths]
        if indexed and all(n is not None for n in indexed):
            expected = sum(n for n in indexed if n is not None)
            self.report["shards"]["samples_indexed"] = expected
            if expected != first["samples"]:
                log.warn(
                    JOB,
                    f"{INDEX_FILE} lists {expected:,} samples in the shards read, the readers "
                    f"found {first['samples']:,}: run `corpusclean pack --verify`",
                )

    def _workers(self) -> int:
        cpus = os.cpu_count() or 1
        wanted = self.b.workers or min(cpus, 8)
        return min(wanted, len(self.paths))

    def _reader_summary(
        self, cold: list[storage.Pass], warm: list[storage.Pass], check: dict[str, Any]
    ) -> dict[str, Any]:
        def side(passes: list[storage.Pass]) -> dict[str, Any]:
            return {
                "docs_s": summarize([_rate(p.docs, p.seconds) for p in passes], 0),
                "samples_s": summarize([_rate(p.items, p.seconds) for p in passes], 0),
                "text_mb_s": summarize([_mb(_rate(p.text_bytes, p.seconds)) for p in passes]),
                "file_mb_s": summarize([_mb(_rate(p.bytes, p.seconds)) for p in passes]),
                "first_sample_s": summarize(
                    [p.first_item_s if p.first_item_s is not None else math.nan for p in passes],
                    5,
                ),
                **(
                    {
                        "tokens_s": summarize(
                            [_rate(p.extra["tokens"], p.seconds) for p in passes], 0
                        )
                    }
                    if "tokens" in passes[0].extra
                    else {}
                ),
            }

        out = {
            "cold": side(cold),
            "warm": side(warm),
            "cold_check": check,
            "samples": cold[0].items,
            "docs": cold[0].docs,
            "text_bytes": cold[0].text_bytes,
        }
        if cold[0].extra.get("workers"):
            out["workers"] = cold[0].extra["workers"]
        return out

    def token_estimate(self) -> None:
        """Bytes per token, by what knows best: token shards (an id's bytes: the loaders' MB/s
        of ids is then tokens/s exactly), the configured figure, the clean output's measured
        one (clean counted its tokens), else the byte-level heuristic over a sample of the
        text, labelled as such."""
        itemsize = self.shards.dtype_bytes
        if itemsize is not None:
            ident = self.shards.index.get("tokenizer") or {}
            self.report["bytes_per_token"] = float(itemsize)
            self.report["bytes_per_token_source"] = (
                f"token shards of {ident.get('name')}: each id takes {itemsize} bytes, so the "
                "loaders' MB/s of ids is their tokens/s"
            )
            return
        if self.cfg.train.bytes_per_token is not None:
            self.report["bytes_per_token"] = self.cfg.train.bytes_per_token
            self.report["bytes_per_token_source"] = "config: train.bytes_per_token"
            return
        measured = _clean_bytes_per_token(self.shards.index)
        if measured is not None:
            self.report["bytes_per_token"], self.report["bytes_per_token_source"] = measured
            return
        texts = list(_sample_texts(self.paths, self.b.text_exts, self.b.token_sample_bytes))
        estimate = throughput.estimate_bytes_per_token(texts)
        if estimate is None:
            estimate = throughput.ASCII_BYTES_PER_TOKEN
            source = "default: no text found in the shards; English prose figure assumed"
        else:
            source = (
                f"estimate: byte-level heuristic over {fmt_bytes(sum(len(t) for t in texts))} "
                "of the shards' text (about 4 bytes/token for English, 2.5 for CJK); no "
                "tokenizer was run, set train.bytes_per_token for an exact figure"
            )
        self.report["bytes_per_token"] = round(estimate, 3)
        self.report["bytes_per_token_source"] = source

    def small_files(self) -> None:
        """The same documents as one file each, cold and warm, in a scratch folder."""
        if self.b.small_files == 0:
            self.report["small_files_docs_s"] = None
            return
        if self.shards.kind != "text":
            # One file a document is a contrast for text; token shards have no text to write.
            self.report["small_files_docs_s"] = None
            log.info(JOB, "small-file contrast skipped: token shards hold no text")
            return
        docs = list(_sample_docs(self.paths, self.b.text_exts, self.b.small_files))
        if not docs:
            self.report["small_files_docs_s"] = None
            log.warn(JOB, "small-file contrast skipped: no text members found")
            return
        scratch = self._scratch_root()
        log.info(JOB, f"small-file contrast: {len(docs):,} files in {scratch}")
        try:
            files = storage.write_small_files(docs, scratch)
            del docs
            cold, warm, check = self._cold_warm(
                "small_files", lambda: storage.read_small_files(files), files
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        cold_docs = summarize([_rate(p.docs, p.seconds) for p in cold], 0)
        warm_docs = summarize([_rate(p.docs, p.seconds) for p in warm], 0)
        self.report["small_files_docs_s"] = {
            "cold": cold_docs["median"],
            "warm": warm_docs["median"],
        }
        metadata_cold = "drop_caches" in check.get("eviction", {}).get("method", "")
        self.report.setdefault("measurements", {})["small_files"] = {
            "files": len(files),
            "bytes": cold[0].bytes,
            "cold_docs_s": cold_docs,
            "warm_docs_s": warm_docs,
            "cold_text_mb_s": summarize([_mb(_rate(p.text_bytes, p.seconds)) for p in cold]),
            "warm_text_mb_s": summarize([_mb(_rate(p.text_bytes, p.seconds)) for p in warm]),
            "cold_check": check,
            "metadata_cold": metadata_cold,
            "note": None
            if metadata_cold
            else "file data was evicted but dentries and inodes stayed cached (set "
            "bench.drop_caches=true as root for a fully cold run): the cold figure flatters "
            "small files",
        }

    def _scratch_root(self) -> Path:
        if self.b.scratch_dir is not None:
            base = Path(self.b.scratch_dir).expanduser()
            check_outside(base, self.shards.folder, "bench.scratch_dir")
            base.mkdir(parents=True, exist_ok=True)
        else:
            base = self.shards.folder.parent
        try:
            return Path(tempfile.mkdtemp(prefix=f".{self.shards.folder.name}.bench-", dir=base))
        except OSError as exc:
            if self.b.scratch_dir is not None:
                raise InputError(f"bench.scratch_dir {base} is not writable: {exc}") from exc
            log.warn(JOB, f"{base} is not writable; small files go to the system temp folder")
            return Path(tempfile.mkdtemp(prefix="corpusclean-bench-"))

    def gds(self) -> None:
        """GPUDirect Storage through kvikio, or the reason it could not run."""
        if self.b.gds == "off":
            self.report["gds"] = {"available": False, "reason": "disabled by bench.gds=off"}
            return
        result = storage.probe_gds(self.paths, runs=self.b.runs, use_drop_caches=self.b.drop_caches)
        if not result["available"] and self.b.gds == "require":
            raise CorpusCleanError(f"bench.gds=require, but GDS cannot run: {result['reason']}")
        log.info(
            JOB,
            "GDS: "
            + (
                f"{result['path']}, {result['kvikio_read_mb_s']['median']} MB/s"
                if result["available"]
                else f"not available ({result['reason']})"
            ),
        )
        self.report["gds"] = result

    def consumption(self) -> None:
        """The run's data rate, the headroom of the best cold loader, and the verdict."""
        t = self.cfg.train
        peak = t.peak_tflops if t.peak_tflops is not None else throughput.peak_tflops(t.gpu)
        plan = throughput.plan_consumption(
            gpus=t.gpus,
            gpu=t.gpu,
            peak_tflops_per_gpu=peak,
            params=t.params,
            mfu=t.mfu,
            seq_len=t.seq_len,
            bytes_per_token=self.report["bytes_per_token"],
            gpus_per_node=t.gpus_per_node,
        )
        loader_bytes_s = (self.report["loader_mb_s"]["cold"] or 0.0) * 1e6
        head = throughput.headroom(loader_bytes_s, plan.required_bytes_s)
        head_node = throughput.headroom(loader_bytes_s, plan.required_bytes_s_per_node)
        self.report["consumption"] = plan.to_dict()
        self.report["required_bytes_s"] = round(plan.required_bytes_s, 1)
        self.report["loader_bytes_s"] = round(loader_bytes_s, 1)
        self.report["headroom"] = round(head, 3) if math.isfinite(head) else None
        self.report["headroom_per_node"] = round(head_node, 3) if math.isfinite(head_node) else None
        self.report["verdict"] = throughput.verdict(plan, loader_bytes_s, self.b.min_headroom)

    def goals(self) -> None:
        """The issue's goals, measured: shards vs small files, best reader vs sequential."""
        goals: dict[str, Any] = {}
        small = self.report.get("small_files_docs_s")
        loader = self.report["loader_docs_s"]
        if small and small["cold"] and loader["cold"]:
            ratio = loader["cold"] / small["cold"]
            goals["cold_shards_vs_small_files"] = {
                "ratio": round(ratio, 2),
                "target": SMALL_FILES_GOAL,
                "met": ratio >= SMALL_FILES_GOAL,
            }
        seq = self.report["sequential_read_mb_s"]["cold"]
        readers = self.report["readers"]
        best = max((r["cold"]["file_mb_s"]["median"] or 0.0 for r in readers.values()), default=0.0)
        if seq:
            ratio = best / seq
            goals["best_reader_vs_sequential_cold"] = {
                "ratio": round(ratio, 3),
                "target": READER_GOAL,
                "met": ratio >= READER_GOAL,
                "note": "tar bytes/s of the fastest reader over sequential-read bytes/s, cold",
            }
        spreads = [
            s
            for r in readers.values()
            for s in (r["cold"]["docs_s"]["spread"], r["warm"]["docs_s"]["spread"])
            if s is not None
        ]
        goals["runs"] = self.b.runs
        goals["max_loader_spread"] = round(max(spreads), 4) if spreads else None
        confirmed = [c["confirmed"] for c in self.cold_checks]
        goals["cold_confirmed"] = (
            None if any(c is None for c in confirmed) else all(bool(c) for c in confirmed)
        )
        self.report["goals"] = goals


def _clean_bytes_per_token(index: dict[str, Any]) -> tuple[float, str] | None:
    """The bytes per token `clean` measured for the output these text shards were packed
    from (its report.json's `tokens`, when it counted them), with its label."""
    clean_dir = (index.get("source") or {}).get("clean_dir")
    if not clean_dir:
        return None
    try:
        report = json.loads((Path(clean_dir) / "report.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    tokens = report.get("tokens") if isinstance(report, dict) else None
    if not isinstance(tokens, dict) or not tokens.get("bytes_per_token"):
        return None
    name = (tokens.get("tokenizer") or {}).get("name")
    source = (
        f"measured: clean counted the output's tokens with {name} "
        f"({tokens.get('output'):,} tokens; {clean_dir}/report.json)"
    )
    return float(tokens["bytes_per_token"]), source


def _sample_texts(paths: Sequence[Path], exts: Sequence[str], limit: int):
    """Decoded text members (or jsonl `text` fields) until `limit` bytes."""
    seen = 0
    for doc in _iter_docs(paths, exts):
        text = doc.decode("utf-8", "replace")
        if doc[:1] == b"{":
            try:
                value = json.loads(text)
                if isinstance(value, dict) and isinstance(value.get("text"), str):
                    text = value["text"]
            except ValueError:
                pass
        yield text
        seen += len(doc)
        if seen >= limit:
            return


def _sample_docs(paths: Sequence[Path], exts: Sequence[str], count: int):
    """The first `count` documents, as the bytes a one-file-per-document layout would hold."""
    for i, doc in enumerate(_iter_docs(paths, exts)):
        if i >= count:
            return
        yield doc


def _iter_docs(paths: Sequence[Path], exts: Sequence[str]):
    for sample in tario.iter_shards(paths):
        for ext in exts:
            data = sample.get(ext)
            if data is None:
                continue
            if ext.endswith("jsonl"):
                yield from (line for line in data.split(b"\n") if line.strip())
            else:
                yield data
