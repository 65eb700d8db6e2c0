"""A cheap `importlib.invalidate_caches()` for zip archives on Python 3.10 and 3.11.

PySpark's worker calls `importlib.invalidate_caches()` before every task
(`pyspark.worker_util.setup_spark_files`). Before Python 3.12 that makes every `zipimporter`
re-read its archive's whole directory in pure Python (CPython gh-103200), and a worker holds
one zipimporter per package it imported from `pyspark.zip` (1,328 files), py4j's zip and any
`--py-files` zip, so every Python task pays a fixed start-up delay that dwarfs a small task.

The replacement re-reads an archive only when its size or modification time changed, which is
the case invalidation exists for; the first call on each importer still reads it once.
`bench/python_tasks.py` measures the per-task cost with and without it.
"""

from __future__ import annotations

import os
import sys
import zipimport
from typing import Any

_MARK = "_corpusclean_stamp"


def install() -> None:
    """Patch `zipimport.zipimporter.invalidate_caches` (Python < 3.12 only; idempotent)."""
    if sys.version_info >= (3, 12):
        return
    cls: Any = zipimport.zipimporter
    original = cls.invalidate_caches
    if getattr(original, "_corpusclean", False):
        return

    def invalidate_caches(self: Any) -> None:
        try:
            st = os.stat(self.archive)
            stamp: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except OSError:
            stamp = None
        if stamp is not None and getattr(self, _MARK, None) == stamp:
            return
        original(self)
        setattr(self, _MARK, stamp)

    invalidate_caches._corpusclean = True  # type: ignore[attr-defined]
    cls.invalidate_caches = invalidate_caches
