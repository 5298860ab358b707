"""Float-safe noise: snap the value to a power-of-two grid, add exact integer noise on that grid.

Textbook floating-point Laplace (``f(x) - b*sign(u)*log(1-2|u|)``) is broken by Mironov's attack
(CCS 2012): the set of doubles it can output depends on ``f(x)``. dpsense never samples noise in
floating point. Instead (the approach of Google's secure-noise note, with CKS 2020 samplers):

1. a granularity ``g = 2**k`` is chosen from PUBLIC parameters only (the declared sensitivity and
   epsilon/delta), never from the value or from a data-dependent scale;
2. the value is snapped to the grid, ``n = rint(v / g)`` (exact: dividing by a power of two and
   rounding to an integer are exact in IEEE arithmetic);
3. exact integer noise ``K`` (discrete Laplace or discrete Gaussian, ``dpsense.noise.exact``) is
   added and the output is ``(n + K) * g``.

Snapping moves each coordinate by at most g/2, so neighbouring values ``v`` and ``v'`` with
``|v - v'| <= Delta`` snap to integers at most ``floor(Delta/g) + 1`` apart (per coordinate; see
``sensitivity_units_l1``/``_l2`` for vectors): the integer mechanism is calibrated to that, i.e. to
the sensitivity plus one grid step. The final float addition ``n + K`` is correctly rounded (IEEE),
so when ``|n + K| >= 2**53`` its rounding is a deterministic function of the exact integer
``n + K`` -- post-processing of a private value -- and every output is a multiple of ``g``.
"""

from __future__ import annotations

from fractions import Fraction
from math import floor, isqrt

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InternalError

F64 = NDArray[np.float64]


#: The largest grid exponent k a noise plan may use: a draw of up to 2^53 steps of 2^k, and the value it is
#: added to, stay finite doubles (2^(53 + 960) < 2^1023). The scale checks (``laplace_scale_ok``,
#: ``gaussian_scale_ok``) refuse plans beyond it, so a release never unsnaps to infinity.
MAX_NOISE_EXPONENT = 960


def floor_log2(value: Fraction) -> int:
    """``floor(log2(value))`` for a positive rational, exactly."""
    if value <= 0:
        raise InternalError("floor_log2 of a non-positive value")
    k = value.numerator.bit_length() - value.denominator.bit_length()
    # 2**k <= value < 2**(k+1) after at most one correction either way.
    while Fraction(2) ** k > value:
        k -= 1
    while Fraction(2) ** (k + 1) <= value:
        k += 1
    return k


def granularity_exponent(scale: Fraction, resolution_bits: int) -> int:
    """The exponent k of the grid 2**k that puts ``scale`` in [2**resolution_bits, 2**(resolution_bits+1)) steps.

    ``scale`` must be computed from public parameters only (sensitivity / epsilon, a calibrated sigma).
    """
    return floor_log2(scale) - resolution_bits


def sensitivity_units_l1(sensitivity: Fraction, k: int, dimension: int) -> int:
    """L1 sensitivity, in grid steps 2**k, of the snapped vector.

    floor(Delta/g) + d: each coordinate's rounding adds less than one step.
    """
    return floor(sensitivity / Fraction(2) ** k) + dimension


def sensitivity_units_l2(sensitivity: Fraction, k: int, dimension: int) -> Fraction:
    """An upper bound on the L2 sensitivity, in grid steps, of the snapped vector.

    For d = 1 it is the integer floor(Delta/g) + 1. For d > 1: ||r(a) - r(b)|| <= ||a - b||/g + sqrt(d)
    (triangle inequality; each coordinate's rounding difference is below 1); the square root is rounded up.
    """
    if dimension == 1:
        return Fraction(floor(sensitivity / Fraction(2) ** k) + 1)
    root_d_up = Fraction(isqrt(dimension * 10**12) + 1, 10**6)
    return sensitivity / Fraction(2) ** k + root_d_up


def snap(values: F64, k: int) -> F64:
    """``rint(v / 2**k)`` as float64 integers (exact)."""
    return np.rint(np.ldexp(np.asarray(values, dtype=np.float64), -k))


def unsnap(snapped: F64, noise_units: NDArray[np.int64], k: int) -> F64:
    """``(snapped + noise) * 2**k``; the addition is correctly rounded, the scaling exact."""
    if noise_units.size and int(np.abs(noise_units).max()) >= 1 << 53:
        raise InternalError("grid noise beyond 2^53 steps")
    return np.ldexp(snapped + noise_units.astype(np.float64), k)
