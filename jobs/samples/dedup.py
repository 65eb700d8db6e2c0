"""`corpusclean sample --kind dedup`: a corpus with duplicates of every kind and their ground truth.

The corpus mixes English-like and Chinese-like documents with long-tailed lengths (roughly 200
to 20,000 characters), realistic metadata, and injected trouble whose answer is known:

- `doc_id`: a second row under an existing doc_id (a truncated or re-crawled copy);
- `exact`: the same text under a new id, with case and whitespace changed;
- `near`: the same text with token substitutions at a target shingle Jaccard (0.95 ... 0.5);
- `junk`: null or blank ids and texts, and texts shorter than any sane `rules.min_chars`.

Everything is vectorised with numpy and pyarrow per chunk of documents, and every chunk is
seeded from (seed, chunk index), so the same arguments give the same files on any machine.
The truth, one row per corpus row in corpus order, is written to `_truth.parquet` beside the
data files (Spark skips `_` files when it reads the folder).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpusclean.errors import InputError

CHUNK_DOCS = 50_000
TRUTH_FILE = "_truth.parquet"

# Shingle Jaccard targets of injected near-duplicates: three above the default 0.8 threshold
# (the ones near-dedup must find), two below (hard negatives it must leave alone).
NEAR_LEVELS = np.array([0.95, 0.9, 0.85, 0.7, 0.5])
NEAR_NGRAM = 5

SOURCES = np.array(["common-crawl", "wikipedia", "books", "news", "forums"])
SOURCE_P = np.array([0.55, 0.15, 0.1, 0.12, 0.08])
TS_START = 1_420_070_400  # 2015-01-01
TS_END = 1_767_225_600  # 2026-01-01


@dataclass(frozen=True)
class Mix:
    """Fractions of the rows that are each kind of injected trouble (the rest are originals)."""

    doc_id_dup: float = 0.03
    exact_dup: float = 0.05
    near_dup: float = 0.08
    junk: float = 0.02
    chinese: float = 0.2


def _vocabulary(rng: np.random.Generator, size: int = 40_000) -> tuple[pa.Array, np.ndarray]:
    """Pseudo-English words from syllables, with Zipf-like sampling weights (as a CDF)."""
    onsets = np.array([*"bcdfghjklmnprstvwyz", "th", "st", "ch", "sh", "tr", "pl", "gr"])
    vowels = np.array(["a", "e", "i", "o", "u", "ea", "ou", "io", "ai"])
    codas = np.array(["", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "rt", "m"])
    n_syll = rng.choice([1, 2, 2, 3, 3, 4], size=size)
    words: list[str] = []
    seen: set[str] = set()
    for k in n_syll.tolist():
        while True:
            w = "".join(
                onsets[rng.integers(len(onsets))]
                + vowels[rng.integers(len(vowels))]
                + codas[rng.integers(len(codas))]
                for _ in range(k)
            )
            if w not in seen:
                seen.add(w)
                words.append(w)
                break
            k += 1  # short words run out: a taken one grows a syllable
    ranks = np.arange(1, size + 1, dtype=np.float64)
    weights = 1.0 / (ranks + 2.7) ** 1.07
    return pa.array(words, pa.string()), _lookup_table(np.cumsum(weights) / weights.sum())


def _hanzi(rng: np.random.Generator, size: int = 3_500) -> tuple[pa.Array, np.ndarray]:
    """Common-range Han characters plus punctuation, with Zipf-like weights (as a CDF)."""
    codes = rng.choice(np.arange(0x4E00, 0x9FA5), size=size, replace=False)
    chars = [chr(int(c)) for c in codes] + ["，", "。", "、"]
    weights = 1.0 / (np.arange(1, size + 1, dtype=np.float64) + 5.0) ** 0.9
    # Punctuation is frequent but never dominant.
    weights = np.concatenate([weights / weights.sum() * 0.9, [0.06, 0.03, 0.01]])
    return pa.array(chars, pa.string()), _lookup_table(np.cumsum(weights) / weights.sum())


def _lookup_table(cdf: np.ndarray, bits: int = 20) -> np.ndarray:
    """Token ids by quantile: drawing a uniform index into it samples from `cdf`.

    A gather from this table is much faster than `searchsorted` per token, at the cost of
    rounding each probability to a multiple of 2^-20 (the rarest words are slightly off).
    """
    points = (np.arange(1 << bits, dtype=np.float64) + 0.5) / (1 << bits)
    return np.searchsorted(cdf, points, side="right").clip(0, len(cdf) - 1).astype(np.int32)


def _draw(rng: np.random.Generator, table: np.ndarray, n: int) -> np.ndarray:
    return table[rng.integers(0, len(table), n)]


def _lengths(rng: np.random.Generator, n: int, median: float) -> np.ndarray:
    """Long-tailed document lengths (log-normal), clipped to 200..20,000 characters."""
    return np.clip(rng.lognormal(math.log(median), 0.85, n), 200, 20_000)


def _substitution_rate(jaccard: np.ndarray, ngram: int = NEAR_NGRAM) -> np.ndarray:
    """Per-token substitution probability that gives shingle-set Jaccard `jaccard`.

    A shingle survives when none of its n tokens changed: s = (1-p)^n; two sets of equal size
    sharing a fraction s have J = s / (2 - s), so s = 2J / (1 + J).
    """
    survive = 2 * jaccard / (1 + jaccard)
    return 1 - survive ** (1 / ngram)


class _Counts(NamedTuple):
    """Rows of each kind in one chunk."""

    orig: int
    docid: int
    exact: int
    near: int
    junk: int


@dataclass(frozen=True)
class _Lexicon:
    """Both token sets of the corpus, concatenated for one `take` (Chinese after the words)."""

    words: pa.Array
    word_cdf: np.ndarray
    char_cdf: np.ndarray
    tokens: pa.Array

    @classmethod
    def of(cls, vocab: tuple[pa.Array, np.ndarray], hanzi: tuple[pa.Array, np.ndarray]) -> _Lexicon:
        """The lexicon of `_vocabulary` and `_hanzi` results."""
        words, word_cdf = vocab
        chars, char_cdf = hanzi
        return cls(words, word_cdf, char_cdf, pa.concat_arrays([words, chars]))

    def join(self, ids: np.ndarray, offs: np.ndarray, zh_doc: np.ndarray) -> pa.Array:
        """Documents from flat token ids and their document offsets."""
        # One join for both scripts: Chinese tokens index the characters after the words and
        # join with no separator, English ones with a space.
        doc = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        shifted = np.where(zh_doc[doc], ids + len(self.words), ids)
        values = self.tokens.take(pa.array(shifted))
        lists = pa.ListArray.from_arrays(pa.array(offs, pa.int32()), values)
        return pc.binary_join(lists, pa.array(np.where(zh_doc, "", " ").tolist(), pa.string()))


@dataclass(frozen=True)
class _Originals:
    """Token ids of every original document, flat, with document offsets."""

    tok_ids: np.ndarray
    offsets: np.ndarray
    n_tok: np.ndarray
    is_zh: np.ndarray


@dataclass(frozen=True)
class _Copies:
    """Injected copies of originals: their source rows and texts (and near-dup targets)."""

    src: np.ndarray
    text: pa.Array
    level: np.ndarray | None = None


def _counts(n: int, mix: Mix) -> _Counts:
    """How many of the `n` rows are each kind; raises when no originals are left."""
    n_junk = round(n * mix.junk)
    n_docid = round(n * mix.doc_id_dup)
    n_exact = round(n * mix.exact_dup)
    n_near = round(n * mix.near_dup)
    n_orig = n - n_junk - n_docid - n_exact - n_near
    if n_orig <= 0:
        raise InputError("--docs is too small for the sample's mix; ask for at least 100")
    return _Counts(n_orig, n_docid, n_exact, n_near, n_junk)


def _originals(rng: np.random.Generator, n_orig: int, mix: Mix, lex: _Lexicon) -> _Originals:
    """Scripts, long-tailed lengths and token ids of the original documents."""
    is_zh = rng.random(n_orig) < mix.chinese
    # ~9.5 characters per pseudo-English word with its space; Chinese counts characters directly.
    n_tok = np.where(
        is_zh,
        _lengths(rng, n_orig, 700),
        _lengths(rng, n_orig, 1_300) / 9.5,
    ).astype(np.int64)
    n_tok = np.maximum(n_tok, np.where(is_zh, 200, 34))
    offsets = np.zeros(n_orig + 1, dtype=np.int64)
    np.cumsum(n_tok, out=offsets[1:])
    total = int(offsets[-1])
    doc_of_tok = np.repeat(np.arange(n_orig), n_tok)
    tok_zh = is_zh[doc_of_tok]
    tok_ids = np.where(
        tok_zh, _draw(rng, lex.char_cdf, total), _draw(rng, lex.word_cdf, total)
    ).astype(np.int32)
    return _Originals(tok_ids, offsets, n_tok, is_zh)


def _near_copies(rng: np.random.Generator, orig: _Originals, n_near: int, lex: _Lexicon) -> _Copies:
    """Copies of chosen originals with token substitutions at the target Jaccard rate."""
    n_orig = len(orig.n_tok)
    near_src = rng.choice(n_orig, size=n_near, replace=n_near > n_orig)
    near_level = NEAR_LEVELS[rng.integers(0, len(NEAR_LEVELS), n_near)]
    near_len = orig.n_tok[near_src]
    near_off = np.zeros(n_near + 1, dtype=np.int64)
    np.cumsum(near_len, out=near_off[1:])
    # concatenate copies, so the substitutions below leave the originals alone.
    near_ids = np.concatenate(
        [orig.tok_ids[orig.offsets[s] : orig.offsets[s + 1]] for s in near_src]
        if n_near
        else [np.empty(0, np.int32)]
    )
    near_doc = np.repeat(np.arange(n_near), near_len)
    near_zh = orig.is_zh[near_src][near_doc]
    p_sub = _substitution_rate(near_level)[near_doc]
    hit = rng.random(len(near_ids)) < p_sub
    zh_hit, en_hit = hit & near_zh, hit & ~near_zh
    near_ids[zh_hit] = _draw(rng, lex.char_cdf, int(zh_hit.sum()))
    near_ids[en_hit] = _draw(rng, lex.word_cdf, int(en_hit.sum()))
    return _Copies(near_src, lex.join(near_ids, near_off, orig.is_zh[near_src]), near_level)


def _exact_copies(rng: np.random.Generator, orig_text: pa.Array, n_exact: int) -> _Copies:
    """Case and whitespace variants of chosen originals that normalise to the original."""
    n_orig = len(orig_text)
    exact_src = rng.choice(n_orig, size=n_exact, replace=n_exact > n_orig)
    exact_text = orig_text.take(pa.array(exact_src))
    variant = rng.integers(0, 3, n_exact)
    upper = pc.utf8_upper(exact_text)
    spaced = pc.replace_substring(exact_text, " ", "  ", max_replacements=50)
    exact_text = pc.if_else(
        pa.array(variant == 0), upper, pc.if_else(pa.array(variant == 1), spaced, exact_text)
    )
    exact_text = pc.binary_join_element_wise("  ", exact_text, "\t", "")
    return _Copies(exact_src, exact_text)


def _doc_id_copies(rng: np.random.Generator, orig_text: pa.Array, n_docid: int) -> _Copies:
    """A shorter re-crawl of chosen originals, to go under the same id."""
    # Shorter, so that `longest` keeps the original.
    n_orig = len(orig_text)
    docid_src = rng.choice(n_orig, size=n_docid, replace=n_docid > n_orig)
    cut = rng.uniform(0.5, 0.9, n_docid)
    docid_text = pa.array(
        [
            t[: max(1, int(len(t) * c))]
            for t, c in zip(orig_text.take(pa.array(docid_src)).to_pylist(), cut, strict=True)
        ],
        pa.string(),
    )
    return _Copies(docid_src, docid_text)


def _junk(rng: np.random.Generator, n_junk: int, lex: _Lexicon) -> tuple[list[int], pa.Array]:
    """Junk kinds (0..4) and texts: null/blank text, too-short text, or a null/blank id."""
    junk_kind = rng.integers(0, 5, n_junk).tolist()
    short = [
        " ".join(lex.words.take(pa.array(_draw(rng, lex.word_cdf, 4))).to_pylist())
        for _ in range(n_junk)
    ]
    junk_text = pa.array(
        [
            None if k == 0 else "   " if k == 1 else short[i] if k == 2 else "x" * 300
            for i, k in enumerate(junk_kind)
        ],
        pa.string(),
    )
    return junk_kind, junk_text


def _row_ids(
    first_id: int, c: _Counts, docid_src: np.ndarray, junk_kind: list[int]
) -> tuple[list[str], list[str | None]]:
    """Ids of the originals, and of every row in corpus order (originals first)."""
    orig_ids = [f"d{first_id + i:010d}" for i in range(c.orig)]
    new_ids = [f"d{first_id + c.orig + i:010d}" for i in range(c.near + c.exact + c.junk)]
    near_new = new_ids[: c.near]
    exact_new = new_ids[c.near : c.near + c.exact]
    junk_new: list[str | None] = list(new_ids[c.near + c.exact :])
    for i, k in enumerate(junk_kind):
        if k == 3:
            junk_new[i] = None
        elif k == 4:
            junk_new[i] = " "
    ids = orig_ids + [orig_ids[s] for s in docid_src] + list(exact_new) + list(near_new) + junk_new
    return orig_ids, ids


def _truth(
    ids: list[str | None],
    orig_ids: list[str],
    c: _Counts,
    docid: _Copies,
    exact: _Copies,
    near: _Copies,
) -> pa.Table:
    """The ground truth of each row in corpus order: its kind, source group and target."""
    assert near.level is not None  # set by _near_copies
    kind = (
        ["original"] * c.orig
        + ["doc_id"] * c.docid
        + ["exact"] * c.exact
        + ["near"] * c.near
        + ["junk"] * c.junk
    )
    src_of = np.concatenate(
        [np.arange(c.orig), docid.src, exact.src, near.src, np.full(c.junk, -1)]
    ).astype(np.int64)
    group = [orig_ids[s] if s >= 0 else None for s in src_of.tolist()]
    similarity = np.concatenate(
        [
            np.full(c.orig, np.nan),
            np.full(c.docid, np.nan),
            np.ones(c.exact),
            near.level,
            np.full(c.junk, np.nan),
        ]
    )
    return pa.table(
        {
            "doc_id": pa.array(ids, pa.string()),
            "kind": pa.array(kind, pa.string()),
            "group_id": pa.array(group, pa.string()),
            "target_similarity": pa.array(similarity, pa.float64(), mask=np.isnan(similarity)),
        }
    )


def _data(
    rng: np.random.Generator, ids: list[str | None], texts: pa.Array, zh_row: np.ndarray
) -> pa.Table:
    """The corpus rows in corpus order, with metadata drawn per row."""
    # Drawn for every row alike: a copy's site and crawl time are independent of its source's.
    n = len(ids)
    source = SOURCES[np.searchsorted(np.cumsum(SOURCE_P), rng.random(n), side="right").clip(0, 4)]
    ts = rng.integers(TS_START, TS_END, n) * 1_000_000
    quality = np.round(rng.beta(5, 2, n), 4)
    quality_null = rng.random(n) < 0.05
    license_ = np.where(rng.random(n) < 0.92, None, "cc-by-sa-4.0")
    urls = [
        None if d is None else f"https://{s}.example.org/{d.strip() or 'unknown'}"
        for d, s in zip(ids, source.tolist(), strict=True)
    ]
    return pa.table(
        {
            "doc_id": pa.array(ids, pa.string()),
            "text": texts,
            "url": pa.array(urls, pa.string()),
            "source": pa.array(source.tolist(), pa.string()),
            "lang": pa.array(np.where(zh_row, "zh", "en").tolist(), pa.string()),
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "quality": pa.array(quality, pa.float64(), mask=quality_null),
            "license": pa.array(license_.tolist(), pa.string()),
        }
    )


def _chunk(
    chunk_index: int,
    n: int,
    seed: int,
    first_id: int,
    mix: Mix,
    vocab: tuple[pa.Array, np.ndarray],
    hanzi: tuple[pa.Array, np.ndarray],
) -> tuple[pa.Table, pa.Table]:
    """One chunk of `n` shuffled corpus rows and their truth, seeded from (seed, chunk_index)."""
    # Every helper draws from the one generator, so the order of the calls below is part of
    # the output: changing it changes every sample (and the golden test).
    rng = np.random.default_rng([seed, chunk_index])
    lex = _Lexicon.of(vocab, hanzi)
    c = _counts(n, mix)
    orig = _originals(rng, c.orig, mix, lex)
    orig_text = lex.join(orig.tok_ids, orig.offsets, orig.is_zh)
    near = _near_copies(rng, orig, c.near, lex)
    exact = _exact_copies(rng, orig_text, c.exact)
    docid = _doc_id_copies(rng, orig_text, c.docid)
    junk_kind, junk_text = _junk(rng, c.junk, lex)

    orig_ids, ids = _row_ids(first_id, c, docid.src, junk_kind)
    texts = pa.concat_arrays([orig_text, docid.text, exact.text, near.text, junk_text])
    is_zh = orig.is_zh
    zh_row = np.concatenate(
        [is_zh, is_zh[docid.src], is_zh[exact.src], is_zh[near.src], np.zeros(c.junk, bool)]
    )
    data = _data(rng, ids, texts, zh_row)
    order = pa.array(rng.permutation(n))
    truth = _truth(ids, orig_ids, c, docid, exact, near)
    return data.take(order), truth.take(order)


def new_output(output: str | Path, docs: int) -> Path:
    """The sample's folder, created; refused when it holds anything, or for under 100 docs."""
    if docs < 100:
        raise InputError(f"--docs {docs}: ask for at least 100 documents")
    out = Path(output)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"output {out} exists and is not empty; choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def generate(
    output: str | Path,
    docs: int,
    seed: int = 0,
    mix: Mix | None = None,
    fmt: str = "parquet",
) -> dict[str, object]:
    """Write a sample corpus of `docs` rows to the folder `output`; returns a summary."""
    out = new_output(output, docs)
    mix = mix or Mix()
    vocab = _vocabulary(np.random.default_rng([seed, 1_000_003]))
    hanzi = _hanzi(np.random.default_rng([seed, 1_000_033]))
    n_chunks = max(1, math.ceil(docs / CHUNK_DOCS))
    sizes = [docs // n_chunks + (1 if i < docs % n_chunks else 0) for i in range(n_chunks)]
    truth_writer: pq.ParquetWriter | None = None
    first = 0
    counts: dict[str, int] = {}
    for i, size in enumerate(sizes):
        data, truth = _chunk(i, size, seed, first, mix, vocab, hanzi)
        first += size
        name = f"part-{i:05d}"
        if fmt == "jsonl":
            _write_jsonl(data, out / f"{name}.jsonl")
        else:
            pq.write_table(data, out / f"{name}.parquet", row_group_size=10_000)
        if truth_writer is None:
            truth_writer = pq.ParquetWriter(out / TRUTH_FILE, truth.schema)
        truth_writer.write_table(truth)
        for k, c in zip(*np.unique(truth["kind"].to_numpy(False), return_counts=True), strict=True):
            counts[str(k)] = counts.get(str(k), 0) + int(c)
    assert truth_writer is not None
    truth_writer.close()
    return {"docs": docs, "files": n_chunks, "kinds": counts, "path": str(out)}


def _write_jsonl(table: pa.Table, path: Path) -> None:
    import json

    with path.open("w", encoding="utf-8") as fh:
        for row in table.to_pylist():
            if row.get("timestamp") is not None:
                row["timestamp"] = row["timestamp"].isoformat()
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
