"""The read pass: every Arrow scorer, the normalised-text hash and the dedup features at once.

The text is the widest column by far, so it crosses from the JVM to Python once: one
`mapInArrow` computes everything that needs it (the scorers of the enabled filters, the content
hash, the features the enabled dedup stages declare) and drops it. The rest of the pipeline
works on the narrow frame this returns.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.base import Filter, TextFeature
from corpusclean.pipelines.columns import BAD_CHARS, NORM_HASH, REASON, REFUSED_TEXT, STAGE

# U+FFFD (what a decoder writes for bytes it could not decode) and the C0/C1 control characters
# (Unicode category Cc: U+0000-001F, U+007F-009F) other than tab, newline and carriage return.
BAD_CHARS_RE2 = r"[\x{FFFD}\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F]"


def bad_char_counts(texts: pa.Array) -> pa.Array:
    """Per text, how many of its characters are U+FFFD or control characters (int64; null
    stays null): what the audit's charset check divides by the length."""
    return pc.cast(pc.count_substring_regex(texts, BAD_CHARS_RE2), pa.int64())


def collapse_whitespace(texts: pa.Array) -> pa.Array:
    r"""Each run of ASCII whitespace (RE2's `\s`) replaced by one space; nulls stay null.

    Vectorised over the Arrow data buffer. It gives the same strings as RE2's
    `replace_substring_regex(r"\s+", " ")`, faster (bench/normalise.py measures
    both).
    """
    n = len(texts)
    if n == 0 or not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        return texts
    validity = texts.buffers()[0]
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    rel, data = value_buffers(texts, relative=True)
    if data.size == 0:
        return texts
    # The bytes RE2's `\s` matches: space, and tab, LF, FF, CR (9-13 but not VT, 11). NFKC has
    # already turned the other Unicode spaces (NBSP, ideographic space, ...) into U+0020.
    # Comparisons, not a 256-entry lookup: numpy compiles these to vector code, the lookup
    # to a gather, several times slower per byte (bench/normalise.py).
    other = (data - np.uint8(9)) <= np.uint8(4)
    other &= data != 11
    ws = other | (data == 32)
    # A whitespace byte is dropped when the byte before it, in the same string, is whitespace
    # too; otherwise it is the first of its run and becomes a space.
    drop = np.zeros(data.size, dtype=bool)
    np.logical_and(ws[1:], ws[:-1], out=drop[1:])
    drop[rel[:-1][rel[:-1] < data.size]] = False
    dropped = np.flatnonzero(drop)
    if dropped.size == 0 and not other.any():
        return texts
    out = data.copy()
    out[other] = 32
    if dropped.size:
        out = np.delete(out, dropped)
    new_offsets = (rel - np.searchsorted(dropped, rel)).astype(width)
    bitmap = None
    if validity is not None and texts.null_count:
        valid = pc.is_valid(texts).to_numpy(zero_copy_only=False)
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        texts.type, n, [bitmap, pa.py_buffer(new_offsets), pa.py_buffer(out)]
    )


def normalise_text(texts: pa.Array) -> pa.Array:
    """NFKC, case-folded, whitespace collapsed to single spaces and trimmed.

    pyarrow's `utf8_lower` is a per-character lower-casing; full case folding (ß -> ss) differs
    only outside ASCII, so only the non-ASCII rows go through Python's `str.casefold`.
    """
    norm = pc.utf8_normalize(texts, "NFKC")
    norm = pc.utf8_lower(norm)
    norm = pc.utf8_trim_whitespace(collapse_whitespace(norm))
    non_ascii = pc.invert(pc.fill_null(pc.string_is_ascii(norm), True))
    if not pc.any(non_ascii).as_py():
        return norm
    folded = [t.casefold() for t in pc.filter(norm, non_ascii).to_pylist()]
    return pc.replace_with_mask(norm, non_ascii, pa.array(folded, norm.type))


def content_hashes(texts: pa.Array) -> pa.Array:
    """128-bit BLAKE2b of each normalised text (null stays null), as binary(16)."""
    norm = normalise_text(texts)
    offsets, data = value_buffers(norm)
    # Hashed from the Arrow buffer: the same UTF-8 bytes str.encode gives, without making and
    # re-encoding a Python str per document.
    view = memoryview(data)
    bounds = offsets.tolist()
    valid = pc.is_valid(norm).to_numpy(zero_copy_only=False).tolist()
    return pa.array(
        [
            hashlib.blake2b(view[a:b], digest_size=16).digest() if ok else None
            for a, b, ok in zip(bounds[:-1], bounds[1:], valid, strict=True)
        ],
        pa.binary(),
    )


