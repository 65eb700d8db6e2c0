"""WebDataset shards: sample payloads, shard assignment, and the per-partition tar writer.

The packing has three parts, each usable and testable on its own:

* Spark steps that add what a document costs in a shard (`add_shard_payload`), where it goes in
  the shard order (`add_shuffle_order` / `add_input_blocks`), and the per-bucket totals the driver
  plans with (`summarize_buckets`). A bucket is a fixed slice of the shard order: the top 16
  bits of a seeded hash of the doc_id (shuffle on), or a block of rows of one input file (off).
* Pure planning (`plan_shards`, `assign_shard_ids`): buckets are packed greedily into groups of
  at most `target_bytes`; a group that is one oversized bucket is cut evenly into several
  shards. Shard numbers follow from the bucket totals alone, so they are fixed before any
  document moves and never depend on partitioning.
* The writer (`write_partition_shards`), run by `mapInArrow` on partitions that each hold whole
  groups sorted in shard order: it writes deterministic ustar members, renames a finished shard
  into place and then writes its small stats file, the shard's commit marker.

Sizes are "virtual": a sample counts its exact tar bytes (512-byte header plus data padded to
512), capped at half the target. The cap makes the even cut of an oversized group gap-free:
no single document can step over a whole shard, so a group planned as n shards yields exactly n.
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
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame

BLOCK = 512
RECORD = tarfile.RECORDSIZE  # 10240: tar files end padded to a whole record, as GNU tar does
BUCKET_BITS = 16
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

# Per-document share of a `.jsonl` member's header and average padding, for planning only.
_SAMPLE_OVERHEAD = BLOCK + BLOCK // 2

_SAFE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")


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


def _padded(col: Column) -> Column:
    return ((col.cast("long") + F.lit(BLOCK - 1)) / F.lit(BLOCK)).cast("long") * F.lit(BLOCK)


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
_ZERO_SIZE_SUM = sum(b"00000000000\x00")


def ustar_header(name: bytes, size: int) -> bytes:
    """The ustar header `tarfile` writes for a regular file with the archive's fixed fields.

    Fixed fields: mtime 0, mode 0444, uid/gid 0, empty user and group names. Built from a
    template because `tarfile.addfile` measured 21k docs/s (two members each) against 76k for
    this, on this machine; tests check the bytes equal `TarInfo.tobuf` for the same member.
    """
    if len(name) > MAX_MEMBER_NAME:
        raise ValueError(f"tar member name longer than {MAX_MEMBER_NAME} bytes: {name!r}")
    size_field = b"%011o\x00" % size
    head = bytearray(_TEMPLATE)
    head[0 : len(name)] = name
    head[124:136] = size_field
    chksum = _TEMPLATE_SUM + sum(name) + sum(size_field) - _ZERO_SIZE_SUM
    head[148:155] = b"%06o\x00" % chksum
    return bytes(head)


# --------------------------------------------------------------------------- Spark steps


def add_shard_payload(
    df: DataFrame,
    columns: Sequence[str],
    text_col: str,
    docs_per_sample: int,
    target_bytes: int,
) -> DataFrame:
    """Add the bytes each document contributes to a shard and its size there.

    Reads `columns` (the documents' own columns, `text_col` among them). With one document
    per sample adds `_txt` (the text, UTF-8) and `_json` (all other columns, the doc_id
    included, as one JSON object); with several adds `_line` (all columns as one JSON line).
    Adds `_size` (exact tar bytes of the sample for one document per sample, an estimate
    sharing the member overhead otherwise) and `_vsize` (`_size` capped at half of
    `target_bytes`, the unit shards are cut by; pass the `planning_target`).
    """
    data_cols = list(columns)
    # Sizes come from the string columns, not the binary copies: octet_length of a string is
    # its stored UTF-8 length, so the plan pass never materialises the payload.
    text = F.coalesce(F.col(text_col), F.lit(""))
    if docs_per_sample == 1:
        meta = F.to_json(F.struct(*[F.col(c) for c in data_cols if c != text_col]), JSON_OPTIONS)
        out = df.withColumns({"_txt": text.cast("binary"), "_json": meta.cast("binary")})
        size = F.lit(2 * BLOCK) + _padded(F.octet_length(text)) + _padded(F.octet_length(meta))
    else:
        line = F.concat(
            F.to_json(F.struct(*[F.col(c) for c in data_cols]), JSON_OPTIONS), F.lit("\n")
        )
        out = df.withColumn("_line", line.cast("binary"))
        share = -(-_SAMPLE_OVERHEAD // docs_per_sample)
        size = F.octet_length(line).cast("long") + F.lit(share)
    cap = max(1, target_bytes // 2)
    out = out.withColumn("_size", size.cast("long"))
    return out.withColumn("_vsize", F.least(F.col("_size"), F.lit(cap).cast("long")))


def add_shuffle_order(df: DataFrame, id_col: str, seed: int) -> DataFrame:
    """Add `_h`, a seeded xxhash64 of the doc_id, and `_bucket`, its top 16 bits (0..65535).

    Reads `id_col`. Shard order is (`_bucket`, `_h`, doc_id): inside a bucket all hashes share
    their sign, so this is the unsigned hash order and buckets are contiguous slices of it.
    """
    h = F.xxhash64(F.lit(seed).cast("int"), F.col(id_col))
    return df.withColumn("_h", h).withColumn(
        "_bucket", F.shiftrightunsigned(F.col("_h"), 64 - BUCKET_BITS)
    )


def add_input_blocks(df: DataFrame, rows_per_block: int) -> DataFrame:
    """Add `_block`, the block of `rows_per_block` rows of its input file a row falls in.

    Reads `_file` and `_row` (the scan's `_metadata.file_path` and `_metadata.row_index`). Shard
    order is (`_file`, `_row`): input order; buckets are (`_file`, `_block`).
    """
    return df.withColumn("_block", F.floor(F.col("_row") / F.lit(rows_per_block)).cast("long"))


def summarize_buckets(df: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One row per non-empty bucket: `docs`, `vbytes` (sum of `_vsize`), `bytes` (of `_size`).

    Reads the bucket `keys` and `_vsize`, `_size`. The result is small (at most one row per
    bucket) and unordered: `sort_buckets` puts the collected table in shard order, which spares
    Spark a range-partitioned sort of a few thousand rows.
    """
    return df.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("docs"),
        F.sum("_vsize").alias("vbytes"),
        F.sum("_size").alias("bytes"),
    )


def sort_buckets(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The collected bucket summary in shard order (ascending by the bucket keys)."""
    return table.sort_by([(k, "ascending") for k in keys])


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class ShardPlan:
    """Buckets packed into groups (one Spark task each) and groups cut into numbered shards."""

    bucket_group: np.ndarray  # group of each bucket, in shard order
    group_base: np.ndarray  # first global shard number of each group
    group_shards: np.ndarray  # number of shards of each group
    group_vbytes: np.ndarray  # sum of virtual sizes of each group
    group_docs: np.ndarray

    @property
    def n_groups(self) -> int:
        """Number of groups (Spark tasks that write shards)."""
        return len(self.group_base)

    @property
    def n_shards(self) -> int:
        """Total number of shards."""
        return int(self.group_shards.sum()) if self.n_groups else 0

    def shards_of(self, group: int) -> range:
        """The global shard numbers a group writes."""
        base = int(self.group_base[group])
        return range(base, base + int(self.group_shards[group]))


def plan_shards(bucket_vbytes: np.ndarray, bucket_docs: np.ndarray, target_bytes: int) -> ShardPlan:
    """Pack consecutive buckets into groups of at most `target_bytes` and number their shards.

    A group closes before a bucket would push it over the target, so a group is one shard
    unless it is a single bucket larger than the target, which is cut into
    ceil(vbytes / target) even shards.
    """
    vbytes = np.asarray(bucket_vbytes, dtype=np.int64)
    docs = np.asarray(bucket_docs, dtype=np.int64)
    bucket_group = np.empty(len(vbytes), dtype=np.int64)
    g_v: list[int] = []
    g_d: list[int] = []
    current_v = current_d = 0
    group = -1
    for i, (v, d) in enumerate(zip(vbytes.tolist(), docs.tolist(), strict=True)):
        if group < 0 or current_v + v > target_bytes:
            if group >= 0:
                g_v.append(current_v)
                g_d.append(current_d)
            group += 1
            current_v = current_d = 0
        current_v += v
        current_d += d
        bucket_group[i] = group
    if group >= 0:
        g_v.append(current_v)
        g_d.append(current_d)
    group_vbytes = np.array(g_v, dtype=np.int64)
    group_shards = np.maximum(1, -(-group_vbytes // target_bytes)).astype(np.int64)
    group_base = np.concatenate([[0], np.cumsum(group_shards)[:-1]]).astype(np.int64)
    if not len(group_vbytes):
        group_base = np.zeros(0, dtype=np.int64)
    return ShardPlan(bucket_group, group_base, group_shards, group_vbytes, np.array(g_d, np.int64))


def assign_shard_ids(
    vsizes: np.ndarray, start: int, group_vbytes: int, group_shards: int, group_base: int
) -> tuple[np.ndarray, int]:
    """Global shard numbers of consecutive documents of one group, and the offset after them.

    A document goes to shard `base + floor(v * n / V)`, v being the group's virtual bytes before
    it: an even cut into exactly n shards (each virtual size is at most V / n, see the module
    docstring), numbered without gaps.
    """
    sizes = np.asarray(vsizes, dtype=np.int64)
    ends = np.cumsum(sizes) + start
    starts = ends - sizes
    if group_shards == 1:
        ids = np.full(len(sizes), group_base, dtype=np.int64)
    elif group_vbytes * group_shards < 2**62:
        ids = group_base + (starts * group_shards) // group_vbytes
    else:  # products beyond int64: exact Python integers
        ids = np.array(
            [group_base + (int(s) * group_shards) // group_vbytes for s in starts], dtype=np.int64
        )
    end = int(ends[-1]) if len(sizes) else start
    return ids, end


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

    Hash partitioning of the group numbers themselves would leave about a third of the tasks
    empty and give others two or three groups; these keys give every group its own task.
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

    def to_json(self, fingerprint: str) -> str:
        """The stats file's content."""
        return json.dumps({**self.__dict__, "fingerprint": fingerprint}, sort_keys=True) + "\n"


class TarShardWriter:
    """Writes one shard under a temporary name, hashing as it goes; `commit` renames it.

    Members are written in the order given with fixed header fields, so the same samples
    always give the same bytes. `add_sample` sorts a sample's members by extension, as
    WebDataset's own writer does.
    """

    _FLUSH = 1 << 20

    def __init__(self, temp_path: Path, dali_index: bool = False) -> None:
        self.temp_path = temp_path
        self._file: IO[bytes] | None = open(temp_path, "wb")  # noqa: SIM115 - closed in finish
        self._sha = hashlib.sha256()
        self._buf = bytearray()
        self.offset = 0
        self.nsamples = 0
        self.ndocs = 0
        self._idx: list[str] | None = [] if dali_index else None

    def _emit(self, data: bytes) -> None:
        self._buf += data
        self.offset += len(data)
        if len(self._buf) >= self._FLUSH:
            self._flush()

    def _flush(self) -> None:
        if self._buf and self._file is not None:
            self._file.write(self._buf)
            self._sha.update(self._buf)
            self._buf = bytearray()

    def add_sample(self, key: str, members: Sequence[tuple[str, bytes]], ndocs: int = 1) -> None:
        """Append one sample: a member `{key}.{ext}` for each (ext, data)."""
        parts = []
        for ext, data in sorted(members):
            name = f"{key}.{ext}".encode("ascii")
            size = len(data)
            if self._idx is not None:
                parts.append(f"{ext} {self.offset + BLOCK} {size} {key}.{ext}")
            self._emit(ustar_header(name, size))
            self._emit(data)
            rest = size % BLOCK
            if rest:
                self._emit(bytes(BLOCK - rest))
        if self._idx is not None:
            self._idx.append(" ".join(parts))
        self.nsamples += 1
        self.ndocs += ndocs

    def finish(self) -> tuple[int, str]:
        """Write the end-of-archive blocks and record padding; returns (filesize, sha256)."""
        end = self.offset + 2 * BLOCK
        self._emit(bytes(2 * BLOCK + (-end) % RECORD))
        self._flush()
        assert self._file is not None
        self._file.close()
        self._file = None
        return self.offset, self._sha.hexdigest()

    def dali_index(self) -> str:
        """The DALI `.idx` text (v1.2: a header line, then per sample `ext offset size name`)."""
        lines = self._idx or []
        return "".join([f"v1.2 {len(lines)}\n", *(line + "\n" for line in lines)])

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
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True)
class ShardWriteSpec:
    """What a write task needs besides its documents."""

    output_dir: str
    prefix: str
    docs_per_sample: int
    dali_index: bool
    fingerprint: str
    id_col: str
    skip: frozenset[int] = field(default_factory=frozenset)


RESULT_SCHEMA = "shard int, nsamples long, ndocs long, filesize long, sha256 string"
DUPLICATE_MARK = "corpusclean-duplicate-doc-id"


class _Shard:
    def __init__(self, spec: ShardWriteSpec, shard: int, attempt: str) -> None:
        self.spec = spec
        self.shard = shard
        out = Path(spec.output_dir)
        self.final = out / shard_name(spec.prefix, shard)
        self.writer = TarShardWriter(
            out / TMP_DIR / f"{self.final.name}.{attempt}.part", spec.dali_index
        )
        self.lines: list[bytes] = []
        self.first_key = ""

    def add(self, key: str, payload: tuple[bytes, ...]) -> None:
        if self.spec.docs_per_sample == 1:
            self.writer.add_sample(key, [("json", payload[1]), ("txt", payload[0])])
            return
        if not self.lines:
            self.first_key = key
        self.lines.append(payload[0])
        if len(self.lines) >= self.spec.docs_per_sample:
            self._flush_lines()

    def _flush_lines(self) -> None:
        if self.lines:
            self.writer.add_sample(
                self.first_key, [("jsonl", b"".join(self.lines))], len(self.lines)
            )
            self.lines = []

    def commit(self) -> ShardStats:
        self._flush_lines()
        filesize, sha = self.writer.finish()
        out = Path(self.spec.output_dir)
        tmp = out / TMP_DIR
        os.replace(self.writer.temp_path, self.final)
        if self.spec.dali_index:
            write_text_atomic(
                out / dali_name(self.spec.prefix, self.shard), self.writer.dali_index(), tmp
            )
        stats = ShardStats(
            self.shard, self.final.name, self.writer.nsamples, self.writer.ndocs, filesize, sha
        )
        # The stats file is the commit marker: a shard without it is rewritten on resume.
        write_text_atomic(
            out / STATS_DIR / stats_name(self.spec.prefix, self.shard),
            stats.to_json(self.spec.fingerprint),
            tmp,
        )
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


def _result(stats: ShardStats) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "shard": pa.array([stats.shard], pa.int32()),
            "nsamples": pa.array([stats.nsamples], pa.int64()),
            "ndocs": pa.array([stats.ndocs], pa.int64()),
            "filesize": pa.array([stats.filesize], pa.int64()),
            "sha256": pa.array([stats.sha256], pa.string()),
        }
    )


