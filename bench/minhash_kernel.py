"""Speed and accuracy of the MinHash kernel on one core, against the alternatives and peers.

Speed: docs/s of the whole `signatures()` call (lower-casing and tokenising included) on a
generated corpus (English prose of ~250 words / ~1.5 KB, plus some Chinese), and of the same
shingles fed to the sketches that were measured against the one in use:

- fss: Fast Similarity Sketching, what `corpusclean.pipelines.minhash.signatures` uses, as
  numpy steps and as the numba kernel (`fss (in use), compiled`, the one the job runs);
- kperm-u32: k-permutation MinHash, (a*x + b) mod 2^32 with odd a (datasketch's affine32),
  chunked so each (chunk x num_perm) block stays in L2, `np.minimum.reduceat` per document;
- kperm-u64: the same with 64-bit multiply-shift ((a*x + b) >> 32);
- oph: one-permutation hashing with optimal densification (Shrivastava, ICML 2017);
- datasketch: `datasketch.MinHash.update_batch` per document, regex tokens (a subset, scaled);
- per-doc numpy: the text-dedup / datatrove pattern (regex tokens, SHA-1 per shingle, one
  numpy block of permutations mod 2^61 - 1 per document), emulated here (a subset, scaled).

Accuracy: bias and standard error of each sketch's Jaccard estimate over many random pairs of
sets with a known Jaccard, for short (50 shingles) and long (2000) sets, against the
k-permutation theory sqrt(J (1 - J) / k); and the kernel's estimate against exact Jaccard on
generated near-duplicate document pairs.

    python bench/minhash_kernel.py [--docs 20000] [--seed 1] [--num-perm 128]

Numpy runs on one thread here (the environment caps BLAS/OpenMP threads before import), so
the figures are per core. Prints tables and, last, one JSON line.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from corpusclean.pipelines import minhash as mh  # noqa: E402
from corpusclean.pipelines.near_dedup import NearDedupParams  # noqa: E402

_U64 = np.uint64
_COMMON_WORDS = (
    "the of and to a in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if so "
    "no will more can who what its also into out up them only other some time about than then "
    "may these two after first new any like over could our most such where years made people "
    "very just many well because those how through us now each between being under back much "
    "before should great even here same state own work life world still way use while last "
    "down year long might both make good day must city part three high since war often during "
    "used does know another"
)
_COMMON = _COMMON_WORDS.split()
_SYLLABLES = ["ka", "lo", "ri", "men", "tor", "sa", "vi", "pe", "dun", "ga", "el", "mo", "ra"]


# ---------------------------------------------------------------------------------------------
# Corpus


def generate_english(n: int, rng: np.random.Generator, mean_words: int = 250) -> list[str]:
    """Prose-like documents: Zipf-distributed words, sentences, punctuation, capitals."""
    rare = ["".join(rng.choice(_SYLLABLES, int(rng.integers(2, 5)))) for _ in range(30000)]
    vocab = np.array(_COMMON + rare)
    p = 1.0 / np.arange(1, vocab.size + 1) ** 1.05
    p /= p.sum()
    docs = []
    for _ in range(n):
        words = vocab[rng.choice(vocab.size, max(5, int(rng.normal(mean_words, 40))), p=p)]
        cuts = np.cumsum(rng.integers(6, 20, words.size // 6 + 1))
        sentences = [" ".join(s) for s in np.split(words, cuts[cuts < words.size]) if s.size]
        marks = rng.choice([". ", ". ", "! ", "? ", "; ", ", "], len(sentences))
        docs.append("".join(s.capitalize() + m for s, m in zip(sentences, marks, strict=True)))
    return docs


def generate_chinese(n: int, rng: np.random.Generator, mean_chars: int = 500) -> list[str]:
    """Han text over a Zipf-distributed 3000-character repertoire, with CJK punctuation."""
    chars = np.array([chr(c) for c in range(0x4E00, 0x4E00 + 3000)])
    p = 1.0 / np.arange(1, chars.size + 1) ** 0.9
    p /= p.sum()
    docs = []
    for _ in range(n):
        body = chars[rng.choice(chars.size, max(5, int(rng.normal(mean_chars, 80))), p=p)]
        cuts = np.cumsum(rng.integers(8, 25, body.size // 8 + 1))
        parts = np.split(body, cuts[cuts < body.size])
        docs.append("".join("".join(s) + str(rng.choice(["，", "。", "！", "？"])) for s in parts))
    return docs


def edit(doc: str, rate: float, rng: np.random.Generator) -> str:
    """A near-duplicate: each word replaced with probability `rate`."""
    words = doc.split(" ")
    hit = rng.random(len(words)) < rate
    return " ".join("zzz" + w if h else w for w, h in zip(words, hit, strict=True))


# ---------------------------------------------------------------------------------------------
# The alternative sketches (over the same shingle hashes as the kernel)


def _consts(seed: int, n: int) -> np.ndarray:
    return mh._splitmix64(seed, n)


def kperm_u32(g: np.ndarray, off: np.ndarray, k: int, seed: int, chunk: int = 1024) -> np.ndarray:
    """k-permutation MinHash, affine maps mod 2^32 over the shingle hash's high half."""
    c = _consts(seed, 2 * k)
    a = (c[:k] | _U64(1)).astype(np.uint32)
    b = c[k:].astype(np.uint32)
    x = (g >> _U64(32)).astype(np.uint32)
    return _kperm(x, off, k, lambda blk, xs: _affine(blk, xs, a, b), np.uint32, chunk)


