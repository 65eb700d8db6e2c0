"""Language identification with the model bundled in `py3langid` (0.4.0), a whole batch at once.

py3langid classifies one document at a time in Python: it walks a byte DFA one byte per
interpreter step, counts the features the walk emits in a `Counter`, and scores them with a
numpy product (of ~1,000 float16 rows of 142 columns for 3,000 characters of prose). On such
documents the walk is about half of its time and the product a third. This module runs the
same model over a whole Arrow batch in one compiled kernel:

1. per document, the bytes py3langid's `_encode` would produce: the text lower-cased when
   `text.isupper()`, NFC-normalised, UTF-8. Pure-ASCII documents are used as they lie in the
   Arrow buffer (NFC cannot change ASCII; only an all-caps one is lower-cased), and of the
   others only those that `isupper()` or are not already NFC are rewritten, in Python;
2. the DFA walk over those bytes, counting each feature's visits;
3. `log1p(counts) @ nb_ptc[features] + nb_pc` (0 for every class when no feature fired, as
   py3langid does), divided by sqrt(bytes) (py3langid's temperature), softmax;
4. the script aliases folded into their first column (`sr` Cyrillic + Latin, `uz`), argmax.

The result is py3langid's `classify` with `norm_probs=True`: the same language, and the same
probability up to rounding. py3langid sums the scores in float32, which moves its probability
by up to ~1.5e-5 on short mixed texts (under 1e-5 on 99% of texts); the kernel sums in
float64 (float32 within blocks of 8 features) and lands within ~1e-6 of the exact value of
py3langid's formula. `tests/unit/test_langid.py` checks both on a few hundred texts. Nothing
is downloaded: the model is the `data/model.npz.xz` inside the installed package, unpacked
into the kernel's arrays once per machine and memory-mapped by every process that needs it
(pipelines/tablecache.py).

`max_bytes` classifies only the first N bytes of each document's UTF-8 (cut back to the start
of a character, before the lower-casing and NFC): a language is clear long before the end of
a long document, and the walk costs time per byte.

Compiled functions are cached on disk as in `pipelines/minhash_jit.py`; where numba is missing
the same steps run in Python (py3langid's speed, same results).
"""

from __future__ import annotations

import math
import threading
import unicodedata
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpusclean.pipelines import compiled, tablecache
from corpusclean.pipelines.arrowbuf import value_buffers

_jit = compiled.jit


# Per-document preparation (`_scan`): the bytes are used as stored, lower-cased (ASCII), or
# rewritten in Python (not ASCII: `isupper()` and NFC need the Unicode database).
_AS_IS, _ASCII_UPPER, _UNICODE = 0, 1, 2
# Features summed in float32 before their sum is added in float64 (`_decide`): 8 keeps the
# rounding near 1e-6 in a probability (16: 1.4e-6, 4: 3e-7). `_decide` sums a block's rows
# in one unrolled loop of eight: a change here must change that loop too.
_BLOCK = 8
# log1p(count) as float32, for the counts most features have in a document (`_decide`).
_LOG1P = np.array([math.log1p(c) for c in range(256)], dtype=np.float64).astype(np.float32)
# Documents longer than this (bytes) are walked alone, straight into the counts (`_classify_py`).
_LONG = 1 << 16


def available() -> bool:
    """Whether numba imports here (else `identify` runs the Python path)."""
    return compiled.available()


@dataclass(frozen=True)
class Model:
    """py3langid's model as flat numpy arrays the kernel reads.

    `classes`: the label of each column (a label may own two columns: `alias`);
    `nextmove`: the DFA's deduplicated 256-entry rows, flattened (uint32 next state);
    `rowbase`: per state, the offset of its row in `nextmove` (int64);
    `output`: per state, the feature it emits, -1 for none (int32);
    `ptc`: (features, classes) log-probabilities, float32 (stored as float16 in the model:
    widened once so the kernel's inner loop is a plain vectorised multiply-add);
    `pc`: per class log-prior (float64); `alias`: (pairs, 2) column pairs (first, dupe).
    """

    classes: tuple[str, ...]
    nextmove: np.ndarray
    rowbase: np.ndarray
    output: np.ndarray
    ptc: np.ndarray
    pc: np.ndarray
    alias: np.ndarray

    @property
    def labels(self) -> tuple[str, ...]:
        """The distinct labels, in column order (py3langid's `LanguageIdentifier.labels`)."""
        return tuple(dict.fromkeys(self.classes))


