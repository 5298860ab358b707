"""The EM quantile over a declared recording step's points (docs/math/exponential-mechanism.md §8.5)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.mechanisms import recursive_quantiles
from dpsense.mechanisms.quantile import em_quantile, em_quantiles
from dpsense.noise.testing import deterministic_entropy
from tests.statistical.gof import chi_square_pvalue
from tests.statistical.power import assert_calibrated


@pytest.mark.statistical
def test_step_candidates_follow_the_em_law_over_the_points() -> None:
    """Points k/4 in [0, 3] (13 of them), records rounded to the nearest point, ranks from the definition."""
    values = np.array([0.25, 0.9, 1.0, 1.0, 1.1, 2.0, 2.6])  # 0.9 and 1.1 round to 1.0, 2.6 to 2.5
    q, epsilon, step = Fraction(1, 2), Fraction(1, 2), Fraction(1, 4)
    released = np.array(
        [em_quantile(values, q=q, bounds=(0, 3), epsilon=epsilon, step="0.25").value for _ in range(20_000)]
    )
    indices = np.rint(released / 0.25).astype(np.int64)
    assert np.array_equal(indices * 0.25, released)  # every release is a point's double
    rounded = sorted(round(Fraction(float(v)) / step) for v in values)

    def pmf(f: float) -> np.ndarray:
        qn = q * len(rounded)
        dist = [
            max(sum(x < c for x in rounded) - qn, qn - sum(x <= c for x in rounded), Fraction(0)) for c in range(13)
        ]
        w = np.array([math.exp(-float(epsilon * Fraction(str(f)) * d / 2)) for d in dist])
        return w / w.sum()

    assert_calibrated(lambda f: chi_square_pvalue(indices, lambda s: pmf(f)[s], 0, 12), what="ε")


def test_a_tie_at_a_step_value_is_released_at_it() -> None:
    """A median inside six tied hundredths (13.05) at ε = 1: the step's point itself, never a whole number."""
    rng = np.random.default_rng(5)
    below, above = np.round(rng.uniform(11, 13.04, 80), 2), np.round(rng.uniform(13.06, 15, 80), 2)
    alcohol = np.concatenate([below, [13.05] * 6, above])  # the median (ranks 83, 84) inside the tie
    with deterministic_entropy(11):
        out = [
            em_quantile(alcohol, q=0.5, bounds=(0, 20), epsilon=1, adjacency=Adjacency.ADD_REMOVE, step="0.01").value
            for _ in range(40)
        ]
    assert all(round(v * 100) / 100 == v for v in out)  # points of the step
    assert sum(v == 13.05 for v in out) >= 30


def test_step_releases_are_points_for_every_decimal_step() -> None:
    for step, bounds in (("0.05", (0, 3)), ("25", (0, 10_000)), ("1000", (-1e6, 1e6)), ("0.001", (0.5, 0.6))):
        exact = Fraction(step)
        out = em_quantiles([0.3, 1.7, 2.2, 7_000, -5], qs=[0.1, 0.5, 0.9], bounds=bounds, epsilon=1, step=step).value
        for v in out:
            k = round(Fraction(float(v)) / exact)
            assert float(k * exact) == v and bounds[0] <= v <= bounds[1], (step, v)


def test_step_candidates_on_no_records_and_extreme_records() -> None:
    assert em_quantile([], q=0.5, bounds=(0.001, 0.009), epsilon=1, step="0.005").value == 0.005  # the one point
    value = em_quantile([1e308, -1e308, np.inf, -np.inf], q=0.5, bounds=(-100, 100), epsilon=1, step="25").value
    assert value in {-100.0, -75.0, -50.0, -25.0, 0.0, 25.0, 50.0, 75.0, 100.0}


def test_step_candidates_state_their_candidates_and_rank_bound() -> None:
    details = em_quantile([1.0, 2.0], q=0.5, bounds=(0, 20), epsilon=1, step="0.01").details
    assert details["candidates"] == "the points of the declared step 0.01"
    assert details["resolution"] == 2001 and details["cell_width"] == 0.01
    assert details["rank_excess_bound"] == pytest.approx(2 * math.log(2001 / 0.05), rel=1e-9)


def test_step_candidates_refuse_bounds_without_a_point_and_a_resolution() -> None:
    with pytest.raises(UsageError, match="step candidates need"):
        em_quantile([0.2], q=0.5, bounds=(0.011, 0.019), epsilon=1, step="0.01")
    with pytest.raises(UsageError, match="fix the resolution"):
        em_quantile([1.0], q=0.5, bounds=(0, 9), epsilon=1, step="0.5", resolution=10)
    with pytest.raises(UsageError, match="positive decimal"):
        em_quantile([1.0], q=0.5, bounds=(0, 9), epsilon=1, step="1/3")


def test_joint_quantiles_with_a_step_release_points_in_order() -> None:
    values = np.round(np.linspace(10, 16, 300), 1)
    out = recursive_quantiles(values, qs=[0.25, 0.5, 0.75], bounds=(0, 20), epsilon=2, step="0.1").value
    assert list(out) == sorted(out)
    assert all(float(round(Fraction(float(v)) * 10) / 10) == v for v in out)
    # a split's ends are released points: a split between two equal points still holds that point
    tied = np.full(50, 13.3)
    out = recursive_quantiles(tied, qs=[0.1, 0.2, 0.3, 0.5, 0.9], bounds=(13.3, 13.3), epsilon=1, step="0.1").value
    assert set(out) == {13.3}