def spark_fields(fields: list[pa.Field]) -> list[StructField]:
    """Arrow fields (a scorer's score columns) as Spark fields."""
    return list(from_arrow_schema(pa.schema(fields)).fields) if fields else []


# Text the scorers take at once (`ReadPass._score`): their kernels hold ~25 bytes a
# character of it (code points, token spans), so 32 MB of text stays under a gigabyte.
SCORE_SLICE_BYTES = 32 << 20


def _slices(batch: pa.RecordBatch, text_col: str, limit: int) -> list[pa.RecordBatch]:
    """`batch` cut into consecutive slices of at most `limit` bytes of text each (a longer
    document is a slice of its own)."""
    offs, _ = value_buffers(batch.column(text_col), relative=True)
    if batch.num_rows == 0 or int(offs[-1]) <= limit:
        return [batch]
    out = []
    start = 0
    while start < batch.num_rows:
        end = int(np.searchsorted(offs, offs[start] + limit, side="right")) - 1
        end = max(end, start + 1)
        out.append(batch.slice(start, end - start))
        start = end
    return out


def _scatter(values: pa.Array, pos: pa.Array | None) -> pa.Array:
    """`values` of the live rows back at their places in the batch, null elsewhere."""
    return values if pos is None else pc.take(values, pos)


def _positions(live: np.ndarray) -> tuple[np.ndarray, pa.Array | None]:
    """The live rows' indices, and for every row its index among them (null if not live);
    None when every row is live, so nothing needs moving."""
    idx = np.flatnonzero(live)
    if idx.size == live.size:
        return idx, None
    pos = np.full(live.size, -1, dtype=np.int64)
    pos[idx] = np.arange(idx.size)
    return idx, pa.array(pos, mask=pos < 0)