_lock = threading.Lock()
_model: Model | None = None
_labels: tuple[str, ...] | None = None


def _identifier() -> Any:
    """A fresh py3langid identifier over the bundled model (probabilities normalised)."""
    from py3langid import langid

    return langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)


def _build_model() -> dict[str, np.ndarray]:
    """py3langid's model as the kernel's arrays (`Model`'s fields; `classes` as strings)."""
    ident = _identifier()
    nextmove = np.frombuffer(ident.tk_nextmove, dtype=np.dtype(ident.tk_nextmove.typecode))
    rows = np.frombuffer(ident.tk_row, dtype=np.dtype(ident.tk_row.typecode))
    return {
        "classes": np.asarray(ident.nb_classes, dtype=str),
        "nextmove": nextmove.astype(np.uint32, copy=False),
        "rowbase": rows.astype(np.int64) << 8,
        "output": np.asarray(ident.tk_output, dtype=np.int32),
        "ptc": np.ascontiguousarray(ident.nb_ptc, dtype=np.float32),
        "pc": np.asarray(ident.nb_pc, dtype=np.float64),
        "alias": np.asarray(ident._alias_pairs, dtype=np.int64).reshape(-1, 2),
    }


def model() -> Model:
    """The bundled model, loaded on first call and kept for the process.

    Its arrays (~100 MB) are built from py3langid's compressed file once per machine and then
    memory-mapped (pipelines/tablecache.py): a worker maps them in milliseconds instead of
    unpacking them, and the workers of a machine share one copy. A lock keeps two
    threads of one worker from both loading it.
    """
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                from py3langid import langid

                source = (langid.MODEL_DIR / langid.MODEL_FILE).read_bytes()
                # py3langid's reader (its version) turns the file into the arrays copied here.
                key = tablecache.digest(
                    source,
                    version("py3langid"),
                    tablecache.code(_identifier),
                    tablecache.code(_build_model),
                )
                arrays = tablecache.load("langid", key, _build_model)
                _model = Model(
                    classes=tuple(arrays["classes"].tolist()),
                    nextmove=arrays["nextmove"],
                    rowbase=arrays["rowbase"],
                    output=arrays["output"],
                    ptc=arrays["ptc"],
                    pc=arrays["pc"],
                    alias=arrays["alias"],
                )
    return _model


def labels() -> tuple[str, ...]:
    """The language codes the model can return (py3langid's `LanguageIdentifier.labels`).

    Read from the class list alone when the model is not loaded yet, so that checking a
    config's codes on the driver does not keep the model's ~100 MB of arrays there.
    """
    global _labels
    if _model is not None:
        return _model.labels
    if _labels is None:
        import io
        import lzma

        from py3langid import langid

        with lzma.open(langid.MODEL_DIR / langid.MODEL_FILE) as src:
            raw = src.read()
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            _labels = tuple(dict.fromkeys(data["classes"].tolist()))
    return _labels


# --------------------------------------------------------------------------- preparation


# Arrow's buffers are read-only and a batch with rewritten documents is not: the kernels get
# read-only views of both, one numba type (tablecache.readonly).
_readonly = tablecache.readonly


def _cut(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, max_bytes: int) -> np.ndarray:
    """`ends` moved to at most `starts + max_bytes`, back to a character's first byte.

    Reads the UTF-8 `data`; returns new ends (int64). A valid UTF-8 character has at most three
    continuation bytes (10xxxxxx), so three steps back always reach its first byte.
    """
    cap = starts + max_bytes
    cut = cap < ends
    if not cut.any():
        return ends
    out = np.where(cut, cap, ends)
    for _ in range(3):
        at = np.where(cut, out, 0)  # a cut end lies inside its document: data[at] exists
        back = cut & ((data[at] & 0xC0) == 0x80)
        if not back.any():
            break
        out[back] -= 1
    return out


def _scan_py(buf: Any, starts: Any, ends: Any, kinds: Any) -> None:
    """Per document, whether its bytes are ASCII (`_AS_IS`, or `_ASCII_UPPER` when it has an
    upper-case letter and no lower-case one: `str.isupper()` on ASCII) or not (`_UNICODE`).

    The loop has no branch and no early exit (the flags are OR-ed over every byte), which the
    compiler turns into straight-line vector code: faster than a test and a stop per byte,
    even though it reads every byte (docs/figures.md).
    """
    for d in range(starts.size):
        high = 0
        upper = False
        lower = False
        for p in range(starts[d], ends[d]):
            b = np.int64(buf[p])
            high |= b
            upper |= (b >= 65) & (b <= 90)
            lower |= (b >= 97) & (b <= 122)
        if high >= 0x80:
            kinds[d] = _UNICODE
        elif upper and not lower:
            kinds[d] = _ASCII_UPPER
        else:
            kinds[d] = _AS_IS


def _scan_bytes(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray) -> None:
    """`_scan_py` with bytes methods (C loops): the path where numba is missing."""
    for d in range(starts.size):
        raw = buf[starts[d] : ends[d]].tobytes()
        if not raw.isascii():
            kinds[d] = _UNICODE
        else:
            # bytes.isupper(): an ASCII upper-case letter and no lower-case one.
            kinds[d] = _ASCII_UPPER if raw.isupper() else _AS_IS


_scan = _jit(_scan_py) if compiled.available() else _scan_bytes


def _encode(raw: bytes, kind: int) -> bytes | None:
    """py3langid's `_encode` of a document's UTF-8 `raw`: lower-cased when `isupper()`, then
    NFC. Returns the new bytes, or None when they are `raw` itself (nothing to rewrite)."""
    if kind == _ASCII_UPPER:
        return raw.lower()
    # Spark does not check that its strings are UTF-8: bad bytes become U+FFFD (and the
    # document is rewritten), rather than failing the task.
    try:
        text, bad = raw.decode("utf-8"), False
    except UnicodeDecodeError:
        text, bad = raw.decode("utf-8", errors="replace"), True
    out = text.lower() if text.isupper() else text
    # The quick check answers in one pass for nearly all web text, which is already NFC.
    if not unicodedata.is_normalized("NFC", out):
        out = unicodedata.normalize("NFC", out)
    if out is text and not bad:
        return None
    return out.encode("utf-8", errors="surrogatepass")


def prepare(
    texts: pa.Array | pa.ChunkedArray, max_bytes: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bytes the kernel walks, for every row of the string array `texts`.

    Returns `(buf, starts, ends, valid)`: document i is `buf[starts[i]:ends[i]]` (uint8, int64,
    int64), the bytes py3langid's `_encode` makes of the text (of its first `max_bytes` bytes
    when `max_bytes > 0`); `valid` is False for null rows, which span no bytes. Documents that
    need no rewriting point into the Arrow buffer itself (no copy); rewritten ones into a tail
    appended after it, which is why the kernel takes starts and ends rather than offsets.
    """
    arr = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    offsets, data = value_buffers(arr)
    n = offsets.size - 1
    valid = (
        np.ones(n, dtype=bool)
        if arr.null_count == 0
        else pc.is_valid(arr).to_numpy(zero_copy_only=False)
    )
    starts = offsets[:-1].copy()
    ends = np.where(valid, offsets[1:], starts)
    if max_bytes > 0:
        ends = _cut(data, starts, ends, max_bytes)
    kinds = np.zeros(n, dtype=np.int8)
    _scan(_readonly(data), starts, ends, kinds)
    pieces: list[bytes] = []
    tail = data.size
    for i in np.flatnonzero(kinds).tolist():
        new = _encode(data[starts[i] : ends[i]].tobytes(), int(kinds[i]))
        if new is None:
            continue
        starts[i] = tail
        ends[i] = tail + len(new)
        tail += len(new)
        pieces.append(new)
    if pieces:
        data = np.concatenate([data, np.frombuffer(b"".join(pieces), dtype=np.uint8)])
    return data, starts, ends, valid


# --------------------------------------------------------------------------- the kernel


def _walk_one(
    buf: Any,
    pos: int,
    end: int,
    state: int,
    nextmove: Any,
    rowbase: Any,
    output: Any,
    feats: Any,
    n: int,
) -> int:
    """Walk `buf[pos:end]` on from DFA `state`, appending the features it emits to `feats`
    after the `n` already there; returns their new number."""
    for p in range(pos, end):
        state = nextmove[rowbase[state] + buf[p]]
        f = output[state]
        feats[n] = f
        n += f >= 0
    return n


def _walk_four(
    buf: Any, lo: Any, hi: Any, nextmove: Any, rowbase: Any, output: Any, feats: Any, nf: Any
) -> None:
    """The features each of four documents `buf[lo[k]:hi[k]]` emits, into `feats[k]` (their
    number into `nf[k]`).

    The walk is a chain of dependent loads from a 39 MB table, so one document at a time waits
    on memory at every byte. Four independent chains in one loop keep four loads in flight
    (the walk takes half the time): the documents are walked in lockstep over their common
    length, then each alone to its end.
    """
    p0, p1, p2, p3 = lo[0], lo[1], lo[2], lo[3]
    s0 = s1 = s2 = s3 = 0
    n0 = n1 = n2 = n3 = 0
    f0, f1, f2, f3 = feats[0], feats[1], feats[2], feats[3]
    common = min(min(hi[0] - p0, hi[1] - p1), min(hi[2] - p2, hi[3] - p3))
    for i in range(common):
        s0 = nextmove[rowbase[s0] + buf[p0 + i]]
        s1 = nextmove[rowbase[s1] + buf[p1 + i]]
        s2 = nextmove[rowbase[s2] + buf[p2 + i]]
        s3 = nextmove[rowbase[s3] + buf[p3 + i]]
        # Written whatever the feature (-1 for none), kept by advancing: no branch to mispredict.
        g0, g1, g2, g3 = output[s0], output[s1], output[s2], output[s3]
        f0[n0] = g0
        f1[n1] = g1
        f2[n2] = g2
        f3[n3] = g3
        n0 += g0 >= 0
        n1 += g1 >= 0
        n2 += g2 >= 0
        n3 += g3 >= 0
    nf[0] = _walk_one(buf, p0 + common, hi[0], s0, nextmove, rowbase, output, f0, n0)
    nf[1] = _walk_one(buf, p1 + common, hi[1], s1, nextmove, rowbase, output, f1, n1)
    nf[2] = _walk_one(buf, p2 + common, hi[2], s2, nextmove, rowbase, output, f2, n2)
    nf[3] = _walk_one(buf, p3 + common, hi[3], s3, nextmove, rowbase, output, f3, n3)


def _count(feats: Any, m: int, counts: Any, seen: Any) -> int:
    """Count the features `feats[:m]` into `counts` (zero on entry); the distinct ones go to
    `seen` in order of first visit (py3langid's `Counter` order); returns their number."""
    k = 0
    for t in range(m):
        f = feats[t]
        if counts[f] == 0:
            seen[k] = f
            k += 1
        counts[f] += 1
    return k


def _walk_count(
    buf: Any,
    lo: int,
    hi: int,
    nextmove: Any,
    rowbase: Any,
    output: Any,
    counts: Any,
    seen: Any,
) -> int:
    """`_walk_one` and `_count` in one pass for a long document (no per-byte scratch)."""
    state = 0
    k = 0
    for p in range(lo, hi):
        state = nextmove[rowbase[state] + buf[p]]
        f = output[state]
        if f >= 0:
            if counts[f] == 0:
                seen[k] = f
                k += 1
            counts[f] += 1
    return k


def _decide(
    k: int,
    length: int,
    ptc: Any,
    pc: Any,
    alias: Any,
    counts: Any,
    seen: Any,
    scores: Any,
    rows: Any,
    weights: Any,
) -> tuple[int, float]:
    """(column, probability) of one document from its `k` distinct features (`seen[:k]`, with
    their `counts`, which are reset to zero here) and its length in bytes: py3langid's
    `_raw_score` and `_decide`."""
    ncls = scores.size
    if k == 0:
        # No feature: py3langid scores every class 0 (uniform after the softmax).
        for c in range(ncls):
            scores[c] = 0.0
    else:
        for c in range(ncls):
            scores[c] = pc[c]
        # Blocks of `_BLOCK` features are summed in float32 (twice the lanes of float64: the
        # scoring takes about a quarter less time) and each block's sum is added in float64,
        # so the rounding (~1e-6 in a probability) stays well below py3langid's own, which
        # sums every feature in float32 (~1e-5 on short mixed texts).
        for t0 in range(0, k, _BLOCK):
            # The block's rows and weights; a block short of eight is padded with weight 0
            # (adds an exact zero: the rows are finite), so that one loop over the classes
            # sums all eight rows in registers, in the features' order, with no round trip of
            # a partial sum through memory per feature.
            for j in range(_BLOCK):
                t = t0 + j
                if t < k:
                    f = seen[t]
                    cnt = counts[f]
                    # Most features occur a few times: their weights come from a table of the
                    # same float32 values (log1p was the costliest step of a feature).
                    wj = _LOG1P[cnt] if cnt < _LOG1P.size else np.float32(math.log1p(cnt))
                    counts[f] = 0
                    rows[j] = f
                    weights[j] = wj
                else:
                    rows[j] = seen[t0]
                    weights[j] = 0.0
            r0, r1, r2, r3 = ptc[rows[0]], ptc[rows[1]], ptc[rows[2]], ptc[rows[3]]
            r4, r5, r6, r7 = ptc[rows[4]], ptc[rows[5]], ptc[rows[6]], ptc[rows[7]]
            w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
            w4, w5, w6, w7 = weights[4], weights[5], weights[6], weights[7]
            for c in range(ncls):
                acc = w0 * r0[c]
                acc += w1 * r1[c]
                acc += w2 * r2[c]
                acc += w3 * r3[c]
                acc += w4 * r4[c]
                acc += w5 * r5[c]
                acc += w6 * r6[c]
                acc += w7 * r7[c]
                scores[c] += acc
    # py3langid's temperature: sqrt of the encoded length keeps the softmax calibrated.
    scale = 1.0 / math.sqrt(max(length, 1))
    top = -np.inf
    for c in range(ncls):
        scores[c] *= scale
        top = max(top, scores[c])
    total = 0.0
    for c in range(ncls):
        e = math.exp(scores[c] - top)
        scores[c] = e
        total += e
    for c in range(ncls):
        scores[c] /= total
    # Aliased columns (one label, two scripts): the first holds the sum, the dupe 0.
    for a in range(alias.shape[0]):
        i = alias[a, 0]
        j = alias[a, 1]
        scores[i] += scores[j]
        scores[j] = 0.0
    b = 0
    for c in range(1, ncls):
        if scores[c] > scores[b]:  # the first of equal maxima, as numpy's argmax
            b = c
    return b, scores[b]


def _classify_py(
    buf: Any,
    starts: Any,
    ends: Any,
    nextmove: Any,
    rowbase: Any,
    output: Any,
    ptc: Any,
    pc: Any,
    alias: Any,
    best: Any,
    prob: Any,
) -> None:
    """Language column (`best`, int64) and probability (`prob`, float64) of each document
    `buf[starts[d]:ends[d]]`: DFA walk, naive Bayes scores, temperature, softmax, aliases.

    Documents go through the walk four at a time, shortest first, so that the four of a group
    have nearly the same length and little is left to walk alone (`_walk_four`). A group with
    a document over `_LONG` bytes is walked one document at a time straight into the counts,
    so the scratch stays ~1 MB whatever the batch holds.
    """
    n = starts.size
    lengths = ends - starts
    widest = 0
    for d in range(n):
        widest = max(widest, lengths[d])
    order = np.argsort(lengths)
    nfeat = ptc.shape[0]
    feats = np.empty((4, min(widest, _LONG) + 1), dtype=np.int32)
    nf = np.zeros(4, dtype=np.int64)
    lo = np.zeros(4, dtype=np.int64)
    hi = np.zeros(4, dtype=np.int64)
    counts = np.zeros(nfeat, dtype=np.int32)
    seen = np.empty(min(widest, nfeat) + 1, dtype=np.int32)
    scores = np.empty(ptc.shape[1], dtype=np.float64)
    rows = np.empty(_BLOCK, dtype=np.int64)
    weights = np.empty(_BLOCK, dtype=np.float32)
    for g in range(0, n, 4):
        size = min(4, n - g)
        if lengths[order[g + size - 1]] > _LONG:  # sorted: the group's last is its longest
            for k in range(size):
                d = order[g + k]
                m = _walk_count(buf, starts[d], ends[d], nextmove, rowbase, output, counts, seen)
                best[d], prob[d] = _decide(
                    m, lengths[d], ptc, pc, alias, counts, seen, scores, rows, weights
                )
            continue
        for k in range(4):
            # A group short of four is padded with empty documents (nothing to walk).
            d = order[g + min(k, size - 1)]
            lo[k] = starts[d]
            hi[k] = ends[d] if k < size else starts[d]
        _walk_four(buf, lo, hi, nextmove, rowbase, output, feats, nf)
        for k in range(size):
            d = order[g + k]
            m = _count(feats[k], nf[k], counts, seen)
            best[d], prob[d] = _decide(
                m, lengths[d], ptc, pc, alias, counts, seen, scores, rows, weights
            )


def _classify_python(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    nextmove: np.ndarray,
    rowbase: np.ndarray,
    output: np.ndarray,
    ptc: np.ndarray,
    pc: np.ndarray,
    alias: np.ndarray,
    best: np.ndarray,
    prob: np.ndarray,
) -> None:
    """`_classify_py`'s steps with Python ints and numpy rows: the path where numba is
    missing (the byte walk on Python ints, as py3langid does; the scoring in numpy)."""
    nm = memoryview(nextmove)
    rb = rowbase.tolist()
    out = output.tolist()
    for d in range(starts.size):
        data = buf[starts[d] : ends[d]].tobytes()
        state = 0
        counts: dict[int, int] = {}
        for letter in data:
            state = nm[rb[state] + letter]
            f = out[state]
            if f >= 0:
                counts[f] = counts.get(f, 0) + 1
        if counts:
            idx = np.fromiter(counts.keys(), dtype=np.intp, count=len(counts))
            weights = np.log1p(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
            scores = weights @ ptc[idx].astype(np.float64) + pc
        else:
            scores = np.zeros(ptc.shape[1], dtype=np.float64)
        scores *= 1.0 / math.sqrt(max(len(data), 1))
        scores = np.exp(scores - scores.max())
        scores /= scores.sum()
        for i, j in alias.tolist():
            scores[i] += scores[j]
            scores[j] = 0.0
        best[d] = int(scores.argmax())
        prob[d] = scores[best[d]]


if compiled.available():
    # Helpers first: a jitted function calls the jitted versions it finds at compile time.
    _walk_one = _jit(_walk_one)
    _walk_four = _jit(_walk_four)
    _count = _jit(_count)
    _walk_count = _jit(_walk_count)
    _decide = _jit(_decide)
    _classify = _jit(_classify_py)
else:  # pragma: no cover - exercised only where numba is missing
    _classify = _classify_python


def classify_prepared(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, compiled: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(column index int64, probability float64) of each prepared document (`prepare`).

    `compiled=False` runs the Python path even where numba is present (the tests compare
    the two).
    """
    m = model()
    n = starts.size
    best = np.zeros(n, dtype=np.int64)
    prob = np.zeros(n, dtype=np.float64)
    fn = _classify if compiled else _classify_python
    fn(
        _readonly(buf),
        starts,
        ends,
        m.nextmove,
        m.rowbase,
        m.output,
        m.ptc,
        m.pc,
        m.alias,
        best,
        prob,
    )
    return best, prob


def identify(texts: pa.Array | pa.ChunkedArray, max_bytes: int = 0) -> tuple[pa.Array, pa.Array]:
    """The language and its probability for every row of the string array `texts`.

    Reads `texts` (string or large_string, chunked or not); `max_bytes > 0` classifies only
    each document's first `max_bytes` UTF-8 bytes (cut back to a character boundary).
    Returns `(lang, score)`: a string array of py3langid's codes and a float64 array of their
    probabilities, both null where the text is null. An empty or featureless text gets
    py3langid's answer for it (a uniform distribution: `sr` at 2/142).
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    buf, starts, ends, valid = prepare(texts, max_bytes)
    best, prob = classify_prepared(buf, starts, ends)
    names = pa.array(model().classes, type=pa.string())
    mask = None if valid.all() else ~valid
    lang = pc.take(names, pa.array(best, mask=mask))
    score = pa.array(prob, type=pa.float64(), mask=mask)
    return lang, score
