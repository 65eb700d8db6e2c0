"""Pack's file I/O: the tar shard writer, the write tasks, and the commit protocol of a pack folder.

Everything `corpusclean pack` writes goes through here (the pure pieces it builds on, keys,
ustar headers and the greedy cut, are `corpusclean.pipelines.shards`; the staging folder of an
`--overwrite` and its swap are `corpusclean.jobs.shards.staging`, which writes the same protocol
into a folder beside SHARD_DIR). Small files (markers, stats, the index) are written with
`corpusclean.jobs.runtime.atomic` (a unique temporary name, fsync, rename), so each is either absent
or whole; `_tmp/` holds the temporary files of everything inside the pack folder.

The layout of a pack folder, and what a file's presence means:

    _corpusclean.json                 the folder's marker: job, run id, fingerprint, format
    _tmp/                             temporary files: tars being written, files being renamed
    _parts/u000007-000002.tar (.idx)  part 2 of unit 7, written by a task, not yet numbered
    _parts/u000007-000002.json        its stats: the part's commit marker
    _parts/u000007.json               unit 7's marker: all its parts are committed
    _parts/numbering.json             every unit's part count, saved before the first rename
    shard-000042.tar (.idx)           a numbered shard
    _stats/shard-000042.json          its stats: the shard's commit marker
    README.md                         the dataset card (`datasets.load_dataset(SHARD_DIR)`)
    index.json                        the pack is finished

The states a pack folder goes through, in order, and what a rerun (`prepare_output`, then
`committed_parts`) does in each:

1. **Empty** (or missing). `prepare_output` writes the marker before anything else, so no
   crash leaves a non-empty folder that is not a pack's. A first run killed while writing it
   leaves only the marker's temporary file, which a rerun removes. A rerun refuses a folder
   whose marker is another job's, another input or config (fingerprint), or another
   `FORMAT_VERSION`.
2. **Parts** (`write_unit_parts`, in Spark tasks). A task writes whole units in shard order,
   cutting each into parts as it goes. A part's tar streams to `_tmp/{name}.{attempt}.part`
   (a name of its task attempt), is renamed to `_parts/` when it closes, then its .idx and
   last its stats file go into place atomically. Parts are deterministic, so two attempts of
   one unit (a retried or speculative task) write the same bytes to the same names under
   their own temporary names: whichever renames last wins, and both are whole. A killed task
   leaves temporary files and maybe a part without its stats; a rerun deletes both, and every
   temporary file of `_tmp/`.
3. **Unit markers.** After a unit's last part the task writes its marker (the driver writes
   those of units with no rows). On rerun a unit is finished when its marker is there and
   every part it counts is committed: its stats file is there and its tar (and .idx) still
   has that size and sha256 (checked in Spark tasks, `_changed_files`). Units that are not
   finished lose their marker and are written again; their committed parts are cut again
   but not rewritten (`UnitWriteSpec.skip`). Unit markers and part stats of another
   fingerprint, and parts without stats, are removed.
4. **Final shards** (`number_parts`, on the driver, once every unit has its marker). The part
   counts are saved to `numbering.json` before the first rename, so a numbering cut short
   maps parts to shard numbers the same way on resume, even after a unit is redone. Per
   part: its final stats file first, then the tar and the .idx are renamed to the shard's
   name, and the part's stats file is removed last. Every step can be redone: a rerun finds
   a part's tar at its part name or at its shard name (the size tells), and a numbered shard
   that changed since it was written is deleted and its unit written again.
5. **Index** (`write_index`). `_tmp/` is removed, then index.json is written, atomically and
   last: a folder is a finished pack exactly when it has index.json. `_parts/` (the unit
   markers) goes after it, so a crash in between leaves a finished pack with a stray
   `_parts/`, which a rerun without `--overwrite` refuses (finished) and `--overwrite`
   replaces with the rest of the folder. A driver killed while writing index.json leaves its
   temporary file, which a rerun removes.

Two packs writing one folder at once are not locked out here (only a second `--overwrite`
is, by the staging folder's owner while it runs on this host). Neither can leave a torn file,
since both write the same bytes under their own temporary names, but a resume deletes every
temporary file it finds, which fails the other run's tasks: run one pack per folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpusclean.errors import CorpusCleanError, InputError
from corpusclean.jobs.outputs.publish import MARKER, new_run_id
from corpusclean.jobs.runtime.atomic import is_temp_of, write_bytes_atomic, write_text_atomic
from corpusclean.jobs.runtime.log import info, warn
from corpusclean.jobs.shards.card import CARD
from corpusclean.jobs.shards.integrity import INDEX, file_sha256
from corpusclean.jobs.shards.staging import Staging, open_staging, owner, repair
from corpusclean.jobs.shards.tokens import (
    MegatronShardWriter,
    TokenCounts,
    TokenWrite,
    flat_ids,
    npy_members,
    npy_sizes,
    tokenize,
)
from corpusclean.pipelines.arrowbuf import as_binary, binary_array, value_buffers
from corpusclean.pipelines.columns import FILE, JSON, LINE, ROW, TXT, UNIT
from corpusclean.pipelines.shards import (
    BLOCK,
    RECORD,
    SAMPLE_OVERHEAD,
    bad_ids,
    cut_shards,
    grouped,
    joined_bytes,
    padded_sizes,
    safe_keys,
    ustar_headers,
)
from corpusclean.pipelines.tokenizers import text_bytes
from corpusclean.schemas import DEFAULT_TEXT_COLUMN
from corpusclean.testhook import hold

JOB = "pack"
STATS_DIR = "_stats"
TMP_DIR = "_tmp"
PARTS_DIR = "_parts"
# A part's stats file under PARTS_DIR: u<unit>-<part>.json (`part_files`).
_PART_STATS = re.compile(r"^u(\d{6})-(\d{6})\.json$")
# A unit's marker under PARTS_DIR: u<unit>.json (`unit_marker`).
_UNIT_MARKER = re.compile(r"^u\d{6}\.json$")
# Part of every resume fingerprint: a change to the shard layout must not resume old shards.
# 2: in input order, shards no longer span input files.
# 3: in input order, each file is cut greedily as it is written (no plan pass).
# 4: with shuffle on too, hash ranges are cut greedily as they are written (no plan pass).
# 5: a batch holding several hash ranges is cut per range; jsonl samples are sized by their
#    worst-case padding, so shards of several documents per sample keep to target_bytes.
# 6: stats name their index's checksum `idx_sha256` (DALI's or Megatron's) and count tokens;
#    token shards (Megatron's .bin/.idx, or tars of .npy ids).
FORMAT_VERSION = 6
# Opens the error of a task that met a repeated doc_id; the driver finds the id by it.
DUPLICATE_MARK = "corpusclean-duplicate-doc-id"


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class ShardLayout:
    """How a pack's shards are named: `{prefix}-000042.{ext}` (`tar` for WebDataset shards,
    text or tokens; `bin` for Megatron's), with an `.idx` beside each when `indexed` (DALI's
    for a tar, Megatron's, always, for a bin)."""

    prefix: str
    ext: str = "tar"
    indexed: bool = True


