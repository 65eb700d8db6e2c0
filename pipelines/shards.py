"""WebDataset shards: sample payloads, the shard order, and the tar writer that cuts shards.

The packing has three parts, each usable and testable on its own:

* Spark steps that add the bytes a document contributes to a shard (`add_shard_payload`) and,
  with shuffle on, its place in the shard order (`add_shuffle_order`: a seeded hash of the
  doc_id) and its unit (`add_unit`: one of equal ranges of that hash).
* The greedy cut (`cut_shards`): a shard closes when the next document would take it over the
  target, so shard boundaries follow from the documents of one unit alone.
* The writer (`write_unit_parts`), run by `mapInArrow` on partitions that each hold whole
  units in shard order. A unit is a hash range (shuffle on) or one input file, whose text the
  task then reads itself (input order). The task writes deterministic ustar members, cuts its
  unit into parts as it goes, renames each finished part into place and then writes its
  small stats file, the part's commit marker, and at the end a marker for the whole unit.
  The driver numbers the parts of all units in order (`corpusclean.jobs.pack`).

Sizes are "virtual" for cutting: a sample counts its exact tar bytes (512-byte header plus
data padded to 512), capped at half the target. With the cap, every shard but a unit's last is
more than half full, and only a sample over half the target can take a shard over it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from corpusclean.pipelines.columns import quoted
from corpusclean.testhook import hold

BLOCK = 512
RECORD = tarfile.RECORDSIZE  # 10240: tar files end padded to a whole record, as GNU tar does
MAX_MEMBER_NAME = 100  # ustar name field; longer names would need PAX headers
KEY_PREFIX_CHARS = 48
ARCHIVE_MTIME = 0
ARCHIVE_MODE = 0o444

# Spark's JSON writer renders timestamps in the session time zone and drops null fields unless
# told otherwise: fixing both keeps the metadata identical on every machine and every key present.
JSON_OPTIONS = {
    "timeZone": "UTC",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
    "ignoreNullFields": "false",
}

STATS_DIR = "_stats"
TMP_DIR = "_tmp"
PARTS_DIR = "_parts"

# A `.jsonl` member of several documents costs its lines plus a header and at most BLOCK - 1
# bytes of padding; each document is charged its share of that worst case, so a shard of
# whole samples never outgrows the estimate. Its last sample may hold fewer documents (less
# charged), hence the same worst case held back from the capacity (`_Unit`).
_SAMPLE_OVERHEAD = 2 * BLOCK - 1

_KEY_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_MAX_KEPT_KEY = 64
_SAFE_KEY = re.compile(rf"[A-Za-z0-9_-]{{1,{_MAX_KEPT_KEY}}}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")
# `_SAFE_KEY` as a byte table: its characters are ASCII, so an id matches it exactly when every
# UTF-8 byte is in the table (any byte of a non-ASCII character is >= 0x80) and the length fits.
_KEY_BYTE = np.zeros(256, dtype=bool)
_KEY_BYTE[np.frombuffer(_KEY_CHARS, dtype=np.uint8)] = True


# --------------------------------------------------------------------------- keys and sizes


def safe_key(doc_id: str) -> str:
    """A WebDataset `__key__` for a doc_id: ASCII, no dots or slashes, unique per doc_id.

    WebDataset splits a member name at the first dot of its last path part and treats slashes
    as directories, so a doc_id like `a.b/c` would become a different sample. Ids made only of
    `[A-Za-z0-9_-]` (up to 64 characters) are kept as they are; any other id becomes its
    readable part plus `~` and 16 hex digits of its BLAKE2b hash. `~` never occurs in a kept id,
    so kept and rewritten keys cannot collide; the original id stays in the sample's metadata.
    """
    if doc_id is None:
        raise ValueError("doc_id is null")
    if _SAFE_KEY.fullmatch(doc_id):
        return doc_id
    digest = hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    readable = _UNSAFE_RUN.sub("_", doc_id)[:KEY_PREFIX_CHARS]
    return f"{readable}~{digest}"


def safe_keys(doc_ids: pa.Array) -> pa.Array:
    """`safe_key` of every doc_id of a string array, as a binary array.

    The common case, ids that already are keys, is recognised on the UTF-8 bytes of the whole
    array at once and returned as a zero-copy view; only the other ids go through `safe_key`,
    one by one. A null id raises `safe_key`'s error.
    """
    offsets, values = _offsets_values(doc_ids)
    lengths = np.diff(offsets)
    rel = offsets - offsets[0]
    # Running count of bytes outside the key alphabet: an id is clean when it adds none.
    bad = np.zeros(int(rel[-1]) + 1, dtype=np.int64)
    np.cumsum(~_KEY_BYTE[values[offsets[0] : offsets[-1]]], out=bad[1:])
    kept = (bad[rel[1:]] == bad[rel[:-1]]) & (lengths >= 1) & (lengths <= _MAX_KEPT_KEY)
    keys = _as_binary(doc_ids)
    if kept.all():
        return keys
    rewrite = pa.array(np.flatnonzero(~kept))
    new = [safe_key(d).encode("ascii") for d in doc_ids.take(rewrite).to_pylist()]
    return pc.replace_with_mask(keys, pa.array(~kept), pa.array(new, keys.type))


def member_bytes(size: int) -> int:
    """Bytes a tar member of `size` data bytes takes: one header block plus padded data."""
    return BLOCK + -(-size // BLOCK) * BLOCK


def archive_bytes(members_bytes: int) -> int:
    """File size of a tar holding `members_bytes` of members: end blocks, padded to a record."""
    return -(-(members_bytes + 2 * BLOCK) // RECORD) * RECORD


def planning_target(target_bytes: int) -> int:
    """The member bytes a shard may hold so that, with end blocks and record padding, the
    file stays within `target_bytes`."""
    return max(BLOCK, (target_bytes // RECORD) * RECORD - 2 * BLOCK)


def _header_template() -> tuple[bytes, int]:
    info = tarfile.TarInfo("x")
    info.size = 0
    info.mtime = ARCHIVE_MTIME
    info.mode = ARCHIVE_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    head = bytearray(info.tobuf(tarfile.USTAR_FORMAT, "ascii", "strict"))
    head[0:100] = bytes(100)
    head[124:136] = b"00000000000\x00"
    head[148:156] = b"        "
    return bytes(head), sum(head)


_TEMPLATE, _TEMPLATE_SUM = _header_template()
_TEMPLATE_ROW = np.frombuffer(_TEMPLATE, dtype=np.uint8)
_SIZE_DIGITS = 11  # ustar size field: 11 octal digits and a NUL
_SIZE_SHIFTS = np.arange(3 * (_SIZE_DIGITS - 1), -1, -3, dtype=np.int64)
_CHKSUM_SHIFTS = np.arange(15, -1, -3, dtype=np.int64)  # 6 octal digits, then NUL and a space
_VARYING = 124 + _SIZE_DIGITS + 1  # name, mode, uid, gid and size fields
_VARYING_SUM = _TEMPLATE_SUM - int(_TEMPLATE_ROW[:_VARYING].sum())


def ustar_headers(keys: pa.Array, ext: str, sizes: np.ndarray) -> np.ndarray:
    """The ustar header `tarfile` writes for member `{key}.{ext}` of `sizes[i]` bytes, per key.

    Fixed fields: mtime 0, mode 0444, uid/gid 0, empty user and group names; tests check the
    bytes equal `TarInfo.tobuf` for the same member. Returns an (n, 512) uint8 array: rows of
    the template with the name, the size in octal and the checksum (the byte sum with the
    checksum field as spaces, which the template holds) filled in column-wise, so the cost is
    per batch of members, not per member (bench/pack.py: ~300k two-member samples/s with
    sha256, against ~20k for `tarfile.addfile`).
    """
    offsets, values = _offsets_values(keys)
    lengths = np.diff(offsets)
    n = len(lengths)
    sizes = np.asarray(sizes, dtype=np.int64)
    suffix = f".{ext}".encode("ascii")
    head = np.empty((n, BLOCK), dtype=np.uint8)
    if not n:
        return head
    name_bytes = values[offsets[0] : offsets[-1]]
    longest = int(lengths.argmax())
    if int(lengths[longest]) + len(suffix) > MAX_MEMBER_NAME:
        name = bytes(values[offsets[longest] : offsets[longest + 1]]) + suffix
        raise ValueError(f"tar member name longer than {MAX_MEMBER_NAME} bytes: {name!r}")
    if len(name_bytes) and int(name_bytes.max()) > 0x7F:
        raise ValueError("tar member names must be ASCII")
    if int(sizes.max()) >= 8**_SIZE_DIGITS or int(sizes.min()) < 0:
        raise ValueError(f"tar member size outside the ustar size field: {int(sizes.max())}")
    head[:] = _TEMPLATE_ROW
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(name_bytes)) - np.repeat(offsets[:-1] - offsets[0], lengths)
    head[rows, cols] = name_bytes
    tail = np.arange(len(suffix))
    head[np.arange(n)[:, None], lengths[:, None] + tail] = np.frombuffer(suffix, dtype=np.uint8)
    head[:, 124 : 124 + _SIZE_DIGITS] = ((sizes[:, None] >> _SIZE_SHIFTS) & 7) + ord("0")
    # Only the name and size fields (the first 136 bytes) differ from the template, whose sum
    # already counts the checksum field as spaces.
    chksum = _VARYING_SUM + head[:, :_VARYING].sum(axis=1, dtype=np.int64)
    head[:, 148:154] = ((chksum[:, None] >> _CHKSUM_SHIFTS) & 7) + ord("0")
    head[:, 154] = 0
    return head


# --------------------------------------------------------------------------- Spark steps


def column(name: str) -> Any:
    """The column named `name` exactly: a dot in it is part of the name, not a struct field."""
    return F.col(quoted(name))


def add_shard_payload(
    df: DataFrame, columns: Sequence[str], text_col: str, docs_per_sample: int
) -> DataFrame:
    """Add the bytes each document contributes to a shard.

    Reads `columns` (the documents' own columns, `text_col` among them; a name may hold dots
    or be one of the columns added here, whose values are read before they are replaced,
    so compute the payload before adding any other column of pack's). With one document
    per sample adds `_txt` (the text, UTF-8; a null text is empty) and `_json` (all other
    columns, the doc_id included, as one JSON object); with several adds `_line` (all columns
    as one JSON line). The writer measures the sample sizes on these bytes itself.
    """
    data_cols = list(columns)
    text = F.coalesce(column(text_col), F.lit(""))
    if docs_per_sample == 1:
        meta = F.to_json(F.struct(*[column(c) for c in data_cols if c != text_col]), JSON_OPTIONS)
        return df.withColumns({"_txt": text.cast("binary"), "_json": meta.cast("binary")})
    line = F.concat(F.to_json(F.struct(*[column(c) for c in data_cols]), JSON_OPTIONS), F.lit("\n"))
    return df.withColumn("_line", line.cast("binary"))


def add_shuffle_order(df: DataFrame, id_col: str, seed: int) -> DataFrame:
    """Add `_h`, a seeded xxhash64 of the doc_id: the shuffled shard order is (`_h`, doc_id).

    Reads `id_col`.
    """
    return df.withColumn("_h", F.xxhash64(F.lit(seed).cast("int"), column(id_col)))


def add_unit(df: DataFrame, n_units: int) -> DataFrame:
    """Add `_unit`, which of `n_units` equal ranges of the (unsigned) hash `_h` falls in.

    Reads `_h`. The ranges are contiguous, so unit order is hash order; from the top 32 bits
    of the hash, which keeps the product within a long for up to 2**31 units.
    """
    top = F.shiftrightunsigned(F.col("_h"), 32)
    return df.withColumn("_unit", F.shiftright(top * F.lit(n_units).cast("long"), 32))


# --------------------------------------------------------------------------- task placement


def spark_hash_int(values: np.ndarray, seed: int = 42) -> np.ndarray:
    """Spark's `hash()` (Murmur3 x86 32-bit, seed 42) of int32 values, vectorised."""
    u = np.uint32
    with np.errstate(over="ignore"):
        k = np.asarray(values).astype(np.int32).view(np.uint32) * u(0xCC9E2D51)
        k = (k << u(15)) | (k >> u(17))
        k = k * u(0x1B873593)
        h = np.full(k.shape, seed, dtype=np.uint32) ^ k
        h = (h << u(13)) | (h >> u(19))
        h = h * u(5) + u(0xE6546B64)
        h ^= u(4)
        h ^= h >> u(16)
        h = h * u(0x85EBCA6B)
        h ^= h >> u(13)
        h = h * u(0xC2B2AE35)
        h ^= h >> u(16)
    return h.view(np.int32)


def partition_keys(n_partitions: int) -> np.ndarray:
    """For each partition p < n, an int32 key that `repartition(n, key)` sends to partition p.

    Hash partitioning of the task numbers themselves would leave about a third of the
    partitions empty and give others two or three tasks; with these keys each partition gets
    exactly the one task it was given.
    """
    keys = np.full(n_partitions, -1, dtype=np.int64)
    missing = n_partitions
    start = 0
    chunk = max(1024, 4 * n_partitions)
    while missing:
        cand = np.arange(start, start + chunk, dtype=np.int64)
        parts = np.mod(spark_hash_int(cand.astype(np.int32)).astype(np.int64), n_partitions)
        order = np.argsort(parts, kind="stable")
        first = np.unique(parts[order], return_index=True)
        for p, idx in zip(first[0].tolist(), first[1].tolist(), strict=True):
            if keys[p] < 0:
                keys[p] = cand[order[idx]]
                missing -= 1
        start += chunk
    return keys.astype(np.int32)


# --------------------------------------------------------------------------- the writer


def shard_name(prefix: str, shard: int) -> str:
    """`{prefix}-000042.tar`."""
    return f"{prefix}-{shard:06d}.tar"


def stats_name(prefix: str, shard: int) -> str:
    """The commit marker of a shard, under `_stats/`."""
    return f"{prefix}-{shard:06d}.json"


def dali_name(prefix: str, shard: int) -> str:
    """The DALI index of a shard, next to it (`{prefix}-000042.idx`)."""
    return f"{prefix}-{shard:06d}.idx"


@dataclass
class ShardStats:
    """What a finished shard holds; written as its commit marker and copied into the index."""

    shard: int
    url: str
    nsamples: int
    ndocs: int
    filesize: int
    sha256: str
    # Of the DALI .idx beside it, when there is one.
    dali_sha256: str | None = None

    def to_json(self, fingerprint: str) -> str:
        """The stats file's content."""
        fields = {k: v for k, v in self.__dict__.items() if v is not None}
        return json.dumps({**fields, "fingerprint": fingerprint}, sort_keys=True) + "\n"


def _as_binary(arr: pa.Array) -> pa.Array:
    """`arr` as a binary or large_binary array; string arrays become zero-copy views."""
    kind = arr.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return arr
    if pa.types.is_string(kind):
        return arr.view(pa.binary())
    if pa.types.is_large_string(kind):
        return arr.view(pa.large_binary())
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        return arr.cast(pa.large_binary())
    raise TypeError(f"expected a string or binary array, got {kind}")


def _offsets_values(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a string or binary array without copying the values.

    `offsets` (int64, one more than the rows) index into `values`, the whole data buffer as
    uint8, so element i is `values[offsets[i]:offsets[i + 1]]` whatever the array's slice offset.
    """
    arr = _as_binary(arr)
    width = 8 if pa.types.is_large_binary(arr.type) else 4
    buffers = arr.buffers()
    if len(arr) == 0 or buffers[1] is None:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    offsets = np.frombuffer(
        buffers[1],
        dtype=np.int64 if width == 8 else np.int32,
        count=len(arr) + 1,
        offset=arr.offset * width,
    ).astype(np.int64)
    data = buffers[2]
    values = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, values


def _binary_from(kind: pa.DataType, offsets: np.ndarray, data: Any) -> pa.Array:
    """A binary array of `kind` over `data` (a buffer or uint8 array) cut at `offsets`."""
    wide = pa.types.is_large_binary(kind)
    cuts = pa.py_buffer(np.asarray(offsets, dtype=np.int64 if wide else np.int32))
    return pa.Array.from_buffers(kind, len(offsets) - 1, [None, cuts, pa.py_buffer(data)])


def _padded_sizes(sizes: np.ndarray) -> np.ndarray:
    return (sizes + (BLOCK - 1)) // BLOCK * BLOCK


class TarShardWriter:
    """Writes one shard under a temporary name, hashing as it goes; `commit` renames it.

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

    def add_sample(self, key: str, members: Sequence[tuple[str, bytes]], ndocs: int = 1) -> None:
        """Append one sample: a member `{key}.{ext}` for each (ext, data)."""
        self.add_samples(
            pa.array([key.encode("ascii")], pa.binary()),
            [(ext, pa.array([data], pa.binary())) for ext, data in members],
            ndocs,
        )

    def add_samples(
        self, keys: pa.Array, members: Sequence[tuple[str, pa.Array]], ndocs: int | None = None
    ) -> None:
        """Append one sample per key: a member `{key}.{ext}` for each (ext, data array).

        `keys` (ASCII strings or binary) and every data array have one row per sample and no
        nulls; `ndocs` is the number of documents the samples hold (default: one each). Each
        chunk of samples becomes one buffer (headers from `ustar_headers`, then Arrow joins
        header, data and zero padding of every member in C++), written and hashed in one call:
        the profiling run of the partition writer (50k documents of 2 KB) took 0.70 s with
        a header and a buffered write per piece, 0.29 s so, of which sha256 and the file write
        are 0.18 s.
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
            datas.append(_as_binary(data))
        sizes = [np.diff(_offsets_values(data)[0]) for data in datas]
        ends = np.cumsum(sum((BLOCK + _padded_sizes(s) for s in sizes), np.zeros(n, np.int64)))
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
        sample_bytes = sum((BLOCK + _padded_sizes(s) for _, _, s in members), np.zeros(n, np.int64))
        # Where each sample's first header lands in the file; moved on member by member.
        at = self.offset + np.cumsum(sample_bytes) - sample_bytes
        names = keys.cast(pa.string()).to_pylist() if self._idx is not None else []
        pieces: list[pa.Array] = []
        entries: list[list[str]] = []
        for ext, data, sizes in members:
            padded = _padded_sizes(sizes)
            pad = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(padded - sizes, out=pad[1:])
            pieces += [
                _binary_from(kind, blocks, ustar_headers(keys, ext, sizes)),
                data if data.type == kind else data.cast(kind),
                _binary_from(kind, pad, np.zeros(int(pad[-1]), dtype=np.uint8)),
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


def write_text_atomic(path: Path, text: str, temp_dir: Path | None = None) -> None:
    """Write a small text file under a temporary name and rename it into place."""
    tmp_dir = temp_dir if temp_dir is not None else path.parent
    tmp = tmp_dir / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    tmp.write_bytes(text.encode("utf-8"))  # bytes: no newline translation, checksums hold
    os.replace(tmp, path)


DUPLICATE_MARK = "corpusclean-duplicate-doc-id"


def _grouped(lines: pa.Array, per_sample: int) -> pa.Array:
    """Consecutive runs of `per_sample` rows of a binary array as one row each, without a copy:
    the rows of a run are adjacent in the data buffer, so only the offsets change."""
    lines = _as_binary(lines)
    offsets, _ = _offsets_values(lines)
    data = lines.buffers()[2]
    return _binary_from(lines.type, offsets[::per_sample], data if data is not None else b"")


def _joined_bytes(arr: pa.Array) -> bytes:
    """All rows of a binary array, concatenated."""
    offsets, values = _offsets_values(arr)
    return values[offsets[0] : offsets[-1]].tobytes()


@dataclass(frozen=True)
class ShardFiles:
    """Where a shard's tar, DALI index and stats file (its commit marker) go, and its number."""

    number: int
    tar: Path
    dali: Path
    stats: Path


def final_files(out: Path, prefix: str, shard: int) -> ShardFiles:
    """A numbered shard's files: `{prefix}-000042.tar`, `.idx` and `_stats/{prefix}-000042.json`."""
    return ShardFiles(
        shard,
        out / shard_name(prefix, shard),
        out / dali_name(prefix, shard),
        out / STATS_DIR / stats_name(prefix, shard),
    )


def part_files(out: Path, unit: int, part: int) -> ShardFiles:
    """The files of part `part` of unit `unit`, under `_parts/` until the driver numbers it."""
    stem = out / PARTS_DIR / f"u{unit:06d}-{part:06d}"
    return ShardFiles(
        part, stem.with_suffix(".tar"), stem.with_suffix(".idx"), stem.with_suffix(".json")
    )


def unit_marker(out: Path, unit: int) -> Path:
    """The file a write task leaves when it has written every part of a unit."""
    return out / PARTS_DIR / f"u{unit:06d}.json"


def write_unit_marker(out: Path, unit: int, parts: int, docs: int, fingerprint: str) -> None:
    """Mark unit `unit` complete: `parts` committed parts holding `docs` documents."""
    marker = {"unit": unit, "parts": parts, "docs": docs, "fingerprint": fingerprint}
    write_text_atomic(unit_marker(out, unit), json.dumps(marker) + "\n", out / TMP_DIR)


class _Shard:
    def __init__(
        self,
        files: ShardFiles,
        docs_per_sample: int,
        dali_index: bool,
        fingerprint: str,
        tmp: Path,
        attempt: str,
    ) -> None:
        self.files = files
        self.docs_per_sample = docs_per_sample
        self.dali_index = dali_index
        self.fingerprint = fingerprint
        self.tmp = tmp
        self.writer = TarShardWriter(tmp / f"{files.tar.name}.{attempt}.part", dali_index)
        # A jsonl sample still open at the end of a run: its lines so far and its key.
        self.pending: list[pa.Array] = []
        self.pending_docs = 0
        self.first_key = pa.array([], pa.binary())

    def add(self, doc_ids: pa.Array, payload: Sequence[pa.Array]) -> None:
        """Append consecutive documents of this shard (their ids already checked non-null)."""
        for column in payload:
            if column.null_count:
                raise ValueError("a document's payload column is null")
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
                [("jsonl", _grouped(lines.slice(i, full * per), per))],
                full * per,
            )
            i += full * per
        if i < n:
            self.first_key = safe_keys(doc_ids.slice(i, 1))
            self.pending = [lines.slice(i)]
            self.pending_docs = n - i

    def _flush_pending(self) -> None:
        if self.pending_docs:
            data = b"".join(_joined_bytes(part) for part in self.pending)
            self.writer.add_samples(
                self.first_key, [("jsonl", pa.array([data], pa.binary()))], self.pending_docs
            )
            self.pending = []
            self.pending_docs = 0

    def commit(self) -> ShardStats:
        self._flush_pending()
        filesize, sha = self.writer.finish()
        files = self.files
        os.replace(self.writer.temp_path, files.tar)
        dali_sha = None
        if self.dali_index:
            idx = self.writer.dali_index()
            write_text_atomic(files.dali, idx, self.tmp)
            dali_sha = hashlib.sha256(idx.encode()).hexdigest()
        stats = ShardStats(
            files.number,
            files.tar.name,
            self.writer.nsamples,
            self.writer.ndocs,
            filesize,
            sha,
            dali_sha,
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


# --------------------------------------------------------------------------- units


def cut_shards(vsizes: np.ndarray, fill: int, capacity: int) -> tuple[np.ndarray, int]:
    """Greedy shard cut of consecutive documents: which shard each goes to, and the fill after.

    The shard open before the first document has `fill` virtual bytes and number 0 here; a
    document opens the next shard when it would take the open one over `capacity`, unless the
    open one is empty. With every virtual size at most half the capacity (see the module
    docstring), every closed shard is more than half full. The loop runs once per shard.
    """
    sizes = np.asarray(vsizes, dtype=np.int64)
    n = len(sizes)
    shard = np.zeros(n, dtype=np.int64)
    ends = np.cumsum(sizes)
    i = 0
    current = 0
    while i < n:
        before = int(ends[i - 1]) if i else 0
        j = int(np.searchsorted(ends, before + capacity - fill, "right"))
        if j == i:
            if fill:
                current, fill = current + 1, 0
                continue
            j = i + 1  # a document over the whole capacity goes alone
        shard[i:j] = current
        fill += int(ends[j - 1]) - before
        i = j
        if i < n:
            current, fill = current + 1, 0
    return shard, fill


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
    text_col: str = "text"
    skip: frozenset[tuple[int, int]] = field(default_factory=frozenset)


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
        reserve = _SAMPLE_OVERHEAD if spec.docs_per_sample > 1 else 0
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

    def _check_rows(self, batch: pa.RecordBatch) -> None:
        # A file split over two tasks would have two writers of one unit: refuse it.
        rows = batch.column("_row").to_numpy(zero_copy_only=False)
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
            lines = batch.column("_line")
            share = -(-_SAMPLE_OVERHEAD // self.spec.docs_per_sample)
            return [lines], np.diff(_offsets_values(lines)[0]) + share
        if self.reader is not None:
            text = self.reader.take(batch.num_rows)
            if text is None:
                raise ValueError(f"input file {self.file} has fewer rows than Spark read from it")
            if text.null_count:
                text = pc.fill_null(text, "")
        else:
            text = batch.column("_txt")
        meta = batch.column("_json")
        sizes = 2 * BLOCK + sum(
            _padded_sizes(np.diff(_offsets_values(col)[0])) for col in (text, meta)
        )
        return [text, meta], sizes

    def add(self, batch: pa.RecordBatch) -> None:
        """Cut the batch's documents into the unit's parts and write them."""
        n = batch.num_rows
        payload, sizes = self._payload(batch)
        cap = max(1, self.capacity // 2)
        shift, self.fill = cut_shards(np.minimum(sizes, cap), self.fill, self.capacity)
        parts = self.part + shift
        self.part = int(parts[-1])
        doc_ids = batch.column(self.spec.id_col)
        bad, self.previous_id = _bad_ids(doc_ids, self.previous_id)
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
        files = part_files(self.out, self.unit, part)
        return _Shard(
            files,
            spec.docs_per_sample,
            spec.dali_index,
            spec.fingerprint,
            self.out / TMP_DIR,
            self.attempt,
        )

    def finish(self) -> pa.RecordBatch:
        """Commit the last part and leave the unit marker; returns the unit's result row."""
        if self.reader is not None and not self.reader.exhausted():
            raise ValueError(f"input file {self.file} has more rows than Spark read from it")
        if self.current is not None:
            self.current.commit()
            self.current = None
        parts = self.part + 1 if self.docs else 0
        write_unit_marker(self.out, self.unit, parts, self.docs, self.spec.fingerprint)
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


def _bad_ids(doc_ids: pa.Array, previous: str | None) -> tuple[np.ndarray, str | None]:
    """Rows whose doc_id is null or equal to the one before it; and the batch's last id."""
    n = len(doc_ids)
    nulls = doc_ids.is_null().to_numpy(zero_copy_only=False)
    repeated = np.zeros(n, dtype=bool)
    if n:
        first = doc_ids[0].as_py()
        repeated[0] = first is not None and first == previous
    if n > 1:
        same = pc.equal(doc_ids.slice(1), doc_ids.slice(0, n - 1)).fill_null(False)
        repeated[1:] = same.to_numpy(zero_copy_only=False)
    return repeated | nulls, doc_ids[n - 1].as_py() if n else previous


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
        names = batch.column("_file")
        path = os.path.realpath(_file_of(names[0].as_py()))
        if names[len(names) - 1].as_py() != names[0].as_py() or path not in by_path:
            raise ValueError(
                f"a task read {path} with other files, or a file not planned; input order "
                "needs each file whole in one Spark task"
            )
        yield by_path[path], path, batch
        return
    units = batch.column("_unit").to_numpy(zero_copy_only=False)
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


# --------------------------------------------------------------------------- reading back


class HashingReader(io.RawIOBase):
    """A read-only stream over a file that hashes every byte read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        """Always True."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Read into `buffer`, updating the hash."""
        n = self._raw.readinto(buffer)
        if n:
            view = memoryview(buffer)[:n]
            self.sha.update(view)
            self.count += n
        return n or 0

    def drain(self) -> None:
        """Read (and hash) whatever the tar reader left unread after the end blocks."""
        while chunk := self._raw.read(1 << 20):
            self.sha.update(chunk)
            self.count += len(chunk)


def read_samples(stream: IO[bytes], url: str) -> Iterator[dict[str, Any]]:
    """The samples of one shard as WebDataset's own reader groups them (key -> member bytes)."""
    from webdataset.tariterators import group_by_keys, tar_file_expander

    source = [{"url": url, "stream": stream}]
    return group_by_keys(tar_file_expander(source))


def file_sha256(path: str) -> tuple[int, str]:
    """(size, sha256) of a file, read in 1 MiB chunks."""
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()
