"""`corpusclean check --junit PATH`: the check result as JUnit XML, for CI test reports.

One `<testcase>` per check of the suite, in suite order, under one `<testsuite>`:

* a critical failure is a `<failure type="critical">`; its message is the check's one-line
  summary and its text lists observed, expected, detail and example ids;
* a warning is a passing test case with the same text in `<system-out>`, or a
  `<failure type="warning">` under `--strict` (the same rule as the exit code: a test report
  fails exactly when `check` exits 3);
* an `info` result passes, with its text in `<system-out>`;
* a skipped check is `<skipped message="why">`;
* a check that could not run is an `<error>` (check exits 1).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from corpusclean.jobs.runtime.atomic import replacing


def _text(record: dict[str, Any]) -> str:
    lines = [f"severity: {record.get('severity')}", f"column: {record.get('column') or '-'}"]
    for key in ("observed", "expected", "detail", "error"):
        if record.get(key) is not None:
            lines.append(f"{key}: {record[key]}")
    if record.get("examples"):
        lines.append("examples: " + ", ".join(str(v) for v in record["examples"]))
    return "\n".join(lines)


def _message(record: dict[str, Any]) -> str:
    column = f" ({record['column']})" if record.get("column") else ""
    observed = record.get("observed")
    parts = [f"{record['name']}{column} {record['status']}"]
    if observed is not None:
        parts.append(f"observed={observed}")
    if record.get("expected"):
        parts.append(f"expected {record['expected']}")
    if record.get("examples"):
        parts.append("e.g. " + ", ".join(str(v) for v in record["examples"][:5]))
    return ", ".join(parts)[:1000]


def junit_tree(result: dict[str, Any], strict: bool) -> ET.ElementTree:
    """The JUnit XML tree of a `check` result (the dict written to the JSON report)."""
    suite_name = f"corpusclean.check.{result['suite']}"
    checks: list[dict[str, Any]] = list(result.get("checks") or [])
    seconds = f"{float(result.get('seconds') or 0.0):.3f}"
    counts = {"tests": len(checks), "failures": 0, "errors": 0, "skipped": 0}
    root = ET.Element("testsuites", name="corpusclean check")
    suite = ET.SubElement(root, "testsuite", name=suite_name)
    props = ET.SubElement(suite, "properties")
    for key in ("input", "source", "verdict"):
        if result.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=str(result[key]))
    ET.SubElement(props, "property", name="strict", value=str(bool(strict)).lower())
    failing = {"fail", "warn"} if strict else {"fail"}
    for record in checks:
        case = ET.SubElement(suite, "testcase", name=str(record["name"]), classname=suite_name)
        status = record.get("status")
        if record.get("error"):
            counts["errors"] += 1
            error = ET.SubElement(
                case, "error", type="could not run", message=str(record["error"])[:1000]
            )
            error.text = _text(record)
        elif status in failing:
            counts["failures"] += 1
            severity = "critical" if status == "fail" else "warning"
            failure = ET.SubElement(case, "failure", type=severity, message=_message(record))
            failure.text = _text(record)
        elif status == "skip":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=str(record.get("detail") or "not run"))
        elif status in ("warn", "info"):
            out = ET.SubElement(case, "system-out")
            out.text = f"{'WARNING' if status == 'warn' else 'INFO'}: {_message(record)}\n"
            out.text += _text(record)
    for element in (root, suite):
        for key, value in counts.items():
            element.set(key, str(value))
        element.set("time", seconds)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write_junit(path: Path, result: dict[str, Any], strict: bool) -> None:
    """Write the JUnit XML through a temporary file, so CI never reads half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        junit_tree(result, strict).write(tmp, encoding="utf-8", xml_declaration=True)