def shard_name(layout: ShardLayout, shard: int) -> str:
    """`{prefix}-000042.tar` (or `.bin`)."""
    return f"{layout.prefix}-{shard:06d}.{layout.ext}"


def stats_name(prefix: str, shard: int) -> str:
    """The commit marker of a shard, under `_stats/`."""
    return f"{prefix}-{shard:06d}.json"


def idx_name(layout: ShardLayout, shard: int) -> str:
    """The index of a shard, next to it (`{prefix}-000042.idx`): DALI's, or Megatron's."""
    return f"{layout.prefix}-{shard:06d}.idx"


@dataclass(frozen=True)
class ShardFiles:
    """Where a shard's data file (a tar, or Megatron's bin), its index and its stats file (its
    commit marker) go, and its number."""

    number: int
    data: Path
    idx: Path
    stats: Path


def final_files(out: Path, layout: ShardLayout, shard: int) -> ShardFiles:
    """A numbered shard's files: `{prefix}-000042.tar`, `.idx` and `_stats/{prefix}-000042.json`."""
    return ShardFiles(
        shard,
        out / shard_name(layout, shard),
        out / idx_name(layout, shard),
        out / STATS_DIR / stats_name(layout.prefix, shard),
    )


def part_files(out: Path, unit: int, part: int, ext: str = "tar") -> ShardFiles:
    """The files of part `part` of unit `unit`, under `_parts/` until the driver numbers it."""
    stem = out / PARTS_DIR / f"u{unit:06d}-{part:06d}"
    return ShardFiles(
        part, stem.with_suffix(f".{ext}"), stem.with_suffix(".idx"), stem.with_suffix(".json")
    )


def unit_marker(out: Path, unit: int) -> Path:
    """The file a write task leaves when it has written every part of a unit."""
    return out / PARTS_DIR / f"u{unit:06d}.json"


def write_unit_marker(
    out: Path,
    unit: int,
    parts: int,
    docs: int,
    fingerprint: str,
    tokens: dict[str, Any] | None = None,
) -> None:
    """Mark unit `unit` complete: `parts` committed parts holding `docs` documents (and, in a
    token pack, their counts: `TokenCounts`, kept for the report of a resumed pack)."""
    marker: dict[str, Any] = {
        "unit": unit,
        "parts": parts,
        "docs": docs,
        "fingerprint": fingerprint,
    }
    if tokens is not None:
        marker["tokens"] = tokens
    write_text_atomic(unit_marker(out, unit), json.dumps(marker) + "\n", out / TMP_DIR)


@dataclass
class ShardStats:
    """What a finished shard holds; written as its commit marker and copied into the index."""

    shard: int
    url: str
    nsamples: int
    ndocs: int
    filesize: int
    sha256: str
    # Of the .idx beside it, when there is one (DALI's, or Megatron's).
    idx_sha256: str | None = None
    # Of a token shard: the ids it holds, BOS/EOS included.
    ntokens: int | None = None

    def to_json(self, fingerprint: str) -> str:
        """The stats file's content."""
        fields = {k: v for k, v in self.__dict__.items() if v is not None}
        return json.dumps({**fields, "fingerprint": fingerprint}, sort_keys=True) + "\n"


# --------------------------------------------------------------------------- the tar writer


