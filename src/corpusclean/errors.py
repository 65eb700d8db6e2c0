"""Every error that ends a command with a one-line message, and the exit codes.

One module for the whole package, outside `jobs/`, so that `pipelines/` can raise them without
importing `jobs/`: a failed step (one that cannot converge, say) raises a `CorpusCleanError`
subclass, and the job runner (`corpusclean.jobs.runtime.runner`) prints its message in one line
and exits with its `exit_code`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REJECTED = 3


class CorpusCleanError(Exception):
    """Bad input, bad config or a failed step: the job exits 1 with this one-line message."""

    exit_code = EXIT_ERROR


class ConfigError(CorpusCleanError):
    """A config file or override that names an unknown key or holds a value out of range."""


class InputError(CorpusCleanError):
    """Input that is missing, unreadable or does not satisfy the raw-docs contract."""


class RejectedError(CorpusCleanError):
    """A gate or quality check refused the run: exit 3, nothing published."""

    exit_code = EXIT_REJECTED


class UsageError(CorpusCleanError):
    """A command used on something it is not for (check on a pack output), or a command line
    that lacks a required argument: exit 2, like argparse's own errors."""

    exit_code = EXIT_USAGE
