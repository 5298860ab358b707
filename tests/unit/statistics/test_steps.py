"""The mechanism calls of a release step (``dpsense.statistics._steps``): planned loss, refusals, public accuracy.

Each step is a real plan step (planned for a small schema, then varied with ``dataclasses.replace``)
run through the real mechanisms; noisy values are drawn under the deterministic test entropy.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from dpsense import mechanisms as mech
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PureDP
from dpsense.noise.testing import deterministic_entropy
from dpsense.query import Mechanism, PlanStep, Query, Schema, count, median
from dpsense.sensitivity import Sqrt
from dpsense.statistics import _steps, plan
from dpsense.statistics._steps import (
    additive_noise,
    bounded_sum,
    check_result_loss,
    error_bounds,
    grid_exponent_for,
    group_privacy,
    loss_pair,
    mean_error,
    order_release,
    ptr_record_budget,
    uniform_cell,
    variance_error,
)

SCHEMA = Schema(
    {"person": "unit", "hours": "numeric", "region": "categorical"},
    bounds={"hours": (0, 10)},
    keys={"region": ["a", "b"]},
)


def count_step() -> PlanStep:
    """Laplace, C = 2, Δ = 2, ε = 1."""
    (step,) = plan(Query("t").agg(n=count(max_rows_per_unit=2)).build(SCHEMA), epsilon=1, adjacency="add_remove").steps
    return step


def median_step(mechanism: str) -> PlanStep:
    proposed = 1 if mechanism.startswith("ptr") else None
    ir = Query("t").agg(m=median("hours", max_rows_per_unit=1, mechanism=mechanism, proposed_bound=proposed))
    return plan(ir.build(SCHEMA), epsilon=1, delta=Fraction(1, 10**6) if proposed else 0, adjacency="replace").steps[-1]


# ---------------------------------------------------------------- additive_noise


def test_laplace_runs_at_the_steps_sensitivity_and_loss() -> None:
    step = count_step()
    with deterministic_entropy(1):
        result = additive_noise(step, np.array([3.0, 4.0]))
    assert result.loss == step.loss == PureDP(1)
    assert result.mechanism.startswith("laplace")
    assert result.details["nominal_scale"] == 2.0  # Δ / ε = 2 / 1: the step's own sensitivity and ε
    assert np.shape(result.value) == (2,)


def test_gaussian_runs_at_the_steps_delta_and_the_upper_bound_of_an_irrational_sensitivity() -> None:
    step = replace(
        count_step(),
        mechanism=Mechanism.GAUSSIAN,
        sensitivity=Sqrt(Fraction(2)),
        loss=ApproxDP(Fraction(1), Fraction(1, 10**6)),
    )
    with deterministic_entropy(2):
        got = additive_noise(step, np.array([1.0]))
        want = mech.gaussian(
            np.array([1.0]), sensitivity=Sqrt(Fraction(2)).upper(), epsilon=1, delta=Fraction(1, 10**6)
        )
    assert got.loss == ApproxDP(Fraction(1), Fraction(1, 10**6))
    assert got.accuracy is not None and want.accuracy is not None
    assert got.accuracy.scale == want.accuracy.scale
    assert got.accuracy.scale > math.sqrt(2) * 3  # sigma of the analytic Gaussian at ε = 1, δ = 1e-6 is ~ 4.4 Δ


def test_geometric_rounds_the_values_to_integers_first() -> None:
    # ε = 60 with Δ = 1: the noise is 0 except with probability ~ 2e^-60, so the output is the rounded input
    step = replace(count_step(), mechanism=Mechanism.GEOMETRIC, sensitivity=Fraction(1), loss=PureDP(Fraction(60)))
    with deterministic_entropy(3):
        result = additive_noise(step, np.array([2.6, -1.6, 7.0]))
    assert result.value.tolist() == [3, -2, 7]  # rint, not truncation (2, -1, 7)
    assert result.loss == PureDP(60)


def test_additive_noise_refuses_a_result_at_another_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    real = mech.laplace

    def half_epsilon(values: object, *, epsilon: Fraction, **kw: object) -> object:
        return real(values, epsilon=Fraction(epsilon) / 2, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(mech, "laplace", half_epsilon)  # a mechanism that does not run at the planned ε
    with deterministic_entropy(10), pytest.raises(InternalError, match="not the planned"):
        additive_noise(count_step(), np.array([1.0]))


def test_additive_noise_refuses_steps_it_cannot_run() -> None:
    step = count_step()
    with pytest.raises(InternalError, match="no global sensitivity"):
        additive_noise(replace(step, sensitivity=None), np.array([1.0]))
    with pytest.raises(InternalError, match="Gaussian step without δ"):
        additive_noise(replace(step, mechanism=Mechanism.GAUSSIAN), np.array([1.0]))
    with pytest.raises(InternalError, match="not a global-sensitivity mechanism"):
        additive_noise(replace(step, mechanism=Mechanism.EM_QUANTILE), np.array([1.0]))


# ---------------------------------------------------------------- check_result_loss, loss_pair, group_privacy


def test_check_result_loss_accepts_only_the_planned_epsilon_and_delta() -> None:
    step = count_step()
    with deterministic_entropy(4):
        result = mech.laplace(np.array([1.0]), sensitivity=2, epsilon=1)
    check_result_loss(result, PureDP(1), step)
    check_result_loss(result, ApproxDP(Fraction(1), Fraction(0)), step)  # (1, 0) either way
    with pytest.raises(InternalError, match=r"ran at .* not the planned"):
        check_result_loss(result, PureDP(Fraction(1, 2)), step)
    with pytest.raises(InternalError, match="not the planned"):
        check_result_loss(result, ApproxDP(Fraction(1), Fraction(1, 10**9)), step)


def test_loss_pair_refuses_zcdp() -> None:
    assert loss_pair(PureDP(Fraction(3, 4))) == (Fraction(3, 4), Fraction(0))
    assert loss_pair(ApproxDP(Fraction(1), Fraction(1, 7))) == (Fraction(1), Fraction(1, 7))
    with pytest.raises(InternalError, match="zCDP"):
        loss_pair(ZCDP(Fraction(1, 2)))


def test_group_privacy_multiplies_epsilon_by_the_records_of_a_unit() -> None:
    assert group_privacy(Fraction(1, 4), 3) == PureDP(Fraction(3, 4))
    assert group_privacy(Fraction(2), 1) == PureDP(2)


# ---------------------------------------------------------------- order_release, uniform_cell


QS = (Fraction(0), Fraction(1, 2), Fraction(1))


@pytest.mark.parametrize("mechanism", ["em_quantile", "inverse_sensitivity_median"])
def test_order_release_finds_the_requested_rank_at_a_large_epsilon(mechanism: str) -> None:
    step = median_step(mechanism)
    x = np.linspace(0.05, 9.95, 100)  # spacing 0.1
    with deterministic_entropy(5):
        got = [order_release(step, x, q, (0.0, 10.0), Fraction(200), Adjacency.REPLACE) for q in QS]
    # q = 0 the minimum (inverse sensitivity: rank 1, not 0), q = 1/2 the middle, q = 1 the maximum
    assert got[0] < 0.2 and abs(got[1] - 5.0) < 0.2 and got[2] > 9.8


def test_order_release_of_a_smooth_step_on_no_records_is_a_uniform_public_cell() -> None:
    step = median_step("smooth_median")  # the smooth quantile itself refuses n = 0
    with deterministic_entropy(6):
        values = [
            order_release(step, np.zeros(0), Fraction(1, 2), (2.0, 6.0), Fraction(1), Adjacency.REPLACE)
            for _ in range(50)
        ]
    assert all(2.0 <= v <= 6.0 for v in values) and len(set(values)) > 40  # spread over the 2^32 cells


def test_order_release_checks_the_mechanisms_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    step = median_step("em_quantile")
    real = mech.em_quantile_groups  # the EM quantile of one group or many

    def half_epsilon(groups: object, *, epsilon: Fraction, **kw: object) -> object:
        return real(groups, epsilon=epsilon / 2, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(mech, "em_quantile_groups", half_epsilon)
    with deterministic_entropy(7), pytest.raises(InternalError, match="not the planned"):
        order_release(step, np.array([1.0, 2.0]), Fraction(1, 2), (0.0, 10.0), Fraction(1), Adjacency.REPLACE)


def test_uniform_cell_is_a_cell_midpoint_inside_the_bounds() -> None:
    resolution = _steps.DEFAULT_RESOLUTION
    with deterministic_entropy(8):
        values = [uniform_cell((0.0, 1.0)) for _ in range(200)]
    assert all(0.0 < v < 1.0 for v in values)
    cells = [v * resolution - 0.5 for v in values]
    assert all(c == round(c) for c in cells)  # (cell + 1/2) / R on [0, 1]: exact in binary
    assert 0.3 < float(np.mean(values)) < 0.7


# ---------------------------------------------------------------- sums and their grid


def test_grid_exponent_keeps_forty_bits_below_the_largest_bound() -> None:
    assert grid_exponent_for(Fraction(0), Fraction(0)) == -40
    assert grid_exponent_for(Fraction(-3), Fraction(5)) == 2 - 40  # floor(log2 5) = 2
    assert grid_exponent_for(Fraction(-1000), Fraction(1)) == 9 - 40
    assert grid_exponent_for(Fraction(0), Fraction(1, 2)) == -1 - 40


def test_bounded_sum_clips_inward_on_the_grid_of_its_bounds() -> None:
    low, high = Fraction(7, 10), Fraction(11, 10)  # float(0.7) < 7/10 and float(1.1) > 11/10: nearest is outside
    spec = bounded_sum("hours", low, high, name="h")
    assert spec.name == "h" and spec.clip.column == "hours"
    assert spec.grid_exponent == grid_exponent_for(low, high) == -40
    # inward: the smallest double >= 7/10 and the largest <= 11/10, never the nearest
    assert (spec.clip.low, spec.clip.high) == (math.nextafter(0.7, 1), math.nextafter(1.1, 0))
    assert Fraction(spec.clip.low) >= low and Fraction(spec.clip.high) <= high


# ---------------------------------------------------------------- public accuracy


def laplace_result(scale_sensitivity: float) -> mech.MechanismResult:
    with deterministic_entropy(9):
        return mech.laplace(np.array([0.0]), sensitivity=scale_sensitivity, epsilon=1)


def test_error_bounds_repeat_the_bound_or_none() -> None:
    result = laplace_result(1)
    assert result.accuracy is not None
    assert error_bounds(result, 3) == [float(result.accuracy.error_bound)] * 3
    assert error_bounds(replace(result, accuracy=None), 2) == [None, None]


def test_mean_error_combines_the_sum_and_count_bounds_and_is_capped() -> None:
    s, n = laplace_result(1), laplace_result(2)
    assert s.accuracy is not None and n.accuracy is not None
    expected = (s.accuracy.error_bound + 5.0 * n.accuracy.error_bound) / 1000
    assert mean_error(s, n, 1000, 5.0) == pytest.approx(expected)
    assert mean_error(s, n, 2, 5.0) == 10.0  # the bound would exceed the width 2 * half
    assert mean_error(s, n, 0.5, 5.0) == 10.0  # a noisy count below 1
    assert mean_error(replace(s, accuracy=None), n, 1000, 5.0) == 10.0


def test_variance_error_combines_three_bounds_and_is_capped_at_half_squared() -> None:
    s, sq, n = laplace_result(1), laplace_result(3), laplace_result(2)
    b1, b2, bn = (r.accuracy.error_bound for r in (s, sq, n))  # type: ignore[union-attr]
    half = 4.0
    expected = (b2 + half * half * bn + 2 * half * (b1 + half * bn)) / 10_000
    assert variance_error(s, sq, n, 10_000, half) == pytest.approx(expected)
    assert variance_error(s, sq, n, 3, half) == half * half
    assert variance_error(s, replace(sq, accuracy=None), n, 10_000, half) == half * half


# ---------------------------------------------------------------- PTR


def test_ptr_record_budget_keeps_the_unit_within_the_steps_delta() -> None:
    step = median_step("ptr_order_statistic")
    step = replace(step, loss=ApproxDP(Fraction(1), Fraction(1, 10**6)))
    k = step.unit_cost
    assert k > 1
    eps_r, delta_r = ptr_record_budget(step)
    assert eps_r == Fraction(1) / k
    # group privacy (Vadhan 2017 Lemma 2.2): k e^((k-1) ε_r) δ_r <= δ, and not far below it
    spent = k * math.exp((k - 1) * float(eps_r)) * float(delta_r)
    assert spent <= 1e-6 and spent > 0.99e-6
    with pytest.raises(InternalError, match="without δ"):
        ptr_record_budget(replace(step, loss=PureDP(1)))
    with pytest.raises(InternalError, match="δ = 0"):
        ptr_record_budget(replace(step, loss=ApproxDP(Fraction(1), Fraction(0))))