class TarShardWriter:
    """Writes one shard under a temporary name, hashing as it goes (the caller renames it).

    Members are written in the order given with fixed header fields, so the same samples
    always give the same bytes. `add_samples` sorts a sample's members by extension, as
    WebDataset's own writer does.
    """

    # Samples are assembled about this many bytes at a time: large enough that the per-chunk
    # cost is negligible, small enough to bound a task's memory next to its Arrow batch.
    CHUNK_BYTES = 32 << 20

    def __init__(self, temp_path: Path, dali_index: bool = False) -> None:
        self.temp_path = temp_path
        self._file: IO[bytes] | None = open(temp_path, "wb")  # noqa: SIM115 - closed in finish
        self._sha = hashlib.sha256()
        self.offset = 0
        self.nsamples = 0
        self.ndocs = 0
        self._idx: list[str] | None = [] if dali_index else None

    def _write(self, data: Any) -> None:
        assert self._file is not None
        self._file.write(data)
        self._sha.update(data)
        self.offset += memoryview(data).nbytes

    def add_samples(
        self, keys: pa.Array, members: Sequence[tuple[str, pa.Array]], ndocs: int | None = None
    ) -> None:
        """Append one sample per key: a member `{key}.{ext}` for each (ext, data array).

        `keys` (ASCII strings or binary) and every data array have one row per sample and no
        nulls; `ndocs` is the number of documents the samples hold (default: one each). Each
        chunk of samples becomes one buffer (headers from `ustar_headers`, then Arrow joins
        header, data and zero padding of every member in C++), written and hashed in one call.
        A header and a buffered write per piece cost more than sha256 and the file write
        together; one call per chunk leaves those two as most of the cost (`bench_tar_writers`
        in bench/pack.py measures the writer).
        """
        n = len(keys)
        ordered = sorted(members, key=lambda member: member[0])
        if keys.null_count:
            raise ValueError("a sample key is null")
        datas = []
        for ext, data in ordered:
            if len(data) != n:
                raise ValueError(f"member {ext!r} has {len(data)} rows for {n} keys")
            if data.null_count:
                raise ValueError(f"member {ext!r} of a sample is null")
            datas.append(as_binary(data))
        sizes = [np.diff(value_buffers(data)[0]) for data in datas]
        ends = np.cumsum(sum((BLOCK + padded_sizes(s) for s in sizes), np.zeros(n, np.int64)))
        lo = 0
        while lo < n:
            before = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, before + self.CHUNK_BYTES, "right")))
            chunk = [
                (ext, data.slice(lo, hi - lo), size[lo:hi])
                for (ext, _), data, size in zip(ordered, datas, sizes, strict=True)
            ]
            self._write_chunk(keys.slice(lo, hi - lo), chunk, int(ends[hi - 1]) - before)
            lo = hi
        self.nsamples += n
        self.ndocs += n if ndocs is None else ndocs

    def _write_chunk(
        self, keys: pa.Array, members: Sequence[tuple[str, pa.Array, np.ndarray]], total: int
    ) -> None:
        """Write samples of `total` bytes whose members (ext, data, sizes) are in order."""
        wide = total >= 2**31 or any(pa.types.is_large_binary(d.type) for _, d, _ in members)
        kind = pa.large_binary() if wide else pa.binary()
        n = len(keys)
        blocks = np.arange(n + 1, dtype=np.int64) * BLOCK
        sample_bytes = sum((BLOCK + padded_sizes(s) for _, _, s in members), np.zeros(n, np.int64))
        # Where each sample's first header lands in the file; moved on member by member.
        at = self.offset + np.cumsum(sample_bytes) - sample_bytes
        names = keys.cast(pa.string()).to_pylist() if self._idx is not None else []
        pieces: list[pa.Array] = []
        entries: list[list[str]] = []
        for ext, data, sizes in members:
            padded = padded_sizes(sizes)
            pad = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(padded - sizes, out=pad[1:])
            pieces += [
                binary_array(kind, blocks, ustar_headers(keys, ext, sizes)),
                data if data.type == kind else data.cast(kind),
                binary_array(kind, pad, np.zeros(int(pad[-1]), dtype=np.uint8)),
            ]
            if self._idx is not None:
                # Python's formatting costs per line what Arrow's casts and joins cost, without
                # their fixed cost per call, which dominates short runs.
                where, lengths = (at + BLOCK).tolist(), sizes.tolist()
                entries.append(
                    [
                        f"{ext} {o} {z} {k}.{ext}"
                        for o, z, k in zip(where, lengths, names, strict=True)
                    ]
                )
            at += BLOCK + padded
        joined = pc.binary_join_element_wise(*pieces, pa.scalar(b"", kind))
        data_buffer = joined.buffers()[2]
        assert data_buffer is not None and joined.offset == 0
        self._write(memoryview(data_buffer)[:total])
        if self._idx is not None:
            lines = (
                entries[0]
                if len(entries) == 1
                else [" ".join(e) for e in zip(*entries, strict=True)]
            )
            self._idx.append("\n".join(lines) + "\n")

    def finish(self) -> tuple[int, str]:
        """Write the end-of-archive blocks and record padding; returns (filesize, sha256)."""
        end = self.offset + 2 * BLOCK
        self._write(bytes(2 * BLOCK + (-end) % RECORD))
        assert self._file is not None
        self._file.close()
        self._file = None
        return self.offset, self._sha.hexdigest()

    def dali_index(self) -> str:
        """The DALI `.idx` text (v1.2: a header line, then per sample `ext offset size name`)."""
        chunks = self._idx or []
        return "".join([f"v1.2 {self.nsamples if chunks else 0}\n", *chunks])

    def abort(self) -> None:
        """Close and remove the temporary file (a failed task; a killed one leaves it behind)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self.temp_path.unlink(missing_ok=True)


# --------------------------------------------------------------------------- write tasks


class _Shard:
    def __init__(
        self,
        files: ShardFiles,
        docs_per_sample: int,
        dali_index: bool,
        fingerprint: str,
        tmp: Path,
        attempt: str,
        tokens: TokenWrite | None = None,
    ) -> None:
        self.files = files
        self.docs_per_sample = docs_per_sample
        self.dali_index = dali_index
        self.fingerprint = fingerprint
        self.tmp = tmp
        self.tokens = tokens
        self.ntokens = 0
        temp = tmp / f"{files.data.name}.{attempt}.part"
        self.writer: TarShardWriter | MegatronShardWriter
        if tokens is not None and tokens.format == "megatron":
            self.writer = MegatronShardWriter(temp, np.dtype(tokens.dtype))
        else:
            self.writer = TarShardWriter(temp, dali_index)
        # A jsonl sample still open at the end of a run: its lines so far and its key.
        self.pending: list[pa.Array] = []
        self.pending_docs = 0
        self.first_key = pa.array([], pa.binary())

    def _add_tokens(self, doc_ids: pa.Array, payload: Sequence[pa.Array]) -> None:
        """Append documents' ids: to Megatron's .bin, or as `.npy` members beside `.json`."""
        assert self.tokens is not None
        tokens = payload[0]
        _, lengths = flat_ids(tokens)
        self.ntokens += int(lengths.sum())
        if isinstance(self.writer, MegatronShardWriter):
            self.writer.add_documents(tokens)
            return
        npy = npy_members(tokens, np.dtype(self.tokens.dtype))
        self.writer.add_samples(safe_keys(doc_ids), [("json", payload[1]), ("npy", npy)])

    def add(self, doc_ids: pa.Array, payload: Sequence[pa.Array]) -> None:
        """Append consecutive documents of this shard (their ids already checked non-null)."""
        for column in payload:
            if column.null_count:
                raise ValueError("a document's payload column is null")
        if self.tokens is not None:
            self._add_tokens(doc_ids, payload)
            return
        assert isinstance(self.writer, TarShardWriter)
        if self.docs_per_sample == 1:
            self.writer.add_samples(safe_keys(doc_ids), [("json", payload[1]), ("txt", payload[0])])
            return
        lines = payload[0]
        per = self.docs_per_sample
        n = len(lines)
        i = 0
        if self.pending_docs:
            i = min(per - self.pending_docs, n)
            self.pending.append(lines.slice(0, i))
            self.pending_docs += i
            if self.pending_docs == per:
                self._flush_pending()
        full = (n - i) // per
        if full:
            firsts = pa.array(np.arange(i, i + full * per, per))
            self.writer.add_samples(
                safe_keys(doc_ids.take(firsts)),
                [("jsonl", grouped(lines.slice(i, full * per), per))],
                full * per,
            )
            i += full * per
        if i < n:
            self.first_key = safe_keys(doc_ids.slice(i, 1))
            self.pending = [lines.slice(i)]
            self.pending_docs = n - i

    def _flush_pending(self) -> None:
        if self.pending_docs:
            assert isinstance(self.writer, TarShardWriter)
            data = b"".join(joined_bytes(part) for part in self.pending)
            self.writer.add_samples(
                self.first_key, [("jsonl", pa.array([data], pa.binary()))], self.pending_docs
            )
            self.pending = []
            self.pending_docs = 0

    def commit(self) -> ShardStats:
        self._flush_pending()
        filesize, sha = self.writer.finish()
        files = self.files
        os.replace(self.writer.temp_path, files.data)
        index: bytes | None = None
        if isinstance(self.writer, MegatronShardWriter):
            index = self.writer.index()
        elif self.dali_index:
            index = self.writer.dali_index().encode()
        idx_sha = None
        if index is not None:
            write_bytes_atomic(files.idx, index, self.tmp)
            idx_sha = hashlib.sha256(index).hexdigest()
        stats = ShardStats(
            files.number,
            files.data.name,
            self.writer.nsamples,
            self.writer.ndocs,
            filesize,
            sha,
            idx_sha,
            self.ntokens if self.tokens is not None else None,
        )
        # The stats file is the commit marker: a shard without it is rewritten on resume.
        write_text_atomic(files.stats, stats.to_json(self.fingerprint), self.tmp)
        hold("pack.part")
        return stats


def _attempt_id() -> str:
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except ImportError:  # pragma: no cover - pyspark is a dependency
        ctx = None
    if ctx is None:
        return f"local{os.getpid()}"
    return f"t{ctx.taskAttemptId()}"


@dataclass(frozen=True)
class UnitWriteSpec:
    """What a task writing whole units needs besides its documents.

    A unit is a stretch of the shard order that one task writes whole: a hash range (shuffle
    on; its number comes in `_unit`) or an input file. With `files` set, unit u is the Parquet
    file `files[u]` and, with one document per sample, the text is read from it by the task
    itself (`text_col`), row-aligned with the `_row` numbers Spark sends; the rest of the
    payload comes from Spark.
    """

    output_dir: str
    docs_per_sample: int
    dali_index: bool
    fingerprint: str
    id_col: str
    capacity: int
    files: tuple[str, ...] = ()
    text_col: str = DEFAULT_TEXT_COLUMN
    skip: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    # A token pack: the text is tokenized in the task (`_txt`, or read from the file), and
    # written as ids (jobs/shards/tokens.py).
    tokens: TokenWrite | None = None

    @property
    def ext(self) -> str:
        """The data files' extension."""
        return self.tokens.ext if self.tokens is not None else "tar"


