"""Turns a job body into a process exit code: one-line errors, tracebacks only with --debug."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from corpusclean.errors import EXIT_ERROR, EXIT_USAGE, CorpusCleanError, RejectedError
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.failures import known_failure


def new_parser(job: str, description: str) -> argparse.ArgumentParser:
    """An argument parser for `corpusclean JOB` with `--debug`, `-q`, `-v` and `--log-level`."""
    parser = argparse.ArgumentParser(prog=f"corpusclean {job}", description=description)
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback when the job fails"
    )
    add_log_arguments(parser)
    return parser


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """`-q`, `-v` and `--log-level` (one of them): how much of the stderr log to show."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest="log_level",
        action="store_const",
        const="warning",
        help="only warnings and errors on stderr",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest="log_level",
        action="store_const",
        const="debug",
        help="also debug lines on stderr",
    )
    group.add_argument(
        "--log-level",
        dest="log_level",
        type=_level_name,
        metavar="LEVEL",
        help="debug | info (the default) | warning | error",
    )


def _level_name(value: str) -> str:
    try:
        log.parse_level(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return value


def _one_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        return _java_one_line(java)
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0]
    # Spark's analysis errors carry an error class and a long plan; the first line names it.
    return first[:500]


def _java_one_line(java: object) -> str:
    """A Java exception chain in a line: Spark's error-class message, then the root cause."""
    messages: list[str] = []
    node = java
    try:
        while node is not None and len(messages) < 16:
            text = node.getMessage()  # type: ignore[attr-defined]
            if text:
                messages.append(str(text).strip().splitlines()[0])
            node = node.getCause()  # type: ignore[attr-defined]
    except Exception:  # the JVM may be gone; say what was read
        pass
    if not messages:
        return "Spark failed without a message"
    # "Job aborted due to stage failure: ... Lost task ..." wraps the error that says what failed.
    named = next((m for m in messages if m.startswith("[")), messages[0])
    root = messages[-1]
    return (named if root in named else f"{named} ({root})")[:500]


def _spark_log_hint() -> str:
    """` (Spark's log: PATH)` when this run's JVM wrote its output to a file, else ``."""
    session = sys.modules.get("corpusclean.jobs.runtime.session")
    if session is None:
        return ""
    session.mark_failed()
    path = session.spark_log()
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return ""
    return f" (Spark's log: {path})"


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
    if debug:
        os.environ["CORPUSCLEAN_DEBUG"] = "1"
    # A run without a level option keeps the current one: `demo -q` calls other jobs' main().
    level = getattr(args, "log_level", None)
    previous = log.set_level(level) if level is not None else None
    try:
        return _run_body(job, body, args, debug)
    finally:
        if previous is not None:
            log.set_level(previous)


def _run_body(
    job: str, body: Callable[[argparse.Namespace], int], args: argparse.Namespace, debug: bool
) -> int:
    try:
        return body(args)
    except SystemExit as exc:  # parser.error() raised from inside the body
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    except RejectedError as exc:
        print(f"corpusclean {job}: rejected: {exc}{_spark_log_hint()}", file=sys.stderr)
        if debug:
            traceback.print_exc()
        return exc.exit_code
    except CorpusCleanError as exc:
        print(f"corpusclean {job}: error: {exc}{_spark_log_hint()}", file=sys.stderr)
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
            f"(rerun with --debug for the traceback){_spark_log_hint()}",
            file=sys.stderr,
        )
        if debug:
            traceback.print_exc()
        return EXIT_ERROR
