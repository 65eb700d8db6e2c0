"""The report pages' charts: matplotlib figures rendered to inline SVG.

Offline and self-contained: no scripts, no fonts fetched (text stays text, in the page's own
font), no date in the file, and a fixed hash salt, so the same figures give the same bytes.
matplotlib is imported on the first chart only: a command that renders no page never pays for
its import.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

BLUE, RED, GREY, GREEN = "#2e86c1", "#c0392b", "#7f8c8d", "#1e8449"
# Series colours in order (one per dedup stage on the cluster chart, by its place in the run).
SERIES = (GREY, GREEN, BLUE, RED, "#8e44ad", "#d68910")
_WIDTH = 7.2  # inches at 96 dpi: about the page's 60em column
_RC = {
    "svg.fonttype": "none",  # text as <text>, not paths: smaller, selectable, searchable
    "svg.hashsalt": "corpusclean",  # the ids matplotlib draws from it are the same every run
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


@contextmanager
def _rc() -> Iterator[None]:
    """matplotlib's settings for these charts, for the figure's drawing as for its saving."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


def _figure(
    height: float, labels: Sequence[str] = (), xlabel: bool = True, below: float = 0.0
) -> Any:
    """A figure `height` inches tall, its margins set from its longest y label: a fixed
    layout draws each chart once, where matplotlib's automatic layouts draw it twice."""
    from matplotlib.figure import Figure

    longest = max((len(str(label)) for label in labels), default=6)
    left = 0.25 + 0.068 * longest  # inches, at the 9-point font
    bottom = (0.5 if xlabel else 0.32) + below
    total = height + 0.6 + below
    fig = Figure(figsize=(_WIDTH, total), dpi=96)
    fig.subplots_adjust(
        left=min(0.5, left / _WIDTH),
        right=0.97,
        bottom=bottom / total,
        top=1 - 0.3 / total,
        hspace=0.6,
    )
    return fig