UNIT_RESULT_SCHEMA = "unit int, parts long, docs long"


class _ColumnReader:
    """One column of a Parquet file, handed out `take(n)` rows at a time, in row order."""

    def __init__(self, path: str, column: str) -> None:
        import pyarrow.parquet as pq

        self._batches = pq.ParquetFile(path).iter_batches(batch_size=8192, columns=[column])
        self._column = column
        self._left: list[pa.Array] = []
        self._have = 0

    def take(self, n: int) -> pa.Array | None:
        """The next `n` values, or None when the file has fewer rows left."""
        while self._have < n:
            batch = next(self._batches, None)
            if batch is None:
                return None
            self._left.append(batch.column(self._column))
            self._have += batch.num_rows
        chunks = pa.chunked_array(self._left).slice(0, n)
        rest = pa.chunked_array(self._left).slice(n)
        self._left = rest.chunks
        self._have -= n
        return chunks.combine_chunks() if chunks.num_chunks != 1 else chunks.chunk(0)

    def exhausted(self) -> bool:
        """True when every row has been taken."""
        if self._have:
            return False
        return all(batch.num_rows == 0 for batch in self._batches)


def _file_of(uri: str) -> str:
    """The local path of a `_metadata.file_path` URI (file:/..., percent-encoded)."""
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


