"""`corpusclean bench`: will this storage keep the GPUs fed?

Measures, on the shards `corpusclean pack` wrote (or any WebDataset shard folder):

- sequential read bandwidth, cold (evicted and confirmed through /proc/self/io) and warm;
- 4 KiB random-read IOPS and latency, one thread and several;
- loader throughput (documents/s, MB/s, time to first sample) through the package's own tar
  reader, the same in worker processes, and the webdataset library;
- the same documents as one file each, cold and warm: the metadata cost shards avoid;
- GPUDirect Storage through kvikio where a GPU exists;

and compares the best cold loader rate with what the planned training run consumes (the 6ND
rule), ending with a one-line verdict. Writes JSON (default: `SHARD_DIR.bench.json`, beside the
shard folder, never inside it) and a chart beside it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from corpusclean.errors import CorpusCleanError, InputError, RejectedError, UsageError
from corpusclean.jobs.loadbench import storage, throughput
from corpusclean.jobs.loadbench.page import render_bench_html
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.jobs.runtime.config import Section, dump_config, load_config
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.jobs.shards import integrity as shardcheck
from corpusclean.jobs.shards import tario

JOB = "bench"
INDEX_FILE = "index.json"
INDEX_KIND = "wids-shard-index-v1"
SMALL_FILES_GOAL = 5.0
READER_GOAL = 0.7

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
_BYTE_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1000,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1000**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1000**3,
    "GIB": 1024**3,
    "T": 1024**4,
    "TB": 1000**4,
    "TIB": 1024**4,
}
_COUNT_UNITS = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_bytes(value: Any) -> int:
    """`4MiB` -> 4194304, `1GB` -> 10**9, `512` -> 512 (binary units for K/M/G/T alone)."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 512MiB")
    if isinstance(value, (int, float)):
        return int(value)
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a size (use e.g. 4096, 4MiB, 1GB)")
    return int(float(match.group(1)) * _BYTE_UNITS[unit])


def parse_count(value: Any) -> float:
    """`70B` -> 7e10, `1.3T` -> 1.3e12, `125M` -> 1.25e8, `7e9` -> 7e9."""
    if isinstance(value, bool):
        raise ValueError("expected a count such as 70B")
    if isinstance(value, (int, float)):
        return float(value)
    match = _SIZE_RE.match(str(value))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _COUNT_UNITS:
        raise ValueError(f"{value!r} is not a count (use e.g. 7e9, 70B, 1.3T)")
    return float(match.group(1)) * _COUNT_UNITS[unit]


ByteSize = Annotated[int, BeforeValidator(parse_bytes)]
Count = Annotated[float, BeforeValidator(parse_count)]
Reader = Literal["tario", "tario-parallel", "webdataset"]


class TrainSection(Section):
    """The planned training run (see conf/bench.yaml for each key)."""

    gpus: int = Field(1024, ge=1)
    gpus_per_node: int = Field(8, ge=1)
    gpu: str = "H100"
    peak_tflops: float | None = Field(None, gt=0)
    params: Count = Field(70e9, gt=0)
    mfu: float = Field(0.4, gt=0.0, le=1.0)
    seq_len: int = Field(4096, ge=1)
    bytes_per_token: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _gpu_known(self) -> TrainSection:
        if self.peak_tflops is None:
            throughput.peak_tflops(self.gpu)  # ValueError names the known GPUs
        return self


class BenchSection(Section):
    """What to measure and how (see conf/bench.yaml for each key)."""

    runs: int = Field(3, ge=1, le=100)
    max_bytes: ByteSize = Field(512 << 20, ge=1)
    block_size: ByteSize = Field(4 << 20, ge=4096)
    random_reads: int = Field(2000, ge=0)
    threads: int = Field(8, ge=1, le=256)
    readers: list[Reader] = Field(default_factory=lambda: ["tario", "tario-parallel", "webdataset"])
    workers: int = Field(0, ge=0, le=256)
    small_files: int = Field(2000, ge=0)
    scratch_dir: str | None = None
    drop_caches: bool = False
    gds: Literal["auto", "off", "require"] = "auto"
    text_exts: list[str] = Field(default_factory=lambda: ["txt", "jsonl"], min_length=1)
    token_sample_bytes: ByteSize = Field(4 << 20, ge=1)
    min_headroom: float = Field(2.0, ge=1.0)
    fail_on_starved: bool = False
    chart: bool = True
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _readers_given(self) -> BenchSection:
        if not self.readers:
            raise ValueError("bench.readers must name at least one reader")
        return self


