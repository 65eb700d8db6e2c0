"""Driver-side connected components: known graphs and agreement with a plain reference."""

from __future__ import annotations

import numpy as np
import pytest

from corpusclean.pipelines.components import union_find_components


def reference_components(src: list, dst: list) -> dict:
    """Textbook union-find with a Python dict: node -> smallest node of its component."""
    parent: dict = {}

    def find(x: object) -> object:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(src, dst, strict=True):
        ra, rb = find(a), find(b)
        if ra != rb:
            lo, hi = (ra, rb) if ra < rb else (rb, ra)
            parent[hi] = lo
    return {x: find(x) for x in list(parent)}


def as_dict(nodes: np.ndarray, labels: np.ndarray) -> dict:
    return dict(zip(nodes.tolist(), labels.tolist(), strict=True))


def test_chain_of_1000_in_shuffled_order() -> None:
    rng = np.random.default_rng(0)
    ids = rng.permutation(1000).astype(np.int64) + 10
    nodes, labels = union_find_components(ids[1:], ids[:-1])
    assert nodes.tolist() == list(range(10, 1010))
    assert set(labels.tolist()) == {10}


def test_star_two_components_cycle_self_loops_and_duplicates() -> None:
    src = np.array([7, 7, 7, 7, 20, 21, 22, 23, 50, 50, 3, 3], dtype=np.int64)
    dst = np.array([1, 2, 3, 1, 21, 22, 23, 20, 50, 50, 7, 7], dtype=np.int64)
    got = as_dict(*union_find_components(src, dst))
    assert got == {1: 1, 2: 1, 3: 1, 7: 1, 20: 20, 21: 20, 22: 20, 23: 20, 50: 50}


def test_big_star_with_hub_largest() -> None:
    leaves = np.arange(100_000, dtype=np.int64)
    nodes, labels = union_find_components(leaves, np.full_like(leaves, 10**12))
    assert nodes.size == 100_001 and (labels == 0).all()


def test_int64_extremes_and_strings() -> None:
    big = np.array([2**62, -(2**62), 5], dtype=np.int64)
    got = as_dict(*union_find_components(big[:2], big[1:]))
    assert got == {-(2**62): -(2**62), 5: -(2**62), 2**62: -(2**62)}
    s = as_dict(*union_find_components(np.array(["b", "c", "x"]), np.array(["a", "b", "y"])))
    assert s == {"a": "a", "b": "a", "c": "a", "x": "x", "y": "x"}


def test_empty_and_bad_input() -> None:
    nodes, labels = union_find_components(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert nodes.size == 0 and labels.size == 0
    with pytest.raises(ValueError, match="one length"):
        union_find_components(np.zeros(2, np.int64), np.zeros(3, np.int64))


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_reference_on_random_graphs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 3000))
    e = int(rng.integers(1, 2 * n))
    src = rng.integers(0, n, e) * 3 - 1000
    dst = rng.integers(0, n, e) * 3 - 1000
    assert as_dict(*union_find_components(src, dst)) == reference_components(
        src.tolist(), dst.tolist()
    )


def test_a_million_edges() -> None:
    rng = np.random.default_rng(9)
    src = rng.integers(0, 1_500_000, 1_000_000)
    dst = rng.integers(0, 1_500_000, 1_000_000)
    nodes, labels = union_find_components(src, dst)
    # Every label is a member of its own component and the smallest one there.
    assert np.isin(labels, nodes).all()
    roots = labels[np.searchsorted(nodes, labels)]
    assert np.array_equal(roots, labels)
    assert (labels <= nodes).all()
    # Endpoints of every edge share a label.
    index = np.searchsorted(nodes, src), np.searchsorted(nodes, dst)
    assert np.array_equal(labels[index[0]], labels[index[1]])