def kperm_u64(g: np.ndarray, off: np.ndarray, k: int, seed: int, chunk: int = 1024) -> np.ndarray:
    """k-permutation MinHash, 64-bit multiply-shift (a*x + b) >> 32 (taken after the min)."""
    c = _consts(seed, 2 * k)
    a = c[:k] | _U64(1)
    b = c[k:]
    x = g >> _U64(32)
    sig = _kperm(x, off, k, lambda blk, xs: _affine(blk, xs, a, b), np.uint64, chunk)
    return (sig >> _U64(32)).astype(np.uint32)


def _affine(blk: np.ndarray, xs: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    np.multiply(xs[:, None], a[None, :], out=blk)
    blk += b


def _kperm(
    x: np.ndarray,
    off: np.ndarray,
    k: int,
    fill: Callable[[np.ndarray, np.ndarray], None],
    dtype: type,
    chunk: int,
) -> np.ndarray:
    n = off.size - 1
    top = np.iinfo(dtype).max
    sig = np.full((n, k), top, dtype=dtype)
    nonempty = np.flatnonzero(np.diff(off) > 0)
    starts = off[:-1][nonempty]
    dense = np.full((nonempty.size, k), top, dtype=dtype)
    blk_all = np.empty((chunk, k), dtype=dtype)
    for c0 in range(0, x.size, chunk):
        c1 = min(c0 + chunk, x.size)
        blk = blk_all[: c1 - c0]
        fill(blk, x[c0:c1])
        d0 = int(np.searchsorted(starts, c0, side="right")) - 1
        d1 = int(np.searchsorted(starts, c1, side="left"))
        seg = np.maximum(starts[d0:d1] - c0, 0)
        np.minimum(dense[d0:d1], np.minimum.reduceat(blk, seg, axis=0), out=dense[d0:d1])
    sig[nonempty] = dense
    if dtype is np.uint32:
        sig[np.diff(off) == 0] = mh.EMPTY
    return sig


def oph_densified(g: np.ndarray, off: np.ndarray, k: int, seed: int) -> np.ndarray:
    """One-permutation hashing; empty bins copy the bin that a per-(bin, attempt) hash picks
    among the document's non-empty bins (optimal densification)."""
    n = off.size - 1
    key = _consts(seed, 1)[0]
    h = mh._fmix64(g ^ key)
    bins = ((h >> _U64(32)) * _U64(k)) >> _U64(32)
    slot = np.repeat(np.arange(n, dtype=np.int64) * k, np.diff(off)) + bins.astype(np.int64)
    sig = np.full(n * k, mh.EMPTY, dtype=np.uint32)
    np.minimum.at(sig, slot, h.astype(np.uint32))
    sig = sig.reshape(n, k)
    empty = sig == mh.EMPTY
    out = sig.copy()
    todo = empty.copy()
    rows = np.flatnonzero(todo.any(axis=1) & ~empty.all(axis=1))
    attempt = 1
    cells = np.arange(k, dtype=_U64)
    while rows.size:
        pick = mh._fmix64(cells * _U64(mh._GOLDEN) + _U64(attempt) + key)
        pick = ((pick >> _U64(32)) * _U64(k) >> _U64(32)).astype(np.int64)
        ok = todo[rows] & ~empty[rows][:, pick]
        block = out[rows]
        block[ok] = sig[rows][:, pick][ok]
        out[rows] = block
        left = todo[rows] & ~ok
        todo[rows] = left
        rows = rows[left.any(axis=1)]
        attempt += 1
    return out


def fss(g: np.ndarray, off: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The kernel's sketch."""
    return mh.sketch(g, off, k, seed)


SKETCHES: dict[str, Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]] = {
    "fss (in use)": fss,
    "kperm-u32": kperm_u32,
    "kperm-u64": kperm_u64,
    "oph+densify": oph_densified,
}


# ---------------------------------------------------------------------------------------------
# Per-document baselines

_NON_WORD = re.compile(r"\W+")
_MERSENNE = (1 << 61) - 1


def _word_ngrams(text: str, n: int) -> list[str]:
    tokens = [t for t in _NON_WORD.split(text.lower()) if t]
    if len(tokens) < n:
        return [" ".join(tokens)] if tokens else []
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def datasketch_docs(docs: list[str], k: int, n: int) -> float:
    """docs/s of datasketch.MinHash per document (its default scheme and SHA-1 hashing)."""
    from datasketch import MinHash

    template = MinHash(num_perm=k, seed=1)
    t0 = time.perf_counter()
    for doc in docs:
        m = MinHash(num_perm=k, seed=1, permutations=template.permutations, scheme="affine32")
        m.update_batch([s.encode("utf-8") for s in _word_ngrams(doc, n)])
    return len(docs) / (time.perf_counter() - t0)


def per_doc_numpy(docs: list[str], k: int, n: int) -> float:
    """docs/s of the text-dedup / datatrove pattern: per-document numpy over SHA-1 hashes."""
    rng = np.random.RandomState(1)
    a = rng.randint(1, _MERSENNE, k, dtype=np.uint64)
    b = rng.randint(0, _MERSENNE, k, dtype=np.uint64)
    t0 = time.perf_counter()
    for doc in docs:
        shingles = _word_ngrams(doc, n)
        hv = np.array(
            [struct.unpack("<I", hashlib.sha1(s.encode()).digest()[:4])[0] for s in shingles],
            dtype=np.uint64,
        )
        if hv.size:
            ((hv[:, None] * a + b) % _U64(_MERSENNE)).min(axis=0)
    return len(docs) / (time.perf_counter() - t0)


def datasketch_pairs(ga: list[np.ndarray], gb: list[np.ndarray], k: int) -> np.ndarray:
    """Jaccard estimates of datasketch MinHash on pairs of raw uint64 sets."""
    from datasketch import MinHash

    template = MinHash(num_perm=k, seed=1)
    est = []
    for a, b in zip(ga, gb, strict=True):
        ms = []
        for s in (a, b):
            m = MinHash(num_perm=k, seed=1, permutations=template.permutations, scheme="affine32")
            m.update_batch([v.tobytes() for v in s])
            ms.append(m)
        est.append(ms[0].jaccard(ms[1]))
    return np.array(est)


# ---------------------------------------------------------------------------------------------
# Measurements


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of `repeat` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def random_pairs(
    m: int, jaccard: float, trials: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, float, list[np.ndarray], list[np.ndarray]]:
    """`trials` pairs of m-element sets sharing c elements, c chosen for `jaccard`."""
    c = round(2 * m * jaccard / (1 + jaccard))
    exact = c / (2 * m - c)
    ga, gb, flat = [], [], []
    for _ in range(trials):
        u = rng.integers(0, 2**63, 2 * m - c, dtype=np.uint64) * _U64(2)
        u += rng.integers(0, 2, 2 * m - c, dtype=np.uint64)
        a, b = u[:m], np.concatenate([u[:c], u[m:]])
        ga.append(a)
        gb.append(b)
        flat += [a, b]
    return np.concatenate(flat), np.arange(0, 2 * trials * m + 1, m), exact, ga, gb


def accuracy(k: int, seed: int, rng: np.random.Generator) -> list[dict[str, object]]:
    """Bias and standard error of every sketch at J in {0.5, 0.7, 0.8, 0.9}, m in {50, 2000}."""
    rows = []
    for m, trials in ((50, 2000), (2000, 250)):
        for j in (0.5, 0.7, 0.8, 0.9):
            g, off, exact, ga, gb = random_pairs(m, j, trials, rng)
            for name, fn in SKETCHES.items():
                sig = fn(g, off, k, seed)
                est = (sig[0::2] == sig[1::2]).mean(axis=1)
                rows.append(_acc_row(name, m, exact, est, k))
            if j == 0.8:
                few = 400 if m == 50 else 40
                est = datasketch_pairs(ga[:few], gb[:few], k)
                rows.append(_acc_row("datasketch", m, exact, est, k))
    return rows


def _acc_row(name: str, m: int, exact: float, est: np.ndarray, k: int) -> dict[str, object]:
    return {
        "method": name,
        "m": m,
        "jaccard": round(exact, 4),
        "bias": float(est.mean() - exact),
        "stderr": float(est.std()),
        "theory": float(np.sqrt(exact * (1 - exact) / k)),
        "pairs": int(est.size),
    }


def main() -> None:
    """Run the benchmark and print its tables and a JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--chinese", type=float, default=0.05, help="share of Chinese documents")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline-docs", type=int, default=1000, help="docs for per-doc peers")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    k = args.num_perm
    n_zh = int(args.docs * args.chinese)
    docs = generate_english(args.docs - n_zh, rng) + generate_chinese(n_zh, rng)
    order = rng.permutation(len(docs))
    docs = [docs[i] for i in order]
    texts = pa.array(docs, pa.string())
    params = NearDedupParams(num_perm=k, seed=args.seed).minhash
    mb = texts.nbytes / 1e6
    print(f"corpus: {len(docs)} docs ({n_zh} Chinese), {mb:.1f} MB, num_perm={k}, one core")

    speed: dict[str, float] = {}
    from corpusclean.pipelines import minhash_jit

    if minhash_jit.available():
        mh.signatures(texts.slice(0, 10), params, compiled=True)  # compiled or cache loaded
        t = best_of(lambda: mh.signatures(texts, params, compiled=True), args.repeat)
        speed["fss (in use), compiled"] = len(docs) / t
        same = all(
            np.array_equal(a, b)
            for a, b in zip(
                mh.signatures(texts, params, compiled=True),
                mh.signatures(texts, params, compiled=False),
                strict=True,
            )
        )
        print(f"compiled kernel: signatures and counts identical to the numpy steps: {same}")
    t = best_of(lambda: mh.signatures(texts, params, compiled=False), args.repeat)
    speed["fss (in use)"] = len(docs) / t
    # Same slicing as signatures() (text in cache-sized slices), so the rows compare sketches.
    slices = [texts.slice(lo, hi - lo) for lo, hi in mh._chunks(texts)]
    t_shingle = best_of(lambda: [mh.shingle_batch(s, params) for s in slices], args.repeat)
    speed["shingling only"] = len(docs) / t_shingle
    for name, fn in SKETCHES.items():
        if name == "fss (in use)":
            continue

        def run(fn: Callable[[np.ndarray, np.ndarray, int, int], np.ndarray] = fn) -> None:
            for piece in slices:
                fn(*mh.shingle_batch(piece, params), k, args.seed)

        speed[name] = len(docs) / best_of(run, args.repeat)
    english = [d for d in docs[: args.baseline_docs * 2] if d.isascii()][: args.baseline_docs]
    speed["datasketch per doc"] = datasketch_docs(english, k, params.ngram)
    speed["per-doc numpy (text-dedup style)"] = per_doc_numpy(english, k, params.ngram)

    acc = accuracy(k, args.seed, rng)
    at08 = {
        (r["method"], r["m"]): r for r in acc if r["jaccard"] and abs(r["jaccard"] - 0.8) < 0.02
    }

    print()
    print(
        f"{'method':34s} {'docs/s':>9s}  {'m=50 bias':>9s} {'se':>6s}  "
        f"{'m=2000 bias':>11s} {'se':>6s}"
    )
    for name, rate in speed.items():
        key = name if name in SKETCHES else ("datasketch" if name.startswith("datasketch") else "")
        short, long_ = at08.get((key, 50)), at08.get((key, 2000))
        cells = ""
        if short and long_:
            cells = (
                f"{short['bias']:+9.4f} {short['stderr']:6.4f}  "
                f"{long_['bias']:+11.4f} {long_['stderr']:6.4f}"
            )
        print(f"{name:34s} {rate:9.0f}  {cells}")
    theory = next(r["theory"] for r in acc if r["m"] == 50 and abs(r["jaccard"] - 0.8) < 0.02)
    print(f"{'k-perm theory sqrt(J(1-J)/k)':34s} {'':9s}  {'':9s} {theory:6.4f}")
    print(
        "\n(shingling included in every kernel row; peers tokenise with a Python regex; "
        "J = 0.8 (0.786 for m=50))"
    )

    print(f"\n{'method':14s} {'m':>5s} {'J':>6s} {'bias':>8s} {'stderr':>7s} {'theory':>7s}")
    for r in acc:
        if r["method"] == "datasketch":
            continue
        print(
            f"{r['method']:14s} {r['m']:5d} {r['jaccard']:6.3f} {r['bias']:+8.4f} "
            f"{r['stderr']:7.4f} {r['theory']:7.4f}"
        )

    # The kernel against exact Jaccard on real near-duplicate documents.
    base = [d for d in docs if d.isascii()][:300]
    copies = [edit(d, float(rng.uniform(0.0, 0.08)), rng) for d in base]
    sig, _ = mh.signatures(pa.array(base + copies), params)
    est = mh.estimate_jaccard_rows(sig[: len(base)], sig[len(base) :])
    exact = np.array([mh.exact_jaccard(a, b, params) for a, b in zip(base, copies, strict=True)])
    err = est - exact
    print(
        f"\nnear-duplicate documents ({len(base)} pairs, "
        f"exact J {exact.min():.2f}..{exact.max():.2f}):"
        f" mean error {err.mean():+.4f}, rms {np.sqrt((err**2).mean()):.4f}"
    )
    print(
        json.dumps(
            {
                "bench": "minhash_kernel",
                "docs": len(docs),
                "mb": round(mb, 2),
                "num_perm": k,
                "docs_per_s": {name: round(v) for name, v in speed.items()},
                "accuracy": acc,
                "near_dup_pairs": {
                    "pairs": len(base),
                    "mean_error": float(err.mean()),
                    "rms_error": float(np.sqrt((err**2).mean())),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
