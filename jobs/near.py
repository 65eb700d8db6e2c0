"""Driving the near-dedup stage: candidates -> verified edges -> components -> survivors.

The steps are pure frames (pipelines/near_dedup.py); this module decides what to materialise
(edges are written once, so counting and clustering them does not redo LSH), which component
algorithm to use, and what the report says.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyspark.sql.functions as F
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from corpusclean.jobs import log
from corpusclean.jobs.config import CleanConfig
from corpusclean.pipelines.components import spark_connected_components, union_find_components
from corpusclean.pipelines.dedup import survivor_order
from corpusclean.pipelines.near_dedup import (
    MINHASH,
    ROW_ID,
    build_star_edges,
    choose_cluster_survivors,
    compute_exact_edge_jaccard,
    estimate_edge_jaccard,
    explode_band_keys,
    select_edge_nodes,
)

JOB = "clean"


def _components_on_driver(spark: SparkSession, edges: DataFrame) -> DataFrame:
    """Union-find over the verified edges, for edge counts under the configured cap.

    Only integer pairs cross to the driver (16 bytes an edge), never documents.
    """
    table = edges.select("src", "dst").toArrow()
    src = table.column("src").to_numpy()
    dst = table.column("dst").to_numpy()
    nodes, labels = union_find_components(src, dst)
    schema = StructType(
        [StructField("node", LongType(), False), StructField("component", LongType(), False)]
    )
    import pyarrow as pa

    frame = pa.table({"node": pa.array(np.asarray(nodes, np.int64)), "component": pa.array(labels)})
    return spark.createDataFrame(frame.to_pandas(), schema)


def _materialise(spark: SparkSession, df: DataFrame, path: Path) -> DataFrame:
    """Write `df` once and read it back, so later steps do not recompute its lineage."""
    df.write.mode("overwrite").parquet(str(path))
    return spark.read.parquet(str(path))


def run_near_dedup(
    spark: SparkSession,
    candidates: DataFrame,
    id_col: str,
    params: Any,
    cfg: CleanConfig,
    work: Path,
    texts: DataFrame | None = None,
) -> tuple[DataFrame, dict[str, Any]]:
    """Find near-duplicate clusters among `candidates` (live rows of the features frame).

    Returns `(_rid, cluster_id)` for members of clusters of two or more and the report's
    `near_dedup` section.
    """
    nd = cfg.near_dedup
    timings: dict[str, float] = {}
    t = time.perf_counter()
    edges = _materialise(
        spark, build_star_edges(explode_band_keys(candidates), nd.max_bucket), work / "pairs"
    )
    if nd.verify:
        # Only the edges' endpoints' signatures, written once: both joins read that small
        # frame instead of scanning every signature twice.
        sigs = select_edge_nodes(edges, candidates.select(ROW_ID, MINHASH))
        scored = estimate_edge_jaccard(edges, _materialise(spark, sigs, work / "signatures"))
    else:
        scored = edges.withColumn("jaccard", F.lit(None).cast("double"))
    all_edges = _materialise(spark, scored, work / "edges")
    timings["candidates"] = time.perf_counter() - t

    t = time.perf_counter()
    exact_checked = 0
    if nd.verify and nd.exact_margin > 0 and texts is not None:
        # The estimate's standard error at 128 slots is ~0.035: edges that close to the
        # threshold are decided on the documents' real shingle sets instead. Their texts are
        # fetched in one scan (a broadcast semi-join on their row ids) and written once.
        close = all_edges.filter(
            F.abs(F.col("jaccard") - F.lit(nd.threshold)) <= F.lit(nd.exact_margin)
        ).select("src", "dst")
        close_texts = _materialise(spark, select_edge_nodes(close, texts), work / "texts")
        exact = _materialise(
            spark,
            compute_exact_edge_jaccard(close, close_texts, cfg.columns.text, params),
            work / "exact",
        )
        all_edges = all_edges.join(exact, ["src", "dst"], "left").select(
            "src",
            "dst",
            F.coalesce("exact_jaccard", "jaccard").alias("jaccard"),
            F.col("exact_jaccard").isNotNull().alias("exact"),
        )
    timings["exact"] = time.perf_counter() - t

    t = time.perf_counter()
    keep = F.col("jaccard") >= F.lit(nd.threshold) if nd.verify else F.lit(True)
    exact_col = F.col("exact") if "exact" in all_edges.columns else F.lit(False)
    counts = all_edges.agg(
        F.count(F.lit(1)).alias("pairs"),
        F.sum(keep.cast("long")).alias("verified"),
        F.sum(exact_col.cast("long")).alias("exact"),
    ).first()
    assert counts is not None
    pairs, verified = int(counts["pairs"]), int(counts["verified"] or 0)
    exact_checked = int(counts["exact"] or 0)
    edges_ok = all_edges.filter(keep).select("src", "dst")
    if verified <= nd.union_find_max_edges:
        components = _components_on_driver(spark, edges_ok)
        method = "union_find"
    else:
        components = spark_connected_components(edges_ok, max_iterations=nd.max_iterations)
        method = "large_small_star"
    timings["components"] = time.perf_counter() - t

    t = time.perf_counter()
    order = survivor_order(nd.keep, id_col, timestamp_col=cfg.columns.timestamp, row_hash_col=None)
    docs = candidates.select(
        ROW_ID,
        id_col,
        *[
            c
            for c in dict.fromkeys(("_text_len", "_norm_hash", cfg.columns.timestamp, nd.keep))
            if c in candidates.columns and c != id_col
        ],
    )
    clusters = choose_cluster_survivors(components, docs, id_col, order)
    clusters.write.mode("overwrite").parquet(str(work / "clusters"))
    clusters = spark.read.parquet(str(work / "clusters"))
    sizes = (
        clusters.groupBy("cluster_id")
        .agg(F.count(F.lit(1)).alias("n"))
        .agg(
            F.count(F.lit(1)).alias("clusters"),
            F.max("n").alias("largest"),
            F.sum("n").alias("members"),
        )
        .first()
    )
    timings["survivors"] = time.perf_counter() - t
    assert sizes is not None
    n_clusters = int(sizes["clusters"] or 0)
    members = int(sizes["members"] or 0)
    stats: dict[str, Any] = {
        "enabled": True,
        "ran": True,
        "threshold": nd.threshold,
        "num_perm": params.num_perm,
        "bands": params.bands,
        "rows": params.rows,
        "tokenizer": params.tokenizer,
        "ngram": params.ngram,
        "char_ngram": params.char_ngram,
        "seed": params.seed,
        "keep": nd.keep,
        "verify": nd.verify,
        "candidate_pairs": pairs,
        "verified_edges": verified,
        "exact_checked_edges": exact_checked,
        "exact_margin": nd.exact_margin,
        "components_method": method,
        "clusters": n_clusters,
        "largest_cluster": int(sizes["largest"] or 0),
        "members": members,
        "removed": members - n_clusters,
        "seconds": {k: round(v, 3) for k, v in timings.items()},
    }
    log.info(
        JOB,
        f"near       {pairs:,} candidate pairs, {verified:,} verified, {n_clusters:,} clusters "
        f"(largest {stats['largest_cluster']:,}) via {method}",
    )
    return clusters, stats
