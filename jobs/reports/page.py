"""report.json and report.html: the same facts for scripts and for people.

The HTML page is self-contained (inline CSS and SVG charts, no scripts, no network), so it
renders on an air-gapped cluster and in CI artifacts alike.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpusclean.jobs.reports import charts
from corpusclean.jobs.reports import data as report_data
from corpusclean.jobs.runtime.atomic import write_json_atomic

if TYPE_CHECKING:
    from corpusclean.pipelines.base import Dedup


def write_reports(folder: Path, report: dict[str, Any]) -> Path:
    """Write `report.json` and `report.html` into `folder`; returns the JSON's path."""
    path = folder / "report.json"
    write_json_atomic(path, report)
    (folder / "report.html").write_text(render_html(report), "utf-8")
    return path


def html_table(headers: list[str], rows: list[list[Any]]) -> str:
    """An HTML table of `rows` under `headers`, each cell escaped and written as people read it."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_number = charts.number


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
    """The funnel chart and table, removed-by-stage, and each stage's seconds."""
    stages = report.get("stages", [])
    removed = report.get("removed", {})
    # What was read, then what each stage of the run left (the stage names come from the
    # run's own `removed`, so a registered stage shows without a change here).
    funnel_names = {"read", *removed}
    funnel = [
        (s["name"], float(s["rows_out"] or 0))
        for s in stages
        if s.get("rows_out") is not None and s["name"] in funnel_names
    ]
    timed = [
        (f"{s['name']} ({_number(s.get('jobs') or 0)} jobs)", float(s.get("seconds") or 0))
        for s in stages
        if s.get("seconds")
    ]
    return [
        "<h2 id='funnel'>Funnel</h2>",
        charts.bars(funnel, "Rows left after each stage"),
        html_table(
            ["stage", "rows in", "rows out", "seconds", "Spark jobs", "note"],
            [
                [
                    s["name"],
                    s.get("rows_in"),
                    s.get("rows_out"),
                    s.get("seconds"),
                    s.get("jobs"),
                    s.get("note"),
                ]
                for s in stages
            ],
        ),
        "<h2 id='removed'>Removed by stage</h2>",
        charts.bars([(k, float(v)) for k, v in removed.items()], "Rows removed", charts.RED),
        "<h2 id='timings'>Stage timings</h2>",
        charts.bars(timed, "Seconds per stage (wall)", charts.GREY, unit=" s")
        or "<p>No stage timings in this report.</p>",
    ]


def _columns(report: dict[str, Any]) -> list[str]:
    """Rejected-by-reason with a few rows of each, and the missing-value chart and table."""
    cfg = report.get("config", {})
    threshold = float(cfg.get("missing", {}).get("review_threshold", 0.3))
    columns = report.get("columns", {})
    samples = (report.get("examples") or {}).get("rejected") or {}
    out = [
        "<h2 id='rejected'>Rejected by rule</h2>",
        html_table(["reason", "rows"], [[k, v] for k, v in report.get("rejected", {}).items()]),
    ]
    if samples:
        rows = [
            f"<tr><td>{html.escape(reason)}</td><td>{html.escape(str(r['doc_id']))}</td>"
            f"<td>{_text(r.get('text'), bool(r.get('found')))}</td></tr>"
            for reason, picked in samples.items()
            for r in picked
        ]
        out.append(
            "<details open><summary>Rejected rows, a few per reason</summary><table>"
            "<thead><tr><th>reason</th><th>doc_id</th><th>text</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></details>"
        )
    return [
        *out,
        "<h2 id='missing'>Missing values</h2>",
        charts.rates(
            [
                (k, float(c.get("missing_rate", 0.0)), bool(c.get("flagged")))
                for k, c in columns.items()
            ],
            threshold,
            "Missing (null or blank) per column",
        ),
        html_table(
            ["column", "type", "null rate", "blank rate", "flagged"],
            [
                [k, c.get("type"), c.get("null_rate"), c.get("empty_rate"), c.get("flagged")]
                for k, c in columns.items()
            ],
        ),
    ]


def _text(text: str | None, found: bool = False) -> str:
    if text is None:
        why = (
            "null" if found else "not shown: not in this output, or past the preview's read budget"
        )
        return f"<span class='none'>(text {why})</span>"
    return f"<div class='doc'>{html.escape(text)}</div>"


