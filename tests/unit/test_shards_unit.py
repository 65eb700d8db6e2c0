"""Shard helpers without Spark or files: keys, tar headers and sizes, task placement, the cut."""

from __future__ import annotations

import tarfile

import numpy as np
import pyarrow as pa
import pytest
from webdataset.tariterators import base_plus_ext

from corpusclean.pipelines import shards as S

TRICKY_IDS = [
    "a.b",
    "a/b",
    "a_b",
    "a b",
    "文档.1",
    "ünïcødé/päth.txt",
    "",
    ".",
    "x" * 64,
    "x" * 65,
    "__key__",
    "__meta__.json",
    "-leading-dash",
]


# --------------------------------------------------------------------------- keys


def test_plain_ids_are_kept() -> None:
    for doc_id in ("doc-1", "A_b-9", "x" * 64, "__key__"):
        assert S.safe_key(doc_id) == doc_id


@pytest.mark.parametrize("doc_id", TRICKY_IDS)
def test_keys_survive_webdataset_name_splitting(doc_id: str) -> None:
    key = S.safe_key(doc_id)
    assert key.isascii()
    assert "." not in key and "/" not in key and key
    assert len(f"{key}.jsonl") <= S.MAX_MEMBER_NAME
    # WebDataset splits member names at the first dot: the key must come back whole.
    assert base_plus_ext(f"{key}.txt") == (key, "txt")


def test_keys_are_unique_even_when_sanitised_alike() -> None:
    keys = [S.safe_key(d) for d in TRICKY_IDS]
    assert len(set(keys)) == len(TRICKY_IDS)
    # a kept id never collides with a rewritten one: rewritten keys always contain "~"
    assert S.safe_key("a_b") == "a_b"
    assert "~" in S.safe_key("a.b") and "~" in S.safe_key("a/b")


