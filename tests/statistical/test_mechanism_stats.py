"""Mechanism-level distribution tests with power: the released noise has the stated scale, not +-30 %."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpsense.mechanisms.discrete import discrete_gaussian, geometric
from tests.statistical.gof import chi_square_pvalue, discrete_gaussian_pmf, discrete_laplace_pmf
from tests.statistical.power import assert_calibrated

pytestmark = pytest.mark.statistical


def test_geometric_mechanism_scale() -> None:
    res = geometric(np.full(300_000, 7), sensitivity=3, epsilon=0.6)
    noise = res.value - 7
    scale = float(Fraction(3) / Fraction("0.6"))
    assert_calibrated(lambda f: chi_square_pvalue(noise, discrete_laplace_pmf(scale * f), -80, 80))


def test_discrete_gaussian_mechanism_scale() -> None:
    res = discrete_gaussian(np.full(300_000, -4), sensitivity=2, rho=0.08)
    noise = res.value + 4
    sigma2 = 4 / (2 * 0.08)
    assert_calibrated(lambda f: chi_square_pvalue(noise, discrete_gaussian_pmf(sigma2 * f**2), -40, 40))
