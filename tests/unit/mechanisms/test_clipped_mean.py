from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import InvalidBounds, InvalidData, PureDP, UsageError
from dpsense.mechanisms.clipped_mean import clipped_mean


def test_cost_split_and_range() -> None:
    data = np.random.default_rng(1).lognormal(10, 0.5, 3000)
    res = clipped_mean(data, bounds=(0, 1e6), epsilon=1)
    assert res.loss == PureDP(1)
    assert res.details["epsilon_bound"] + res.details["epsilon_mean"] == 1
    assert 0 <= res.value <= res.details["clip_bound"] <= 1e6
    assert "true" not in str(res.details)


def test_beats_the_wide_domain_global_mean_when_data_sit_far_below_the_bound() -> None:
    data = np.random.default_rng(2).normal(50, 10, 1000).clip(0, None)
    errors = [abs(clipped_mean(data, bounds=(0, 1e6), epsilon=1).value - data.mean()) for _ in range(200)]
    global_median_error = np.log(2) * 1e6 / 1000  # median |Laplace(b)| = b ln 2, b = (U - L)/(n ε)
    assert np.median(errors) < global_median_error / 10


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"bounds": (1, 0), "epsilon": 1}, InvalidBounds),
        ({"bounds": (0, float("inf")), "epsilon": 1}, InvalidBounds),
        ({"bounds": (0, 1), "epsilon": 1, "bound_share": 1}, UsageError),
    ],
)
def test_bad_parameters(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        clipped_mean([0.5, 0.2], **kwargs)


def test_empty_refused() -> None:
    with pytest.raises(InvalidData):
        clipped_mean([], bounds=(0, 1), epsilon=1)


def test_the_clip_and_the_released_value_stay_inside_the_declared_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 13: bounds=(0.7, 1.1) declare [7/10, 11/10]; float(7/10) = 0.7 lies below 7/10, so the old
    # nearest-rounded clip let the clamped release (and the candidate clips) start outside [L, U]
    from dpsense.noise.testing import deterministic_entropy

    module = importlib.import_module("dpsense.mechanisms.clipped_mean")  # the package attribute is the function

    low, high = Fraction(7, 10), Fraction(11, 10)
    assert Fraction(0.7) < low
    seen: list[tuple[Fraction, Fraction]] = []
    original = module.exact_clipped_sum

    def recording(values, bounds):  # type: ignore[no-untyped-def]
        seen.append(tuple(Fraction(b) for b in bounds.float_interval()))  # type: ignore[arg-type]
        return original(values, bounds)

    monkeypatch.setattr(module, "exact_clipped_sum", recording)
    data = np.full(50, 0.7)
    with deterministic_entropy(20261202):
        values = [clipped_mean(data, bounds=(0.7, 1.1), epsilon=1).value for _ in range(40)]
    assert all(low <= Fraction(v) <= high for v in values)
    assert all(low <= lo <= hi <= high for lo, hi in seen)
