"""`corpusclean check`: a data-quality suite on a clean output or raw input.

For CI: one line per check on stdout, a verdict line, a JSON result file, and an exit code that
a pipeline can gate on (0 no critical failure, 3 a failed check, 1 unreadable input or suite).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from corpusclean.errors import ConfigError, InputError, RejectedError, UsageError
from corpusclean.jobs.inputs.paths import detect_format, is_remote, resolved
from corpusclean.jobs.outputs.publish import MARKER, SUCCESS
from corpusclean.jobs.runtime import log
from corpusclean.jobs.runtime.atomic import write_text_atomic
from corpusclean.jobs.runtime.config import CleanConfig, audit_stage_params, load_clean_config
from corpusclean.jobs.runtime.runner import new_parser, run_job
from corpusclean.pipelines.base import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

JOB = "check"
REPORT_NAME = "check.json"
# Folders of a clean output that readers list as data: a report written there would be read
# as a data file by the next job.
_DATA_FOLDERS = ("data", "duplicates", "rejected")

_HELP = """\
Validates a clean output folder (it has report.json or _corpusclean.json) with the clean_docs
suite, or raw documents (a Parquet/JSON Lines file, folder or glob) with raw_docs. Thresholds
come from DIR/report.json for a clean output (its config and row counts) and from the clean
config (--config, --set) for raw input; --param overrides any suite parameter.

The JSON result goes to --report, by default beside the input (DIR.check.json), never into a
published output (a folder with _SUCCESS or _corpusclean.json); --junit writes JUnit XML too:
a warning is a passing test case with its text in system-out, a failure under --strict.
A pack output (index.json, shard-*.tar) is not checked here: use `corpusclean pack --verify`.

Exit codes: 0 no critical check failed (warnings allowed), 3 a critical check failed (or a
warning with --strict), 1 unreadable input or suite, or a check that could not run,
2 usage (a pack output given as --input).
"""


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `corpusclean check` (and `spark-submit jobs/check.py`)."""
    parser = new_parser(JOB, "Run a data-quality suite on a stage's output.")
    parser.description = _HELP
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--input",
        required=True,
        help="a clean output folder, or raw documents (Parquet / JSON Lines: file, folder, glob)",
    )
    parser.add_argument(
        "--suite",
        help="clean_docs | raw_docs | PATH to a GX suite JSON "
        "(default: clean_docs for a clean output, raw_docs otherwise)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="warning-severity failures fail the check too"
    )
    parser.add_argument(
        "--engine",
        choices=("spark", "gx"),
        default="spark",
        help="who evaluates the suite: spark (one aggregation, default) or gx (Great "
        "Expectations; also runs expectation types the spark engine does not); same records",
    )
    parser.add_argument(
        "--report",
        help="where to write the JSON result (default: INPUT.check.json beside the clean "
        "output, file or folder, never inside it, and ./check.json for a glob or remote input; "
        "a default that would land in a published output moves beside it)",
    )
    parser.add_argument(
        "--junit",
        metavar="PATH",
        help="also write the result as JUnit XML (one test case per check) for CI",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a suite parameter (YAML value), e.g. --param min_retention=0.8 (repeatable)",
    )
    parser.add_argument("--config", help="raw input: the clean run config whose thresholds apply")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="raw input: override a clean config key, e.g. --set rules.min_chars=200",
    )
    return parser


def is_clean_output(path: str) -> bool:
    """True for a local folder written by `corpusclean clean` (published or staged)."""
    if is_remote(path):
        return False
    p = Path(path.removeprefix("file://"))
    return p.is_dir() and any((p / name).exists() for name in ("report.json", "_corpusclean.json"))


