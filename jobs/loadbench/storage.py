"""Storage measurements for `corpusclean bench`: honest cold reads, IOPS, loaders, small files, GDS.

Cold means the bytes came from the device, not the page cache. Files are evicted with
`posix_fadvise(POSIX_FADV_DONTNEED)` (no root needed; dirty pages are flushed first, since
the kernel keeps those), optionally followed by `drop_caches` (root; it also drops the dentry
and inode caches, which only a whole-machine drop can). Every cold read is then checked
against the kernel's own accounting: `read_bytes` of `/proc/self/io` counts what this process
caused to be fetched from storage, so a "cold" figure whose bytes were not fetched is reported
as unconfirmed rather than quoted. Page residency (`mincore`) is reported after eviction too.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import importlib
import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from corpusclean.jobs.shards import tario

PAGE = mmap.PAGESIZE
RANDOM_BLOCK = 4096
# A cold read is confirmed when the kernel fetched at least this share of its bytes.
COLD_CONFIRM_FRACTION = 0.9


# --------------------------------------------------------------------------- accounting


def proc_io() -> dict[str, int] | None:
    """This process's I/O counters from `/proc/self/io`, or None where the kernel has none."""
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            return {k: int(v) for k, v in (line.split(":", 1) for line in f if ":" in line)}
    except (OSError, ValueError):
        return None


class DeviceBytes:
    """Bytes this process read from storage during a `with` block (`read_bytes` of /proc/self/io).

    `bytes` stays None where `/proc/self/io` is missing (no task I/O accounting in the kernel,
    or a sandbox that hides it).
    """

    def __init__(self) -> None:
        self.bytes: int | None = None
        self._start: int | None = None

    def __enter__(self) -> DeviceBytes:
        counters = proc_io()
        self._start = None if counters is None else counters.get("read_bytes")
        return self

    def __exit__(self, *exc: object) -> None:
        counters = proc_io()
        if self._start is not None and counters is not None and "read_bytes" in counters:
            self.bytes = counters["read_bytes"] - self._start


def cold_check(device_bytes: int | None, logical_bytes: int) -> dict[str, Any]:
    """Whether a cold read really came from the device, with the evidence."""
    if device_bytes is None:
        return {
            "confirmed": None,
            "device_bytes": None,
            "device_fraction": None,
            "note": "/proc/self/io is unavailable: cold reads could not be confirmed",
        }
    fraction = device_bytes / logical_bytes if logical_bytes else 0.0
    confirmed = fraction >= COLD_CONFIRM_FRACTION
    note = (
        "the kernel fetched the bytes from storage"
        if confirmed
        else "most bytes came from a cache (page cache not evicted, or a network/FUSE file "
        "system whose reads /proc/self/io does not count): treat cold figures as warm"
    )
    return {
        "confirmed": confirmed,
        "device_bytes": device_bytes,
        "device_fraction": round(fraction, 4),
        "note": note,
    }


# --------------------------------------------------------------------------- eviction

_libc: ctypes.CDLL | None = None


def _get_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError:
            return None
    return _libc


