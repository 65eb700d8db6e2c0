"""Filters beyond the built-in row rules, one module each; every module here is registered.

A module in this package that defines a `@register`ed `Filter` is a stage `clean` can list
under `stages:` (pipelines/base.py). None of them runs unless listed.
"""

from types import ModuleType


def kernels() -> ModuleType:
    """pipelines/heuristics.py, imported on the first score: it imports numba, which a run
    that lists none of its filters (every module here is imported by `load_steps`) should not
    pay for at start-up."""
    from corpusclean.pipelines import heuristics

    return heuristics
