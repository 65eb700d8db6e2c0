"""MinHash signatures for near-dedup: shingling, sketching and LSH band keys, in numpy.

Everything here works on whole Arrow batches with numpy array operations; no per-document
Python runs in the hot path. A batch goes through four vectorised steps:

1. Lower-casing (`pyarrow.compute.utf8_lower`), then word or character spans found on the flat
   UTF-8 buffer of the whole batch. Word characters are Unicode letters, numbers, marks and `_`
   (Python's `\\w` plus combining marks, so scripts with vowel signs keep their words whole).
2. Token hashes from the buffer read eight bytes at a time (an unaligned uint64 view), mixed with
   the murmur3 64-bit finaliser; n-gram hashes are combined over the flat token array with
   document boundaries respected.
3. The sketch: Fast Similarity Sketching (Dahlgaard, Knudsen, Thorup, FOCS 2017). Round i throws
   every shingle of a still-incomplete document into one bin with the value i + r (r uniform in
   [0, 1)); rounds stop per document once all its bins are filled, since later rounds can only
   bring larger values. Rounds num_perm..2*num_perm-1 put every shingle into bin i - num_perm,
   so every bin of a non-empty document is filled by then. Each bin's value is the minimum of
   one random arrival order over the set, so P[slot equal] = Jaccard exactly, as for k-perm
   MinHash, at about max(m, k ln k) hash evaluations per document of m shingles instead of
   m * k. Measured (bench/minhash_kernel.py, 128 slots): unbiased, and its standard error is
   at or below k-permutation MinHash's for 10..2000 shingles, where one-permutation hashing
   with optimal densification is 5-20% worse below 128 shingles. End to end (tokenising
   included) it outruns chunked k-perm MinHash and keeps up with OPH (bench/minhash_kernel.py
   measures the docs/s of all three).
4. LSH band keys: one 64-bit hash of each band's slots, band index mixed in.

Values depend only on the document and the seed (constants come from splitmix64, not numpy's
generators, whose streams may change between numpy versions), so a signature is the same on
every machine and in every batch split. Character classes come from Python's `unicodedata`,
so a code point assigned in a newer Unicode version may classify differently across Python
versions.
"""

from __future__ import annotations

import importlib.util
import math
import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpusclean.pipelines.arrowbuf import value_buffers

EMPTY = np.uint32(0xFFFFFFFF)
"""Signature value of a slot with no shingle: every slot of a document with no shingle."""

_U64 = np.uint64
_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
# Text is processed in slices of about this many bytes: big enough that numpy's per-call
# overhead vanishes, small enough that a batch of long documents stays a few hundred MB.
_CHUNK_BYTES = 8 << 20
_MAX_PERM = 8192

_TOKENIZERS = ("word", "char", "auto")


@dataclass(frozen=True)
class MinHashParams:
    """Shingling, signature and banding parameters of near-dedup.

    `tokenizer`: `word` (word n-grams of `ngram` words), `char` (character n-grams of
    `char_ngram` characters, whitespace collapsed) or `auto` (characters for documents whose
    non-space characters are mostly CJK: Han, Hiragana, Katakana, Hangul; words otherwise).
    `bands` x `rows` slots of the `num_perm` are used for LSH. No defaults here: the job's
    values live in one model, `NearDedupParams` (pipelines/near_dedup.py), whose `minhash`
    gives these.
    """

    num_perm: int
    seed: int
    tokenizer: str
    ngram: int
    char_ngram: int
    bands: int
    rows: int

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> MinHashParams:
        """The parameters a run recorded (report.json's `near_dedup`, or any mapping with
        these keys)."""
        return cls(**{f: figures[f] for f in cls.__dataclass_fields__})

    def __post_init__(self) -> None:
        if not 1 <= self.num_perm <= _MAX_PERM:
            raise ValueError(f"num_perm must be in 1..{_MAX_PERM}, got {self.num_perm}")
        if self.tokenizer not in _TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {_TOKENIZERS}, got {self.tokenizer!r}")
        if self.ngram < 1 or self.char_ngram < 1:
            raise ValueError(
                f"ngram and char_ngram must be >= 1, got {self.ngram}, {self.char_ngram}"
            )
        if self.bands < 1 or self.rows < 1 or self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"bands x rows must be positive and fit num_perm={self.num_perm}, "
                f"got {self.bands} x {self.rows}"
            )


