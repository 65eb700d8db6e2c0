"""Compiled text statistics behind the heuristic quality filters (pipelines/filters/).

The Gopher, C4 and FineWeb filters are defined over words, lines, paragraphs and n-grams of a
document. Computing them per document in Python costs more than the whole MinHash pass, so a
batch is decoded once into code points and every statistic is computed in numba-compiled loops
over it, one document at a time, with no Python object per word.

**Words.** The reference implementations (datatrove's, which FineWeb published with) count the
tokens of spaCy's English tokenizer. `_tokenize` follows that tokenizer's rules closely enough
to agree on the filters' decisions (bench/filters.py measures the agreement on real text):

- text is split on whitespace; leading punctuation (quotes, brackets, `#`, `*`, ...) and
  trailing punctuation (`,` `;` `:` `!` `?` `)` quotes, dashes, `...`) become tokens of their own;
- a final `.` is split after a lower-case letter, a digit, punctuation or two capitals (so
  `end.` splits but `Mr.`, `U.S.` and `A.` do not); `'s`, `n't`, `'m`, `'re`, `'ve`, `'ll`,
  `'d` are split off words;
- inside a word, hyphens and dashes between letters, commas between letters, `:<>=/` before a
  letter, `...`, and `.` between a lower-case and a capital letter are split out; URLs
  (`scheme://...`, `www....`) stay one token;
- **CJK**: every Han, Hiragana or Katakana character is one word (these scripts write no spaces
  between words, and a character carries about as much as a short English word). A Chinese
  page therefore has as many "words" as characters, never "too few words" for lack of spaces;
  the `zh-web` preset sets the length bounds that this counting implies.

A token is a *symbol* when every character of it is in the reference's punctuation list
(`_SYMBOLS`: ASCII and CJK punctuation, a few symbols, control characters, sentence
terminals); Gopher's word counts leave those out.

**Lines** follow the reference code exactly: Gopher's bullet and ellipsis lines use Python's
`str.splitlines()` boundaries; its repetition filter splits lines on runs of `\\n` and
paragraphs on `\\n\\n+` after stripping the text; FineWeb splits on `\\n` and ignores blank
lines; C4 uses `splitlines()` and strips each line. Lengths are in code points, as Python's
`len`.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

from corpusclean.pipelines import compiled, tablecache
from corpusclean.pipelines.minhash import _as_strings, _flat_buffer

_jit = compiled.jit


# Character classes, one bit each in a table over every code point.
SPACE, ALPHA, PUNCT, TERM, WORD, CJK, UPPER, LOWER, SYMBOL = 1, 2, 4, 8, 16, 32, 64, 128, 256

# The characters that do not make a token a word for Gopher's word counts: the reference
# implementation's punctuation list (ASCII and CJK punctuation, a few symbols, the control
# characters other than tab and newline) and every sentence terminal. Unicode's categories
# would also take `©`, `•` or `→`, which the reference counts as words.
_SYMBOLS = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
)
_SYMBOL_CONTROLS = (*range(0, 9), 11, 12, *range(13, 32), *range(127, 160))

# Sentence terminals (the Unicode Sentence_Terminal property, which FineWeb's line-punctuation
# rule uses): a line "ends in punctuation" when its last character is one of these.
_TERMINALS = (
    "!.?\u0589\u061d-\u061f\u06d4\u0700-\u0702\u07f9\u0837\u0839\u083d\u083e\u0964\u0965"
    "\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4-\u17d6\u17d9\u17da\u1803\u1809\u1944"
    "\u1945\u1aa8-\u1aab"
    "\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c\u203d\u2047-\u2049"
    "\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877\ua8ce\ua8cf"
    "\ua92f\ua9c8\ua9c9\uaa5d-\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e\uff1f"
    "\uff61\U00010a56\U00010a57\U00010f55-\U00010f59\U00010f86-\U00010f89\U00011047\U00011048"
    "\U000110be-\U000110c1\U00011141-\U00011143\U000111c5\U000111c6\U000111cd\U000111de"
    "\U000111df\U00011238\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c"
    "\U000115c2\U000115c3\U000115c9-\U000115d7\U00011641\U00011642\U0001173c-\U0001173e"
    "\U00011944\U00011946\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42"
    "\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5\U00016b37"
    "\U00016b38\U00016b44\U00016e98\U0001bc9f\U0001da88"
)
# Han, Hiragana, Katakana (and their half-width forms and extensions): one word a character.
_CJK_RANGES = (
    (0x3040, 0x30FF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x3FFFF),
)


def _expand(spec: str) -> list[int]:
    """Code points of a character-class string with `a-b` ranges."""
    out: list[int] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.extend(range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.append(ord(spec[i]))
            i += 1
    return out


def _build_char_table() -> dict[str, np.ndarray]:
    """The class bits of every code point (uint16, 0x110000 entries), built from Python's
    Unicode database (a Python loop over every code point: built once per machine,
    pipelines/tablecache.py)."""
    n = 0x110000
    chars = [chr(c) for c in range(n)]
    cats = [unicodedata.category(ch) for ch in chars]
    table = np.zeros(n, dtype=np.uint16)
    flags = np.fromiter(
        (
            (SPACE if ch.isspace() else 0)
            | (ALPHA if ch.isalpha() else 0)
            | (PUNCT if cat[0] in "PS" or cat == "Cc" else 0)
            | (WORD if cat[0] in "LNM" or ch == "_" else 0)
            | (UPPER if cat == "Lu" else 0)
            | (LOWER if cat == "Ll" else 0)
            for ch, cat in zip(chars, cats, strict=True)
        ),
        dtype=np.uint16,
        count=n,
    )
    table[:] = flags
    # Whitespace controls (tab, newline...) are space, not symbols.
    table[(table & SPACE) != 0] &= ~np.uint16(PUNCT)
    table[np.array(_expand(_TERMINALS))] |= TERM
    table[np.array([ord(c) for c in _SYMBOLS])] |= SYMBOL
    table[np.array(_SYMBOL_CONTROLS)] |= SYMBOL
    table[(table & TERM) != 0] |= SYMBOL
    for lo, hi in _CJK_RANGES:
        table[lo : hi + 1] |= CJK
    return {"table": table}


@cache
def char_table() -> np.ndarray:
    """The class bits of every code point (2.2 MB, read-only).

    Built once per machine and memory-mapped by every later process (pipelines/tablecache.py);
    its key holds everything the bits depend on: the Unicode version and the classes' inputs.
    """
    key = tablecache.digest(
        unicodedata.unidata_version,
        repr((SPACE, ALPHA, PUNCT, TERM, WORD, CJK, UPPER, LOWER, SYMBOL)),
        _SYMBOLS,
        repr(_SYMBOL_CONTROLS),
        _TERMINALS,
        repr(_CJK_RANGES),
        tablecache.code(_build_char_table),
        tablecache.code(_expand),
    )
    return tablecache.load("char-table", key, _build_char_table)["table"]


# ---------------------------------------------------------------------------------------------
# Decoding


@_jit
def _cont(buf: Any, p: int, end: int) -> bool:
    """A UTF-8 continuation byte at `p`, inside the document."""
    return p < end and (buf[p] & 0xC0) == 0x80


@_jit
def _decode(buf: Any, offs: Any) -> Any:
    """Code points (uint32) of every document of a flat UTF-8 buffer, and their offsets.

    Bytes that are not well-formed UTF-8 (Spark does not check its strings) become U+FFFD,
    one per bad byte, as Python's `errors="replace"` roughly does: no code point ever lies
    outside Unicode, so every table lookup stays in bounds.
    """
    n = offs.size - 1
    cps = np.empty(max(offs[n], 1), dtype=np.uint32)
    cpo = np.empty(n + 1, dtype=np.int64)
    k = 0
    for d in range(n):
        cpo[d] = k
        p = offs[d]
        end = offs[d + 1]
        while p < end:
            b0 = np.uint32(buf[p])
            cp = np.uint32(0xFFFD)
            step = 1
            if b0 < 0x80:
                cp = b0
            elif 0xC2 <= b0 < 0xE0:
                if _cont(buf, p + 1, end):
                    cp = ((b0 & 0x1F) << 6) | (np.uint32(buf[p + 1]) & 0x3F)
                    step = 2
            elif 0xE0 <= b0 < 0xF0:
                if _cont(buf, p + 1, end) and _cont(buf, p + 2, end):
                    c = (
                        ((b0 & 0x0F) << 12)
                        | ((np.uint32(buf[p + 1]) & 0x3F) << 6)
                        | (np.uint32(buf[p + 2]) & 0x3F)
                    )
                    if c >= 0x800 and not (0xD800 <= c <= 0xDFFF):
                        cp = c
                        step = 3
            elif 0xF0 <= b0 < 0xF5:
                if _cont(buf, p + 1, end) and _cont(buf, p + 2, end) and _cont(buf, p + 3, end):
                    c = (
                        ((b0 & 0x07) << 18)
                        | ((np.uint32(buf[p + 1]) & 0x3F) << 12)
                        | ((np.uint32(buf[p + 2]) & 0x3F) << 6)
                        | (np.uint32(buf[p + 3]) & 0x3F)
                    )
                    if 0x10000 <= c <= 0x10FFFF:
                        cp = c
                        step = 4
            cps[k] = cp
            p += step
            k += 1
    cpo[n] = k
    return cps, cpo


# ---------------------------------------------------------------------------------------------
# Tokens

_B = np.uint64(0x100000001B3)
_M64 = (1 << 64) - 1


def _py_span_hash(word: str) -> int:
    """`_span_hash` in Python, for constants built at import."""
    h = 0
    for ch in word:
        h = (h * int(_B) + ord(ch) + 1) & _M64
    h ^= len(word)
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    h ^= h >> 33
    return h


# Abbreviations spaCy's English exceptions keep whole with their period (`Mr.` is one token).
_ABBREVIATIONS = np.sort(
    np.array(
        [
            _py_span_hash(w + ".")
            for w in [
                "Mr",
                "Mrs",
                "Ms",
                "Dr",
                "St",
                "Jr",
                "Sr",
                "Prof",
                "Rev",
                "Gen",
                "Gov",
                "Sen",
                "Rep",
                "Mt",
                "Co",
                "Corp",
                "Inc",
                "Ltd",
                "Bros",
                "vs",
                "etc",
                "Jan",
                "Feb",
                "Mar",
                "Apr",
                "Jun",
                "Jul",
                "Aug",
                "Sep",
                "Sept",
                "Oct",
                "Nov",
                "Dec",
                "Ala",
                "Ariz",
                "Ark",
                "Calif",
                "Colo",
                "Conn",
                "Del",
                "Fla",
                "Ga",
                "Ill",
                "Ind",
                "Kan",
                "Ky",
                "La",
                "Md",
                "Mass",
                "Mich",
                "Minn",
                "Miss",
                "Mo",
                "Mont",
                "Neb",
                "Nev",
                "Okla",
                "Ore",
                "Pa",
                "Tenn",
                "Va",
                "Wash",
                "Wis",
                "Wyo",
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h",
                "i",
                "j",
                "k",
                "l",
                "m",
                "n",
                "o",
                "p",
                "q",
                "r",
                "s",
                "t",
                "u",
                "v",
                "w",
                "x",
                "y",
                "z",
            ]
        ],
        dtype=np.uint64,
    )
)


@_jit
def _apos(c: Any) -> bool:
    return c == 0x27 or c == 0x2019


@_jit
def _lower_ascii(c: Any) -> Any:
    if 0x41 <= c <= 0x5A:
        return c + 32
    return c


@_jit
def _starts_url(cps: Any, a: int, b: int) -> bool:
    """`scheme://` within the first 10 characters, or `www.`."""
    if b - a >= 4:
        if (
            _lower_ascii(cps[a]) == 0x77
            and _lower_ascii(cps[a + 1]) == 0x77
            and _lower_ascii(cps[a + 2]) == 0x77
            and cps[a + 3] == 0x2E
        ):
            return True
    lim = min(b - 2, a + 10)
    for i in range(a + 1, lim):
        if cps[i] == 0x3A and cps[i + 1] == 0x2F and cps[i + 2] == 0x2F:
            return True
    return False


@_jit
def _is_prefix(c: Any, nxt: Any, fl: Any) -> bool:
    """A leading character that spaCy's English prefixes split off."""
    if not (fl & PUNCT):
        return False
    # Hyphens, slashes, @, periods and underscores stay attached at the start of a word;
    # `+` only when no digit follows (a sign).
    if c == 0x2D or c == 0x2F or c == 0x40 or c == 0x2E or c == 0x5F:
        return False
    return not (c == 0x2B and 0x30 <= nxt <= 0x39)


