"""The MinHash kernel compiled with numba: the same signatures as `pipelines/minhash.py`, faster.

`pipelines/minhash.py` states the algorithm in whole-batch numpy steps; this module runs the
same steps one document at a time in compiled loops, so a document's bytes are read once and no
batch-sized temporaries are made (the numpy path allocates a dozen arrays the size of the
batch's text per step). Every value is computed with the same constants and the same integer
arithmetic, so the signatures and shingle counts are identical bit for bit; a unit test checks
that on English, CJK, mixed, astral, whitespace-only and random texts, and `bench/minhash_kernel.py`
measures both paths' docs/s.

Compiled functions are cached on disk (numba's `cache=True`: `__pycache__` beside this file,
or numba's user-wide cache where that is read-only), so a Python worker loads them instead of
compiling them again. This module imports numba; `pipelines/minhash.py` imports it only once a
worker has enough text to repay that (`minhash.use_compiled`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corpusclean.pipelines import compiled
from corpusclean.pipelines.minhash import _fmix64

_jit = compiled.jit


_U64 = np.uint64

# Modes of the tokenizer, as `MinHashParams.tokenizer` names them.
WORD, CHAR, AUTO = 0, 1, 2
MODES = {"word": WORD, "char": CHAR, "auto": AUTO}

# Class bits, as pipelines/minhash.py defines them.
_C_WORD, _C_SPACE, _C_CJK = 1, 2, 4


def available() -> bool:
    """Whether numba imports here."""
    return compiled.available()


# The numpy path's finaliser, compiled for scalars: one definition of it for both paths.
_fmix = _jit(_fmix64)


@_jit
def _ascii_space(b: Any) -> bool:
    # Space, tab, LF, VT, FF, CR and the four information separators (str.isspace()).
    return b == 32 or (9 <= b <= 13) or (28 <= b <= 31)


@_jit
def _class_of(cp: Any, bmp: Any, astral_cp: Any, astral_cls: Any) -> Any:
    if cp <= 0xFFFF:
        return bmp[cp]
    i = np.searchsorted(astral_cp, cp)
    return astral_cls[i]


@_jit
def _decode(buf: Any, pos: Any) -> Any:
    """(code point, byte length) of the UTF-8 sequence at `pos` (the numpy path's decoding)."""
    b0 = np.uint32(buf[pos])
    if b0 < 0x80:
        return b0, 1
    b1 = np.uint32(buf[pos + 1]) & np.uint32(0x3F)
    if b0 < 0xE0:
        return ((b0 & np.uint32(0x1F)) << np.uint32(6)) | b1, 2
    b2 = np.uint32(buf[pos + 2]) & np.uint32(0x3F)
    if b0 < 0xF0:
        return ((b0 & np.uint32(0x0F)) << np.uint32(12)) | (b1 << np.uint32(6)) | b2, 3
    b3 = np.uint32(buf[pos + 3]) & np.uint32(0x3F)
    cp = (
        ((b0 & np.uint32(0x07)) << np.uint32(18))
        | (b1 << np.uint32(12))
        | (b2 << np.uint32(6))
        | b3
    )
    return cp, 4


@_jit
def _is_cjk_doc(buf: Any, lo: int, hi: int, bmp: Any, astral_cp: Any, astral_cls: Any) -> bool:
    """Mostly CJK: 2 x CJK characters > characters that are not whitespace."""
    cjk = 0
    chars = 0
    spaces = 0
    p = lo
    while p < hi:
        b = buf[p]
        if b < 0x80:
            chars += 1
            if _ascii_space(b):
                spaces += 1
            p += 1
            continue
        cp, n = _decode(buf, p)
        cls = _class_of(cp, bmp, astral_cp, astral_cls)
        chars += 1
        if cls & _C_CJK:
            cjk += 1
        if cls & _C_SPACE:
            spaces += 1
        p += n
    return 2 * cjk > chars - spaces


@_jit
def _word_units(
    buf: Any, lo: int, hi: int, bmp: Any, astral_cp: Any, astral_cls: Any, tok_k: Any, out: Any
) -> int:
    """Hashes of the document's words (runs of word characters) into `out`; their number."""
    m = 0
    start = -1
    p = lo
    while p <= hi:
        word = False
        n = 1
        if p < hi:
            b = buf[p]
            if b < 0x80:
                word = (48 <= b <= 57) or (97 <= b <= 122) or b == 95
            else:
                cp, n = _decode(buf, p)
                word = (_class_of(cp, bmp, astral_cp, astral_cls) & _C_WORD) != 0
        if word:
            if start < 0:
                start = p
        elif start >= 0:
            out[m] = _span_hash(buf, start, p, tok_k)
            m += 1
            start = -1
        p += n
    return m


@_jit
def _block(buf: Any, pos: int, n: int) -> Any:
    """The `n` (1..8) bytes at `pos` as a little-endian uint64."""
    v = _U64(0)
    for j in range(n):
        v |= _U64(buf[pos + j]) << _U64(8 * j)
    return v


@_jit
def _span_hash(buf: Any, start: int, end: int, tok_k: Any) -> Any:
    length = end - start
    h = _block(buf, start, min(length, 8))
    off = 8
    while off < length:
        v = _block(buf, start + off, min(length - off, 8))
        h = _fmix(h ^ _U64(0x9E3779B97F4A7C15)) ^ v
        off += 8
    h ^= _U64(length) * tok_k
    return _fmix(h)


@_jit
def _char_units(
    buf: Any, lo: int, hi: int, bmp: Any, astral_cp: Any, astral_cls: Any, salt: Any, out: Any
) -> int:
    """Hashes of the document's characters, whitespace runs as one space, ends trimmed."""
    m = 0
    pending = False  # a whitespace run after a non-space character, not yet written
    p = lo
    while p < hi:
        b = buf[p]
        if b < 0x80:
            cp = np.uint32(b)
            space = _ascii_space(b)
            n = 1
        else:
            cp, n = _decode(buf, p)
            space = (_class_of(cp, bmp, astral_cp, astral_cls) & _C_SPACE) != 0
        p += n
        if space:
            pending = m > 0
            continue
        if pending:
            out[m] = _fmix(_U64(32) * _U64(0x9E3779B97F4A7C15) + salt)
            m += 1
            pending = False
        out[m] = _fmix(_U64(cp) * _U64(0x9E3779B97F4A7C15) + salt)
        m += 1
    return m


@_jit
def _shingles(units: Any, m: int, n: int, ngram_k: Any, out: Any) -> int:
    """n-gram hashes of `units[:m]` into `out`; a document of 1..n-1 units gets one shingle."""
    if m == 0:
        return 0
    if m < n:
        acc = _U64(0)
        for j in range(m):
            acc += units[j] * ngram_k[j]
        out[0] = _fmix(acc)
        return 1
    for i in range(m - n + 1):
        acc = _U64(0)
        for j in range(n):
            acc += units[i + j] * ngram_k[j]
        out[i] = _fmix(acc)
    return m - n + 1


@_jit
def _sketch(g: Any, m: int, keys: Any, k: int, shift: int, top: int, base: Any, row: Any) -> None:
    """Fast Similarity Sketch of `g[:m]` into `row` (k uint32, pre-filled with EMPTY)."""
    empty = np.uint32(0xFFFFFFFF)
    low = np.uint32((1 << shift) - 1)
    for s in range(m):
        base[s] = _fmix(g[s] ^ keys[0])
    filled = 0
    for i in range(2 * k):
        floor = np.uint32(i << shift)
        for s in range(m):
            h = base[s] if i == 0 else _fmix(base[s] + keys[i + 1])
            if i >= k:
                slot = i - k
            elif top >= 0:
                slot = np.int64(h >> _U64(top))
            else:
                slot = np.int64(((h >> _U64(32)) * _U64(k)) >> _U64(32))
            cur = row[slot]
            if cur < floor:
                continue  # filled in an earlier round: only larger values are left
            value = (np.uint32(h & _U64(0xFFFFFFFF)) & low) | floor
            if cur == empty:
                filled += 1
                row[slot] = value
            elif value < cur:
                row[slot] = value
        if filled == k:
            return


@_jit
def _doc_shingles(
    buf: Any, lo: int, hi: int, astral_cp: Any, astral_cls: Any, tokens: Any, units: Any, out: Any
) -> int:
    """The shingle hashes of the document `buf[lo:hi]` into `out` (repeats included), as
    `minhash.shingle_batch` gives them; their number. `tokens` as `tokenizer` makes it."""
    bmp, mode, ngram, char_ngram, ngram_k, tok_k, salt = tokens
    chars = mode == CHAR or (mode == AUTO and _is_cjk_doc(buf, lo, hi, bmp, astral_cp, astral_cls))
    if chars:
        m = _char_units(buf, lo, hi, bmp, astral_cp, astral_cls, salt, units)
        return _shingles(units, m, char_ngram, ngram_k, out)
    m = _word_units(buf, lo, hi, bmp, astral_cp, astral_cls, tok_k, units)
    return _shingles(units, m, ngram, ngram_k, out)


@_jit
def _widest(offs: Any) -> int:
    """The byte length of the longest document of `offs`: what a work array must hold."""
    widest = 0
    for d in range(offs.size - 1):
        widest = max(widest, offs[d + 1] - offs[d])
    return widest


@_jit
def _signatures(
    buf: Any,
    offs: Any,
    astral_cp: Any,
    astral_cls: Any,
    tokens: Any,
    keys: Any,
    k: int,
    shift: int,
    top: int,
    sig: Any,
    counts: Any,
) -> None:
    n = offs.size - 1
    widest = _widest(offs)
    units = np.empty(widest + 1, dtype=np.uint64)
    g = np.empty(widest + 1, dtype=np.uint64)
    base = np.empty(widest + 1, dtype=np.uint64)
    for d in range(n):
        c = _doc_shingles(buf, offs[d], offs[d + 1], astral_cp, astral_cls, tokens, units, g)
        counts[d] = c
        if c:
            _sketch(g, c, keys, k, shift, top, base, sig[d])


@_jit
def _table_size(n: int) -> int:
    """The power of two, at least 16, that holds `n` values at most half full."""
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@_jit
def _overlap(ga: Any, ca: int, gb: Any, cb: int, values: Any, owners: Any) -> Any:
    """(distinct values of `ga[:ca]`, of `gb[:cb]`, common to both), counted in one open-
    addressing table: `values`/`owners` are work arrays of a power-of-two size at least twice
    `ca + cb` (`_table_size`), so a probe always ends. The shingle hashes are finaliser outputs,
    so their low bits index the table directly. A table, not two sorts and a merge: fewer
    passes over the shingles (docs/figures.md)."""
    size = _table_size(ca + cb)
    mask = size - 1
    owners[:size] = 0
    ua = ub = common = 0
    for i in range(ca + cb):
        v = ga[i] if i < ca else gb[i - ca]
        bit = np.uint8(1) if i < ca else np.uint8(2)
        slot = np.int64(v & _U64(mask))
        while owners[slot] != 0 and values[slot] != v:
            slot = (slot + 1) & mask
        had = owners[slot]
        if had & bit:
            continue
        if had == 0:
            values[slot] = v
        owners[slot] = had | bit
        if i < ca:
            ua += 1
        else:
            ub += 1
            if had:
                common += 1
    return ua, ub, common


@_jit
def _pair_jaccards(
    buf_a: Any,
    offs_a: Any,
    astral_a: Any,
    classes_a: Any,
    buf_b: Any,
    offs_b: Any,
    astral_b: Any,
    classes_b: Any,
    tokens: Any,
    out: Any,
) -> None:
    n = offs_a.size - 1
    widest = max(_widest(offs_a), _widest(offs_b))
    units = np.empty(widest + 1, dtype=np.uint64)
    ga = np.empty(widest + 1, dtype=np.uint64)
    gb = np.empty(widest + 1, dtype=np.uint64)
    # Sized by the shingles a pair has, not its bytes, and grown as needed: a document has
    # several bytes a word shingle.
    values = np.empty(1024, dtype=np.uint64)
    owners = np.empty(1024, dtype=np.uint8)
    for d in range(n):
        ca = _doc_shingles(buf_a, offs_a[d], offs_a[d + 1], astral_a, classes_a, tokens, units, ga)
        cb = _doc_shingles(buf_b, offs_b[d], offs_b[d + 1], astral_b, classes_b, tokens, units, gb)
        need = _table_size(ca + cb)
        if need > values.size:
            values = np.empty(need, dtype=np.uint64)
            owners = np.empty(need, dtype=np.uint8)
        ua, ub, inter = _overlap(ga, ca, gb, cb, values, owners)
        if ua == 0 or ub == 0:
            out[d] = 0.0
            continue
        out[d] = inter / (ua + ub - inter)


def tokenizer(
    bmp: np.ndarray,
    mode: str,
    ngram: int,
    char_ngram: int,
    ngram_k: np.ndarray,
    tok_k: np.uint64,
    salt: np.uint64,
) -> tuple[Any, ...]:
    """What the kernels tokenize by, as one argument: the BMP class table, the mode (word,
    char or auto), the n of word and character n-grams, and the constants of
    pipelines/minhash.py."""
    return (bmp, MODES[mode], int(ngram), int(char_ngram), ngram_k, _U64(tok_k), _U64(salt))


def signatures_into(
    buf: np.ndarray,
    offs: np.ndarray,
    tokens: tuple[Any, ...],
    keys: np.ndarray,
    sig: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Fill `sig` ((n, k) uint32, pre-filled with EMPTY) and `counts` ((n,) int32) for the
    lower-cased UTF-8 documents `buf[offs[i]:offs[i + 1]]` (`buf` padded with 8 zero bytes),
    tokenized by `tokens` (`tokenizer`)."""
    k = sig.shape[1]
    shift = 32 - (2 * k).bit_length()
    top = 65 - k.bit_length() if k > 1 and k & (k - 1) == 0 else -1
    astral_cp, astral_cls = _astral_cps(buf, offs)
    offs = offs.astype(np.int64, copy=False)
    _signatures(buf, offs, astral_cp, astral_cls, tokens, keys, k, shift, top, sig, counts)


def pair_jaccards_into(
    buf_a: np.ndarray,
    offs_a: np.ndarray,
    buf_b: np.ndarray,
    offs_b: np.ndarray,
    tokens: tuple[Any, ...],
    out: np.ndarray,
) -> None:
    """Fill `out` ((n,) float64) with the exact Jaccard similarity of the shingle sets of the
    lower-cased UTF-8 documents `buf_a[offs_a[i]:offs_a[i + 1]]` and
    `buf_b[offs_b[i]:offs_b[i + 1]]` (each buffer padded with 8 zero bytes), tokenized by
    `tokens` (`tokenizer`); 0.0 where either document has no shingle."""
    astral_a, classes_a = _astral_cps(buf_a, offs_a)
    astral_b, classes_b = _astral_cps(buf_b, offs_b)
    a = (buf_a, offs_a.astype(np.int64, copy=False), astral_a, classes_a)
    b = (buf_b, offs_b.astype(np.int64, copy=False), astral_b, classes_b)
    _pair_jaccards(*a, *b, tokens, out)


def _astral_cps(buf: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The batch's code points above U+FFFF, sorted, with their class bits (classified here,
    once each, as the numpy path does; a code point not in the table gets class 0)."""
    body = buf[: int(offs[-1])]
    lead = np.flatnonzero(body >= 0xF0)
    if lead.size == 0:
        return np.zeros(1, dtype=np.uint32), np.zeros(1, dtype=np.uint8)
    b = [body[lead + j].astype(np.uint32) & (0x07 if j == 0 else 0x3F) for j in range(4)]
    cps = np.unique((b[0] << 18) | (b[1] << 12) | (b[2] << 6) | b[3])
    import unicodedata

    word = np.fromiter(
        (c == 0x5F or unicodedata.category(chr(c))[0] in "LNM" for c in cps.tolist()),
        dtype=bool,
        count=cps.size,
    )
    cjk = (cps >= 0x20000) & (cps <= 0x3FFFF)
    # A sentinel above every code point keeps searchsorted inside the arrays.
    cps = np.append(cps, np.uint32(0xFFFFFFFF))
    cls = np.append((word * _C_WORD | cjk * _C_CJK).astype(np.uint8), np.uint8(0))
    return cps, cls
