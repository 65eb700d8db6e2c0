"""Dedup against what is already published: matches of the live rows in prior dedup indexes.

A prior index (jobs/outputs/dedup_index.py writes and opens them) holds, for every document of an
earlier output, its doc_id, its normalised-content hash, its MinHash signature and its LSH band
keys. A dedup stage given prior indexes removes every live row that duplicates a prior document
(the prior always wins: it may already be in a training run) and records the prior's doc_id and
the index's name; rows that match nothing prior are deduplicated among themselves as before.

Prior documents take part in near-dedup's graph as nodes with negative ids (`PriorIndex.node`), so a
cluster that reaches a prior document through new ones is resolved to that prior, as a clean of
both batches together would resolve it, up to the survivor inside the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
from pyspark.sql import Column, DataFrame, SparkSession

from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.columns import (
    AGAINST,
    BANDS,
    PRIOR_AGAINST,
    PRIOR_ID,
    PRIOR_KEY,
    ROW_ID,
    STAGE,
)

# Prior nodes: -1 - (index order << 48 | ix). An index's `ix` is its run's row id, far below
# 2^48 (Spark's monotonically increasing ids are partition << 33 | row).
_ORDER_SHIFT = 48
# The columns of an index's docs/ and bands/ folders (jobs/outputs/dedup_index.py).
IX, DOC_ID, HASH, SIG, BAND, KEY = "ix", "doc_id", "hash", "sig", "band", "key"
# The text column of an index's texts frame (`PriorIndex.texts`: doc_id, text), whatever the
# indexed corpus called it.
TEXT = "text"


@dataclass(frozen=True)
class PriorIndex:
    """One prior index as the stages see it: frames, no paths.

    `docs`: `ix, doc_id, hash, sig`; `bands`: `band, key, ix`; `texts`: `doc_id, text` of the
    indexed documents (None when the index cannot reach them), read only for the few candidate
    pairs whose estimate is too close to the threshold to trust.
    """

    name: str
    order: int
    docs: DataFrame
    bands: DataFrame
    texts: DataFrame | None = None
    near: bool = True  # whether it has signatures and band keys

    def node(self, ix: Column) -> Column:
        """The near-dedup graph's node id of the prior document `ix` (negative)."""
        return F.lit(-1) - (F.lit(self.order).cast("long") * F.lit(1 << _ORDER_SHIFT) + ix)


# Up to this many rows in the batch, its keys (doc_ids, content hashes) are broadcast to the
# scan of an index's docs/, and the matches back to the batch: the index's column is read once
# and nothing is shuffled. Left to Spark, the semi-join of a 100k-row batch with a 780k-document
# index shuffled the whole index (its size is known, the batch's distinct keys' is not).
# A million doc_ids of ~60 bytes is a ~60 MB broadcast.
BROADCAST_ROWS = 1_000_000


