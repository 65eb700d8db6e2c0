"""`c4_quality`: C4's page rules (Raffel et al. 2020, section 2.2), as FineWeb uses them.

C4 keeps only lines that end in terminal punctuation and have at least three words, drops
lines mentioning javascript or a cookie/terms policy and lines with a word over 1,000
characters, and then rejects a page with fewer than five sentences on the lines left, any
"lorem ipsum", or any curly bracket. Words per line are whitespace-separated words, with each
CJK character one word (Chinese writes no spaces); sentences are counted as spaCy's
sentencizer splits them. The filter rejects pages and never rewrites their text: the line
rules decide only which lines count. The reasons are the reference implementation's
(datatrove's).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusclean.pipelines.base import Bound, Check, Rule, ScoreValues, StepParams, register
from corpusclean.pipelines.columns import score_column
from corpusclean.pipelines.filters import TextScorer, kernels, score_arrays

SENTENCES = score_column("c4_sentences")
LOREM = score_column("c4_lorem_ipsum_line")
CURLY = score_column("c4_curly_bracket_line")
KEPT = score_column("c4_kept_lines")
SCORES = [SENTENCES, LOREM, CURLY, KEPT]

POLICY = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
]


class C4Params(StepParams):
    """`c4_quality:` — the rules C4's paper and code apply."""

    filter_no_terminal_punct: bool = True
    min_num_sentences: int = Field(5, ge=-1)
    min_words_per_line: int = Field(3, ge=-1)
    max_word_length: int = Field(1000, ge=-1)
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True


@register
class C4Quality(TextScorer):
    """Reads the text; scores `_score_c4_sentences`, `_score_c4_lorem_ipsum_line` and
    `_score_c4_curly_bracket_line` (the first counted line with it, 1-based; 0 = none) and
    `_score_c4_kept_lines` (the fraction of lines the line rules keep); rejects with
    lorem_ipsum or curly_bracket (whichever comes first), or too_few_sentences."""

    name = "c4_quality"
    Params = C4Params
    params: C4Params

    def score_names(self) -> list[str]:
        return SCORES

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        h = kernels()
        p = self.params
        text = h.decode(batch.column(self.roles.text))
        pats, off = h.patterns(["lorem ipsum", "javascript", *POLICY])
        flags = np.array(
            [
                p.filter_no_terminal_punct,
                p.filter_lorem_ipsum,
                p.filter_javascript,
                p.filter_curly_bracket,
                p.filter_policy,
            ],
            dtype=np.bool_,
        )
        ts, te, toff = text.tokens()
        out = h.c4_batch(
            text.cps,
            text.cpo,
            ts,
            te,
            toff,
            h.char_table(),
            pats,
            off,
            flags,
            p.min_words_per_line,
            p.max_word_length,
        )
        return score_arrays(SCORES, out, text.valid)

    def keep_rules(self) -> Sequence[Rule]:
        sentences = self.params.min_num_sentences
        return [
            Check("lorem_ipsum", _lorem_first),
            Check("curly_bracket", lambda values: values[CURLY] > 0),
            # A negative bound (-1) turns the rule off.
            Bound("too_few_sentences", SENTENCES, ">=", sentences if sentences >= 0 else None),
        ]


def _lorem_first(values: ScoreValues) -> np.ndarray:
    """Pages whose first "lorem ipsum" line comes no later than their first curly-bracket
    line, or that have no curly bracket: the reference checks each line for lorem ipsum, then
    for a curly bracket, and stops at the first it finds."""
    lorem = np.nan_to_num(values[LOREM])
    curly = np.nan_to_num(values[CURLY])
    return (lorem > 0) & ((curly == 0) | (lorem <= curly))