def _lengths(report: dict[str, Any]) -> list[str]:
    """The text-length distribution of the input and of the output."""
    lengths = report.get("lengths") or {}
    edges = lengths.get("edges") or []
    series = [
        (label, lengths[key], colour)
        for key, label, colour in (
            ("input", "input", charts.GREY),
            ("output", "published", charts.BLUE),
        )
        if lengths.get(key)
    ]
    chart = charts.histograms(edges, series, "Text length", "characters (log scale)")
    return [
        "<h2 id='lengths'>Text length, before and after</h2>",
        chart
        or "<p>This report holds no length distribution (written before 0.1.0's report "
        "views, or an empty input).</p>",
    ]


def _breakdown(report: dict[str, Any]) -> list[str]:
    """Rows in and out per value of `lang` and `source`, and what removed the rest."""
    out: list[str] = []
    for col, values in (report.get("breakdown") or {}).items():
        out.append(f"<h2 id='by-{html.escape(col)}'>By {html.escape(col)}</h2>")
        if "too_many" in values:
            out.append(f"<p>{html.escape(col)} has too many values to break down.</p>")
            continue
        shown = list(values.items())[:25]
        out.append(
            charts.grouped(
                [k for k, _ in shown],
                [
                    ("input", [float(v["in"]) for _, v in shown], charts.GREY),
                    ("published", [float(v["out"]) for _, v in shown], charts.BLUE),
                ],
                f"Rows per {col}",
            )
        )
        stages = sorted({st for _, v in values.items() for st in v["removed"]})
        out.append(
            html_table(
                [col, "input", "published", "kept", *[f"removed: {s}" for s in stages]],
                [
                    [
                        k,
                        v["in"],
                        v["out"],
                        f"{v['out'] / v['in']:.1%}" if v["in"] else "-",
                        *[v["removed"].get(s, 0) for s in stages],
                    ]
                    for k, v in values.items()
                ],
            )
        )
    return out


# Words of spaced scripts, single characters of the scripts written without spaces (CJK), runs
# of whitespace, and single punctuation marks: the units the side-by-side view marks.
_TOKENS = re.compile(r"\s+|[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003ffff]+|\S")


def _diff(a: str | None, b: str | None) -> tuple[str, str]:
    """Both texts escaped, with the words that differ between them marked."""
    if a is None or b is None:
        return _text(a), _text(b)
    ta, tb = _TOKENS.findall(a), _TOKENS.findall(b)
    marked_a: list[str] = []
    marked_b: list[str] = []
    matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = html.escape("".join(ta[i1:i2])), html.escape("".join(tb[j1:j2]))
        if op == "equal":
            marked_a.append(left)
            marked_b.append(right)
        else:
            marked_a.append(f"<mark>{left}</mark>" if left else "")
            marked_b.append(f"<mark>{right}</mark>" if right else "")
    return (
        f"<div class='doc'>{''.join(marked_a)}</div>",
        f"<div class='doc'>{''.join(marked_b)}</div>",
    )


def dedup_stages(report: dict[str, Any]) -> list[type[Dedup]]:
    """The dedup stages the run listed, in its order, as registered (pipelines/base.py): what
    each one's part of the page shows comes from the stage. A stage whose module is no longer
    installed is left out."""
    from corpusclean.pipelines.base import Dedup, load_steps

    steps = load_steps()
    listed = (report.get("config") or {}).get("stages") or [
        s.get("name") for s in report.get("stages") or []
    ]
    return [steps[n] for n in listed if n in steps and issubclass(steps[n], Dedup)]


# What an example pair holds besides its figures.
_PAIR_KEYS = ("kept", "removed", "kept_text", "removed_text", "band")


def _pairs(report: dict[str, Any], stage: type[Dedup]) -> list[str]:
    """A stage's example pairs (`examples[name]`): each removed document beside the one its
    cluster kept, with the stage's figures for the pair, the words that differ marked."""
    pairs = (report.get("examples") or {}).get(stage.name) or []
    if not pairs:
        return []
    out = [
        f"<h3>{html.escape(stage.title or stage.name)}: removed beside kept</h3>",
        "<p>A removed document beside the one its cluster kept, with the stage's figures for "
        "the pair; the words that differ are marked.</p>",
    ]
    for p in pairs:
        kept, removed = _diff(p.get("kept_text"), p.get("removed_text"))
        figures = [
            f"{html.escape(str(k))} {'-' if v is None else _fmt(v)}"
            for k, v in p.items()
            if k not in _PAIR_KEYS
        ]
        if "band" in p:
            figures.append(f"band {html.escape(str(p.get('band')))}")
        out.append(
            "<div class='pair'>"
            f"<div class='pairhead'>{' · '.join(figures)}"
            "</div><div class='side'><div><b>kept</b> "
            f"{html.escape(str(p.get('kept')))}{kept}</div><div><b>removed</b> "
            f"{html.escape(str(p.get('removed')))}{removed}</div></div></div>"
        )
    return out


