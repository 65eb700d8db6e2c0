"""Near-duplicate candidates, verification and survivors on Spark.

LSH band rows are partitioned by bucket (band, key) in one shuffle; each bucket's size and
smallest member are window aggregates over it, buckets of one are dropped, and every other
bucket links its members to that smallest member: k - 1 star edges per bucket of k, never
k^2, so a bucket of 100k boilerplate pages costs 100k edges. Edges are then verified against
the signatures, so a chance band collision cannot chain unrelated documents into one cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
from pydantic import Field, PrivateAttr, model_validator
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from corpusclean.pipelines.arrowbuf import value_buffers
from corpusclean.pipelines.base import (
    Dedup,
    KeepRule,
    StageRun,
    StepParams,
    TextFeature,
    register,
)
from corpusclean.pipelines.columns import (
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
from corpusclean.pipelines.minhash import MinHashParams, band_hashes, optimal_bands, signatures
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


def _exact_batches(params: MinHashParams) -> Any:
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
    edges: DataFrame, texts: DataFrame, text_col: str, params: MinHashParams
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


def _components_on_driver(spark: SparkSession, edges: DataFrame) -> DataFrame:
    """Union-find over the verified edges, for edge counts under the configured cap.

    Only integer pairs cross to the driver (16 bytes an edge), never documents.
    """
    table = edges.select("src", "dst").toArrow()
    nodes, labels = union_find_components(
        table.column("src").to_numpy(), table.column("dst").to_numpy()
    )
    schema = StructType(
        [StructField("node", LongType(), False), StructField("component", LongType(), False)]
    )
    frame = pa.table({"node": pa.array(np.asarray(nodes, np.int64)), "component": pa.array(labels)})
    return spark.createDataFrame(frame.to_pandas(), schema)


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

    def text_features(self) -> list[TextFeature]:
        return [MinHashFeature(self.params.minhash)]

    def find_clusters(
        self, candidates: DataFrame, run: StageRun
    ) -> tuple[DataFrame, dict[str, Any]]:
        nd = self.params
        timer = _Timer()
        edges = run.materialise(
            build_star_edges(explode_band_keys(candidates), nd.max_bucket), "pairs"
        )
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
        if verified <= nd.union_find_max_edges:
            components, method = _components_on_driver(run.spark, edges_ok), "union_find"
        else:
            components = spark_connected_components(edges_ok, max_iterations=nd.max_iterations)
            method = "large_small_star"
        timer.lap("components")
        clusters, sizes = self._survivors(components, candidates, run)
        timer.lap("survivors")
        figures = self._figures(counts, sizes, method)
        figures["seconds"] = timer.seconds
        return clusters, figures

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

    def _survivors(
        self, components: DataFrame, candidates: DataFrame, run: StageRun
    ) -> tuple[DataFrame, Row]:
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
        clusters = run.materialise(
            choose_cluster_survivors(components, docs, roles.id, order), "clusters"
        )
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
        assert sizes is not None
        return clusters, sizes

    def _figures(self, counts: Row, sizes: Row, method: str) -> dict[str, Any]:
        nd, mh = self.params, self.params.minhash
        n_clusters = int(sizes["clusters"] or 0)
        members = int(sizes["members"] or 0)
        return {
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
            "components_method": method,
            "clusters": n_clusters,
            "largest_cluster": int(sizes["largest"] or 0),
            "members": members,
            "removed": members - n_clusters,
        }

    def summary(self, figures: dict[str, Any]) -> str:
        return (
            f"{figures['candidate_pairs']:,} candidate pairs, {figures['verified_edges']:,} "
            f"verified, {figures['clusters']:,} clusters (largest {figures['largest_cluster']:,})"
            f" via {figures['components_method']}"
        )
