"""The tar shard writer and pack's write tasks (`corpusclean.jobs.shards.pack_io`), on local
files."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from corpusclean.jobs.shards import pack_io as W
from corpusclean.jobs.shards.integrity import HashingReader, file_sha256, read_samples
from corpusclean.pipelines import shards as S


def _tarfile_bytes(samples: list[tuple[str, list[tuple[str, bytes]]]]) -> bytes:
    """What `tarfile` writes for the samples, members sorted, with pack's fixed fields."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in samples:
            for ext, data in sorted(members):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime, info.mode = len(data), S.ARCHIVE_MTIME, S.ARCHIVE_MODE
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --------------------------------------------------------------------------- the tar writer


SAMPLES = [
    ("doc-1", [("json", b'{"doc_id":"doc-1"}'), ("txt", "héllo wörld".encode())]),
    ("k~00ff", [("txt", b"x" * 512), ("json", b"{}")]),
    ("doc-3", [("json", b"{}"), ("txt", b"")]),
]


def _add_sample(writer: W.TarShardWriter, key: str, members: list[tuple[str, bytes]]) -> None:
    """One sample on its own: a member `{key}.{ext}` for each (ext, data)."""
    writer.add_samples(
        pa.array([key.encode("ascii")], pa.binary()),
        [(ext, pa.array([data], pa.binary())) for ext, data in members],
    )


def _write(path: Path, dali: bool = False) -> tuple[int, str, W.TarShardWriter]:
    writer = W.TarShardWriter(path, dali_index=dali)
    for key, members in SAMPLES:
        _add_sample(writer, key, members)
    size, sha = writer.finish()
    return size, sha, writer


def test_shard_bytes_equal_tarfile_output(tmp_path: Path) -> None:
    size, sha, _ = _write(tmp_path / "a.tar")
    data = (tmp_path / "a.tar").read_bytes()
    assert data == _tarfile_bytes(SAMPLES)
    assert size == len(data)
    assert sha == file_sha256(str(tmp_path / "a.tar"))[1]


def test_same_samples_give_same_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "a.tar")
    _write(tmp_path / "b.tar")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_webdataset_reads_the_samples_back(tmp_path: Path) -> None:
    _write(tmp_path / "a.tar")
    with open(tmp_path / "a.tar", "rb") as f:
        stream = HashingReader(f)
        got = list(read_samples(stream, "a.tar"))
        stream.drain()
    assert [s["__key__"] for s in got] == [k for k, _ in SAMPLES]
    for sample, (_, members) in zip(got, SAMPLES, strict=True):
        assert {ext: sample[ext] for ext, _ in members} == dict(members)
    assert stream.sha.hexdigest() == file_sha256(str(tmp_path / "a.tar"))[1]


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


# What NVIDIA DALI's own indexer, `wds2idx` of nvidia-dali-cuda120 2.4.0, writes for the shard
# of SAMPLES (run on the tar `_write` makes; the shard bytes are tarfile's, tested above).
WDS2IDX_OF_SAMPLES = (
    "v1.2 3\n"
    "json 512 18 doc-1.json txt 1536 13 doc-1.txt\n"
    "json 2560 2 k~00ff.json txt 3584 512 k~00ff.txt\n"
    "json 4608 2 doc-3.json txt 5632 0 doc-3.txt\n"
)


def test_dali_index_is_what_dalis_wds2idx_writes_byte_for_byte(tmp_path: Path) -> None:
    _, _, writer = _write(tmp_path / "a.tar", dali=True)
    assert writer.dali_index().encode() == WDS2IDX_OF_SAMPLES.encode()


def test_batched_samples_give_the_bytes_of_one_by_one_samples(tmp_path: Path) -> None:
    one = tmp_path / "one.tar"
    writer = W.TarShardWriter(one, dali_index=True)
    for key, members in SAMPLES:
        _add_sample(writer, key, members)
    size_one, sha_one = writer.finish()
    idx_one = writer.dali_index()
    batched = W.TarShardWriter(tmp_path / "batched.tar", dali_index=True)
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
    for folder in (W.TMP_DIR, W.STATS_DIR, W.PARTS_DIR):
        (out / folder).mkdir(parents=True)
    return out


def _spec(
    out: Path, skip: frozenset[tuple[int, int]] = frozenset(), per_sample: int = 1
) -> W.UnitWriteSpec:
    # 70 KiB shards hold 34 of these documents (2 KiB of tar each)
    capacity = S.planning_target(71_680)
    return W.UnitWriteSpec(str(out), per_sample, True, "fp", "doc_id", capacity, skip=skip)


