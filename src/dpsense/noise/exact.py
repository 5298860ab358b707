"""Exact samplers in integer arithmetic, vectorised over numpy arrays (Canonne-Kamath-Steinke 2020).

All randomness is uniform integers drawn from ``dpsense.noise.entropy``; all arithmetic is on
integers (int64 lanes whose range is checked, Python ints beyond it), so the output distributions
are exactly the stated ones, with no floating-point approximation:

* ``uniform_below``: uniform on {0, ..., m-1} by masked rejection (no modulo bias).
* ``bernoulli_exp``: Bernoulli(exp(-num/den)) (CKS20 Algorithm 1: floor part by repeated
  Bernoulli(exp(-1)), fractional part by the alternating-series loop).
* ``discrete_laplace``: P(y) proportional to exp(-|y| s / t) (CKS20 Algorithm 2).
* ``discrete_gaussian``: P(y) proportional to exp(-y^2 / (2 sigma2)) (CKS20 Algorithm 3).

Every loop runs on arrays with an active-lane mask: each pass draws fresh uniforms for the lanes
still running and retires the ones that finished (docs/math/floating-point.md). The number of passes
depends on the noise drawn, so single releases take their noise from ``dpsense.noise.pool``, which
fills these arrays ahead of the release.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InternalError, UsageError
from dpsense.noise import entropy

I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]

#: int64 lanes hold products strictly below this; larger values go to the Python-int path.
INT64_SAFE = 1 << 62
#: Largest discrete-Laplace scale numerator served by the vectorised path.
MAX_LAPLACE_T = 1 << 52


def _bit_length(values: I64) -> I64:
    """Bit length of each non-negative lane (an over-estimate by one near powers of two is harmless)."""
    _, exponent = np.frexp(values.astype(np.float64))
    return exponent.astype(np.int64)


def uniform_below_scalar(m: int, n: int) -> I64:
    """``n`` independent uniform integers in {0, ..., m-1} for one bound ``1 <= m < 2**62``.

    A w-bit uniform word is accepted when below the largest multiple of m that fits,
    ``limit = floor(2**w / m) * m``, and reduced modulo m: exact, with rejection probability below
    m/2**w. w = 16 for m <= 2**8, 32 for m <= 2**28, 63 beyond (rejection below 1/256, 1/16, 1/2).
    """
    if not 1 <= m < INT64_SAFE:
        raise InternalError(f"uniform_below_scalar bound out of range: {m.bit_length()} bits")
    width = 16 if m <= 1 << 8 else 32 if m <= 1 << 28 else 63
    limit = ((1 << width) // m) * m
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        draw = need + need // 16 + 8
        if width == 16:
            raw = entropy.words16(draw).astype(np.int64)
        elif width == 32:
            raw = entropy.words32(draw).astype(np.int64)
        else:
            raw = (entropy.words(draw) >> np.uint64(1)).astype(np.int64)
        ok = raw[raw < limit][:need] % m
        out[filled : filled + ok.size] = ok
        filled += ok.size
    return out


def uniform_below(m: I64) -> I64:
    """One uniform integer in {0, ..., m_i - 1} per lane (each ``1 <= m_i < 2**62``)."""
    m = np.asarray(m, dtype=np.int64)
    if m.size == 0:
        return np.empty(0, dtype=np.int64)
    if int(m.min()) < 1 or int(m.max()) >= INT64_SAFE:
        raise InternalError("uniform_below bound out of range")
    mask = ((np.int64(1) << _bit_length(m - 1)) - 1).astype(np.uint64)
    out = np.empty(m.shape, dtype=np.int64)
    pending = np.arange(m.size)
    while pending.size:
        raw = ((entropy.words(pending.size) >> np.uint64(1)) & mask[pending]).astype(np.int64)
        ok = raw < m[pending]
        out[pending[ok]] = raw[ok]
        pending = pending[~ok]
    return out


def _python_uniform_below(m: int) -> int:
    """Uniform integer in {0, ..., m-1} for an arbitrary-size ``m`` (Python-int path)."""
    bits = (m - 1).bit_length()
    n_bytes = (bits + 7) // 8 or 1
    while True:
        value = int.from_bytes(entropy.random_bytes(n_bytes), "little") >> (8 * n_bytes - bits)
        if value < m:
            return value


def python_bernoulli_exp(num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for any non-negative Python ints (CKS20 Alg. 1), scalar path."""
    while num > den:
        if not python_bernoulli_exp(1, 1):
            return False
        num -= den
    k = 1
    while _python_uniform_below(den * k) < num:
        k += 1
    return k % 2 == 1