def write_partition_shards(
    batches: Iterator[pa.RecordBatch], spec: ShardWriteSpec
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: write the shards of the groups in this partition; one row per shard.

    Reads `_group`, `_base`, `_nshards`, `_gvbytes`, `_vsize`, the id column, and `_txt` +
    `_json` (one document per sample) or `_line`. Rows must arrive sorted by group and then in
    shard order, every group whole. Shards listed in `spec.skip` (already committed) are not
    written again.
    """
    attempt = _attempt_id()
    payload_cols = ("_txt", "_json") if spec.docs_per_sample == 1 else ("_line",)
    current: _Shard | None = None
    current_id = -1
    group = -1
    offset = 0
    previous_id: str | None = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            groups = batch.column("_group").to_numpy(zero_copy_only=False)
            vsizes = batch.column("_vsize").to_numpy(zero_copy_only=False)
            bases = batch.column("_base").to_numpy(zero_copy_only=False)
            nshards = batch.column("_nshards").to_numpy(zero_copy_only=False)
            gvbytes = batch.column("_gvbytes").to_numpy(zero_copy_only=False)
            ids = np.empty(batch.num_rows, dtype=np.int64)
            # Runs of one group inside the batch: the virtual offset restarts at each new group.
            cuts = np.flatnonzero(np.diff(groups)) + 1
            for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), batch.num_rows], strict=True):
                if int(groups[lo]) != group:
                    group = int(groups[lo])
                    offset = 0
                ids[lo:hi], offset = assign_shard_ids(
                    vsizes[lo:hi], offset, int(gvbytes[lo]), int(nshards[lo]), int(bases[lo])
                )
            doc_ids = batch.column(spec.id_col).to_pylist()
            payloads = list(zip(*(batch.column(c).to_pylist() for c in payload_cols), strict=True))
            for i, shard in enumerate(ids.tolist()):
                if shard != current_id:
                    if current is not None:
                        yield _result(current.commit())
                    current = None if shard in spec.skip else _Shard(spec, shard, attempt)
                    current_id = shard
                doc_id = doc_ids[i]
                if doc_id == previous_id:
                    raise ValueError(f"{DUPLICATE_MARK}: {doc_id!r}")
                previous_id = doc_id
                if current is not None:
                    current.add(safe_key(doc_id), payloads[i])
        if current is not None:
            yield _result(current.commit())
            current = None
    finally:
        if current is not None:
            current.writer.abort()


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
