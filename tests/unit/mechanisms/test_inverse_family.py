"""The family-based inverse-sensitivity mechanism: 1-Lipschitz path-length lower bound, exact EM law."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from dpsense.core import InvalidBounds, PureDP, UsageError
from dpsense.mechanisms.inverse_family import cumulative_reach, inverse_sensitivity_with_family
from dpsense.sensitivity.order_statistics import OrderStatisticFamily
from tests.statistical.power import assert_calibrated

V, N, RANK = 6, 5, 3


def path_lengths(data: tuple[int, ...], edges: np.ndarray) -> np.ndarray:
    x = np.array(data, dtype=float)
    family = OrderStatisticFamily(x, RANK, (0, V))
    v = float(x[RANK - 1])
    gap = np.maximum(0.0, np.maximum(edges[:-1] - v, v - edges[1:]))
    return np.searchsorted(np.asarray(cumulative_reach(family, float(gap.max()))), gap, side="left")


def test_path_length_bound_is_one_lipschitz_and_a_lower_bound() -> None:
    edges = np.linspace(0, V, 13)
    domain = list(itertools.combinations_with_replacement(range(V + 1), N))
    lengths = {x: path_lengths(x, edges) for x in domain}
    for x in domain:
        for i, v in itertools.product(range(N), range(V + 1)):
            y = tuple(sorted(x[:i] + x[i + 1 :] + (v,)))
            assert np.all(np.abs(lengths[x] - lengths[y]) <= 1), (x, y)
    # lower bound: a cell containing a value reachable in one change has length <= 1
    x = (0, 1, 2, 5, 6)
    reachable = {sorted(x[:i] + x[i + 1 :] + (v,))[RANK - 1] for i in range(N) for v in range(V + 1)}
    for r in reachable:
        cell = min(int(np.searchsorted(edges, r, side="right")) - 1, 11)
        assert lengths[x][cell] <= 1


@pytest.mark.statistical
def test_release_follows_the_exponential_mechanism_law() -> None:
    x = np.array([0.0, 1.0, 2.0, 5.0, 6.0])
    edges = np.linspace(0, V, 13)
    utilities = -path_lengths((0, 1, 2, 5, 6), edges).astype(float)
    family = OrderStatisticFamily(x, RANK, (0, V))
    draws = [
        inverse_sensitivity_with_family(2.0, family, output_range=(0, V), epsilon=1, resolution=12).value
        for _ in range(25_000)
    ]
    cells = np.clip(np.floor(np.array(draws) / 0.5).astype(int), 0, 11)
    observed = np.bincount(cells, minlength=12)

    def pvalue(f: float) -> float:  # the EM law at epsilon x f (epsilon = 1)
        w = np.exp(f * utilities / 2)
        return float(stats.chisquare(observed, w / w.sum() * observed.sum()).pvalue)

    assert_calibrated(pvalue, what="ε")


def test_validation_and_cost() -> None:
    family = OrderStatisticFamily(np.array([1.0, 2.0, 3.0]), 2, (0, 4))
    res = inverse_sensitivity_with_family(2.0, family, output_range=(0, 4), epsilon=0.5, resolution=8)
    assert res.loss == PureDP(0.5) and 0 <= res.value <= 4
    with pytest.raises(InvalidBounds):
        inverse_sensitivity_with_family(2.0, family, output_range=(4, 0), epsilon=1)
    with pytest.raises(UsageError):
        inverse_sensitivity_with_family(2.0, family, output_range=(0, 4), epsilon=1, resolution=0)


def test_statistic_wrappers() -> None:
    from dpsense.mechanisms.inverse_family import (
        inverse_sensitivity_min_distance,
        inverse_sensitivity_triangle_count,
        inverse_sensitivity_trimmed_mean,
    )
    from dpsense.sensitivity.triangles import UndirectedGraph

    rng = np.random.default_rng(3)
    data = rng.normal(50, 10, 1000).clip(0, None)
    tm = inverse_sensitivity_trimmed_mean(data, trim=50, bounds=(0, 1e6), epsilon=1)
    assert abs(tm.value - 50) < 5  # global Laplace at this domain would err by ~700
    md = inverse_sensitivity_min_distance(rng.uniform(0, 1, (100, 2)), box=(0, 1), epsilon=1, adjacency="replace")
    assert 0 <= md.value <= md.details["output_range"][1]  # [0, G], G = sqrt(2)/9 for n = 100
    edges = rng.integers(0, 300, (900, 2))
    graph = UndirectedGraph(edges[edges[:, 0] != edges[:, 1]], num_vertices=300)
    tri = inverse_sensitivity_triangle_count(graph, privacy_unit="edge", count_bound=1000, epsilon=1)
    assert 0 <= tri.value <= 1000
