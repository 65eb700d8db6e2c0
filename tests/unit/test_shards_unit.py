"""Shard helpers without Spark: keys, tar bytes, the greedy cut, and the unit writer."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def test_member_and_archive_sizes() -> None:
    assert S.member_bytes(0) == 512
    assert S.member_bytes(1) == 1024
    assert S.member_bytes(512) == 1024
    assert S.member_bytes(513) == 1536
    assert S.archive_bytes(0) == 10240
    assert S.archive_bytes(9216) == 10240
    assert S.archive_bytes(9217) == 20480
    assert S.planning_target(10240) == 9216
    assert S.archive_bytes(S.planning_target(268_435_456)) <= 268_435_456


SAMPLES = [
    ("doc-1", [("json", b'{"doc_id":"doc-1"}'), ("txt", "héllo wörld".encode())]),
    ("k~00ff", [("txt", b"x" * 512), ("json", b"{}")]),
    ("doc-3", [("json", b"{}"), ("txt", b"")]),
]


def _write(path: Path, dali: bool = False) -> tuple[int, str, S.TarShardWriter]:
    writer = S.TarShardWriter(path, dali_index=dali)
    for key, members in SAMPLES:
        writer.add_sample(key, members)
    size, sha = writer.finish()
    return size, sha, writer


def test_shard_bytes_equal_tarfile_output(tmp_path: Path) -> None:
    size, sha, _ = _write(tmp_path / "a.tar")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in SAMPLES:
            for ext, data in sorted(members):
                tar.addfile(_tarinfo(f"{key}.{ext}", len(data)), io.BytesIO(data))
    data = (tmp_path / "a.tar").read_bytes()
    assert data == buf.getvalue()
    assert (
        size
        == len(data)
        == S.archive_bytes(sum(S.member_bytes(len(d)) for _, m in SAMPLES for _, d in m))
    )
    assert sha == S.file_sha256(str(tmp_path / "a.tar"))[1]


def test_same_samples_give_same_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "a.tar")
    _write(tmp_path / "b.tar")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_webdataset_reads_the_samples_back(tmp_path: Path) -> None:
    _write(tmp_path / "a.tar")
    with open(tmp_path / "a.tar", "rb") as f:
        stream = S.HashingReader(f)
        got = list(S.read_samples(stream, "a.tar"))
        stream.drain()
    assert [s["__key__"] for s in got] == [k for k, _ in SAMPLES]
    for sample, (_, members) in zip(got, SAMPLES, strict=True):
        assert {ext: sample[ext] for ext, _ in members} == dict(members)
    assert stream.sha.hexdigest() == S.file_sha256(str(tmp_path / "a.tar"))[1]


def test_dali_index_points_at_member_data(tmp_path: Path) -> None:
    _, _, writer = _write(tmp_path / "a.tar", dali=True)
    data = (tmp_path / "a.tar").read_bytes()
    lines = writer.dali_index().splitlines()
    assert lines[0] == f"v1.2 {len(SAMPLES)}"
    for line, (key, members) in zip(lines[1:], SAMPLES, strict=True):
        fields = line.split()
        assert len(fields) == 4 * len(members)
        for i, (ext, content) in enumerate(sorted(members)):
            got_ext, offset, size, name = fields[4 * i : 4 * i + 4]
            assert (got_ext, name) == (ext, f"{key}.{ext}")
            assert int(offset) % 512 == 0
            assert data[int(offset) : int(offset) + int(size)] == content


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


# --------------------------------------------------------------------------- unit writer


def _batches(
    n_docs: int, per_batch: int, fail_after: int | None = None, unit: int = 0
) -> Iterator[pa.RecordBatch]:
    """Batches of one hash-range unit, as the shuffled write pass hands them over."""
    texts = [f"text of document {i} ".encode() * (1 + i % 7) for i in range(n_docs)]
    metas = [json.dumps({"doc_id": f"d.{i}"}).encode() for i in range(n_docs)]
    for lo in range(0, n_docs, per_batch):
        hi = min(n_docs, lo + per_batch)
        if fail_after is not None and hi > fail_after:
            raise RuntimeError("task killed")
        yield pa.RecordBatch.from_pydict(
            {
                "_unit": pa.array([unit] * (hi - lo), pa.int64()),
                "doc_id": [f"d.{unit}.{i}" for i in range(lo, hi)],
                "_txt": pa.array(texts[lo:hi], pa.binary()),
                "_json": pa.array(metas[lo:hi], pa.binary()),
            }
        )


def _out(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    for folder in (S.TMP_DIR, S.STATS_DIR, S.PARTS_DIR):
        (out / folder).mkdir(parents=True)
    return out


def _spec(
    out: Path, skip: frozenset[tuple[int, int]] = frozenset(), per_sample: int = 1
) -> S.UnitWriteSpec:
    # 70 KiB shards hold 34 of these documents (2 KiB of tar each)
    capacity = S.planning_target(71_680)
    return S.UnitWriteSpec(str(out), per_sample, True, "fp", "doc_id", capacity, skip=skip)


def _rows(it: Iterator[pa.RecordBatch]) -> list[dict[str, object]]:
    return [row for batch in it for row in batch.to_pylist()]


def _parts(out: Path, unit: int = 0) -> list[int]:
    return sorted(
        int(p.stem.split("-")[1]) for p in (out / S.PARTS_DIR).glob(f"u{unit:06d}-*.json")
    )


def test_writer_commits_each_part_with_its_stats(tmp_path: Path) -> None:
    out = _out(tmp_path, "a")
    rows = _rows(S.write_unit_parts(_batches(90, 16), _spec(out)))
    assert rows == [{"unit": 0, "parts": 3, "docs": 90}]
    assert json.loads(S.unit_marker(out, 0).read_text())["parts"] == 3
    nsamples = 0
    for part in range(3):
        files = S.part_files(out, 0, part)
        stats = json.loads(files.stats.read_text())
        assert stats["sha256"] == S.file_sha256(str(files.tar))[1]
        assert stats["fingerprint"] == "fp" and stats["filesize"] <= 71_680
        assert files.dali.is_file()
        nsamples += stats["nsamples"]
    assert nsamples == 90
    assert list((out / S.TMP_DIR).iterdir()) == []


def test_a_task_killed_mid_part_leaves_only_committed_parts(tmp_path: Path) -> None:
    whole = _out(tmp_path, "whole")
    _rows(S.write_unit_parts(_batches(90, 16), _spec(whole)))
    out = _out(tmp_path, "crashed")
    with pytest.raises(RuntimeError, match="killed"):
        _rows(S.write_unit_parts(_batches(90, 16, fail_after=80), _spec(out)))
    assert _parts(out) == [0, 1] and not S.unit_marker(out, 0).exists()
    assert not S.part_files(out, 0, 2).tar.exists()
    assert list((out / S.TMP_DIR).iterdir()) == []
    # the rerun writes only the missing part, and it comes out as in an uninterrupted run
    before = S.part_files(out, 0, 0).tar.stat().st_mtime_ns
    _rows(S.write_unit_parts(_batches(90, 16), _spec(out, frozenset({(0, 0), (0, 1)}))))
    assert S.part_files(out, 0, 0).tar.stat().st_mtime_ns == before
    for part in range(3):
        a, b = S.part_files(out, 0, part), S.part_files(whole, 0, part)
        assert a.tar.read_bytes() == b.tar.read_bytes()


def test_a_task_writes_several_units_each_from_part_zero(tmp_path: Path) -> None:
    """Batches straddle the units (rows 32..47 hold both): each unit is cut as if alone."""
    out = _out(tmp_path, "a")
    both = pa.Table.from_batches([*_batches(40, 16, unit=3), *_batches(40, 16, unit=5)])
    batches = both.combine_chunks().to_batches(max_chunksize=16)
    assert batches[2].column("_unit").to_pylist() == [3] * 8 + [5] * 8

    rows = _rows(S.write_unit_parts(iter(batches), _spec(out)))
    assert rows == [{"unit": 3, "parts": 2, "docs": 40}, {"unit": 5, "parts": 2, "docs": 40}]
    assert _parts(out, 3) == _parts(out, 5) == [0, 1]
    for unit in (3, 5):
        alone = _out(tmp_path, f"alone{unit}")
        _rows(S.write_unit_parts(_batches(40, 16, unit=unit), _spec(alone)))
        for part in (0, 1):
            written = S.part_files(out, unit, part).tar.read_bytes()
            assert written == S.part_files(alone, unit, part).tar.read_bytes()


def test_a_unit_seen_again_in_a_task_is_refused(tmp_path: Path) -> None:
    out = _out(tmp_path, "a")
    again = [*_batches(16, 16, unit=3), *_batches(16, 16, unit=5), *_batches(16, 16, unit=3)]
    with pytest.raises(ValueError, match="unit 3 came twice"):
        _rows(S.write_unit_parts(iter(again), _spec(out)))


def test_docs_per_sample_packs_jsonl_members(tmp_path: Path) -> None:
    out = _out(tmp_path, "a")
    lines = [json.dumps({"doc_id": f"d.{i}", "text": f"t{i}"}).encode() + b"\n" for i in range(10)]
    batch = pa.RecordBatch.from_pydict(
        {
            "_unit": pa.array([0] * 10, pa.int64()),
            "doc_id": [f"d.{i}" for i in range(10)],
            "_line": pa.array(lines, pa.binary()),
        }
    )
    rows = _rows(S.write_unit_parts(iter([batch]), _spec(out, per_sample=4)))
    assert rows == [{"unit": 0, "parts": 1, "docs": 10}]
    stats = json.loads(S.part_files(out, 0, 0).stats.read_text())
    assert stats["nsamples"] == 3 and stats["ndocs"] == 10
    _assert_jsonl_samples(S.part_files(out, 0, 0).tar, lines, firsts=(0, 4, 8))


@pytest.mark.parametrize(("per_sample", "line_bytes"), [(2, 257), (3, 170), (7, 1), (256, 600)])
def test_jsonl_shards_keep_to_the_target(tmp_path: Path, per_sample: int, line_bytes: int) -> None:
    """Worst-case padding (a line just past a block) and a last sample of fewer documents."""
    target = 20_480
    out = _out(tmp_path, "a")
    n = 2_000 if per_sample < 256 else 3_000
    lines = [b"x" * (line_bytes - 1) + b"\n"] * n
    batch = pa.RecordBatch.from_pydict(
        {
            "_unit": pa.array([0] * n, pa.int64()),
            "doc_id": [f"d{i:05d}" for i in range(n)],
            "_line": pa.array(lines, pa.binary()),
        }
    )
    spec = S.UnitWriteSpec(str(out), per_sample, False, "fp", "doc_id", S.planning_target(target))
    parts = _rows(S.write_unit_parts(iter([batch]), spec))[0]["parts"]
    sizes = [S.part_files(out, 0, j).tar.stat().st_size for j in range(int(parts))]
    assert len(sizes) > 2 and max(sizes) <= target
    # still well filled: all but the last more than half the target
    assert min(sizes[:-1]) > target / 2


def _assert_jsonl_samples(shard: Path, lines: list[bytes], firsts: tuple[int, ...]) -> None:
    """The shard's samples are keyed by their first doc and hold `lines` in order."""
    with open(shard, "rb") as f:
        samples = list(S.read_samples(f, "x"))
    assert [s["__key__"] for s in samples] == [S.safe_key(f"d.{i}") for i in firsts]
    assert b"".join(s["jsonl"] for s in samples) == b"".join(lines)


