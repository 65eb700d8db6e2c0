"""A token pack's report (report.json and report.html in the pack folder): the corpus in tokens.

Every figure is exact, counted by the write tasks as they tokenized (jobs/shards/tokens.py): the
total tokens (BOS/EOS included, as training reads them), the tokens-per-document histogram, the
split per `source` and `lang` value, and the UTF-8 bytes of text per token, measured. Then the
planner's question, in the terms training is sized in: this corpus is D tokens; it is
compute-optimal for a model of N = D / 20 parameters; a run of the configured model on the
configured accelerators takes 6 N D / (G P m) for one pass.
"""

from __future__ import annotations

import html
from typing import Any

from corpusclean import __version__
from corpusclean.jobs.loadbench import throughput
from corpusclean.jobs.reports import charts
from corpusclean.jobs.reports.page import html_table
from corpusclean.jobs.shards.tokens import TokenCounts

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}svg.chart{display:block;max-width:100%;height:auto;margin:.5em 0}"
)


def _per_value(per: dict[str, list[int]], total_tokens: int) -> dict[str, Any]:
    if TokenCounts.too_many(per):
        return {"too_many": f"over {len(per):,} values"}
    return {
        value: {
            "documents": docs,
            "tokens": tokens,
            "share": round(tokens / total_tokens, 6) if total_tokens else 0.0,
            "bytes_per_token": round(text / tokens, 4) if tokens else None,
        }
        for value, (docs, tokens, text) in sorted(per.items(), key=lambda kv: -kv[1][1])
    }


def token_report(
    counts: TokenCounts,
    identity: dict[str, Any],
    fmt: str,
    shards: int,
    shard_bytes: int,
    train: Any,
    run: dict[str, Any],
) -> dict[str, Any]:
    """report.json of a token pack. `train`: the planned run (conf/pack.yaml's `train`);
    `run`: where it came from and went (input, output, run id)."""
    tokens = counts.tokens
    peak = train.peak_tflops or throughput.peak_tflops(train.gpu)
    plan = throughput.plan_training(
        tokens=float(tokens),
        params=float(train.params),
        gpus=train.gpus,
        gpu=train.gpu,
        peak_tflops_per_gpu=peak,
        mfu=train.mfu,
        seq_len=train.seq_len,
    )
    edges = sorted(counts.histogram)
    return {
        "tool": "corpusclean",
        "version": __version__,
        "job": "pack",
        **run,
        "tokenizer": identity,
        "format": fmt,
        "shards": {"count": shards, "bytes": shard_bytes},
        "tokens": {
            "total": tokens,
            "documents": counts.docs,
            "per_document": round(tokens / counts.docs, 3) if counts.docs else None,
            "text_bytes": counts.text_bytes,
            # Measured: the UTF-8 bytes of the texts over the ids written for them.
            "bytes_per_token": round(counts.text_bytes / tokens, 4) if tokens else None,
            # Documents per power-of-two bucket of their token count: bucket k holds counts
            # in [2^(k-1), 2^k), bucket 0 the empty ones.
            "histogram": {
                "lower_bounds": [0 if k == 0 else 1 << (k - 1) for k in edges],
                "documents": [counts.histogram[k] for k in edges],
            },
            "by": {name: _per_value(per, tokens) for name, per in counts.by.items()},
        },
        "planner": plan,
    }


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def render_token_html(report: dict[str, Any]) -> str:
    """The page of a token pack's report: the planner's answer first, then the counts."""
    tokens = report["tokens"]
    plan = report["planner"]
    ident = report["tokenizer"]
    d = throughput.format_count(tokens["total"])
    headline = (
        f"This corpus is <b>{d} tokens</b> ({html.escape(str(ident.get('name')))}). It is "
        f"compute-optimal (Chinchilla, 20 tokens a parameter) for a model of "
        f"<b>{throughput.format_count(plan['chinchilla_params'])}</b> parameters. Training "
        f"{throughput.format_count(plan['params'])} parameters on {plan['gpus']:,} "
        f"{html.escape(plan['gpu'])} ({plan['peak_tflops_per_gpu']:,.0f} TFLOPS peak) at "
        f"{plan['mfu']:.0%} MFU takes <b>{plan['days']:,.2f} days</b> a pass (6 N D / (G P m)), "
        f"at {throughput.format_count(plan['tokens_per_second'])} tokens/s."
    )
    sections = [
        f"<h1>corpusclean pack: {d} tokens</h1>",
        f"<p>{headline}</p>",
        "<h2 id='planner'>Planner</h2>",
        html_table(
            ["figure", "value"],
            [
                ["tokens D", f"{tokens['total']:,}"],
                ["sequences of the run's length", _n(plan["sequences"])],
                ["compute-optimal N = D / 20", throughput.format_count(plan["chinchilla_params"])],
                ["configured N", throughput.format_count(plan["params"])],
                ["accelerators G", f"{plan['gpus']:,} {plan['gpu']}"],
                ["peak P (TFLOPS)", _n(plan["peak_tflops_per_gpu"])],
                ["MFU m", f"{plan['mfu']:.0%}"],
                ["days a pass, configured N", _n(plan["days"], 2)],
                ["days a pass, compute-optimal N", _n(plan["chinchilla_days"], 2)],
                ["passes a compute-optimal run of N wants", _n(plan["epochs_for_params"], 2)],
            ],
        ),
        "<h2 id='tokens'>Tokens</h2>",
        html_table(
            ["figure", "value"],
            [
                ["documents", f"{tokens['documents']:,}"],
                ["tokens a document (mean)", _n(tokens["per_document"], 1)],
                ["text bytes", f"{tokens['text_bytes']:,}"],
                ["bytes a token (measured)", _n(tokens["bytes_per_token"], 3)],
                ["shards", f"{report['shards']['count']:,} ({report['format']})"],
                ["shard bytes", f"{report['shards']['bytes']:,}"],
            ],
        ),
    ]
    hist = tokens["histogram"]
    if hist["documents"]:
        labels = [
            "0" if lo == 0 else f"{throughput.format_count(lo)}+" for lo in hist["lower_bounds"]
        ]
        sections.append(
            charts.bars(
                list(zip(labels, [float(v) for v in hist["documents"]], strict=True)),
                "Documents by tokens (power-of-two buckets)",
            )
        )
    for name, per in tokens["by"].items():
        sections.append(f"<h2 id='by-{html.escape(name)}'>By {html.escape(name)}</h2>")
        if "too_many" in per:
            sections.append(f"<p>{html.escape(name)} has too many values to break down.</p>")
            continue
        rows = [
            [
                value,
                f"{v['documents']:,}",
                f"{v['tokens']:,}",
                f"{v['share']:.2%}",
                _n(v["bytes_per_token"], 3),
            ]
            for value, v in per.items()
        ]
        sections.append(html_table([name, "documents", "tokens", "share", "bytes a token"], rows))
    sections += [
        "<h2 id='tokenizer'>Tokenizer</h2>",
        html_table(["field", "value"], [[k, v] for k, v in ident.items()]),
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>corpusclean pack {html.escape(d)} tokens</title>"
        f"<style>{_STYLE}</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )
