"""Filters beyond the built-in row rules, one module each; every module here is registered.

A module in this package that defines a `@register`ed `Filter` is a stage `clean` can list
under `stages:` (pipelines/base.py). None of them runs unless listed.
"""

from types import ModuleType

import numpy as np
import pyarrow as pa

from corpusclean.pipelines.base import Filter


def kernels() -> ModuleType:
    """pipelines/heuristics.py, imported on the first score: it imports numba, which a run
    that lists none of its filters (every module here is imported by `load_steps`) should not
    pay for at start-up."""
    from corpusclean.pipelines import heuristics

    return heuristics


def score_arrays(names: list[str], matrix: np.ndarray, valid: np.ndarray) -> dict[str, pa.Array]:
    """The columns of a kernel's (documents x scores) output as float64 arrays, null for the
    documents that had no text."""
    # A score that is undefined for a document (the mean length of no words) is null too:
    # NaN would sort above every number in the report's quantiles and is not JSON.
    return {
        n: pa.array(matrix[:, i], mask=~valid | np.isnan(matrix[:, i]), type=pa.float64())
        for i, n in enumerate(names)
    }


class TextScorer(Filter):
    """A filter whose scores are float64 columns computed from the text by the kernels of
    pipelines/heuristics.py (`kernels()`); a subclass names them in `score_names()`."""

    def reads(self) -> list[str]:
        return [self.roles.text]

    def score_names(self) -> list[str]:
        """The score columns, in the order the kernel returns them."""
        raise NotImplementedError

    def score_fields(self) -> list[pa.Field]:
        return [pa.field(n, pa.float64()) for n in self.score_names()]
