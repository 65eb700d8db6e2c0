"""`corpusclean report DIR`: render a clean output's report.html again, with today's views.

Reads DIR/report.json and the output's own files (duplicates/, data/, rejected/: ids first,
then the texts of a handful of rows), never the input and never Spark. report.json is not
changed; report.html is replaced atomically (or written to `--output`). A report written before
a view existed gets every view its files can give: cluster sizes, the largest clusters, exact
duplicates and rejected rows come from the files; the near-duplicate pairs, the length
distribution and the `lang`/`source` breakdown were only seen by the run itself, and the page
says so where they are missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpusclean.errors import InputError
from corpusclean.jobs.reports.page import render_html, report_views
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.schemas import DEFAULT_ID_COLUMN, DEFAULT_TEXT_COLUMN

JOB = "report"


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `corpusclean report`."""
    parser = new_parser(JOB, "Render a clean output's report.html again from its report.json.")
    parser.add_argument(
        "dir", metavar="DIR", help="a clean output (or a rejected run's staged output)"
    )
    parser.add_argument(
        "--output", help="where to write the page (default: DIR/report.html, replaced)"
    )
    return parser


def load_report(folder: Path) -> dict[str, Any]:
    """DIR/report.json of a clean run, or InputError saying what is wrong with it."""
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder (expected a clean output)")
    path = folder / "report.json"
    if not path.is_file():
        raise InputError(f"{folder} holds no report.json: not a clean output")
    try:
        report = json.loads(path.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not JSON ({exc})") from exc
    if not isinstance(report, dict) or report.get("job") != "clean":
        raise InputError(f"{path} is not the report of a clean run")
    return report


def rerender(folder: Path, output: Path | None = None) -> Path:
    """Write the page of the clean output `folder`; returns where it went."""
    report = load_report(folder)
    columns = (report.get("config") or {}).get("columns") or {}
    views = report_views(
        folder,
        columns.get("id", DEFAULT_ID_COLUMN),
        columns.get("text", DEFAULT_TEXT_COLUMN),
    )
    seen = report.get("examples") or {}
    report.update(views)
    # The examples the views do not give (a stage's pairs): only the run saw the removed texts.
    for name, examples in seen.items():
        report["examples"].setdefault(name, examples)
    target = output if output is not None else folder / "report.html"
    write_text_atomic(target, render_html(report))
    return target


def _run(args: argparse.Namespace) -> int:
    target = rerender(Path(args.dir), Path(args.output) if args.output else None)
    log.info(JOB, f"wrote {target}")
    print(target)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean report DIR [--output PATH]`."""
    return run_job(JOB, build_parser(), _run, argv)


if __name__ == "__main__":
    sys.exit(main())