@_jit
def _contraction(cps: Any, a: int, b: int, table: Any) -> int:
    """Length of a contraction suffix (`'s`, `'m`, `'d`, `'re`, `'ve`, `'ll`, `n't`) at the
    end of [a, b) after a letter, else 0."""
    n = b - a
    last = _lower_ascii(cps[b - 1])
    if n >= 3 and _apos(cps[b - 2]) and table[cps[b - 3]] & ALPHA:
        if last == 0x73 or last == 0x6D or last == 0x64:  # s m d
            return 2
    if n >= 4 and table[cps[b - 4]] & ALPHA:
        c1 = _lower_ascii(cps[b - 2])
        if _apos(cps[b - 3]) and (
            (c1 == 0x72 and last == 0x65)
            or (c1 == 0x76 and last == 0x65)
            or (c1 == 0x6C and last == 0x6C)
        ):  # re ve ll
            return 3
        if _lower_ascii(cps[b - 3]) == 0x6E and _apos(cps[b - 2]) and last == 0x74:  # n't
            return 3
    return 0


@_jit
def _emit(ts: Any, te: Any, nt: int, a: int, b: int) -> int:
    ts[nt] = a
    te[nt] = b
    return nt + 1


@_jit
def _infix_split(cps: Any, a: int, b: int, table: Any, ts: Any, te: Any, nt: int) -> int:
    """Emit the core [a, b) of a chunk, split at spaCy's English infixes."""
    if _starts_url(cps, a, b):
        return _emit(ts, te, nt, a, b)
    start = a
    i = a + 1
    while i < b - 1:
        c = cps[i]
        prev = table[cps[i - 1]]
        nxt = table[cps[i + 1]]
        cut = 0
        if c == 0x2E and cps[i + 1] == 0x2E:
            # An ellipsis inside a word: `a...b`.
            j = i
            while j < b and cps[j] == 0x2E:
                j += 1
            cut = j - i
        if cut == 0 and (c == 0x2D or c == 0x2013 or c == 0x2014) and prev & WORD:
            # Hyphens and dashes (a run of them is one token) between a letter or digit and a
            # letter.
            j = i
            while j < b - 1 and (cps[j] == 0x2D or cps[j] == 0x2013 or cps[j] == 0x2014):
                j += 1
            if table[cps[j]] & ALPHA:
                cut = j - i
        if cut == 0 and c == 0x7E and prev & WORD and nxt & ALPHA:
            cut = 1
        if cut == 0 and c == 0x2C and prev & ALPHA and nxt & ALPHA:
            cut = 1
        if cut == 0 and (c == 0x3A or c == 0x3C or c == 0x3E or c == 0x3D or c == 0x2F):
            if prev & WORD and nxt & ALPHA:
                cut = 1
        if cut == 0 and c == 0x2E and prev & LOWER and nxt & UPPER:
            cut = 1
        if cut == 0 and (c == 0x2B or c == 0x2D or c == 0x2A or c == 0x5E):
            # An operator between digits.
            if prev & WORD and not prev & ALPHA and nxt & WORD and not nxt & ALPHA:
                cut = 1
        if cut:
            if i > start:
                nt = _emit(ts, te, nt, start, i)
            nt = _emit(ts, te, nt, i, i + cut)
            start = i + cut
            i = start + 1
        else:
            i += 1
    if b > start:
        nt = _emit(ts, te, nt, start, b)
    return nt