def _svg(fig: Any, title: str) -> str:
    """The figure as an inline <svg> element with an accessible title (inside `_rc`)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and DOCTYPE: the page is HTML
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    label = title.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return svg.replace("<svg ", f'<svg class="chart" role="img" aria-label="{label}" ', 1)


def number(value: float) -> str:
    """A count or a measure as people read it: `17,101`, `1,234.5`, `0.8551`; never `2e+04`."""
    if isinstance(value, int) or (math.isfinite(value) and value == int(value)):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.1f}"
    return f"{value:.4g}"


def _comma_axis(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))


def bars(
    rows: Sequence[tuple[str, float]],
    title: str,
    colour: str = BLUE,
    unit: str = "",
    xlabel: str = "",
) -> str:
    """Horizontal bars, one per (label, value), top to bottom in the given order, each with
    its value written beside it."""
    if not rows:
        return ""
    with _rc():
        fig = _figure(0.26 * len(rows), [r[0] for r in rows], bool(xlabel))
        ax = fig.add_subplot()
        labels = [r[0] for r in rows]
        values = [float(r[1]) for r in rows]
        ax.barh(range(len(rows)), values, color=colour, height=0.7)
        ax.set_yticks(range(len(rows)), labels)
        ax.invert_yaxis()
        top = max(values) or 1.0
        ax.set_xlim(0, top * 1.18)
        for i, v in enumerate(values):
            ax.text(v + top * 0.01, i, f"{number(v)}{unit}", va="center")
        _comma_axis(ax.xaxis)
        ax.set_xlabel(xlabel)
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def rates(rows: Sequence[tuple[str, float, bool]], threshold: float, title: str) -> str:
    """A rate per label (0..1) as bars, flagged ones red, with `threshold` as a dashed line."""
    if not rows:
        return ""
    with _rc():
        fig = _figure(0.24 * len(rows), [r[0] for r in rows])
        ax = fig.add_subplot()
        values = [r[1] for r in rows]
        ax.barh(range(len(rows)), values, color=[RED if r[2] else BLUE for r in rows], height=0.7)
        ax.set_yticks(range(len(rows)), [r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_xlim(0, 1.08)
        ax.axvline(threshold, color="#555", linestyle="--", linewidth=1)
        ax.text(threshold, -0.8, f" review {threshold:.0%}", va="bottom")
        for i, v in enumerate(values):
            ax.text(min(v, 0.9) + 0.01, i, f"{v:.1%}", va="center")
        ax.xaxis.set_major_formatter(_percent())
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def _percent() -> Any:
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


def histograms(
    edges: Sequence[int],
    series: Sequence[tuple[str, Sequence[int], str]],
    title: str,
    xlabel: str,
) -> str:
    """Counts per bucket `[edges[i], edges[i+1])` on a log x axis, one step line per series
    (label, counts, colour)."""
    if not edges or not any(sum(c) for _, c, _ in series):
        return ""
    # Only the buckets from the first to the last that hold a document.
    used = [i for i in range(len(edges)) if any(c[i] for _, c, _ in series)]
    lo, hi = used[0], used[-1] + 1
    edges = list(edges[lo : hi + 1]) if hi < len(edges) else list(edges[lo:])
    series = [(label, list(c[lo:hi]), colour) for label, c, colour in series]
    with _rc():
        fig = _figure(2.0, ["10,000"])
        ax = fig.add_subplot()
        # Bucket 0 holds the zero-length texts; a log axis draws it at 0.5.
        bounds = [max(0.5, float(e)) for e in edges]
        if len(bounds) == hi - lo:  # the last bucket is open-ended: draw it one power wide
            bounds.append(bounds[-1] * 2)
        for label, counts, colour in series:
            ax.stairs(counts, bounds, label=label, color=colour, linewidth=1.6)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(_plain_log())
        _comma_axis(ax.yaxis)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("documents")
        ax.legend(frameon=False)
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def _plain_log() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: number(v) if v >= 1 else "0")


def cluster_sizes(series: Sequence[tuple[str, dict[int, int], str]], title: str) -> str:
    """How many clusters have each size, per stage (label, {size: clusters}, colour): both
    axes logarithmic, since a few huge clusters sit beside many pairs."""
    series = [s for s in series if s[1]]
    if not series:
        return ""
    with _rc():
        fig = _figure(2.0, ["10,000"])
        ax = fig.add_subplot()
        for label, sizes, colour in series:
            xs = sorted(sizes)
            ax.plot(xs, [sizes[x] for x in xs], "o-", label=label, color=colour, markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(_plain_log())
        _comma_axis(ax.yaxis)
        ax.set_xlabel("cluster size (documents)")
        ax.set_ylabel("clusters")
        ax.legend(frameon=False)
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def grouped(
    categories: Sequence[str], series: Sequence[tuple[str, Sequence[float], str]], title: str
) -> str:
    """Side-by-side horizontal bars per category, one bar per series (label, values, colour)."""
    if not categories:
        return ""
    with _rc():
        fig = _figure(0.22 * len(categories) * max(1, len(series)), categories)
        ax = fig.add_subplot()
        height = 0.8 / len(series)
        for k, (label, values, colour) in enumerate(series):
            ys = [i + (k - (len(series) - 1) / 2) * height for i in range(len(categories))]
            ax.barh(ys, values, height=height, color=colour, label=label)
        ax.set_yticks(range(len(categories)), categories)
        ax.invert_yaxis()
        _comma_axis(ax.xaxis)
        ax.legend(frameon=False, loc="lower right")
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def strips(
    rows: Sequence[tuple[str, dict[str, float], list[tuple[str, float]]]], title: str
) -> str:
    """Score distributions from their quantiles (label, {p01..p99}, [(op, bound)]): a box from
    p25 to p75 with the median, whiskers at p1 and p99, p10 and p90 marked, and each keep-rule
    bound a red dashed tick (the side past it is dropped)."""
    rows = [r for r in rows if all(r[1].get(k) is not None for k in _QUANTILES)]
    if not rows:
        return ""
    with _rc():
        fig = _figure(0.5 * len(rows), [r[0] for r in rows], xlabel=False)
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        for ax, (label, q, bounds) in zip(axes, rows, strict=True):
            stats = {
                "whislo": q["p01"],
                "q1": q["p25"],
                "med": q["p50"],
                "q3": q["p75"],
                "whishi": q["p99"],
                "fliers": [],
            }
            ax.bxp([stats], orientation="horizontal", widths=0.6, showfliers=False)
            ax.plot([q["p10"], q["p90"]], [1, 1], "|", color=BLUE, markersize=10)
            for op, value in bounds:
                ax.axvline(value, color=RED, linestyle="--", linewidth=1.2)
                ax.text(value, 1.45, f"{op} {number(value)}", color=RED, ha="center")
            ax.set_yticks([1], [label])
            ax.spines["left"].set_visible(False)
        axes[0].set_title(title, loc="left")
        return _svg(fig, title)


_QUANTILES = ("p01", "p10", "p25", "p50", "p75", "p90", "p99")


def rate_bars(
    rows: Sequence[tuple[str, float, float, float, str]],
    required: float,
    per_node: float,
    title: str,
) -> str:
    """Measured rates (label, median, min, max, colour) as bars on a log axis, each with its
    spread over the repeats as an error bar, and the rate training needs as a red line (the
    whole run) and an orange dashed one (one node)."""
    if not rows:
        return ""
    with _rc():
        fig = _figure(0.3 * len(rows) + 0.3, [r[0] for r in rows], below=0.3)
        ax = fig.add_subplot()
        ys = list(range(len(rows)))
        medians = [r[1] for r in rows]
        low = [max(0.0, r[1] - r[2]) for r in rows]
        high = [max(0.0, r[3] - r[1]) for r in rows]
        ax.barh(ys, medians, color=[r[4] for r in rows], height=0.7)
        ax.errorbar(medians, ys, xerr=[low, high], fmt="none", ecolor="#222", capsize=3)
        ax.set_yticks(ys, [r[0] for r in rows])
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlim(right=max([*medians, required, *[r[3] for r in rows]]) * 4)
        _comma_axis(ax.xaxis)
        if required > 0:
            ax.axvline(required, color=RED, linewidth=2, label=f"required {number(required)} MB/s")
        if 0 < per_node < required:
            ax.axvline(
                per_node,
                color="#e67e22",
                linestyle="--",
                label=f"required per node {number(per_node)} MB/s",
            )
        for y, v in zip(ys, medians, strict=True):
            ax.text(v * 1.08, y, f"{number(round(v, 1))}", va="center")
        ax.set_xlabel("MB/s (log scale)")
        fig.legend(frameon=False, loc="lower center", ncol=2)
        ax.set_title(title, loc="left")
        return _svg(fig, title)


def preload() -> None:
    """Import matplotlib in a background thread: a job that will draw a page at its end calls
    this when it starts, so the import overlaps work the JVM is doing."""
    import threading

    def load() -> None:
        from matplotlib.backends import backend_svg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401

    threading.Thread(target=load, name="corpusclean-charts-import", daemon=True).start()