def _stage_params(cfg: dict[str, Any]) -> dict[str, object]:
    """The stage parameters of the run that wrote a report, through the stage registry (its
    `stages` and their sections; a report older than `stages` ran the default list). Its
    Spark settings are not re-checked: they belong to the machine that ran it. A report
    without a config gives none: its stages' parameters are unknown, not the defaults."""
    if not cfg:
        return {}
    try:
        resolved = CleanConfig.model_validate({k: v for k, v in cfg.items() if k != "spark"})
    except ValidationError as exc:
        log.warn(
            JOB,
            f"the report's config is not one this corpusclean reads "
            f"({exc.errors()[0]['msg']}); stage checks use neutral values",
        )
        return audit_stage_params(Pipeline(()))
    return audit_stage_params(resolved.pipeline())


def params_from_report(report: dict[str, Any]) -> dict[str, object]:
    """Suite parameters of a clean output from its report.json (config, counts, column stats)."""
    cfg = report.get("config") or {}

    def get(section: str, key: str) -> Any:
        value = cfg.get(section)
        return value.get(key) if isinstance(value, dict) else None

    params: dict[str, object] = {
        **_stage_params(cfg),
        "id_column": get("columns", "id"),
        "text_column": get("columns", "text"),
        "min_retention": get("gate", "min_retention"),
        "review_threshold": get("missing", "review_threshold"),
        "allowed_langs": get("audit", "allowed_langs"),
        "rows_in": report.get("input_rows"),
        "rows_out": report.get("output_rows"),
    }
    rates: dict[str, float] = {}
    for name, stats in (report.get("columns") or {}).items():
        if not isinstance(stats, dict):
            continue
        if stats.get("missing_rate") is not None:
            rates[name] = float(stats["missing_rate"])
        elif stats.get("null_rate") is not None:
            rates[name] = float(stats["null_rate"]) + float(stats.get("empty_rate") or 0.0)
    params["missing_rates"] = rates
    return {k: v for k, v in params.items() if v is not None}


def params_from_config(cfg: CleanConfig) -> dict[str, object]:
    """Suite parameters of raw input from the clean config it would be cleaned with."""
    return {
        **audit_stage_params(cfg.pipeline()),
        "id_column": cfg.columns.id,
        "text_column": cfg.columns.text,
        "min_retention": cfg.gate.min_retention,
        "review_threshold": cfg.missing.review_threshold,
        "allowed_langs": list(cfg.audit.allowed_langs),
    }


def parse_params(items: Sequence[str]) -> dict[str, object]:
    """`NAME=VALUE` items (values read as YAML) as a dict."""
    out: dict[str, object] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--param {item!r}: expected NAME=VALUE")
        try:
            out[name] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[name] = raw
    return out


def default_report_path(input_path: str, clean_output: bool) -> Path:
    """INPUT.check.json beside the input, never inside it nor inside a published output."""
    if is_remote(input_path) or any(ch in input_path for ch in "*?["):
        path = Path.cwd() / REPORT_NAME
    else:
        p = resolved(input_path)
        path = p.parent / f"{p.name}.{REPORT_NAME}"
    published = published_outputs(path)
    if not published:
        return path
    # Beside the outermost published folder, named after where it would have gone.
    top = published[-1]
    rel = path.parent.relative_to(top).parts
    return top.parent / ".".join((top.name, *rel, path.name))


def published_outputs(path: Path) -> list[Path]:
    """The published outputs (folders with _SUCCESS or _corpusclean.json) that hold `path`.

    Nearest first. A published folder changes only by a new publish: a file written into it
    would be read as part of it (and a clean output's _SUCCESS vouches for what is there).
    """
    out = path.expanduser().resolve()
    return [
        folder
        for folder in out.parents
        if any((folder / name).is_file() for name in (SUCCESS, MARKER))
    ]


def is_pack_output(path: str) -> bool:
    """True for a local folder `corpusclean pack` writes (index.json or shard-*.tar)."""
    if is_remote(path):
        return False
    p = Path(path.removeprefix("file://"))
    return p.is_dir() and ((p / "index.json").is_file() or any(p.glob("shard-*.tar")))


