"""The base error of corpusclean and its exit codes, importable from every layer.

`pipelines/` raises `CorpusCleanError` subclasses for failed steps (a step that cannot
converge, say) without importing `jobs/`; the job runner (`corpusclean.jobs.runner`) catches
them and exits with their `exit_code`. `corpusclean.jobs.errors` re-exports all of this and
adds the job-level subclasses.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3


class CorpusCleanError(Exception):
    """Bad input, bad config or a failed step: the job exits 1 with this one-line message."""

    exit_code = EXIT_ERROR