# ---------------------------------------------------------------------------------------------
# LSH parameters


def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """(bands, rows) minimising fp_weight * FP area + fn_weight * FN area of the LSH S-curve.

    The datasketch method: for every b, r with b * r <= num_perm, the false-positive area is
    the integral over [0, threshold] of P(s) = 1 - (1 - s^r)^b and the false-negative area the
    integral over [threshold, 1] of 1 - P(s); ties go to the smaller b, then the smaller r.
    P is a polynomial of degree b * r <= num_perm, so Gauss-Legendre with num_perm / 2 + 1 nodes
    integrates it exactly (up to rounding) without scipy.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, got {num_perm}")
    nodes, weights = np.polynomial.legendre.leggauss(min(num_perm // 2 + 1, 256))
    # More panels keep very long signatures accurate where one rule is no longer exact.
    panels = max(1, math.ceil(num_perm / 512))

    def grid(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
        edges = np.linspace(lo, hi, panels + 1)
        half = (edges[1:] - edges[:-1])[:, None] / 2
        mid = (edges[1:] + edges[:-1])[:, None] / 2
        return (mid + half * nodes).ravel(), (half * weights).ravel()

    s_fp, w_fp = grid(0.0, threshold)
    s_fn, w_fn = grid(threshold, 1.0)
    best, best_err = (0, 0), math.inf
    for b in range(1, num_perm + 1):
        r = np.arange(1, num_perm // b + 1, dtype=np.float64)[:, None]
        fp = (1.0 - (1.0 - s_fp**r) ** b) @ w_fp
        fn = ((1.0 - s_fn**r) ** b) @ w_fn
        err = fp * fp_weight + fn * fn_weight
        i = int(np.argmin(err))
        if err[i] < best_err:
            best_err, best = float(err[i]), (b, i + 1)
    return best


# ---------------------------------------------------------------------------------------------
# Hashing primitives


def _splitmix64(seed: int, n: int) -> np.ndarray:
    """n 64-bit constants from splitmix64: stable on every platform and numpy version."""
    out = np.empty(n, dtype=_U64)
    state = seed & _M64
    for i in range(n):
        state = (state + _GOLDEN) & _M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out[i] = z ^ (z >> 31)
    return out


def _fmix64(h: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finaliser, in place on a uint64 array (a bijection)."""
    h ^= h >> _U64(33)
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


# Odd multipliers of the n-gram combination; fixed, not seeded: shingle hashes are a property of
# the text, the seed only picks the sketch.
_NGRAM_K = _splitmix64(0x5348494E474C45, 64) | _U64(1)
_TOKEN_LEN_K = _U64(0xD6E8FEB86659FD93)
_CHAR_SALT = _U64(0x43484152)

# Character classes: a word character (Unicode letter, number or mark, or `_`), whitespace (what
# Python's str.isspace() accepts), CJK (Han with extension A, compatibility ideographs and the
# supplementary ideographic planes, Hiragana, Katakana with its extensions and half-width
# forms, Hangul syllables and jamo).
_WORD, _SPACE, _CJK = 1, 2, 4
_SPACE_CPS = [9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B)]
_SPACE_CPS += [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
_CJK_BMP = [(0x1100, 0x11FF), (0x3040, 0x30FF), (0x3130, 0x318F), (0x31F0, 0x31FF)]
_CJK_BMP += [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF)]
_CJK_BMP += [(0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0xFFA0, 0xFFDC)]
_CJK_ASTRAL = (0x20000, 0x3FFFF)


def _is_word_cp(cp: int) -> bool:
    return cp == 0x5F or unicodedata.category(chr(cp))[0] in "LNM"


@cache
def _bmp_classes() -> np.ndarray:
    """Class bits of every code point below U+10000 (built once per process: 65,536
    `unicodedata` lookups), so a batch classifies its characters with one table lookup
    instead of sorting them."""
    table = np.fromiter((_is_word_cp(c) for c in range(0x10000)), dtype=np.uint8, count=0x10000)
    table[np.array(_SPACE_CPS)] |= _SPACE
    for lo, hi in _CJK_BMP:
        table[lo : hi + 1] |= _CJK
    return table


