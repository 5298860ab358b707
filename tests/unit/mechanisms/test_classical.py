from __future__ import annotations

import math

import numpy as np
import pytest

from dpsense.core import (
    ZCDP,
    ApproxDP,
    InvalidData,
    InvalidPrivacyParameter,
    InvalidSensitivity,
    PureDP,
)
from dpsense.mechanisms.discrete import discrete_gaussian, geometric
from dpsense.mechanisms.gaussian import gaussian
from dpsense.mechanisms.laplace import laplace


def test_seed_example_from_public_parameters() -> None:
    """ε = 0.5, Δ = 1: b = 2, E|noise| = 2, 95 % of |noise| below b ln 20 ≈ 5.991 (seed note 001, §3)."""
    res = laplace(3, sensitivity=1, epsilon=0.5)
    nominal = res.details["nominal_accuracy"]
    assert nominal.scale == 2
    assert nominal.mean_abs_error == 2
    assert nominal.error_bound == pytest.approx(2 * math.log(20), rel=1e-15)
    assert round(nominal.error_bound, 3) == 5.991
    # the distribution actually sampled (discrete Laplace on a 2^-23 grid) matches to ~1e-7
    assert res.accuracy is not None
    assert res.accuracy.scale == pytest.approx(2, rel=1e-6)
    assert res.accuracy.mean_abs_error == pytest.approx(2, rel=1e-6)
    assert res.accuracy.error_bound == pytest.approx(5.991464547, rel=1e-6)
    assert res.loss == PureDP("0.5")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"sensitivity": 1, "epsilon": 0}, InvalidPrivacyParameter),
        ({"sensitivity": 1, "epsilon": -1}, InvalidPrivacyParameter),
        ({"sensitivity": 1, "epsilon": float("inf")}, InvalidPrivacyParameter),
        ({"sensitivity": 1, "epsilon": float("nan")}, InvalidPrivacyParameter),
        ({"sensitivity": -1, "epsilon": 1}, InvalidSensitivity),
        ({"sensitivity": float("nan"), "epsilon": 1}, InvalidSensitivity),
        ({"sensitivity": 0, "epsilon": 1}, InvalidSensitivity),
    ],
)
def test_laplace_refuses_bad_parameters(kwargs: dict, error: type) -> None:
    with pytest.raises(error) as info:
        laplace(1.0, **kwargs)
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize("delta", [-0.1, 1, 1.5, float("nan"), 0])
def test_gaussian_refuses_bad_delta(delta: float) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        gaussian(1.0, sensitivity=1, epsilon=1, delta=delta)


@pytest.mark.parametrize("value", [[], "abc", ["a", "b"], float("nan"), [1.0, float("inf")]])
def test_bad_values_refused(value: object) -> None:
    with pytest.raises(InvalidData):
        laplace(value, sensitivity=1, epsilon=1)


def test_vector_release_keeps_shape_and_costs_once() -> None:
    res = laplace(np.zeros((3, 4)), sensitivity=2, epsilon=1)
    assert res.value.shape == (3, 4)
    assert res.loss == PureDP(1)


def test_gaussian_reports_balle_wang_and_grid_sigma() -> None:
    res = gaussian(5.0, sensitivity=1, epsilon=1, delta=1e-6)
    assert res.loss == ApproxDP(1, 1e-6)
    # the grid sigma is the Balle-Wang sigma up to the grid's one-step inflation (~2^-13 relative)
    assert res.details["sigma"] == pytest.approx(res.details["sigma_balle_wang"], rel=2e-3)
    assert res.details["sigma"] >= res.details["sigma_balle_wang"] * (1 - 1e-6)
    vec = gaussian(np.zeros(10), sensitivity=1, epsilon=1, delta=1e-6)
    assert vec.value.shape == (10,)


def test_geometric_and_discrete_gaussian_on_integers() -> None:
    res = geometric(10, sensitivity=1, epsilon=0.5)
    assert isinstance(res.value, int) and res.loss == PureDP(0.5)
    with pytest.raises(InvalidData):
        geometric(1.5, sensitivity=1, epsilon=1)
    with pytest.raises(InvalidSensitivity):
        geometric(1, sensitivity=0.5, epsilon=1)
    dg = discrete_gaussian(np.arange(5), sensitivity=1, rho=0.5)
    assert dg.loss == ZCDP(0.5) and dg.details["sigma2"] == 1
    dg2 = discrete_gaussian(3, sensitivity=1, epsilon=1, delta=1e-6)
    assert dg2.loss == ApproxDP(1, 1e-6)
    with pytest.raises(InvalidPrivacyParameter, match="either rho"):
        discrete_gaussian(3, sensitivity=1, rho=1, epsilon=1)