@_jit
def _chunk(
    cps: Any, a: int, b: int, table: Any, ts: Any, te: Any, nt: int, sa: Any, sb: Any
) -> int:
    """Emit the tokens of one whitespace-delimited chunk [a, b)."""
    # Leading punctuation, one token each (a run of periods is one token: an ellipsis).
    while a < b:
        c = cps[a]
        if c == 0x2E and a + 2 < b and cps[a + 1] == 0x2E and cps[a + 2] == 0x2E:
            j = a
            while j < b and cps[j] == 0x2E:
                j += 1
            nt = _emit(ts, te, nt, a, j)
            a = j
            continue
        nxt = cps[a + 1] if a + 1 < b else np.uint32(0)
        if a + 1 < b and _is_prefix(c, nxt, table[c]):
            nt = _emit(ts, te, nt, a, a + 1)
            a += 1
        else:
            break
    if a >= b:
        return nt
    # Trailing punctuation and contractions, collected right to left.
    ns = 0
    url = _starts_url(cps, a, b)
    while b - a > 1:
        c = cps[b - 1]
        fl = table[c]
        k = 0 if url else _contraction(cps, a, b, table)
        if k:
            sa[ns] = b - k
            sb[ns] = b
            ns += 1
            b -= k
            continue
        if c == 0x2E:
            j = b - 1
            while j > a and cps[j - 1] == 0x2E:
                j -= 1
            if b - j >= 2:  # `..` or `...` at the end: one token
                if j == a:
                    break
                sa[ns] = j
                sb[ns] = b
                ns += 1
                b = j
                continue
            if b - a <= 6:
                h = _span_hash(cps, a, b)
                k = np.searchsorted(_ABBREVIATIONS, h)
                if k < _ABBREVIATIONS.size and _ABBREVIATIONS[k] == h:
                    break
            p = table[cps[b - 2]]
            two_caps = b - a >= 3 and (p & UPPER) and (table[cps[b - 3]] & UPPER)
            if (p & LOWER) or (p & WORD and not p & ALPHA) or (p & PUNCT) or two_caps:
                sa[ns] = b - 1
                sb[ns] = b
                ns += 1
                b -= 1
                continue
            break
        if (fl & PUNCT) and c != 0x2D and c != 0x2F and c != 0x40 and c != 0x5F:
            if c == 0x2B and not (table[cps[b - 2]] & WORD):
                break
            sa[ns] = b - 1
            sb[ns] = b
            ns += 1
            b -= 1
            continue
        break
    nt = _infix_split(cps, a, b, table, ts, te, nt)
    for s in range(ns - 1, -1, -1):
        nt = _emit(ts, te, nt, sa[s], sb[s])
    return nt


@_jit
def _tokenize(cps: Any, lo: int, hi: int, table: Any, ts: Any, te: Any) -> int:
    """Tokens of cps[lo:hi] as spans into `ts`/`te` (absolute positions); returns their count.

    A CJK character is always a token of its own.
    """
    nt = 0
    # Scratch for a chunk's trailing tokens, allocated once per document.
    sa = np.empty(hi - lo + 1, dtype=np.int64)
    sb = np.empty(hi - lo + 1, dtype=np.int64)
    i = lo
    while i < hi:
        while i < hi and table[cps[i]] & SPACE:
            i += 1
        if i >= hi:
            break
        j = i
        seen = 0
        while j < hi:
            f = table[cps[j]]
            if f & SPACE:
                break
            seen |= f
            j += 1
        if not seen & (PUNCT | CJK):
            # Most chunks are plain words: nothing to split.
            nt = _emit(ts, te, nt, i, j)
        elif not seen & CJK:
            nt = _chunk(cps, i, j, table, ts, te, nt, sa, sb)
        else:
            # CJK characters split a chunk: each is a word, the runs between are chunks.
            a = i
            for k in range(i, j):
                if table[cps[k]] & CJK:
                    if k > a:
                        nt = _chunk(cps, a, k, table, ts, te, nt, sa, sb)
                    nt = _emit(ts, te, nt, k, k + 1)
                    a = k + 1
            if j > a:
                nt = _chunk(cps, a, j, table, ts, te, nt, sa, sb)
        i = j
    return nt


@_jit
def tokenize_batch(cps: Any, cpo: Any, table: Any) -> Any:
    """The tokens of every document: spans (`ts`, `te`, absolute code point positions) and
    per-document offsets into them (`toff`). Tokens never cross whitespace, so the tokens of a
    line are the document's tokens inside it."""
    n = cpo.size - 1
    # Prose has a token every ~5 characters: room for one every 3, grown when a document
    # could overflow it (a document never has more tokens than characters).
    cap = cpo[n] // 3 + 64
    ts = np.empty(cap, dtype=np.int64)
    te = np.empty(cap, dtype=np.int64)
    toff = np.zeros(n + 1, dtype=np.int64)
    k = 0
    for d in range(n):
        need = k + cpo[d + 1] - cpo[d] + 1
        if need > cap:
            cap = max(2 * cap, need)
            grown_s = np.empty(cap, dtype=np.int64)
            grown_e = np.empty(cap, dtype=np.int64)
            grown_s[:k] = ts[:k]
            grown_e[:k] = te[:k]
            ts, te = grown_s, grown_e
        k += _tokenize(cps, cpo[d], cpo[d + 1], table, ts[k:], te[k:])
        toff[d + 1] = k
    return ts[:k], te[:k], toff


# ---------------------------------------------------------------------------------------------
# Hashing (polynomial, mod 2**64): a string's hash from its tokens' hashes, for n-grams


@_jit
def _mix(h: Any) -> Any:
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@_jit
def _span_hash(cps: Any, a: int, b: int) -> Any:
    h = np.uint64(0)
    for i in range(a, b):
        h = h * _B + np.uint64(cps[i]) + np.uint64(1)
    return _mix(h ^ np.uint64(b - a))


@_jit
def _slots(n: int) -> int:
    cap = 16
    while cap < 2 * n + 2:
        cap *= 2
    return cap


@_jit
def _dup_stats(keys: Any, lens: Any, n: int) -> Any:
    """(elements seen before, their characters) of `n` hashed elements (find_duplicates)."""
    cap = _slots(n)
    table = np.zeros(cap, dtype=np.uint64)
    mask = np.uint64(cap - 1)
    dups = 0
    chars = 0
    for i in range(n):
        k = keys[i] | np.uint64(1)
        s = k & mask
        while True:
            v = table[s]
            if v == 0:
                table[s] = k
                break
            if v == k:
                dups += 1
                chars += lens[i]
                break
            s = (s + np.uint64(1)) & mask
    return dups, chars


@_jit
def _top_count_len(keys: Any, lens: Any, n: int) -> int:
    """Characters x count of the most frequent element, the first seen on ties (Counter's
    most_common(1))."""
    if n == 0:
        return 0
    cap = _slots(n)
    table = np.zeros(cap, dtype=np.uint64)
    counts = np.zeros(cap, dtype=np.int64)
    first = np.zeros(cap, dtype=np.int64)
    mask = np.uint64(cap - 1)
    best = 0
    best_first = 0
    best_len = 0
    for i in range(n):
        k = keys[i] | np.uint64(1)
        s = k & mask
        while True:
            v = table[s]
            if v == 0:
                table[s] = k
                counts[s] = 1
                first[s] = i
                break
            if v == k:
                counts[s] += 1
                break
            s = (s + np.uint64(1)) & mask
        c = counts[s]
        f = first[s]
        if c > best or (c == best and f < best_first):
            best = c
            best_first = f
            best_len = lens[first[s]]
    return best * best_len


# ---------------------------------------------------------------------------------------------
# Per-document statistics


@_jit
def _token_flags(cps: Any, ts: Any, te: Any, nt: int, table: Any) -> Any:
    """Per token: has a character that is not a symbol (a word for Gopher's counts), has a
    letter."""
    nonsym = np.zeros(nt, dtype=np.bool_)
    alpha = np.zeros(nt, dtype=np.bool_)
    for t in range(nt):
        for i in range(ts[t], te[t]):
            f = table[cps[i]]
            if not f & SYMBOL:
                nonsym[t] = True
            if f & ALPHA:
                alpha[t] = True
    return nonsym, alpha


@_jit
def _is_linebreak(c: Any) -> bool:
    # str.splitlines() boundaries.
    return (
        (0x0A <= c <= 0x0D)
        or c == 0x1C
        or c == 0x1D
        or c == 0x1E
        or c == 0x85
        or c == 0x2028
        or c == 0x2029
    )


