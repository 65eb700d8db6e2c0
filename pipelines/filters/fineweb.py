"""`fineweb_quality`: FineWeb's own quality rules (Penedo et al. 2024, section 3.3).

Added by FineWeb on top of Gopher and C4, after ablations on what those missed: pages where
under 12% of lines end in sentence punctuation, where over 67% of lines are 30 characters or
shorter (menus, lists of links), where repeated lines hold over 1% of the characters, or with
more than 0.3 newlines per word (lists). Lines are split on newlines, blank lines ignored, and
lengths are in characters; a page with no non-blank line is rejected as empty. The reasons are
the reference implementation's (datatrove's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusclean.pipelines.base import Bound, Check, Rule, ScoreValues, StepParams, register
from corpusclean.pipelines.columns import score_column
from corpusclean.pipelines.filters import TextScorer, kernels, score_arrays

PUNCT = score_column("fineweb_line_punct_ratio")
SHORT = score_column("fineweb_short_line_ratio")
DUP_CHARS = score_column("fineweb_char_dup_ratio")
LIST = score_column("fineweb_list_ratio")
SCORES = [PUNCT, SHORT, DUP_CHARS, LIST]


class FineWebParams(StepParams):
    """`fineweb_quality:` — FineWeb's published thresholds."""

    line_punct_thr: float = Field(0.12, ge=0, le=1)
    line_punct_exclude_zero: bool = False
    short_line_thr: float = Field(0.67, ge=0, le=1)
    short_line_length: int = Field(30, ge=0)
    char_duplicates_ratio: float = Field(0.01, ge=0, le=1)
    new_line_ratio: float = Field(0.3, ge=0)


@register
class FineWebQuality(TextScorer):
    """Reads the text; scores `_score_fineweb_line_punct_ratio`, `_short_line_ratio`,
    `_char_dup_ratio` and `_list_ratio` (null for a page with no non-blank line); rejects
    with empty, line_punct_ratio, short_line_ratio, char_dup_ratio or list_ratio."""

    name = "fineweb_quality"
    Params = FineWebParams
    params: FineWebParams

    def score_names(self) -> list[str]:
        return SCORES

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        h = kernels()
        text = h.decode(batch.column(self.roles.text))
        _, _, toff = text.tokens()
        out = h.fineweb_batch(
            text.cps, text.cpo, toff, h.char_table(), self.params.short_line_length
        )
        # A page with no non-blank line has no ratios (NaN): null, like a row without text.
        return score_arrays(SCORES, out, text.valid & ~np.isnan(out[:, 0]))

    def keep_rules(self) -> Sequence[Rule]:
        p = self.params
        return [
            # Every ratio is null together, on a page with no non-blank line.
            Check("empty", lambda values: np.isnan(values[PUNCT])),
            Bound(
                "line_punct_ratio",
                PUNCT,
                ">=",
                p.line_punct_thr,
                unless=_no_punct if p.line_punct_exclude_zero else None,
            ),
            Bound("short_line_ratio", SHORT, "<=", p.short_line_thr),
            Bound("char_dup_ratio", DUP_CHARS, "<=", p.char_duplicates_ratio),
            Bound("list_ratio", LIST, "<=", p.new_line_ratio),
        ]


def _no_punct(values: ScoreValues) -> np.ndarray:
    # `line_punct_exclude_zero` (datatrove's option of that name): a page with no line ending
    # in punctuation at all passes the line-punctuation rule.
    return values[PUNCT] == 0