def _rows(it: Iterator[pa.RecordBatch]) -> list[dict[str, object]]:
    return [row for batch in it for row in batch.to_pylist()]


def _parts(out: Path, unit: int = 0) -> list[int]:
    return sorted(
        int(p.stem.split("-")[1]) for p in (out / W.PARTS_DIR).glob(f"u{unit:06d}-*.json")
    )


def test_writer_commits_each_part_with_its_stats(tmp_path: Path) -> None:
    out = _out(tmp_path, "a")
    rows = _rows(W.write_unit_parts(_batches(90, 16), _spec(out)))
    assert rows == [{"unit": 0, "parts": 3, "docs": 90}]
    assert json.loads(W.unit_marker(out, 0).read_text())["parts"] == 3
    nsamples = 0
    for part in range(3):
        files = W.part_files(out, 0, part)
        stats = json.loads(files.stats.read_text())
        assert stats["sha256"] == file_sha256(str(files.data))[1]
        assert stats["fingerprint"] == "fp" and stats["filesize"] <= 71_680
        assert files.idx.is_file()
        nsamples += stats["nsamples"]
    assert nsamples == 90
    assert list((out / W.TMP_DIR).iterdir()) == []


def test_a_task_killed_mid_part_leaves_only_committed_parts(tmp_path: Path) -> None:
    whole = _out(tmp_path, "whole")
    _rows(W.write_unit_parts(_batches(90, 16), _spec(whole)))
    out = _out(tmp_path, "crashed")
    with pytest.raises(RuntimeError, match="killed"):
        _rows(W.write_unit_parts(_batches(90, 16, fail_after=80), _spec(out)))
    assert _parts(out) == [0, 1] and not W.unit_marker(out, 0).exists()
    assert not W.part_files(out, 0, 2).data.exists()
    assert list((out / W.TMP_DIR).iterdir()) == []
    # the rerun writes only the missing part, and it comes out as in an uninterrupted run
    before = W.part_files(out, 0, 0).data.stat().st_mtime_ns
    _rows(W.write_unit_parts(_batches(90, 16), _spec(out, frozenset({(0, 0), (0, 1)}))))
    assert W.part_files(out, 0, 0).data.stat().st_mtime_ns == before
    for part in range(3):
        a, b = W.part_files(out, 0, part), W.part_files(whole, 0, part)
        assert a.data.read_bytes() == b.data.read_bytes()


def test_a_task_writes_several_units_each_from_part_zero(tmp_path: Path) -> None:
    """Batches straddle the units (rows 32..47 hold both): each unit is cut as if alone."""
    out = _out(tmp_path, "a")
    both = pa.Table.from_batches([*_batches(40, 16, unit=3), *_batches(40, 16, unit=5)])
    batches = both.combine_chunks().to_batches(max_chunksize=16)
    assert batches[2].column("_unit").to_pylist() == [3] * 8 + [5] * 8

    rows = _rows(W.write_unit_parts(iter(batches), _spec(out)))
    assert rows == [{"unit": 3, "parts": 2, "docs": 40}, {"unit": 5, "parts": 2, "docs": 40}]
    assert _parts(out, 3) == _parts(out, 5) == [0, 1]
    for unit in (3, 5):
        alone = _out(tmp_path, f"alone{unit}")
        _rows(W.write_unit_parts(_batches(40, 16, unit=unit), _spec(alone)))
        for part in (0, 1):
            written = W.part_files(out, unit, part).data.read_bytes()
            assert written == W.part_files(alone, unit, part).data.read_bytes()


def test_a_unit_seen_again_in_a_task_is_refused(tmp_path: Path) -> None:
    out = _out(tmp_path, "a")
    again = [*_batches(16, 16, unit=3), *_batches(16, 16, unit=5), *_batches(16, 16, unit=3)]
    with pytest.raises(ValueError, match="unit 3 came twice"):
        _rows(W.write_unit_parts(iter(again), _spec(out)))


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
    rows = _rows(W.write_unit_parts(iter([batch]), _spec(out, per_sample=4)))
    assert rows == [{"unit": 0, "parts": 1, "docs": 10}]
    stats = json.loads(W.part_files(out, 0, 0).stats.read_text())
    assert stats["nsamples"] == 3 and stats["ndocs"] == 10
    _assert_jsonl_samples(W.part_files(out, 0, 0).data, lines, firsts=(0, 4, 8))


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
    spec = W.UnitWriteSpec(str(out), per_sample, False, "fp", "doc_id", S.planning_target(target))
    parts = _rows(W.write_unit_parts(iter([batch]), spec))[0]["parts"]
    sizes = [W.part_files(out, 0, j).data.stat().st_size for j in range(int(parts))]
    assert len(sizes) > 2 and max(sizes) <= target
    # still well filled: all but the last more than half the target
    assert min(sizes[:-1]) > target / 2