class BenchConfig(Section):
    """The resolved config of `corpusclean bench`."""

    train: TrainSection = Field(default_factory=TrainSection)
    bench: BenchSection = Field(default_factory=BenchSection)


# --------------------------------------------------------------------------- shards


class ShardSet:
    """The shard files of a folder, from its wids `index.json` or, without one, `*.tar`."""

    def __init__(
        self,
        folder: Path,
        paths: list[Path],
        source: str,
        nsamples: dict[Path, int],
        entries: dict[Path, dict[str, Any]] | None = None,
    ):
        self.folder = folder
        self.paths = paths
        self.source = source
        self.nsamples = nsamples
        # Each shard's index.json entry (url, filesize, sha256); without an index, its name.
        self.entries = entries or {p: {"url": p.name} for p in paths}

    @property
    def total_bytes(self) -> int:
        """Bytes of all shards."""
        return sum(p.stat().st_size for p in self.paths)


def discover_shards(shards: str) -> ShardSet:
    """The shards under `shards`; `InputError` names what is missing or malformed."""
    folder = Path(shards).expanduser()
    if not folder.exists():
        raise InputError(f"--shards {shards} does not exist")
    if not folder.is_dir():
        raise InputError(f"--shards {shards} is not a folder of .tar shards")
    folder = folder.resolve()
    index = folder / INDEX_FILE
    if not index.is_file():
        paths = sorted(p for p in folder.glob("*.tar") if p.is_file())
        if not paths:
            raise InputError(f"--shards {shards} holds no {INDEX_FILE} and no *.tar shards")
        return ShardSet(folder, paths, "glob", {})
    try:
        data = json.loads(index.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{index} is not readable JSON ({exc}); fix or remove it") from exc
    if not isinstance(data, dict) or not isinstance(data.get("shardlist"), list):
        raise InputError(f"{index} has no `shardlist` list (expected the wids index form)")
    kind = data.get("__kind__")
    if kind is not None and kind != INDEX_KIND:
        raise InputError(f"{index}: __kind__ is {kind!r}, expected {INDEX_KIND!r}")
    paths: list[Path] = []
    nsamples: dict[Path, int] = {}
    entries: dict[Path, dict[str, Any]] = {}
    for i, entry in enumerate(data["shardlist"]):
        url = entry.get("url") if isinstance(entry, dict) else None
        if not isinstance(url, str) or not url:
            raise InputError(f"{index}: shardlist[{i}] has no url")
        if url.startswith("file://"):
            url = url[len("file://") :]
        elif "://" in url:
            raise InputError(f"{index}: shard {url} is remote; bench reads local shards only")
        path = Path(url) if os.path.isabs(url) else folder / url
        if not path.is_file():
            raise InputError(f"{index} lists {url}, which does not exist under {folder}")
        paths.append(path)
        entries[path] = {**entry, "url": url}
        if isinstance(entry.get("nsamples"), int):
            nsamples[path] = entry["nsamples"]
    if not paths:
        raise InputError(f"{index} lists no shards")
    return ShardSet(folder, paths, INDEX_FILE, nsamples, entries)


def check_shards(shards: ShardSet, used: Sequence[Path]) -> None:
    """Refuse damaged shards before measuring them (RejectedError, exit 3, naming them).

    Every shard's size is checked against index.json (a stat each); the shards to be read are
    checksummed too where the index gives a sha256 (one read, before the cold passes evict).
    The same checks as `corpusclean pack --verify`, which also re-reads the samples.
    """
    entries = shards.entries
    problems = [p for p in (shardcheck.size_problem(f, entries[f]) for f in shards.paths) if p]
    if not problems:
        problems = [p for p in (shardcheck.sha256_problem(f, entries[f]) for f in used) if p]
    if problems:
        raise shardcheck.damaged_error(
            problems,
            len(shards.paths),
            f"nothing measured; run `corpusclean pack --verify {shards.folder}`, then repack",
        )


def select_shards(paths: Sequence[Path], max_bytes: int) -> list[Path]:
    """Whole shards in order up to `max_bytes` (always at least one)."""
    chosen: list[Path] = []
    total = 0
    for path in paths:
        size = path.stat().st_size
        if chosen and total + size > max_bytes:
            break
        chosen.append(path)
        total += size
    return chosen


def default_output(folder: Path) -> Path:
    """`PARENT/NAME.bench.json` for the shard folder `PARENT/NAME`: beside it, never inside."""
    return folder.parent / f"{folder.name}.bench.json"


def _check_outside(path: Path, folder: Path, what: str) -> None:
    resolved = path.expanduser().resolve()
    if resolved == folder or folder in resolved.parents:
        raise InputError(
            f"{what} {path} lies inside the shard folder {folder}; choose a path outside it"
        )


# --------------------------------------------------------------------------- statistics


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


# --------------------------------------------------------------------------- measurements


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
        log.info(JOB, f"sequential reads: {len(self.paths)} shards, {_fmt_bytes(self.used_bytes)}")
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

    def loaders(self) -> None:
        """Documents/s, MB/s and time to first sample of each reader, cold and warm."""
        exts = list(self.b.text_exts)
        chunk = max(self.b.block_size, tario.DEFAULT_CHUNK)
        readers: dict[str, dict[str, Any]] = {}
        pool: storage.ParallelLoader | None = None
        try:
            for reader in self.b.readers:
                once: Callable[[], storage.Pass]
                if reader == "tario":
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
        """Bytes per token: the configured figure, or the heuristic over a sample of the text."""
        if self.cfg.train.bytes_per_token is not None:
            self.report["bytes_per_token"] = self.cfg.train.bytes_per_token
            self.report["bytes_per_token_source"] = "config: train.bytes_per_token"
            return
        texts = list(_sample_texts(self.paths, self.b.text_exts, self.b.token_sample_bytes))
        estimate = throughput.estimate_bytes_per_token(texts)
        if estimate is None:
            estimate = throughput.ASCII_BYTES_PER_TOKEN
            source = "default: no text found in the shards; English prose figure assumed"
        else:
            source = (
                f"estimate: byte-level heuristic over {_fmt_bytes(sum(len(t) for t in texts))} "
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
            _check_outside(base, self.shards.folder, "bench.scratch_dir")
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


# --------------------------------------------------------------------------- output


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf"
    return f"{value:,.{digits}f}"


_Row = tuple[str, str, str, str]  # measurement, cold, warm, spread


def _storage_rows(m: dict[str, Any]) -> list[_Row]:
    """Rows of the raw device measurements: sequential MB/s, random IOPS and latency."""
    seq = m.get("sequential", {})
    rows: list[_Row] = [
        (
            "sequential read MB/s",
            _fmt(seq.get("cold_mb_s", {}).get("median"), 1),
            _fmt(seq.get("warm_mb_s", {}).get("median"), 1),
            _spread(seq.get("cold_mb_s"), seq.get("warm_mb_s")),
        )
    ]
    for key, v in (m.get("random") or {}).items():
        if key.startswith("threads_"):
            n = key.split("_", 1)[1]
            rows.append(
                (
                    f"random 4K IOPS, {n} thread(s)",
                    _fmt(v["iops"]["median"]),
                    "",
                    _spread(v["iops"]),
                )
            )
            rows.append(
                (
                    f"  latency p50 / p99 us, {n}",
                    f"{_fmt(v['p50_us']['median'], 1)} / {_fmt(v['p99_us']['median'], 1)}",
                    "",
                    "",
                )
            )
    return rows


def _reader_rows(name: str, r: dict[str, Any]) -> list[_Row]:
    """Rows of one loader: docs/s, text and tar MB/s, and time to the first sample."""
    label = name + (f" ({r['workers']} workers)" if r.get("workers") else "")
    cold, warm = r["cold"], r["warm"]
    return [
        (
            f"{label} docs/s",
            _fmt(cold["docs_s"]["median"]),
            _fmt(warm["docs_s"]["median"]),
            _spread(cold["docs_s"], warm["docs_s"]),
        ),
        (
            "  text MB/s | tar MB/s",
            f"{_fmt(cold['text_mb_s']['median'], 1)} | {_fmt(cold['file_mb_s']['median'], 1)}",
            f"{_fmt(warm['text_mb_s']['median'], 1)} | {_fmt(warm['file_mb_s']['median'], 1)}",
            "",
        ),
        (
            "  first sample ms",
            _fmt(_ms(cold["first_sample_s"]["median"]), 2),
            _fmt(_ms(warm["first_sample_s"]["median"]), 2),
            "",
        ),
    ]


def _layout_rows(report: dict[str, Any]) -> list[_Row]:
    """Rows of the other layouts: one file per document, and GDS reads into GPU memory."""
    rows: list[_Row] = []
    small = report.get("measurements", {}).get("small_files")
    if small:
        rows.append(
            (
                f"small files ({small['files']:,}) docs/s",
                _fmt(small["cold_docs_s"]["median"]),
                _fmt(small["warm_docs_s"]["median"]),
                _spread(small["cold_docs_s"], small["warm_docs_s"]),
            )
        )
    gds = report.get("gds") or {}
    if gds.get("available"):
        rows.append(
            (
                "GDS kvikio | host+copy MB/s",
                _fmt(gds["kvikio_read_mb_s"]["median"], 1),
                _fmt(gds["host_read_copy_mb_s"]["median"], 1),
                "",
            )
        )
    else:
        rows.append(("GDS", "not available", "", ""))
    return rows


def _table_lines(rows: Sequence[_Row]) -> list[str]:
    """The rows under a header, in columns sized to fit: names left, figures right."""
    head: _Row = ("measurement", "cold", "warm", "spread")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(head), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _summary_lines(report: dict[str, Any]) -> list[str]:
    """The lines under the table: tokens, the run's needed rate, goals and GDS's reason."""
    plan = report.get("consumption", {})
    lines = [
        "",
        f"bytes/token {report.get('bytes_per_token')} ({report.get('bytes_per_token_source')})",
        f"run needs {throughput.format_rate(report.get('required_bytes_s') or 0)} "
        f"({_fmt(plan.get('tokens_s'))} tokens/s; "
        f"{throughput.format_rate(plan.get('required_bytes_s_per_node') or 0)} per node of "
        f"{plan.get('gpus_per_node')}); best cold loader "
        f"{throughput.format_rate(report.get('loader_bytes_s') or 0)} "
        f"({report.get('loader_mb_s', {}).get('reader')})",
    ]
    for name, goal in (report.get("goals") or {}).items():
        if isinstance(goal, dict):
            state = "met" if goal["met"] else "NOT met"
            lines.append(f"goal {name}: {goal['ratio']} (target {goal['target']}) {state}")
    gds = report.get("gds") or {}
    if not gds.get("available"):
        lines.append(f"GDS: {gds.get('reason')}")
    return lines


def render_table(report: dict[str, Any]) -> str:
    """The report as a fixed-width table for the terminal."""
    rows = _storage_rows(report.get("measurements", {}))
    for name, r in report.get("readers", {}).items():
        rows += _reader_rows(name, r)
    rows += _layout_rows(report)
    return "\n".join(_table_lines(rows) + _summary_lines(report))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _spread(*summaries: dict[str, Any] | None) -> str:
    values = [s["spread"] for s in summaries if s and s.get("spread") is not None]
    return f"{max(values):.0%}" if values else ""


def chart_rows(report: dict[str, Any]) -> list[tuple[str, float]]:
    """(label, MB/s) of every measured rate that the chart shows."""
    rows: list[tuple[str, float]] = []
    m = report.get("measurements", {})
    seq = m.get("sequential", {})
    for side in ("cold", "warm"):
        value = seq.get(f"{side}_mb_s", {}).get("median")
        if value:
            rows.append((f"sequential read, {side} (tar bytes)", value))
    for name, r in report.get("readers", {}).items():
        for side in ("cold", "warm"):
            value = r[side]["text_mb_s"]["median"]
            if value:
                rows.append((f"{name}, {side} (text)", value))
    small = m.get("small_files")
    if small:
        for side in ("cold", "warm"):
            value = small[f"{side}_text_mb_s"]["median"]
            if value:
                rows.append((f"small files, {side} (text)", value))
    gds = report.get("gds") or {}
    if gds.get("available"):
        rows.append(("kvikio to GPU", gds["kvikio_read_mb_s"]["median"]))
        rows.append(("host read + copy to GPU", gds["host_read_copy_mb_s"]["median"]))
    return rows


def write_chart(report: dict[str, Any], json_path: Path) -> Path | None:
    """A bar chart of the rates against the required rate: PNG with matplotlib, else SVG."""
    rows = chart_rows(report)
    if not rows:
        return None
    required = (report.get("required_bytes_s") or 0) / 1e6
    per_node = (report.get("consumption", {}).get("required_bytes_s_per_node") or 0) / 1e6
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = json_path.with_suffix(".svg")
        path.write_text(_svg_chart(rows, required, per_node, report.get("verdict", "")), "utf-8")
        return path
    path = json_path.with_suffix(".png")
    labels = [r[0] for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.8))
    colors = [_bar_color(label) for label in labels]
    ax.barh(labels, values, color=colors)
    ax.set_xscale("log")
    if required > 0:
        ax.axvline(required, color="#d62728", linewidth=2, label="required (whole run)")
    if 0 < per_node < required:
        ax.axvline(per_node, color="#ff7f0e", linestyle="--", label="required per node")
    ax.set_xlabel("MB/s (log scale)")
    ax.set_title(report.get("verdict", ""), fontsize=9, wrap=True)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bar_color(label: str) -> str:
    if "cold" in label:
        return "#1f4e79"
    if "warm" in label:
        return "#9ecae1"
    return "#4c78a8"


def _svg_chart(rows: list[tuple[str, float]], required: float, per_node: float, title: str) -> str:
    """A log-scale horizontal bar chart as plain SVG."""
    from xml.sax.saxutils import escape

    values = [v for _, v in rows] + [x for x in (required, per_node) if x > 0]
    lo = math.floor(math.log10(max(min(values), 1e-6)))
    hi = math.ceil(math.log10(max(values) * 1.01))
    hi = max(hi, lo + 1)
    left, width, bar, gap, top = 260, 460, 18, 8, 40
    height = top + len(rows) * (bar + gap) + 40

    def x(v: float) -> float:
        return left + width * (math.log10(max(v, 10**lo)) - lo) / (hi - lo)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="10" y="20" font-size="12">{escape(title)}</text>',
    ]
    for i, (label, value) in enumerate(rows):
        y = top + i * (bar + gap)
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y}" width="{x(value) - left:.1f}" height="{bar}" '
            f'fill="{_bar_color(label)}"/>'
        )
        parts.append(f'<text x="{x(value) + 4:.1f}" y="{y + 13}">{value:,.1f}</text>')
    axis_y = top + len(rows) * (bar + gap)
    for p in range(lo, hi + 1):
        parts.append(
            f'<text x="{x(10**p):.1f}" y="{axis_y + 14}" text-anchor="middle">{10**p:g}</text>'
        )
    parts.append(f'<text x="{left + width / 2}" y="{axis_y + 30}">MB/s (log scale)</text>')
    for value, color, label in (
        (required, "#d62728", "required"),
        (per_node, "#ff7f0e", "per node"),
    ):
        if value > 0:
            parts.append(
                f'<line x1="{x(value):.1f}" y1="{top - 6}" x2="{x(value):.1f}" y2="{axis_y}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
            parts.append(
                f'<text x="{x(value) + 3:.1f}" y="{top - 8}" fill="{color}">{label}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(report, indent=2, allow_nan=False, default=str) + "\n")


def _environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "root": hasattr(os, "geteuid") and os.geteuid() == 0,
        "proc_self_io": storage.proc_io() is not None,
    }


def _no_nan(value: Any) -> Any:
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


# --------------------------------------------------------------------------- job


def run_bench(cfg: BenchConfig, shards_dir: str, output: str | None) -> tuple[dict[str, Any], Path]:
    """Run every measurement and write the JSON (and chart); returns the report and its path."""
    started = time.perf_counter()
    shards = discover_shards(shards_dir)
    out = Path(output).expanduser() if output else default_output(shards.folder)
    if out.is_dir():
        out = out / "bench.json"
    _check_outside(out, shards.folder, "--output")
    paths = select_shards(shards.paths, cfg.bench.max_bytes)
    check_shards(shards, paths)
    out.parent.mkdir(parents=True, exist_ok=True)
    bench = Bench(cfg, shards, paths)
    used = bench.used_bytes
    bench.report["shards"] = {
        "dir": str(shards.folder),
        "source": shards.source,
        "files_total": len(shards.paths),
        "bytes_total": shards.total_bytes,
        "files_used": len(paths),
        "bytes_used": used,
    }
    try:
        import psutil

        available = psutil.virtual_memory().available
        if used > 0.5 * available:
            log.warn(
                JOB,
                f"{_fmt_bytes(used)} of shards against {_fmt_bytes(available)} free memory: "
                "warm passes may be partly cold; lower bench.max_bytes",
            )
    except ImportError:
        pass
    bench.sequential()
    bench.random()
    bench.loaders()
    bench.token_estimate()
    bench.small_files()
    bench.gds()
    bench.consumption()
    bench.goals()
    report = bench.report
    report["cold_checks"] = bench.cold_checks
    report["environment"] = _environment()
    report["config"] = cfg.model_dump(mode="json")
    report["seconds"] = round(time.perf_counter() - started, 3)
    report = _no_nan(report)
    chart = write_chart(report, out) if cfg.bench.chart else None
    report["chart"] = chart.name if chart is not None else None
    # The page for people (jobs/loadbench/page.py), beside the JSON: `bench.html` for bench.json.
    page = out.with_suffix(".html")
    report["page"] = page.name
    _write_json(out, report)
    write_text_atomic(page, render_bench_html(report))
    return report, out


def _body(args: Any) -> int:
    cfg = load_config(BenchConfig, "bench", args.config, args.set)
    if args.print_config:
        print(dump_config(cfg), end="")
        return 0
    if not args.shards:
        raise UsageError("--shards SHARD_DIR is required")
    report, out = run_bench(cfg, args.shards, args.output)
    print(render_table(report))
    also = [name for name in (report.get("page"), report.get("chart")) if name]
    log.info(JOB, f"wrote {out}" + (f" and {', '.join(also)}" if also else ""))
    print(report["verdict"])
    if report["verdict"].startswith("STARVED") and cfg.bench.fail_on_starved:
        raise RejectedError(f"{report['verdict']} (bench.fail_on_starved=true)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean bench --shards SHARD_DIR [--output bench.json] [--set key=value]...`."""
    parser = new_parser(JOB, "Measure whether the shards load fast enough to keep the GPUs fed.")
    parser.add_argument("--shards", help="folder of WebDataset .tar shards (with index.json)")
    parser.add_argument(
        "--output",
        help="report JSON path, or a folder for bench.json (default: SHARD_DIR.bench.json "
        "beside the shard folder, never inside it); the chart is written beside it",
    )
    parser.add_argument("--config", help="YAML file with train/bench sections")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.gpus=64 (repeatable)",
    )
    parser.add_argument("--print-config", action="store_true", help="print the resolved config")
    return run_job(JOB, parser, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