@pytest.mark.parametrize(
    ("ids", "error"),
    [
        (["a", "b", "b", "c"], S.DUPLICATE_MARK),
        (["a", None, "c", "d"], "null"),
        ([None, "b", "c", "d"], "^doc_id is null$"),
    ],
)
def test_repeated_or_null_doc_ids_are_refused(
    tmp_path: Path, ids: list[str | None], error: str
) -> None:
    out = _out(tmp_path, "a")
    batch = next(_batches(4, 4)).set_column(1, "doc_id", pa.array(ids, pa.string()))
    with pytest.raises(ValueError, match=error):
        _rows(S.write_unit_parts(iter([batch]), _spec(out)))
    assert list((out / S.TMP_DIR).iterdir()) == []


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


def test_batched_samples_give_the_bytes_of_one_by_one_samples(tmp_path: Path) -> None:
    one = tmp_path / "one.tar"
    writer = S.TarShardWriter(one, dali_index=True)
    for key, members in SAMPLES:
        writer.add_sample(key, members)
    size_one, sha_one = writer.finish()
    idx_one = writer.dali_index()
    batched = S.TarShardWriter(tmp_path / "batched.tar", dali_index=True)
    # tiny chunks: every sample boundary is also a chunk boundary
    batched.CHUNK_BYTES = 1
    keys = pa.array([k for k, _ in SAMPLES])
    members = [
        (ext, pa.array([dict(m)[ext] for _, m in SAMPLES], pa.binary())) for ext in ("txt", "json")
    ]
    batched.add_samples(keys, members)
    assert batched.finish() == (size_one, sha_one)
    assert batched.dali_index() == idx_one
    assert (tmp_path / "batched.tar").read_bytes() == one.read_bytes()