def _assert_jsonl_samples(shard: Path, lines: list[bytes], firsts: tuple[int, ...]) -> None:
    """The shard's samples are keyed by their first doc and hold `lines` in order."""
    with open(shard, "rb") as f:
        samples = list(read_samples(f, "x"))
    assert [s["__key__"] for s in samples] == [S.safe_key(f"d.{i}") for i in firsts]
    assert b"".join(s["jsonl"] for s in samples) == b"".join(lines)


@pytest.mark.parametrize(
    ("ids", "error"),
    [
        (["a", "b", "b", "c"], W.DUPLICATE_MARK),
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
        _rows(W.write_unit_parts(iter([batch]), _spec(out)))
    assert list((out / W.TMP_DIR).iterdir()) == []


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
        _rows(W.write_unit_parts(batches(cuts), _spec(out, per_sample=4)))
        shards.append(W.part_files(out, 0, 0).data.read_bytes())
    assert shards[0] == shards[1]
    _assert_jsonl_samples(W.part_files(tmp_path / "split", 0, 0).data, lines, firsts=(0, 4, 8))


# --------------------------------------------------------------------------- input order


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
    return W.UnitWriteSpec(str(out), 1, False, "fp", "doc_id", 4096, files=(str(path),), skip=skip)


def test_unit_writer_reads_the_text_from_the_file(tmp_path: Path) -> None:
    path, texts = _input_file(tmp_path, 230, nulls=True)
    out = _out(tmp_path, "u")
    rows = _rows(W.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(out, path)))
    assert rows == [{"unit": 0, "parts": rows[0]["parts"], "docs": 230}] and rows[0]["parts"] > 3
    marker = json.loads(W.unit_marker(out, 0).read_text())
    assert marker == {"unit": 0, "parts": rows[0]["parts"], "docs": 230, "fingerprint": "fp"}
    got = []
    for part in range(rows[0]["parts"]):
        files = W.part_files(out, 0, part)
        stats = json.loads(files.stats.read_text())
        assert stats["sha256"] == file_sha256(str(files.data))[1] and stats["shard"] == part
        assert files.data.stat().st_size <= 4096 + 2 * S.BLOCK + S.RECORD
        for sample in read_samples(open(files.data, "rb"), files.data.name):  # noqa: SIM115
            got.append((json.loads(sample["json"])["doc_id"], sample["txt"].decode()))
    assert got == [(f"d.{i}", t) for i, t in enumerate(texts)]


def test_unit_writer_refuses_rows_out_of_step_with_the_file(tmp_path: Path) -> None:
    path, _ = _input_file(tmp_path, 100)
    out = _out(tmp_path, "u")
    with pytest.raises(ValueError, match="out of row order"):
        _rows(W.write_unit_parts(_unit_batches(path, 100, 30, start=30), _unit_spec(out, path)))
    with pytest.raises(ValueError, match="more rows than Spark read"):
        _rows(W.write_unit_parts(_unit_batches(path, 90, 30), _unit_spec(out, path)))
    with pytest.raises(ValueError, match="fewer rows"):
        _rows(W.write_unit_parts(_unit_batches(path, 130, 30), _unit_spec(out, path)))
    assert not W.unit_marker(out, 0).exists()


def test_a_unit_killed_mid_part_is_finished_by_writing_only_the_missing_parts(
    tmp_path: Path,
) -> None:
    path, _ = _input_file(tmp_path, 230)
    whole = _out(tmp_path, "whole")
    parts = _rows(W.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(whole, path)))
    out = _out(tmp_path, "crashed")
    with pytest.raises(RuntimeError, match="killed"):
        _rows(
            W.write_unit_parts(_unit_batches(path, 230, 37, fail_after=150), _unit_spec(out, path))
        )
    committed = {int(p.stem.split("-")[1]) for p in (out / W.PARTS_DIR).glob("u*-*.json")}
    assert committed and not W.unit_marker(out, 0).exists()
    assert list((out / W.TMP_DIR).iterdir()) == []
    skip = frozenset((0, j) for j in committed)
    before = {j: W.part_files(out, 0, j).data.stat().st_mtime_ns for j in committed}
    _rows(W.write_unit_parts(_unit_batches(path, 230, 37), _unit_spec(out, path, skip)))
    for j in range(parts[0]["parts"]):
        a, b = W.part_files(out, 0, j), W.part_files(whole, 0, j)
        assert a.data.read_bytes() == b.data.read_bytes()
        if j in before:
            assert a.data.stat().st_mtime_ns == before[j]
