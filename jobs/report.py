"""report.json and report.html: the same facts for scripts and for people.

The HTML page is self-contained (inline CSS and SVG charts, no scripts, no network), so it
renders on an air-gapped cluster and in CI artifacts alike.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from corpusclean.jobs.atomic import write_text_atomic


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half of it."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def write_reports(folder: Path, report: dict[str, Any]) -> Path:
    """Write `report.json` and `report.html` into `folder`; returns the JSON's path."""
    path = folder / "report.json"
    write_json_atomic(path, report)
    (folder / "report.html").write_text(render_html(report), "utf-8")
    return path


def _bar_chart(rows: list[tuple[str, float, str]], width: int = 640, unit: str = "") -> str:
    """A horizontal bar chart: (label, value, colour) rows, scaled to the largest value."""
    if not rows:
        return ""
    bar_h, gap, label_w = 22, 6, 170
    top = max(v for _, v, _ in rows) or 1.0
    height = len(rows) * (bar_h + gap) + gap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" class="chart">'
    ]
    for i, (label, value, colour) in enumerate(rows):
        y = gap + i * (bar_h + gap)
        w = max(1.0, (width - label_w - 90) * value / top)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{html.escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{_number(value)}{unit}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _rate_chart(columns: dict[str, dict[str, Any]], threshold: float) -> str:
    """Missing rate per column with the review threshold drawn as a line."""
    if not columns:
        return ""
    width, bar_h, gap, label_w = 640, 18, 5, 170
    plot_w = width - label_w - 70
    height = len(columns) * (bar_h + gap) + gap + 16
    x_t = label_w + plot_w * threshold
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" class="chart">'
    ]
    for i, (name, col) in enumerate(columns.items()):
        y = gap + i * (bar_h + gap)
        rate = float(col.get("missing_rate", 0.0))
        colour = "#c0392b" if col.get("flagged") else "#2e86c1"
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 13}" text-anchor="end">{html.escape(name)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{max(1.0, plot_w * rate):.1f}" '
            f'height="{bar_h}" fill="{colour}"/>'
            f'<text x="{label_w + plot_w * rate + 6:.1f}" y="{y + 13}">{rate:.1%}</text>'
        )
    parts.append(
        f'<line x1="{x_t:.1f}" x2="{x_t:.1f}" y1="0" y2="{height - 14}" stroke="#555" '
        f'stroke-dasharray="4 3"/><text x="{x_t:.1f}" y="{height - 2}" text-anchor="middle">'
        f"review {threshold:.0%}</text></svg>"
    )
    return "".join(parts)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _number(value: float) -> str:
    """A count or a measure as people read it: `17,101`, `1,234.5`, `0.8551`; never `2e+04`."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.1f}"
    return f"{value:.4g}"


# One status vocabulary with `corpusclean check` (jobs/check.py prints the records' status).
def status_word(check: dict[str, Any]) -> str:
    """PASS, WARN, INFO, FAIL or SKIP for an audit record (older reports: from `success`)."""
    status = check.get("status")
    if isinstance(status, str) and status:
        return status.upper()
    return "PASS" if check.get("success") else "FAIL"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _funnel(report: dict[str, Any]) -> list[str]:
    """The funnel chart and table, and the removed-by-stage chart."""
    stages = report.get("stages", [])
    removed = report.get("removed", {})
    # What was read, then what each stage of the run left (the stage names come from the
    # run's own `removed`, so a registered stage shows without a change here).
    funnel_names = {"read", *removed}
    funnel = [
        (s["name"], float(s["rows_out"] or 0), "#2e86c1")
        for s in stages
        if s.get("rows_out") is not None and s["name"] in funnel_names
    ]
    return [
        "<h2>Funnel</h2>",
        _bar_chart(funnel),
        _table(
            ["stage", "rows in", "rows out", "seconds", "note"],
            [
                [s["name"], s.get("rows_in"), s.get("rows_out"), s.get("seconds"), s.get("note")]
                for s in stages
            ],
        ),
        "<h2>Removed by stage</h2>",
        _bar_chart([(k, float(v), "#c0392b") for k, v in removed.items()]),
    ]


def _columns(report: dict[str, Any]) -> list[str]:
    """Rejected-by-reason, and the missing-value chart and table."""
    cfg = report.get("config", {})
    threshold = float(cfg.get("missing", {}).get("review_threshold", 0.3))
    return [
        "<h2>Rejected by rule</h2>",
        _table(["reason", "rows"], [[k, v] for k, v in report.get("rejected", {}).items()]),
        "<h2>Missing values</h2>",
        _rate_chart(report.get("columns", {}), threshold),
        _table(
            ["column", "type", "null rate", "blank rate", "flagged"],
            [
                [k, c.get("type"), c.get("null_rate"), c.get("empty_rate"), c.get("flagged")]
                for k, c in report.get("columns", {}).items()
            ],
        ),
    ]


def _audit_table(audit: dict[str, Any]) -> list[str]:
    if not audit.get("checks"):
        return []
    return [
        "<h2>Audit</h2>",
        _table(
            ["check", "column", "severity", "observed", "result"],
            [
                [
                    c.get("name"),
                    c.get("column"),
                    c.get("severity"),
                    c.get("observed"),
                    status_word(c),
                ]
                for c in audit["checks"]
            ],
        ),
    ]


def _against(report: dict[str, Any]) -> list[str]:
    """Per prior index (`clean --against`): what each stage removed against it, and near's
    candidate pairs and verified edges to it; and the output's own index."""
    rows = []
    for prior in report.get("against") or []:
        removed, near = prior.get("removed") or {}, prior.get("near") or {}
        rows.append(
            [
                prior.get("name"),
                prior.get("path"),
                prior.get("documents"),
                removed.get("doc_id"),
                removed.get("exact"),
                removed.get("near"),
                near.get("candidate_pairs"),
                near.get("verified_edges"),
            ]
        )
    out = []
    if rows:
        out += [
            "<h2>Deduplicated against</h2>",
            _table(
                [
                    "index",
                    "path",
                    "documents",
                    "removed: doc_id",
                    "exact",
                    "near",
                    "candidate pairs",
                    "verified edges",
                ],
                rows,
            ),
        ]
    own = report.get("index")
    if own:
        out += [
            "<h2>Dedup index</h2>",
            _table(
                ["path", "documents", "bytes", "bytes a document"],
                [
                    [
                        own.get("path"),
                        own.get("documents"),
                        own.get("bytes"),
                        own.get("bytes_per_document"),
                    ]
                ],
            ),
        ]
    return out


