"""doc_id and exact-content dedup on the narrow frame, marking losers instead of deleting them.

Every step here reads and writes the same bookkeeping columns:
- `_stage`: null while a row is still in the corpus, else the name of the stage that removed it
  (pipelines/base.py); a step only ever looks at rows whose `_stage` is null;
- per stage, the membership of duplicate groups of two or more (`_docid_group`, `_docid_kept`;
  `_exact_cluster`; `_near_cluster`), from which the duplicates table is built.
Survivors are chosen by an explicit ordering (`survivor_order`), never by input order, so the
result does not depend on partitioning.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, Window

from corpusclean import schemas
from corpusclean.pipelines.base import Dedup, KeepRule, StepParams, register
from corpusclean.pipelines.columns import (
    AGAINST,
    DOCID_GROUP,
    DOCID_KEPT,
    EXACT_CLUSTER,
    LIVE,
    NORM_HASH,
    PRIOR_AGAINST,
    RANK,
    ROW_HASH,
    ROW_ID,
    STAGE,
    TEXT_LEN,
)
from corpusclean.pipelines.prior import DOC_ID, HASH, mark_prior_matches


def survivor_order(
    keep: str,
    id_col: str,
    len_col: str = TEXT_LEN,
    hash_col: str = NORM_HASH,
    timestamp_col: str = "timestamp",
    row_hash_col: str | None = ROW_HASH,
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


def _active() -> Column:
    return F.col(STAGE).isNull()


def mark_doc_id_duplicates(
    df: DataFrame, id_col: str, order: list[Column], stage: str = "doc_id"
) -> DataFrame:
    """Keep one row per doc_id among the rows still in the corpus.

    Reads `_stage`, `id_col` and the columns of `order`; adds `_docid_group` (the row's doc_id
    occurs on two or more live rows) and `_docid_kept` (it is the survivor of its doc_id), and
    sets `_stage = stage` on the others.
    """
    by_id = Window.partitionBy(F.col(LIVE), F.col(id_col))
    rank = F.row_number().over(by_id.orderBy(*order))
    size = F.count(F.lit(1)).over(by_id)
    return (
        df.withColumn(LIVE, _active())
        .withColumn(RANK, rank)
        .withColumn(DOCID_GROUP, F.col(LIVE) & (size > 1))
        .withColumn(DOCID_KEPT, F.col(LIVE) & (F.col(RANK) == 1))
        .withColumn(
            STAGE,
            F.when(F.col(LIVE) & (F.col(RANK) > 1), F.lit(stage)).otherwise(F.col(STAGE)),
        )
        .drop(RANK, LIVE)
    )


def mark_exact_duplicates(
    df: DataFrame,
    id_col: str,
    order: list[Column],
    hash_col: str = NORM_HASH,
    stage: str = "exact",
    cluster_col: str = EXACT_CLUSTER,
) -> DataFrame:
    """Keep one row per normalised-text hash among the rows still in the corpus.

    Reads `_stage`, `hash_col`, `id_col` and the columns of `order`; adds `cluster_col` (the
    survivor's doc_id, for every member of a group of two or more; null otherwise) and sets
    `_stage = stage` on the members that are not the survivor.
    """
    by_hash = Window.partitionBy(F.col(LIVE), F.col(hash_col))
    ordered = by_hash.orderBy(*order)
    rank = F.row_number().over(ordered)
    size = F.count(F.lit(1)).over(by_hash)
    first = F.first(F.col(id_col)).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    # A row an earlier step already assigned (a prior document's match) keeps its cluster.
    earlier = F.col(cluster_col) if cluster_col in df.columns else F.lit(None).cast("string")
    return (
        df.withColumn(LIVE, _active())
        .withColumn(RANK, rank)
        .withColumn(cluster_col, F.when(F.col(LIVE) & (size > 1), first).otherwise(earlier))
        .withColumn(
            STAGE,
            F.when(F.col(LIVE) & (F.col(RANK) > 1), F.lit(stage)).otherwise(F.col(STAGE)),
        )
        .drop(RANK, LIVE)
    )


def apply_clusters(
    df: DataFrame, clusters: DataFrame, id_col: str, stage: str, cluster_col: str
) -> DataFrame:
    """Mark the losers of a cluster stage from its cluster assignment.

    Reads `_stage`, `_rid` and `id_col` of `df`, and `clusters` (`_rid`, `cluster_id`: the
    survivor's doc_id, for members of clusters of two or more); adds `cluster_col` and sets
    `_stage = stage` on members that are not their cluster's survivor.
    """
    prior = AGAINST in clusters.columns
    extra = [F.col(AGAINST).alias(PRIOR_AGAINST)] if prior else []
    joined = df.join(
        clusters.select(F.col(ROW_ID), F.col("cluster_id").alias(cluster_col), *extra),
        ROW_ID,
        "left",
    )
    differs = F.col(cluster_col) != F.col(id_col)
    if prior:
        # A cluster that reaches a prior document (clean --against) keeps none of its rows.
        differs = differs | F.col(PRIOR_AGAINST).isNotNull()
    loser = _active() & F.col(cluster_col).isNotNull() & differs
    if not prior:
        return joined.withColumn(STAGE, F.when(loser, F.lit(stage)).otherwise(F.col(STAGE)))
    earlier = F.col(AGAINST) if AGAINST in df.columns else F.lit(None).cast("string")
    # Both from the row's state before this stage marks it.
    return joined.select(
        *[c for c in joined.columns if c not in (STAGE, AGAINST, PRIOR_AGAINST)],
        F.when(loser, F.lit(stage)).otherwise(F.col(STAGE)).alias(STAGE),
        F.when(loser & F.col(PRIOR_AGAINST).isNotNull(), F.col(PRIOR_AGAINST))
        .otherwise(earlier)
        .alias(AGAINST),
    )


def build_duplicates_table(df: DataFrame, stages: Sequence[Dedup]) -> DataFrame:
    """The duplicates table: every member of every duplicate group of two or more.

    Reads each enabled stage's cluster column (`Dedup.duplicates`); returns
    `doc_id, cluster_id, stage, kept` (cluster_id = the survivor's doc_id).
    """
    parts = [s.duplicates(df) for s in stages if s.enabled]
    if not parts:
        return df.sparkSession.createDataFrame([], schemas.DUPLICATES)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


class DedupParams(StepParams):
    """A dedup stage's section: on or off, and its survivor policy."""

    keep: KeepRule = "longest"


@register
class DocIdDedup(Dedup):
    """`doc_id` (section `doc_id_dedup`): one row per doc_id. Reads the id, the text length,
    the content hash, the row hash and the keep column; adds `_docid_group`, `_docid_kept`."""

    name = "doc_id"
    section = "doc_id_dedup"
    Params = DedupParams
    cluster_col = DOCID_GROUP

    def mark(self, df: DataFrame) -> DataFrame:
        if self.priors:
            # A doc_id already published names that document: the new row goes.
            df = mark_prior_matches(
                df, self.priors, self.roles.id, DOC_ID, self.name, None, self.batch_rows
            )
        order = survivor_order(self.keep, self.roles.id, timestamp_col=self.roles.timestamp)
        return mark_doc_id_duplicates(df, self.roles.id, order, self.name)

    def duplicates(self, df: DataFrame) -> DataFrame:
        doc = F.col(self.roles.id)
        against = self.against_column(df)
        listed = F.col(DOCID_GROUP)
        if against is not None:
            listed = listed | against.isNotNull()
        # Every member of a doc_id group shares the survivor's id (a prior one's too).
        return df.filter(listed).select(
            doc.alias(schemas.DOC_ID),
            doc.alias(schemas.CLUSTER_ID),
            F.lit(self.name).alias(schemas.DUP_STAGE),
            F.coalesce(F.col(DOCID_KEPT), F.lit(False)).alias(schemas.KEPT),
            *([] if against is None else [against.alias(schemas.AGAINST)]),
        )


@register
class ExactDedup(Dedup):
    """`exact` (section `exact_dedup`): one row per normalised-text hash (NFKC, case folding,
    whitespace collapsed). Reads `_norm_hash`, the id, the text length and the keep column;
    adds `_exact_cluster`."""

    name = "exact"
    section = "exact_dedup"
    Params = DedupParams
    cluster_col = EXACT_CLUSTER

    def mark(self, df: DataFrame) -> DataFrame:
        if self.priors:
            # The same normalised content already published: the new row goes.
            df = mark_prior_matches(
                df, self.priors, NORM_HASH, HASH, self.name, EXACT_CLUSTER, self.batch_rows
            )
        order = survivor_order(
            self.keep, self.roles.id, timestamp_col=self.roles.timestamp, row_hash_col=None
        )
        return mark_exact_duplicates(df, self.roles.id, order, NORM_HASH, self.name)

    def audit_params(self) -> dict[str, object]:
        return {"exact_dedup": True}