class _Unit:
    """The unit a task is writing: its shard cut, the open part, and the row checks."""

    def __init__(self, spec: UnitWriteSpec, unit: int, attempt: str, file: str | None) -> None:
        self.spec = spec
        self.unit = unit
        self.attempt = attempt
        self.out = Path(spec.output_dir)
        reserve = SAMPLE_OVERHEAD if spec.docs_per_sample > 1 else 0
        self.capacity = max(BLOCK, spec.capacity - reserve)
        self.part = 0
        self.fill = 0
        self.docs = 0
        self.current: _Shard | None = None
        self.current_part = -1
        self.previous_id: str | None = None
        self.reader = (
            _ColumnReader(file, spec.text_col) if file and spec.docs_per_sample == 1 else None
        )
        self.file = file
        self.counts = TokenCounts() if spec.tokens is not None else None

    def _check_rows(self, batch: pa.RecordBatch) -> None:
        # A file split over two tasks would have two writers of one unit: refuse it.
        rows = batch.column(ROW).to_numpy(zero_copy_only=False)
        if rows[0] != self.docs or (len(rows) > 1 and not (np.diff(rows) == 1).all()):
            raise ValueError(
                f"input file {self.file} reached its task out of row order (rows from "
                f"{int(rows[0])}, expected {self.docs}): input order needs each file whole in "
                "one Spark task"
            )

    def _payload(self, batch: pa.RecordBatch) -> tuple[list[pa.Array], np.ndarray]:
        """The batch's payload columns and each document's exact sample size."""
        if self.file is not None:
            self._check_rows(batch)
        if self.spec.docs_per_sample > 1:
            lines = batch.column(LINE)
            share = -(-SAMPLE_OVERHEAD // self.spec.docs_per_sample)
            return [lines], np.diff(value_buffers(lines)[0]) + share
        if self.reader is not None:
            text = self.reader.take(batch.num_rows)
            if text is None:
                raise ValueError(f"input file {self.file} has fewer rows than Spark read from it")
            if text.null_count:
                text = pc.fill_null(text, "")
        else:
            text = batch.column(TXT)
        if self.spec.tokens is not None:
            return self._token_payload(batch, text)
        meta = batch.column(JSON)
        sizes = 2 * BLOCK + sum(
            padded_sizes(np.diff(value_buffers(col)[0])) for col in (text, meta)
        )
        return [text, meta], sizes

    def _token_payload(
        self, batch: pa.RecordBatch, text: pa.Array
    ) -> tuple[list[pa.Array], np.ndarray]:
        """The documents' ids (and `.json` for a tar) and each one's exact size in the shard,
        counted for the report as they go."""
        tokens_spec = self.spec.tokens
        assert tokens_spec is not None and self.counts is not None
        tokens = tokenize(tokens_spec, text)
        _, lengths = flat_ids(tokens)
        columns = {c: batch.column(c) for c in tokens_spec.breakdown}
        self.counts.add(lengths, text_bytes(text), columns)
        dtype = np.dtype(tokens_spec.dtype)
        if tokens_spec.format == "megatron":
            return [tokens], lengths * dtype.itemsize
        meta = batch.column(JSON)
        sizes = 2 * BLOCK + padded_sizes(npy_sizes(tokens, dtype))
        sizes += padded_sizes(np.diff(value_buffers(meta)[0]))
        return [tokens, meta], sizes

    def add(self, batch: pa.RecordBatch) -> None:
        """Cut the batch's documents into the unit's parts and write them."""
        n = batch.num_rows
        payload, sizes = self._payload(batch)
        cap = max(1, self.capacity // 2)
        shift, self.fill = cut_shards(np.minimum(sizes, cap), self.fill, self.capacity)
        parts = self.part + shift
        self.part = int(parts[-1])
        doc_ids = batch.column(self.spec.id_col)
        bad, self.previous_id = bad_ids(doc_ids, self.previous_id)
        cuts = np.flatnonzero(np.diff(parts)) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), n], strict=True):
            if bad[lo:hi].any():
                _refuse(doc_ids, lo + int(bad[lo:hi].argmax()))
            part = int(parts[lo])
            if part != self.current_part:
                if self.current is not None:
                    self.current.commit()
                self.current = self._open(part)
                self.current_part = part
            if self.current is not None:
                self.current.add(
                    doc_ids.slice(lo, hi - lo), [p.slice(lo, hi - lo) for p in payload]
                )
        self.docs += n

    def _open(self, part: int) -> _Shard | None:
        if (self.unit, part) in self.spec.skip:
            return None
        spec = self.spec
        files = part_files(self.out, self.unit, part, spec.ext)
        return _Shard(
            files,
            spec.docs_per_sample,
            spec.dali_index,
            spec.fingerprint,
            self.out / TMP_DIR,
            self.attempt,
            spec.tokens,
        )

    def finish(self) -> pa.RecordBatch:
        """Commit the last part and leave the unit marker; returns the unit's result row."""
        if self.reader is not None and not self.reader.exhausted():
            raise ValueError(f"input file {self.file} has more rows than Spark read from it")
        if self.current is not None:
            self.current.commit()
            self.current = None
        parts = self.part + 1 if self.docs else 0
        counts = None if self.counts is None else self.counts.to_json()
        write_unit_marker(self.out, self.unit, parts, self.docs, self.spec.fingerprint, counts)
        return pa.RecordBatch.from_pydict(
            {
                "unit": pa.array([self.unit], pa.int32()),
                "parts": pa.array([parts], pa.int64()),
                "docs": pa.array([self.docs], pa.int64()),
            }
        )

    def abort(self) -> None:
        if self.current is not None:
            self.current.writer.abort()
            self.current = None


def _refuse(doc_ids: pa.Array, row: int) -> None:
    doc_id = doc_ids[row].as_py()
    if doc_id is None:
        raise ValueError("doc_id is null")
    raise ValueError(f"{DUPLICATE_MARK}: {doc_id!r}")


def _unit_runs(
    batch: pa.RecordBatch, by_path: dict[str, int]
) -> Iterator[tuple[int, str | None, pa.RecordBatch]]:
    """The batch cut where its unit changes: (unit, input file or None, rows of that unit).

    A task holding several hash ranges gets batches that straddle them, so a batch is never
    taken as one unit. With input files (`by_path`), a batch must come from one planned file.
    """
    if by_path:
        names = batch.column(FILE)
        path = os.path.realpath(_file_of(names[0].as_py()))
        if names[len(names) - 1].as_py() != names[0].as_py() or path not in by_path:
            raise ValueError(
                f"a task read {path} with other files, or a file not planned; input order "
                "needs each file whole in one Spark task"
            )
        yield by_path[path], path, batch
        return
    units = batch.column(UNIT).to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(units[1:] != units[:-1]) + 1))
    ends = np.append(starts[1:], len(units))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(units[start]), None, batch.slice(start, end - start)


