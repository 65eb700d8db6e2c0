"""doc_id and exact-content dedup on the narrow frame, marking losers instead of deleting them.

Every step here reads and writes the same bookkeeping columns:
- `_stage`: null while a row is still in the corpus, else the stage that removed it
  (`rules`, `doc_id`, `exact`, `near`); a step only ever looks at rows whose `_stage` is null;
- per stage, the membership of duplicate groups of two or more (`_docid_group`, `_docid_kept`;
  `_exact_cluster`; `_near_cluster`), from which the duplicates table is built.
Survivors are chosen by an explicit ordering (`survivor_order`), never by input order, so the
result does not depend on partitioning.
"""

from __future__ import annotations

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from corpusclean.pipelines.columns import (
    DOCID_GROUP,
    DOCID_KEPT,
    EXACT_CLUSTER,
    NEAR_CLUSTER,
    ROW_ID,
    STAGE,
)


def survivor_order(
    keep: str,
    id_col: str,
    len_col: str = "_text_len",
    hash_col: str = "_norm_hash",
    timestamp_col: str = "timestamp",
    row_hash_col: str | None = "_row_hash",
) -> list[Column]:
    """Sort keys that put the survivor of a duplicate group first.

    `keep` is `longest` (most characters), `newest` (latest `timestamp_col`) or a numeric
    column (highest value). Nulls sort last. Ties go to the longer text, then the smaller
    content hash, then the smaller doc_id, then the row hash: a total order on distinct rows.
    """
    if keep == "longest":
        primary = [F.col(len_col).desc_nulls_last()]
    elif keep == "newest":
        primary = [F.col(timestamp_col).desc_nulls_last(), F.col(len_col).desc_nulls_last()]
    else:
        primary = [F.col(keep).desc_nulls_last(), F.col(len_col).desc_nulls_last()]
    ties = [F.col(hash_col).asc_nulls_last(), F.col(id_col).asc_nulls_last()]
    if row_hash_col is not None:
        ties.append(F.col(row_hash_col).asc_nulls_last())
    return primary + ties


def start_stages(df: DataFrame, reason_col: str = "_reject_reason") -> DataFrame:
    """Open the bookkeeping: reads `_reject_reason`, adds `_stage` (`rules` for rejected rows)."""
    return df.withColumn(STAGE, F.when(F.col(reason_col).isNotNull(), F.lit("rules")))


def _active() -> Column:
    return F.col(STAGE).isNull()


def mark_doc_id_duplicates(df: DataFrame, id_col: str, order: list[Column]) -> DataFrame:
    """Keep one row per doc_id among the rows still in the corpus.

    Reads `_stage`, `id_col` and the columns of `order`; adds `_docid_group` (the row's doc_id
    occurs on two or more live rows) and `_docid_kept` (it is the survivor of its doc_id), and
    sets `_stage = 'doc_id'` on the others.
    """
    by_id = Window.partitionBy(_active(), F.col(id_col))
    rank = F.row_number().over(by_id.orderBy(*order))
    size = F.count(F.lit(1)).over(by_id)
    return (
        df.withColumn("__rank", rank)
        .withColumn(DOCID_GROUP, _active() & (size > 1))
        .withColumn(DOCID_KEPT, _active() & (F.col("__rank") == 1))
        .withColumn(
            STAGE,
            F.when(_active() & (F.col("__rank") > 1), F.lit("doc_id")).otherwise(F.col(STAGE)),
        )
        .drop("__rank")
    )


def mark_exact_duplicates(
    df: DataFrame, id_col: str, order: list[Column], hash_col: str = "_norm_hash"
) -> DataFrame:
    """Keep one row per normalised-text hash among the rows still in the corpus.

    Reads `_stage`, `hash_col`, `id_col` and the columns of `order`; adds `_exact_cluster` (the
    survivor's doc_id, for every member of a group of two or more; null otherwise) and sets
    `_stage = 'exact'` on the members that are not the survivor.
    """
    by_hash = Window.partitionBy(_active(), F.col(hash_col))
    ordered = by_hash.orderBy(*order)
    rank = F.row_number().over(ordered)
    size = F.count(F.lit(1)).over(by_hash)
    first = F.first(F.col(id_col)).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        df.withColumn("__rank", rank)
        .withColumn(EXACT_CLUSTER, F.when(_active() & (size > 1), first))
        .withColumn(
            STAGE,
            F.when(_active() & (F.col("__rank") > 1), F.lit("exact")).otherwise(F.col(STAGE)),
        )
        .drop("__rank")
    )


def apply_near_clusters(df: DataFrame, clusters: DataFrame, id_col: str) -> DataFrame:
    """Mark near-duplicate losers from a cluster assignment.

    Reads `_stage`, `_rid` and `id_col` of `df`, and `clusters` (`_rid`, `cluster_id`: the
    survivor's doc_id, for members of clusters of two or more); adds `_near_cluster` and sets
    `_stage = 'near'` on members that are not their cluster's survivor.
    """
    joined = df.join(
        clusters.select(F.col(ROW_ID), F.col("cluster_id").alias(NEAR_CLUSTER)), ROW_ID, "left"
    )
    loser = _active() & F.col(NEAR_CLUSTER).isNotNull() & (F.col(NEAR_CLUSTER) != F.col(id_col))
    return joined.withColumn(STAGE, F.when(loser, F.lit("near")).otherwise(F.col(STAGE)))


def build_duplicates_table(df: DataFrame, id_col: str) -> DataFrame:
    """The duplicates table: every member of every duplicate group of two or more.

    Reads `id_col`, `_docid_group`, `_docid_kept`, `_exact_cluster` and (if present)
    `_near_cluster`; returns `doc_id, cluster_id, stage, kept` (cluster_id = the survivor's
    doc_id; for the doc_id stage every member shares it).
    """
    doc = F.col(id_col)
    parts = [
        df.filter(F.col(DOCID_GROUP)).select(
            doc.alias("doc_id"),
            doc.alias("cluster_id"),
            F.lit("doc_id").alias("stage"),
            F.col(DOCID_KEPT).alias("kept"),
        ),
        df.filter(F.col(EXACT_CLUSTER).isNotNull()).select(
            doc.alias("doc_id"),
            F.col(EXACT_CLUSTER).alias("cluster_id"),
            F.lit("exact").alias("stage"),
            (doc == F.col(EXACT_CLUSTER)).alias("kept"),
        ),
    ]
    if NEAR_CLUSTER in df.columns:
        parts.append(
            df.filter(F.col(NEAR_CLUSTER).isNotNull()).select(
                doc.alias("doc_id"),
                F.col(NEAR_CLUSTER).alias("cluster_id"),
                F.lit("near").alias("stage"),
                (doc == F.col(NEAR_CLUSTER)).alias("kept"),
            )
        )
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def stage_funnel_aggregates() -> list[Column]:
    """Aggregates over the marked frame giving the rows each stage removed (one pass)."""
    return [F.count(F.lit(1)).alias("rows")] + [
        F.sum((F.col(STAGE) == F.lit(s)).cast("long")).alias(s)
        for s in ("rules", "doc_id", "exact", "near")
    ]
