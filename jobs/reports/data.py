"""What the report's views read from a clean output's own files, with pyarrow on the driver.

The duplicates table (ids only) gives the cluster sizes; a handful of texts are then read from
data/ and rejected/ by id: the id column is read first, and the text column only of the row
groups that hold one of the wanted ids, so a preview never reads the corpus's text again. Those
row groups are streamed a batch at a time, so the driver holds a batch's texts, never a row
group's (a Spark output's reach 128 MB: read whole, one raised a 100k-document run's driver
from 230 MB to 580 MB).
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpusclean.schemas import CLUSTER_ID, DOC_ID, DUP_STAGE, KEPT, REJECT_REASON

# A text in the report is cut here (with a mark): enough to judge a document, small enough
# that a page with forty of them stays light.
PREVIEW_CHARS = 1200
LARGEST_CLUSTERS = 5
EXACT_SAMPLES = 4
REJECTED_PER_REASON = 2
# The texts a preview reads at most (uncompressed bytes of the row groups it opens): a bound on
# its time, as the memory is one batch's.
READ_BUDGET = 32 << 20
# Rows decoded at a time from a row group, and the read-ahead of its column chunks: a page's
# worth, not the chunk (pyarrow pre-buffers whole column chunks unless told not to).
_BATCH_ROWS = 1024
_READ_AHEAD = 1 << 20


def parquet_files(folder: Path) -> list[Path]:
    """The Parquet part files of a Spark output folder, in name order."""
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_"))
    )


def cut(text: str | None, limit: int = PREVIEW_CHARS) -> str | None:
    """`text` up to `limit` characters, with ` …` where it was cut."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + " …"


def _rows_where(
    path: Path, group: int, columns: list[str], mask: pa.Array | pa.ChunkedArray
) -> Iterator[dict[str, Any]]:
    """The rows of row group `group` of `path` where `mask` (one flag per row) is true, with
    `columns`, in file order; decoded `_BATCH_ROWS` at a time, so only a batch is held."""
    flags = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
    pf = pq.ParquetFile(path, buffer_size=_READ_AHEAD, pre_buffer=False)
    start = 0
    for batch in pf.iter_batches(
        batch_size=_BATCH_ROWS, row_groups=[group], columns=columns, use_threads=False
    ):
        part = flags.slice(start, batch.num_rows)
        start += batch.num_rows
        if pc.any(part).as_py():
            yield from batch.filter(part).to_pylist()


def _order(value: str) -> str:
    """A fixed, content-free order for choosing samples: not the first rows of a sorted id
    column (those are often one source), the same on every run."""
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def fetch_rows(
    folder: Path,
    id_col: str,
    ids: set[str],
    columns: list[str],
    limit: int = PREVIEW_CHARS,
    budget: int = READ_BUDGET,
) -> dict[str, dict[str, Any]]:
    """The rows whose `id_col` is in `ids` (first one per id), with `columns`; string values
    cut to `limit`. Reads the id column, then `columns` of the row groups holding the most
    wanted ids first, until `budget` uncompressed bytes are read (one row group at least): a
    row group is decoded whole (streamed), and a Spark output's are large. An id past the
    budget is missing from the result."""
    found: dict[str, dict[str, Any]] = {}
    wanted = pa.array(sorted(ids), pa.string())
    groups = []  # (hits, cost, path, group, mask)
    for path in parquet_files(folder):
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        if id_col not in names:
            return found
        cols = [names.index(c) for c in dict.fromkeys([id_col, *columns]) if c in names]
        for group in range(pf.num_row_groups):
            hit = pc.is_in(pf.read_row_group(group, columns=[id_col]).column(0), value_set=wanted)
            hits = pc.sum(hit).as_py() or 0
            if hits:
                meta = pf.metadata.row_group(group)
                cost = sum(meta.column(i).total_uncompressed_size for i in cols)
                groups.append((hits, cost, path, group, hit))
    spent = 0
    for _, cost, path, group, hit in sorted(groups, key=lambda g: (-g[0], g[1], str(g[2]), g[3])):
        if len(found) == len(ids) or (spent and spent + cost > budget):
            break
        spent += cost
        names = pq.ParquetFile(path).schema_arrow.names
        cols = [c for c in dict.fromkeys([id_col, *columns]) if c in names]
        for row in _rows_where(path, group, cols, hit):
            if row[id_col] not in found:
                found[row[id_col]] = {
                    k: cut(v, limit) if isinstance(v, str) and k != id_col else v
                    for k, v in row.items()
                }
    return found


def _table(folder: Path, columns: list[str]) -> pa.Table | None:
    files = parquet_files(folder)
    if not files:
        return None
    names = pq.ParquetFile(files[0]).schema_arrow.names
    return pq.read_table(files, columns=[c for c in columns if c in names])