@_jit
def _gopher_quality_doc(
    cps: Any,
    lo: int,
    hi: int,
    ts: Any,
    te: Any,
    table: Any,
    stop_hashes: Any,
    stop_len: int,
    out: Any,
    d: int,
) -> None:
    nt = ts.size
    nonsym, alpha = _token_flags(cps, ts, te, nt, table)
    n_ns = 0
    len_ns = 0
    n_alpha = 0
    found = np.zeros(stop_hashes.size, dtype=np.bool_)
    for t in range(nt):
        if nonsym[t]:
            n_ns += 1
            len_ns += te[t] - ts[t]
        if alpha[t]:
            n_alpha += 1
        if stop_hashes.size and te[t] - ts[t] <= stop_len:
            h = _span_hash(cps, ts[t], te[t])
            for s in range(stop_hashes.size):
                if stop_hashes[s] == h:
                    found[s] = True
    hashes = 0
    ellipses = 0
    i = lo
    while i < hi:
        c = cps[i]
        if c == 0x23:
            hashes += 1
        elif c == 0x2026:
            ellipses += 1
        elif c == 0x2E and i + 2 < hi and cps[i + 1] == 0x2E and cps[i + 2] == 0x2E:
            ellipses += 1
            i += 3
            continue
        i += 1
    # Lines, as str.splitlines(): a trailing break adds no empty line; \r\n is one break.
    lines = 0
    bullets = 0
    end_ellipsis = 0
    i = lo
    while i < hi:
        j = i
        while j < hi and not _is_linebreak(cps[j]):
            j += 1
        lines += 1
        a = i
        while a < j and table[cps[a]] & SPACE:
            a += 1
        if a < j and (cps[a] == 0x2022 or cps[a] == 0x2D):
            bullets += 1
        b = j
        while b > i and table[cps[b - 1]] & SPACE:
            b -= 1
        if b > i and (
            cps[b - 1] == 0x2026
            or (b - i >= 3 and cps[b - 1] == 0x2E and cps[b - 2] == 0x2E and cps[b - 3] == 0x2E)
        ):
            end_ellipsis += 1
        if j < hi and cps[j] == 0x0D and j + 1 < hi and cps[j + 1] == 0x0A:
            j += 1
        i = j + 1
    n_stop = 0
    for s in range(found.size):
        if found[s]:
            n_stop += 1
    words = max(nt, 1)
    out[d, 0] = n_ns
    out[d, 1] = len_ns / n_ns if n_ns else np.nan
    out[d, 2] = hashes / words
    out[d, 3] = ellipses / words
    out[d, 4] = bullets / lines if lines else 0.0
    out[d, 5] = end_ellipsis / lines if lines else 0.0
    out[d, 6] = n_alpha / words
    out[d, 7] = n_stop


@_jit
def gopher_quality_batch(
    cps: Any, cpo: Any, ts: Any, te: Any, toff: Any, table: Any, stop_hashes: Any, stop_len: int
) -> Any:
    """Per document: non-symbol words, their mean length, `#` per word, ellipses per word,
    bullet-line and ellipsis-line fractions, fraction of words with a letter, distinct stop
    words found."""
    n = cpo.size - 1
    out = np.zeros((n, 8), dtype=np.float64)
    for d in range(n):
        t0, t1 = toff[d], toff[d + 1]
        _gopher_quality_doc(
            cps, cpo[d], cpo[d + 1], ts[t0:t1], te[t0:t1], table, stop_hashes, stop_len, out, d
        )
    return out


@_jit
def _split_runs(cps: Any, lo: int, hi: int, min_run: int, starts: Any, ends: Any) -> int:
    """Split [lo, hi) on runs of at least `min_run` newlines (re.split(r"\\n{k,}"))."""
    n = 0
    a = lo
    i = lo
    while i < hi:
        if cps[i] == 0x0A:
            j = i
            while j < hi and cps[j] == 0x0A:
                j += 1
            if j - i >= min_run:
                starts[n] = a
                ends[n] = i
                n += 1
                a = j
            i = j
        else:
            i += 1
    starts[n] = a
    ends[n] = hi
    return n + 1


@_jit
def _dup_fracs(cps: Any, starts: Any, ends: Any, n: int) -> Any:
    keys = np.empty(n, dtype=np.uint64)
    lens = np.empty(n, dtype=np.int64)
    for k in range(n):
        keys[k] = _span_hash(cps, starts[k], ends[k])
        lens[k] = ends[k] - starts[k]
    return _dup_stats(keys, lens, n)


@_jit
def _dup_fracs_prefix(
    pre: Any, lo: int, pw: Any, starts: Any, ends: Any, n: int, keys: Any, lens: Any
) -> Any:
    """`_dup_fracs` from the prefix hashes `pre` of the text from `lo` (`pre[j]`: the
    polynomial of its first j characters): each span's polynomial is `pre[e] - pre[s] *
    B**(e-s)`, equal mod 2**64 to the one `_span_hash` computes character by character, so
    the keys are `_span_hash`'s own, without a pass over the characters per split."""
    for k in range(n):
        a = starts[k] - lo
        b = ends[k] - lo
        keys[k] = _mix((pre[b] - pre[a] * pw[b - a]) ^ np.uint64(b - a))
        lens[k] = b - a
    return _dup_stats(keys, lens, n)


