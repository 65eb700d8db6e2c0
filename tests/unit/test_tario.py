"""The package's tar reader: tar dialects, webdataset-identical grouping, corrupt input."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import webdataset as wds

from corpusclean.jobs.shards import tario


def _tar(members: list[tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT, **extra) -> bytes:
    """An in-memory tar archive of regular files (plus `extra` special members)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
        for info in extra.get("specials", []):
            tar.addfile(info)
    return out.getvalue()


def _wds_shard(path: Path, samples: list[dict]) -> Path:
    with wds.TarWriter(str(path)) as writer:
        for sample in samples:
            writer.write(sample)
    return path


def _strip(sample: dict) -> dict:
    return {k: v for k, v in sample.items() if k not in ("__url__", "__local_path__")}


def _docs(start: int, n: int) -> list[dict]:
    return [
        {
            "__key__": f"doc-{i:06d}",
            "txt": f"document {i} " + "lorem ipsum " * (i % 40),
            "json": json.dumps({"doc_id": str(i), "lang": "en"}),
        }
        for i in range(start, start + n)
    ]


def test_matches_webdataset_sample_for_sample(tmp_path):
    shards = [
        _wds_shard(tmp_path / "shard-000000.tar", _docs(0, 50)),
        _wds_shard(tmp_path / "shard-000001.tar", _docs(50, 30)),
    ]
    ours = [_strip(s) for s in tario.iter_shards(shards)]
    theirs = [_strip(s) for s in wds.WebDataset([str(p) for p in shards], shardshuffle=False)]
    assert len(ours) == 80
    assert ours == theirs
    assert ours[0]["txt"].startswith(b"document 0")
    assert set(ours[0]) == {"__key__", "json", "txt"}


def test_url_names_the_shard(tmp_path):
    shard = _wds_shard(tmp_path / "s.tar", _docs(0, 2))
    assert {s["__url__"] for s in tario.iter_samples(shard)} == {str(shard)}


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_long_names_in_every_dialect(fmt):
    # USTAR stores this in its 155-byte prefix + 100-byte name; GNU uses an `L` member, PAX a
    # `path` record.
    folder = "/".join(["deep-folder-name"] * 7)  # 118 characters
    name = f"{folder}/{'k' * 60}.txt"
    data = _tar([(name, b"hello"), ("short.txt", b"x")], fmt=fmt)
    members = list(tario.iter_members(io.BytesIO(data)))
    assert members == [(name, b"hello"), ("short.txt", b"x")]


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_names_longer_than_ustar_allows(fmt):
    name = "x" * 300 + ".txt"
    members = list(tario.iter_members(io.BytesIO(_tar([(name, b"abc")], fmt=fmt))))
    assert members == [(name, b"abc")]


def test_pax_non_ascii_names():
    name = "数据/文档-001.txt"
    members = list(tario.iter_members(io.BytesIO(_tar([(name, "正文".encode())]))))
    assert members == [(name, "正文".encode())]


def test_directories_links_and_fifos_are_skipped():
    folder = tarfile.TarInfo("data")
    folder.type = tarfile.DIRTYPE
    link = tarfile.TarInfo("link.txt")
    link.type = tarfile.SYMTYPE
    link.linkname = "a.txt"
    fifo = tarfile.TarInfo("pipe.txt")
    fifo.type = tarfile.FIFOTYPE
    data = _tar([("a.txt", b"A"), ("data/b.txt", b"B")], specials=[folder, link, fifo])
    assert list(tario.iter_members(io.BytesIO(data))) == [("a.txt", b"A"), ("data/b.txt", b"B")]


def test_grouping_rules_match_webdataset():
    data = _tar(
        [
            ("a.txt", b"1"),
            ("a.JSON", b"2"),  # extensions are lower-cased
            ("__index__", b"meta"),  # webdataset metadata: skipped
            ("noext", b"skipped"),  # no extension: skipped
            ("dir.v2/b.tar.gz", b"3"),  # key up to the file name's first dot
            ("a.txt", b"again"),  # same key, not consecutive: a new sample
        ]
    )
    samples = [_strip(s) for s in tario.iter_samples(io.BytesIO(data))]
    assert samples == [
        {"__key__": "a", "txt": b"1", "json": b"2"},
        {"__key__": "dir.v2/b", "tar.gz": b"3"},
        {"__key__": "a", "txt": b"again"},
    ]


def test_a_sample_never_spans_two_shards(tmp_path):
    (tmp_path / "0.tar").write_bytes(_tar([("k.txt", b"first")]))
    (tmp_path / "1.tar").write_bytes(_tar([("k.json", b"second")]))
    samples = list(tario.iter_shards([tmp_path / "0.tar", tmp_path / "1.tar"]))
    assert [set(s) - {"__url__"} for s in samples] == [{"__key__", "txt"}, {"__key__", "json"}]


def test_duplicate_extension_in_a_sample_is_an_error():
    data = _tar([("k.txt", b"1"), ("k.txt", b"2")])
    with pytest.raises(ValueError, match="duplicate"):
        list(tario.iter_samples(io.BytesIO(data)))


def test_suffixes_select_members():
    data = _tar([("k.txt", b"text"), ("k.json", b"{}")])
    samples = list(tario.iter_samples(io.BytesIO(data), suffixes={"txt"}))
    assert [_strip(s) for s in samples] == [{"__key__": "k", "txt": b"text"}]


def test_members_larger_than_the_read_chunk():
    big = bytes(range(256)) * 40  # 10,240 bytes, 20 blocks
    data = _tar([("a.bin", big), ("b.txt", b"tail"), ("c.bin", big[:777])])
    members = list(tario.iter_members(io.BytesIO(data), chunk_size=1024))
    assert members == [("a.bin", big), ("b.txt", b"tail"), ("c.bin", big[:777])]


def test_empty_files_and_empty_archives():
    assert list(tario.iter_members(io.BytesIO(_tar([("e.txt", b"")])))) == [("e.txt", b"")]
    assert list(tario.iter_members(io.BytesIO(_tar([])))) == []
    assert list(tario.iter_members(io.BytesIO(b""))) == []


def test_bad_checksum_is_an_error():
    data = bytearray(_tar([("a.txt", b"payload")], fmt=tarfile.USTAR_FORMAT))
    data[10] ^= 0x01  # flip a bit of the name
    with pytest.raises(tario.TarFormatError, match="checksum"):
        list(tario.iter_members(io.BytesIO(bytes(data))))


def test_truncated_member_is_an_error():
    data = _tar([("a.txt", b"y" * 5000)], fmt=tarfile.USTAR_FORMAT)
    with pytest.raises(tario.TarFormatError, match="truncated"):
        list(tario.iter_members(io.BytesIO(data[:2048])))


def test_not_a_tar_is_an_error():
    with pytest.raises(tario.TarFormatError):
        list(tario.iter_members(io.BytesIO(b"this is not a tar archive at all " * 40)))


def test_base256_and_octal_numbers():
    assert tario._number(b"00000000017\0") == 15
    assert tario._number(b"           \0") == 0
    assert tario._number(bytes([0x80]) + (9 << 30).to_bytes(11, "big")) == 9 << 30
    with pytest.raises(tario.TarFormatError):
        tario._number(b"0000000008x\0")


def test_split_key_edge_cases():
    assert tario.split_key("a.b.c") == ("a", "b.c")
    assert tario.split_key("dir/a.txt") == ("dir/a", "txt")
    assert tario.split_key(".hidden") == (None, None)
    assert tario.split_key("a.b/c") == (None, None)
    assert tario.split_key("plain") == (None, None)