def write_unit_parts(
    batches: Iterator[pa.RecordBatch], spec: UnitWriteSpec
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: write whole units, each cut greedily into parts; a row per unit.

    Reads the id column, `_row` and `_json` with `spec.files` (the text comes from the file;
    `_file` names it), else `_unit` and `_txt` + `_json` (one document per sample) or `_line`;
    `_line` also with `spec.files` when several documents share a sample. Rows arrive unit by
    unit, each unit whole and in shard order. Parts in `spec.skip` (already committed) are cut
    but not written again. A null doc_id, or one equal to the one before it, fails the task
    at that document, after the parts before it are committed.
    """
    hold("pack.task")
    attempt = _attempt_id()
    by_path = {path: i for i, path in enumerate(spec.files)}
    seen: set[int] = set()
    unit: _Unit | None = None
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            for number, file, run in _unit_runs(batch, by_path):
                if unit is None or number != unit.unit:
                    if unit is not None:
                        yield unit.finish()
                    if number in seen:
                        # A second run of a unit would cut its parts again from part 0.
                        raise ValueError(
                            f"unit {number} came twice in one task; rows must arrive unit by unit"
                        )
                    seen.add(number)
                    unit = _Unit(spec, number, attempt, file)
                unit.add(run)
        if unit is not None:
            yield unit.finish()
            unit = None
    finally:
        if unit is not None:
            unit.abort()


# --------------------------------------------------------------------------- the output folder


def _read_marker(out: Path) -> dict[str, Any] | None:
    return _load_json(out / MARKER)


def _check_owner(out: Path) -> bool:
    """Check `out` may hold a pack (missing, empty, or a pack's folder); True if it holds one.

    A first run killed while writing its marker leaves only the marker's temporary file in an
    otherwise empty folder, which is removed; beside anything else, nothing is touched.
    """
    if out.exists() and not out.is_dir():
        raise InputError(f"output {out} exists and is not a folder")
    if not out.is_dir():
        return False
    if not (out / MARKER).exists():
        leftovers = list(out.iterdir())
        if leftovers and all(is_temp_of(MARKER, p.name) for p in leftovers):
            for leftover in leftovers:
                leftover.unlink()
    if not any(out.iterdir()):
        return False
    marker = _read_marker(out)
    if marker is None or marker.get("job") != JOB:
        owner = f"`corpusclean {marker.get('job')}`" if marker else "something else"
        raise InputError(
            f"output {out} is a non-empty folder written by {owner}, not corpusclean pack; "
            "choose another folder or empty it"
        )
    return True


def prepare_output(out: Path, fp: str, input_dir: Path, run_id: str | None = None) -> bool:
    """Make `out` ready to write into (a pack of `input_dir`, resume fingerprint `fp`); True
    when it holds an unfinished run to resume.

    `run_id` names a new run (a staging folder's own); a resumed run keeps its marker, with
    this process as its owner.
    """
    resume = False
    if _check_owner(out):
        marker = _read_marker(out) or {}
        if (out / INDEX).exists():
            raise InputError(
                f"output {out} already holds a finished pack; pass --overwrite to replace it"
            )
        if marker.get("format") != FORMAT_VERSION:
            raise InputError(
                f"output {out} holds an unfinished pack in shard format "
                f"{marker.get('format', 'before 5')}, and this corpusclean writes format "
                f"{FORMAT_VERSION}; pass --overwrite to pack it again"
            )
        if marker.get("fingerprint") != fp:
            raise InputError(
                f"output {out} holds an unfinished pack of another input or config; rerun with "
                "the same --input and --set values to resume it, or pass --overwrite"
            )
        resume = True
        if "owner" in marker:  # a staging folder: its owner is now this process
            write_text_atomic(out / MARKER, json.dumps({**marker, "owner": owner()}) + "\n")
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        # The marker before anything else, so no crash leaves a folder that is not ours.
        marker = {
            "job": JOB,
            "run_id": run_id or new_run_id(),
            "fingerprint": fp,
            "format": FORMAT_VERSION,
            "input": str(input_dir),
        }
        if run_id is not None:
            marker["owner"] = owner()
        write_text_atomic(out / MARKER, json.dumps(marker) + "\n")
    for folder in (STATS_DIR, TMP_DIR, PARTS_DIR):
        (out / folder).mkdir(exist_ok=True)
    return resume


def _not_the_pack(out: Path) -> list[str]:
    """The top-level entries of a pack folder that its index.json does not account for."""
    own = {MARKER, INDEX, STATS_DIR, TMP_DIR, PARTS_DIR, CARD, *REPORT_FILES}
    index = _load_json(out / INDEX) or {}
    for entry in index.get("shardlist", []):
        if isinstance(entry, dict):
            own.update(
                str(entry.get(key)) for key in ("url", "dali_index", "idx") if entry.get(key)
            )
    if not index:  # an unfinished pack: its shards are named by its stats files
        for ext in (".tar", ".bin"):
            own.update(p.with_suffix(ext).name for p in (out / STATS_DIR).glob("*.json"))
        own.update(p.with_suffix(".idx").name for p in (out / STATS_DIR).glob("*.json"))
    return sorted(p.name for p in out.iterdir() if p.name not in own)


def open_output(
    out: Path, fp: str, input_dir: Path, overwrite: bool
) -> tuple[Path, bool, Staging | None]:
    """Where this run writes: (folder, resume?, staging or None).

    A pack replacing a non-empty pack folder (`--overwrite`) is written into a staging folder
    beside it (resumed if a crashed run of the same pack left one), else into `out` itself.
    """
    repair(out)
    if not (_check_owner(out) and overwrite):
        return out, prepare_output(out, fp, input_dir), None
    foreign = _not_the_pack(out)
    if foreign:
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        warn(
            JOB,
            f"--overwrite: {out} also holds {len(foreign)} file(s) that are not part of its "
            f"pack, which go with it: {', '.join(foreign[:5])}{more}",
        )
    staging = open_staging(out, fp, FORMAT_VERSION)
    if staging.finished:
        info(JOB, f"--overwrite: the replacement pack in {staging.folder} is finished")
        return staging.folder, True, staging
    resume = prepare_output(staging.folder, fp, input_dir, staging.run_id)
    what = "resuming the replacement" if resume else "writing the replacement"
    info(JOB, f"--overwrite: {what} in {staging.folder}; {out} stays as it is until it is done")
    return staging.folder, resume, staging


# --------------------------------------------------------------------------- resume


def _check_committed(item: tuple[int, str, str]) -> tuple[int, bool]:
    shard, path, sha = item
    try:
        return shard, file_sha256(path)[1] == sha
    except OSError:
        return shard, False


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _unit_markers(out: Path, fp: str, n_units: int) -> dict[int, dict[str, Any]]:
    """The markers of this run's finished units; other files in their place are removed."""
    markers = {}
    for u in range(n_units):
        marker = _load_json(unit_marker(out, u))
        if marker is not None and marker.get("fingerprint") == fp and marker.get("unit") == u:
            markers[u] = marker
        else:
            unit_marker(out, u).unlink(missing_ok=True)
    return markers


def _numbering_file(out: Path) -> Path:
    return out / PARTS_DIR / "numbering.json"


def _first_shards(
    out: Path, fp: str, markers: dict[int, dict[str, Any]], n_units: int
) -> list[int] | None:
    """Each unit's first shard number (and the total last): from the part counts saved when
    numbering began, which outlive markers removed to redo a unit, else from the markers once
    every unit has one; None while numbering cannot have begun."""
    saved = _load_json(_numbering_file(out)) or {}
    if saved.get("fingerprint") == fp and len(saved.get("parts", [])) == n_units:
        counts = [int(c) for c in saved["parts"]]
    elif len(markers) == n_units:
        counts = [int(markers[u]["parts"]) for u in range(n_units)]
    else:
        return None
    return _starts(counts)


def _starts(counts: list[int]) -> list[int]:
    """Prefix sums: each unit's first shard number from the units' part counts, total last."""
    return [0, *(int(f) for f in np.cumsum(counts, dtype=np.int64))]


def committed_parts(
    spark: Any, out: Path, fp: str, n_units: int, layout: ShardLayout
) -> tuple[set[int], set[tuple[int, int]]]:
    """What an unfinished pack already holds: (finished units, committed parts).

    A part is committed while its stats file is there and its tar (and .idx) still match:
    under `_parts/`, or already renamed to its shard name by a numbering cut short (parts map
    to shard numbers by the counts `number_parts` saved before its first rename). A unit is
    finished when its marker is there and every part of it is committed or numbered, .idx
    included. A part or numbered shard that changed since it was written is deleted and its
    unit written again. Removed too: temporary files, parts without a stats file, stats and
    markers of another run.
    """
    _remove_temporaries(out)
    parts_dir = out / PARTS_DIR
    parts_dir.mkdir(exist_ok=True)
    markers = _unit_markers(out, fp, n_units)
    firsts = _first_shards(out, fp, markers, n_units)
    final = partial(_numbered_files, out, layout, firsts)
    candidates = _committed_candidates(out, fp, n_units, layout, final)
    finals = _numbered_finals(out, fp, layout.indexed, candidates)
    redo = _redo_changed(spark, out, layout, n_units, firsts, candidates, finals)
    done = set(markers)
    redo |= _incomplete_units(markers, done - redo, candidates, finals, final)
    for u in sorted(redo & done):
        done.discard(u)
        unit_marker(out, u).unlink(missing_ok=True)
    keep = {part_files(out, u, j).stats.stem for u, j in candidates}
    for path in parts_dir.iterdir():
        if path.stem not in keep and _PART_STATS.match(path.stem + ".json"):
            path.unlink()
    return done, set(candidates)


def _remove_temporaries(out: Path) -> None:
    """Delete what an interrupted run left half-written: temporary files and index.json's."""
    for tmp in (out / TMP_DIR).iterdir():
        tmp.unlink()
    for tmp in out.iterdir():  # a run killed while writing index.json
        if is_temp_of(INDEX, tmp.name):
            tmp.unlink()


def _numbered_files(
    out: Path, layout: ShardLayout, firsts: list[int] | None, u: int, j: int
) -> ShardFiles | None:
    """The shard files part `j` of unit `u` is renamed to by numbering; None while numbering
    cannot have begun or when the saved counts give the unit fewer parts."""
    if firsts is None or j >= firsts[u + 1] - firsts[u]:
        return None
    return final_files(out, layout, firsts[u] + j)


def _committed_candidates(
    out: Path,
    fp: str,
    n_units: int,
    layout: ShardLayout,
    final: Callable[[int, int], ShardFiles | None],
) -> dict[tuple[int, int], list[tuple[str, str]]]:
    """The parts whose stats file is this run's and whose files are all there, at the part's
    name or already at its shard name: (unit, part) -> the files (tar, and .idx with
    an index) to check, with their sha256. Any other stats file is deleted."""
    candidates: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for stats_file in sorted((out / PARTS_DIR).glob("u*-*.json")):
        match = _PART_STATS.match(stats_file.name)
        stats = _load_json(stats_file)
        key = (int(match.group(1)), int(match.group(2))) if match else (-1, -1)
        ok = stats is not None and stats.get("fingerprint") == fp and 0 <= key[0] < n_units
        if ok:
            part, numbered = part_files(out, *key, layout.ext), final(*key)
            places = [part] if numbered is None else [part, numbered]
            # The data file is renamed before the .idx: either may be found at the shard name.
            data = next((f.data for f in places if _has_size(f.data, stats.get("filesize"))), None)
            idx = next((f.idx for f in places if f.idx.is_file()), None)
            ok = data is not None and (not layout.indexed or idx is not None)
            if ok and data != part.data:
                # Renamed already: a file left at the part's name is not the committed one.
                part.data.unlink(missing_ok=True)
        if ok:
            candidates[key] = _checked_files(stats, data, idx if layout.indexed else None)
        else:
            stats_file.unlink()
    return candidates


def _numbered_finals(
    out: Path,
    fp: str,
    dali: bool,
    candidates: dict[tuple[int, int], list[tuple[str, str]]],
) -> dict[int, list[tuple[str, str]]]:
    """This run's numbered shards that are whole and not already a candidate part's files:
    shard number -> the files to check, with their sha256."""
    finals: dict[int, list[tuple[str, str]]] = {}
    at_final = {files[0][0] for files in candidates.values()}
    for stats_file in sorted((out / STATS_DIR).glob("*.json")):
        stats = _load_json(stats_file)
        tar = out / str((stats or {}).get("url", ""))
        idx = tar.with_suffix(".idx")
        mine = stats is not None and stats.get("fingerprint") == fp
        whole = tar.is_file() and (not dali or idx.is_file())
        if mine and whole and str(tar) not in at_final:
            finals[int(stats["shard"])] = _checked_files(stats, tar, idx if dali else None)
    return finals


def _redo_changed(
    spark: Any,
    out: Path,
    layout: ShardLayout,
    n_units: int,
    firsts: list[int] | None,
    candidates: dict[tuple[int, int], list[tuple[str, str]]],
    finals: dict[int, list[tuple[str, str]]],
) -> set[int]:
    """Checksum every candidate part and numbered shard (one Spark job); drop the changed
    ones from `candidates` and `finals`, deleting changed shards, and return their units."""
    items = [("part", u, j, *f) for (u, j), files in sorted(candidates.items()) for f in files]
    items += [("final", g, 0, *f) for g, files in sorted(finals.items()) for f in files]
    redo: set[int] = set()
    for kind, a, b, path, _ in _changed_files(spark, items):
        if kind == "part":
            warn(JOB, f"part {Path(path).name} changed since it was committed; writing it again")
            candidates.pop((a, b), None)
            redo.add(a)
            continue
        # A numbered shard: its unit is the one whose shard numbers hold it.
        unit = None if firsts is None else int(np.searchsorted(firsts, a, "right")) - 1
        if unit is None or not 0 <= unit < n_units:
            raise CorpusCleanError(
                f"{Path(path).name} changed since it was written; rerun with --overwrite"
            )
        warn(JOB, f"{Path(path).name} changed since it was written; writing it again")
        Path(path).unlink(missing_ok=True)
        final_files(out, layout, a).stats.unlink(missing_ok=True)
        finals.pop(a, None)
        redo.add(unit)
    return redo


def _incomplete_units(
    markers: dict[int, dict[str, Any]],
    units: set[int],
    candidates: dict[tuple[int, int], list[tuple[str, str]]],
    finals: dict[int, list[tuple[str, str]]],
    final: Callable[[int, int], ShardFiles | None],
) -> set[int]:
    """The marked `units` that lack a part their marker counts, neither committed under
    `_parts/` nor numbered."""
    redo: set[int] = set()
    for u in sorted(units):
        first = final(u, 0)
        for j in range(int(markers[u]["parts"])):
            if (u, j) not in candidates and (first is None or first.number + j not in finals):
                warn(JOB, f"part {j} of unit {u} is missing or truncated; writing the unit again")
                redo.add(u)
                break
    return redo


def _checked_files(stats: dict[str, Any], tar: Path, idx: Path | None) -> list[tuple[str, str]]:
    """The (path, sha256) pairs a resume checks for one shard: its tar, and its .idx."""
    files = [(str(tar), str(stats.get("sha256")))]
    if idx is not None:
        files.append((str(idx), str(stats.get("idx_sha256"))))
    return files


def _has_size(path: Path, size: Any) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def _changed_files(spark: Any, items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The items (..., path, sha256) whose file no longer has that checksum, checked by Spark
    tasks, since a resumed pack can be most of the output."""
    if not items:
        return []
    checks = [(i, path, sha) for i, (*_, path, sha) in enumerate(items)]
    slices = min(len(checks), max(1, spark.sparkContext.defaultParallelism * 2))
    results = spark.sparkContext.parallelize(checks, slices).map(_check_committed).collect()
    return [items[i] for i, good in results if not good]


# --------------------------------------------------------------------------- numbering and index


def number_parts(out: Path, layout: ShardLayout, fp: str, n_units: int) -> tuple[int, int]:
    """Number every unit's parts in unit order and rename them; returns (shards, docs).

    Every step can be redone: a part's final stats file is written before its tar and then
    its .idx are renamed, and its part stats go last, so a run that stopped half-way numbers
    the rest on resume (`committed_parts` finds the parts already at their shard names).
    """
    markers = _unit_markers(out, fp, n_units)
    missing = sorted(set(range(n_units)) - set(markers))
    if missing:
        raise CorpusCleanError(
            f"{len(missing)} unit(s) of the pack have no marker after the write (first: unit "
            f"{missing[0]}); rerun the same command to resume"
        )
    counts = [int(markers[u]["parts"]) for u in range(n_units)]
    saved = _first_shards(out, fp, {}, n_units)
    firsts = _starts(counts)
    if saved is not None and saved != firsts:
        raise CorpusCleanError(
            "the units' part counts changed since numbering began; rerun with --overwrite"
        )
    tmp = out / TMP_DIR
    # Saved before the first rename: from here on, resume maps parts to shard numbers by it.
    payload = {"fingerprint": fp, "parts": counts}
    write_text_atomic(_numbering_file(out), json.dumps(payload) + "\n", tmp)
    for u in range(n_units):
        for j in range(firsts[u + 1] - firsts[u]):
            part = part_files(out, u, j, layout.ext)
            final = final_files(out, layout, firsts[u] + j)
            stats = _load_json(part.stats)
            if stats is None:
                continue  # numbered already; build_index checks its stats file
            size = stats["filesize"]
            if not _has_size(part.data, size) and not _has_size(final.data, size):
                raise CorpusCleanError(
                    f"part {part.data.name} of the unfinished pack is missing; rerun the same "
                    "command to write it again"
                )
            numbered = ShardStats(
                final.number,
                final.data.name,
                stats["nsamples"],
                stats["ndocs"],
                stats["filesize"],
                stats["sha256"],
                stats.get("idx_sha256"),
                stats.get("ntokens"),
            )
            write_text_atomic(final.stats, numbered.to_json(fp), tmp)
            if _has_size(part.data, size):
                os.replace(part.data, final.data)
            else:
                part.data.unlink(missing_ok=True)
            if part.idx.is_file():
                os.replace(part.idx, final.idx)
            part.stats.unlink()
            hold("pack.number")
    docs = sum(int(m["docs"]) for m in markers.values())
    return firsts[-1], docs


def shard_entries(out: Path, layout: ShardLayout, fp: str, n_shards: int) -> list[dict[str, Any]]:
    """The index entries of shards 0..n_shards-1 from their stats files; fails if any shard has
    no stats file of this run (`fp`). A tar's index is DALI's (`dali_index`, `dali_sha256`,
    as the wids form names it); a Megatron shard's is `idx`, `idx_sha256`."""
    entries = []
    missing = []
    for shard in range(n_shards):
        try:
            name = stats_name(layout.prefix, shard)
            stats = json.loads((out / STATS_DIR / name).read_text("utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            stats = {}
        if stats.get("fingerprint") != fp:
            missing.append(shard_name(layout, shard))
            continue
        entry = {
            "url": stats["url"],
            "nsamples": stats["nsamples"],
            "filesize": stats["filesize"],
            "sha256": stats["sha256"],
            "ndocs": stats["ndocs"],
        }
        if stats.get("ntokens") is not None:
            entry["ntokens"] = stats["ntokens"]
        if layout.indexed:
            key = "idx" if layout.ext == "bin" else "dali_index"
            entry[key] = idx_name(layout, shard)
            entry[key.replace("_index", "") + "_sha256"] = stats["idx_sha256"]
        entries.append(entry)
    if missing:
        raise CorpusCleanError(
            f"{len(missing)} shard(s) have no commit marker after the write "
            f"({', '.join(missing[:3])}); rerun the same command to resume"
        )
    return entries


def unit_token_counts(out: Path, fp: str) -> TokenCounts:
    """The token counts of every unit of this run (`fp`), from their markers: a resumed
    pack's units counted by the run that wrote them."""
    total = TokenCounts()
    for path in sorted((out / PARTS_DIR).glob("u*.json")):
        marker = _load_json(path)
        if not _UNIT_MARKER.match(path.name) or marker is None:
            continue
        if marker.get("fingerprint") == fp and isinstance(marker.get("tokens"), dict):
            total.merge(TokenCounts.from_json(marker["tokens"]))
    return total


# The files a token pack writes beside its shards and index.json.
REPORT_FILES = ("report.json", "report.html", "data_path.txt")


def write_index(
    out: Path,
    index: dict[str, Any],
    card: str | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    """Finish the pack in `out`: remove `_tmp/`, write the dataset card (`card`, README.md),
    the `extra` files (a token pack's report, `REPORT_FILES`) and index.json, then remove
    `_parts/`."""
    tmp = out / TMP_DIR
    if tmp.is_dir():
        for leftover in tmp.iterdir():
            leftover.unlink()
        tmp.rmdir()
    if card is not None:
        write_text_atomic(out / CARD, card)
    for name, text in (extra or {}).items():
        write_text_atomic(out / name, text)
    # Written last and atomically: a folder with index.json is a finished pack.
    write_text_atomic(out / INDEX, json.dumps(index, indent=2) + "\n")
    # The unit markers of input order, kept until now so that a numbering cut short resumes.
    shutil.rmtree(out / PARTS_DIR, ignore_errors=True)