def _clusters(report: dict[str, Any]) -> list[str]:
    """Cluster sizes per dedup stage, the largest clusters, and a few exact duplicates."""
    clusters = report.get("clusters") or {}
    out: list[str] = []
    if clusters:
        # A colour per stage by its place in the run, the same on every page of one config.
        order = [cls.name for cls in dedup_stages(report)]
        listed = sorted(clusters, key=lambda st: order.index(st) if st in order else len(order))
        series = [
            (
                stage,
                {int(k): int(v) for k, v in clusters[stage].get("sizes", {}).items()},
                charts.SERIES[i % len(charts.SERIES)],
            )
            for i, stage in enumerate(listed)
        ]
        out += ["<h3>Cluster sizes</h3>", charts.cluster_sizes(series, "Clusters by size")]
        rows = [
            f"<tr><td>{html.escape(stage)}</td><td>{html.escape(str(big['cluster_id']))}</td>"
            f"<td>{_number(big['size'])}</td><td>{_text(big.get('text'))}</td></tr>"
            for stage, c in clusters.items()
            for big in c.get("largest", [])
        ]
        out.append(
            "<h3>Largest clusters</h3><table><thead><tr><th>stage</th><th>kept doc_id</th>"
            f"<th>documents</th><th>kept text</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>"
        )
    exact = (report.get("examples") or {}).get("exact") or []
    if exact:
        rows = [
            f"<tr><td>{html.escape(str(e['kept']))}</td>"
            f"<td>{html.escape(', '.join(e['removed']))}</td><td>{_text(e.get('text'))}</td></tr>"
            for e in exact
        ]
        out.append(
            "<h3>Exact duplicates</h3><table><thead><tr><th>kept</th><th>removed (same "
            f"normalised text)</th><th>text</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table>"
        )
    return out


def _facts(report: dict[str, Any]) -> list[str]:
    """Where the run read and wrote, with what, on what."""
    spark = report.get("spark") or {}
    rows = [
        ["run", report.get("run_id")],
        ["input", report.get("input")],
        ["output", report.get("output")],
        ["corpusclean", report.get("version")],
        ["Spark", spark.get("version")],
        ["master", spark.get("master")],
        ["executors", spark.get("executors")],
        ["cores", spark.get("cores")],
        ["Spark jobs", spark.get("jobs")],
        ["shuffle partitions", spark.get("shuffle_partitions")],
        ["wall seconds", report.get("seconds")],
    ]
    if report.get("resumed_from"):
        rows.append(["resumed from", report["resumed_from"]])
    return ["<h2 id='facts'>Run facts</h2>", html_table(["fact", "value"], rows)]


def _audit_table(audit: dict[str, Any]) -> list[str]:
    if not audit.get("checks"):
        return []
    return [
        "<h2 id='audit'>Audit</h2>",
        html_table(
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
    """Per prior index (`clean --against`): what each dedup stage removed against it, and the
    cluster stage's candidate pairs and verified edges to it; and the output's own index."""
    stages = [cls.name for cls in dedup_stages(report)]
    rows = []
    for prior in report.get("against") or []:
        removed, near = prior.get("removed") or {}, prior.get("near") or {}
        rows.append(
            [
                prior.get("name"),
                prior.get("path"),
                prior.get("documents"),
                *[removed.get(stage) for stage in stages],
                near.get("candidate_pairs"),
                near.get("verified_edges"),
            ]
        )
    out = []
    if rows:
        out += [
            "<h2 id='against'>Deduplicated against</h2>",
            html_table(
                [
                    "index",
                    "path",
                    "documents",
                    *[f"removed: {stage}" for stage in stages],
                    "candidate pairs",
                    "verified edges",
                ],
                rows,
            ),
        ]
    own = report.get("index")
    if own:
        out += [
            "<h2 id='index'>Dedup index</h2>",
            html_table(
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


def _quality(report: dict[str, Any]) -> list[str]:
    """Per quality filter: what it removed, and each score's distribution against its bounds."""
    quality = report.get("quality") or {}
    if not quality:
        return []
    out = ["<h2 id='quality'>Quality filters</h2>"]
    for name, figures in quality.items():
        out.append(f"<h3>{html.escape(name)}: {_number(figures.get('removed', 0))} removed</h3>")
        rows = []
        strips = []
        for col, score in (figures.get("scores") or {}).items():
            q = score.get("quantiles") or {}
            bounds = ", ".join(
                f"{b['op']} {_number(b['value'])}: {_number(b['outside'])} outside"
                for b in score.get("bounds", [])
            )
            rows.append(
                [col, score.get("scored"), bounds or "-", q.get("p10"), q.get("p50"), q.get("p90")]
            )
            strips.append((col, q, [(b["op"], float(b["value"])) for b in score.get("bounds", [])]))
        out.append(html_table(["score", "scored", "bounds", "p10", "median", "p90"], rows))
        out.append(charts.strips(strips, f"{name}: p1 - p99 of each score, and its bounds"))
    return out


def _cluster_stages(report: dict[str, Any]) -> list[str]:
    """Each cluster stage's figures (under its config section's name) and example pairs."""
    out: list[str] = []
    for stage in dedup_stages(report):
        figures = report.get(stage.section_name())
        figures = figures if isinstance(figures, dict) else {}
        pairs = _pairs(report, stage)
        if not stage.clusters_on_driver or not (figures or pairs):
            continue
        rows = [[k, v] for k, v in figures.items() if not isinstance(v, dict | list)]
        out += [
            f"<h2 id='{html.escape(stage.name)}'>{html.escape(stage.title or stage.name)}</h2>",
            html_table(["figure", "value"], rows),
            *pairs,
        ]
    return out


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}svg.chart{display:block;max-width:100%;height:auto;margin:.5em 0}"
    ".published{color:#1e8449}.rejected{color:#c0392b}pre{background:#f7f7f7;padding:1em}"
    ".doc{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em;max-height:16em;overflow:auto;max-width:60em}"
    ".side{display:grid;grid-template-columns:1fr 1fr;gap:1em}.pair{border:1px solid #ccc;"
    "padding:.5em;margin:.8em 0}.pairhead{font-weight:600;margin-bottom:.4em}"
    "mark{background:#f9e79f}.none{color:#888}nav a{margin-right:.8em}"
)


def render_html(report: dict[str, Any]) -> str:
    """The human report of a clean run: every section reads report.json's facts only (the
    views from the outputs are in it: `clusters`, `examples`)."""
    gate = report.get("gate", {})
    passed = gate.get("passed")
    audit = report.get("audit") or {}
    verdict = "PUBLISHED" if passed and audit.get("passed", True) else "REJECTED"
    cfg = report.get("config", {})
    dedup = [
        "<h2 id='clusters'>Duplicate clusters</h2>",
        *(_clusters(report) or ["<p>No duplicate clusters.</p>"]),
    ]
    sections = [
        f"<h1>corpusclean clean <span class='{verdict.lower()}'>{verdict}</span></h1>",
        html_table(
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
        *_facts(report),
        *_funnel(report),
        *_lengths(report),
        *_breakdown(report),
        *_columns(report),
        *_quality(report),
        *_cluster_stages(report),
        *dedup,
        *_against(report),
        *_audit_table(audit),
        "<h2 id='config'>Config</h2>",
        f"<pre>{html.escape(json.dumps(cfg, indent=2))}</pre>",
    ]
    ids = re.findall(r"<h2 id='([^']+)'>([^<]+)</h2>", "\n".join(sections))
    nav = "<nav>" + "".join(f"<a href='#{i}'>{html.escape(t)}</a>" for i, t in ids) + "</nav>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>corpusclean report {html.escape(str(report.get('run_id')))}</title>"
        f"<style>{_STYLE}</style></head><body>"
        + sections[0]
        + nav
        + "\n".join(sections[1:])
        + "</body></html>\n"
    )


def report_views(out: Path, id_col: str, text_col: str) -> dict[str, Any]:
    """report.json's views read from a clean output's files (jobs/reports/data.py): `clusters`
    and `examples` (`exact`, `rejected`; a stage's example pairs are the run's own, as only it
    saw the removed texts)."""
    views = report_data.from_outputs(out, id_col, text_col)
    return {
        "clusters": views["clusters"],
        "examples": {"exact": views["exact"], "rejected": views["rejected"]},
    }
