"""numba, where it imports: how every compiled kernel is built (pipelines/minhash_jit.py,
pipelines/heuristics.py, pipelines/langid.py).

Compiled functions are cached on disk (numba's `cache=True`: `__pycache__` beside the module,
or numba's user-wide cache where that is read-only), so a Python worker loads them instead of
compiling them again. Where numba has no wheel, `jit` returns the function itself: the same
loops run as Python, slowly but with the same results.
"""

from __future__ import annotations

from typing import Any

try:  # numba is a dependency; a platform without a wheel still gets the Python loops.
    import numba as nb
except ImportError:  # pragma: no cover - exercised only where numba is missing
    nb = None


def available() -> bool:
    """Whether numba imports here."""
    return nb is not None


def jit(fn: Any) -> Any:
    """`fn` compiled (nopython, GIL released, cached on disk), or `fn` itself without numba."""
    if nb is None:
        return fn
    try:
        return nb.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        # No place for a cache: the module is inside a zip (spark-submit --py-files), whose
        # members numba cannot stamp. Each Python worker then compiles once.
        return nb.njit(nogil=True)(fn)
