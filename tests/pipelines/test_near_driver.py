"""Near dedup's driver path against its Spark path on the same candidates: the same edges,
estimates, clusters and figures, whichever path finds the candidates and estimates them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
import pytest
from pyspark.sql import DataFrame, SparkSession

from corpusclean.pipelines import near_dedup
from corpusclean.pipelines.base import Roles
from corpusclean.pipelines.columns import BANDS, MINHASH, NORM_HASH, ROW_ID, TEXT_LEN
from corpusclean.pipelines.dedup import survivor_order
from corpusclean.pipelines.near_dedup import (
    MinHashFeature,
    NearDedup,
    NearDedupParams,
    build_star_edges,
    choose_cluster_survivors,
    driver_band_keys,
    driver_edge_jaccard,
    driver_keys_and_signatures,
    driver_signatures,
    estimate_edge_jaccard,
    explode_band_keys,
    signatures_of,
    star_edges_np,
)

pytestmark = pytest.mark.spark

# Figures that name the path or time it; every other figure must agree between the paths.
PATH_FIGURES = {"candidates_method", "components_method", "seconds", "seconds_note"}


def _texts() -> list[str]:
    """Near-duplicate groups (1, 2, 3 and 8 of 80 words replaced: estimates on both sides of
    0.8, several within the exact re-check's margin), 12 copies of one boilerplate text (a
    bucket of 12 in every band), documents with no word (no shingle: null bands) and unrelated
    documents."""
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(400)]
    out: list[str] = []
    for _ in range(12):
        base = list(rng.choice(vocab, 80))
        out.append(" ".join(base))
        for k in (1, 2, 3, 8):
            doc = list(base)
            for at in rng.choice(80, k, replace=False):
                doc[at] = f"x{rng.integers(10**6)}"
            out.append(" ".join(doc))
    out += ["the same boilerplate footer text on every page of this site, " * 3] * 12
    out += ["", "... --- !!!", "?"]
    out += [" ".join(rng.choice(vocab, 60)) for _ in range(30)]
    return out


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> tuple[DataFrame, DataFrame, int]:
    texts = _texts()
    n = len(texts)
    # Row ids far apart and in no order, as a partitioned read gives them.
    rids = np.random.default_rng(1).permutation(n).astype(np.int64) * 1_000_003 + 17
    feats = MinHashFeature(NearDedupParams().minhash).compute(pa.array(texts))
    assert feats[BANDS].null_count == 3
    table = pa.table(
        {
            ROW_ID: rids,
            "doc_id": [f"d{i:03d}" for i in range(n)],
            TEXT_LEN: [len(t) for t in texts],
            NORM_HASH: [int(hashlib.sha1(t.encode()).hexdigest()[:15], 16) for t in texts],
            MINHASH: feats[MINHASH],
            BANDS: feats[BANDS],
        }
    )
    candidates = spark.createDataFrame(table).repartition(3)
    docs = spark.createDataFrame(pa.table({ROW_ID: rids, "text": texts})).repartition(2)
    return candidates, docs, n


class _Run:
    """The job's side of a cluster stage (jobs/clean.py `_StageRun`), writing under `work`."""

    def __init__(self, spark: SparkSession, work: Path, texts: DataFrame, rows_in: int) -> None:
        self.spark, self.work, self._texts, self.rows_in = spark, work, texts, rows_in

    def materialise(self, df: DataFrame, name: str) -> DataFrame:
        df.write.mode("overwrite").parquet(str(self.work / name))
        return self.spark.read.parquet(str(self.work / name))

    def texts(self) -> DataFrame:
        return self._texts


def _clusters(
    spark: SparkSession, frames: Any, work: Path, **params: Any
) -> tuple[list[tuple[int, str]], dict[str, Any]]:
    candidates, docs, n = frames
    stage = NearDedup(NearDedupParams(**params), Roles())
    clusters, figures = stage.find_clusters(candidates, _Run(spark, work, docs, n))
    rows = sorted((r[ROW_ID], r["cluster_id"]) for r in clusters.collect())
    return rows, figures


