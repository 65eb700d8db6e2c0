"""A bench report for people and scripts: the terminal table, the chart, the JSON file."""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpusclean.jobs.loadbench import storage, throughput
from corpusclean.jobs.runtime.atomic import write_text_atomic


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "inf"
    return f"{value:,.{digits}f}"


_Row = tuple[str, str, str, str]  # measurement, cold, warm, spread


def _storage_rows(m: dict[str, Any]) -> list[_Row]:
    """Rows of the raw device measurements: sequential MB/s, random IOPS and latency."""
    seq = m.get("sequential", {})
    rows: list[_Row] = [
        (
            "sequential read MB/s",
            _fmt(seq.get("cold_mb_s", {}).get("median"), 1),
            _fmt(seq.get("warm_mb_s", {}).get("median"), 1),
            _spread(seq.get("cold_mb_s"), seq.get("warm_mb_s")),
        )
    ]
    for key, v in (m.get("random") or {}).items():
        if key.startswith("threads_"):
            n = key.split("_", 1)[1]
            rows.append(
                (
                    f"random 4K IOPS, {n} thread(s)",
                    _fmt(v["iops"]["median"]),
                    "",
                    _spread(v["iops"]),
                )
            )
            rows.append(
                (
                    f"  latency p50 / p99 us, {n}",
                    f"{_fmt(v['p50_us']['median'], 1)} / {_fmt(v['p99_us']['median'], 1)}",
                    "",
                    "",
                )
            )
    return rows


def _reader_rows(name: str, r: dict[str, Any]) -> list[_Row]:
    """Rows of one loader: docs/s, text and tar MB/s, and time to the first sample."""
    label = name + (f" ({r['workers']} workers)" if r.get("workers") else "")
    cold, warm = r["cold"], r["warm"]
    tokens: list[_Row] = []
    if "tokens_s" in cold:
        tokens = [
            (
                "  tokens/s",
                _fmt(cold["tokens_s"]["median"]),
                _fmt(warm["tokens_s"]["median"]),
                _spread(cold["tokens_s"], warm["tokens_s"]),
            )
        ]
    return [
        (
            f"{label} docs/s",
            _fmt(cold["docs_s"]["median"]),
            _fmt(warm["docs_s"]["median"]),
            _spread(cold["docs_s"], warm["docs_s"]),
        ),
        (
            "  text MB/s | tar MB/s",
            f"{_fmt(cold['text_mb_s']['median'], 1)} | {_fmt(cold['file_mb_s']['median'], 1)}",
            f"{_fmt(warm['text_mb_s']['median'], 1)} | {_fmt(warm['file_mb_s']['median'], 1)}",
            "",
        ),
        *tokens,
        (
            "  first sample ms",
            _fmt(_ms(cold["first_sample_s"]["median"]), 2),
            _fmt(_ms(warm["first_sample_s"]["median"]), 2),
            "",
        ),
    ]


def _layout_rows(report: dict[str, Any]) -> list[_Row]:
    """Rows of the other layouts: one file per document, and GDS reads into GPU memory."""
    rows: list[_Row] = []
    small = report.get("measurements", {}).get("small_files")
    if small:
        rows.append(
            (
                f"small files ({small['files']:,}) docs/s",
                _fmt(small["cold_docs_s"]["median"]),
                _fmt(small["warm_docs_s"]["median"]),
                _spread(small["cold_docs_s"], small["warm_docs_s"]),
            )
        )
    gds = report.get("gds") or {}
    if gds.get("available"):
        rows.append(
            (
                "GDS kvikio | host+copy MB/s",
                _fmt(gds["kvikio_read_mb_s"]["median"], 1),
                _fmt(gds["host_read_copy_mb_s"]["median"], 1),
                "",
            )
        )
    else:
        rows.append(("GDS", "not available", "", ""))
    return rows


def _table_lines(rows: Sequence[_Row]) -> list[str]:
    """The rows under a header, in columns sized to fit: names left, figures right."""
    head: _Row = ("measurement", "cold", "warm", "spread")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(head), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _summary_lines(report: dict[str, Any]) -> list[str]:
    """The lines under the table: tokens, the run's needed rate, goals and GDS's reason."""
    plan = report.get("consumption", {})
    lines = [
        "",
        f"bytes/token {report.get('bytes_per_token')} ({report.get('bytes_per_token_source')})",
        f"run needs {throughput.format_rate(report.get('required_bytes_s') or 0)} "
        f"({_fmt(plan.get('tokens_s'))} tokens/s; "
        f"{throughput.format_rate(plan.get('required_bytes_s_per_node') or 0)} per node of "
        f"{plan.get('gpus_per_node')}); best cold loader "
        f"{throughput.format_rate(report.get('loader_bytes_s') or 0)} "
        f"({report.get('loader_mb_s', {}).get('reader')})",
    ]
    loader_tokens = report.get("loader_tokens_s")
    if loader_tokens:
        need = plan.get("tokens_s") or 0
        lines.append(
            f"tokens/s: best cold loader {_fmt(loader_tokens.get('cold'))} "
            f"({loader_tokens.get('reader')}) against the run's {_fmt(need)}"
        )
    for name, goal in (report.get("goals") or {}).items():
        if isinstance(goal, dict):
            state = "met" if goal["met"] else "NOT met"
            lines.append(f"goal {name}: {goal['ratio']} (target {goal['target']}) {state}")
    gds = report.get("gds") or {}
    if not gds.get("available"):
        lines.append(f"GDS: {gds.get('reason')}")
    return lines


