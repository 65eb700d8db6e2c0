"""The scorers' keep rules, declared once (`keep_rules()`): the verdict and the report's bounds
both come from them.

Each filter is judged on a hand-made score table with a row on each side of every rule, a row
breaking two (the first gives the reason), null scores and the exemptions; the reasons and
bounds expected are the ones each filter gave when it wrote its thresholds twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from corpusclean.pipelines.base import (
    Bound,
    Check,
    Filter,
    Roles,
    Rule,
    ScoreValues,
    StepParams,
    first_reason,
    load_steps,
    score_summary,
)
from corpusclean.pipelines.filters import c4, fineweb, gopher_quality, gopher_repetition
from corpusclean.pipelines.filters.lang import LANG, LANG_SCORE

ALL_NULL = "all null"


def build(name: str, **params: Any) -> Filter:
    cls = load_steps()[name]
    step = cls(cls.Params(**params), Roles())
    assert isinstance(step, Filter)
    return step


def table(
    step: Filter, base: Mapping[str, float], rows: Sequence[Mapping[str, float | None] | str]
) -> dict[str, pa.Array]:
    """Float64 score columns of `step`, one row per entry of `rows`: `base` with the entry's
    changes (None = null), or every score null for `ALL_NULL`."""
    columns: dict[str, list[float | None]] = {f.name: [] for f in step.score_fields()}
    for row in rows:
        for name, column in columns.items():
            column.append(None if row == ALL_NULL else {**base, **row}.get(name, base[name]))
    return {name: pa.array(values, pa.float64()) for name, values in columns.items()}


def reasons(step: Filter, scores: Mapping[str, pa.Array]) -> list[str | None]:
    verdict = step.verdict(scores)
    assert verdict.type == pa.string()
    return verdict.to_pylist()


def declared_bounds(step: Filter) -> list[tuple[str, str, float]]:
    return [
        (r.score, r.op, float(r.value))
        for r in step.keep_rules()
        if isinstance(r, Bound) and r.value is not None
    ]


# ---------------------------------------------------------------------------------------------
# gopher_quality

GQ = gopher_quality
GQ_BASE = {
    GQ.WORDS: 100,
    GQ.MEAN_WORD: 5,
    GQ.HASHES: 0,
    GQ.ELLIPSES: 0,
    GQ.BULLETS: 0,
    GQ.END_ELLIPSIS: 0,
    GQ.ALPHA: 1,
    GQ.STOP: 5,
}
GQ_ROWS: list[tuple[dict[str, float | None] | str, str | None]] = [
    ({}, None),
    ({GQ.WORDS: 49}, "gopher_short_doc"),
    ({GQ.WORDS: 50}, None),
    ({GQ.WORDS: 100_001}, "gopher_long_doc"),
    ({GQ.WORDS: 100_000}, None),
    ({GQ.MEAN_WORD: 2.99}, "gopher_below_avg_threshold"),
    ({GQ.MEAN_WORD: 10.01}, "gopher_above_avg_threshold"),
    ({GQ.HASHES: 0.11}, "gopher_too_many_hashes"),
    ({GQ.ELLIPSES: 0.11}, "gopher_too_many_ellipsis"),
    ({GQ.ELLIPSES: 0.1}, None),
    ({GQ.BULLETS: 0.91}, "gopher_too_many_bullets"),
    ({GQ.END_ELLIPSIS: 0.31}, "gopher_too_many_end_ellipsis"),
    ({GQ.ALPHA: 0.79}, "gopher_below_alpha_threshold"),
    ({GQ.STOP: 1}, "gopher_enough_stop_words"),
    ({GQ.STOP: 2}, None),
    ({GQ.ALPHA: 0, GQ.HASHES: 1, GQ.STOP: 0}, "gopher_too_many_hashes"),
    ({GQ.MEAN_WORD: None}, None),  # no words to average: the other rules judge the page
    ({GQ.WORDS: 0, GQ.MEAN_WORD: None}, "gopher_short_doc"),
    (ALL_NULL, None),  # no text
]


def test_gopher_quality_reasons() -> None:
    step = build("gopher_quality")
    scores = table(step, GQ_BASE, [row for row, _ in GQ_ROWS])
    assert reasons(step, scores) == [want for _, want in GQ_ROWS]


def test_gopher_quality_bounds_are_its_rules_and_null_turns_one_off() -> None:
    step = build("gopher_quality")
    assert step.bounds() == declared_bounds(step)
    assert step.bounds() == [
        (GQ.WORDS, ">=", 50.0),
        (GQ.WORDS, "<=", 100_000.0),
        (GQ.MEAN_WORD, ">=", 3.0),
        (GQ.MEAN_WORD, "<=", 10.0),
        (GQ.HASHES, "<=", 0.1),
        (GQ.ELLIPSES, "<=", 0.1),
        (GQ.BULLETS, "<=", 0.9),
        (GQ.END_ELLIPSIS, "<=", 0.3),
        (GQ.ALPHA, ">=", 0.8),
        (GQ.STOP, ">=", 2.0),
    ]
    off = build("gopher_quality", min_doc_words=None, max_symbol_word_ratio=None)
    assert off.bounds() == declared_bounds(off)
    assert [b for b in off.bounds() if b[0] in (GQ.WORDS, GQ.HASHES, GQ.ELLIPSES)] == [
        (GQ.WORDS, "<=", 100_000.0)
    ]
    assert len(off.bounds()) == 7
    scores = table(off, GQ_BASE, [{GQ.WORDS: 1}, {GQ.HASHES: 5, GQ.ELLIPSES: 5}, {GQ.STOP: 0}])
    assert reasons(off, scores) == [None, None, "gopher_enough_stop_words"]


# ---------------------------------------------------------------------------------------------
# fineweb_quality

FW = fineweb
FW_BASE = {FW.PUNCT: 0.5, FW.SHORT: 0.1, FW.DUP_CHARS: 0, FW.LIST: 0.1}
FW_TABLE: list[dict[str, float | None] | str] = [
    {},
    ALL_NULL,
    {FW.PUNCT: None},
    {FW.PUNCT: 0.11},
    {FW.PUNCT: 0.12},
    {FW.PUNCT: 0},
    {FW.PUNCT: 0, FW.SHORT: 0.9},
    {FW.SHORT: 0.68},
    {FW.SHORT: 0.67},
    {FW.DUP_CHARS: 0.02},
    {FW.LIST: 0.31},
    {FW.SHORT: 1, FW.LIST: 1},
]


def test_fineweb_reasons_with_and_without_the_zero_exemption() -> None:
    step = build("fineweb_quality")
    assert reasons(step, table(step, FW_BASE, FW_TABLE)) == [
        None,
        "empty",
        "empty",  # the ratios are null together: one is enough to say so
        "line_punct_ratio",
        None,
        "line_punct_ratio",
        "line_punct_ratio",
        "short_line_ratio",
        None,
        "char_dup_ratio",
        "list_ratio",
        "short_line_ratio",
    ]
    exempt = build("fineweb_quality", line_punct_exclude_zero=True)
    assert reasons(exempt, table(exempt, FW_BASE, FW_TABLE)) == [
        None,
        "empty",
        "empty",
        "line_punct_ratio",
        None,
        None,  # exactly 0 passes
        "short_line_ratio",  # and the later rules still judge it
        "short_line_ratio",
        None,
        "char_dup_ratio",
        "list_ratio",
        "short_line_ratio",
    ]


def test_fineweb_bounds_are_its_rules_the_exemption_aside() -> None:
    for params in ({}, {"line_punct_exclude_zero": True}):
        step = build("fineweb_quality", **params)
        assert step.bounds() == declared_bounds(step)
        assert step.bounds() == [
            (FW.PUNCT, ">=", 0.12),
            (FW.SHORT, "<=", 0.67),
            (FW.DUP_CHARS, "<=", 0.01),
            (FW.LIST, "<=", 0.3),
        ]


# ---------------------------------------------------------------------------------------------
# c4_quality

C4_BASE = {c4.SENTENCES: 10, c4.LOREM: 0, c4.CURLY: 0, c4.KEPT: 1}
C4_TABLE: list[dict[str, float | None] | str] = [
    {},
    {c4.LOREM: 2},
    {c4.CURLY: 3},
    {c4.LOREM: 2, c4.CURLY: 3},
    {c4.LOREM: 3, c4.CURLY: 2},
    {c4.LOREM: 2, c4.CURLY: 2},  # one line with both: lorem ipsum is checked first
    {c4.LOREM: 2, c4.CURLY: None},
    {c4.SENTENCES: 4},
    {c4.SENTENCES: 5},
    {c4.SENTENCES: 0, c4.CURLY: 1},
    {c4.SENTENCES: None},
    ALL_NULL,
]


def test_c4_reasons_and_the_sentence_rule_turned_off() -> None:
    step = build("c4_quality")
    lines = [
        None,
        "lorem_ipsum",
        "curly_bracket",
        "lorem_ipsum",
        "curly_bracket",
        "lorem_ipsum",
        "lorem_ipsum",
        "too_few_sentences",
        None,
        "curly_bracket",
        None,
        None,
    ]
    assert reasons(step, table(step, C4_BASE, C4_TABLE)) == lines
    off = build("c4_quality", min_num_sentences=-1)
    assert reasons(off, table(off, C4_BASE, C4_TABLE)) == [
        None if want == "too_few_sentences" else want for want in lines
    ]


def test_c4_bounds_are_the_sentence_rule_when_on() -> None:
    step = build("c4_quality")
    assert step.bounds() == declared_bounds(step) == [(c4.SENTENCES, ">=", 5.0)]
    assert build("c4_quality", min_num_sentences=0).bounds() == [(c4.SENTENCES, ">=", 0.0)]
    off = build("c4_quality", min_num_sentences=-1)
    assert off.bounds() == declared_bounds(off) == []


# ---------------------------------------------------------------------------------------------
# gopher_repetition

GR = gopher_repetition


def test_gopher_repetition_reasons() -> None:
    step = build("gopher_repetition")
    base = dict.fromkeys(step.score_names(), 0.0)
    cases: list[tuple[dict[str, float | None] | str, str | None]] = [
        ({}, None),
        (ALL_NULL, "empty"),
        ({GR.DUP_PARA: None}, "empty"),
        ({GR.DUP_PARA: 0.3}, None),
        ({GR.DUP_PARA: 0.31}, "dup_para_frac"),
        ({GR.DUP_PARA_CHARS: 0.21}, "dup_para_char_frac"),
        ({GR.DUP_LINE: 0.31}, "dup_line_frac"),
        ({GR.DUP_LINE_CHARS: 0.21}, "dup_line_char_frac"),
        ({GR.top_column(2): 0.21}, "top_2_gram"),
        ({GR.top_column(3): 0.19}, "top_3_gram"),
        ({GR.top_column(4): 0.17}, "top_4_gram"),
        ({GR.top_column(4): 0.16}, None),
        ({GR.dup_column(5): 0.16}, "duplicated_5_n_grams"),
        ({GR.dup_column(10): 0.11}, "duplicated_10_n_grams"),
        ({GR.dup_column(10): 0.9, GR.DUP_LINE: 0.9}, "dup_line_frac"),
        ({GR.top_column(2): None}, None),
    ]
    assert reasons(step, table(step, base, [row for row, _ in cases])) == [w for _, w in cases]


def test_gopher_repetition_bounds_follow_its_n_gram_sizes_and_nulls() -> None:
    step = build("gopher_repetition")
    assert step.bounds() == declared_bounds(step)
    assert step.bounds() == [
        (GR.DUP_PARA, "<=", 0.3),
        (GR.DUP_PARA_CHARS, "<=", 0.2),
        (GR.DUP_LINE, "<=", 0.3),
        (GR.DUP_LINE_CHARS, "<=", 0.2),
        (GR.top_column(2), "<=", 0.2),
        (GR.top_column(3), "<=", 0.18),
        (GR.top_column(4), "<=", 0.16),
        (GR.dup_column(5), "<=", 0.15),
        (GR.dup_column(6), "<=", 0.14),
        (GR.dup_column(7), "<=", 0.13),
        (GR.dup_column(8), "<=", 0.12),
        (GR.dup_column(9), "<=", 0.11),
        (GR.dup_column(10), "<=", 0.10),
    ]
    off = build("gopher_repetition", dup_para_frac=None, top_n_grams={3: 0.5}, dup_n_grams={})
    assert off.bounds() == declared_bounds(off)
    assert off.bounds() == [
        (GR.DUP_PARA_CHARS, "<=", 0.2),
        (GR.DUP_LINE, "<=", 0.3),
        (GR.DUP_LINE_CHARS, "<=", 0.2),
        (GR.top_column(3), "<=", 0.5),
    ]
    base = dict.fromkeys(off.score_names(), 0.0)
    rows: list[dict[str, float | None] | str] = [
        {GR.DUP_PARA: 1},
        {GR.top_column(3): 0.6},
        ALL_NULL,
    ]
    assert reasons(off, table(off, base, rows)) == [None, "top_3_gram", "empty"]


# ---------------------------------------------------------------------------------------------
# lang


def test_lang_reasons_and_bounds() -> None:
    step = build("lang", languages=["en", "de"])
    assert step.bounds() == declared_bounds(step) == [(LANG_SCORE, ">=", 0.65)]
    langs = ["en", "en", "en", "de", "fr", "fr", None, None, "en"]
    probs = [0.9, 0.65, 0.64, 0.1, 0.99, 0.1, None, 0.1, None]
    scores = {LANG: pa.array(langs, pa.string()), LANG_SCORE: pa.array(probs, pa.float64())}
    assert reasons(step, scores) == [
        None,
        None,
        "lang_low_score",
        "lang_low_score",
        "lang_not_allowed",
        "lang_not_allowed",
        None,
        None,  # no label: nothing to judge
        None,
    ]
    every = build("lang")
    assert every.bounds() == [] and every.keep_rules() == []
    assert reasons(every, scores) == [None] * len(langs)


# ---------------------------------------------------------------------------------------------
# A filter of the test's own

X = "_score_test_x"
Y = "_score_test_y"


class TinyParams(StepParams):
    min_x: float | None = 1.0
    max_y: float | None = 2.0


class Tiny(Filter):
    """Not registered: built directly."""

    name = "tiny_rules"
    Params = TinyParams
    params: TinyParams

    def score_fields(self) -> list[pa.Field]:
        return [pa.field(X, pa.float64()), pa.field(Y, pa.int64())]

    def keep_rules(self) -> Sequence[Rule]:
        return [
            Check("no_x", lambda values: np.isnan(values[X])),
            Bound("x_low", X, ">=", self.params.min_x),
            Bound("y_high", Y, "<=", self.params.max_y),
        ]


class TinyWithZ(Tiny):
    """One bound more, declared once."""

    def keep_rules(self) -> Sequence[Rule]:
        return [*super().keep_rules(), Bound("y_zero", Y, ">=", 1)]


def tiny_scores(xs: list[float | None], ys: list[int | None]) -> dict[str, pa.Array]:
    return {X: pa.array(xs, pa.float64()), Y: pa.array(ys, pa.int64())}


def test_a_declared_bound_is_in_both_the_bounds_and_the_verdict() -> None:
    scores = tiny_scores([None, 0.5, 1.0, 3.0, 3.0, 0.0], [5, 5, 2, 3, 0, None])
    tiny = Tiny(TinyParams(), Roles())
    assert tiny.bounds() == [(X, ">=", 1.0), (Y, "<=", 2.0)]
    assert reasons(tiny, scores) == ["no_x", "x_low", None, "y_high", None, "x_low"]
    more = TinyWithZ(TinyParams(), Roles())
    assert more.bounds() == [(X, ">=", 1.0), (Y, "<=", 2.0), (Y, ">=", 1.0)]
    assert reasons(more, scores) == ["no_x", "x_low", None, "y_high", "y_zero", "x_low"]
    # The report sets the score against every bound declared.
    summary = score_summary(
        [more], {f"__q{Y}#n": 5, f"__q{Y}#out1": 1, f"__q{Y}#out2": 1, f"__q{X}#n": 5}
    )
    assert summary["tiny_rules"]["scores"][Y]["bounds"] == [
        {"op": "<=", "value": 2.0, "outside": 1},
        {"op": ">=", "value": 1.0, "outside": 1},
    ]


def test_a_bound_set_to_none_is_off_in_both() -> None:
    tiny = Tiny(TinyParams(min_x=None), Roles())
    assert tiny.bounds() == [(Y, "<=", 2.0)]
    assert reasons(tiny, tiny_scores([0.0, None], [1, 1])) == [None, "no_x"]
    none = Tiny(TinyParams(min_x=None, max_y=None), Roles())
    assert none.bounds() == []
    assert reasons(none, tiny_scores([0.0, 1.0], [9, 9])) == [None, None]


def test_unless_exempts_rows_from_one_bound_only() -> None:
    class Exempt(Tiny):
        def keep_rules(self) -> Sequence[Rule]:
            return [
                Bound("x_low", X, ">=", 1.0, unless=lambda values: values[X] == 0),
                Bound("y_high", Y, "<=", 2.0),
            ]

    step = Exempt(TinyParams(), Roles())
    assert step.bounds() == [(X, ">=", 1.0), (Y, "<=", 2.0)]
    scores = tiny_scores([0.0, 0.5, 0.0], [1, 1, 3])
    assert reasons(step, scores) == [None, "x_low", "y_high"]


def test_a_scorer_without_rules_keeps_every_row() -> None:
    class Labeller(Tiny):
        def keep_rules(self) -> Sequence[Rule]:
            return []

    step = Labeller(TinyParams(), Roles())
    assert step.bounds() == []
    assert reasons(step, tiny_scores([0.0, None], [9, None])) == [None, None]


def test_score_values_are_float64_with_nan_for_null_converted_once() -> None:
    values = ScoreValues(tiny_scores([1.5, None], [3, None]))
    y = values[Y]
    assert y.dtype == np.float64 and y[0] == 3.0 and np.isnan(y[1])
    assert values[Y] is y
    assert values.rows == 2 and set(values) == {X, Y} and len(values) == 2


@pytest.mark.parametrize("n", [0, 3])
def test_first_reason_is_the_earliest_rule_and_null_otherwise(n: int) -> None:
    a = np.array([False, True, False][:n], dtype=bool)
    b = np.array([True, True, False][:n], dtype=bool)
    rules = [("a", a), ("b", b)]
    assert first_reason(rules, n).to_pylist() == ["b", "a", None][:n]
    assert first_reason([], n).to_pylist() == [None] * n
