"""`corpusclean COMMAND ...`: one entry point that hands the arguments to a job's `main`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence

from corpusclean import __version__
from corpusclean.errors import EXIT_USAGE

# command -> (module under corpusclean.jobs, one-line help). Modules import lazily so that a
# command that does not need Spark or Great Expectations never pays for importing them.
COMMANDS: dict[str, tuple[str, str]] = {
    "clean": ("clean", "clean and deduplicate raw documents into a gated, published output"),
    "index": ("index", "build the dedup index of a corpus, for clean --against"),
    "pack": ("pack", "pack a clean output into WebDataset tar shards"),
    "check": ("check", "run a data-quality suite on a stage's output"),
    "report": ("report", "render a clean output's report.html again from its report.json"),
    "bench": ("bench", "measure how fast shards load against what training consumes"),
    "sample": ("sample", "write a synthetic corpus with known duplicates"),
    "demo": ("demo", "sample -> clean -> pack -> check -> bench on a generated corpus"),
    "submit": ("submit", "spark-submit a job to a cluster with the package attached"),
}


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = [
        f"corpusclean {__version__}",
        "usage: corpusclean COMMAND [ARGS...]   (corpusclean COMMAND --help for its arguments)",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def available() -> dict[str, tuple[str, str]]:
    """The commands whose job module is installed."""
    found = {}
    for name, (module, help_) in COMMANDS.items():
        if importlib.util.find_spec(f"corpusclean.jobs.{module}") is not None:
            found[name] = (module, help_)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch `corpusclean COMMAND ARGS...`; returns the job's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else EXIT_USAGE
    if args[0] in ("-V", "--version"):
        print(__version__)
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"corpusclean: unknown command {command!r}\n\n{_usage()}", file=sys.stderr)
        return EXIT_USAGE
    module_name = COMMANDS[command][0]
    try:
        module = importlib.import_module(f"corpusclean.jobs.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"corpusclean.jobs.{module_name}":
            print(f"corpusclean: command {command!r} is not available yet", file=sys.stderr)
            return EXIT_USAGE
        raise
    try:
        return int(module.main(rest))
    except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
