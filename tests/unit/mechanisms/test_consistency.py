"""Consistent hierarchical counts (``dpsense.mechanisms.consistency``): exact, total, and the least-squares optimum.

* the two-pass weighted least squares equals a dense solve of the constrained problem (KKT system);
* over random hierarchies and any noisy input (negative parents, zeros, NaN, ±inf, huge values, one
  leaf): every child level sums exactly to its parent level, every count is an integer >= 0, the
  shapes are the tree's (Hypothesis);
* a projection never moves a child by a whole unit from its real share, and 10^5 leaves run fast.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core.errors import UsageError
from dpsense.mechanisms.consistency import (
    Tree,
    consistent_counts,
    nonnegative_integer_counts,
    tree_of_leaves,
    weighted_least_squares,
)


def _random_leaves(rng: np.random.Generator, depth: int, fanout: int) -> list[tuple[Any, ...]]:
    leaves: list[tuple[Any, ...]] = [()]
    for level in range(depth):
        leaves = [
            (*p, f"{level}.{len(p)}.{'/'.join(map(str, p))}.{k}")
            for p in leaves
            for k in range(rng.integers(1, fanout + 1))
        ]
    return leaves


def _dense_wls(tree: Tree, y: list[np.ndarray], var: list[float]) -> np.ndarray:
    """min Σ (x − y)²/σ² s.t. each parent = Σ children, solved by its KKT system."""
    sizes = tree.sizes
    offset = np.cumsum([0, *sizes])
    n = int(offset[-1])
    rows = []
    for level in range(1, tree.depth + 1):
        for parent in range(sizes[level - 1]):
            row = np.zeros(n)
            row[offset[level - 1] + parent] = -1
            row[offset[level] + np.flatnonzero(tree.parents[level - 1] == parent)] = 1
            rows.append(row)
    a = np.array(rows)
    w = np.diag(np.concatenate([np.full(s, 1 / v) for s, v in zip(sizes, var, strict=True)]))
    k = np.block([[2 * w, a.T], [a, np.zeros((len(rows), len(rows)))]])
    rhs = np.concatenate([2 * w @ np.concatenate(y), np.zeros(len(rows))])
    return np.linalg.solve(k, rhs)[:n]


@pytest.mark.parametrize("seed", range(8))
def test_the_two_pass_estimate_is_the_weighted_least_squares_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tree, _ = tree_of_leaves(_random_leaves(rng, int(rng.integers(1, 4)), 4))
    y = [rng.normal(10, 8, size=s) for s in tree.sizes]
    var = [float(v) for v in rng.uniform(0.2, 5, size=tree.depth + 1)]
    x = weighted_least_squares(tree, y, var)
    assert np.allclose(np.concatenate(x), _dense_wls(tree, y, var), atol=1e-9)
    for level in range(1, tree.depth + 1):  # consistent as real numbers already
        sums = np.bincount(tree.parents[level - 1], weights=x[level], minlength=tree.sizes[level - 1])
        assert np.allclose(sums, x[level - 1])


def _assert_consistent(tree: Tree, counts: list[np.ndarray]) -> None:
    assert [c.size for c in counts] == list(tree.sizes)
    for level, c in enumerate(counts):
        assert c.dtype == np.int64 and (c >= 0).all(), level
    for level in range(1, tree.depth + 1):
        sums = np.bincount(tree.parents[level - 1], weights=counts[level], minlength=tree.sizes[level - 1])
        assert np.array_equal(sums.astype(np.int64), counts[level - 1]), level


_NOISY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-1e6, 1e6),
    st.integers(-50, 50).map(float),
    st.just(0.0),
)


@settings(max_examples=200)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    seed=st.integers(0, 2**32 - 1),
    values=st.lists(_NOISY, min_size=200, max_size=200),
    variances=st.lists(st.floats(1e-6, 1e6), min_size=4, max_size=4),
)
def test_any_noisy_input_gives_non_negative_integers_that_add_up(
    shape: list[int], seed: int, values: list[float], variances: list[float]
) -> None:
    rng = np.random.default_rng(seed)
    leaves: list[tuple[Any, ...]] = [()]
    for level, fanout in enumerate(shape):
        leaves = [(*p, (level, p, k)) for p in leaves for k in range(int(rng.integers(1, fanout + 1)))]
    tree, keys = tree_of_leaves(leaves)
    pool = np.array(values, dtype=np.float64)
    noisy = [pool[rng.integers(0, pool.size, size=s)] for s in tree.sizes]
    counts = consistent_counts(tree, noisy, variances[: tree.depth + 1])
    _assert_consistent(tree, counts)
    assert [len(k) for k in keys] == list(tree.sizes)


@pytest.mark.parametrize(
    "noisy",
    [
        [[-40.0], [-3.0, -5.0], [-1.0, -2.0, -3.0]],  # every count negative
        [[0.0], [0.0, 0.0], [0.0, 0.0, 0.0]],  # all zero
        [[7.4], [1e300, -1e300], [np.nan, np.inf, -np.inf]],  # far outside
        [[3.0], [0.5, 0.5], [0.5, 0.5, 0.5]],  # ties in the rounding
    ],
)
def test_degenerate_inputs(noisy: list[list[float]]) -> None:
    tree, _ = tree_of_leaves([("a", "a1"), ("a", "a2"), ("b", "b1")])
    _assert_consistent(tree, consistent_counts(tree, noisy, [1.0, 1.0, 1.0]))


def test_a_single_leaf_and_a_single_level() -> None:
    tree, keys = tree_of_leaves([("only",)])
    assert keys == [[()], [("only",)]]
    counts = consistent_counts(tree, [[5.2], [4.1]], [1.0, 1.0])
    assert [c.tolist() for c in counts] == [[5], [5]]  # the weighted mean 4.65, rounded, then the whole total


def test_the_rounding_stays_within_one_unit_of_the_projected_share() -> None:
    tree, _ = tree_of_leaves([("r", f"d{i}") for i in range(6)])
    x = [np.array([10.0]), np.array([10.0]), np.array([0.4, 1.6, 2.5, 2.5, 1.0, 2.0])]
    counts = nonnegative_integer_counts(tree, x)
    assert counts[1].tolist() == [10]
    assert np.all(np.abs(counts[2] - x[2]) < 1)
    assert counts[2].sum() == 10


def test_a_hundred_thousand_leaves_in_a_second() -> None:
    leaves = [(a, (a, b), (a, b, c)) for a in range(10) for b in range(100) for c in range(100)]
    tree, _ = tree_of_leaves(leaves)
    rng = np.random.default_rng(3)
    noisy = [rng.laplace(5, 20, size=s) for s in tree.sizes]
    start = time.perf_counter()
    counts = consistent_counts(tree, noisy, [1.0, 1.0, 1.0, 1.0])
    assert time.perf_counter() - start < 5  # ~0.05 s measured; generous under load
    _assert_consistent(tree, counts)


def test_trees_are_built_from_public_leaves_only() -> None:
    with pytest.raises(UsageError, match="at least one leaf"):
        tree_of_leaves([])
    with pytest.raises(UsageError, match="one value per level"):
        tree_of_leaves([("a", "b"), ("c",)])
    with pytest.raises(UsageError, match="distinct"):
        tree_of_leaves([("a", "b"), ("a", "b")])
    with pytest.raises(UsageError, match="needs a child"):
        Tree((np.array([0, 0]), np.array([0, 0])))
    tree, keys = tree_of_leaves([("n", "n1"), ("n", "n2"), ("s", "s1")])
    assert tree.sizes == (1, 2, 3) and keys[1] == [("n",), ("s",)]
    with pytest.raises(UsageError, match="one noisy count per node"):
        consistent_counts(tree, [[1.0], [1.0], [1.0]], [1, 1, 1])
