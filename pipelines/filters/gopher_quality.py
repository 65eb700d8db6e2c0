"""`gopher_quality`: Gopher's quality rules (Rae et al. 2021, appendix A1), as FineWeb uses them.

A document is kept when it has 50 to 100,000 words whose mean length is 3 to 10 characters,
at most 0.1 `#` and at most 0.1 ellipses per word, at most 90% of lines starting with a bullet
and 30% ending with an ellipsis, at least 80% of words with a letter, and at least two of the
stop words. Words are counted as pipelines/heuristics.py says (spaCy's English rules; each CJK
character one word); the word-count and length rules count only words that are not all
punctuation. The reasons are the reference implementation's (datatrove's), so results compare
directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pydantic import Field

from corpusclean.pipelines.base import Bound, Rule, StepParams, register
from corpusclean.pipelines.columns import score_column
from corpusclean.pipelines.filters import TextScorer, kernels, score_arrays

# Score columns, in the kernel's order.
WORDS = score_column("gopher_words")
MEAN_WORD = score_column("gopher_mean_word_length")
HASHES = score_column("gopher_hash_ratio")
ELLIPSES = score_column("gopher_ellipsis_ratio")
BULLETS = score_column("gopher_bullet_lines")
END_ELLIPSIS = score_column("gopher_ellipsis_lines")
ALPHA = score_column("gopher_alpha_words")
STOP = score_column("gopher_stop_words")
SCORES = [WORDS, MEAN_WORD, HASHES, ELLIPSES, BULLETS, END_ELLIPSIS, ALPHA, STOP]


class GopherQualityParams(StepParams):
    """`gopher_quality:` — each bound off when null (conf/presets/ explains the values)."""

    min_doc_words: int | None = Field(50, ge=0)
    max_doc_words: int | None = Field(100_000, ge=1)
    min_avg_word_length: float | None = Field(3, ge=0)
    max_avg_word_length: float | None = Field(10, ge=0)
    max_symbol_word_ratio: float | None = Field(0.1, ge=0)
    max_bullet_lines_ratio: float | None = Field(0.9, ge=0, le=1)
    max_ellipsis_lines_ratio: float | None = Field(0.3, ge=0, le=1)
    min_alpha_words_ratio: float | None = Field(0.8, ge=0, le=1)
    min_stop_words: int | None = Field(2, ge=0)
    stop_words: list[str] = Field(
        default_factory=lambda: ["the", "be", "to", "of", "and", "that", "have", "with"]
    )


@register
class GopherQuality(TextScorer):
    """Reads the text; scores the eight `_score_gopher_*` quality columns; rejects with
    gopher_short_doc, gopher_long_doc, gopher_below_avg_threshold,
    gopher_above_avg_threshold, gopher_too_many_hashes, gopher_too_many_ellipsis,
    gopher_too_many_bullets, gopher_too_many_end_ellipsis, gopher_below_alpha_threshold or
    gopher_enough_stop_words (the first rule broken, in that order)."""

    name = "gopher_quality"
    Params = GopherQualityParams
    params: GopherQualityParams

    def score_names(self) -> list[str]:
        return SCORES

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        h = kernels()
        text = h.decode(batch.column(self.roles.text))
        stop = h.hash_strings(self.params.stop_words)
        ts, te, toff = text.tokens()
        # Only tokens as short as the longest stop word are looked up.
        longest = max((len(w) for w in self.params.stop_words), default=0)
        out = h.gopher_quality_batch(
            text.cps, text.cpo, ts, te, toff, h.char_table(), stop, longest
        )
        return score_arrays(SCORES, out, text.valid)

    def keep_rules(self) -> Sequence[Rule]:
        p = self.params
        return [
            Bound("gopher_short_doc", WORDS, ">=", p.min_doc_words),
            Bound("gopher_long_doc", WORDS, "<=", p.max_doc_words),
            Bound("gopher_below_avg_threshold", MEAN_WORD, ">=", p.min_avg_word_length),
            Bound("gopher_above_avg_threshold", MEAN_WORD, "<=", p.max_avg_word_length),
            Bound("gopher_too_many_hashes", HASHES, "<=", p.max_symbol_word_ratio),
            Bound("gopher_too_many_ellipsis", ELLIPSES, "<=", p.max_symbol_word_ratio),
            Bound("gopher_too_many_bullets", BULLETS, "<=", p.max_bullet_lines_ratio),
            Bound("gopher_too_many_end_ellipsis", END_ELLIPSIS, "<=", p.max_ellipsis_lines_ratio),
            Bound("gopher_below_alpha_threshold", ALPHA, ">=", p.min_alpha_words_ratio),
            Bound("gopher_enough_stop_words", STOP, ">=", p.min_stop_words),
        ]
