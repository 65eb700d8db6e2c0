"""`gopher_repetition`: Gopher's repetition rules (Rae et al. 2021, table A1).

Repeated lines, paragraphs and n-grams are the signature of boilerplate, spam and generated
pages. A document is rejected when too many of its paragraphs or lines repeat earlier ones (by
count or by characters), when its most frequent 2-, 3- or 4-gram covers too many of its
characters, or when its repeated 5- to 10-grams do. Lines split on runs of newlines,
paragraphs on two or more; n-grams are of words as pipelines/heuristics.py counts them. The
reasons are the reference implementation's (datatrove's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from corpusclean.pipelines.base import Bound, Check, Rule, StepParams, register
from corpusclean.pipelines.columns import score_column
from corpusclean.pipelines.filters import TextScorer, kernels, score_arrays

DUP_PARA = score_column("gopher_dup_para_frac")
DUP_PARA_CHARS = score_column("gopher_dup_para_char_frac")
DUP_LINE = score_column("gopher_dup_line_frac")
DUP_LINE_CHARS = score_column("gopher_dup_line_char_frac")


def top_column(n: int) -> str:
    return score_column(f"gopher_top_{n}_gram")


def dup_column(n: int) -> str:
    return score_column(f"gopher_dup_{n}_gram")


class GopherRepetitionParams(StepParams):
    """`gopher_repetition:` — each bound off when null; n-gram bounds by n."""

    dup_para_frac: float | None = Field(0.3, ge=0, le=1)
    dup_para_char_frac: float | None = Field(0.2, ge=0, le=1)
    dup_line_frac: float | None = Field(0.3, ge=0, le=1)
    dup_line_char_frac: float | None = Field(0.2, ge=0, le=1)
    top_n_grams: dict[int, float] = Field(default_factory=lambda: {2: 0.2, 3: 0.18, 4: 0.16})
    dup_n_grams: dict[int, float] = Field(
        default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}
    )

    @field_validator("top_n_grams", "dup_n_grams")
    @classmethod
    def _sizes(cls, value: dict[int, float]) -> dict[int, float]:
        for n, frac in value.items():
            if not 1 <= n <= 50:
                raise ValueError(f"n-gram size {n} is outside 1..50")
            if not 0 <= frac <= 1:
                raise ValueError(f"the bound for {n}-grams ({frac}) is outside 0..1")
        return value


@register
class GopherRepetition(TextScorer):
    """Reads the text; scores `_score_gopher_dup_{para,line}[_char]_frac`,
    `_score_gopher_top_<n>_gram` and `_score_gopher_dup_<n>_gram` (null for an empty text);
    rejects with empty, dup_para_frac, dup_para_char_frac, dup_line_frac, dup_line_char_frac,
    top_<n>_gram or duplicated_<n>_n_grams (the first rule broken, in that order)."""

    name = "gopher_repetition"
    Params = GopherRepetitionParams
    params: GopherRepetitionParams

    def score_names(self) -> list[str]:
        p = self.params
        return [
            DUP_PARA,
            DUP_PARA_CHARS,
            DUP_LINE,
            DUP_LINE_CHARS,
            *[top_column(n) for n in p.top_n_grams],
            *[dup_column(n) for n in p.dup_n_grams],
        ]

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        h = kernels()
        p = self.params
        text = h.decode(batch.column(self.roles.text))
        top = np.array(list(p.top_n_grams), dtype=np.int64)
        dup = np.array(list(p.dup_n_grams), dtype=np.int64)
        ts, te, toff = text.tokens()
        out = h.gopher_repetition_batch(text.cps, text.cpo, ts, te, toff, h.char_table(), top, dup)
        # An empty text has no fractions (NaN): null, like a row without text.
        return score_arrays(self.score_names(), out, text.valid & ~np.isnan(out[:, 0]))

    def keep_rules(self) -> Sequence[Rule]:
        p = self.params
        return [
            # Every fraction is null together, on an empty text.
            Check("empty", lambda values: np.isnan(values[DUP_PARA])),
            Bound("dup_para_frac", DUP_PARA, "<=", p.dup_para_frac),
            Bound("dup_para_char_frac", DUP_PARA_CHARS, "<=", p.dup_para_char_frac),
            Bound("dup_line_frac", DUP_LINE, "<=", p.dup_line_frac),
            Bound("dup_line_char_frac", DUP_LINE_CHARS, "<=", p.dup_line_char_frac),
            *[Bound(f"top_{n}_gram", top_column(n), "<=", f) for n, f in p.top_n_grams.items()],
            *[
                Bound(f"duplicated_{n}_n_grams", dup_column(n), "<=", f)
                for n, f in p.dup_n_grams.items()
            ],
        ]