def page_residency(path: str | os.PathLike[str]) -> float | None:
    """Share of a file's pages now in the page cache (`mincore`), or None where unsupported."""
    libc = _get_libc()
    size = os.path.getsize(path)
    if libc is None or size == 0 or not hasattr(libc, "mincore"):
        return None if size else 0.0
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(addr, size, vec) != 0:
                return None
            resident = sum(b & 1 for b in vec.raw)
            return resident / pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def drop_caches() -> str | None:
    """Flush and drop the whole page, dentry and inode cache; None on success, else why not."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as f:
            f.write("3\n")
        return None
    except PermissionError:
        return "drop_caches needs root (and a writable /proc/sys, which containers often lack)"
    except OSError as exc:
        return f"drop_caches failed: {exc.strerror or exc}"


@dataclass
class Eviction:
    """What was done to make the next read cold, and how much of the files stayed cached."""

    files: int
    method: str
    resident_after: float | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def evict(
    paths: Sequence[str | os.PathLike[str]], *, use_drop_caches: bool = False, check: bool = True
) -> Eviction:
    """Drop `paths` from the page cache (dirty pages are written back first)."""
    refused: str | None = None
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            # DONTNEED leaves dirty pages in place: freshly written shards must reach the disk.
            with contextlib.suppress(OSError):  # read-only file systems have nothing dirty
                os.fsync(fd)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            except OSError as exc:
                refused = f"posix_fadvise refused on {path}: {exc.strerror or exc}"
        finally:
            os.close(fd)
    method = "posix_fadvise(DONTNEED)" if refused is None else "none (fadvise refused)"
    error = refused
    if use_drop_caches:
        dropped = drop_caches()
        if dropped is None:
            method = "drop_caches" if refused else method + " + drop_caches"
        error = "; ".join(e for e in (refused, dropped) if e) or None
    resident = None
    if check and paths:
        # A sample of files: mincore on thousands of small files costs more than the read.
        sample = list(paths)[:: max(1, len(paths) // 64)]
        values = [page_residency(p) for p in sample]
        known = [v for v in values if v is not None]
        resident = round(statistics.fmean(known), 4) if known else None
    return Eviction(len(paths), method, resident, error)


# --------------------------------------------------------------------------- sequential


@dataclass
class Pass:
    """One timed pass over files."""

    seconds: float
    bytes: int
    device_bytes: int | None
    items: int = 0  # samples, documents or reads, by measurement
    docs: int = 0
    text_bytes: int = 0
    first_item_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def sequential_read(paths: Sequence[Path], block_size: int) -> Pass:
    """Read the files front to back in `block_size` blocks into one reused buffer."""
    buf = bytearray(block_size)
    view = memoryview(buf)
    total = 0
    with DeviceBytes() as dev:
        start = time.perf_counter()
        for path in paths:
            with open(path, "rb", buffering=0) as f:
                with contextlib.suppress(OSError):
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
                while n := f.readinto(view):
                    total += n
        seconds = time.perf_counter() - start
    return Pass(seconds=seconds, bytes=total, device_bytes=dev.bytes)


# --------------------------------------------------------------------------- random


def _open_direct(path: Path, block: int) -> int | None:
    """An O_DIRECT descriptor, or None where the file system refuses direct I/O."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | flag)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise
    # Some file systems accept the flag at open and refuse the reads: try one.
    probe = mmap.mmap(-1, block)
    try:
        os.preadv(fd, [probe], 0)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return None
        raise
    finally:
        probe.close()
    return fd