def _first_match(
    priors: Sequence[PriorIndex], key: str, alias: str, wanted: DataFrame, broadcast: bool
) -> DataFrame:
    """Per value of the docs' column `key` that `wanted` (`alias`) holds, the prior document
    it names first: the earliest index in `--against` order, then the smallest doc_id
    (deterministic for repeated values). Returns `alias, __prior_id, __against`.

    The index's rows are first narrowed to the batch's values by a semi-join; with
    `broadcast`, on the batch's values sent to every task (repeats do not matter to a
    semi-join), so the index's column is read once and never shuffled."""
    parts = [
        p.docs.select(
            F.col(key).alias(alias),
            F.struct(
                F.lit(p.order).alias("o"), F.col(DOC_ID).alias("id"), F.lit(p.name).alias("n")
            ).alias("m"),
        )
        for p in priors
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    keys = F.broadcast(wanted) if broadcast else wanted.distinct()
    return (
        union.join(keys, alias, "left_semi")
        .groupBy(alias)
        .agg(F.min("m").alias("m"))
        .select(alias, F.col("m.id").alias(PRIOR_ID), F.col("m.n").alias(PRIOR_AGAINST))
    )


def mark_prior_matches(
    df: DataFrame,
    priors: Sequence[PriorIndex],
    on: str,
    key: str,
    stage: str,
    cluster_col: str | None,
    batch_rows: int | None = None,
) -> DataFrame:
    """Remove the live rows whose column `on` equals a prior document's `key` (doc_id, hash).

    Reads `_stage`, `on`; sets `_stage = stage` and `_against` (the index's name) on the live
    rows that match, and, with `cluster_col`, the matching prior's doc_id there. Rows that
    match nothing are left as they are for the stage's own dedup. `batch_rows`: the rows of
    `df` (removed ones included: every row's key is asked for) when known; up to
    `BROADCAST_ROWS` its keys and matches are broadcast.
    """
    alias = PRIOR_KEY
    broadcast = batch_rows is not None and batch_rows <= BROADCAST_ROWS
    # Every row's key, not only the live rows': the live ones are those an earlier stage's
    # window left, and asking for them would compute that window a second time for the keys
    # alone. A removed row's match is never used (`hit` below).
    wanted = df.filter(F.col(on).isNotNull()).select(F.col(on).alias(alias))
    matches = _first_match(priors, key, alias, wanted, broadcast)
    if broadcast:
        matches = F.broadcast(matches)  # at most one row per key of the batch
    joined = df.join(matches, df[on] == matches[alias], "left").drop(alias)
    hit = F.col(STAGE).isNull() & F.col(PRIOR_ID).isNotNull()
    against = F.col(AGAINST) if AGAINST in df.columns else F.lit(None).cast("string")
    out = joined.withColumn(AGAINST, F.when(hit, F.col(PRIOR_AGAINST)).otherwise(against))
    if cluster_col is not None:
        current = F.col(cluster_col) if cluster_col in df.columns else F.lit(None).cast("string")
        out = out.withColumn(cluster_col, F.when(hit, F.col(PRIOR_ID)).otherwise(current))
    return out.withColumn(STAGE, F.when(hit, F.lit(stage)).otherwise(F.col(STAGE))).drop(
        PRIOR_ID, PRIOR_AGAINST
    )


def prior_candidate_pairs(
    candidates: DataFrame, prior: PriorIndex, broadcast_new: bool
) -> DataFrame:
    """Pairs of a live row and a prior document that share an LSH bucket.

    Reads `_rid, _bands` of `candidates` and the index's `band, key, ix`; returns distinct
    `src` (the row id), `dst` (the prior's node id, negative). Every pair is kept, not only a
    star to one member: the prior side of a bucket is usually one document, and a new document
    must meet each prior it may duplicate, which a star through another prior could miss.
    `broadcast_new`: the live rows' band keys are small enough to send to every task, so the
    index's band keys are read once, with no shuffle.
    """
    new = candidates.filter(F.col(BANDS).isNotNull()).select(
        F.col(ROW_ID), F.posexplode(F.col(BANDS)).alias(BAND, KEY)
    )
    if broadcast_new:
        new = F.broadcast(new)
    old = prior.bands.select(F.col(BAND).cast("int").alias(BAND), F.col(KEY), F.col(IX))
    return (
        old.join(new, [BAND, KEY])
        .select(F.col(ROW_ID).alias("src"), prior.node(F.col(IX)).alias("dst"))
        .distinct()
    )


# Up to this many keys, a lookup is one `IN` pushed down to Parquet; above it, a broadcast
# semi-join over a scan of the column: past a few hundred keys, many pushed-down lookups read
# more than one scan (docs/figures.md), and Spark builds the pushed `IN` as a chain of ORs,
# which overflows the JVM stack at a few thousand keys.
PUSHED_KEYS = 200


@contextmanager
def pushed_in(spark: SparkSession, values: int) -> Iterator[None]:
    """Let an `IN` of `values` keys (at most `PUSHED_KEYS`) reach Parquet, for the actions
    run inside.

    Spark pushes an `IN` of at most `spark.sql.parquet.pushdown.inFilterThreshold` (10)
    values down to Parquet and turns a longer one into a min..max range, which prunes nothing
    for scattered keys. The threshold is read when a scan is executed, so it is raised around
    the action. A folder sorted by the column within its files (an index's docs/ by ix, a
    clean output's data/ by doc_id) then has only the pages holding the keys read, through
    Parquet's page index, not every text or signature of the old corpus.
    """
    key = "spark.sql.parquet.pushdown.inFilterThreshold"
    before = spark.conf.get(key)
    spark.conf.set(key, str(min(max(10, values), PUSHED_KEYS)))
    try:
        yield
    finally:
        spark.conf.set(key, before)


def lookup(spark: SparkSession, df: DataFrame, col: str, values: Sequence[Any]) -> DataFrame:
    """The rows of `df` whose `col` is one of `values` (run the action under `pushed_in`).

    A few keys: one `IN`, pushed down. Many: a semi-join on a broadcast frame of them, made
    from Arrow. (A frame of Python rows goes through a Python worker, which costs orders of
    magnitude more executor time than handing Spark an Arrow table.)"""
    if len(values) <= PUSHED_KEYS:
        return df.filter(F.col(col).isin(list(values)))
    dtype = dict(df.dtypes)[col]
    keys = spark.createDataFrame(pa.table({col: pa.array(list(values))}))
    return df.join(F.broadcast(keys.select(F.col(col).cast(dtype).alias(col))), col, "left_semi")


def prior_signature_matrix(
    spark: SparkSession, prior: PriorIndex, nodes: np.ndarray, num_perm: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The signatures and doc_ids of prior nodes (sorted distinct negative ids) on the driver.

    Returns (nodes, (len(nodes), num_perm) uint32 signatures, which had one, their doc_ids).
    One job: the index's docs/ filtered on the wanted `ix` (`lookup`; docs/ is sorted by ix,
    so a pushed-down lookup reads only the pages holding them)."""
    sig = np.zeros((nodes.size, num_perm), dtype="<u4")
    found = np.zeros(nodes.size, dtype=bool)
    ids = np.empty(nodes.size, dtype=object)
    if not nodes.size:
        return nodes, sig, found, ids
    ix = sorted(int(i) for i in (-1 - nodes) - (prior.order << _ORDER_SHIFT))
    wanted = lookup(spark, prior.docs.filter(F.col(SIG).isNotNull()), IX, ix)
    with pushed_in(spark, len(ix)):
        table = wanted.select(IX, DOC_ID, SIG).toArrow()
    got = -1 - ((prior.order << _ORDER_SHIFT) + table.column(IX).to_numpy().astype(np.int64))
    at = np.searchsorted(nodes, got)
    flat = table.column(SIG).combine_chunks() if table.num_rows else None
    if flat is not None:
        _, data = value_buffers(flat, relative=True)
        sig[at] = data.view("<u4").reshape(len(flat), num_perm)
        found[at] = True
        ids[at] = table.column(DOC_ID).to_numpy(zero_copy_only=False)
    return nodes, sig, found, ids


def prior_members(priors: Sequence[PriorIndex], nodes: DataFrame) -> DataFrame:
    """Who each prior node is: `node, doc_id, order, against` for the prior nodes among
    `nodes` (`node`, negative ids only)."""
    parts = [
        p.docs.select(
            p.node(F.col(IX)).alias("node"),
            F.col(DOC_ID).alias("__prior_doc"),
            F.lit(p.order).alias("__prior_order"),
            F.lit(p.name).alias(AGAINST),
        )
        for p in priors
    ]
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return union.join(nodes.filter(F.col("node") < 0), "node", "left_semi")
