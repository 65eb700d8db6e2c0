"""Near-duplicate candidates, verification and survivors on Spark.

LSH band rows are partitioned by bucket (band, key) in one shuffle; each bucket's size and
smallest member are window aggregates over it, buckets of one are dropped, and every other
bucket links its members to that smallest member: k - 1 star edges per bucket of k, never
k^2, so a bucket of 100k boilerplate pages costs 100k edges. Edges are then verified against
the signatures, so a chance band collision cannot chain unrelated documents into one cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql.types import DoubleType, LongType, StructField, StructType

from corpusclean.pipelines.columns import BANDS, MINHASH, ROW_ID
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
    saves little, since most buckets hold one document (221k docs x 16 bands: 17.5 s for
    candidates and estimates with this plan, 20.6 s with that one).
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


def signature_matrix(arr: pa.Array) -> np.ndarray:
    """A binary column of fixed-width signatures as an (n, num_perm) uint32 view, no copy."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    off_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], off_type)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]
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


def _jaccard_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    hold("near.verify")  # a crash test's kill point inside a task (inert unless asked for)
    for batch in batches:
        sa = signature_matrix(batch.column("sig_src"))
        sb = signature_matrix(batch.column("sig_dst"))
        est = (sa == sb).mean(axis=1) if batch.num_rows else np.empty(0)
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
    components: DataFrame, docs: DataFrame, id_col: str, order: list[Column]
) -> DataFrame:
    """One survivor per near-duplicate cluster, by explicit ordering.

    Reads `node, component` of `components` and `_rid`, `id_col` and the columns of `order`
    of `docs`; returns `_rid, cluster_id` (the survivor's doc_id) for every member of every
    component of two or more.
    """
    members = components.select(F.col("node").alias(ROW_ID), F.col("component")).join(docs, ROW_ID)
    by_comp = Window.partitionBy("component")
    ordered = by_comp.orderBy(*order)
    return (
        members.withColumn("__size", F.count(F.lit(1)).over(by_comp))
        .filter(F.col("__size") > 1)
        .withColumn(
            "cluster_id",
            F.first(F.col(id_col)).over(
                ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        )
        .select(ROW_ID, "cluster_id")
    )


def _exact_batches(params: Any) -> Any:
    from corpusclean.pipelines.minhash import shingle_batch

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ha, oa = shingle_batch(batch.column("text_src"), params)
            hb, ob = shingle_batch(batch.column("text_dst"), params)
            out = np.zeros(batch.num_rows)
            for i in range(batch.num_rows):
                a = np.unique(ha[oa[i] : oa[i + 1]])
                b = np.unique(hb[ob[i] : ob[i + 1]])
                if len(a) and len(b):
                    inter = len(np.intersect1d(a, b, assume_unique=True))
                    out[i] = inter / (len(a) + len(b) - inter)
            yield pa.RecordBatch.from_pydict(
                {
                    "src": batch.column("src"),
                    "dst": batch.column("dst"),
                    "exact_jaccard": pa.array(out, pa.float64()),
                }
            )

    return run


def compute_exact_edge_jaccard(
    edges: DataFrame, texts: DataFrame, text_col: str, params: Any
) -> DataFrame:
    """Exact Jaccard of the shingle sets of each edge's two documents.

    Reads `src, dst` of `edges` and `_rid`, `text_col` of `texts`; returns
    `src, dst, exact_jaccard`. Meant for the few edges whose estimate is too close to the
    threshold to trust: it moves both texts of every edge it is given.
    """
    text = texts.select(F.col(ROW_ID), F.col(text_col).alias("t"))
    pairs = (
        edges.join(text.withColumnsRenamed({ROW_ID: "src", "t": "text_src"}), "src")
        .join(text.withColumnsRenamed({ROW_ID: "dst", "t": "text_dst"}), "dst")
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
