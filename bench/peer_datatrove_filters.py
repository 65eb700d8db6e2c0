"""datatrove's four FineWeb heuristic filters, document by document: the peer of bench/filters.py.

    bench/out/venv-datatrove/bin/python bench/peer_datatrove_filters.py \
        --corpus NAME=DOCS.parquet [--corpus ...] --result-dir DIR [--speed] [--core N]

DOCS.parquet holds `doc_id` and `text`. Each filter is built as FineWeb's recipe builds it
(GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(filter_no_terminal_punct=
False), FineWebQualityFilter()) and its `filter(doc)` is called on every document, one filter
at a time over the whole corpus, each on a fresh `Document` holding the original text (C4's
filter rewrites `doc.text` of the pages it keeps; no filter sees another's output). The loop
is timed; building the `Document`s is not.

With --speed the four also run chained, per document in FineWeb's order, still each on the
original text: datatrove caches the last five word tokenizations (`split_into_words` is an
`lru_cache`), so in its pipeline the Gopher quality filter reuses the repetition filter's
tokens. The chained figure is that of datatrove's pipeline, the fairest peer of a read pass
that tokenizes a batch once for every filter.

Before anything is timed, every filter runs on a few documents: spaCy's tokenizer loads once
per process (about a second), which is no per-document cost.

The caller pins this process to one core (bench/filters.py starts it with its affinity set);
nothing here starts threads. It writes DIR/datatrove-NAME.parquet (doc_id and one reason
column per filter, null = kept) and DIR/datatrove-timing.json.

datatrove is imported only inside `run()`: bench/filters.py imports this module's constants
under the project's interpreter, which does not have it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# The filters in the order FineWeb's pipeline runs them, by corpusclean's stage names.
FILTERS = ["gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
WARMUP_DOCS = 20


def build_filters() -> dict[str, Any]:
    """The four filters at FineWeb's thresholds (datatrove's examples/fineweb.py)."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    return {
        "gopher_repetition": GopherRepetitionFilter(),
        "gopher_quality": GopherQualityFilter(),
        "c4_quality": C4QualityFilter(filter_no_terminal_punct=False),
        "fineweb_quality": FineWebQualityFilter(),
    }


def reason_of(result: Any) -> str | None:
    """A filter's answer as a reason string, None when the document is kept."""
    if isinstance(result, tuple):
        keep, reason = result
        return None if keep else str(reason or "removed")
    return None if result else "removed"


def apply(f: Any, doc: Any) -> str | None:
    """One call; a crash is a reason of its own, so one bad page cannot end the comparison."""
    try:
        return reason_of(f.filter(doc))
    except Exception as exc:
        return f"error:{type(exc).__name__}"


def run(corpora: dict[str, Path], out: Path, speed: bool) -> dict[str, Any]:
    """Decisions and seconds of every filter on every corpus; returns the timing record."""
    from importlib.metadata import version

    import pyarrow as pa
    import pyarrow.parquet as pq
    from datatrove.data import Document

    filters = build_filters()
    timing: dict[str, Any] = {"tool": "datatrove", "version": version("datatrove")}
    warm = time.perf_counter()
    first = pq.read_table(next(iter(corpora.values())), columns=["text"])
    for f in filters.values():
        for t in first["text"].to_pylist()[:WARMUP_DOCS]:
            apply(f, Document(text=t or "", id="warmup"))
    timing["warmup_s"] = round(time.perf_counter() - warm, 3)
    for name, path in corpora.items():
        table = pq.read_table(path, columns=["doc_id", "text"])
        ids = table["doc_id"].to_pylist()
        texts = [t or "" for t in table["text"].to_pylist()]
        reasons: dict[str, list[str | None]] = {}
        seconds: dict[str, float] = {}
        for fname in FILTERS:
            f = filters[fname]
            docs = [Document(text=t, id=i) for i, t in zip(ids, texts, strict=True)]
            start = time.perf_counter()
            got = [apply(f, d) for d in docs]
            seconds[fname] = time.perf_counter() - start
            reasons[fname] = got
        if speed:
            chain = [filters[n] for n in FILTERS]
            docs4 = [
                [Document(text=t, id=i) for _ in chain] for i, t in zip(ids, texts, strict=True)
            ]
            start = time.perf_counter()
            for four in docs4:
                for f, d in zip(chain, four, strict=True):
                    apply(f, d)
            seconds["chained"] = time.perf_counter() - start
        timing[name] = {"docs": len(ids), "seconds": {k: round(v, 4) for k, v in seconds.items()}}
        cols = {"doc_id": pa.array(ids, pa.string())}
        cols |= {n: pa.array(reasons[n], pa.string()) for n in FILTERS}
        pq.write_table(pa.table(cols), out / f"datatrove-{name}.parquet")
    return timing


def main() -> int:
    """CLI: run the filters and write the results; exit 1 with one line on failure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", required=True, help="NAME=DOCS.parquet")
    ap.add_argument("--result-dir", type=Path, required=True)
    ap.add_argument("--speed", action="store_true", help="also time the four chained")
    ap.add_argument("--core", type=int, help="pin to this core (when not started under taskset)")
    args = ap.parse_args()
    if args.core is not None and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {args.core})  # before anything imported could start a thread
    corpora = {}
    for spec in args.corpus:
        name, _, path = spec.partition("=")
        corpora[name] = Path(path)
    try:
        from loguru import logger

        logger.remove()  # datatrove logs to the console through loguru; nothing here needs it
        args.result_dir.mkdir(parents=True, exist_ok=True)
        timing = run(corpora, args.result_dir, args.speed)
    except Exception as exc:  # a peer's failure is reported, not a traceback flood
        print(f"datatrove: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    (args.result_dir / "datatrove-timing.json").write_text(json.dumps(timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