def test_jsonl_samples_span_batches(tmp_path: Path) -> None:
    lines = [json.dumps({"doc_id": f"d.{i}"}).encode() + b"\n" for i in range(11)]

    def batches(cuts: list[int]) -> Iterator[pa.RecordBatch]:
        for lo, hi in zip([0, *cuts], [*cuts, 11], strict=True):
            m = hi - lo
            yield pa.RecordBatch.from_pydict(
                {
                    "_unit": pa.array([0] * m, pa.int64()),
                    "doc_id": [f"d.{i}" for i in range(lo, hi)],
                    "_line": pa.array(lines[lo:hi], pa.binary()),
                }
            )

    shards = []
    for name, cuts in (("whole", []), ("split", [1, 2, 7])):
        out = _out(tmp_path, name)
        _rows(S.write_unit_parts(batches(cuts), _spec(out, per_sample=4)))
        shards.append(S.part_files(out, 0, 0).tar.read_bytes())
    assert shards[0] == shards[1]
    _assert_jsonl_samples(S.part_files(tmp_path / "split", 0, 0).tar, lines, firsts=(0, 4, 8))


# --------------------------------------------------------------------------- input order


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


def _input_file(tmp_path: Path, n: int, nulls: bool = False) -> tuple[Path, list[str]]:
    import pyarrow.parquet as pq

    texts = [None if nulls and i % 9 == 0 else f"text {i} " * (1 + i % 13) for i in range(n)]
    path = tmp_path / "in dir" / "part-0.parquet"  # a space: file URIs are percent-encoded
    path.parent.mkdir(exist_ok=True)
    pq.write_table(
        pa.table({"doc_id": [f"d.{i}" for i in range(n)], "text": texts}), path, row_group_size=50
    )
    return path, [t or "" for t in texts]


