"""The token side of pack's write tasks: tokenizing a batch, the two token shard formats, and the
counts the tokenizing pack's report is made of.

- **Megatron** (`megatron`): a shard is Megatron-LM's indexed dataset, `{prefix}-000042.bin`
  (every document's ids, one after the other) and `.idx` (pipelines/megatron.py), the pair a
  `--data-path` prefix names. `MegatronShardWriter` streams the .bin and hashes it as it goes;
  the .idx, a few bytes a document, is written at commit.
- **WebDataset** (`webdataset`): pack's tar layout, a sample a document with `{key}.npy`
  (the ids, a NumPy array of the pack's dtype) beside `{key}.json` (the document's columns but
  its text, the doc_id among them), written by pack's own tar writer; webdataset, wids and DALI
  read them as they read text shards.

Every task tokenizes with the tokenizer loaded once per Python worker (`worker_tokenizer`),
and each unit's counts (tokens, text bytes, the tokens-per-document histogram, and per value of
`source`/`lang` where the clean output has them) go into its unit marker, so a resumed pack
still reports every unit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpusclean.pipelines.megatron import index_bytes
from corpusclean.pipelines.tokenizers import TokenizerSpec, worker_tokenizer

Format = Literal["megatron", "webdataset"]
# A column's values past this many are not broken down (a free-text column is no category).
MAX_VALUES = 1_000
_TOO_MANY = "__too_many__"


@dataclass(frozen=True)
class TokenWrite:
    """What a write task needs to tokenize: the tokenizer, the format, the ids' dtype, and
    the columns whose values the report breaks the counts down by."""

    tokenizer: TokenizerSpec
    format: Format
    dtype: str
    breakdown: tuple[str, ...] = ()

    @property
    def ext(self) -> str:
        """The data file's extension: Megatron's `.bin`, else a tar."""
        return "bin" if self.format == "megatron" else "tar"


def tokenize(write: TokenWrite, texts: pa.Array) -> pa.LargeListArray:
    """Each text's ids framed with BOS/EOS, as a list array (slices keep each document's ids
    with it); a null text is an empty document."""
    tok = worker_tokenizer(write.tokenizer)
    if pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type):
        texts = pc.cast(texts, pa.large_string())
    ids, offsets = tok.encode(texts)
    dtype = np.dtype(write.dtype)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(ids.astype(dtype)))


def flat_ids(tokens: pa.LargeListArray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, lengths) of a (possibly sliced) list array of documents."""
    ids = tokens.flatten().to_numpy(zero_copy_only=False)
    lengths = np.diff(tokens.offsets.to_numpy(zero_copy_only=False))
    return ids, lengths


class MegatronShardWriter:
    """Writes one Megatron shard's .bin under a temporary name, hashing as it goes, and keeps
    each document's length for its .idx (the caller renames both)."""

    def __init__(self, temp_path: Path, dtype: np.dtype) -> None:
        self.temp_path = temp_path
        self.dtype = np.dtype(dtype)
        self._file: IO[bytes] | None = open(temp_path, "wb")  # noqa: SIM115 - closed in finish
        self._sha = hashlib.sha256()
        self._lengths: list[np.ndarray] = []
        self.offset = 0
        self.ndocs = 0
        self.ntokens = 0

    def add_documents(self, tokens: pa.LargeListArray) -> None:
        """Append documents (their ids already in the shard's dtype), in order."""
        ids, lengths = flat_ids(tokens)
        data = memoryview(np.ascontiguousarray(ids, dtype=self.dtype.newbyteorder("<")))
        assert self._file is not None
        self._file.write(data)
        self._sha.update(data)
        self.offset += data.nbytes
        self._lengths.append(lengths)
        self.ndocs += len(lengths)
        self.ntokens += int(lengths.sum())

    @property
    def nsamples(self) -> int:
        return self.ndocs

    def finish(self) -> tuple[int, str]:
        """Close the .bin; returns (filesize, sha256)."""
        assert self._file is not None
        self._file.close()
        self._file = None
        return self.offset, self._sha.hexdigest()

    def index(self) -> bytes:
        """The shard's .idx."""
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        return index_bytes(lengths, self.dtype)

    def abort(self) -> None:
        """Close and remove the temporary file (a failed task; a killed one leaves it behind)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self.temp_path.unlink(missing_ok=True)


def _npy_header(dtype: np.dtype, n: int) -> bytes:
    """NumPy's `.npy` version 1.0 header of a 1-d array of `n` values (what np.save writes)."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({n},), }}"
    # Magic, version, header length, then the dict padded with spaces to a 64-byte boundary.
    total = 10 + len(text) + 1
    text += " " * (-total % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")


def npy_members(tokens: pa.LargeListArray, dtype: np.dtype) -> pa.Array:
    """Each document's ids as the bytes of a `.npy` file (binary array, one per document)."""
    dtype = np.dtype(dtype).newbyteorder("<")
    ids, lengths = flat_ids(tokens)
    data = np.ascontiguousarray(ids, dtype=dtype).tobytes()
    headers = [_npy_header(dtype, int(n)) for n in lengths.tolist()]
    pieces: list[bytes] = []
    at = 0
    for header, n in zip(headers, (lengths * dtype.itemsize).tolist(), strict=True):
        pieces += [header, data[at : at + n]]
        at += n
    sizes = (
        np.fromiter((len(h) for h in headers), np.int64, len(headers)) + lengths * dtype.itemsize
    )
    offsets = np.zeros(len(headers) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(headers),
        [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(pieces))],
    )


