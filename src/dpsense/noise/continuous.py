"""Continuous noise in float64 for smooth-sensitivity releases, drawn from the OS CSPRNG.

Every sampler here reads its randomness only from ``dpsense.noise.entropy`` and is vectorised
(``n`` draws per call). The constructions, and why each is exact in real arithmetic:

* ``uniform_open``: U = k / 2**53 with k uniform on {1, ..., 2**53 - 1} (53 random bits, the
  all-zero word redrawn), so U lies in the open interval (0, 1), every value is an exact double,
  and U and 1 - U have the same law.
* ``standard_normal``: inverse CDF, Y = ndtri(U) (``scipy.special.ndtri``). Chosen over Box-Muller
  because it is monotone in U (one uniform per draw, no trigonometry) and symmetric: 1 - U is exact,
  so Y and -Y have the same law. The tails stop at |Y| <= ndtri(2**-53) ~ 8.2 (mass ~1e-16 cut).
* ``standard_laplace``: Laplace(1) is the exact discrete Laplace K with P(K = k) proportional to
  exp(-|k| / 2**48) (``dpsense.noise.exact``, CKS 2020 Alg. 2), divided by 2**48, i.e. Laplace(1)
  discretised on the grid 2**-48 (K * 2**-48 is exact in float64 while |K| < 2**53, i.e. |Z| < 32;
  beyond, probability 1e-14, it is correctly rounded). No logarithm of a uniform is taken: the
  textbook inverse-CDF Laplace is the object of Mironov's attack (docs/math/floating-point.md).
* ``standard_cauchy``: |C| = tan(pi V / 4) with probability 1/2 and 1 / tan(pi V / 4) otherwise,
  V uniform on (0, 1), plus a random sign. Valid because P(|C| <= 1) = 1/2, |C| given |C| <= 1 is
  tan of a uniform angle on (0, pi/4), and 1/|C| has the law of |C|. Both branches evaluate tan on
  (0, pi/4), so the tails keep full relative precision (tan(pi(U - 1/2)) does not).
* ``polynomial``: density h(z) = gamma sin(pi/gamma) / (2 pi) / (1 + |z|**gamma), gamma > 1.
  Derivation: with w = |z|**gamma / (1 + |z|**gamma), dz/(1 + z**gamma) = (1/gamma) w**(a-1)
  (1-w)**(-a) dw for a = 1/gamma, so W = |Z|**gamma / (1 + |Z|**gamma) ~ Beta(1/gamma, 1 - 1/gamma)
  and P(|Z| <= r) = I_{w(r)}(1/gamma, 1 - 1/gamma) (regularised incomplete beta). Sampler:
  |Z| = (W / (1 - W))**(1/gamma) with W = betaincinv(a, b, U); for U > 1/2 the complement 1 - W is
  computed as betaincinv(b, a, 1 - U) so the upper tail keeps relative precision. gamma = 2 is
  Cauchy (W ~ arcsine).
* ``student_t``: T**2 / (d + T**2) ~ Beta(1/2, d/2), so |T| = sqrt(d W / (1 - W)) by the same
  two-sided inverse incomplete beta, plus a random sign.
* ``laplace_log_normal``: Z = X e^{sigma Y}, X ~ Laplace(1) (above), Y ~ N(0, 1) (BS19 section 3.1).
* ``uniform_log_normal``: Z = U e^{sigma Y}, U ~ Uniform[-1, 1] as a random sign times ``uniform_open``.

Ranges (public, enforced): gamma in [1.1, 16] and dof in [1/4, 10**6] keep the inverse incomplete
beta inside the normal double range for every U >= 2**-53 (no underflow to 0 or overflow to inf).

**Floating point.** Continuous noise whose scale is data-dependent has no standard exact sampler
(docs/math/smooth-sensitivity.md §3.3, pitfall 4; Mironov CCS 2012 for the Laplace case): the doubles these
samplers can produce, once multiplied by S(x)/s and added to f(x), form a data-dependent set.
Mitigation, used by ``dpsense.mechanisms.smooth_noise`` and ``dpsense.mechanisms.smooth``: the
release is rounded to a coarse PUBLIC grid g (chosen without looking at the data or at S(x)) and
clamped to a public range [lo, hi], so the output takes at most (hi - lo)/g + 3 values (the grid
points in [lo, hi] and the two ends). The smooth releases floor the noise scale S/s at g (S is
raised to at least g s, a public constant, which keeps S a beta-smooth upper bound), so the noise
scale is never negligible against a grid cell: with S at a tiny floor, f(x) + (S/s) Z equalled
f(x) for most draws of Z and the rounding was a function of f(x) alone (f(x) on a half-grid point
then released one cell with certainty, where the ideal mechanism releases either neighbour with
probability 1/2). A sum that lands exactly on a half-grid point (a tie) is rounded up or down by a
fresh fair bit (``fair_bits``), as symmetric ideal noise would, not deterministically to even.

No bound on the total variation between this float output law and the ideal real-arithmetic one
is proved here, and none is claimed: the mitigation is a heuristic, the stated loss is that of the
ideal mechanism, and the float gap is a documented, unquantified residual risk.

Timing: the inverse-CDF samplers do a fixed amount of work per draw; only the discrete Laplace is a
rejection sampler, so draws of at most ``POOL_MAX`` Laplace values come from ``dpsense.noise.pool``
(filled ahead of the release).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpsense.core.checks import integral_in
from dpsense.core.errors import UsageError
from dpsense.noise import entropy, exact, pool

F64 = NDArray[np.float64]
U64 = NDArray[np.uint64]

#: Random bits in one uniform: the float64 significand.
UNIFORM_BITS = 53
#: Laplace(1) is sampled as the exact discrete Laplace on the grid 2**-LAPLACE_RESOLUTION_BITS.
LAPLACE_RESOLUTION_BITS = 48
#: Laplace requests of at most this many values are served from the pre-filled pool.
POOL_MAX = 64
#: Public parameter ranges in which the inverse incomplete beta stays in the normal double range.
GAMMA_RANGE = (1.1, 16.0)
DOF_RANGE = (0.25, 1e6)

_SHIFT = np.uint64(64 - UNIFORM_BITS)
_ULP = 2.0**-UNIFORM_BITS
_LAPLACE_SCALE = Fraction(1 << LAPLACE_RESOLUTION_BITS)


def _check_count(n: int) -> int:
    if not integral_in(n, 0):
        raise UsageError("the number of draws must be an integer >= 0", n, "pass n as a non-negative int")
    return int(n)


def _nonzero_words(n: int) -> U64:
    """``n`` uniform 64-bit words whose top 53 bits are not all zero (each such word is redrawn)."""
    out = entropy.words(n).copy()
    bad = np.flatnonzero((out >> _SHIFT) == 0)
    while bad.size:  # probability 2**-53 per word
        out[bad] = entropy.words(bad.size)
        bad = bad[(out[bad] >> _SHIFT) == 0]
    return out


def _uniform_from(words: U64) -> F64:
    """The top 53 bits of each word as k / 2**53 (exact), in (0, 1) for the words of ``_nonzero_words``."""
    return (words >> _SHIFT).astype(np.float64) * _ULP


def _signs_from(words: U64, bit: int = 0) -> F64:
    """+1.0 or -1.0 from one of the low (unused) bits of each word."""
    return 1.0 - 2.0 * ((words >> np.uint64(bit)) & np.uint64(1)).astype(np.float64)


def fair_bits(n: int) -> F64:
    """``n`` independent fair bits as 0.0 or 1.0 (the low bit of one fresh word each)."""
    return (entropy.words(_check_count(n)) & np.uint64(1)).astype(np.float64)


def uniform_open(n: int) -> F64:
    """``n`` draws of U = k / 2**53, k uniform on {1, ..., 2**53 - 1}: uniform on (0, 1), never 0 or 1."""
    return _uniform_from(_nonzero_words(_check_count(n)))


def standard_normal(n: int) -> F64:
    """``n`` draws of N(0, 1) by the inverse CDF ``ndtri`` of a 53-bit uniform (tails cut at ~8.2)."""
    return np.asarray(special.ndtri(uniform_open(n)), dtype=np.float64)


def standard_laplace(n: int) -> F64:
    """``n`` draws of Laplace(1) (density e^{-|z|}/2), discretised on the grid 2**-48.

    K ~ discrete Laplace with P(K = k) proportional to exp(-|k| / 2**48), sampled exactly
    (CKS20 Alg. 2, ``dpsense.noise.exact``); the output is K * 2**-48 (exact for |K| < 2**53).
    Small requests come from the pre-filled pool so that a release's duration does not depend on them.
    """
    n = _check_count(n)
    draws = (
        pool.pooled_discrete_laplace(_LAPLACE_SCALE, n) if n <= POOL_MAX else exact.discrete_laplace(_LAPLACE_SCALE, n)
    )
    return np.ldexp(draws.astype(np.float64), -LAPLACE_RESOLUTION_BITS)


def standard_cauchy(n: int) -> F64:
    """``n`` draws of the standard Cauchy (density 1/(pi (1 + z**2))).

    |C| = tan(pi V/4) or its reciprocal, each with probability 1/2, with a random sign: exact in
    real arithmetic and accurate to a few ulps in both tails.
    """
    words = _nonzero_words(_check_count(n))
    r = np.tan(_uniform_from(words) * (np.pi / 4))
    magnitude = np.where((words & np.uint64(2)) != 0, 1.0 / r, r)
    return np.asarray(_signs_from(words) * magnitude, dtype=np.float64)


def _check_range(name: str, value: float, bounds: tuple[float, float]) -> float:
    v = float(value)
    if not bounds[0] <= v <= bounds[1]:
        raise UsageError(
            f"{name} must lie in [{bounds[0]:g}, {bounds[1]:g}] for the float samplers",
            value,
            f"pass a public {name} in that range",
        )
    return v


def check_gamma(gamma: float) -> float:
    """A tail exponent in ``GAMMA_RANGE`` (the range ``polynomial`` serves without underflow)."""
    return _check_range("gamma", gamma, GAMMA_RANGE)


def check_dof(dof: float) -> float:
    """Degrees of freedom in ``DOF_RANGE`` (the range ``student_t`` serves without underflow)."""
    return _check_range("dof", dof, DOF_RANGE)


def check_sigma(sigma: float) -> float:
    """A log-normal sigma in (0, 8] (e^{8 Y} stays finite for |Y| <= 8.3)."""
    s = float(sigma)
    if not (0.0 < s <= 8.0):
        raise UsageError("the log-normal sigma must lie in (0, 8]", sigma, "pass a public sigma, e.g. sigma=0.5")
    return s


def _beta_odds(a: float, b: float, u: F64) -> F64:
    """W / (1 - W) for W = the u-quantile of Beta(a, b), accurate in both tails.

    For u <= 1/2, W = betaincinv(a, b, u) (small W is accurate) and 1 - W is formed directly;
    for u > 1/2, V = 1 - W = betaincinv(b, a, 1 - u) (1 - u is exact for u on the 2**-53 grid).
    """
    lower = u <= 0.5
    w = np.empty_like(u)
    v = np.empty_like(u)
    w[lower] = special.betaincinv(a, b, u[lower])
    v[lower] = 1.0 - w[lower]
    v[~lower] = special.betaincinv(b, a, 1.0 - u[~lower])
    w[~lower] = 1.0 - v[~lower]
    return np.asarray(w / v, dtype=np.float64)


def polynomial(n: int, gamma: float) -> F64:
    """``n`` draws of the density proportional to 1 / (1 + |z|**gamma), 1.1 <= gamma <= 16.

    |Z|**gamma / (1 + |Z|**gamma) ~ Beta(1/gamma, 1 - 1/gamma) (derivation in the module
    docstring); |Z| is its inverse-CDF transform, with an independent random sign.
    """
    g = check_gamma(gamma)
    words = _nonzero_words(_check_count(n))
    odds = _beta_odds(1.0 / g, 1.0 - 1.0 / g, _uniform_from(words))
    return np.asarray(_signs_from(words) * odds ** (1.0 / g), dtype=np.float64)


def student_t(n: int, dof: float) -> F64:
    """``n`` draws of Student's t with ``dof`` degrees of freedom (1/4 <= dof <= 10**6).

    T**2 / (d + T**2) ~ Beta(1/2, d/2): |T| = sqrt(d W / (1 - W)) by the inverse incomplete beta.
    """
    d = check_dof(dof)
    words = _nonzero_words(_check_count(n))
    odds = _beta_odds(0.5, d / 2.0, _uniform_from(words))
    return np.asarray(_signs_from(words) * np.sqrt(d * odds), dtype=np.float64)


def laplace_log_normal(n: int, sigma: float) -> F64:
    """``n`` draws of Z = X e^{sigma Y}, X ~ Laplace(1), Y ~ N(0, 1) independent (BS19 section 3.1)."""
    s = check_sigma(sigma)
    n = _check_count(n)
    return np.asarray(standard_laplace(n) * np.exp(s * standard_normal(n)), dtype=np.float64)


def uniform_log_normal(n: int, sigma: float) -> F64:
    """``n`` draws of Z = U e^{sigma Y}, U ~ Uniform[-1, 1], Y ~ N(0, 1) independent (BS19 section 3.1)."""
    s = check_sigma(sigma)
    words = _nonzero_words(_check_count(n))
    u = _signs_from(words) * _uniform_from(words)
    return np.asarray(u * np.exp(s * standard_normal(words.size)), dtype=np.float64)