def _bernoulli_exp_fraction(num: I64, den: I64 | int) -> BOOL:
    """Bernoulli(exp(-num/den)) per lane for 0 <= num <= den: the alternating-series loop.

    Lanes that reach round k have all drawn k-1 successes, so every active lane shares k.
    """
    n = num.size
    result = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    scalar_den = isinstance(den, int)
    k = 1
    while active.size:
        if scalar_den:
            bound = int(den) * k
            if bound >= INT64_SAFE:
                break
            draws = uniform_below_scalar(bound, active.size)
        else:
            dk = np.asarray(den)[active]
            if int(dk.max()) >= INT64_SAFE // k:
                break
            draws = uniform_below(dk * k)
        success = draws < num[active]
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    # Lanes past the int64 range (probability below 1/k! for round k) finish exactly in Python ints.
    for lane in active:
        d = int(den) if scalar_den else int(np.asarray(den)[lane])
        kk = k
        while _python_uniform_below(d * kk) < int(num[lane]):
            kk += 1
        result[lane] = kk % 2 == 1
    return result


def bernoulli_exp_one(n: int) -> BOOL:
    """``n`` draws of Bernoulli(exp(-1)) (the alternating series with gamma = 1; round 1 always succeeds)."""
    result = np.empty(n, dtype=np.bool_)
    active = np.arange(n)
    k = 2
    while active.size:
        success = uniform_below_scalar(k, active.size) == 0
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def bernoulli_exp(num: I64, den: I64 | int) -> BOOL:
    """Bernoulli(exp(-num_i/den_i)) per lane, exactly, for int64 ``num >= 0`` and ``den >= 1``."""
    num = np.asarray(num, dtype=np.int64)
    if np.ndim(den) == 0:
        den = int(den)
    whole = num // den
    frac = num - whole * den
    result = _bernoulli_exp_fraction(frac, den)
    # gamma = whole + frac: exp(-gamma) = exp(-1)^whole * exp(-frac), independent factors.
    j = 1
    alive = np.flatnonzero(result & (whole >= j))
    while alive.size:
        ok = bernoulli_exp_one(alive.size)
        result[alive[~ok]] = False
        j += 1
        alive = alive[ok]
        alive = alive[whole[alive] >= j]
    return result


def geometric_exp_one(n: int) -> I64:
    """``n`` draws of V with P(V >= k) = exp(-k): successes of Bernoulli(exp(-1)) before a failure."""
    count = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ok = bernoulli_exp_one(active.size)
        active = active[ok]
        count[active] += 1
    return count