def test_star_edges_and_estimates_match_the_spark_steps(spark, frames) -> None:
    candidates, _, _ = frames
    nd = NearDedupParams()
    for max_bucket in (0, 10):
        src, dst = star_edges_np(*driver_band_keys(candidates, nd.minhash.bands), max_bucket)
        pairs = build_star_edges(explode_band_keys(candidates), max_bucket)
        assert sorted((r["src"], r["dst"]) for r in pairs.collect()) == list(
            zip(src.tolist(), dst.tolist(), strict=True)
        )
    nodes = np.unique(np.concatenate([src, dst]))
    sig, found = driver_signatures(spark, candidates, nodes, nd.num_perm)
    assert found.all()
    # The one collect of keys and every signature gives the same keys and signatures.
    rids, keys, every, has, _ = driver_keys_and_signatures(
        candidates, nd.minhash.bands, nd.num_perm
    )
    by_rid = np.argsort(rids)
    alone = driver_band_keys(candidates, nd.minhash.bands)
    again = np.argsort(alone[0])
    assert np.array_equal(rids[by_rid], alone[0][again])
    assert np.array_equal(keys[by_rid], alone[1][again])
    got_sig, got_found = signatures_of(nodes, rids, every, has)
    assert np.array_equal(got_sig, sig) and np.array_equal(got_found, found)
    keep, est = driver_edge_jaccard(src, dst, nodes, sig, found)
    assert keep.all()
    spark_est = {
        (r["src"], r["dst"]): r["jaccard"]
        for r in estimate_edge_jaccard(pairs, candidates).collect()
    }
    # The same floats, not merely close ones.
    ends = zip(src.tolist(), dst.tolist(), strict=True)
    assert spark_est == dict(zip(ends, est.tolist(), strict=True))
    assert len(set(est.tolist())) > 5


@pytest.mark.parametrize(
    "params",
    [{}, {"max_bucket": 10}, {"verify": False}, {"exact_margin": 0.0, "max_bucket": 12}],
    ids=["defaults", "max_bucket", "no_verify", "no_exact"],
)
def test_driver_and_spark_paths_give_the_same_clusters_and_figures(
    spark, frames, tmp_path: Path, params: dict[str, Any]
) -> None:
    _, _, n = frames
    bands = NearDedupParams().minhash.bands
    driver = _clusters(spark, frames, tmp_path / "driver", **params)
    on_spark = _clusters(spark, frames, tmp_path / "spark", driver_max_keys=0, **params)
    # Band keys fit the driver, the endpoints' signatures do not: Spark estimates its edges.
    mixed = _clusters(spark, frames, tmp_path / "mixed", driver_max_keys=n * bands, **params)
    assert driver[1]["candidates_method"] == "driver"
    assert on_spark[1]["candidates_method"] == "spark"
    assert driver[1]["components_method"] == "union_find"
    same = {k: v for k, v in driver[1].items() if k not in PATH_FIGURES}
    assert same == {k: v for k, v in on_spark[1].items() if k not in PATH_FIGURES}
    assert driver[0] == on_spark[0]
    # Only the Spark estimates write the endpoints' signatures.
    assert not (tmp_path / "driver" / "signatures").exists()
    if params.get("verify", True):
        assert mixed[1]["candidates_method"] == "driver"
        assert (tmp_path / "mixed" / "signatures").exists()
        assert (mixed[0], same) == (
            driver[0],
            {k: v for k, v in mixed[1].items() if k not in PATH_FIGURES},
        )
    assert same["clusters"] >= 12 and same["candidate_pairs"] > same["clusters"]
    if params == {}:
        assert same["exact_checked_edges"] > 0
        assert same["verified_edges"] < same["candidate_pairs"]
    # The boilerplate copies cluster unless their buckets (12 members) are skipped.
    assert (same["largest_cluster"] == 12) == (params.get("max_bucket", 0) in (0, 12))


def test_signatures_fetched_after_the_keys_give_the_same_clusters(
    spark, frames, tmp_path: Path, monkeypatch
) -> None:
    """Above `SIGNATURES_WITH_KEYS` the edges' endpoints' signatures are a job of their own."""
    together = _clusters(spark, frames, tmp_path / "together")
    monkeypatch.setattr(near_dedup, "SIGNATURES_WITH_KEYS", 0)
    apart = _clusters(spark, frames, tmp_path / "apart")
    assert apart[0] == together[0]
    assert {k: v for k, v in apart[1].items() if k not in PATH_FIGURES} == {
        k: v for k, v in together[1].items() if k not in PATH_FIGURES
    }


def test_a_row_with_bands_but_no_signature_is_not_found(spark) -> None:
    nd = NearDedupParams()
    feats = MinHashFeature(nd.minhash).compute(pa.array(["a b c d e f g", "h i j k l m n"]))
    sigs = feats[MINHASH].to_pylist()
    table = pa.table(
        {
            ROW_ID: pa.array([9, 4], pa.int64()),
            MINHASH: pa.array([sigs[0], None], feats[MINHASH].type),
            BANDS: feats[BANDS],
        }
    )
    candidates = spark.createDataFrame(table)
    rids, _, every, has, _ = driver_keys_and_signatures(candidates, nd.minhash.bands, nd.num_perm)
    nodes = np.array([4, 9], np.int64)
    sig, found = signatures_of(nodes, rids, every, has)
    want_sig, want_found = driver_signatures(spark, candidates, nodes, nd.num_perm)
    assert found.tolist() == want_found.tolist() == [False, True]
    assert np.array_equal(sig[1], want_sig[1])