def check_report_path(
    report: Path, input_path: str, clean_output: bool, flag: str = "--report"
) -> None:
    """Refuse a report path that would land inside data a job reads or a published output."""
    out = report.expanduser().resolve()
    published = published_outputs(out)
    if published:
        raise InputError(
            f"{flag} {report} is inside the published output {published[0]}, which only a new "
            f"publish may change; write it elsewhere, e.g. {flag} "
            f"{published[-1].parent / (published[-1].name + '.' + out.name)}"
        )
    if clean_output:
        base = resolved(input_path)
        protected = [base / name for name in _DATA_FOLDERS]
    elif is_remote(input_path):
        return
    else:
        protected = [resolved(input_path)]
    for folder in protected:
        if out == folder or folder in out.parents:
            raise InputError(
                f"{flag} {report} is inside {folder}, which is read as data; "
                "write it somewhere else"
            )


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON through a temporary file, so a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def _fmt_observed(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value[:8]) + (",..." if len(value) > 8 else "")
    return str(value)


def format_line(record: dict[str, Any]) -> str:
    """One line per check: status, severity, name, column, observed value and details."""
    parts = [
        f"{record['status'].upper():<4}",
        f"{record['severity']:<8}",
        f"{record['name']:<28}",
        f"{(record.get('column') or '-'):<16}",
        f"observed={_fmt_observed(record.get('observed'))}",
    ]
    if record.get("expected"):
        parts.append(f"expected {record['expected']}")
    if record.get("detail"):
        parts.append(f"({record['detail']})")
    if record.get("examples"):
        shown = ", ".join(str(v) for v in record["examples"][:5])
        parts.append(f"e.g. {shown}")
    return "  ".join(parts)


def failing(records: list[dict[str, Any]], strict: bool) -> list[dict[str, Any]]:
    """The records that fail the check: critical failures, and warnings when strict."""
    bad = {"fail", "warn"} if strict else {"fail"}
    return [r for r in records if r["status"] in bad]


def verdict_line(result: dict[str, Any], failed: list[dict[str, Any]]) -> str:
    """`verdict: PASS|FAIL ...` with counts per status and the failed checks by name."""
    counts: dict[str, int] = {}
    for r in result["checks"]:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    tally = ", ".join(
        f"{counts[s]} {s}" for s in ("pass", "warn", "info", "fail", "skip") if s in counts
    )
    head = "FAIL" if failed else "PASS"
    line = f"verdict: {head}: suite {result['suite']}, {len(result['checks'])} checks ({tally})"
    if failed:
        line += "; failed: " + ", ".join(_failed_name(r) for r in failed)
    return f"{line}; {result['seconds']:.1f}s"


def _failed_name(record: dict[str, Any]) -> str:
    return f"{record['name']} ({record['column']})" if record.get("column") else record["name"]


def check(args: argparse.Namespace) -> int:
    """The body of `corpusclean check`: load, validate, print, write the report, gate."""
    from corpusclean.jobs.audit.quality import load_suite, run_suite

    input_path: str = args.input
    clean_output = _checked_input(input_path)
    suite = load_suite(args.suite or ("clean_docs" if clean_output else "raw_docs"), args.engine)
    params, spark_conf, fmt = _suite_inputs(args, input_path, clean_output)
    report_path = (
        Path(args.report) if args.report else default_report_path(input_path, clean_output)
    )
    check_report_path(report_path, input_path, clean_output)
    junit_path = Path(args.junit) if args.junit else None
    if junit_path is not None:
        check_report_path(junit_path, input_path, clean_output, "--junit")
    df, duplicates = _read_documents(input_path, clean_output, fmt, spark_conf)
    log.info(JOB, f"suite {suite.name} ({len(suite.checks)} checks) on {input_path}")
    result = run_suite(df, suite, params, duplicates=duplicates, engine=args.engine)
    return _report(args, input_path, result, report_path, junit_path)