def _unit_batches(
    path: Path, n: int, per_batch: int, start: int = 0, fail_after: int | None = None
) -> Iterator[pa.RecordBatch]:
    for lo in range(start, n, per_batch):
        hi = min(n, lo + per_batch)
        if fail_after is not None and hi > fail_after:
            raise RuntimeError("task killed")
        yield pa.RecordBatch.from_pydict(
            {
                "_file": [path.as_uri()] * (hi - lo),
                "_row": pa.array(range(lo, hi), pa.int64()),
                "doc_id": [f"d.{i}" for i in range(lo, hi)],
                "_json": pa.array(
                    [json.dumps({"doc_id": f"d.{i}"}).encode() for i in range(lo, hi)]
                ),
            }
        )


def _unit_spec(out: Path, path: Path, skip: frozenset[tuple[int, int]] = frozenset()) -> Any:
    return S.UnitWriteSpec(str(out), 1, False, "fp", "doc_id", 4096, files=(str(path),), skip=skip)


def test_unit_writer_reads_the_text_from_the_file(tmp_path: Path) -> None:
    path, texts = _input_file(tmp_path, 230, nulls=True)
    out = _out(tmp_path, "u")
    rows = _rows(S.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(out, path)))
    assert rows == [{"unit": 0, "parts": rows[0]["parts"], "docs": 230}] and rows[0]["parts"] > 3
    marker = json.loads(S.unit_marker(out, 0).read_text())
    assert marker == {"unit": 0, "parts": rows[0]["parts"], "docs": 230, "fingerprint": "fp"}
    got = []
    for part in range(rows[0]["parts"]):
        files = S.part_files(out, 0, part)
        stats = json.loads(files.stats.read_text())
        assert stats["sha256"] == S.file_sha256(str(files.tar))[1] and stats["shard"] == part
        assert files.tar.stat().st_size <= 4096 + 2 * S.BLOCK + S.RECORD
        for sample in S.read_samples(open(files.tar, "rb"), files.tar.name):  # noqa: SIM115
            got.append((json.loads(sample["json"])["doc_id"], sample["txt"].decode()))
    assert got == [(f"d.{i}", t) for i, t in enumerate(texts)]


