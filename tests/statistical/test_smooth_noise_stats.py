"""Distribution tests with power for the continuous samplers and the smooth-noise release.

Each sampler passes a Kolmogorov-Smirnov test against its exact CDF (p > P_THRESHOLD = 1e-10, so a
false alarm has probability 1e-10) and fails it when the scale is off by +-30 % (p < 1e-10; with
100 000 draws the KS statistic is then ~10 standard errors or more away, p below 1e-40).
CDFs that are not in scipy are written independently of the samplers and checked by quadrature.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss
from scipy import integrate, special, stats

from dpsense.mechanisms.smooth_noise import plan_smooth_noise, release_with_smooth_bound
from dpsense.noise import continuous
from tests.statistical.gof import chi_square_pvalue
from tests.statistical.power import assert_calibrated

pytestmark = pytest.mark.statistical
N = 100_000
CDF = Callable[[np.ndarray], np.ndarray]


def polynomial_cdf(gamma: float) -> CDF:
    """F(z) = 1/2 + sign(z)/2 * I_w(1/gamma, 1 - 1/gamma), w = |z|^gamma / (1 + |z|^gamma)."""

    def cdf(z: np.ndarray) -> np.ndarray:
        a = np.abs(z) ** gamma
        return 0.5 + 0.5 * np.sign(z) * special.betainc(1 / gamma, 1 - 1 / gamma, a / (1 + a))

    return cdf


def lln_cdf(sigma: float) -> CDF:
    """F(z) = E_Y[F_Laplace(z e^{-sigma Y})], Gauss-Hermite quadrature with 100 nodes."""
    nodes, weights = hermegauss(100)
    weights = weights / weights.sum()

    def cdf(z: np.ndarray) -> np.ndarray:
        out = np.empty(z.shape)
        for i in range(0, z.size, 20_000):
            x = z[i : i + 20_000, None] * np.exp(-sigma * nodes)[None, :]
            lap = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0)), 1 - 0.5 * np.exp(-np.maximum(x, 0)))
            out[i : i + 20_000] = lap @ weights
        return out

    return cdf


def uln_cdf(sigma: float) -> CDF:
    """P(|Z| <= r) = Phi(a) + r e^{sigma^2/2} Phi(-a - sigma), a = ln(r)/sigma (closed form)."""

    def cdf(z: np.ndarray) -> np.ndarray:
        r = np.abs(z)
        with np.errstate(divide="ignore"):
            a = np.log(r) / sigma
        mag = special.ndtr(a) + r * math.exp(sigma * sigma / 2) * special.ndtr(-a - sigma)
        return 0.5 + 0.5 * np.sign(z) * np.minimum(mag, 1.0)

    return cdf


def _density_cdf(pdf: Callable[[float], float], z: float) -> float:
    """P(Z <= z) for a symmetric density, by quadrature."""
    mass = integrate.quad(pdf, 0, abs(z), limit=200)[0]
    return 0.5 + math.copysign(mass, z)


@pytest.mark.parametrize("gamma", [1.5, 3.0, 6.0])
def test_polynomial_cdf_matches_quadrature_of_the_density(gamma: float) -> None:
    norm = gamma * math.sin(math.pi / gamma) / (2 * math.pi)
    for z in (-7.0, -0.4, 0.3, 1.0, 2.5, 40.0):
        ref = _density_cdf(lambda x: norm / (1 + abs(x) ** gamma), z)
        assert float(polynomial_cdf(gamma)(np.array([z]))[0]) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("sigma", [0.42, 1.0])
def test_lln_cdf_matches_quadrature(sigma: float) -> None:
    # P(Z > z) = E[exp(-z e^{-sigma Y})]/2 for z >= 0 (|X| ~ Exp(1)), by adaptive quadrature in y
    for z in (0.0, 0.7, 3.0, 30.0, 400.0):
        tail = integrate.quad(
            lambda y, z=z: stats.norm.pdf(y) * math.exp(-z * math.exp(-sigma * y)), -14, 14, limit=200
        )[0]
        got = lln_cdf(sigma)(np.array([z, -z]))
        assert float(got[0]) == pytest.approx(1 - tail / 2, abs=1e-9)
        assert float(got[1]) == pytest.approx(tail / 2, abs=1e-9)


def test_uln_cdf_matches_quadrature_of_the_density() -> None:
    sigma = math.sqrt(2)

    def pdf(z: float) -> float:
        return 0.5 * math.exp(sigma * sigma / 2) * float(special.ndtr(-math.log(z) / sigma - sigma)) if z > 0 else 0.5

    for z in (-4.0, 0.5, 2.0, 50.0):
        assert float(uln_cdf(sigma)(np.array([z]))[0]) == pytest.approx(_density_cdf(pdf, z), abs=1e-7)


SAMPLERS: list[tuple[str, Callable[[int], np.ndarray], CDF]] = [
    ("uniform", continuous.uniform_open, lambda x: np.clip(x, 0.0, 1.0)),
    ("normal", continuous.standard_normal, stats.norm.cdf),
    ("laplace", continuous.standard_laplace, stats.laplace.cdf),
    ("cauchy", continuous.standard_cauchy, stats.cauchy.cdf),
    ("polynomial 1.5", lambda n: continuous.polynomial(n, 1.5), polynomial_cdf(1.5)),
    ("polynomial 2", lambda n: continuous.polynomial(n, 2.0), stats.cauchy.cdf),
    ("polynomial 4", lambda n: continuous.polynomial(n, 4.0), polynomial_cdf(4.0)),
    ("polynomial 16", lambda n: continuous.polynomial(n, 16.0), polynomial_cdf(16.0)),
    ("student 0.5", lambda n: continuous.student_t(n, 0.5), stats.t(0.5).cdf),
    ("student 3", lambda n: continuous.student_t(n, 3.0), stats.t(3).cdf),
    ("student 30", lambda n: continuous.student_t(n, 30.0), stats.t(30).cdf),
    ("lln 0.42", lambda n: continuous.laplace_log_normal(n, 0.42), lln_cdf(0.42)),
    ("lln 1", lambda n: continuous.laplace_log_normal(n, 1.0), lln_cdf(1.0)),
    ("uln sqrt2", lambda n: continuous.uniform_log_normal(n, math.sqrt(2)), uln_cdf(math.sqrt(2))),
]


@pytest.mark.parametrize(("name", "draw", "cdf"), SAMPLERS, ids=[s[0] for s in SAMPLERS])
def test_sampler_matches_exact_cdf_and_rejects_wrong_scale(
    name: str, draw: Callable[[int], np.ndarray], cdf: CDF
) -> None:
    samples = draw(N)
    assert_calibrated(lambda f: float(stats.kstest(samples, lambda x: cdf(x / f)).pvalue))


def test_cauchy_tails_are_accurate() -> None:
    # P(|C| > 1000) = 2 arctan(1/1000)/pi ~ 6.4e-4: the reciprocal branch keeps the far tail
    z = continuous.standard_cauchy(1_000_000)
    frac = float(np.mean(np.abs(z) > 1000))
    expected = 2 * math.atan(1e-3) / math.pi
    assert abs(frac - expected) < 7 * math.sqrt(expected / 1_000_000)


def _cell_pmf(cdf: CDF, step: float) -> Callable[[np.ndarray], np.ndarray]:
    """P(round(Z / step) = k) for the standard noise Z."""
    return lambda k: cdf((k + 0.5) * step) - cdf((k - 0.5) * step)


@pytest.mark.parametrize(
    ("kwargs", "cdf"),
    [
        ({"family": "student_t", "epsilon": 1, "dof": 3}, stats.t(3).cdf),
        ({"family": "laplace", "epsilon": 1, "delta": "1e-6"}, stats.laplace.cdf),
    ],
)
def test_release_has_the_planned_scale(kwargs: dict[str, object], cdf: CDF) -> None:
    """Single releases (pooled noise for Laplace): the output cells follow (S/s) Z, not +-30 %."""
    plan = plan_smooth_noise(**kwargs)  # type: ignore[arg-type]
    s = float(plan.s)
    bound, grid = 0.5, 0.125  # noise scale S/s; each grid step is s*grid/S = s/4 units of Z
    n = 20_000
    out = np.array([release_with_smooth_bound(0.0, bound, plan, output_grid=grid, clamp=None).value for _ in range(n)])
    cells = np.rint(out / grid).astype(np.int64)
    step = grid * s / bound
    span = int(12 / step)
    assert_calibrated(lambda f: chi_square_pvalue(cells, _cell_pmf(lambda x: cdf(x / f), step), -span, span))
