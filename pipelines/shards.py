"""WebDataset shards, the pure part: sample payloads, the shard order, keys, tar headers, cuts.

Nothing here touches the filesystem; the tar writer, the write tasks and pack's commit protocol
that use these are `corpusclean.jobs.shards.pack_io`. What is here:

* Spark steps that add the bytes a document contributes to a shard (`add_shard_payload`) and,
  with shuffle on, its place in the shard order (`add_shuffle_order`: a seeded hash of the
  doc_id) and its unit (`add_unit`: one of equal ranges of that hash).
* The greedy cut (`cut_shards`): a shard closes when the next document would take it over the
  target, so shard boundaries follow from the documents of one unit alone.
* Arrow and numpy helpers of the writer: WebDataset keys (`safe_keys`), ustar headers of a
  batch of members (`ustar_headers`), tar sizes (`padded_sizes`, `planning_target`), jsonl
  samples (`grouped`, `joined_bytes`), the doc_id checks (`bad_ids`), and the keys that place
  one task per partition (`partition_keys`).

Sizes are "virtual" for cutting: a sample counts its exact tar bytes (512-byte header plus
data padded to 512), capped at half the target. With the cap, every shard but a unit's last is
more than half full, and only a sample over half the target can take a shard over it.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyspark.sql.functions as F
from pyspark.sql import DataFrame

from corpusclean.pipelines.arrowbuf import as_binary, binary_array, value_buffers
from corpusclean.pipelines.columns import JSON, LINE, SHUFFLE_HASH, TXT, UNIT, quoted

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


# A `.jsonl` member of several documents costs its lines plus a header and at most BLOCK - 1
# bytes of padding; each document is charged its share of that worst case, so a shard of
# whole samples never outgrows the estimate. Its last sample may hold fewer documents (less
# charged), hence the same worst case held back from a unit's capacity
# (`corpusclean.jobs.shards.pack_io`).
SAMPLE_OVERHEAD = 2 * BLOCK - 1

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
    offsets, values = value_buffers(doc_ids)
    lengths = np.diff(offsets)
    rel = offsets - offsets[0]
    # Running count of bytes outside the key alphabet: an id is clean when it adds none.
    bad = np.zeros(int(rel[-1]) + 1, dtype=np.int64)
    np.cumsum(~_KEY_BYTE[values[offsets[0] : offsets[-1]]], out=bad[1:])
    kept = (bad[rel[1:]] == bad[rel[:-1]]) & (lengths >= 1) & (lengths <= _MAX_KEPT_KEY)
    keys = as_binary(doc_ids)
    if kept.all():
        return keys
    rewrite = pa.array(np.flatnonzero(~kept))
    new = [safe_key(d).encode("ascii") for d in doc_ids.take(rewrite).to_pylist()]
    return pc.replace_with_mask(keys, pa.array(~kept), pa.array(new, keys.type))


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
    per batch of members, not per member (`bench_tar_writers` in bench/pack.py measures the
    writer built on it against `tarfile.addfile` and webdataset's TarWriter).
    """
    offsets, values = value_buffers(keys)
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
        return df.withColumns({TXT: text.cast("binary"), JSON: meta.cast("binary")})
    line = F.concat(F.to_json(F.struct(*[column(c) for c in data_cols]), JSON_OPTIONS), F.lit("\n"))
    return df.withColumn(LINE, line.cast("binary"))


def add_shuffle_order(df: DataFrame, id_col: str, seed: int) -> DataFrame:
    """Add `_h`, a seeded xxhash64 of the doc_id: the shuffled shard order is (`_h`, doc_id).

    Reads `id_col`.
    """
    return df.withColumn(SHUFFLE_HASH, F.xxhash64(F.lit(seed).cast("int"), column(id_col)))


def add_unit(df: DataFrame, n_units: int) -> DataFrame:
    """Add `_unit`, which of `n_units` equal ranges of the (unsigned) hash `_h` falls in.

    Reads `_h`. The ranges are contiguous, so unit order is hash order; from the top 32 bits
    of the hash, which keeps the product within a long for up to 2**31 units.
    """
    top = F.shiftrightunsigned(F.col(SHUFFLE_HASH), 32)
    return df.withColumn(UNIT, F.shiftright(top * F.lit(n_units).cast("long"), 32))


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


# --------------------------------------------------------------------------- samples and cuts


def padded_sizes(sizes: np.ndarray) -> np.ndarray:
    """Member data sizes rounded up to whole 512-byte tar blocks."""
    return (sizes + (BLOCK - 1)) // BLOCK * BLOCK


def grouped(lines: pa.Array, per_sample: int) -> pa.Array:
    """Consecutive runs of `per_sample` rows of a binary array as one row each, without a copy:
    the rows of a run are adjacent in the data buffer, so only the offsets change."""
    lines = as_binary(lines)
    offsets, data = value_buffers(lines)
    return binary_array(lines.type, offsets[::per_sample], data)


def joined_bytes(arr: pa.Array) -> bytes:
    """All rows of a binary array, concatenated."""
    _, values = value_buffers(arr, relative=True)
    return values.tobytes()


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


def bad_ids(doc_ids: pa.Array, previous: str | None) -> tuple[np.ndarray, str | None]:
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
