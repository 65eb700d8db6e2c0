"""Errors that end a job with a one-line message and a documented exit code.

The base class and the exit codes live in `corpusclean.errors`, so that `pipelines/` can raise
them without importing `jobs/`; they are re-exported here.
"""

from __future__ import annotations

from corpusclean.errors import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_USAGE,
    CorpusCleanError,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_REJECTED",
    "EXIT_USAGE",
    "ConfigError",
    "CorpusCleanError",
    "InputError",
    "RejectedError",
    "UsageError",
]


class ConfigError(CorpusCleanError):
    """A config file or override that names an unknown key or holds a value out of range."""


class InputError(CorpusCleanError):
    """Input that is missing, unreadable or does not satisfy the raw-docs contract."""


class RejectedError(CorpusCleanError):
    """A gate or quality check refused the run: exit 3, nothing published."""

    exit_code = EXIT_REJECTED


class UsageError(CorpusCleanError):
    """A command used on something it is not for (e.g. check on a pack output): exit 2."""

    exit_code = EXIT_USAGE
