"""Continuous noise in float64 for smooth-sensitivity releases, drawn from the OS CSPRNG.

Provides uniform, normal, Laplace(1), Cauchy, polynomial-tail, Student's t, LLN and ULN samplers,
vectorised, reading randomness only from ``dpsense.noise.entropy``; each construction is exact in
real arithmetic and keeps tail precision (docs/math/floating-point.md §9.2). No guarantee of its own:
the smooth releases of ``dpsense.mechanisms.smooth_noise`` state theirs for the ideal real-valued
noise, and the float law is mitigated by a public grid and clamp, a heuristic with no claimed bound
(docs/math/smooth-sensitivity.md §3.3, pitfall 4; Mironov, CCS 2012). Public ranges, enforced:
gamma in [1.1, 16], dof in [1/4, 10**6], sigma in (0, 8]. Only the discrete Laplace is a rejection
sampler; requests of at most ``POOL_MAX`` values come from ``dpsense.noise.pool``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

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
    from scipy import special  # imported when first used: scipy costs a CLI's start half a second

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
    from scipy import special

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

    |Z|**gamma / (1 + |Z|**gamma) ~ Beta(1/gamma, 1 - 1/gamma) (derivation in
    docs/math/floating-point.md §9.2); |Z| is its inverse-CDF transform, with an independent random sign.
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