def npy_sizes(tokens: pa.LargeListArray, dtype: np.dtype) -> np.ndarray:
    """The byte size of each document's `.npy` member, without building it."""
    _, lengths = flat_ids(tokens)
    digits = np.char.str_len(lengths.astype(str)) if len(lengths) else np.zeros(0, np.int64)
    text = len(f"{{'descr': '{np.dtype(dtype).str}', 'fortran_order': False, 'shape': (,), }}")
    total = 10 + text + digits + 1
    header = total + (-total % 64)
    return header.astype(np.int64) + lengths * np.dtype(dtype).itemsize


# --------------------------------------------------------------------------- counts


def _bucket(n: np.ndarray) -> np.ndarray:
    """The power-of-two bucket of each count: 0 for 0, k for [2^(k-1), 2^k)."""
    out = np.zeros(n.shape, np.int64)
    positive = n > 0
    out[positive] = np.floor(np.log2(n[positive])).astype(np.int64) + 1
    return out


@dataclass
class TokenCounts:
    """The counts of some documents: totals, the tokens-per-document histogram (by power-of-two
    bucket), and per value of each breakdown column its documents, tokens and text bytes."""

    docs: int = 0
    tokens: int = 0
    text_bytes: int = 0
    histogram: dict[int, int] = field(default_factory=dict)
    by: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def add(
        self, lengths: np.ndarray, text_bytes: np.ndarray, columns: dict[str, pa.Array]
    ) -> None:
        """Count documents of `lengths` tokens and `text_bytes` bytes of text each."""
        self.docs += len(lengths)
        self.tokens += int(lengths.sum())
        self.text_bytes += int(text_bytes.sum())
        buckets, counts = np.unique(_bucket(lengths), return_counts=True)
        for b, c in zip(buckets.tolist(), counts.tolist(), strict=True):
            self.histogram[b] = self.histogram.get(b, 0) + c
        for name, column in columns.items():
            per = self.by.setdefault(name, {})
            if _TOO_MANY in per:
                continue
            values = pc.cast(column, pa.string()).fill_null("(null)")
            table = pa.table({"v": values, "t": lengths, "b": text_bytes})
            grouped = table.group_by("v").aggregate([("t", "count"), ("t", "sum"), ("b", "sum")])
            for v, d, t, b in zip(
                grouped["v"].to_pylist(),
                grouped["t_count"].to_pylist(),
                grouped["t_sum"].to_pylist(),
                grouped["b_sum"].to_pylist(),
                strict=True,
            ):
                row = per.setdefault(v, [0, 0, 0])
                row[0] += d
                row[1] += t
                row[2] += b
            if len(per) > MAX_VALUES:
                self.by[name] = {_TOO_MANY: [0, 0, 0]}

    def merge(self, other: TokenCounts) -> None:
        """Add `other`'s counts to these."""
        self.docs += other.docs
        self.tokens += other.tokens
        self.text_bytes += other.text_bytes
        for b, c in other.histogram.items():
            self.histogram[b] = self.histogram.get(b, 0) + c
        for name, per in other.by.items():
            mine = self.by.setdefault(name, {})
            if _TOO_MANY in per or _TOO_MANY in mine:
                self.by[name] = {_TOO_MANY: [0, 0, 0]}
                continue
            for v, row in per.items():
                acc = mine.setdefault(v, [0, 0, 0])
                for i in range(3):
                    acc[i] += row[i]
            if len(mine) > MAX_VALUES:
                self.by[name] = {_TOO_MANY: [0, 0, 0]}

    def to_json(self) -> dict[str, Any]:
        """The counts as JSON (a unit marker's `tokens`)."""
        return {
            "docs": self.docs,
            "tokens": self.tokens,
            "text_bytes": self.text_bytes,
            "histogram": {str(k): v for k, v in sorted(self.histogram.items())},
            "by": self.by,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenCounts:
        """The counts a unit marker holds."""
        return cls(
            int(data.get("docs", 0)),
            int(data.get("tokens", 0)),
            int(data.get("text_bytes", 0)),
            {int(k): int(v) for k, v in (data.get("histogram") or {}).items()},
            {k: {v: list(r) for v, r in per.items()} for k, per in (data.get("by") or {}).items()},
        )

    @staticmethod
    def too_many(per: dict[str, list[int]]) -> bool:
        """Whether a breakdown column had too many values to keep."""
        return _TOO_MANY in per
