"""The calibrations' own guards at extreme public parameters (defence in depth beside the release's admission).

``tests/system/release/test_extreme_parameters.py`` drives extreme ε, δ and bounds through the Session, where
admission (``release._admission``) refuses most of them before the ledger. These are the guards of the
functions themselves, each of which raised an arithmetic error (OverflowError, ValueError from ``math``, an
int64 overflow) before: a caller outside the release system gets a refusal or a valid answer instead.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.mechanisms import _quantile_candidates, _rank_sampler
from dpsense.mechanisms._accuracy import discrete_laplace_on_grid
from dpsense.mechanisms.laplace import laplace_plan, laplace_scale_ok
from dpsense.mechanisms.partition_selection import check_selection_parameters, select_partitions
from dpsense.mechanisms.ptr import check_plan_parameters
from dpsense.noise import exact, grid
from dpsense.noise.testing import deterministic_entropy


@pytest.mark.parametrize("scale", [Fraction(1, 10**6), Fraction(1, 800), Fraction(1, 746)])
def test_the_discrete_laplace_accuracy_of_a_scale_whose_q_underflows(scale: Fraction) -> None:
    """q = exp(-1/t) underflows to 0 below t = 1/745: no noise, |K| = 0 (was: log(0), a math domain error)."""
    accuracy = discrete_laplace_on_grid(scale, 1.0, 0.95, name="t")
    assert accuracy.error_bound == 0.5 and accuracy.mean_abs_error == 0.0


def test_the_discrete_laplace_accuracy_is_unchanged_where_q_is_positive() -> None:
    accuracy = discrete_laplace_on_grid(10, 1.0, 0.95, name="t")  # P(|K| > m) = 2 q^(m+1)/(1+q) <= 0.05
    q = math.exp(-1 / 10)
    m = int(accuracy.error_bound - 0.5)
    assert 2 * q ** (m + 1) / (1 + q) <= 0.05 < 2 * q**m / (1 + q)


def test_a_scale_with_a_denominator_beyond_int64_is_refused_not_overflowed() -> None:
    tiny = Fraction(1, 10**100)  # the geometric scale at ε = 1e100
    assert not exact.discrete_laplace_scale_ok(tiny)
    assert not exact.geometric_scale_ok(1, Fraction(10**100))
    with pytest.raises(UsageError, match="denominators below 2"):
        exact.discrete_laplace(tiny, 3)
    assert exact.discrete_laplace_scale_ok(Fraction(1, 2**61))  # the limit's edge: served
    with deterministic_entropy(1):
        assert exact.discrete_laplace(Fraction(1, 2**61), 3).tolist() == [0, 0, 0]


def test_a_laplace_plan_whose_values_would_overflow_is_refused() -> None:
    """A grid 2^k with k above ``MAX_NOISE_EXPONENT``: its draws unsnap to infinity (was: a RuntimeWarning)."""
    assert not laplace_scale_ok(sensitivity=Fraction(9 * 10**299), epsilon=Fraction(1, 10**9))
    assert laplace_scale_ok(sensitivity=Fraction(10**200), epsilon=1)
    k, _ = laplace_plan(sensitivity=Fraction(10**200), epsilon=1)
    assert k <= grid.MAX_NOISE_EXPONENT < laplace_plan(sensitivity=Fraction(9 * 10**299), epsilon=Fraction(1, 10**9))[0]


def test_the_ptr_threshold_beyond_the_doubles_is_a_refusal() -> None:
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_test is too small"):
        check_plan_parameters(
            epsilon_test=Fraction(1, 2**1000), epsilon_release=1, delta=Fraction(1, 10**6), proposed_bound=1
        )


def test_partition_selection_checks_its_scale_before_its_counts() -> None:
    """The same refusal on no candidates as on some (was: released empty, failed on a non-empty view)."""
    for counts in ([], [3, 4]):
        with pytest.raises(InvalidPrivacyParameter, match="partition selection"):
            select_partitions(counts, max_partitions_per_unit=1, replace=False, epsilon=1e-17, delta=1e-7)
    check_selection_parameters(max_partitions_per_unit=1, replace=True, epsilon=Fraction(1, 10))
    with pytest.raises(InvalidPrivacyParameter):
        check_selection_parameters(max_partitions_per_unit=1, replace=False, epsilon=Fraction(10**100))


@pytest.mark.parametrize("rate", [5e-324, 1e-310, 1e-300])
def test_a_subnormal_rate_reaches_the_whole_table(rate: float) -> None:
    """(bits ln 2 + 2) / rate is not a finite float: the reach is the exponent limit (was: OverflowError)."""
    candidates, _ = _quantile_candidates.prepared(np.array([1.0, 2.0, 3.0]), (0.0, 4.0), 8, False, False)
    assert _rank_sampler._reach(candidates, rate) == _rank_sampler._EXPONENT_LIMIT
    assert _rank_sampler._reach(candidates, 1.0) < _rank_sampler._EXPONENT_LIMIT


def test_the_em_quantile_at_a_rate_far_below_the_floats_releases() -> None:
    from dpsense.mechanisms.quantile import em_quantile_groups

    with deterministic_entropy(2):
        out = em_quantile_groups(
            [[1.0, 2.0, 3.0], [2.0]], q=Fraction(1, 4 * 10**18), bounds=(0.0, 4.0), epsilon=Fraction(1, 10**300),
            adjacency=Adjacency.ADD_REMOVE,
        )  # fmt: skip
    assert all(0.0 <= r.value <= 4.0 for r in out)
