"""The driver's star-edge builder against a brute-force reading of `build_star_edges`."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from corpusclean.pipelines.near_dedup import pair_codes, star_edges_np


def _reference(rids: np.ndarray, keys: np.ndarray, max_bucket: int) -> list[tuple[int, int]]:
    """Buckets are (band, key); each of two or more members (and at most `max_bucket`, if
    set) links every member but its smallest to the smallest; pairs are distinct."""
    buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
    for rid, row in zip(rids.tolist(), keys.tolist(), strict=True):
        for band, key in enumerate(row):
            buckets[band, key].append(rid)
    pairs = set()
    for members in buckets.values():
        if len(members) < 2 or (max_bucket > 0 and len(members) > max_bucket):
            continue
        hub = min(members)
        pairs.update((m, hub) for m in members if m != hub)
    return sorted(pairs)


def _edges(rids: np.ndarray, keys: np.ndarray, max_bucket: int = 0) -> list[tuple[int, int]]:
    src, dst = star_edges_np(rids, keys, max_bucket)
    assert src.dtype == dst.dtype == np.int64
    return list(zip(src.tolist(), dst.tolist(), strict=True))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_bucket", [0, 2, 5])
def test_random_inputs_match_the_reference(seed: int, max_bucket: int) -> None:
    rng = np.random.default_rng(seed)
    n, bands = int(rng.integers(1, 300)), int(rng.integers(1, 9))
    # Row ids in no order and far apart; few distinct keys, so buckets of every size occur.
    rids = rng.choice(10**12, size=n, replace=False).astype(np.int64)
    keys = rng.integers(-20, 20, size=(n, bands)).astype(np.int64)
    got = _edges(rids, keys, max_bucket)
    # Sorted by src, then dst, distinct, and each src above its dst (dst is the hub).
    assert got == _reference(rids, keys, max_bucket)
    assert all(s > d for s, d in got)


def test_a_pair_sharing_several_bands_is_one_edge() -> None:
    rids = np.array([30, 10, 20])
    keys = np.array([[1, 2, 3], [1, 2, 9], [7, 8, 3]])
    # 30-10 share bands 0 and 1; 30-20 share band 2 (hub 20).
    assert _edges(rids, keys) == [(30, 10), (30, 20)]


def test_max_bucket_skips_larger_buckets_only() -> None:
    rids = np.arange(100, 112)
    keys = np.zeros((12, 2), dtype=np.int64)
    keys[:, 1] = np.repeat([5, 6], [3, 9])  # band 0: one bucket of 12; band 1: 3 and 9
    assert _edges(rids, keys, max_bucket=3) == [(101, 100), (102, 100)]
    # Band 1's bucket of 9 links 104..111 to 103; band 0's bucket of 12 all to 100.
    assert len(_edges(rids, keys, max_bucket=9)) == 2 + 8
    assert len(_edges(rids, keys, max_bucket=12)) == 11 + 8
    assert _edges(rids, keys, max_bucket=0) == _edges(rids, keys, max_bucket=12)


def test_no_rows_or_no_shared_keys_give_no_edges() -> None:
    assert _edges(np.zeros(0, np.int64), np.zeros((0, 4), np.int64)) == []
    assert _edges(np.array([1, 2, 3]), np.arange(9).reshape(3, 3)) == []


def test_pair_codes_keep_the_order_of_pairs() -> None:
    src, dst = star_edges_np(np.arange(50) * 7, np.arange(150).reshape(50, 3) % 4)
    nodes = np.unique(np.concatenate([src, dst]))
    codes = pair_codes(src, dst, nodes)
    assert np.all(np.diff(codes) > 0)
    picked = np.array([0, 3, len(src) - 1])
    assert np.searchsorted(codes, pair_codes(src[picked], dst[picked], nodes)).tolist() == [
        0,
        3,
        len(src) - 1,
    ]