def clusters(out: Path, id_col: str, text_col: str) -> dict[str, Any]:
    """Per dedup stage of duplicates/: how many clusters have each size, and the largest
    clusters with their survivor's text (None where a later stage removed the survivor)."""
    dup = _table(out / "duplicates", [DOC_ID, CLUSTER_ID, DUP_STAGE, KEPT])
    if dup is None or dup.num_rows == 0:
        return {"clusters": {}, "exact": []}
    counts = dup.group_by([DUP_STAGE, CLUSTER_ID]).aggregate([(DOC_ID, "count")])
    per_stage: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for stage, cid, n in zip(
        counts[DUP_STAGE].to_pylist(),
        counts[CLUSTER_ID].to_pylist(),
        counts[f"{DOC_ID}_count"].to_pylist(),
        strict=True,
    ):
        per_stage[stage].append((cid, int(n)))
    largest = {
        stage: sorted(rows, key=lambda r: (-r[1], _order(str(r[0]))))[:LARGEST_CLUSTERS]
        for stage, rows in per_stage.items()
    }
    exact = _exact_samples(dup)
    ids = {str(c) for rows in largest.values() for c, _ in rows} | {s["kept"] for s in exact}
    texts = fetch_rows(out / "data", id_col, ids, [text_col])
    out_clusters: dict[str, Any] = {}
    for stage in sorted(per_stage):
        sizes = Counter(n for _, n in per_stage[stage])
        out_clusters[stage] = {
            "clusters": len(per_stage[stage]),
            "sizes": {str(k): sizes[k] for k in sorted(sizes)},
            "largest": [
                {
                    "cluster_id": cid,
                    "size": n,
                    "text": (texts.get(str(cid)) or {}).get(text_col),
                }
                for cid, n in largest[stage]
            ],
        }
    for sample in exact:
        sample["text"] = (texts.get(sample["kept"]) or {}).get(text_col)
    return {"clusters": out_clusters, "exact": exact}


def _exact_samples(dup: pa.Table) -> list[dict[str, Any]]:
    """A few exact-duplicate groups: the survivor's id and the removed copies' ids."""
    exact = dup.filter(pc.equal(dup[DUP_STAGE], "exact"))
    groups: dict[str, list[str]] = defaultdict(list)
    for doc_id, cid, kept in zip(
        exact[DOC_ID].to_pylist(),
        exact[CLUSTER_ID].to_pylist(),
        exact[KEPT].to_pylist(),
        strict=True,
    ):
        if not kept:
            groups[str(cid)].append(str(doc_id))
    chosen = sorted(groups, key=_order)[:EXACT_SAMPLES]
    return [{"kept": cid, "removed": sorted(groups[cid])} for cid in chosen]


def rejected(out: Path, id_col: str, text_col: str) -> dict[str, list[dict[str, Any]]]:
    """A few rejected rows per reason, with their text (rejected/ holds the input's rows).
    Rows are found by their place (file, row group, row), as a rejected row may have no id."""
    places: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    files = parquet_files(out / "rejected")
    for f, path in enumerate(files):
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        if REJECT_REASON not in names:
            return {}
        for group in range(pf.num_row_groups):
            cols = [c for c in (REJECT_REASON, id_col) if c in names]
            part = pf.read_row_group(group, columns=cols)
            ids = part[id_col].to_pylist() if id_col in names else [None] * part.num_rows
            for row, (reason, doc_id) in enumerate(
                zip(part[REJECT_REASON].to_pylist(), ids, strict=True)
            ):
                key = _order(f"{doc_id}" if doc_id is not None else f"{path.name}:{group}:{row}")
                places[str(reason)].append((key, f, group, row))
    chosen = {reason: sorted(rows)[:REJECTED_PER_REASON] for reason, rows in sorted(places.items())}
    wanted: dict[tuple[int, int], list[int]] = defaultdict(list)
    for rows in chosen.values():
        for _, f, group, row in rows:
            wanted[(f, group)].append(row)
    found: dict[tuple[int, int, int], dict[str, Any]] = {}
    for (f, group), rows in wanted.items():
        pf = pq.ParquetFile(files[f])
        cols = [c for c in (id_col, text_col) if c in pf.schema_arrow.names]
        mask = np.zeros(pf.metadata.row_group(group).num_rows, dtype=bool)
        mask[rows] = True
        part = list(_rows_where(files[f], group, cols, pa.array(mask)))
        for row, values in zip(sorted(rows), part, strict=True):
            found[(f, group, row)] = values
    return {
        reason: [
            {
                "doc_id": found[(f, g, r)].get(id_col),
                "text": cut(found[(f, g, r)].get(text_col)),
                "found": text_col in found[(f, g, r)],
            }
            for _, f, g, r in rows
        ]
        for reason, rows in chosen.items()
    }


def from_outputs(out: Path, id_col: str, text_col: str) -> dict[str, Any]:
    """Every view read from the output folder `out` (or a run's staging)."""
    views = clusters(out, id_col, text_col)
    views["rejected"] = rejected(out, id_col, text_col)
    return views