@_jit
def _gopher_repetition_doc(
    cps: Any,
    lo: int,
    hi: int,
    ts: Any,
    te: Any,
    table: Any,
    top_n: Any,
    dup_n: Any,
    out: Any,
    d: int,
    pw: Any,
    scratch: Any,
) -> None:
    if hi == lo:
        # An empty text has no fractions: NaN (null), which the keep rule calls empty.
        out[d, :] = np.nan
        return
    length = hi - lo
    # The batch's scratch, sized for its longest document (no allocation per document).
    starts = scratch[0]
    ends = scratch[1]
    pre = scratch[2].view(np.uint64)
    flat = scratch[3].view(np.uint64)
    keys = scratch[4].view(np.uint64)
    lens = scratch[5]
    # One pass of prefix hashes over the text serves the paragraphs and the lines.
    h0 = np.uint64(0)
    pre[0] = h0
    for i in range(length):
        h0 = h0 * _B + np.uint64(cps[lo + i]) + np.uint64(1)
        pre[i + 1] = h0
    # Paragraphs: the stripped text split on two or more newlines.
    a = lo
    b = hi
    while a < b and table[cps[a]] & SPACE:
        a += 1
    while b > a and table[cps[b - 1]] & SPACE:
        b -= 1
    n = _split_runs(cps, a, b, 2, starts, ends)
    dups, chars = _dup_fracs_prefix(pre, lo, pw, starts, ends, n, keys, lens)
    out[d, 0] = dups / n
    out[d, 1] = chars / length
    # Lines: the text split on runs of newlines.
    n = _split_runs(cps, lo, hi, 1, starts, ends)
    dups, chars = _dup_fracs_prefix(pre, lo, pw, starts, ends, n, keys, lens)
    out[d, 2] = dups / n
    out[d, 3] = chars / length
    nt = ts.size
    # Prefix hashes of the tokens joined with "", at every character (`flat`; token t starts
    # at `flat[cc[t]]`), and joined with " " at every token (each followed by a space, which
    # maps n-grams one-to-one, so equal hashes still mean equal " ".join strings).
    flat[0] = np.uint64(0)
    spc = np.zeros(nt + 1, dtype=np.uint64)
    cc = np.zeros(nt + 1, dtype=np.int64)
    c = 0
    h1 = np.uint64(0)
    for t in range(nt):
        h2 = spc[t]
        for i in range(ts[t], te[t]):
            v = np.uint64(cps[i]) + np.uint64(1)
            h1 = h1 * _B + v
            h2 = h2 * _B + v
            c += 1
            flat[c] = h1
        spc[t + 1] = h2 * _B + np.uint64(33)
        cc[t + 1] = cc[t] + te[t] - ts[t]
    # `pw` (the batch's powers of B) reaches 2 * length + 1: a span of tokens with their
    # spaces is at most cc[nt] + nt + 1 <= 2 * length + 1 long (each token has a character).
    col = 4
    for q in range(top_n.size):
        m = top_n[q]
        cnt = nt - m + 1
        if cnt <= 0:
            out[d, col] = 0.0
            col += 1
            continue
        for i in range(cnt):
            chars_i = cc[i + m] - cc[i]
            span = chars_i + m  # characters and spaces, the trailing one included
            keys[i] = _mix(spc[i + m] - spc[i] * pw[span])
            lens[i] = chars_i + m - 1
        out[d, col] = _top_count_len(keys, lens, cnt) / length
        col += 1
    if dup_n.size == 0:
        return
    # Which positions a pass must look at. Two n-grams (n >= m0, the smallest n asked for)
    # joined with "" are equal only if their first `k` characters are, `k` being the fewest
    # characters any m0 tokens here span (an n-gram spans at least as many). A position
    # whose first `k` characters start no earlier token (`again`) cannot be a repeat, and one
    # whose first `k` characters start no later token (`later`) need not be remembered: each
    # pass hashes and looks up the others only, and ends as if it had remembered every n-gram
    # it visited. Prose, where no `k` characters from a token's start come twice, needs no
    # pass at all.
    m0 = dup_n.min()
    cnt0 = nt - m0 + 1
    again = np.zeros(max(cnt0, 1), dtype=np.bool_)
    later = np.zeros(max(cnt0, 1), dtype=np.bool_)
    any_again = False
    if cnt0 > 0:
        k = cc[m0] - cc[0]
        for i in range(1, cnt0):
            k = min(k, cc[i + m0] - cc[i])
        cap = _slots(cnt0)
        seen = np.zeros(cap, dtype=np.uint64)
        last = np.zeros(cap, dtype=np.int64)
        mask = np.uint64(cap - 1)
        for i in range(cnt0):
            key = _mix(flat[cc[i] + k] - flat[cc[i]] * pw[k]) | np.uint64(1)
            s = key & mask
            while True:
                v = seen[s]
                if v == 0:
                    seen[s] = key
                    last[s] = i
                    break
                if v == key:
                    again[i] = True
                    later[last[s]] = True
                    last[s] = i
                    any_again = True
                    break
                s = (s + np.uint64(1)) & mask
    for q in range(dup_n.size):
        m = dup_n[q]
        cnt = nt - m + 1
        repeated = 0
        if cnt > 0 and any_again:
            cap = _slots(cnt)
            seen = np.zeros(cap, dtype=np.uint64)
            mask = np.uint64(cap - 1)
            idx = 0
            while idx < cnt:
                if not (again[idx] or later[idx]):
                    idx += 1
                    continue
                chars_i = cc[idx + m] - cc[idx]
                gram = flat[cc[idx + m]] - flat[cc[idx]] * pw[chars_i]
                key = _mix(gram + np.uint64(chars_i))
                key |= np.uint64(1)
                s = key & mask
                hit = False
                while True:
                    v = seen[s]
                    if v == 0:
                        if later[idx]:
                            seen[s] = key
                        break
                    if v == key:
                        hit = True
                        break
                    s = (s + np.uint64(1)) & mask
                if hit:
                    repeated += chars_i
                    idx += m
                else:
                    idx += 1
        out[d, col] = repeated / length
        col += 1


@_jit
def gopher_repetition_batch(
    cps: Any, cpo: Any, ts: Any, te: Any, toff: Any, table: Any, top_n: Any, dup_n: Any
) -> Any:
    """Per document: duplicate paragraph fraction and character fraction, duplicate line
    fraction and character fraction, the top n-gram character fraction of each `top_n`, the
    duplicate n-gram character fraction of each `dup_n`."""
    n = cpo.size - 1
    out = np.zeros((n, 4 + top_n.size + dup_n.size), dtype=np.float64)
    widest = 0
    for d in range(n):
        widest = max(widest, cpo[d + 1] - cpo[d])
    # Powers of B for every span a document can hold (see `_gopher_repetition_doc`), once.
    pw = np.ones(2 * widest + 2, dtype=np.uint64)
    for i in range(1, pw.size):
        pw[i] = pw[i - 1] * _B
    # Per-document work arrays (split starts and ends, the two prefix hashes, n-gram keys and
    # lengths), each one a row of `widest + 2` int64 (the hash rows viewed as uint64).
    scratch = np.empty((6, widest + 2), dtype=np.int64)
    for d in range(n):
        t0, t1 = toff[d], toff[d + 1]
        _gopher_repetition_doc(
            cps,
            cpo[d],
            cpo[d + 1],
            ts[t0:t1],
            te[t0:t1],
            table,
            top_n,
            dup_n,
            out,
            d,
            pw,
            scratch,
        )
    return out


@_jit
def _find_patterns(cps: Any, a: int, b: int, pats: Any, off: Any, first: Any) -> int:
    """Bit i set when lower-case ASCII pattern i occurs in [a, b), case-insensitively; one
    pass, trying at each position only the patterns that start with its letter (`first`)."""
    found = 0
    for i in range(a, b):
        c = cps[i]
        if c >= 128:
            continue
        if 0x41 <= c <= 0x5A:
            c += 32
        cand = first[c] & ~found
        while cand:
            p = 0
            while not (cand >> p) & 1:
                p += 1
            cand &= ~(1 << p)
            lo, hi = off[p], off[p + 1]
            if i + (hi - lo) > b:
                continue
            ok = True
            for k in range(hi - lo):
                x = cps[i + k]
                if 0x41 <= x <= 0x5A:
                    x += 32
                if x != pats[lo + k]:
                    ok = False
                    break
            if ok:
                found |= 1 << p
    return found


_EDIT = np.array([ord(c) for c in "[edit]"], dtype=np.uint32)
_NEEDED = np.array([ord(c) for c in "[citation needed]"], dtype=np.uint32)


@_jit
def _ends_with(cps: Any, a: int, b: int, pat: Any) -> bool:
    m = pat.size
    if b - a < m:
        return False
    for k in range(m):
        if cps[b - m + k] != pat[k]:
            return False
    return True


@_jit
def _citation_end(cps: Any, a: int, b: int) -> int:
    """Where the line [a, b) ends once citations (`[12]`, `[]`, `[edit]`, `[citation
    needed]`) at its end are removed, as C4's citation pattern removes them (the line is not
    stripped again afterwards)."""
    while b - a >= 2 and cps[b - 1] == 0x5D:
        j = b - 2
        while j >= a and 0x30 <= cps[j] <= 0x39:
            j -= 1
        if j >= a and cps[j] == 0x5B:
            b = j
        elif _ends_with(cps, a, b, _EDIT):
            b -= _EDIT.size
        elif _ends_with(cps, a, b, _NEEDED):
            b -= _NEEDED.size
        else:
            break
    return b


@_jit
def _c4_doc(
    cps: Any,
    lo: int,
    hi: int,
    ts: Any,
    te: Any,
    table: Any,
    pats: Any,
    pat_off: Any,
    first: Any,
    flags: Any,
    min_words: int,
    max_word_len: int,
    out: Any,
    d: int,
) -> None:
    """Sentences on kept lines, and the first kept line with `lorem ipsum` / a curly bracket
    (1-based, 0 = none), and the fraction of lines kept."""
    nt = ts.size
    tp = 0  # the first document token not before the current line
    sentences = 0
    lorem = 0
    curly = 0
    lines = 0
    kept = 0
    i = lo
    while i < hi:
        j = i
        while j < hi and not _is_linebreak(cps[j]):
            j += 1
        lines += 1
        line_no = lines
        nxt = j + 1
        if j < hi and cps[j] == 0x0D and j + 1 < hi and cps[j + 1] == 0x0A:
            nxt = j + 2
        a = i
        b = j
        i = nxt
        while a < b and table[cps[a]] & SPACE:
            a += 1
        while b > a and table[cps[b - 1]] & SPACE:
            b -= 1
        # Words: whitespace-separated, and each CJK character one word.
        words = 0
        too_long = False
        k = a
        while k < b:
            while k < b and table[cps[k]] & SPACE:
                k += 1
            if k >= b:
                break
            run = 0
            while k < b and not table[cps[k]] & SPACE:
                if table[cps[k]] & CJK:
                    words += 1
                    run = 0
                else:
                    run += 1
                    if run == 1:
                        words += 1
                    # A "word" is a run without space or CJK character: a Chinese paragraph
                    # is many words, not one long one.
                    if max_word_len >= 0 and run > max_word_len:
                        too_long = True
                k += 1
        if too_long:
            continue
        if flags[0]:
            e = _citation_end(cps, a, b)
            c = cps[e - 1] if e > a else np.uint32(0)
            # C4's . ? ! " ' and every other sentence terminal (。！？ end Chinese lines).
            ends = c == 0x22 or c == 0x27 or (table[c] & TERM) != 0
            ell = e - a >= 3 and cps[e - 1] == 0x2E and cps[e - 2] == 0x2E and cps[e - 3] == 0x2E
            if not ends or ell:
                continue
        if words < min_words:
            continue
        found = _find_patterns(cps, a, b, pats, pat_off, first)
        if flags[1] and lorem == 0 and found & 1:
            lorem = line_no
        if flags[2] and found & 2:
            continue  # a line about javascript is dropped before the bracket check
        if flags[3] and curly == 0:
            for k in range(a, b):
                if cps[k] == 0x7B:
                    curly = line_no
                    break
        if flags[4] and found >> 2:
            continue
        kept += 1
        # Sentences: spaCy's sentencizer starts a sentence after a terminal token at the next
        # token that is not punctuation.
        while tp < nt and ts[tp] < a:
            tp += 1
        count = 0
        seen = False
        t = tp
        while t < nt and ts[t] < b:
            if count == 0:
                count = 1
            single_term = te[t] - ts[t] == 1 and table[cps[ts[t]]] & TERM
            is_p = True
            for q in range(ts[t], te[t]):
                if not table[cps[q]] & PUNCT:
                    is_p = False
                    break
            if seen and not is_p and not single_term:
                count += 1
                seen = False
            elif single_term:
                seen = True
            t += 1
        sentences += count
    out[d, 0] = sentences
    out[d, 1] = lorem
    out[d, 2] = curly
    out[d, 3] = kept / lines if lines else 0.0


@_jit
def c4_batch(
    cps: Any,
    cpo: Any,
    ts: Any,
    te: Any,
    toff: Any,
    table: Any,
    pats: Any,
    pat_off: Any,
    flags: Any,
    min_words: int,
    max_word_len: int,
) -> Any:
    """Per document: sentences on the lines C4 keeps, the first kept line (1-based) with
    `lorem ipsum` and with `{` (0 = none), and the fraction of lines kept. `pats` holds the
    lower-case ASCII patterns: lorem ipsum, javascript, then the policy phrases (at most 62);
    `flags` switches on the terminal-punctuation, lorem ipsum, javascript, curly bracket and
    policy rules."""
    first = np.zeros(128, dtype=np.int64)
    for p in range(pat_off.size - 1):
        first[pats[pat_off[p]]] |= 1 << p
    n = cpo.size - 1
    out = np.zeros((n, 4), dtype=np.float64)
    for d in range(n):
        t0, t1 = toff[d], toff[d + 1]
        _c4_doc(
            cps,
            cpo[d],
            cpo[d + 1],
            ts[t0:t1],
            te[t0:t1],
            table,
            pats,
            pat_off,
            first,
            flags,
            min_words,
            max_word_len,
            out,
            d,
        )
    return out


@_jit
def _fineweb_doc(
    cps: Any, lo: int, hi: int, nt: int, table: Any, short_len: int, out: Any, d: int
) -> None:
    nonblank = 0
    punct = 0
    short = 0
    newlines = 0
    starts = np.empty(hi - lo + 1, dtype=np.int64)
    ends = np.empty(hi - lo + 1, dtype=np.int64)
    i = lo
    while True:
        j = i
        while j < hi and cps[j] != 0x0A:
            j += 1
        blank = True
        for k in range(i, j):
            if not table[cps[k]] & SPACE:
                blank = False
                break
        if not blank:
            # A CRLF line's \r is its line break, not its last character (the reference
            # splits on \n only, which would reject every CRLF page for its punctuation).
            e = j - 1 if cps[j - 1] == 0x0D else j
            starts[nonblank] = i
            ends[nonblank] = e
            nonblank += 1
            if table[cps[e - 1]] & TERM:
                punct += 1
            if e - i <= short_len:
                short += 1
        if j >= hi:
            break
        newlines += 1
        i = j + 1
    if nonblank == 0:
        out[d, 0] = np.nan
        out[d, 1] = np.nan
        out[d, 2] = np.nan
        out[d, 3] = np.nan
        return
    _, chars = _dup_fracs(cps, starts, ends, nonblank)
    out[d, 0] = punct / nonblank
    out[d, 1] = short / nonblank
    body = hi - lo - newlines
    out[d, 2] = chars / body if body else 0.0
    out[d, 3] = newlines / nt if nt else np.inf


@_jit
def fineweb_batch(cps: Any, cpo: Any, toff: Any, table: Any, short_len: int) -> Any:
    """Per document (NaN for one with no non-blank line): fraction of non-blank lines ending in
    a sentence terminal, fraction at most `short_len` characters long, characters of repeated
    non-blank lines over the characters that are not newlines, newlines per word."""
    n = cpo.size - 1
    out = np.zeros((n, 4), dtype=np.float64)
    for d in range(n):
        _fineweb_doc(cps, cpo[d], cpo[d + 1], toff[d + 1] - toff[d], table, short_len, out, d)
    return out


# ---------------------------------------------------------------------------------------------
# Python side


class Decoded:
    """A batch of texts as code points: `cps[cpo[d]:cpo[d + 1]]` is document d (nulls are
    empty), and, once asked for, its tokens (`tokenize_batch`), computed once for every filter
    that reads this batch."""

    def __init__(self, cps: np.ndarray, cpo: np.ndarray, valid: np.ndarray) -> None:
        self.cps, self.cpo, self.valid = cps, cpo, valid
        self._tokens: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def tokens(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(`ts`, `te`, `toff`) of `tokenize_batch`."""
        if self._tokens is None:
            self._tokens = tokenize_batch(self.cps, self.cpo, char_table())
        return self._tokens


# The last batch decoded, with the array itself: holding it keeps its buffer alive, so no other
# array can come to have the same buffer address while the entry stands.
_last: tuple[pa.Array, tuple[int, int, int, int], Decoded] | None = None


def forget() -> None:
    """Drop the remembered batch (its code points and tokens), once its filters are done."""
    global _last
    _last = None


def _key(arr: pa.Array) -> tuple[int, int, int, int]:
    offsets, data = arr.buffers()[1:3]
    return (
        data.address if data is not None else 0,
        offsets.address if offsets is not None else 0,
        arr.offset,
        len(arr),
    )


def decode(texts: pa.Array | pa.ChunkedArray) -> Decoded:
    """The code points of a string array. The last batch decoded is remembered, so the filters
    that run one after another on the same rows decode them once."""
    global _last
    arr = _as_strings(texts)
    key = _key(arr)
    if _last is not None and _last[1] == key:
        return _last[2]
    buf, offs = _flat_buffer(arr)
    cps, cpo = _decode(buf, offs.astype(np.int64))
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = Decoded(cps, cpo, valid)
    _last = (arr, key, out)
    return out


def carry(before: pa.Array | pa.ChunkedArray, after: pa.Array, rows: np.ndarray) -> None:
    """Remember `after`, the rows `rows` of `before` taken out, as decoded, when `before` is
    the batch decoded last: its code points and tokens are gathered (a copy) rather than
    decoded and tokenized again (about a third of the filters' time on the rows that survive
    the first ones). Does nothing when `before` is not the one remembered."""
    global _last
    if _last is None or _last[1] != _key(_as_strings(before)):
        return
    old = _last[2]
    idx = np.ascontiguousarray(rows, dtype=np.int64)
    cps, cpo = _take_spans(old.cps, old.cpo, idx)
    out = Decoded(cps, cpo, old.valid[idx])
    if old._tokens is not None:
        ts, te, toff = old._tokens
        out._tokens = _take_tokens(ts, te, toff, old.cpo, cpo, idx)
    arr = _as_strings(after)
    _last = (arr, _key(arr), out)


@_jit
def _take_spans(cps: Any, cpo: Any, rows: Any) -> Any:
    """The code points of documents `rows`, in that order, and their offsets."""
    m = rows.size
    total = 0
    for r in range(m):
        total += cpo[rows[r] + 1] - cpo[rows[r]]
    out = np.empty(max(total, 1), dtype=np.uint32)
    offs = np.empty(m + 1, dtype=np.int64)
    k = 0
    for r in range(m):
        a = cpo[rows[r]]
        b = cpo[rows[r] + 1]
        offs[r] = k
        out[k : k + b - a] = cps[a:b]
        k += b - a
    offs[m] = k
    return out, offs


@_jit
def _take_tokens(ts: Any, te: Any, toff: Any, cpo: Any, new_cpo: Any, rows: Any) -> Any:
    """The token spans of documents `rows`, moved to their places in `_take_spans`'s code
    points (`new_cpo`), and their per-document offsets."""
    m = rows.size
    total = 0
    for r in range(m):
        total += toff[rows[r] + 1] - toff[rows[r]]
    nts = np.empty(total, dtype=np.int64)
    nte = np.empty(total, dtype=np.int64)
    noff = np.empty(m + 1, dtype=np.int64)
    k = 0
    for r in range(m):
        d = rows[r]
        shift = new_cpo[r] - cpo[d]
        noff[r] = k
        for t in range(toff[d], toff[d + 1]):
            nts[k] = ts[t] + shift
            nte[k] = te[t] + shift
            k += 1
    noff[m] = k
    return nts, nte, noff


def tokens(text: str) -> list[str]:
    """The words of `text` as the filters count them (for tests and for reading the rules)."""
    table = char_table()
    cps = np.array([ord(c) for c in text] or [0], dtype=np.uint32)
    n = len(text)
    ts = np.empty(n + 1, dtype=np.int64)
    te = np.empty(n + 1, dtype=np.int64)
    nt = _tokenize(cps, 0, n, table, ts, te)
    return [text[ts[i] : te[i]] for i in range(nt)]


def hash_strings(words: list[str]) -> np.ndarray:
    """`_span_hash` of each word (stop-word lists)."""
    out = np.empty(len(words), dtype=np.uint64)
    for i, w in enumerate(words):
        cps = np.array([ord(c) for c in w] or [0], dtype=np.uint32)
        out[i] = _span_hash(cps, 0, len(w))
    return out


def patterns(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Lower-case patterns as one code point array and offsets."""
    flat = [ord(c) for w in words for c in w.lower()]
    off = np.zeros(len(words) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(w) for w in words])
    return np.array(flat or [0], dtype=np.uint32), off
