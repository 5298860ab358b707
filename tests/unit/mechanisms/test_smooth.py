"""The statistic-level smooth-sensitivity releases and PTR instances: wiring, costs, refusals, leaks."""

from __future__ import annotations

import numpy as np
import pytest

from dpsense.core import ZCDP, ApproxDP, PureDP, UnsupportedRequest, UsageError
from dpsense.mechanisms.ptr import Refusal
from dpsense.mechanisms.ptr_statistics import ptr_min_distance, ptr_order_statistic, ptr_trimmed_mean
from dpsense.mechanisms.smooth import (
    smooth_median,
    smooth_min_distance,
    smooth_quantile,
    smooth_triangle_count,
    smooth_trimmed_mean,
)
from dpsense.sensitivity.triangles import UndirectedGraph

AGES = np.clip(np.round(np.random.default_rng(1).normal(38, 9, 1001)), 0, 120)


def _no_private_numbers(result: object, *private: float) -> None:
    text = repr(result)
    for value in private:
        assert repr(float(value)) not in text


@pytest.mark.parametrize(
    ("noise", "kwargs", "loss"),
    [
        ("cauchy", {"epsilon": 1}, PureDP(1)),
        ("student_t", {"epsilon": 1, "noise_options": {"dof": 3}}, PureDP(1)),
        ("laplace", {"epsilon": 1, "delta": 1e-6}, ApproxDP(1, 1e-6)),
        ("gaussian", {"epsilon": 1, "delta": 1e-6}, ApproxDP(1, 1e-6)),
        ("lln", {"rho": 0.5}, ZCDP(0.5)),
        ("uln", {"rho": 0.5}, ZCDP(0.5)),
    ],
)
def test_smooth_median_every_noise_family(noise: str, kwargs: dict, loss: object) -> None:
    res = smooth_median(AGES, bounds=(0, 120), noise=noise, adjacency="replace", **kwargs)
    assert res.loss == loss
    assert 0 <= res.value <= 120
    assert res.accuracy is None  # the scale depends on the private smooth bound
    assert res.details["adjacency"] == "replace"


def test_median_is_accurate_where_global_sensitivity_is_useless() -> None:
    errors = [abs(smooth_median(AGES, bounds=(0, 120), epsilon=1, adjacency="replace").value - 38) for _ in range(200)]
    assert np.median(errors) < 1.0  # the global Laplace's median error is 120 ln 2 ~ 83


def test_add_remove_needs_public_n() -> None:
    with pytest.raises(UsageError, match="public_n"):
        smooth_median(AGES, bounds=(0, 120), epsilon=1, adjacency="add_remove")
    res = smooth_median(AGES, bounds=(0, 120), epsilon=1, adjacency="add_remove", public_n=1000)
    assert res.details["adjacency"] == "add_remove"


def test_quantile_rank_from_public_n() -> None:
    res = smooth_quantile(AGES, q=0.9, bounds=(0, 120), epsilon=1, adjacency="replace")
    assert "rank 901" in res.details["statistic"]
    with pytest.raises(UsageError):
        smooth_quantile(AGES, q=0.9, rank=3, bounds=(0, 120), epsilon=1, adjacency="replace")


def test_laplace_smooth_plan_refused_where_the_delta_condition_fails() -> None:
    with pytest.raises(UnsupportedRequest):
        smooth_median(AGES, bounds=(0, 120), noise="laplace", epsilon=3, delta=1e-6, adjacency="replace")


def test_trimmed_mean_min_distance_triangles() -> None:
    tm = smooth_trimmed_mean(AGES, trim=50, bounds=(0, 120), rho=0.5, adjacency="replace")
    assert tm.loss == ZCDP(0.5) and 0 <= tm.value <= 120
    pts = np.random.default_rng(2).uniform(0, 1, (60, 2))
    md = smooth_min_distance(pts, box=(0, 1), epsilon=1, adjacency="replace")
    assert 0 <= md.value <= md.details["public_cap"]
    edges = np.random.default_rng(3).integers(0, 200, (600, 2))
    graph = UndirectedGraph(edges[edges[:, 0] != edges[:, 1]], num_vertices=200)
    tri = smooth_triangle_count(graph, privacy_unit="edge", epsilon=1, count_bound=1e4)
    assert 0 <= tri.value <= 1e4
    with pytest.raises(UnsupportedRequest):
        smooth_triangle_count(graph, privacy_unit="node", epsilon=1)


@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
def test_min_distance_releases_never_leave_the_box_range(adjacency: str) -> None:
    """f = the diameter (two far points) or G (one point): half the noisy draws land on the top of the range.

    The cap G is rounded up by a relative 2^-40 to bound computed distances; the release is clamped to
    the unrounded top (24 in 1-D on [0, 24]), never above it.
    """
    from dpsense.mechanisms.inverse_family import inverse_sensitivity_min_distance
    from dpsense.sensitivity.closest_pair import closest_pair_global_sensitivity, closest_pair_range_top

    top = closest_pair_range_top(adjacency=adjacency, dim=1, low=0, high=24, n=2)
    assert top == 24.0 < closest_pair_global_sensitivity(adjacency=adjacency, dim=1, low=0, high=24, n=2)
    far = np.array([0.0, 24.0])
    smooth = [smooth_min_distance(far, box=(0, 24), epsilon=1, adjacency=adjacency).value for _ in range(200)]
    assert max(smooth) == 24.0 and min(smooth) >= 0
    ptr = [
        ptr_min_distance(
            far, box=(0, 24), proposed_bound=30, epsilon_test=1, epsilon_release=1, delta=1e-6, adjacency=adjacency
        )
        for _ in range(100)
    ]
    answered = [r.value for r in ptr if not isinstance(r, Refusal)]
    assert answered and max(answered) == 24.0
    inverse = [
        inverse_sensitivity_min_distance(far, box=(0, 24), epsilon=5, adjacency=adjacency).value for _ in range(50)
    ]
    assert max(inverse) <= 24.0


def test_results_carry_no_true_value_and_no_smooth_bound() -> None:
    from dpsense.sensitivity.order_statistics import smooth_order_statistic

    res = smooth_median(AGES, bounds=(0, 120), epsilon=1, adjacency="replace")
    stat = smooth_order_statistic(AGES, bounds=(0, 120), beta=0.5)
    _no_private_numbers(res, stat.smooth_sensitivity)
    assert "38.0" not in repr(res.details)


def test_ptr_instances_answer_or_refuse_with_cost() -> None:
    res = ptr_order_statistic(
        AGES, bounds=(0, 120), proposed_bound=2, epsilon_test=0.5, epsilon_release=0.5, delta=1e-6, adjacency="replace"
    )
    assert not isinstance(res, Refusal) and res.loss == ApproxDP(1, 1e-6)
    refused = ptr_order_statistic(
        AGES,
        bounds=(0, 120),
        proposed_bound=1e-9,
        epsilon_test=0.5,
        epsilon_release=0.5,
        delta=1e-6,
        adjacency="replace",
    )
    assert isinstance(refused, Refusal) and refused.loss == ApproxDP(1, 1e-6)
    pts = np.random.default_rng(4).uniform(0, 1, (50, 2))
    collapse = ptr_min_distance(
        pts, box=(0, 1), proposed_bound=0.001, epsilon_test=0.5, epsilon_release=0.5, delta=1e-6, adjacency="replace"
    )
    assert isinstance(collapse, Refusal)  # one replacement can always collapse two points
    tm = ptr_trimmed_mean(
        AGES,
        trim=100,
        bounds=(0, 120),
        proposed_bound=1,
        epsilon_test=0.5,
        epsilon_release=0.5,
        delta=1e-6,
        adjacency="replace",
    )
    assert not isinstance(tm, Refusal)


def test_ptr_triangle_count_edge_level_only() -> None:
    from dpsense.mechanisms.ptr_statistics import ptr_triangle_count

    edges = np.random.default_rng(5).integers(0, 300, (900, 2))
    graph = UndirectedGraph(edges[edges[:, 0] != edges[:, 1]], num_vertices=300)
    res = ptr_triangle_count(
        graph,
        privacy_unit="edge",
        proposed_bound=80,
        epsilon_test=0.5,
        epsilon_release=0.5,
        delta=1e-6,
        count_bound=1e4,
    )
    assert not isinstance(res, Refusal) and 0 <= res.value <= 1e4
    with pytest.raises(UnsupportedRequest):
        ptr_triangle_count(
            graph, privacy_unit="person", proposed_bound=20, epsilon_test=0.5, epsilon_release=0.5, delta=1e-6
        )


@pytest.mark.parametrize("shape", [(0, 2), (0,), (1, 2), (1,)])
def test_min_distance_releases_are_total_below_two_points(shape: tuple[int, ...]) -> None:
    """No point or one point: each mechanism releases (or PTR refuses) at its stated loss, inside [0, top]."""
    from dpsense.mechanisms.inverse_family import inverse_sensitivity_min_distance
    from dpsense.sensitivity.closest_pair import closest_pair_range_top

    points = np.full(shape, 0.5)
    dim = shape[1] if len(shape) > 1 else 1
    top = closest_pair_range_top(adjacency="add_remove", dim=dim, low=0, high=1)
    smooth = smooth_min_distance(points, box=(0, 1), epsilon=1, adjacency="add_remove")
    inverse = inverse_sensitivity_min_distance(points, box=(0, 1), epsilon=1, adjacency="add_remove")
    assert smooth.loss == PureDP(1) and inverse.loss == PureDP(1)
    assert 0 <= smooth.value <= top and 0 <= inverse.value <= top
    kwargs = {"epsilon_test": 1, "epsilon_release": 1, "delta": 1e-9, "adjacency": "add_remove"}
    # below two points one added point can collapse f from G to 0: b < G passes w.p. <= δ, b > G w.p. >= 1 - e^-20
    refused = ptr_min_distance(points, box=(0, 1), proposed_bound=top / 2, **kwargs)
    assert isinstance(refused, Refusal) and refused.loss == ApproxDP(2, 1e-9)
    passed = ptr_min_distance(points, box=(0, 1), proposed_bound=2 * top, **kwargs)
    assert not isinstance(passed, Refusal) and 0 <= passed.value <= top and passed.loss == ApproxDP(2, 1e-9)