def test_unit_writer_refuses_rows_out_of_step_with_the_file(tmp_path: Path) -> None:
    path, _ = _input_file(tmp_path, 100)
    out = _out(tmp_path, "u")
    with pytest.raises(ValueError, match="out of row order"):
        _rows(S.write_unit_parts(_unit_batches(path, 100, 30, start=30), _unit_spec(out, path)))
    with pytest.raises(ValueError, match="more rows than Spark read"):
        _rows(S.write_unit_parts(_unit_batches(path, 90, 30), _unit_spec(out, path)))
    with pytest.raises(ValueError, match="fewer rows"):
        _rows(S.write_unit_parts(_unit_batches(path, 130, 30), _unit_spec(out, path)))
    assert not S.unit_marker(out, 0).exists()


def test_a_unit_killed_mid_part_is_finished_by_writing_only_the_missing_parts(
    tmp_path: Path,
) -> None:
    path, _ = _input_file(tmp_path, 230)
    whole = _out(tmp_path, "whole")
    parts = _rows(S.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(whole, path)))
    out = _out(tmp_path, "crashed")
    with pytest.raises(RuntimeError, match="killed"):
        _rows(
            S.write_unit_parts(_unit_batches(path, 230, 37, fail_after=150), _unit_spec(out, path))
        )
    committed = {int(p.stem.split("-")[1]) for p in (out / S.PARTS_DIR).glob("u*-*.json")}
    assert committed and not S.unit_marker(out, 0).exists()
    assert list((out / S.TMP_DIR).iterdir()) == []
    skip = frozenset((0, j) for j in committed)
    before = {j: S.part_files(out, 0, j).tar.stat().st_mtime_ns for j in committed}
    _rows(S.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(out, path, skip)))
    for j in range(parts[0]["parts"]):
        a, b = S.part_files(out, 0, j), S.part_files(whole, 0, j)
        assert a.tar.read_bytes() == b.tar.read_bytes()
        if j in before:
            assert a.tar.stat().st_mtime_ns == before[j]