def test_components_on_spark_when_verified_edges_exceed_the_cap(spark, frames, tmp_path) -> None:
    driver = _clusters(spark, frames, tmp_path / "driver")
    capped = _clusters(spark, frames, tmp_path / "capped", union_find_max_edges=3)
    assert capped[1]["components_method"] == "large_small_star"
    assert capped[1]["candidates_method"] == "driver"
    assert capped[0] == driver[0]


def _window_survivors(
    spark: SparkSession, nodes: list[int], labels: list[int], members: pa.Table, id_col: str
) -> list[tuple[int, Any]]:
    components = spark.createDataFrame(
        pa.table({"node": pa.array(nodes, pa.int64()), "component": pa.array(labels, pa.int64())})
    )
    order = survivor_order("longest", id_col, row_hash_col=None)
    chosen = choose_cluster_survivors(components, spark.createDataFrame(members), id_col, order)
    return sorted((r[ROW_ID], r["cluster_id"]) for r in chosen.collect())


@pytest.mark.parametrize("ids", ["strings", "integers"])
def test_survivors_chosen_on_the_driver_are_the_windows_choice(spark, ids: str) -> None:
    """Ties on the length go to the smaller hash (unsigned bytes), then the smaller doc_id
    (code point order: Spark's UTF-8 byte order); nulls sort last on each; a singleton
    component has no cluster, and a node with no row is no member."""
    names = ["b", "a", "é", "z", "ａ", "😀", "Z", None, "m", "k", "q", "r", "s"]
    doc_ids: list[Any] = (
        names if ids == "strings" else [None if n is None else 900 - i for i, n in enumerate(names)]
    )
    # rid:          1     2     3     4     5     6       7     8     9     10    11    12    13
    lengths = [50, 50, 50, None, 49, 50, 50, 50, 7, 7, None, None, 3]
    hashes = [b"\x80", b"\x80", b"\x7f", b"\x00", b"\x00", None, b"\x7f", b"\x7f", b"a", b"a"]
    hashes += [b"b", b"a", b"c"]
    rids = list(range(1, 14))
    members = pa.table(
        {
            ROW_ID: pa.array(rids, pa.int64()),
            "doc_id": pa.array(doc_ids, pa.string() if ids == "strings" else pa.int64()),
            TEXT_LEN: pa.array(lengths, pa.int64()),
            NORM_HASH: pa.array(hashes, pa.binary()),
        }
    )
    # Components: {1..8} (length ties, hash ties with unsigned bytes, a null id, a null
    # length, a null hash), {9, 10} (a full tie but the id), {11, 12} (null lengths), {13}
    # alone, and {13, 99}: 99 has no row.
    nodes = [*range(1, 14), 99]
    labels = [1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 11, 11, 13, 13]
    got_rids, got_ids = near_dedup.driver_longest_survivors(
        np.array(nodes, np.int64), np.array(labels, np.int64), members, "doc_id"
    )
    want = _window_survivors(spark, nodes, labels, members, "doc_id")
    assert list(zip(got_rids.tolist(), got_ids, strict=True)) == want
    # Each component's survivor is the one the rules above name.
    by_rid = dict(want)
    if ids == "strings":
        assert by_rid[1] == "Z" and by_rid[9] == "k" and by_rid[11] == "r" and by_rid[13] == "s"
    assert [r for r, _ in want] == [*range(1, 14)]


def test_the_driver_chooses_survivors_only_where_its_order_is_sparks(
    spark, frames, tmp_path: Path
) -> None:
    """The driver path chooses the survivors itself (no `clusters` frame written) for keep
    `longest`, with the Spark path's clusters; another keep rule, or an id type whose order
    Python does not share with Spark, is left to the window."""
    driver = _clusters(spark, frames, tmp_path / "driver")
    assert not (tmp_path / "driver" / "clusters").exists()
    on_spark = _clusters(spark, frames, tmp_path / "spark", driver_max_keys=0)
    assert (tmp_path / "spark" / "clusters").exists()
    assert driver[0] == on_spark[0]
    candidates = frames[0]
    newest = NearDedup(NearDedupParams(keep="newest"), Roles())
    assert newest._driver_order_columns(candidates) is None
    float_ids = candidates.withColumn("doc_id", F.col(ROW_ID).cast("double"))
    assert NearDedup(NearDedupParams(), Roles())._driver_order_columns(float_ids) is None