def _random_bits(n: int) -> BOOL:
    return (entropy.words32((n + 31) // 32)[:, None] >> np.arange(32, dtype=np.uint32) & 1).ravel()[:n].astype(np.bool_)


def discrete_laplace_scale_ok(scale: Fraction) -> bool:
    """Whether ``discrete_laplace`` serves ``scale = t/s``: positive, numerator t below 2^52, denominator s below 2^62.

    The one home of the sampler's limit: the release system's admission step checks it on public
    parameters before any charge, and ``discrete_laplace`` refuses the same scales. The denominator is
    an int64 divisor of the draws (a huge ε, e.g. 1e100, gives a scale whose denominator is not).
    """
    scale = Fraction(scale)
    return scale > 0 and scale.numerator < MAX_LAPLACE_T and scale.denominator < INT64_SAFE


def geometric_scale_ok(sensitivity: int | Fraction, epsilon: Fraction) -> bool:
    """Whether the geometric mechanism's scale ``sensitivity / epsilon`` is one the exact sampler serves."""
    eps = Fraction(epsilon)
    return eps > 0 and discrete_laplace_scale_ok(Fraction(sensitivity) / eps)


def discrete_gaussian_variance_ok(sigma2: Fraction) -> bool:
    """Whether ``discrete_gaussian`` serves ``sigma2`` (its proposal's scale is floor(sqrt(sigma2)) + 1).

    The proposal is a discrete Laplace draw, so the limit is ``discrete_laplace_scale_ok``.
    """
    sigma2 = Fraction(sigma2)
    return sigma2 > 0 and discrete_laplace_scale_ok(Fraction(isqrt(sigma2.numerator // sigma2.denominator) + 1))


def discrete_laplace(scale: Fraction, n: int) -> I64:
    """``n`` draws with P(y) proportional to exp(-|y| / scale), ``scale = t/s`` (CKS20 Alg. 2).

    Guarantee (geometric mechanism): adding this noise to an integer query of L1 sensitivity
    ``Delta`` is epsilon-DP for ``scale >= Delta / epsilon``.
    """
    scale = Fraction(scale)
    if scale <= 0:
        raise UsageError("the discrete Laplace scale must be > 0", str(scale), "pass sensitivity/epsilon > 0")
    t, s = scale.numerator, scale.denominator
    if not discrete_laplace_scale_ok(scale):
        raise UsageError(
            "the exact discrete Laplace sampler supports scale numerators below 2^52 and denominators below 2^62",
            f"{t.bit_length()} and {s.bit_length()} bits",
            "round the scale up to a rational with a smaller numerator (dpsense.noise.grid does this), or use a"
            " smaller epsilon",
        )
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        draw = need + (need * 3) // 5 + 64  # acceptance of the first step is 1 - 1/e ~ 0.63
        u = uniform_below_scalar(t, draw)
        u = u[_bernoulli_exp_fraction(u, t)]
        v = geometric_exp_one(u.size)
        if v.size and int(v.max()) >= INT64_SAFE // t:
            raise InternalError("geometric draw beyond int64 range")
        y = (u + t * v) // s
        negative = _random_bits(y.size)
        keep = ~(negative & (y == 0))
        values = np.where(negative, -y, y)[keep][:need]
        out[filled : filled + values.size] = values
        filled += values.size
    return out


def discrete_gaussian(sigma2: Fraction, n: int) -> I64:
    """``n`` draws with P(y) proportional to exp(-y^2 / (2 sigma2)) (CKS20 Alg. 3).

    Guarantee: adding this noise to an integer query of L2 sensitivity ``Delta`` is
    ``Delta^2/(2 sigma2)``-zCDP and (epsilon, delta)-DP with the exact delta of CKS20 Thm 7.
    """
    sigma2 = Fraction(sigma2)
    if sigma2 <= 0:
        raise UsageError("the discrete Gaussian variance must be > 0", str(sigma2), "pass sigma2 > 0")
    p, q = sigma2.numerator, sigma2.denominator
    t = isqrt(p // q) + 1
    den = 2 * p * q * t * t
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        draw = need + need // 2 + 16
        y = discrete_laplace(Fraction(t), draw)
        centred = np.abs(y) * (q * t) - p if den < INT64_SAFE and q * t < INT64_SAFE else None
        accept = np.zeros(draw, dtype=np.bool_)
        if centred is not None:
            small = np.abs(centred) < (1 << 31)
            lanes = np.flatnonzero(small)
            accept[lanes] = bernoulli_exp(centred[lanes] ** 2, den)
            big = np.flatnonzero(~small)
        else:
            big = np.arange(draw)
        for lane in big:  # rare (or all lanes when sigma2 is beyond the int64 path): exact Python ints
            c = abs(int(y[lane])) * q * t - p
            accept[lane] = python_bernoulli_exp(c * c, den)
        values = y[accept][:need]
        out[filled : filled + values.size] = values
        filled += values.size
    return out
