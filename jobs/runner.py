"""Turns a job body into a process exit code: one-line errors, tracebacks only with --debug."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from corpusclean.jobs.errors import EXIT_ERROR, EXIT_USAGE, CorpusCleanError, RejectedError
from corpusclean.jobs.failures import known_failure


def new_parser(job: str, description: str) -> argparse.ArgumentParser:
    """An argument parser for `corpusclean JOB` that also accepts `--debug`."""
    parser = argparse.ArgumentParser(prog=f"corpusclean {job}", description=description)
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback when the job fails"
    )
    return parser


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0]
    # Spark's analysis errors carry an error class and a long plan; the first line names it.
    return first[:500]


def run_job(
    job: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None,
) -> int:
    """Parse `argv`, run `body`, and map what it raises to the documented exit codes."""
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help exits 0, a usage error 2
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    try:
        return body(args)
    except SystemExit as exc:  # parser.error() raised from inside the body
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    except RejectedError as exc:
        print(f"corpusclean {job}: rejected: {exc}", file=sys.stderr)
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except CorpusCleanError as exc:
        print(f"corpusclean {job}: error: {exc}", file=sys.stderr)
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"corpusclean {job}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a crash still gets one line; --debug shows where
        known = known_failure(exc)
        if known is not None:  # a recognised cause (a full disk) is said as such
            print(f"corpusclean {job}: error: {known}", file=sys.stderr)
            if debug:
                traceback.print_exc()
            return known.exit_code
        print(
            f"corpusclean {job}: error: {type(exc).__name__}: {_one_line(exc)} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        if debug:
            traceback.print_exc()
        return EXIT_ERROR
