"""Megatron-LM's indexed dataset bytes (pipelines/megatron.py), read back by a reader written
here from the format's description, not from the module under test."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from corpusclean.pipelines.megatron import index_bytes, read_index

# Megatron's DType enum (megatron/core/datasets/indexed_dataset.py).
CODES = {1: "u1", 2: "i1", 3: "i2", 4: "i4", 5: "i8", 6: "f8", 7: "f4", 8: "u2"}


def spec_read(idx: bytes, binary: bytes) -> list[list[int]]:
    """The documents of a `.idx`/`.bin` pair, as Megatron's reader walks them."""
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = struct.unpack_from("<Q", idx, 9)
    (code,) = struct.unpack_from("<B", idx, 17)
    n, docs = struct.unpack_from("<QQ", idx, 18)
    assert version == 1 and docs == n + 1
    at = 34
    lengths = struct.unpack_from(f"<{n}i", idx, at)
    pointers = struct.unpack_from(f"<{n}q", idx, at + 4 * n)
    document_indices = struct.unpack_from(f"<{docs}q", idx, at + 12 * n)
    assert len(idx) == at + 12 * n + 8 * docs
    dtype = np.dtype("<" + CODES[code])
    out = []
    for d in range(n):
        first, last = document_indices[d], document_indices[d + 1]
        ids: list[int] = []
        for s in range(first, last):
            ids += np.frombuffer(binary, dtype, lengths[s], pointers[s]).tolist()
        out.append(ids)
    assert len(binary) == sum(lengths) * dtype.itemsize
    return out


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_written_documents_read_back_by_the_spec(dtype: type) -> None:
    docs = [[5, 6, 7, 1], [1], [], [65535 if dtype is np.uint16 else 129_279, 1]]
    binary = b"".join(np.asarray(d, dtype).tobytes() for d in docs)
    idx = index_bytes(np.array([len(d) for d in docs]), dtype)
    assert spec_read(idx, binary) == docs
    parsed = read_index(idx)
    assert parsed.dtype == np.dtype(dtype) and parsed.tokens == 7
    assert parsed.bin_bytes == len(binary)
    assert parsed.document_indices.tolist() == [0, 1, 2, 3, 4]


def test_the_header_is_megatrons() -> None:
    idx = index_bytes(np.array([8, 12, 3]), np.int32)
    # magic, version 1, code 4 (int32), 3 sequences, 4 document indices
    assert idx[:34] == b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, 3, 4)
    assert len(idx) == 34 + 20 * 3 + 8
    assert index_bytes(np.array([], np.int64), np.uint16)[17] == 8


def test_an_index_that_is_not_one_is_refused() -> None:
    good = index_bytes(np.array([3, 4]), np.uint16)
    for bad, needle in [
        (good[:20], "shorter than"),
        (b"XXXXXXXXX" + good[9:], "magic"),
        (good[:-1], "bytes for 2 sequences"),
        (good[:9] + struct.pack("<Q", 2) + good[17:], "version 2"),
    ]:
        with pytest.raises(ValueError, match=needle):
            read_index(bad)
    with pytest.raises(ValueError, match="no dtype code"):
        index_bytes(np.array([1]), np.uint32)


def test_npy_members_are_numpys_and_bench_counts_their_ids() -> None:
    import io

    import pyarrow as pa

    from corpusclean.jobs.loadbench.storage import npy_ids
    from corpusclean.jobs.shards.tokens import npy_members, npy_sizes

    offsets = pa.array([0, 3, 3, 10**4 + 3], pa.int64())
    ids = pa.array(np.arange(10**4 + 3) % 500, pa.int64())
    tokens = pa.LargeListArray.from_arrays(offsets, ids.cast(pa.uint16()))
    members = npy_members(tokens, np.dtype(np.uint16))
    for i, data in enumerate(members.to_pylist()):
        array = np.load(io.BytesIO(data))
        assert array.dtype == np.uint16
        assert array.tolist() == tokens[i].as_py()
        assert npy_ids(data) == (array.size, array.size * 2)
        assert len(data) == npy_sizes(tokens, np.dtype(np.uint16))[i]
        buffer = io.BytesIO()
        np.save(buffer, array)
        assert buffer.getvalue() == data, "byte for byte what np.save writes"