def random_offsets(
    sizes: Sequence[int], count: int, seed: int, block: int = RANDOM_BLOCK
) -> list[tuple[int, int]]:
    """`count` distinct (file index, block-aligned offset) pairs, uniform over all blocks.

    Distinct blocks matter for buffered reads: a repeated block would be a cache hit.
    """
    cumulative = []
    total = 0
    for size in sizes:
        total += max(0, size // block)
        cumulative.append(total)
    if total == 0:
        return []
    rng = random.Random(seed)
    picks = rng.sample(range(total), min(count, total))
    out = []
    for pick in picks:
        lo, hi = 0, len(cumulative) - 1
        while lo < hi:  # first file whose cumulative block count exceeds the pick
            mid = (lo + hi) // 2
            if cumulative[mid] > pick:
                hi = mid
            else:
                lo = mid + 1
        before = cumulative[lo - 1] if lo else 0
        out.append((lo, (pick - before) * block))
    return out


def random_reads(
    paths: Sequence[Path],
    offsets: Sequence[tuple[int, int]],
    threads: int,
    *,
    direct: bool = True,
    block: int = RANDOM_BLOCK,
) -> Pass:
    """`block`-byte reads at `offsets` from `threads` threads; latencies in `extra`.

    O_DIRECT bypasses the page cache, so every read reaches the device. Where direct I/O is
    refused the files are read buffered with readahead off (`POSIX_FADV_RANDOM`); the caller
    evicts them first and passes distinct offsets, so each read is still a miss.
    """
    fds: list[int] = []
    method = "O_DIRECT"
    try:
        for path in paths:
            fd = _open_direct(path, block) if direct else None
            if fd is None:
                method = "buffered, evicted, readahead off"
                fd = os.open(path, os.O_RDONLY)
                with contextlib.suppress(OSError):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            fds.append(fd)
        chunks = [list(offsets[i::threads]) for i in range(threads)]

        def worker(items: list[tuple[int, int]]) -> list[int]:
            # Anonymous mmap memory is page aligned, as O_DIRECT requires.
            buf = mmap.mmap(-1, block)
            latencies = []
            clock = time.perf_counter_ns
            try:
                for index, offset in items:
                    t0 = clock()
                    os.preadv(fds[index], [buf], offset)
                    latencies.append(clock() - t0)
            finally:
                buf.close()
            return latencies

        with DeviceBytes() as dev:
            start = time.perf_counter()
            if threads == 1:
                results = [worker(chunks[0])]
            else:
                with ThreadPoolExecutor(max_workers=threads) as pool:
                    results = list(pool.map(worker, chunks))
            seconds = time.perf_counter() - start
    finally:
        for fd in fds:
            os.close(fd)
    latencies_ns = sorted(x for r in results for x in r)
    extra = {"method": method}
    if latencies_ns:
        extra["p50_us"] = _percentile(latencies_ns, 0.50) / 1000
        extra["p99_us"] = _percentile(latencies_ns, 0.99) / 1000
    return Pass(
        seconds=seconds,
        bytes=len(latencies_ns) * block,
        device_bytes=dev.bytes,
        items=len(latencies_ns),
        extra=extra,
    )


def _percentile(sorted_values: Sequence[int], q: float) -> float:
    """Linear-interpolated percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# --------------------------------------------------------------------------- loaders


def count_docs(sample: dict[str, Any], text_exts: Sequence[str]) -> tuple[int, int]:
    """(documents, text bytes) in one sample: one per text member, one per line of `jsonl`."""
    docs = 0
    nbytes = 0
    for ext in text_exts:
        data = sample.get(ext)
        if data is None:
            continue
        nbytes += len(data)
        if ext.endswith("jsonl"):
            lines = data.count(b"\n")
            docs += lines + (1 if data and not data.endswith(b"\n") else 0)
        else:
            docs += 1
    return docs, nbytes


def _drain(
    samples: Iterable[dict[str, Any]],
    text_exts: Sequence[str],
    start: float,
    tokens: bool = False,
) -> Pass:
    """Every sample, counted: its documents and text bytes (`text_exts`), or with `tokens`
    its `.npy` ids (`extra['tokens']`) and their bytes, a document a sample."""
    items = docs = text_bytes = ids = 0
    first: float | None = None
    for sample in samples:
        if first is None:
            first = time.perf_counter() - start
        items += 1
        if tokens:
            n, b = npy_ids(sample["npy"]) if "npy" in sample else (0, 0)
            ids += n
            docs += 1
        else:
            d, b = count_docs(sample, text_exts)
            docs += d
        text_bytes += b
    seconds = time.perf_counter() - start
    return Pass(
        seconds=seconds,
        bytes=0,
        device_bytes=None,
        items=items,
        docs=docs,
        text_bytes=text_bytes,
        first_item_s=first,
        extra={"tokens": ids} if tokens else {},
    )


def load_with_tario(paths: Sequence[Path], text_exts: Sequence[str], chunk_size: int) -> Pass:
    """Every sample of the shards through the package's own tar reader, in one process."""
    with DeviceBytes() as dev:
        start = time.perf_counter()
        result = _drain(tario.iter_shards(paths, chunk_size=chunk_size), text_exts, start)
    result.device_bytes = dev.bytes
    result.bytes = sum(p.stat().st_size for p in paths)
    return result


def npy_ids(data: bytes) -> tuple[int, int]:
    """(ids, bytes of ids) in an `.npy` member, from its header (NumPy's format 1.0 or 2.0)."""
    major = data[6]
    width = 2 if major == 1 else 4
    header = 8 + width + int.from_bytes(data[8 : 8 + width], "little")
    text = data[8 + width : header].decode("latin1")
    itemsize = int(text.split("'descr': '", 1)[1].split("'", 1)[0][2:])
    return (len(data) - header) // itemsize, len(data) - header


def load_token_tars(paths: Sequence[Path], chunk_size: int, reader: str = "tario") -> Pass:
    """Every sample of WebDataset token shards (`.npy` ids), through the package's tar
    reader or `webdataset.WebDataset`: ids a second, as a training loader gets them."""
    with DeviceBytes() as dev:
        start = time.perf_counter()
        if reader == "webdataset":
            import webdataset as wds

            samples: Iterable[dict[str, Any]] = wds.WebDataset(
                [str(p) for p in paths], shardshuffle=False, empty_check=False
            )
        else:
            samples = tario.iter_shards(paths, chunk_size=chunk_size)
        result = _drain(samples, (), start, tokens=True)
    result.device_bytes = dev.bytes
    result.bytes = sum(p.stat().st_size for p in paths)
    return result


def load_megatron(paths: Sequence[Path]) -> Pass:
    """Every document of Megatron shards, as Megatron-LM's dataset reads them: the `.idx`
    parsed, the `.bin` memory-mapped, each document's ids taken from it by its pointer and
    touched (summed), so each page is read from storage."""
    import numpy as np

    from corpusclean.pipelines.megatron import read_index

    docs = tokens = nbytes = 0
    first: float | None = None
    with DeviceBytes() as dev:
        start = time.perf_counter()
        for path in paths:
            index = read_index(path.with_suffix(".idx").read_bytes())
            if not index.tokens:
                continue
            dtype = index.dtype.newbyteorder("<")
            ids = np.memmap(path, dtype=dtype, mode="r")
            size = dtype.itemsize
            for length, pointer in zip(
                index.lengths.tolist(), index.pointers.tolist(), strict=True
            ):
                at = pointer // size
                int(ids[at : at + length].sum(dtype=np.int64))
                if first is None:
                    first = time.perf_counter() - start
            docs += len(index.lengths)
            tokens += index.tokens
            nbytes += index.bin_bytes
            del ids
        seconds = time.perf_counter() - start
    return Pass(
        seconds=seconds,
        bytes=sum(p.stat().st_size for p in paths),
        device_bytes=dev.bytes,
        items=docs,
        docs=docs,
        text_bytes=nbytes,
        first_item_s=first,
        extra={"tokens": tokens},
    )


def load_with_webdataset(paths: Sequence[Path], text_exts: Sequence[str]) -> Pass:
    """Every sample of the shards through `webdataset.WebDataset`, as a training loader reads."""
    import webdataset as wds

    with DeviceBytes() as dev:
        start = time.perf_counter()
        dataset = wds.WebDataset([str(p) for p in paths], shardshuffle=False, empty_check=False)
        result = _drain(dataset, text_exts, start)
    result.device_bytes = dev.bytes
    result.bytes = sum(p.stat().st_size for p in paths)
    return result


def _worker_scan(paths: list[str], text_exts: list[str], chunk_size: int) -> dict[str, Any]:
    """A worker process's share of a parallel load (runs in the worker)."""
    with DeviceBytes() as dev:
        start = time.perf_counter()
        result = _drain(tario.iter_shards(paths, chunk_size=chunk_size), text_exts, start)
    return {
        "items": result.items,
        "docs": result.docs,
        "text_bytes": result.text_bytes,
        "first_item_s": result.first_item_s,
        "device_bytes": dev.bytes,
    }


class ParallelLoader:
    """The shards split over worker processes, as `DataLoader(num_workers=N)` splits them.

    Workers are fresh interpreters (`python -m corpusclean.jobs.loadbench.storage --worker`) talking
    JSON lines over pipes: unlike multiprocessing's fork they inherit no threads of the caller
    (a SparkSession's, say), and unlike spawn they never re-run the caller's main script.
    They start before timing, as a training run starts its loader workers once; each counts
    its own shards' documents, as it would tokenise them, and reports totals.
    """

    def __init__(self, workers: int) -> None:
        env = dict(os.environ)
        # The parent's import path, so a package attached at run time (--py-files) resolves.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.workers = workers
        self._procs: list[subprocess.Popen[str]] = []
        try:
            for _ in range(workers):
                self._procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "corpusclean.jobs.loadbench.storage", "--worker"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                        bufsize=1,
                        env=env,
                    )
                )
            for proc in self._procs:
                self._reply(proc)  # the ready line
        except BaseException:
            self.close()
            raise

    def _reply(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            raise RuntimeError(f"a loader worker exited with code {code} (its stderr is above)")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"a loader worker failed: {reply['error']}")
        return reply

    def load(self, paths: Sequence[Path], text_exts: Sequence[str], chunk_size: int) -> Pass:
        """One timed pass over the shards, shard i going to worker i mod N."""
        shares = [[str(p) for p in paths[i :: self.workers]] for i in range(self.workers)]
        busy = [(proc, share) for proc, share in zip(self._procs, shares, strict=True) if share]
        start = time.perf_counter()
        for proc, share in busy:
            assert proc.stdin is not None
            request = {"paths": share, "text_exts": list(text_exts), "chunk_size": chunk_size}
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        parts = [self._reply(proc) for proc, _ in busy]
        seconds = time.perf_counter() - start
        device = [p["device_bytes"] for p in parts]
        firsts = [p["first_item_s"] for p in parts if p["first_item_s"] is not None]
        return Pass(
            seconds=seconds,
            bytes=sum(p.stat().st_size for p in paths),
            device_bytes=None if any(d is None for d in device) else sum(device),
            items=sum(p["items"] for p in parts),
            docs=sum(p["docs"] for p in parts),
            text_bytes=sum(p["text_bytes"] for p in parts),
            first_item_s=min(firsts) if firsts else None,
            extra={"workers": len(busy)},
        )

    def close(self) -> None:
        """Stop the worker processes."""
        for proc in self._procs:
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()  # end of input: the worker loop returns
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self._procs = []