def test_null_doc_id_is_an_error() -> None:
    with pytest.raises(ValueError, match="null"):
        S.safe_key(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- tar bytes


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = S.ARCHIVE_MTIME
    info.mode = S.ARCHIVE_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@pytest.mark.parametrize(
    ("key", "ext", "size"),
    [
        ("a", "txt", 0),
        ("doc-1", "json", 1),
        ("k~0123456789abcdef", "txt", 511),
        ("x" * 96, "txt", 2**33 - 1),
    ],
)
def test_header_is_what_tarfile_writes(key: str, ext: str, size: int) -> None:
    expected = _tarinfo(f"{key}.{ext}", size).tobuf(tarfile.USTAR_FORMAT, "ascii", "strict")
    assert S.ustar_headers(pa.array([key]), ext, np.array([size]))[0].tobytes() == expected


def test_long_member_name_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than"):
        S.ustar_headers(pa.array(["x" * 97]), "txt", np.array([1]))


def _archive_bytes(members_bytes: int) -> int:
    """File size of a tar holding `members_bytes` of members: end blocks, padded to a record."""
    return -(-(members_bytes + 2 * S.BLOCK) // S.RECORD) * S.RECORD


def test_member_and_archive_sizes() -> None:
    member_bytes = S.BLOCK + S.padded_sizes(np.array([0, 1, 512, 513]))
    assert member_bytes.tolist() == [512, 1024, 1024, 1536]
    assert _archive_bytes(0) == 10240
    assert _archive_bytes(9216) == 10240
    assert _archive_bytes(9217) == 20480
    assert S.planning_target(10240) == 9216
    assert _archive_bytes(S.planning_target(268_435_456)) <= 268_435_456


# --------------------------------------------------------------------------- partitioning


def test_spark_hash_known_values() -> None:
    # Spark: SELECT hash(0), hash(1), hash(-1), hash(42), hash(2147483647)
    got = S.spark_hash_int(np.array([0, 1, -1, 42, 2**31 - 1], dtype=np.int32)).tolist()
    assert got == [933211791, -559580957, -1604776387, 29417773, 133916647]


@pytest.mark.parametrize("n", [1, 2, 7, 100, 5000])
def test_partition_keys_hit_every_partition_once(n: int) -> None:
    keys = S.partition_keys(n)
    assert keys.dtype == np.int32 and len(set(keys.tolist())) == n
    assert np.mod(S.spark_hash_int(keys).astype(np.int64), n).tolist() == list(range(n))


# --------------------------------------------------------------------------- batch forms


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_safe_keys_match_safe_key_on_every_id(kind: pa.DataType) -> None:
    ids = [*TRICKY_IDS, "plain-1", "A_b-9"]
    arr = pa.array(ids, kind)
    expected = [S.safe_key(d).encode() for d in ids]
    assert S.safe_keys(arr).to_pylist() == expected
    # a slice with an offset into the buffers, and the all-kept fast path
    assert S.safe_keys(arr.slice(3, 4)).to_pylist() == expected[3:7]
    assert S.safe_keys(pa.array(["d1", "d2"], kind)).to_pylist() == [b"d1", b"d2"]


def test_ustar_headers_of_a_sliced_batch_are_what_tarfile_writes() -> None:
    keys = pa.array(["a", "doc-1", "k~0123456789abcdef", "x" * 94]).slice(1)
    sizes = np.array([0, 511, 2**33 - 1])
    rows = S.ustar_headers(keys, "json", sizes)
    for key, size, row in zip(keys.to_pylist(), sizes.tolist(), rows, strict=True):
        expected = _tarinfo(f"{key}.json", size).tobuf(tarfile.USTAR_FORMAT, "ascii", "strict")
        assert row.tobytes() == expected
    with pytest.raises(ValueError, match="longer than"):
        S.ustar_headers(pa.array(["x" * 96]), "jsonl", np.array([1]))
    with pytest.raises(ValueError, match="size"):
        S.ustar_headers(pa.array(["a"]), "txt", np.array([8**11]))


# --------------------------------------------------------------------------- shard cuts


def test_cut_shards_closes_a_shard_before_it_would_overflow() -> None:
    shard, fill = S.cut_shards(np.array([4, 4, 3, 5, 1, 9]), 0, 10)
    assert shard.tolist() == [0, 0, 1, 1, 1, 2] and fill == 9
    # an open shard that cannot take the first document is closed first
    shard, fill = S.cut_shards(np.array([5, 5]), 7, 10)
    assert shard.tolist() == [1, 1] and fill == 10
    # a document over the whole capacity goes alone rather than looping
    assert S.cut_shards(np.array([3, 30, 3]), 0, 10)[0].tolist() == [0, 1, 2]
    assert S.cut_shards(np.array([], dtype=np.int64), 4, 10)[0].tolist() == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cut_shards_in_pieces_equals_one_cut(seed: int) -> None:
    rng = np.random.default_rng(seed)
    capacity = 1000
    sizes = rng.integers(1, capacity // 2 + 1, size=500)
    whole, _ = S.cut_shards(sizes, 0, capacity)
    pieces, fill, offset = [], 0, 0
    for chunk in np.array_split(sizes, rng.integers(1, 40)):
        shard, fill = S.cut_shards(chunk, fill, capacity)
        pieces.append(shard + offset)
        offset = int(pieces[-1][-1]) if len(chunk) else offset
    assert np.concatenate(pieces).tolist() == whole.tolist()
    totals = np.bincount(whole, weights=sizes)
    # every shard stays within the capacity, and all but the last are more than half full
    assert totals.max() <= capacity and (totals[:-1] > capacity / 2).all()


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary(), pa.string()], ids=str)
def test_grouped_lines_are_runs_of_rows(kind: pa.DataType) -> None:
    lines = pa.array(["a\n", "bb\n", "c\n", "dd\n", "e\n"], pa.string()).cast(kind).slice(1)
    assert S.grouped(lines, 2).to_pylist() == [b"bb\nc\n", b"dd\ne\n"]
    # whole runs only: the writer groups full samples and keeps the rest pending
    assert S.grouped(lines.slice(0, 3), 2).to_pylist() == [b"bb\nc\n"]
    assert S.joined_bytes(lines) == b"bb\nc\ndd\ne\n"