@dataclass(frozen=True)
class ReadPass:
    """What the one Arrow pass over the text computes (`run_read_pass`)."""

    text_col: str
    scorers: tuple[Filter, ...] = ()
    features: tuple[TextFeature, ...] = ()
    # The audit's bad-character count of each row still in the corpus (`_bad_chars`), so the
    # audit need not send the published text to Python again (about 2% of the pass's time).
    bad_chars: bool = False
    # `__refused_text`: the text of each row with a reason, for rejected/, which then need not
    # read the input's text again.
    refused_text: bool = False

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        texts = batch.column(self.text_col)
        reason = batch.column(REASON)
        stage = batch.column(STAGE)
        live = pc.and_(pc.is_null(reason), pc.is_valid(texts)).to_numpy(zero_copy_only=False)
        columns = {n: batch.column(n) for n in batch.schema.names if n != self.text_col}
        if self.scorers:
            idx, pos = _positions(live)
            sub = batch if pos is None else batch.take(pa.array(idx))
            for step, (scores, verdict) in zip(self.scorers, self._score(sub), strict=True):
                for field in step.score_fields():
                    columns[field.name] = _scatter(scores[field.name].cast(field.type), pos)
                out = _scatter(verdict, pos)
                hit = pc.is_valid(out)
                reason = pc.if_else(hit, out, reason)
                stage = pc.if_else(hit, pa.scalar(step.name), stage)
                live &= ~hit.to_numpy(zero_copy_only=False)
        columns[REASON], columns[STAGE] = reason, stage
        # Rejected rows keep their other columns but get no features: nothing downstream
        # reads them.
        idx, pos = _positions(live)
        sub = texts if pos is None else texts.take(pa.array(idx))
        columns[NORM_HASH] = _scatter(content_hashes(sub), pos)
        # In the order `schema` gives: Spark reads the columns by position.
        if self.refused_text:
            columns[REFUSED_TEXT] = pc.if_else(pc.is_valid(reason), texts, None)
        if self.bad_chars:
            columns[BAD_CHARS] = _scatter(bad_char_counts(sub), pos)
        for feature in self.features:
            for name, values in feature.compute(sub).items():
                columns[name] = _scatter(values, pos)
        return pa.RecordBatch.from_pydict(columns)

    def _score(self, sub: pa.RecordBatch) -> list[tuple[dict[str, pa.Array], pa.Array]]:
        """Each scorer's scores and verdict (a string per row, null to keep) for every row of
        `sub`, in order: a row an earlier scorer rejected gets null scores and no verdict from
        the later ones.

        The text is taken a slice of at most `SCORE_SLICE_BYTES` at a time, so the scorers'
        decoded text and tokens stay bounded however large the documents. Within a slice the
        scorers share one copy of the rows (the filters of pipelines/heuristics.py then decode
        and tokenize it once for all of them), and rejected rows are still scored by later
        scorers, with their results dropped; only once a quarter of the slice's rows are
        rejected are the survivors copied out for the scorers left (their decoded text and
        tokens with them), since scoring a rejected row costs less than a copy per scorer
        would."""
        parts: list[list[tuple[dict[str, pa.Array], pa.Array]]] = [[] for _ in self.scorers]
        for part in _slices(sub, self.text_col, SCORE_SLICE_BYTES):
            n = part.num_rows
            alive = np.ones(n, dtype=bool)
            rows = np.arange(n)  # the slice's rows in `cur`
            cur = part
            for k, step in enumerate(self.scorers):
                if k and alive.sum() < 0.75 * rows.size:
                    sel = np.flatnonzero(alive[rows])
                    taken = cur.take(pa.array(sel))
                    # The heuristic filters' decoded text goes with the rows (a copy, not a
                    # second decode and tokenize).
                    heuristics = sys.modules.get("corpusclean.pipelines.heuristics")
                    if heuristics is not None:
                        heuristics.carry(
                            cur.column(self.text_col), taken.column(self.text_col), sel
                        )
                    rows, cur = rows[sel], taken
                scores = step.score(cur)
                verdict = step.verdict(scores).cast(pa.string())
                seen = pa.array(alive[rows])
                at = None
                if rows.size != n:
                    where = np.full(n, -1, dtype=np.int64)
                    where[rows] = np.arange(rows.size)
                    at = pa.array(where, mask=where < 0)
                said = _scatter(pc.if_else(seen, verdict, None), at)
                kept = {
                    f.name: _scatter(pc.if_else(seen, scores[f.name].cast(f.type), None), at)
                    for f in step.score_fields()
                }
                alive &= ~pc.is_valid(said).to_numpy(zero_copy_only=False)
                parts[k].append((kept, said))
            # The heuristic filters remember the last slice decoded; it is done with.
            heuristics = sys.modules.get("corpusclean.pipelines.heuristics")
            if heuristics is not None:
                heuristics.forget()
        out = []
        for step, chunks in zip(self.scorers, parts, strict=True):
            if len(chunks) == 1:
                out.append(chunks[0])
                continue
            names = [f.name for f in step.score_fields()]
            scores = {n: pa.concat_arrays([c[0][n] for c in chunks]) for n in names}
            out.append((scores, pa.concat_arrays([c[1] for c in chunks])))
        return out

    def schema(self, schema: StructType) -> StructType:
        """The schema `run_read_pass` returns for an input of `schema`."""
        fields = [f for f in schema.fields if f.name != self.text_col]
        for step in self.scorers:
            fields.extend(spark_fields(step.score_fields()))
        fields.append(StructField(NORM_HASH, BinaryType(), True))
        if self.refused_text:
            fields.append(StructField(REFUSED_TEXT, schema[self.text_col].dataType, True))
        if self.bad_chars:
            fields.append(StructField(BAD_CHARS, LongType(), True))
        for feature in self.features:
            fields.extend(feature.fields())
        return StructType(fields)


def run_read_pass(df: DataFrame, spec: ReadPass) -> DataFrame:
    """Score, hash and sketch the text in one Arrow pass; the text does not come out.

    Reads `spec.text_col`, `_reject_reason` and `_stage` (rows with a reason are not scored
    and get no features). Each scorer of `spec.scorers` runs, in order, on the rows no earlier
    one rejected, adds its score columns and sets `_reject_reason`/`_stage` where its keep rule
    says no. Rows still in the corpus then get `_norm_hash` (binary, 128-bit BLAKE2b of the
    normalised text), with `spec.bad_chars` `_bad_chars` (int64, see `bad_char_counts`), and
    every column of `spec.features`. With `spec.refused_text`, `__refused_text` holds the text
    of every row with a reason (null for the others). Every other input column passes
    through; the text column is dropped: it is the one wide column, and only rejected/ needs
    it again, for the refused rows.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield spec.batch(batch)

    return df.mapInArrow(run, spec.schema(df.schema))