def worker_loop(requests: IO[str], replies: IO[str]) -> None:
    """A loader worker: one JSON request per input line, one JSON reply per output line."""
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply = _worker_scan(request["paths"], request["text_exts"], request["chunk_size"])
        except Exception as exc:  # reported to the parent, which raises it there
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


# --------------------------------------------------------------------------- small files


def _syncfs(directory: Path) -> None:
    """Flush one file system (syncfs) rather than the whole machine, where libc has it."""
    libc = _get_libc()
    fd = os.open(directory, os.O_RDONLY)
    try:
        if libc is not None and hasattr(libc, "syncfs") and libc.syncfs(fd) == 0:
            return
    finally:
        os.close(fd)
    os.sync()


def write_small_files(docs: Iterable[bytes], root: Path, per_dir: int = 1000) -> list[Path]:
    """Each document as its own file under `root` (1,000 per folder), flushed to the device."""
    paths = []
    for i, data in enumerate(docs):
        folder = root / f"{i // per_dir:05d}"
        if i % per_dir == 0:
            folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:09d}.txt"
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    if paths:
        _syncfs(root)
    return paths


def read_small_files(paths: Sequence[Path]) -> Pass:
    """Open, read and close each file in order, as a one-file-per-document loader does."""
    total = 0
    first: float | None = None
    with DeviceBytes() as dev:
        start = time.perf_counter()
        for path in paths:
            with open(path, "rb") as f:
                total += len(f.read())
            if first is None:
                first = time.perf_counter() - start
        seconds = time.perf_counter() - start
    return Pass(
        seconds=seconds,
        bytes=total,
        device_bytes=dev.bytes,
        items=len(paths),
        docs=len(paths),
        text_bytes=total,
        first_item_s=first,
    )