def _strip(score: dict[str, Any], width: int = 360) -> str:
    """A score's distribution as a strip: p1-p99 light, p10-p90 darker, p25-p75 darkest, the
    median a tick, and each keep-rule bound a red dashed line (the side past it is dropped)."""
    q = score.get("quantiles") or {}
    points = [q.get(k) for k in ("p01", "p10", "p25", "p50", "p75", "p90", "p99")]
    bounds = [b["value"] for b in score.get("bounds", [])]
    known = [float(v) for v in [*points, *bounds] if v is not None and math.isfinite(v)]
    if len([p for p in points if p is not None]) < 7 or not known:
        return ""
    lo, hi = min(known), max(known)
    span = (hi - lo) or 1.0
    pad, h = 8, 26

    def x(v: float) -> float:
        return pad + (width - 2 * pad) * (float(v) - lo) / span

    p01, p10, p25, p50, p75, p90, p99 = (float(p) for p in points)  # type: ignore[arg-type]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + 14}" '
        f'role="img" class="chart strip">',
        f'<rect x="{x(p01):.1f}" y="8" width="{max(1.0, x(p99) - x(p01)):.1f}" height="10" '
        'fill="#d6eaf8"/>',
        f'<rect x="{x(p10):.1f}" y="6" width="{max(1.0, x(p90) - x(p10)):.1f}" height="14" '
        'fill="#85c1e9"/>',
        f'<rect x="{x(p25):.1f}" y="4" width="{max(1.0, x(p75) - x(p25)):.1f}" height="18" '
        'fill="#2e86c1"/>',
        f'<line x1="{x(p50):.1f}" x2="{x(p50):.1f}" y1="2" y2="24" stroke="#17202a" '
        'stroke-width="2"/>',
    ]
    for b in score.get("bounds", []):
        bx = x(b["value"])
        parts.append(
            f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="0" y2="{h}" stroke="#c0392b" '
            f'stroke-dasharray="3 2" stroke-width="2"/><text x="{bx:.1f}" y="{h + 12}" '
            f'text-anchor="middle">{html.escape(b["op"])} {_number(b["value"])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _quality(report: dict[str, Any]) -> list[str]:
    """Per quality filter: what it removed, and each score's distribution against its bounds."""
    quality = report.get("quality") or {}
    if not quality:
        return []
    out = ["<h2>Quality filters</h2>"]
    for name, figures in quality.items():
        out.append(f"<h3>{html.escape(name)}: {_number(figures.get('removed', 0))} removed</h3>")
        rows = []
        for col, score in (figures.get("scores") or {}).items():
            q = score.get("quantiles") or {}
            bounds = ", ".join(
                f"{b['op']} {_number(b['value'])}: {_number(b['outside'])} outside"
                for b in score.get("bounds", [])
            )
            rows.append(
                "<tr>"
                + "".join(
                    f"<td>{html.escape(_fmt(v))}</td>"
                    for v in (col, score.get("scored"), bounds or "-", q.get("p10"))
                )
                + f"<td>{html.escape(_fmt(q.get('p50')))}</td>"
                + f"<td>{html.escape(_fmt(q.get('p90')))}</td>"
                + f"<td>{_strip(score)}</td></tr>"
            )
        head = "".join(
            f"<th>{h}</th>"
            for h in ("score", "scored", "bounds", "p10", "median", "p90", "p1 - p99")
        )
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return out


def render_html(report: dict[str, Any]) -> str:
    """The human report of a clean run."""
    gate = report.get("gate", {})
    passed = gate.get("passed")
    audit = report.get("audit") or {}
    verdict = "PUBLISHED" if passed and audit.get("passed", True) else "REJECTED"
    near = report.get("near_dedup") or {}
    cfg = report.get("config", {})
    near_rows = [[k, v] for k, v in near.items() if not isinstance(v, dict | list)]
    sections = [
        f"<h1>corpusclean clean <span class='{verdict.lower()}'>{verdict}</span></h1>",
        _table(
            ["run", "input rows", "output rows", "retention", "gate", "seconds"],
            [
                [
                    report.get("run_id"),
                    report.get("input_rows"),
                    report.get("output_rows"),
                    f"{report.get('retention', 0):.2%}",
                    f"min {gate.get('min_retention', 0):.0%}: {'pass' if passed else 'fail'}",
                    report.get("seconds"),
                ]
            ],
        ),
        *_funnel(report),
        *_columns(report),
        *_quality(report),
        "<h2>Near-dedup</h2>",
        _table(["figure", "value"], near_rows),
        *_against(report),
        *_audit_table(audit),
    ]
    sections += ["<h2>Config</h2>", f"<pre>{html.escape(json.dumps(cfg, indent=2))}</pre>"]
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:60em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
        "th{background:#f3f3f3}.chart text{font-size:12px}"
        ".published{color:#1e8449}.rejected{color:#c0392b}pre{background:#f7f7f7;padding:1em}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>corpusclean report {html.escape(str(report.get('run_id')))}</title>"
        f"<style>{style}</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )
