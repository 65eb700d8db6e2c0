"""bench.html: `corpusclean bench`'s measurements for people, self-contained like report.html.

The measured rates as bars against the rate the planned training run needs (cold and warm, each
with its spread over the repeats), the training assumptions that rate comes from, random-read
IOPS and latency, GPUDirect Storage, the goals and the machine.
"""

from __future__ import annotations

import html
from typing import Any

from corpusclean.jobs.reports import charts
from corpusclean.jobs.reports.page import html_table

_COLD, _WARM, _GPU = "#1f4e79", "#85c1e9", "#1e8449"


def rate_rows(report: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(label, {median, min, max, runs, spread} in MB/s, colour) of every measured rate."""
    rows: list[tuple[str, dict[str, Any], str]] = []
    m = report.get("measurements", {})
    seq = m.get("sequential", {})
    for side, colour in (("cold", _COLD), ("warm", _WARM)):
        if seq.get(f"{side}_mb_s"):
            rows.append((f"sequential read, {side} (tar bytes)", seq[f"{side}_mb_s"], colour))
    for name, r in (report.get("readers") or {}).items():
        for side, colour in (("cold", _COLD), ("warm", _WARM)):
            summary = (r.get(side) or {}).get("text_mb_s")
            if summary:
                rows.append((f"{name}, {side} (text)", summary, colour))
    small = m.get("small_files") or {}
    for side, colour in (("cold", _COLD), ("warm", _WARM)):
        if small.get(f"{side}_text_mb_s"):
            rows.append((f"small files, {side} (text)", small[f"{side}_text_mb_s"], colour))
    gds = report.get("gds") or {}
    if gds.get("available"):
        rows.append(("kvikio to GPU", gds["kvikio_read_mb_s"], _GPU))
        rows.append(("host read + copy to GPU", gds["host_read_copy_mb_s"], _GPU))
    return [r for r in rows if r[1].get("median")]


def _spread(summary: dict[str, Any]) -> str:
    spread = summary.get("spread")
    return "-" if spread is None else f"{spread:.0%}"


def render_bench_html(report: dict[str, Any]) -> str:
    """The page of one bench run."""
    rows = rate_rows(report)
    required = (report.get("required_bytes_s") or 0) / 1e6
    c = report.get("consumption") or {}
    per_node = (c.get("required_bytes_s_per_node") or 0) / 1e6
    verdict = str(report.get("verdict", ""))
    ok = not verdict.startswith("STARVED")
    chart = charts.rate_bars(
        [
            (label, s["median"], s.get("min", s["median"]), s.get("max", s["median"]), colour)
            for label, s, colour in rows
        ],
        required,
        per_node,
        "Read rates: median, and min to max over the repeats",
    )
    rates = html_table(
        ["measurement", "median MB/s", "min", "max", "runs", "spread", "vs required"],
        [
            [
                label,
                s["median"],
                s.get("min"),
                s.get("max"),
                len(s.get("runs") or []),
                _spread(s),
                f"{s['median'] / required:,.1f}x" if required else "-",
            ]
            for label, s, _ in rows
        ],
    )
    assumptions = html_table(
        ["assumption", "value"],
        [
            ["model parameters", c.get("params")],
            ["GPUs", c.get("gpus")],
            ["GPU", c.get("gpu")],
            ["peak TFLOPS per GPU", c.get("peak_tflops_per_gpu")],
            ["MFU", c.get("mfu")],
            ["sequence length", c.get("seq_len")],
            ["GPUs per node", c.get("gpus_per_node")],
            ["bytes per token", c.get("bytes_per_token")],
            ["bytes per token from", report.get("bytes_per_token_source")],
            ["tokens/s the run consumes", c.get("tokens_s")],
            ["required MB/s, whole run", required],
            ["required MB/s, one node", per_node],
            ["headroom (best loader, cold)", report.get("headroom")],
        ],
    )
    random = (report.get("measurements") or {}).get("random") or {}
    iops = html_table(
        ["threads", "IOPS (median)", "p50 µs", "p99 µs", "method"],
        [
            [
                key.removeprefix("threads_"),
                (r.get("iops") or {}).get("median"),
                (r.get("p50_us") or {}).get("median"),
                (r.get("p99_us") or {}).get("median"),
                r.get("method"),
            ]
            for key, r in random.items()
            if isinstance(r, dict) and "iops" in r
        ],
    )
    gds = report.get("gds") or {}
    gds_rows = [[k, v] for k, v in gds.items() if not isinstance(v, dict | list)]
    goals = report.get("goals") or {}
    goal_rows = [
        [name, g.get("ratio"), g.get("target"), "met" if g.get("met") else "NOT met"]
        for name, g in goals.items()
        if isinstance(g, dict)
    ]
    env = report.get("environment") or {}
    shards = report.get("shards") or {}
    sections = [
        f"<h1>corpusclean bench <span class='{'ok' if ok else 'starved'}'>"
        f"{html.escape(verdict)}</span></h1>",
        "<h2 id='rates'>Read rates against what training needs</h2>",
        chart or "<p>No rate was measured.</p>",
        rates,
        "<h2 id='training'>Training assumptions</h2>",
        assumptions,
        "<h2 id='iops'>Random reads</h2>",
        iops,
        "<h2 id='gds'>GPUDirect Storage</h2>",
        html_table(["figure", "value"], gds_rows),
        "<h2 id='goals'>Goals</h2>",
        html_table(["goal", "measured", "target", "status"], goal_rows),
        "<h2 id='run'>Run facts</h2>",
        html_table(
            ["fact", "value"],
            [
                ["shards", shards.get("dir")],
                ["files used", shards.get("files_used")],
                ["bytes used", shards.get("bytes_used")],
                ["samples read", shards.get("samples_read")],
                ["python", env.get("python")],
                ["platform", env.get("platform")],
                ["CPUs", env.get("cpu_count")],
                ["seconds", report.get("seconds")],
            ],
        ),
    ]
    style = (
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f3f3f3}"
        "svg.chart{display:block;max-width:100%;height:auto}.ok{color:#1e8449}"
        ".starved{color:#c0392b}h1 span{font-size:.6em}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>corpusclean bench</title>"
        f"<style>{style}</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )
