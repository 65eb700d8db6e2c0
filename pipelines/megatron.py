"""Megatron-LM's indexed dataset (`MMIDIDX`, version 1), document-level: the bytes, no I/O.

A dataset is a prefix with two files. `PREFIX.bin` is every document's token ids, one after the
other, in the index's dtype, little-endian, with no header. `PREFIX.idx` is:

    9 bytes   magic b"MMIDIDX\\x00\\x00"
    <Q        version, 1
    <B        dtype code (`DTYPE_CODES`)
    <Q        sequence count N
    <Q        document count N + 1 (the length of `document_indices`)
    int32[N]  sequence lengths, in tokens
    int64[N]  sequence pointers, in bytes into the .bin
    int64[N+1] document indices: document d is sequences [di[d], di[d + 1])

as `megatron/core/datasets/indexed_dataset.py` writes and reads it. A document is one sequence
here (Megatron's `preprocess_data.py` without `--split-sentences`, datatrove's
`MegatronDocumentTokenizer`), so the document indices are 0..N.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
# Megatron's DType enum: the code stored in the header for each id dtype.
DTYPE_CODES: dict[np.dtype, int] = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
_HEADER = struct.Struct("<9sQBQQ")
HEADER_BYTES = _HEADER.size  # 34


def index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The `.idx` of documents of `lengths` tokens each, stored as `dtype` in the `.bin`."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPE_CODES:
        raise ValueError(f"Megatron's index has no dtype code for {dtype}")
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
        raise ValueError("a document's length does not fit the index's int32")
    n = lengths.size
    pointers = np.zeros(n, np.int64)
    if n:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    return b"".join(
        [
            _HEADER.pack(MAGIC, VERSION, DTYPE_CODES[dtype], n, n + 1),
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            np.arange(n + 1, dtype="<i8").tobytes(),
        ]
    )


@dataclass(frozen=True)
class MegatronIndex:
    """A parsed `.idx`."""

    dtype: np.dtype
    lengths: np.ndarray  # int32, tokens of each sequence
    pointers: np.ndarray  # int64, byte offset of each sequence in the .bin
    document_indices: np.ndarray  # int64

    @property
    def tokens(self) -> int:
        return int(self.lengths.astype(np.int64).sum())

    @property
    def bin_bytes(self) -> int:
        """The size the `.bin` must have."""
        return self.tokens * self.dtype.itemsize


def read_index(data: bytes) -> MegatronIndex:
    """Parse an `.idx`; ValueError naming what is wrong with one that is not version 1."""
    if len(data) < HEADER_BYTES:
        raise ValueError(f"{len(data)} bytes: shorter than the {HEADER_BYTES}-byte header")
    magic, version, code, n, docs = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError(f"magic {magic!r} is not {MAGIC!r}")
    if version != VERSION:
        raise ValueError(f"version {version}, not {VERSION}")
    by_code = {c: d for d, c in DTYPE_CODES.items()}
    if code not in by_code:
        raise ValueError(f"dtype code {code} is not one of Megatron's")
    expected = HEADER_BYTES + 4 * n + 8 * n + 8 * docs
    if len(data) != expected:
        raise ValueError(f"{len(data)} bytes for {n} sequences and {docs} documents: {expected}")
    at = HEADER_BYTES
    lengths = np.frombuffer(data, "<i4", n, at)
    pointers = np.frombuffer(data, "<i8", n, at + 4 * n)
    documents = np.frombuffer(data, "<i8", docs, at + 12 * n)
    return MegatronIndex(by_code[code], lengths, pointers, documents)