def _classes(cps: np.ndarray) -> np.ndarray:
    """Class bits (uint8) of an array of code points."""
    out = _bmp_classes()[np.minimum(cps, 0xFFFF)]
    astral = np.flatnonzero(cps > 0xFFFF)
    if astral.size:
        # Rare (emoji, historic scripts, rare Han): classified per distinct code point.
        uniq, inverse = np.unique(cps[astral], return_inverse=True)
        word = np.fromiter((_is_word_cp(c) for c in uniq.tolist()), dtype=bool, count=uniq.size)
        cjk = (uniq >= _CJK_ASTRAL[0]) & (uniq <= _CJK_ASTRAL[1])
        out[astral] = (word * _WORD | cjk * _CJK).astype(np.uint8)[inverse]
    return out


# ---------------------------------------------------------------------------------------------
# Arrow text -> flat UTF-8 buffer


def _as_strings(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One string or large_string array (string_view and all-null arrays are cast)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type):
        return texts
    if pa.types.is_string_view(texts.type) or pa.types.is_null(texts.type):
        return texts.cast(pa.string())
    raise TypeError(f"MinHash needs a string array, got {texts.type}")


def _as_text_array(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A lower-cased string/large_string array with nulls as empty strings."""
    texts = _as_strings(texts)
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    return pc.utf8_lower(texts)


def _flat_buffer(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes padded with 8 zeros, int64 document offsets into them) of a string array."""
    offs, data = value_buffers(arr, relative=True)
    buf = np.zeros(len(data) + 8, dtype=np.uint8)
    buf[: len(data)] = data
    return buf, offs


def _decode_leads(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Code points of the multi-byte UTF-8 sequences whose lead bytes are at `pos`."""
    b0 = buf[pos].astype(np.uint32)
    b1 = (buf[pos + 1] & 0x3F).astype(np.uint32)
    b2 = (buf[pos + 2] & 0x3F).astype(np.uint32)
    b3 = (buf[pos + 3] & 0x3F).astype(np.uint32)
    two = ((b0 & 0x1F) << 6) | b1
    three = ((b0 & 0x0F) << 12) | (b1 << 6) | b2
    four = ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3
    return np.where(b0 < 0xE0, two, np.where(b0 < 0xF0, three, four))


class _Text:
    """A lower-cased batch as one UTF-8 buffer, with its non-ASCII characters decoded and
    classified once."""

    def __init__(self, arr: pa.Array) -> None:
        self.buf, self.offs = _flat_buffer(arr)
        self.size = int(self.offs[-1])
        body = self.buf[: self.size]
        self.hi_pos = np.flatnonzero(body >= 0x80)
        self.hi_lead = body[self.hi_pos] >= 0xC0
        self.lead_pos = self.hi_pos[self.hi_lead]
        self.lead_cp = _decode_leads(self.buf, self.lead_pos)
        self.lead_cls = _classes(self.lead_cp)

    def per_doc(self, positions: np.ndarray) -> np.ndarray:
        """How many of the sorted byte `positions` fall in each document."""
        return np.diff(np.searchsorted(positions, self.offs))


def _cjk_docs(text: _Text) -> np.ndarray:
    """Documents whose non-space characters are mostly CJK (a strict majority)."""
    cjk = (text.lead_cls & _CJK) != 0
    if not cjk.any():
        return np.zeros(text.offs.size - 1, dtype=bool)
    b = text.buf[: text.size]
    ascii_space = (b == 32) | ((b - 9) < 5) | ((b - 28) < 4)
    spaces = text.per_doc(np.flatnonzero(ascii_space))
    spaces += text.per_doc(text.lead_pos[(text.lead_cls & _SPACE) != 0])
    chars = np.diff(text.offs) - text.per_doc(text.hi_pos[~text.hi_lead])
    return 2 * text.per_doc(text.lead_pos[cjk]) > chars - spaces


# ---------------------------------------------------------------------------------------------
# Tokens and shingles


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + c) for every (s, c)."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(total, dtype=np.int64)


def _word_spans(text: _Text) -> tuple[np.ndarray, np.ndarray]:
    """Start and end byte positions of every word, in document order."""
    n = text.size
    b = text.buf[:n]
    # ASCII word bytes after lower-casing: 0-9, a-z, _ (uint8 arithmetic wraps below 0).
    w = ((b - 48) < 10) | ((b - 97) < 26) | (b == 95)
    if text.hi_pos.size:
        cls = np.zeros(text.hi_pos.size, dtype=np.uint8)
        cls[text.hi_lead] = text.lead_cls
        # A continuation byte takes the class of the nearest lead byte before it.
        owner = np.where(text.hi_lead, np.arange(text.hi_pos.size), 0)
        np.maximum.accumulate(owner, out=owner)
        w[text.hi_pos] = (cls[owner] & _WORD) != 0
    first = text.offs[:-1][np.diff(text.offs) > 0]
    last = text.offs[1:][np.diff(text.offs) > 0] - 1
    prev = np.zeros(n, dtype=bool)
    prev[1:] = w[:-1]
    prev[first] = False
    nxt = np.zeros(n, dtype=bool)
    nxt[:-1] = w[1:]
    nxt[last] = False
    starts = np.flatnonzero(w & ~prev)
    ends = np.flatnonzero(w & ~nxt) + 1
    return starts, ends


def _span_hashes(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hash of each byte span: 8-byte little-endian blocks chained, length mixed in."""
    # An unaligned view: element i holds bytes i..i+7; the 8 zero bytes of padding keep the
    # last reads in bounds.
    words = np.ndarray(shape=(buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))
    length = ends - starts
    h = words[starts]
    cut = np.minimum(length, 8).astype(_U64)
    h &= _U64(_M64) >> ((_U64(8) - cut) * _U64(8))
    long_ = np.flatnonzero(length > 8)
    block = 1
    while long_.size:
        pos = starts[long_] + 8 * block
        rest = np.minimum(length[long_] - 8 * block, 8).astype(_U64)
        v = words[pos] & (_U64(_M64) >> ((_U64(8) - rest) * _U64(8)))
        h[long_] = _fmix64(h[long_] ^ _U64(_GOLDEN)) ^ v
        block += 1
        long_ = long_[length[long_] > 8 * block]
    h ^= length.astype(_U64) * _TOKEN_LEN_K
    return _fmix64(h)


def _char_units(text: _Text) -> tuple[np.ndarray, np.ndarray]:
    """Per-character hashes with whitespace runs collapsed to one space and ends trimmed,
    and their per-document offsets."""
    b = text.buf[: text.size]
    cps = b[np.flatnonzero((b & 0xC0) != 0x80)].astype(np.uint32)
    doc_char_off = np.zeros(text.offs.size, dtype=np.int64)
    np.cumsum(np.diff(text.offs) - text.per_doc(text.hi_pos[~text.hi_lead]), out=doc_char_off[1:])
    wide = cps >= 0xC0
    cps[wide] = text.lead_cp
    space = (cps == 32) | ((cps - 9) < 5) | ((cps - 28) < 4)
    space[wide] |= (text.lead_cls & _SPACE) != 0
    # Non-space characters before each position; a space survives only between two non-space
    # characters of its document, and only the first of a run.
    solid = np.zeros(cps.size + 1, dtype=np.int64)
    np.cumsum(~space, out=solid[1:])
    doc = np.repeat(np.arange(doc_char_off.size - 1), np.diff(doc_char_off))
    before = solid[:-1] - solid[doc_char_off[doc]]
    after = solid[doc_char_off[doc + 1]] - solid[1:]
    prev_space = np.zeros(cps.size, dtype=bool)
    prev_space[1:] = space[:-1]
    keep = ~space | ((before > 0) & (after > 0) & ~prev_space)
    cps = np.where(space, np.uint32(32), cps)[keep]
    counts = np.bincount(doc[keep], minlength=doc_char_off.size - 1)
    units = _fmix64(cps.astype(_U64) * _U64(_GOLDEN) + _CHAR_SALT)
    off = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return units, off


def _ngrams(units: np.ndarray, unit_off: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashes of the n-grams of each document's unit sequence, in document order.

    A document with 1..n-1 units gets one shingle of all of them, so very short documents
    still match their exact copies; one with no unit gets none.
    """
    total = units.size
    lens = np.diff(unit_off)
    padded = np.zeros(total + n, dtype=_U64)
    padded[:total] = units
    acc = padded[:total] * _NGRAM_K[0]
    for j in range(1, n):
        acc += padded[j : total + j] * _NGRAM_K[j]
    short = np.flatnonzero((lens > 0) & (lens < n))
    if short.size:
        first = unit_off[:-1][short]
        sacc = np.zeros(short.size, dtype=_U64)
        for j in range(n - 1):
            use = lens[short] > j
            sacc[use] += padded[first[use] + j] * _NGRAM_K[j]
        acc[first] = sacc
    counts = np.where(lens >= n, lens - n + 1, np.minimum(lens, 1))
    g = acc[_ranges(unit_off[:-1], counts)]
    off = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return _fmix64(g), off


def _word_shingles(text: _Text, n: int) -> tuple[np.ndarray, np.ndarray]:
    starts, ends = _word_spans(text)
    units = _span_hashes(text.buf, starts, ends)
    unit_off = np.searchsorted(starts, text.offs)
    return _ngrams(units, unit_off, n)


def _char_shingles(text: _Text, n: int) -> tuple[np.ndarray, np.ndarray]:
    units, unit_off = _char_units(text)
    return _ngrams(units, unit_off, n)


def _merge(
    n: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """Interleave per-subset shingle lists (doc indices, hashes, offsets) back to doc order."""
    counts = np.zeros(n, dtype=np.int64)
    for docs, _, off in parts:
        counts[docs] = np.diff(off)
    out_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=out_off[1:])
    out = np.empty(int(out_off[-1]), dtype=_U64)
    for docs, g, off in parts:
        out[_ranges(out_off[docs], np.diff(off))] = g
    return out, out_off


def shingle_batch(
    texts: pa.Array | pa.ChunkedArray, params: MinHashParams
) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of a batch: (uint64 hashes in document order, int64 offsets (n + 1,)).

    Document i's shingles are `hashes[offsets[i]:offsets[i + 1]]`, repeats included (an
    n-gram that occurs twice appears twice). Nulls and documents without a word (or, for
    characters, without a non-space character) have none.
    """
    arr = _as_text_array(texts)
    text = _Text(arr)
    n = len(arr)
    if params.tokenizer == "word":
        return _word_shingles(text, params.ngram)
    if params.tokenizer == "char":
        return _char_shingles(text, params.char_ngram)
    cjk = _cjk_docs(text)
    if not cjk.any():
        return _word_shingles(text, params.ngram)
    if cjk.all():
        return _char_shingles(text, params.char_ngram)
    parts = []
    for docs, char_mode in ((np.flatnonzero(~cjk), False), (np.flatnonzero(cjk), True)):
        sub = _Text(arr.take(pa.array(docs)))
        if char_mode:
            g, off = _char_shingles(sub, params.char_ngram)
        else:
            g, off = _word_shingles(sub, params.ngram)
        parts.append((docs, g, off))
    return _merge(n, parts)


# ---------------------------------------------------------------------------------------------
# The sketch


def sketch(hashes: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """Fast Similarity Sketch of each document's shingle hashes: (n, num_perm) uint32.

    `hashes`/`offsets` as `shingle_batch` returns them. A document with no shingle gets a row
    of `EMPTY`. The fraction of equal slots of two rows estimates the Jaccard similarity of
    the two shingle sets without bias.
    """
    k = num_perm
    n = offsets.size - 1
    counts = np.diff(offsets)
    sig = np.full(n * k, EMPTY, dtype=np.uint32)
    keys = _splitmix64(seed, 2 * k + 1)
    # Value = round index in the high bits, the round's random draw below it, so a value from
    # an earlier round is always smaller; (2k).bit_length() bits keep EMPTY unreachable.
    shift = 32 - (2 * k).bit_length()
    low = np.uint32((1 << shift) - 1)
    base = _fmix64(hashes ^ keys[0])
    docs = np.flatnonzero(counts > 0)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    first = (owner * k).view(_U64)
    rows = sig.reshape(n, k)
    # For a power of two, h >> (64 - log2 k) is exactly ((h >> 32) * k) >> 32, in one pass.
    top = _U64(65 - k.bit_length()) if k > 1 and k & (k - 1) == 0 else None
    for i in range(2 * k):
        if docs.size == 0:
            break
        h = _fmix64(base + keys[i + 1]) if i else base
        if i >= k:
            slot = (first + _U64(i - k)).view(np.int64)
        elif top is not None:
            slot = (first + (h >> top)).view(np.int64)
        else:
            slot = (first + ((h >> _U64(32)) * _U64(k) >> _U64(32))).view(np.int64)
        if i:
            # Only an empty bin can still change: every filled one holds a value < i.
            open_ = sig[slot] == EMPTY
            slot, h = slot[open_], h[open_]
        value = h.astype(np.uint32)
        value &= low
        if i:
            value |= np.uint32(i << shift)
        np.minimum.at(sig, slot, value)
        full = (rows[docs] != EMPTY).all(axis=1)
        if full.any():
            done = np.zeros(n, dtype=bool)
            done[docs[full]] = True
            docs = docs[~full]
            alive = ~done[owner]
            owner, first, base = owner[alive], first[alive], base[alive]
    return rows


def _kernel_tokens(params: MinHashParams) -> tuple[Any, ...]:
    """The compiled kernel's tokenizer argument for `params` (`minhash_jit.tokenizer`)."""
    from corpusclean.pipelines import minhash_jit

    return minhash_jit.tokenizer(
        _bmp_classes(),
        params.tokenizer,
        params.ngram,
        params.char_ngram,
        _NGRAM_K,
        _TOKEN_LEN_K,
        _CHAR_SALT,
    )


def signatures(
    texts: pa.Array | pa.ChunkedArray, params: MinHashParams, compiled: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """MinHash signatures of a batch of texts: (uint32 (n, num_perm), int32 shingle counts).

    `texts` is a string or large_string array (nulls allowed). Documents with no shingle
    (null, empty, only separators) get a count of 0 and a row of `EMPTY` that callers must
    ignore. Counts include repeated n-grams. A row depends only on its text and `params`,
    never on the rest of the batch.

    `compiled`: the numba kernel (pipelines/minhash_jit.py) or the numpy steps of this module;
    both give the same arrays. None: as `use_compiled` decides.
    """
    texts = _as_strings(texts)
    n = len(texts)
    if compiled is None:
        compiled = use_compiled(texts.nbytes)
    if compiled:
        from corpusclean.pipelines import minhash_jit

        sig = np.full((n, params.num_perm), EMPTY, dtype=np.uint32)
    else:
        sig = np.empty((n, params.num_perm), dtype=np.uint32)
    n_sh = np.zeros(n, dtype=np.int32)
    keys = _splitmix64(params.seed, 2 * params.num_perm + 1) if compiled else None
    tokens = _kernel_tokens(params) if compiled else ()
    for lo, hi in _chunks(texts):
        if compiled:
            buf, offs = _flat_buffer(_as_text_array(texts.slice(lo, hi - lo)))
            minhash_jit.signatures_into(buf, offs, tokens, keys, sig[lo:hi], n_sh[lo:hi])
            continue
        g, off = shingle_batch(texts.slice(lo, hi - lo), params)
        sig[lo:hi] = sketch(g, off, params.num_perm, params.seed)
        n_sh[lo:hi] = np.diff(off)
    return sig, n_sh


# The compiled kernel costs a Python worker a load (numba's import and its cached code;
# compiling it the first time happens once per install) and then runs several times the numpy
# steps' docs/s (bench/minhash_kernel.py). It repays its load after some tens of MB of text
# (docs/figures.md), so a worker switches to it once it has signed this much text; a small run
# never loads numba.
_COMPILED_AFTER_BYTES = 32 << 20
_signed_bytes = 0


@cache
def _numba_importable() -> bool:
    return importlib.util.find_spec("numba") is not None


def use_compiled(nbytes: int) -> bool:
    """Whether this process signs (or, in `pair_jaccards`, compares) its next `nbytes` of text
    with the compiled kernel.

    `CORPUSCLEAN_MINHASH_KERNEL` (read in each Python worker): `numpy` always takes the numpy
    steps, `compiled` always the kernel (where numba imports); anything else, or unset, the
    kernel once this process has signed `_COMPILED_AFTER_BYTES` of text. The values are the
    same either way.
    """
    global _signed_bytes
    mode = os.environ.get("CORPUSCLEAN_MINHASH_KERNEL", "")
    if mode == "numpy" or not _numba_importable():
        return False
    if mode == "compiled":
        return True
    seen, _signed_bytes = _signed_bytes, _signed_bytes + nbytes
    return seen >= _COMPILED_AFTER_BYTES


def _chunks(texts: pa.Array) -> list[tuple[int, int]]:
    """Row ranges of about `_CHUNK_BYTES` of text each (a longer document gets its own)."""
    n = len(texts)
    if n == 0:
        return []
    offs, _ = value_buffers(texts)
    cuts = np.searchsorted(
        offs, offs[0] + np.arange(_CHUNK_BYTES, offs[-1] - offs[0], _CHUNK_BYTES)
    )
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, n), [n]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))


def shingle_hashes(text: str, params: MinHashParams) -> np.ndarray:
    """The set of shingle hashes of one document (sorted, unique uint64), as `signatures`
    computes them."""
    g, _ = shingle_batch(pa.array([text], pa.string()), params)
    return np.unique(g)


def exact_jaccard(a: str, b: str, params: MinHashParams) -> float:
    """Exact Jaccard similarity of two documents' shingle sets (1.0 when both are empty)."""
    sa, sb = shingle_hashes(a, params), shingle_hashes(b, params)
    union = np.union1d(sa, sb).size
    if union == 0:
        return 1.0
    return np.intersect1d(sa, sb, assume_unique=True).size / union


def pair_jaccards(
    a: pa.Array | pa.ChunkedArray,
    b: pa.Array | pa.ChunkedArray,
    params: MinHashParams,
    compiled: bool | None = None,
) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of `a[i]` and `b[i]`: float64 (n,), 0.0
    where either document has no shingle (null, empty, only separators).

    `compiled`: the numba kernel or the numpy steps, as in `signatures` (the same shingle sets,
    so the same values); None: as `use_compiled` decides.
    """
    a, b = _as_strings(a), _as_strings(b)
    if len(a) != len(b):
        raise ValueError(f"pair_jaccards needs two arrays of one length, got {len(a)}, {len(b)}")
    n = len(a)
    out = np.zeros(n)
    if compiled is None:
        compiled = use_compiled(a.nbytes + b.nbytes)
    if not compiled:
        ha, oa = shingle_batch(a, params)
        hb, ob = shingle_batch(b, params)
        for i in range(n):
            sa = np.unique(ha[oa[i] : oa[i + 1]])
            sb = np.unique(hb[ob[i] : ob[i + 1]])
            if len(sa) and len(sb):
                inter = len(np.intersect1d(sa, sb, assume_unique=True))
                out[i] = inter / (len(sa) + len(sb) - inter)
        return out
    from corpusclean.pipelines import minhash_jit

    tokens = _kernel_tokens(params)
    for lo, hi in _chunks(a):
        buf_a, offs_a = _flat_buffer(_as_text_array(a.slice(lo, hi - lo)))
        buf_b, offs_b = _flat_buffer(_as_text_array(b.slice(lo, hi - lo)))
        minhash_jit.pair_jaccards_into(buf_a, offs_a, buf_b, offs_b, tokens, out[lo:hi])
    return out


# ---------------------------------------------------------------------------------------------
# Estimates and band keys


def estimate_jaccard_rows(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Signature estimates of Jaccard similarity (the fraction of equal slots), row by row, of
    two (m, k) signature matrices: float64 (m,)."""
    sig_a, sig_b = np.asarray(sig_a), np.asarray(sig_b)
    if sig_a.shape != sig_b.shape or sig_a.ndim != 2:
        raise ValueError(f"need two (m, k) matrices of one shape, got {sig_a.shape}, {sig_b.shape}")
    return (sig_a == sig_b).mean(axis=1)


_BAND_KEYS = _splitmix64(0x42414E44, _MAX_PERM + 1)


def band_hashes(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit LSH key per band: int64 (n, bands) from the first bands x rows slots.

    Each key chains the band's slots, two at a time, through the murmur3 finaliser starting
    from a per-band constant, so equal keys mean equal bands (up to 64-bit collisions) and the
    same slots in different bands give different keys.
    """
    sig = np.asarray(sig, dtype=np.uint32)
    n, k = sig.shape
    if bands < 1 or rows < 1 or bands * rows > k:
        raise ValueError(f"bands x rows = {bands} x {rows} does not fit {k} slots")
    cells = sig[:, : bands * rows].reshape(n, bands, rows).astype(_U64)
    if rows % 2:
        cells = np.concatenate([cells, np.zeros((n, bands, 1), dtype=_U64)], axis=2)
    words = cells[:, :, 0::2] | (cells[:, :, 1::2] << _U64(32))
    h = np.broadcast_to(_BAND_KEYS[:bands], (n, bands)).copy()
    for j in range(words.shape[2]):
        h = _fmix64((h ^ words[:, :, j]) + _U64(_GOLDEN))
    return h.view(np.int64)
