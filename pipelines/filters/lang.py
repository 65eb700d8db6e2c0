"""`lang`: label every document with its language and keep only the languages asked for.

The model is the one bundled in `py3langid` (a naive Bayes over byte n-grams, 140 language
labels; nothing downloads), run over the whole batch by the compiled kernel of
`pipelines/langid.py`, which gives py3langid's own answers. Every scored row gets
`_score_lang` (the code) and `_score_lang_score` (its probability); the job publishes both in
data/ as `lang` and `lang_score` (`publishes`), so a multilingual corpus can be split later
without running the model again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, field_validator, model_validator

from corpusclean.pipelines.base import (
    Bound,
    Check,
    Filter,
    Rule,
    ScoreValues,
    StepParams,
    register,
)
from corpusclean.pipelines.columns import score_column

LANG = score_column("lang")
LANG_SCORE = score_column("lang_score")


class LangParams(StepParams):
    """`lang:` — which languages to keep and how sure the model must be."""

    # Codes to keep, as py3langid names them (ISO 639-1 where one exists: en, zh, de; 639-3
    # otherwise: ary, yue). Empty keeps every language: the rows are still labelled, and the
    # labels still published, for a corpus that is split by language later.
    languages: list[str] = Field(default_factory=list)
    # FineWeb keeps English pages whose language score is above 0.65: below it the page is
    # mostly another language, code or markup, or too short for the model to be sure. The
    # bound is FineWeb's (set on fastText's lid.176 scores), kept so the presets follow the
    # published recipe; py3langid's probability is not fastText's (its softmax is tempered by
    # the square root of the length) but behaves alike: near 1 on a page of prose, well under
    # on a few words or a mix. A score equal to the bound is kept. Only checked when
    # `languages` is set: the score is that of the language found, and a corpus that keeps
    # every language should not lose its short or mixed pages to it.
    min_score: float = Field(0.65, ge=0, le=1)
    # Classify only each document's first `max_bytes` bytes of UTF-8 (cut back to a
    # character); 0 reads the whole text. A language is clear within a few kilobytes and the
    # model's walk costs time per byte, so a cap makes long documents cheap; 0 by default so
    # the labels are py3langid's on the whole text.
    max_bytes: int = Field(0, ge=0)

    # The columns data/ gets: the language code and its probability. An input that already
    # has a column of either name is refused (its values would be lost); name these otherwise
    # to keep both, e.g. `--set lang.column=lid_lang`.
    column: str = Field("lang", pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    score_column: str = Field("lang_score", pattern=r"^[A-Za-z][A-Za-z0-9_]*$")

    @model_validator(mode="after")
    def _distinct(self) -> LangParams:
        if self.column == self.score_column:
            raise ValueError("lang.column and lang.score_column name the same column")
        return self

    @field_validator("languages")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        if not value:
            return value
        # Imported here: it imports numba, which a run without this stage should not pay for.
        from corpusclean.pipelines import langid

        known = set(langid.labels())
        unknown = [code for code in value if code not in known]
        if unknown:
            raise ValueError(
                f"unknown language code(s) {unknown}: py3langid's model knows "
                f"{len(known)} codes, listed by corpusclean.pipelines.langid.labels() "
                "(py3langid's LanguageIdentifier.labels)"
            )
        return value


@register
class Lang(Filter):
    """Reads the text; scores `_score_lang` (py3langid's language code) and
    `_score_lang_score` (its probability), both null for a null text; with `languages` set,
    rejects with `lang_not_allowed` (another language) or `lang_low_score` (under
    `min_score`)."""

    name = "lang"
    Params = LangParams
    params: LangParams

    @property
    def publishes(self) -> dict[str, str]:
        # The job adds these two scores to data/ as columns of their own, by these names.
        return {LANG: self.params.column, LANG_SCORE: self.params.score_column}

    def reads(self) -> list[str]:
        return [self.roles.text]

    def score_fields(self) -> list[pa.Field]:
        return [pa.field(LANG, pa.string()), pa.field(LANG_SCORE, pa.float64())]

    def score(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        from corpusclean.pipelines import langid

        lang, score = langid.identify(batch.column(self.roles.text), self.params.max_bytes)
        return {LANG: lang, LANG_SCORE: score}

    def keep_rules(self) -> Sequence[Rule]:
        """`lang_not_allowed` for a language outside `languages`, then `lang_low_score` for a
        score under `min_score`; none without `languages` (every row is kept). A row without a
        label (a null text) is kept: there is nothing to judge, as by the other scorers."""
        if not self.params.languages:
            return []
        return [
            Check("lang_not_allowed", self._not_allowed),
            Bound("lang_low_score", LANG_SCORE, ">=", self.params.min_score, unless=_unlabelled),
        ]

    def _not_allowed(self, values: ScoreValues) -> np.ndarray:
        lang = values.arrays[LANG]
        allowed = pc.is_in(lang, value_set=pa.array(self.params.languages, pa.string()))
        return ~_unlabelled(values) & ~allowed.to_numpy(zero_copy_only=False)


def _unlabelled(values: ScoreValues) -> np.ndarray:
    return ~pc.is_valid(values.arrays[LANG]).to_numpy(zero_copy_only=False)