# --------------------------------------------------------------------------- GDS

GDS_CHUNK = 64 << 20


def _kvikio_compat_mode(kvikio: Any) -> bool | None:
    """True when kvikio reads through POSIX (compat mode, no GPUDirect); None if unknown."""
    defaults = getattr(kvikio, "defaults", None)
    if defaults is None:
        return None
    if hasattr(defaults, "is_compat_mode_preferred"):  # kvikio >= 24.12
        return bool(defaults.is_compat_mode_preferred())
    if hasattr(defaults, "compat_mode"):  # older: a bool, later a CompatMode enum
        value = defaults.compat_mode()
        if isinstance(value, bool):
            return value
        name = getattr(value, "name", str(value)).upper()
        if name.endswith("ON"):
            return True
        if name.endswith("OFF"):
            return False
    return None


def _cufile_gds_available(importer: Callable[[str], Any]) -> bool | None:
    """cuFile's own answer to whether GPUDirect Storage is set up, None if it cannot say."""
    try:
        driver = importer("kvikio.cufile_driver")
        if hasattr(driver, "get"):  # kvikio >= 25.02
            return bool(driver.get("is_gds_available"))
        return bool(driver.DriverProperties().is_gds_available)
    except Exception:
        return None


def _summary_mb_s(values: Sequence[float]) -> dict[str, Any]:
    med = statistics.median(values)
    return {
        "median": round(med, 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "spread": round((max(values) - min(values)) / med, 4) if med else None,
        "runs": [round(v, 2) for v in values],
    }


class _GdsUnavailableError(Exception):
    """Why the GDS probe cannot measure; the record so far goes out with this as `reason`."""


def _gds_modules(importer: Callable[[str], Any], record: dict[str, Any]) -> tuple[Any, Any, Any]:
    """kvikio, cupy and numpy, noting kvikio's version in `record`."""
    try:
        kvikio = importer("kvikio")
    except Exception as exc:
        raise _GdsUnavailableError(
            f"kvikio is not installed ({type(exc).__name__}: {exc}); "
            "install the `gpu` extra: pip install 'corpusclean[gpu]'"
        ) from exc
    record["kvikio_version"] = getattr(kvikio, "__version__", None)
    try:
        cupy = importer("cupy")
        numpy = importer("numpy")
    except Exception as exc:
        raise _GdsUnavailableError(f"cupy is not importable ({type(exc).__name__}: {exc})") from exc
    return kvikio, cupy, numpy


def _gds_device(
    kvikio: Any, cupy: Any, importer: Callable[[str], Any], record: dict[str, Any]
) -> None:
    """Check a CUDA device is visible; note its name and kvikio's read mode in `record`."""
    try:
        devices = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # no libcuda, no driver, or no device visible
        raise _GdsUnavailableError(f"no usable CUDA device ({type(exc).__name__}: {exc})") from exc
    if devices < 1:
        raise _GdsUnavailableError("no CUDA device is visible")
    try:
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props.get("name", b"")
        record["device"] = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        record["device"] = None
    try:
        record["compat_mode"] = _kvikio_compat_mode(kvikio)
    except Exception:
        record["compat_mode"] = None
    record["cufile_gds_available"] = _cufile_gds_available(importer)


@dataclass
class _GdsReads:
    """The timed passes of the GDS probe: files into one device buffer, two ways."""

    kvikio: Any
    cupy: Any
    files: list[Path]
    total: int
    chunk: int
    use_drop_caches: bool
    device_buf: Any = None
    host: Any = None

    def verified_first_read(self) -> bool:
        """Allocate the device buffer and read the first file's first chunk into it."""
        # The first read is where a missing libcuda/libcufile shows: check it and the bytes.
        self.device_buf = self.cupy.empty(self.chunk, dtype=self.cupy.uint8)
        first = self.files[0]
        n = min(self.chunk, first.stat().st_size)
        with self.kvikio.CuFile(str(first), "r") as f:
            got = int(f.read(self.device_buf[:n], size=n, file_offset=0))
        with open(first, "rb") as f:
            expected = f.read(n)
        return got == n and bytes(self.cupy.asnumpy(self.device_buf[:n])) == expected

    def kvikio_pass(self) -> float:
        """MB/s of reading every file cold through kvikio (cuFile) into device memory."""
        evict(self.files, use_drop_caches=self.use_drop_caches, check=False)
        device_buf, chunk = self.device_buf, self.chunk
        start = time.perf_counter()
        for path in self.files:
            size = path.stat().st_size
            with self.kvikio.CuFile(str(path), "r") as f:
                offset = 0
                while offset < size:
                    length = min(chunk, size - offset)
                    done = int(f.read(device_buf[:length], size=length, file_offset=offset))
                    if done <= 0:
                        raise OSError(f"kvikio read returned {done} at {path}:{offset}")
                    offset += done
        self.cupy.cuda.runtime.deviceSynchronize()
        return self.total / (time.perf_counter() - start) / 1e6

    def host_pass(self, host_view: memoryview) -> float:
        """MB/s of reading every file cold into pinned host memory, then copying it over."""
        evict(self.files, use_drop_caches=self.use_drop_caches, check=False)
        device_buf, host = self.device_buf, self.host
        start = time.perf_counter()
        for path in self.files:
            with open(path, "rb", buffering=0) as f:
                while length := f.readinto(host_view):
                    device_buf[:length].set(host[:length])
        self.cupy.cuda.runtime.deviceSynchronize()
        return self.total / (time.perf_counter() - start) / 1e6

    def measure(
        self, numpy: Any, runs: int, record: dict[str, Any]
    ) -> tuple[list[float], list[float]]:
        """MB/s of `runs` kvikio passes and then `runs` host passes; `verified` in `record`."""
        try:
            record["verified"] = self.verified_first_read()
            pinned = self.cupy.cuda.alloc_pinned_memory(self.chunk)
            self.host = numpy.frombuffer(pinned, dtype=numpy.uint8, count=self.chunk)
            host_view = memoryview(self.host)
            gds_runs = [self.kvikio_pass() for _ in range(runs)]
            host_runs = [self.host_pass(host_view) for _ in range(runs)]
        except Exception as exc:
            raise _GdsUnavailableError(f"kvikio read failed ({type(exc).__name__}: {exc})") from exc
        return gds_runs, host_runs


def _gds_result(
    record: dict[str, Any], reads: _GdsReads, gds_runs: list[float], host_runs: list[float]
) -> dict[str, Any]:
    """The probe's record of a measurement: which path was read and both MB/s summaries."""
    gds = _summary_mb_s(gds_runs)
    host_copy = _summary_mb_s(host_runs)
    direct = record["compat_mode"] is False and record["cufile_gds_available"] is not False
    return {
        **record,
        "available": True,
        "reason": None,
        "path": "cuFile GPUDirect"
        if direct
        else "kvikio POSIX compat mode (host bounce buffers, no GPUDirect)",
        "gpudirect": direct,
        "bytes": reads.total,
        "chunk_bytes": reads.chunk,
        "kvikio_read_mb_s": gds,
        "host_read_copy_mb_s": host_copy,
        "speedup": round(gds["median"] / host_copy["median"], 3) if host_copy["median"] else None,
    }


def probe_gds(
    paths: Sequence[Path],
    *,
    runs: int,
    chunk_size: int = GDS_CHUNK,
    use_drop_caches: bool = False,
    importer: Callable[[str], Any] = importlib.import_module,
) -> dict[str, Any]:
    """Read the shards into GPU memory through kvikio (cuFile) and through host read + copy.

    Returns `{"available": False, "reason": ...}` when kvikio, cupy, a CUDA driver or a GPU is
    missing, or when the first read fails (kvikio imports without a GPU and fails only then).
    `compat_mode` True means kvikio read through POSIX with bounce buffers: the figures are
    then a host-staged path, not GPUDirect.
    """
    # The helpers add to `record` as they learn; an unavailable result keeps what they found.
    record: dict[str, Any] = {}
    try:
        kvikio, cupy, numpy = _gds_modules(importer, record)
        _gds_device(kvikio, cupy, importer, record)
        files = [p for p in paths if p.stat().st_size > 0]
        if not files:
            raise _GdsUnavailableError("no non-empty shard to read")
        total = sum(p.stat().st_size for p in files)
        chunk = min(chunk_size, max(p.stat().st_size for p in files))
        reads = _GdsReads(kvikio, cupy, files, total, chunk, use_drop_caches)
        gds_runs, host_runs = reads.measure(numpy, runs, record)
    except _GdsUnavailableError as exc:
        return {**record, "available": False, "reason": str(exc)}
    return _gds_result(record, reads, gds_runs, host_runs)


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    worker_loop(sys.stdin, sys.stdout)
