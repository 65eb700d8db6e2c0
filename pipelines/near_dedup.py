"""Near-duplicate candidates, verification and survivors on Spark.

LSH band rows are partitioned by bucket (band, key) in one shuffle; each bucket's size and
smallest member are window aggregates over it, buckets of one are dropped, and every other
bucket links its members to that smallest member: k - 1 star edges per bucket of k, never
k^2, so a bucket of 100k boilerplate pages costs 100k edges. Edges are then verified against
the signatures, so a chance band collision cannot chain unrelated documents into one cluster.

When the band keys fit the driver (`driver_max_keys`), the same edges are found there instead:
the row ids and band keys are collected (integers only), each band is sorted in numpy, and the
endpoints' signatures are fetched by one semi-join and compared there too (on a small input,
every row's signature comes with the keys, in the same collect). The clusters' survivors are
chosen there too where Python orders the rows as Spark does (keep `longest`, no prior index, a
string or integer doc_id). Only the texts of the few edges near the threshold stay Spark jobs,
so the stage is a handful of jobs instead of a shuffle and a write per step; both paths give
the same edges, estimates (the same float arithmetic) and clusters.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyspark.sql.functions as F
from pydantic import Field, PrivateAttr, model_validator
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.base import (
    Dedup,
    ExamplePick,
    KeepRule,
    StageRun,
    StepParams,
    TextFeature,
    register,
)
from corpusclean.pipelines.columns import (
    AGAINST,
    BANDS,
    MINHASH,
    NEAR_CLUSTER,
    NORM_HASH,
    ROW_ID,
    SHINGLES,
    TEXT_LEN,
)
from corpusclean.pipelines.components import spark_connected_components, union_find_components
from corpusclean.pipelines.dedup import survivor_order
from corpusclean.pipelines.minhash import (
    MinHashParams,
    band_hashes,
    exact_jaccard,
    optimal_bands,
    pair_jaccards,
    signatures,
)
from corpusclean.pipelines.prior import (
    DOC_ID,
    TEXT,
    PriorIndex,
    lookup,
    prior_candidate_pairs,
    prior_members,
    prior_signature_matrix,
    pushed_in,
)
from corpusclean.testhook import hold


def explode_band_keys(df: DataFrame) -> DataFrame:
    """One row per (document, band): reads `_rid`, `_bands`; returns `band, key, _rid`.

    Documents without a signature (no shingle) have null `_bands` and produce no rows.
    """
    return df.filter(F.col(BANDS).isNotNull()).select(
        F.col(ROW_ID), F.posexplode(F.col(BANDS)).alias("band", "key")
    )


def build_star_edges(band_rows: DataFrame, max_bucket: int = 0) -> DataFrame:
    """Candidate pairs from shared band keys, as star edges to each bucket's smallest member.

    Reads `band, key, _rid`; returns distinct `src, dst` (src > dst: dst is the bucket's hub).
    Buckets larger than `max_bucket` (if > 0) are skipped as boilerplate.

    One shuffle: the band rows are partitioned by bucket, and each bucket's size and hub are
    window aggregates over it. Aggregating buckets with map-side combining and joining the
    result back to the band rows reads and shuffles the band rows twice, and the combine
    saves little, since most buckets hold one document (bench/near_dedup.py measures the
    stage's candidate and estimate seconds).
    """
    bucket = Window.partitionBy("band", "key")
    sized = band_rows.select(
        F.col(ROW_ID),
        F.min(ROW_ID).over(bucket).alias("hub"),
        F.count(F.lit(1)).over(bucket).alias("size"),
    )
    keep = F.col("size") > 1
    if max_bucket > 0:
        keep = keep & (F.col("size") <= max_bucket)
    return (
        sized.filter(keep & (F.col(ROW_ID) != F.col("hub")))
        .select(F.col(ROW_ID).alias("src"), F.col("hub").alias("dst"))
        .distinct()
    )


def star_edges_np(
    rids: np.ndarray, keys: np.ndarray, max_bucket: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`build_star_edges(explode_band_keys(df), max_bucket)` on the driver, in numpy.

    `rids` (n,) are the row ids of the rows with bands and `keys` (n, bands) their band keys
    (column b is band b). Returns the same distinct `src, dst` (src > dst, dst the smallest
    member of the bucket, buckets of one and, if `max_bucket` > 0, buckets larger than it
    skipped), as int64 arrays sorted by src, then dst.

    Per band, one stable sort by key of the rows already in row-id order leaves every bucket a
    run whose first member is its hub; bucket sizes are the gaps between run starts.
    """
    rids = np.asarray(rids, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    if keys.ndim != 2 or len(keys) != rids.size:
        raise ValueError(f"keys must be (len(rids), bands), got {keys.shape} for {rids.size}")
    by_rid = np.argsort(rids, kind="stable")
    srcs, dsts = [], []
    for band in range(keys.shape[1]):
        order = by_rid[np.argsort(keys[by_rid, band], kind="stable")]
        key, rid = keys[order, band], rids[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else order[:0]
        sizes = np.diff(np.r_[starts, key.size])
        wanted = sizes > 1
        if max_bucket > 0:
            wanted &= sizes <= max_bucket
        hub = np.repeat(rid[starts], sizes)
        keep = np.repeat(wanted, sizes) & (rid != hub)
        srcs.append(rid[keep])
        dsts.append(hub[keep])
    src = np.concatenate(srcs) if srcs else np.zeros(0, np.int64)
    dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int64)
    # The same pair from several bands is one edge (the Spark path's `distinct`).
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    first = np.ones(src.size, dtype=bool)
    first[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    return src[first], dst[first]


def signature_matrix(arr: pa.Array) -> np.ndarray:
    """A binary column of fixed-width signatures as an (n, num_perm) uint32 view, no copy."""
    _, data = value_buffers(arr, relative=True)
    return data.view("<u4").reshape(len(arr), -1)


def select_edge_nodes(edges: DataFrame, docs: DataFrame) -> DataFrame:
    """The rows of `docs` that are an endpoint of some edge.

    Reads `src, dst` of `edges` and `_rid` of `docs`; returns `docs`' rows (all its columns)
    whose `_rid` is a `src` or `dst`. Joining edges to this small frame, rather than to all
    documents, reads the documents once for both endpoints.
    """
    nodes = (
        edges.select(F.col("src").alias(ROW_ID))
        .union(edges.select(F.col("dst").alias(ROW_ID)))
        .distinct()
    )
    return docs.join(nodes, ROW_ID, "left_semi")


def slot_agreement(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """The estimated Jaccard of each row pair of two (n, num_perm) signature matrices: the
    fraction of equal slots (float64). Both the Spark and the driver path estimate with this,
    so their estimates are the same floats."""
    return (sa == sb).mean(axis=1) if len(sa) else np.empty(0)


def _jaccard_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    hold("near.verify")  # a crash test's kill point inside a task (inert unless asked for)
    for batch in batches:
        sa = signature_matrix(batch.column("sig_src"))
        sb = signature_matrix(batch.column("sig_dst"))
        est = slot_agreement(sa, sb)
        yield pa.RecordBatch.from_pydict(
            {
                "src": batch.column("src"),
                "dst": batch.column("dst"),
                "jaccard": pa.array(est, pa.float64()),
            }
        )


def estimate_edge_jaccard(edges: DataFrame, signatures: DataFrame) -> DataFrame:
    """Attach the signature-estimated Jaccard to every candidate edge.

    Reads `src, dst` of `edges` and `_rid, _minhash` of `signatures`; returns
    `src, dst, jaccard` (the fraction of equal MinHash slots).
    """
    sig = signatures.select(F.col(ROW_ID), F.col(MINHASH))
    pairs = (
        edges.join(sig.withColumnsRenamed({ROW_ID: "src", MINHASH: "sig_src"}), "src")
        .join(sig.withColumnsRenamed({ROW_ID: "dst", MINHASH: "sig_dst"}), "dst")
        .select("src", "dst", "sig_src", "sig_dst")
    )
    schema = StructType(
        [
            StructField("src", LongType(), False),
            StructField("dst", LongType(), False),
            StructField("jaccard", DoubleType(), False),
        ]
    )
    return pairs.mapInArrow(_jaccard_batches, schema)


def choose_cluster_survivors(
    components: DataFrame,
    docs: DataFrame,
    id_col: str,
    order: list[Column],
    priors: DataFrame | None = None,
) -> DataFrame:
    """One survivor per near-duplicate cluster, by explicit ordering.

    Reads `node, component` of `components` and `_rid`, `id_col` and the columns of `order`
    of `docs`; returns `_rid, cluster_id` (the survivor's doc_id) for every member of every
    component of two or more.

    `priors` (`node, __prior_doc, __prior_order, _against`: the prior documents among the
    nodes, pipelines/prior.py) make a component that holds one resolve to it: the earliest
    index's smallest doc_id is the cluster's id, and every row of the batch in it is a member
    (none survives); the result then has `_against` too (null for clusters of new rows only).
    """
    nodes = components.select(F.col("node").alias(ROW_ID), F.col("component"))
    by_comp = Window.partitionBy("component")
    # Sized before the join: a prior node has no row in `docs` but makes a cluster.
    sized = nodes.withColumn("__size", F.count(F.lit(1)).over(by_comp)).filter(F.col("__size") > 1)
    members = sized.join(docs, ROW_ID)
    first = F.first(F.col(id_col)).over(
        by_comp.orderBy(*order).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    if priors is None:
        return members.withColumn("cluster_id", first).select(ROW_ID, "cluster_id")
    won = (
        sized.join(priors.withColumnRenamed("node", ROW_ID), ROW_ID)
        .groupBy("component")
        .agg(F.min(F.struct("__prior_order", "__prior_doc", AGAINST)).alias("w"))
        .select("component", F.col("w.__prior_doc").alias("__prior_doc"), F.col(f"w.{AGAINST}"))
    )
    return (
        members.join(won, "component", "left")
        .withColumn("cluster_id", F.coalesce(F.col("__prior_doc"), first))
        .select(ROW_ID, "cluster_id", AGAINST)
    )


def _exact_batches(params: MinHashParams) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # The driver path's only verification task: the crash tests' kill point there.
        hold("near.verify")
        for batch in batches:
            out = pair_jaccards(batch.column("text_src"), batch.column("text_dst"), params)
            yield pa.RecordBatch.from_pydict(
                {
                    "src": batch.column("src"),
                    "dst": batch.column("dst"),
                    "exact_jaccard": pa.array(out, pa.float64()),
                }
            )

    return run


def compute_exact_edge_jaccard(
    edges: DataFrame,
    texts: DataFrame,
    text_col: str,
    params: MinHashParams,
    dst_texts: DataFrame | None = None,
) -> DataFrame:
    """Exact Jaccard of the shingle sets of each edge's two documents.

    Reads `src, dst` of `edges` and `_rid`, `text_col` of `texts` (of `dst_texts` for the
    `dst` ends when given: edges whose two ends come from different places, each read once);
    returns `src, dst, exact_jaccard`. Meant for the few edges whose estimate is too close to
    the threshold to trust: it moves both texts of every edge it is given.
    """
    text = texts.select(F.col(ROW_ID), F.col(text_col).alias("t"))
    other = text if dst_texts is None else dst_texts.select(ROW_ID, F.col(text_col).alias("t"))
    pairs = (
        edges.join(text.withColumnsRenamed({ROW_ID: "src", "t": "text_src"}), "src")
        .join(other.withColumnsRenamed({ROW_ID: "dst", "t": "text_dst"}), "dst")
        .select("src", "dst", "text_src", "text_dst")
    )
    schema = StructType(
        [
            StructField("src", LongType(), False),
            StructField("dst", LongType(), False),
            StructField("exact_jaccard", DoubleType(), False),
        ]
    )
    return pairs.mapInArrow(_exact_batches(params), schema)


def _driver_components(
    src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Union-find over verified edges held on the driver: each node (int64) with its component
    label, and the sizes of the components (`clusters`, `largest`, `members`: of the batch's
    rows, every component has two or more nodes, since every node is an end of an edge between
    two; and `removed`, `prior_clusters` for clusters that reach a prior document)."""
    found, found_labels = union_find_components(src, dst)
    nodes = np.asarray(found, np.int64)
    labels = np.asarray(found_labels)
    new = nodes >= 0  # prior documents (clean --against) are negative nodes
    comps, counts = np.unique(labels[new], return_counts=True)
    with_prior = np.isin(comps, labels[~new])
    sizes = {
        "clusters": int(counts.size),
        "largest": int(counts.max()) if counts.size else 0,
        "members": int(counts.sum()),
        # A cluster of new rows keeps one; one that reaches a prior document keeps none.
        "removed": int(counts.sum() - (~with_prior).sum()),
        "prior_clusters": int(with_prior.sum()),
    }
    return nodes, labels, sizes


def _components_frame(spark: SparkSession, nodes: np.ndarray, labels: np.ndarray) -> DataFrame:
    """The `node, component` frame of `_driver_components`' arrays (for the Spark window that
    chooses survivors; the driver's own choice needs no frame)."""
    schema = StructType(
        [StructField("node", LongType(), False), StructField("component", LongType(), False)]
    )
    frame = pa.table(
        {"node": pa.array(nodes, pa.int64()), "component": pa.array(labels, pa.int64())}
    )
    return spark.createDataFrame(frame.to_pandas(), schema)


def _components_on_driver(spark: SparkSession, edges: DataFrame) -> DataFrame:
    """Union-find over the verified edges, for edge counts under the configured cap.

    Only integer pairs cross to the driver (16 bytes an edge), never documents.
    """
    table = edges.select("src", "dst").toArrow()
    src, dst = table.column("src").to_numpy(), table.column("dst").to_numpy()
    nodes, labels, _ = _driver_components(src, dst)
    return _components_frame(spark, nodes, labels)


# Id types whose order on the driver is Spark's: a string by its code points (Spark compares
# the UTF-8 bytes, unsigned, which orders the same), an integer by its value.
_INTEGERS = (LongType, IntegerType, ShortType, ByteType)
_DRIVER_ORDERED_IDS = (StringType, *_INTEGERS)


def driver_longest_survivors(
    nodes: np.ndarray, labels: np.ndarray, members: pa.Table, id_col: str
) -> tuple[np.ndarray, list[Any]]:
    """`choose_cluster_survivors` for keep `longest` without prior documents, on the driver:
    the `_rid` of every member of every component of two or more `nodes` (component `labels`)
    and its cluster's id, the doc_id of the member first in `survivor_order` (longest text,
    then smallest content hash, then smallest doc_id; nulls last).

    `members`: `_rid`, `id_col`, `_text_len` and `_norm_hash` of the nodes (a node it lacks
    is no member, as the inner join leaves it out). Row ids come back in ascending order.
    """
    comps, counts = np.unique(labels, return_counts=True)
    sized = np.isin(labels, comps[counts > 1])
    component = dict(zip(nodes[sized].tolist(), labels[sized].tolist(), strict=True))
    rids = members.column(ROW_ID).to_pylist()
    ids = members.column(id_col).to_pylist()
    lengths = members.column(TEXT_LEN).to_pylist()
    hashes = members.column(NORM_HASH).to_pylist()
    best: dict[int, tuple[tuple[Any, ...], Any]] = {}
    kept: list[tuple[int, int]] = []
    for rid, doc, length, digest in zip(rids, ids, lengths, hashes, strict=True):
        label = component.get(rid)
        if label is None:
            continue
        kept.append((rid, label))
        # desc_nulls_last on the length, asc_nulls_last on the hash and the doc_id. Each
        # value follows its null flag, so two values are compared only when neither is null.
        key = (
            length is None,
            None if length is None else -length,
            digest is None,
            digest,
            doc is None,
            doc,
        )
        held = best.get(label)
        if held is None or key < held[0]:
            best[label] = (key, doc)
    kept.sort()
    return (
        np.fromiter((rid for rid, _ in kept), dtype=np.int64, count=len(kept)),
        [best[label][1] for _, label in kept],
    )


def _id_frame(spark: SparkSession, ids: np.ndarray) -> DataFrame:
    """A broadcast frame of row ids made on the driver: a frame made from local data has no
    size estimate, so without the hint joining it would shuffle the large side."""
    return F.broadcast(spark.createDataFrame(pa.table({ROW_ID: pa.array(ids, pa.int64())})))


def driver_band_keys(candidates: DataFrame, bands: int) -> tuple[np.ndarray, np.ndarray]:
    """`_rid` (n,) and `_bands` (n, bands) of the candidates that have bands, on the driver.

    One collect of two integer columns: no document content crosses (8 * (bands + 1) bytes a
    row). Rows with null `_bands` (no shingle) are left out, as `explode_band_keys` leaves
    them out.
    """
    table = candidates.filter(F.col(BANDS).isNotNull()).select(ROW_ID, BANDS).toArrow()
    return _band_keys(table, bands)


def _band_keys(table: pa.Table, bands: int) -> tuple[np.ndarray, np.ndarray]:
    rids = np.asarray(table.column(ROW_ID).to_numpy(), dtype=np.int64)
    flat = np.asarray(pc.list_flatten(table.column(BANDS)).to_numpy(), dtype=np.int64)
    if flat.size != rids.size * bands:
        raise ValueError(f"{BANDS} holds {flat.size} keys for {rids.size} rows of {bands} bands")
    return rids, flat.reshape(rids.size, bands)


class DriverRows(NamedTuple):
    """What `driver_keys_and_signatures` brings: the rows' ids and band keys
    (`driver_band_keys`), their signatures and which had one, and `carried`: `_rid` and the
    columns asked for, of the same rows in the same order."""

    rids: np.ndarray
    keys: np.ndarray
    sig: np.ndarray
    found: np.ndarray
    carried: pa.Table


def driver_keys_and_signatures(
    candidates: DataFrame, bands: int, num_perm: int, carry: Sequence[str] = ()
) -> DriverRows:
    """`driver_band_keys` and, in the same collect, each of those rows' `_minhash`: an
    (n, num_perm) uint32 matrix in the order of the row ids, and which rows had one, with the
    `carry` columns beside. For inputs small enough to bring every signature (4 * num_perm
    bytes a row): one job where `driver_band_keys` and `driver_signatures` are two, with the
    same keys and signatures."""
    extra = [c for c in dict.fromkeys(carry) if c not in (ROW_ID, BANDS, MINHASH)]
    table = (
        candidates.filter(F.col(BANDS).isNotNull())
        .select(ROW_ID, BANDS, MINHASH, *[F.col(f"`{c}`") for c in extra])
        .toArrow()
    )
    rids, keys = _band_keys(table, bands)
    column = table.column(MINHASH)
    found = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
    empty = pa.scalar(bytes(4 * num_perm), pa.binary())
    sig = np.zeros((rids.size, num_perm), dtype="<u4")
    start = 0
    for chunk in column.chunks:
        filled = pc.fill_null(chunk, empty) if chunk.null_count else chunk
        _, data = value_buffers(filled, relative=True)
        sig[start : start + len(chunk)] = data.view("<u4").reshape(len(chunk), num_perm)
        start += len(chunk)
    return DriverRows(rids, keys, sig, found, table.select([ROW_ID, *extra]))


def signatures_of(
    nodes: np.ndarray, rids: np.ndarray, sig: np.ndarray, found: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`driver_signatures`' result for `nodes` (sorted distinct row ids, each among `rids`)
    from the rows `driver_keys_and_signatures` collected."""
    order = np.argsort(rids, kind="stable")
    at = order[np.searchsorted(rids, nodes, sorter=order)]
    return sig[at], found[at]


def driver_signatures(
    spark: SparkSession, candidates: DataFrame, nodes: np.ndarray, num_perm: int
) -> tuple[np.ndarray, np.ndarray]:
    """The `_minhash` of each of `nodes` (sorted distinct row ids) on the driver: an
    (len(nodes), num_perm) uint32 matrix in the order of `nodes`, and which nodes had one.

    One semi-join of the candidates on a broadcast frame of the ids; only the ids and their
    signatures (4 * num_perm bytes a node) cross, no document content.
    """
    sig = np.zeros((nodes.size, num_perm), dtype="<u4")
    found = np.zeros(nodes.size, dtype=bool)
    if not nodes.size:
        return sig, found
    wanted = candidates.filter(F.col(MINHASH).isNotNull()).select(ROW_ID, MINHASH)
    table = wanted.join(_id_frame(spark, nodes), ROW_ID, "left_semi").toArrow()
    got = np.asarray(table.column(ROW_ID).to_numpy(), dtype=np.int64)
    at, start = np.searchsorted(nodes, got), 0
    for chunk in table.column(MINHASH).chunks:
        _, data = value_buffers(chunk, relative=True)
        rows = at[start : start + len(chunk)]
        sig[rows] = data.view("<u4").reshape(len(chunk), num_perm)
        found[rows] = True
        start += len(chunk)
    return sig, found


def driver_edge_jaccard(
    src: np.ndarray, dst: np.ndarray, nodes: np.ndarray, sig: np.ndarray, found: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`estimate_edge_jaccard` on the driver: (which edges both of whose ends have a
    signature, the estimate of each of those). `nodes`, `sig`, `found` are
    `driver_signatures`' ids and results. An edge with an end lacking a signature is dropped,
    as the Spark path's inner joins drop it."""
    a, b = np.searchsorted(nodes, src), np.searchsorted(nodes, dst)
    keep = found[a] & found[b]
    a, b = a[keep], b[keep]
    est = np.empty(a.size, dtype=np.float64)
    step = max(1, (16 << 20) // max(1, sig.shape[1]))  # ~16 MB of slot comparisons at a time
    for lo in range(0, a.size, step):
        est[lo : lo + step] = slot_agreement(sig[a[lo : lo + step]], sig[b[lo : lo + step]])
    return keep, est


def pair_codes(src: np.ndarray, dst: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """An int64 per (src, dst), ordered as the pairs are (by src, then dst), for matching pairs
    with searchsorted: the ranks of both ends among `nodes` (sorted, holding every end)."""
    n = np.int64(nodes.size)
    return np.searchsorted(nodes, src).astype(np.int64) * n + np.searchsorted(nodes, dst)


# Near-duplicate pairs the report shows per similarity band.
EXAMPLES_PER_BAND = 3


def similarity_band(jaccard: float | None, threshold: float) -> str:
    """The band a pair's Jaccard falls in: 0.95 and up, 0.90, 0.85, the threshold to 0.85,
    and below the threshold (a pair removed through a chain of closer pairs)."""
    if jaccard is None:
        return "unknown"
    for lo in (0.95, 0.9, 0.85):
        if jaccard >= lo and lo > threshold:
            return f"≥ {lo:.2f}"
    if jaccard >= threshold:
        return f"{threshold:.2f} – {max(threshold, 0.85):.2f}"
    return f"< {threshold:.2f} (chained)"


def pick_by_band(
    pairs: list[dict[str, Any]], threshold: float, per_band: int
) -> list[dict[str, Any]]:
    """At most `per_band` pairs per similarity band, each with its `band`, most similar
    first (pairs come in a fixed order, so the choice is the same on every run)."""
    chosen: list[dict[str, Any]] = []
    seen: Counter[str] = Counter()
    for pair in pairs:
        band = similarity_band(pair.get("jaccard"), threshold)
        if seen[band] < per_band:
            seen[band] += 1
            chosen.append({**pair, "band": band})
    return sorted(chosen, key=lambda p: (-(p["jaccard"] or -1.0), str(p["removed"])))


class NearDedupParams(StepParams):
    """`near_dedup:` — every near-dedup parameter, threshold included, in one model.

    `bands` x `rows` left empty are chosen for the threshold by `optimal_bands` in the
    validator (`lsh`); conf/default.yaml explains each value.
    """

    threshold: float = Field(0.8, gt=0.0, lt=1.0)
    num_perm: int = Field(128, ge=16, le=1024)
    ngram: int = Field(5, ge=1, le=64)
    char_ngram: int = Field(5, ge=1, le=64)
    tokenizer: Literal["word", "char", "auto"] = "auto"
    seed: int = Field(42, ge=0)
    keep: KeepRule = "longest"
    bands: int | None = Field(None, ge=1)
    rows: int | None = Field(None, ge=1)
    false_positive_weight: float = Field(0.05, ge=0.0, le=1.0)
    verify: bool = True
    exact_margin: float = Field(0.1, ge=0.0, le=1.0)
    max_bucket: int = Field(0, ge=0)
    union_find_max_edges: int = Field(5_000_000, ge=0)
    driver_max_keys: int = Field(64_000_000, ge=0)
    max_iterations: int = Field(64, ge=1)
    _lsh: tuple[int, int] = PrivateAttr((0, 0))

    @model_validator(mode="after")
    def _resolve_bands(self) -> NearDedupParams:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("near_dedup.bands and near_dedup.rows are set together or not at all")
        if self.bands is not None and self.rows is not None:
            if self.bands * self.rows > self.num_perm:
                raise ValueError(
                    f"near_dedup.bands x near_dedup.rows = {self.bands * self.rows} exceeds "
                    f"near_dedup.num_perm = {self.num_perm}"
                )
            self._lsh = (self.bands, self.rows)
        else:
            w = self.false_positive_weight
            self._lsh = optimal_bands(self.threshold, self.num_perm, w, 1 - w)
        return self

    @property
    def lsh(self) -> tuple[int, int]:
        """(bands, rows) the run uses: as set, or chosen for the threshold."""
        return self._lsh

    @property
    def minhash(self) -> MinHashParams:
        """The shingling, signature and banding parameters of the kernels."""
        bands, rows = self.lsh
        return MinHashParams(
            num_perm=self.num_perm,
            seed=self.seed,
            tokenizer=self.tokenizer,
            ngram=self.ngram,
            char_ngram=self.char_ngram,
            bands=bands,
            rows=rows,
        )


class MinHashFeature(TextFeature):
    """MinHash signatures and LSH band keys of each text (pipelines/minhash.py).

    Adds `_minhash` (binary, num_perm little-endian uint32; null for a document with no
    shingle, so LSH never buckets empty documents together), `_bands` (array<bigint>, one key
    per band, null likewise) and `_shingles` (int).
    """

    def __init__(self, params: MinHashParams) -> None:
        self.params = params

    def fields(self) -> list[StructField]:
        return [
            StructField(MINHASH, BinaryType(), True),
            StructField(BANDS, ArrayType(LongType(), False), True),
            StructField(SHINGLES, IntegerType(), True),
        ]

    def compute(self, texts: pa.Array) -> dict[str, pa.Array]:
        p = self.params
        sig, n_sh = signatures(texts, p)
        has = n_sh > 0
        n = len(texts)
        width = p.num_perm * 4
        sig_bytes = np.ascontiguousarray(sig[has].astype("<u4")).view(np.uint8).reshape(-1)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.where(has, width, 0).astype(np.int32), out=offsets[1:])
        validity = pa.py_buffer(np.packbits(has, bitorder="little"))
        minhash = pa.Array.from_buffers(
            pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(sig_bytes)]
        )
        band_flat = band_hashes(sig[has], p.bands, p.rows).astype(np.int64).reshape(-1)
        list_off = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.where(has, p.bands, 0).astype(np.int32), out=list_off[1:])
        bands = pa.ListArray.from_arrays(
            pa.array(list_off, pa.int32()), pa.array(band_flat, pa.int64()), mask=pa.array(~has)
        )
        return {MINHASH: minhash, BANDS: bands, SHINGLES: pa.array(n_sh, pa.int32())}


SECONDS_NOTE = (
    "the near stage's own steps only: shingling, MinHash signatures and band keys are "
    "computed in the read pass and counted there"
)


@dataclass
class _Edges:
    """Candidate edges held on the driver: distinct `src`, `dst` sorted by src then dst, every
    end among `nodes` (sorted); `jaccard` the estimate (exact where re-checked; None when not
    verified) and `exact` which edges were re-checked."""

    src: np.ndarray
    dst: np.ndarray
    nodes: np.ndarray
    jaccard: np.ndarray | None = None
    exact: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # The nodes' signatures and which had one, when the band keys' collect brought them.
    signatures: tuple[np.ndarray, np.ndarray] | None = None
    # `_rid` and the survivor order's columns of rows that include every node, when the band
    # keys' collect brought them (`NearDedup._driver_order_columns`).
    members: pa.Table | None = None


@dataclass
class _Cross:
    """Verified edges to prior documents (`src` a row of the batch, `dst` a prior node), in
    chunks per index, and each index's figures."""

    src: list[np.ndarray] = field(default_factory=list)
    dst: list[np.ndarray] = field(default_factory=list)
    figures: dict[str, dict[str, int]] = field(default_factory=dict)


# Up to this many signature slots of the batch (rows x num_perm: 4 bytes each, 32 MB), every
# row's signature comes with its band keys in one collect: a job less than fetching the
# edges' endpoints' signatures after, at the cost of bringing the rows no edge reaches.
SIGNATURES_WITH_KEYS = 8_000_000

# Up to this many members of the driver path's clusters, their survivors are chosen on the
# driver: their row id, doc_id, text length and content hash (about 70 bytes a member) come in
# one collect.
DRIVER_SURVIVORS_MAX = 1_000_000

# Up to this many band keys of the batch (rows x bands), they are broadcast to the join with an
# index's band keys (16 bytes a key, 64 MB): the index's keys are then read once, unshuffled.
BROADCAST_KEYS = 4_000_000


class _Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._t, 3)
        self._t = now


@register
class NearDedup(Dedup):
    """`near` (section `near_dedup`): MinHash LSH candidates -> verified edges -> connected
    components -> one survivor per cluster. Reads the features `MinHashFeature` adds in the
    read pass, the id, the text length, the content hash and the keep column (and the texts of
    the few edges near the threshold); adds `_near_cluster`."""

    name = "near"
    section = "near_dedup"
    Params = NearDedupParams
    params: NearDedupParams
    cluster_col = NEAR_CLUSTER
    clusters_on_driver = True
    title = "Near-dedup"
    shows_pairs = True
    _cross: _Cross | None = None

    def text_features(self) -> list[TextFeature]:
        return [MinHashFeature(self.params.minhash)]

    def signature_params(self) -> MinHashParams:
        return self.params.minhash

    def example_pairs(
        self, picked: Sequence[ExamplePick], removed: Mapping[int, str], kept: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        """Each sampled removed document beside its cluster's survivor, with their exact
        Jaccard on this stage's shingles (`jaccard`) and its similarity band (`band`); a few
        per band (`EXAMPLES_PER_BAND`), most similar first."""
        pairs = []
        for pick in picked:
            removed_text, kept_text = removed.get(pick.rid), kept.get(pick.kept)
            jaccard = None
            if removed_text is not None and kept_text is not None:
                jaccard = round(exact_jaccard(kept_text, removed_text, self.params.minhash), 4)
            pairs.append(
                {
                    "kept": pick.kept,
                    "removed": pick.doc_id,
                    "jaccard": jaccard,
                    "kept_text": kept_text,
                    "removed_text": removed_text,
                }
            )
        return pick_by_band(pairs, self.params.threshold, EXAMPLES_PER_BAND)

    def find_clusters(
        self, candidates: DataFrame, run: StageRun
    ) -> tuple[DataFrame, dict[str, Any]]:
        nd = self.params
        timer = _Timer()
        bands = nd.minhash.bands
        # Verified edges to prior documents (clean --against), held on the driver: at most a
        # few per row of the batch, whatever the size of the indexes.
        self._cross = self._prior_edges(candidates, run) if self.priors else None
        # Decided from the rows coming in (an upper bound on the rows with bands): no job.
        if nd.driver_max_keys == 0 or run.rows_in * bands > nd.driver_max_keys:
            pairs = build_star_edges(explode_band_keys(candidates), nd.max_bucket)
            return self._spark_clusters(candidates, run, pairs, "spark", timer)
        signed = members = None
        if nd.verify and run.rows_in * nd.num_perm <= SIGNATURES_WITH_KEYS:
            order = self._driver_order_columns(candidates)
            got = driver_keys_and_signatures(candidates, bands, nd.num_perm, order or ())
            rids, keys, signed = got.rids, got.keys, (got.sig, got.found)
            # Every node is a row with bands: the survivors' order columns came with the keys.
            members = got.carried if order else None
        else:
            rids, keys = driver_band_keys(candidates, bands)
        src, dst = star_edges_np(rids, keys, nd.max_bucket)
        nodes = np.unique(np.concatenate([src, dst]))
        if nd.verify and (
            src.size > nd.union_find_max_edges or nodes.size * nd.num_perm > nd.driver_max_keys
        ):
            # Too many endpoints to hold their signatures: Spark estimates the driver's edges.
            frame = run.spark.createDataFrame(pa.table({"src": src, "dst": dst}))
            return self._spark_clusters(candidates, run, frame, "driver", timer)
        edges = _Edges(src, dst, nodes)
        edges.members = members
        if signed is not None:
            edges.signatures = signatures_of(nodes, rids, *signed)
        return self._driver_clusters(candidates, run, edges, timer)

    def _prior_edges(self, candidates: DataFrame, run: StageRun) -> _Cross:
        """Verified edges between the batch's rows and each prior index's documents.

        Per index, on the driver like the driver path's edges: one job collects the pairs that
        share a bucket (the index's band keys joined with the batch's, pipelines/prior.py:
        integers only), one fetches both ends' signatures (the prior ones by their `ix`,
        pushed down to Parquet so only the pages holding them are read), the estimates are
        compared in numpy, and the few close to the threshold are re-checked on both texts
        (the prior ones by doc_id, pushed down likewise) when the index reaches its texts."""
        nd = self.params
        small = run.rows_in * nd.minhash.bands <= BROADCAST_KEYS
        cross = _Cross()
        for prior in self.priors:
            got = prior_candidate_pairs(candidates, prior, small).toArrow()
            src = np.asarray(got.column("src").to_numpy(), np.int64)
            dst = np.asarray(got.column("dst").to_numpy(), np.int64)
            order = np.lexsort((dst, src))
            src, dst = src[order], dst[order]
            est = np.ones(src.size)
            exact = np.zeros(src.size, dtype=bool)
            if nd.verify and src.size:
                mine = np.unique(src)
                sig_a, found_a = driver_signatures(run.spark, candidates, mine, nd.num_perm)
                theirs, sig_b, found_b, ids = prior_signature_matrix(
                    run.spark, prior, np.unique(dst), nd.num_perm
                )
                a, b = np.searchsorted(mine, src), np.searchsorted(theirs, dst)
                keep = found_a[a] & found_b[b]
                src, dst, a, b = src[keep], dst[keep], a[keep], b[keep]
                est = slot_agreement(sig_a[a], sig_b[b])
                exact = np.zeros(src.size, dtype=bool)
                if nd.exact_margin > 0:
                    close = np.flatnonzero(np.abs(est - nd.threshold) <= nd.exact_margin)
                    self._recheck_prior(run, prior, src, dst, ids[b], close, est, exact)
            ok = est >= nd.threshold if nd.verify else np.ones(src.size, dtype=bool)
            cross.src.append(src[ok])
            cross.dst.append(dst[ok])
            cross.figures[prior.name] = {
                "candidate_pairs": int(got.num_rows),
                "verified_edges": int(ok.sum()),
                "exact_checked_edges": int(exact.sum()),
                "rows_matched": int(np.unique(src[ok]).size),
            }
        return cross

    def _recheck_prior(
        self,
        run: StageRun,
        prior: PriorIndex,
        src: np.ndarray,
        dst: np.ndarray,
        doc_ids: np.ndarray,
        close: np.ndarray,
        est: np.ndarray,
        exact: np.ndarray,
    ) -> None:
        """`_recheck_on_driver` for edges to a prior index: the batch's texts by row id, the
        prior documents' by doc_id; `est` and `exact` are updated in place. An index that
        cannot reach its texts keeps the estimates."""
        if not close.size or prior.texts is None:
            return
        nd, text_col = self.params, self.roles.text
        new = run.texts().join(_id_frame(run.spark, np.unique(src[close])), ROW_ID, "left_semi")
        ends, first = np.unique(dst[close], return_index=True)
        docs = doc_ids[close][first]
        wanted = sorted(set(docs.tolist()))
        old = lookup(run.spark, prior.texts, DOC_ID, wanted).select(
            F.col(DOC_ID).alias("__doc"), F.col(TEXT).alias(text_col)
        )
        who = pa.table({ROW_ID: pa.array(ends, pa.int64()), "__doc": pa.array(docs, pa.string())})
        old_rows = F.broadcast(run.spark.createDataFrame(who)).join(old, "__doc")
        old_texts = old_rows.select(ROW_ID, text_col).dropDuplicates([ROW_ID])
        pairs = run.spark.createDataFrame(
            pa.table({"src": pa.array(src[close]), "dst": pa.array(dst[close])})
        )
        # Every `src` is a row of the batch and every `dst` a prior document: each side's
        # texts are read for its own ends only (a union of both read the batch's twice).
        exact_of = compute_exact_edge_jaccard(pairs, new, text_col, nd.minhash, old_texts)
        with pushed_in(run.spark, len(wanted)):
            got = exact_of.toArrow()
        gs = np.asarray(got.column("src").to_numpy(), np.int64)
        gd = np.asarray(got.column("dst").to_numpy(), np.int64)
        nodes = np.unique(np.concatenate([src, dst]))
        at = np.searchsorted(pair_codes(src, dst, nodes), pair_codes(gs, gd, nodes))
        est[at] = got.column("exact_jaccard").to_numpy()
        exact[at] = True

    def _with_cross(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The verified edges of the batch plus those to prior documents."""
        cross = self._cross
        if cross is None or not cross.src:
            return src, dst
        return np.concatenate([src, *cross.src]), np.concatenate([dst, *cross.dst])

    def _prior_frame(self, run: StageRun) -> DataFrame | None:
        """Who the prior nodes of the verified cross edges are (`prior_members`)."""
        cross = self._cross
        if cross is None:
            return None
        nodes = np.unique(np.concatenate([np.zeros(0, np.int64), *cross.dst]))
        frame = run.spark.createDataFrame(pa.table({"node": pa.array(nodes, pa.int64())}))
        return prior_members(self.priors, F.broadcast(frame))

    def _driver_clusters(
        self, candidates: DataFrame, run: StageRun, edges: _Edges, timer: _Timer
    ) -> tuple[DataFrame, dict[str, Any]]:
        """Estimates, counts and components of edges held on the driver; the close edges'
        exact check and the survivors stay Spark jobs."""
        nd = self.params
        if nd.verify:
            sig, found = edges.signatures or driver_signatures(
                run.spark, candidates, edges.nodes, nd.num_perm
            )
            keep, edges.jaccard = driver_edge_jaccard(edges.src, edges.dst, edges.nodes, sig, found)
            edges.src, edges.dst = edges.src[keep], edges.dst[keep]
            edges.exact = np.zeros(edges.src.size, dtype=bool)
        timer.lap("candidates")
        if nd.verify and nd.exact_margin > 0:
            self._recheck_on_driver(edges, run)
        timer.lap("exact")
        ok = edges.jaccard >= nd.threshold if edges.jaccard is not None else slice(None)
        src, dst = edges.src[ok], edges.dst[ok]
        counts = {"pairs": edges.src.size, "verified": src.size, "exact": int(edges.exact.sum())}
        nodes, labels, sizes = _driver_components(*self._with_cross(src, dst))
        timer.lap("components")
        clusters = self._driver_survivors(nodes, labels, candidates, run, edges.members)
        if clusters is None:
            components = _components_frame(run.spark, nodes, labels)
            clusters, sizes = self._survivors(components, candidates, run, sizes)
        timer.lap("survivors")
        figures = self._figures(counts, sizes, "union_find", "driver")
        figures["seconds"] = timer.seconds
        figures["seconds_note"] = SECONDS_NOTE
        return clusters, figures

    def _spark_clusters(
        self, candidates: DataFrame, run: StageRun, pairs: DataFrame, method: str, timer: _Timer
    ) -> tuple[DataFrame, dict[str, Any]]:
        """Estimates, counts and components of the candidate `pairs` (`src, dst`) in Spark,
        for inputs too large for the driver."""
        nd = self.params
        edges = run.materialise(pairs, "pairs")
        if nd.verify:
            # Only the edges' endpoints' signatures, written once: both joins read that small
            # frame instead of scanning every signature twice.
            sigs = run.materialise(
                select_edge_nodes(edges, candidates.select(ROW_ID, MINHASH)), "signatures"
            )
            scored = estimate_edge_jaccard(edges, sigs)
        else:
            scored = edges.withColumn("jaccard", F.lit(None).cast("double"))
        all_edges = run.materialise(scored, "edges")
        timer.lap("candidates")
        if nd.verify and nd.exact_margin > 0:
            all_edges = self._recheck_close_edges(all_edges, run)
        timer.lap("exact")
        keep = F.col("jaccard") >= F.lit(nd.threshold) if nd.verify else F.lit(True)
        exact_col = F.col("exact") if "exact" in all_edges.columns else F.lit(False)
        counts = all_edges.agg(
            F.count(F.lit(1)).alias("pairs"),
            F.sum(keep.cast("long")).alias("verified"),
            F.sum(exact_col.cast("long")).alias("exact"),
        ).first()
        assert counts is not None
        verified = int(counts["verified"] or 0)
        edges_ok = all_edges.filter(keep).select("src", "dst")
        cross = self._cross
        if cross is not None and cross.src:
            src, dst = self._with_cross(np.zeros(0, np.int64), np.zeros(0, np.int64))
            edges_ok = edges_ok.unionByName(
                run.spark.createDataFrame(pa.table({"src": src, "dst": dst}))
            )
            verified += int(src.size)
        if verified <= nd.union_find_max_edges:
            components, components_method = _components_on_driver(run.spark, edges_ok), "union_find"
        else:
            components = spark_connected_components(edges_ok, max_iterations=nd.max_iterations)
            components_method = "large_small_star"
        timer.lap("components")
        clusters, sizes = self._survivors(components, candidates, run)
        timer.lap("survivors")
        figures = self._figures(counts.asDict(), sizes, components_method, method)
        figures["seconds"] = timer.seconds
        figures["seconds_note"] = SECONDS_NOTE
        return clusters, figures

    def _recheck_on_driver(self, edges: _Edges, run: StageRun) -> None:
        """`_recheck_close_edges` for edges held on the driver: the close edges go to Spark as
        a small frame, their texts are fetched in one scan (a semi-join on their row ids) and
        checked there, and only the exact Jaccard of each comes back."""
        nd = self.params
        assert edges.jaccard is not None
        close = np.flatnonzero(np.abs(edges.jaccard - nd.threshold) <= nd.exact_margin)
        if not close.size:
            return
        src, dst = edges.src[close], edges.dst[close]
        ends = np.unique(np.concatenate([src, dst]))
        texts = run.texts().join(_id_frame(run.spark, ends), ROW_ID, "left_semi")
        close_texts = run.materialise(texts, "texts")
        frame = run.spark.createDataFrame(pa.table({"src": src, "dst": dst}))
        exact = compute_exact_edge_jaccard(frame, close_texts, self.roles.text, nd.minhash)
        got = exact.toArrow()
        codes = pair_codes(edges.src, edges.dst, edges.nodes)
        at = np.searchsorted(
            codes,
            pair_codes(got.column("src").to_numpy(), got.column("dst").to_numpy(), edges.nodes),
        )
        edges.jaccard[at] = got.column("exact_jaccard").to_numpy()
        edges.exact[at] = True

    def _recheck_close_edges(self, all_edges: DataFrame, run: StageRun) -> DataFrame:
        """Edges whose estimate lies within `exact_margin` of the threshold, decided on the
        documents' real shingle sets instead (the estimate's standard error at 128 slots is
        ~0.035). Their texts are fetched in one scan (a semi-join on their row ids)."""
        nd = self.params
        close = all_edges.filter(
            F.abs(F.col("jaccard") - F.lit(nd.threshold)) <= F.lit(nd.exact_margin)
        ).select("src", "dst")
        close_texts = run.materialise(select_edge_nodes(close, run.texts()), "texts")
        exact = run.materialise(
            compute_exact_edge_jaccard(close, close_texts, self.roles.text, nd.minhash), "exact"
        )
        return all_edges.join(exact, ["src", "dst"], "left").select(
            "src",
            "dst",
            F.coalesce("exact_jaccard", "jaccard").alias("jaccard"),
            F.col("exact_jaccard").isNotNull().alias("exact"),
        )

    def _driver_order_columns(self, candidates: DataFrame) -> list[str] | None:
        """The columns `driver_longest_survivors` orders the members by (doc_id, text length,
        content hash), where the survivors can be chosen on the driver: None for another keep
        rule, with prior documents (their own order decides), or for an id type whose order
        Python does not share with Spark."""
        roles = self.roles
        if self.keep != "longest" or self._cross is not None:
            return None
        if TEXT_LEN not in candidates.columns or NORM_HASH not in candidates.columns:
            return None
        schema = candidates.schema
        if not isinstance(schema[roles.id].dataType, _DRIVER_ORDERED_IDS):
            return None
        if not isinstance(schema[TEXT_LEN].dataType, _INTEGERS):
            return None
        if not isinstance(schema[NORM_HASH].dataType, (BinaryType, *_INTEGERS)):
            return None
        return [roles.id, TEXT_LEN, NORM_HASH]

    def _driver_survivors(
        self,
        nodes: np.ndarray,
        labels: np.ndarray,
        candidates: DataFrame,
        run: StageRun,
        members: pa.Table | None,
    ) -> DataFrame | None:
        """The clusters' survivors chosen on the driver (`driver_longest_survivors`), as the
        `_rid, cluster_id` frame `_survivors` writes, without its window over the components
        and its write: from `members` (rows the band keys' collect brought), else from one
        small collect of the nodes' order columns. None where the driver does not choose
        (`_driver_order_columns`) or the nodes are too many to bring: `_survivors` then."""
        order = self._driver_order_columns(candidates)
        if order is None or nodes.size > DRIVER_SURVIVORS_MAX:
            return None
        id_col = self.roles.id
        if not nodes.size:  # no verified edge: no cluster, and nothing to fetch
            rids, ids = np.zeros(0, np.int64), []
        else:
            if members is None:
                members = (
                    candidates.join(_id_frame(run.spark, nodes), ROW_ID, "left_semi")
                    .select(ROW_ID, *[F.col(f"`{c}`") for c in order])
                    .toArrow()
                )
            else:
                members = members.filter(pc.is_in(members.column(ROW_ID), pa.array(nodes)))
            rids, ids = driver_longest_survivors(nodes, labels, members, id_col)
        id_type = candidates.schema[id_col].dataType
        arrow_id = pa.string() if isinstance(id_type, StringType) else pa.int64()
        table = pa.table(
            {ROW_ID: pa.array(rids, pa.int64()), "cluster_id": pa.array(ids, arrow_id)}
        )
        frame = run.spark.createDataFrame(table)
        return frame.select(ROW_ID, F.col("cluster_id").cast(id_type).alias("cluster_id"))

    def _survivors(
        self,
        components: DataFrame,
        candidates: DataFrame,
        run: StageRun,
        sizes: Mapping[str, Any] | None = None,
    ) -> tuple[DataFrame, Mapping[str, Any]]:
        """The survivor of each component (written once), and the clusters' sizes: `sizes`
        when the driver knows them from union-find, else one aggregation of the clusters."""
        roles = self.roles
        order = survivor_order(
            self.keep, roles.id, timestamp_col=roles.timestamp, row_hash_col=None
        )
        wanted = (TEXT_LEN, NORM_HASH, roles.timestamp, self.keep)
        docs = candidates.select(
            ROW_ID,
            roles.id,
            *[c for c in dict.fromkeys(wanted) if c in candidates.columns and c != roles.id],
        )
        priors = self._prior_frame(run)
        clusters = run.materialise(
            choose_cluster_survivors(components, docs, roles.id, order, priors), "clusters"
        )
        if sizes is not None:
            return clusters, sizes
        prior = F.col(AGAINST).isNotNull() if priors is not None else F.lit(False)
        row = (
            clusters.groupBy("cluster_id")
            .agg(F.count(F.lit(1)).alias("n"), F.max(prior).alias("prior"))
            .agg(
                F.count(F.lit(1)).alias("clusters"),
                F.max("n").alias("largest"),
                F.sum("n").alias("members"),
                F.sum(F.col("prior").cast("long")).alias("prior_clusters"),
            )
            .first()
        )
        assert row is not None
        out = row.asDict()
        members, with_prior = int(out["members"] or 0), int(out["prior_clusters"] or 0)
        out["removed"] = members - (int(out["clusters"] or 0) - with_prior)
        return clusters, out

    def _figures(
        self,
        counts: Mapping[str, Any],
        sizes: Mapping[str, Any],
        method: str,
        candidates_method: str,
    ) -> dict[str, Any]:
        nd, mh = self.params, self.params.minhash
        n_clusters = int(sizes["clusters"] or 0)
        members = int(sizes["members"] or 0)
        out: dict[str, Any] = {
            "enabled": True,
            "ran": True,
            "threshold": nd.threshold,
            "num_perm": mh.num_perm,
            "bands": mh.bands,
            "rows": mh.rows,
            "tokenizer": mh.tokenizer,
            "ngram": mh.ngram,
            "char_ngram": mh.char_ngram,
            "seed": mh.seed,
            "keep": nd.keep,
            "verify": nd.verify,
            "candidate_pairs": int(counts["pairs"]),
            "verified_edges": int(counts["verified"] or 0),
            "exact_checked_edges": int(counts["exact"] or 0),
            "exact_margin": nd.exact_margin,
            "candidates_method": candidates_method,
            "components_method": method,
            "clusters": n_clusters,
            "largest_cluster": int(sizes["largest"] or 0),
            "members": members,
            "removed": int(sizes.get("removed", members - n_clusters)),
        }
        if self._cross is not None:
            # Per prior index (clean --against): its pairs, verified edges, the rows they
            # matched and the clusters that resolve to its documents.
            out["against"] = self._cross.figures
            out["prior_clusters"] = int(sizes.get("prior_clusters") or 0)
        return out

    def summary(self, figures: dict[str, Any]) -> str:
        return (
            f"{figures['candidate_pairs']:,} candidate pairs, {figures['verified_edges']:,} "
            f"verified, {figures['clusters']:,} clusters (largest {figures['largest_cluster']:,})"
            f" via {figures['components_method']}"
        )