def render_table(report: dict[str, Any]) -> str:
    """The report as a fixed-width table for the terminal."""
    rows = _storage_rows(report.get("measurements", {}))
    for name, r in report.get("readers", {}).items():
        rows += _reader_rows(name, r)
    rows += _layout_rows(report)
    return "\n".join(_table_lines(rows) + _summary_lines(report))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _spread(*summaries: dict[str, Any] | None) -> str:
    values = [s["spread"] for s in summaries if s and s.get("spread") is not None]
    return f"{max(values):.0%}" if values else ""


def chart_rows(report: dict[str, Any]) -> list[tuple[str, float]]:
    """(label, MB/s) of every measured rate that the chart shows."""
    rows: list[tuple[str, float]] = []
    m = report.get("measurements", {})
    seq = m.get("sequential", {})
    for side in ("cold", "warm"):
        value = seq.get(f"{side}_mb_s", {}).get("median")
        if value:
            rows.append((f"sequential read, {side} (tar bytes)", value))
    for name, r in report.get("readers", {}).items():
        for side in ("cold", "warm"):
            value = r[side]["text_mb_s"]["median"]
            if value:
                rows.append((f"{name}, {side} (text)", value))
    small = m.get("small_files")
    if small:
        for side in ("cold", "warm"):
            value = small[f"{side}_text_mb_s"]["median"]
            if value:
                rows.append((f"small files, {side} (text)", value))
    gds = report.get("gds") or {}
    if gds.get("available"):
        rows.append(("kvikio to GPU", gds["kvikio_read_mb_s"]["median"]))
        rows.append(("host read + copy to GPU", gds["host_read_copy_mb_s"]["median"]))
    return rows


def write_chart(report: dict[str, Any], json_path: Path) -> Path | None:
    """A bar chart of the rates against the required rate: PNG with matplotlib, else SVG."""
    rows = chart_rows(report)
    if not rows:
        return None
    required = (report.get("required_bytes_s") or 0) / 1e6
    per_node = (report.get("consumption", {}).get("required_bytes_s_per_node") or 0) / 1e6
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = json_path.with_suffix(".svg")
        path.write_text(_svg_chart(rows, required, per_node, report.get("verdict", "")), "utf-8")
        return path
    path = json_path.with_suffix(".png")
    labels = [r[0] for r in rows][::-1]
    values = [r[1] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.8))
    colors = [_bar_color(label) for label in labels]
    ax.barh(labels, values, color=colors)
    ax.set_xscale("log")
    if required > 0:
        ax.axvline(required, color="#d62728", linewidth=2, label="required (whole run)")
    if 0 < per_node < required:
        ax.axvline(per_node, color="#ff7f0e", linestyle="--", label="required per node")
    ax.set_xlabel("MB/s (log scale)")
    ax.set_title(report.get("verdict", ""), fontsize=9, wrap=True)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bar_color(label: str) -> str:
    if "cold" in label:
        return "#1f4e79"
    if "warm" in label:
        return "#9ecae1"
    return "#4c78a8"


def _svg_chart(rows: list[tuple[str, float]], required: float, per_node: float, title: str) -> str:
    """A log-scale horizontal bar chart as plain SVG."""
    from xml.sax.saxutils import escape

    values = [v for _, v in rows] + [x for x in (required, per_node) if x > 0]
    lo = math.floor(math.log10(max(min(values), 1e-6)))
    hi = math.ceil(math.log10(max(values) * 1.01))
    hi = max(hi, lo + 1)
    left, width, bar, gap, top = 260, 460, 18, 8, 40
    height = top + len(rows) * (bar + gap) + 40

    def x(v: float) -> float:
        return left + width * (math.log10(max(v, 10**lo)) - lo) / (hi - lo)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 30}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="10" y="20" font-size="12">{escape(title)}</text>',
    ]
    for i, (label, value) in enumerate(rows):
        y = top + i * (bar + gap)
        parts.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y}" width="{x(value) - left:.1f}" height="{bar}" '
            f'fill="{_bar_color(label)}"/>'
        )
        parts.append(f'<text x="{x(value) + 4:.1f}" y="{y + 13}">{value:,.1f}</text>')
    axis_y = top + len(rows) * (bar + gap)
    for p in range(lo, hi + 1):
        parts.append(
            f'<text x="{x(10**p):.1f}" y="{axis_y + 14}" text-anchor="middle">{10**p:g}</text>'
        )
    parts.append(f'<text x="{left + width / 2}" y="{axis_y + 30}">MB/s (log scale)</text>')
    for value, color, label in (
        (required, "#d62728", "required"),
        (per_node, "#ff7f0e", "per node"),
    ):
        if value > 0:
            parts.append(
                f'<line x1="{x(value):.1f}" y1="{top - 6}" x2="{x(value):.1f}" y2="{axis_y}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
            parts.append(
                f'<text x="{x(value) + 3:.1f}" y="{top - 8}" fill="{color}">{label}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(report, indent=2, allow_nan=False, default=str) + "\n")


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "root": hasattr(os, "geteuid") and os.geteuid() == 0,
        "proc_self_io": storage.proc_io() is not None,
    }


def no_nan(value: Any) -> Any:
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [no_nan(v) for v in value]
    return value
