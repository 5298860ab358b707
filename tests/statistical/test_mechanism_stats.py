"""Mechanism-level distribution tests with power: the released noise has the stated scale, not +-30 %."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpsense.mechanisms.discrete import discrete_gaussian, geometric
from tests.statistical.gof import P_THRESHOLD, chi_square_pvalue, discrete_gaussian_pmf, discrete_laplace_pmf

pytestmark = pytest.mark.statistical


def test_geometric_mechanism_scale() -> None:
    res = geometric(np.full(300_000, 7), sensitivity=3, epsilon=0.6)
    noise = res.value - 7
    scale = float(Fraction(3) / Fraction("0.6"))
    assert chi_square_pvalue(noise, discrete_laplace_pmf(scale), -80, 80) > P_THRESHOLD
    for wrong in (0.7, 1.3):
        assert chi_square_pvalue(noise, discrete_laplace_pmf(scale * wrong), -80, 80) < P_THRESHOLD


def test_discrete_gaussian_mechanism_scale() -> None:
    res = discrete_gaussian(np.full(300_000, -4), sensitivity=2, rho=0.08)
    noise = res.value + 4
    sigma2 = 4 / (2 * 0.08)
    assert chi_square_pvalue(noise, discrete_gaussian_pmf(sigma2), -40, 40) > P_THRESHOLD
    for wrong in (0.7, 1.3):
        assert chi_square_pvalue(noise, discrete_gaussian_pmf(sigma2 * wrong**2), -40, 40) < P_THRESHOLD