def _checked_input(input_path: str) -> bool:
    """Whether `input_path` is a clean output; a pack output is a `UsageError` and a local
    path that does not exist an `InputError`."""
    if is_pack_output(input_path):
        raise UsageError(
            f"{input_path} is a pack output (index.json, shard-*.tar); check validates documents: "
            f"verify shards with `corpusclean pack --verify {input_path}`"
        )
    clean_output = is_clean_output(input_path)
    local_path = not is_remote(input_path) and not any(c in input_path for c in "*?[")
    if local_path and not Path(input_path.removeprefix("file://")).exists():
        raise InputError(f"input {input_path} does not exist")
    return clean_output


def _suite_inputs(
    args: argparse.Namespace, input_path: str, clean_output: bool
) -> tuple[dict[str, object], dict[str, str], str]:
    """(suite parameters, Spark settings, input format): from a clean output's report.json,
    else from the clean config; `--param` overrides either."""
    spark_conf: dict[str, str] = {}
    if clean_output:
        base = Path(input_path.removeprefix("file://"))
        report_file = base / "report.json"
        params: dict[str, object] = {}
        if report_file.is_file():
            try:
                params = params_from_report(json.loads(report_file.read_text("utf-8")))
            except (OSError, json.JSONDecodeError) as exc:
                raise InputError(f"{report_file} cannot be read: {exc}") from exc
        if not (base / "data").is_dir():
            raise InputError(f"{base} is a clean output without a data/ folder")
        fmt = "parquet"
    else:
        cfg = load_clean_config(args.config, args.set)
        params = params_from_config(cfg)
        spark_conf = cfg.spark
        fmt = detect_format(input_path, cfg.input.format)
    params.update(parse_params(args.param))
    return params, spark_conf, fmt


def _read_documents(
    input_path: str, clean_output: bool, fmt: str, spark_conf: dict[str, str]
) -> tuple[DataFrame, DataFrame | None]:
    """(documents, duplicates table or None) to check, read in a new Spark session: a clean
    output's data/ and duplicates/, or the raw input."""
    from corpusclean.jobs.inputs.read import open_input, read_input
    from corpusclean.jobs.runtime.session import build_session
    from corpusclean.schemas import DUPLICATES

    if clean_output:
        base = Path(input_path.removeprefix("file://"))
        source = open_input(str(base / "data"), "parquet")
    else:
        source = open_input(input_path, fmt)
    spark = build_session("corpusclean-check", spark_conf, [input_path])
    df = read_input(spark, source)
    duplicates = None
    if clean_output and (base / "duplicates").is_dir():
        duplicates = spark.read.schema(DUPLICATES).parquet(str(base / "duplicates"))
    return df, duplicates


def _report(
    args: argparse.Namespace,
    input_path: str,
    result: dict[str, Any],
    report_path: Path,
    junit_path: Path | None,
) -> int:
    """Print one line per check, write the JSON (and JUnit) report, print the verdict and
    gate: a check that could not run is an `InputError`, a failed one a `RejectedError`."""
    errors = [r for r in result["checks"] if r.get("error")]
    failed = failing(result["checks"], args.strict)
    out = {
        "input": input_path,
        "strict": bool(args.strict),
        "verdict": "error" if errors else ("fail" if failed else "pass"),
        **result,
    }
    for record in result["checks"]:
        print(format_line(record))
    write_json(report_path, out)
    log.info(JOB, f"wrote {report_path}")
    if junit_path is not None:
        from corpusclean.jobs.audit.junit import write_junit

        write_junit(junit_path, out, args.strict)
        log.info(JOB, f"wrote {junit_path}")
    if errors:
        names = ", ".join(f"{r['name']}: {r['error']}" for r in errors)
        raise InputError(f"{len(errors)} check(s) could not run ({names[:400]})")
    print(verdict_line(result, failed), flush=True)
    if failed:
        raise RejectedError(
            f"{len(failed)} check(s) failed: " + ", ".join(_failed_name(r) for r in failed)
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`corpusclean check --input DIR [--suite NAME|PATH] [--strict] [--report PATH]`."""
    return run_job(JOB, build_parser(), check, argv)


if __name__ == "__main__":
    sys.exit(main())
