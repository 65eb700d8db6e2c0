"""The compiled MinHash kernel gives the numpy steps' signatures and counts, bit for bit."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from corpusclean.jobs import submit
from corpusclean.pipelines import minhash as mh
from corpusclean.pipelines import minhash_jit
from corpusclean.pipelines.near_dedup import NearDedupParams

# Every class the tokenizers tell apart: ASCII word bytes and separators, Latin with
# combining marks, CJK (BMP and astral), Hangul, kana, Unicode spaces, a zero-width space,
# emoji and a mathematical letter (astral, word), an upper-case letter lower-casing to two
# bytes.
ALPHABET = (
    "abcxyz019_ \t\n\r\x0b\x1c.,!?-'\"" + "éßÄÖİ\u0301\u0308" + "中文日本語漢字" + "한국어"
    "ひらがなカタカナ" + "\u00a0\u3000\u2003\u200b\u2028" + "\U0001f600\U00020000\U0002a6d6"
    "\U0001d400\U00010400"
)
EDGES = [
    "",
    None,
    "   \t\n ",
    "one",
    "one two",
    "One, two! Three four five six seven.",
    "a" * 100,
    "longwordwithmorethaneightbytes " * 20,
    "中文文本没有空格但是有很多字",
    "mixed 中文 and english words 中文 here",
    "\U0001f600\U0001f600 emoji \U00020001\U00020002",
    "a\u3000b\u00a0c  d",
]


def _texts(n: int, seed: int) -> list[str | None]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(200)] + ["中文", "日本", "ß", "naïve"]
    out: list[str | None] = list(EDGES)
    for i in range(n):
        if i % 2:
            out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 300))))
        else:
            out.append(" ".join(rng.choice(vocab) for _ in range(rng.randrange(1, 400))))
    return out


def test_numba_is_importable() -> None:
    # numba is a dependency (pyproject.toml): its absence is a broken install, which must fail
    # here rather than leave the tests below checking the uncompiled loops.
    assert minhash_jit.available(), "numba is not importable"


@pytest.mark.parametrize("tokenizer", ["word", "char", "auto"])
@pytest.mark.parametrize("num_perm", [128, 100, 7])
def test_compiled_signatures_equal_the_numpy_steps(tokenizer: str, num_perm: int) -> None:
    base = NearDedupParams(tokenizer=tokenizer).minhash
    params = dataclasses.replace(base, num_perm=num_perm, seed=num_perm + 3, bands=1, rows=1)
    texts = pa.array(_texts(600, seed=num_perm), pa.string())
    sig_np, n_np = mh.signatures(texts, params, compiled=False)
    sig_jit, n_jit = mh.signatures(texts, params, compiled=True)
    assert n_jit.tolist() == n_np.tolist()
    assert np.array_equal(sig_jit, sig_np)
    # Not a vacuous equality: both saw shingles, and empty documents are EMPTY rows.
    assert (n_np > 0).sum() > 500
    assert (sig_jit[n_jit == 0] == mh.EMPTY).all()


def test_large_strings_and_slices_give_the_same_rows() -> None:
    texts = _texts(200, seed=5)
    params = NearDedupParams().minhash
    whole, _ = mh.signatures(pa.array(texts, pa.string()), params, compiled=True)
    large, _ = mh.signatures(pa.array(texts, pa.large_string()), params, compiled=True)
    part, _ = mh.signatures(pa.array(texts, pa.string()).slice(50, 60), params, compiled=True)
    assert np.array_equal(whole, large)
    assert np.array_equal(whole[50:110], part)


def _edited(text: str | None, rng: random.Random) -> str | None:
    """`text` with a few of its words dropped, swapped or upper-cased: a near duplicate."""
    if text is None or rng.random() < 0.1:
        return text
    words = text.split(" ")
    for _ in range(rng.randrange(0, 6)):
        i = rng.randrange(len(words))
        words[i] = rng.choice(["", words[i].upper(), words[-1 - i], "new"])
    return " ".join(words)


@pytest.mark.parametrize("tokenizer", ["word", "char", "auto"])
def test_compiled_pair_jaccards_equal_the_numpy_steps(tokenizer: str, monkeypatch) -> None:
    # Chunks of a few documents each: the pairs are sliced together, chunk by chunk.
    monkeypatch.setattr(mh, "_CHUNK_BYTES", 2_000)
    params = NearDedupParams(tokenizer=tokenizer).minhash
    rng = random.Random(7)
    left = _texts(400, seed=11)
    # Near duplicates, unrelated pairs, a document against itself, and repeats within one.
    right = [_edited(t, rng) for t in left[:300]] + _texts(len(left) - len(EDGES), seed=12)[300:]
    right[300:310] = left[300:310]
    left[310:320] = [(t or "w1 ") * 5 for t in left[310:320]]
    a, b = pa.array(left, pa.string()), pa.array(right, pa.string())
    numpy_path = mh.pair_jaccards(a, b, params, compiled=False)
    kernel = mh.pair_jaccards(a, b, params, compiled=True)
    assert kernel.tolist() == numpy_path.tolist()
    assert kernel.tolist() == mh.pair_jaccards(a.cast(pa.large_string()), b, params, True).tolist()
    # Offsets into a sliced array, and a right-hand document far longer than its left.
    assert mh.pair_jaccards(a.slice(7), b.slice(7), params, True).tolist() == kernel[7:].tolist()
    long_b = pa.array([t if i % 50 else (t or "") * 200 for i, t in enumerate(right)])
    assert (
        mh.pair_jaccards(a, long_b, params, True).tolist()
        == mh.pair_jaccards(a, long_b, params, False).tolist()
    )
    # Not vacuous: high, partial and zero overlaps all occur, and a pair agrees with the
    # one-pair definition.
    assert (kernel == 1.0).sum() >= 10
    assert ((kernel > 0.2) & (kernel < 1.0)).sum() > 50
    assert (kernel == 0.0).sum() > 20
    for i in (0, 5, 13, 305):
        if left[i] and right[i] and kernel[i] > 0:
            assert kernel[i] == mh.exact_jaccard(left[i], right[i], params)


def test_the_kernel_is_loaded_once_a_worker_has_text_enough(monkeypatch) -> None:
    monkeypatch.delenv("CORPUSCLEAN_MINHASH_KERNEL", raising=False)
    monkeypatch.setattr(mh, "_signed_bytes", 0)
    limit = mh._COMPILED_AFTER_BYTES
    assert not mh.use_compiled(limit - 1)  # a small run never loads numba
    assert not mh.use_compiled(1)
    assert mh.use_compiled(10)  # from here on, the kernel
    monkeypatch.setenv("CORPUSCLEAN_MINHASH_KERNEL", "numpy")
    assert not mh.use_compiled(limit)
    monkeypatch.setenv("CORPUSCLEAN_MINHASH_KERNEL", "compiled")
    monkeypatch.setattr(mh, "_signed_bytes", 0)
    assert mh.use_compiled(1)


CHECK = """
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np, pyarrow as pa
from corpusclean.pipelines import minhash as mh, minhash_jit
from corpusclean.pipelines.near_dedup import NearDedupParams
assert ".zip" in minhash_jit.__file__, minhash_jit.__file__
texts = pa.array(["a zip holds this module", "中文文本", None, "x"])
p = NearDedupParams().minhash
a, b = mh.signatures(texts, p, compiled=True), mh.signatures(texts, p, compiled=False)
print(all(np.array_equal(x, y) for x, y in zip(a, b)))
"""


def test_the_kernel_runs_from_the_submit_zip(tmp_path: Path) -> None:
    """numba cannot cache a function whose source is inside a zip (--py-files): the kernel
    compiles without a cache there instead of failing to import."""
    dest = submit.build_zip(tmp_path / "corpusclean.zip")
    proc = subprocess.run(
        [sys.executable, "-I", "-c", CHECK, str(dest)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "True"
