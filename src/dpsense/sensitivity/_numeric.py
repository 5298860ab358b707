"""Shared numeric helpers for the order-statistic and trimmed-mean sensitivities.

Bounds parsing, input checks, and differences rounded *upward* exactly (so every computed U_k is
never below its real-number value, and the monotonicity of the families survives floating point).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError

F64 = NDArray[np.float64]


class FloatInterval(Protocol):
    """Anything that states its public bounds as doubles inside the exact ones (``Bounds`` does)."""

    def float_interval(self) -> tuple[float, float]:
        """The doubles (lo, hi) that every clipped value lies between."""
        ...


#: Public clipping bounds: a ``Bounds`` declaration or a pair of numbers (L, U).
BoundsLike = FloatInterval | tuple[float, float]


# --------------------------------------------------------------------------------------------------
# Validation and upward-rounded arithmetic (shared with ``trimmed_mean``).


def bounds_interval(bounds: BoundsLike) -> tuple[float, float]:
    """The clipping interval (L, U) as doubles, refusing reversed, non-finite or too wide bounds.

    Raises:
        InvalidBounds: if L > U, a bound is not finite, or U - L overflows a double.

    """
    if isinstance(bounds, tuple | list):
        try:
            lower, upper = bounds
            lo, hi = float(lower), float(upper)
        except (TypeError, ValueError):
            raise InvalidBounds("bounds must be a pair of numbers", bounds, "pass bounds=(lower, upper)") from None
    elif callable(getattr(bounds, "float_interval", None)):
        lo, hi = bounds.float_interval()
    else:
        raise InvalidBounds("bounds must be a pair (L, U) or a Bounds", bounds, "pass bounds=Bounds(lower, upper)")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidBounds("bounds must be finite", (lo, hi), "declare finite public bounds")
    if lo > hi:
        raise InvalidBounds("lower bound must not exceed upper bound", (lo, hi), "swap the bounds")
    if not math.isfinite(sub_up(hi, lo)):
        raise InvalidBounds("U - L must be a finite double", (lo, hi), "choose bounds below 1e307 in magnitude")
    return lo, hi


def check_beta(beta: float) -> float:
    """The smoothing parameter as a float, refusing anything but a finite beta > 0."""
    try:
        b = float(beta)
    except (TypeError, ValueError):
        b = math.nan
    if not (b > 0 and math.isfinite(b)):
        raise InvalidPrivacyParameter(
            "the smoothing parameter beta must be finite and > 0",
            beta,
            "derive beta from (epsilon, delta) and the noise family (docs/math/smooth-sensitivity.md §3.3), "
            "never from the data",
        )
    return b


def check_count(value: object, *, name: str, minimum: int) -> int:
    """A public integer >= ``minimum`` (rank, n, trim, cap, C)."""
    if isinstance(value, np.integer):
        value = int(value)
    if not integer_in(value, minimum):
        raise UsageError(f"{name} must be an integer >= {minimum}", value, f"declare {name} as a public integer")
    return value


def finite_values(values: ArrayLike) -> F64:
    """Values as a 1-D float64 array, refusing NaN and infinities (judged without naming any value).

    Raises:
        InvalidData: non-numeric input, not 1-D, or NaN / infinite entries.

    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":
        raise InvalidData("values must be numeric", f"dtype {arr.dtype}", "cast the column to float first")
    if arr.ndim != 1:
        raise InvalidData("values must be a 1-D array", f"{arr.ndim}-d array", "pass one value per record")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise InvalidData(
            "values must be finite", "NaN or infinite entries", "resolve missing values by a declared policy first"
        )
    return arr


def clipped_sorted(sorted_values: ArrayLike, lo: float, hi: float) -> F64:
    """Sorted input clipped to [lo, hi] (clipping keeps the order), refusing unsorted input.

    Raises:
        InvalidData: if the input is not sorted ascending (a caller bug; no value is named).

    """
    x = np.clip(finite_values(sorted_values), lo, hi)
    if x.size > 1 and bool(np.any(x[1:] < x[:-1])):
        raise InvalidData("sorted_values must be sorted ascending", "unsorted input", "pass np.sort(values)")
    return x


def sub_up(a: float, b: float) -> float:
    """The smallest double >= the exact real a - b."""
    d = a - b
    if math.isfinite(d) and Fraction(a) - Fraction(b) > Fraction(d):
        d = math.nextafter(d, math.inf)
    return d


def div_up(a: float, c: int) -> float:
    """The smallest double >= the exact real a / c, for a >= 0 and an integer c >= 1."""
    q = a / c
    if Fraction(q) * c < Fraction(a):
        q = math.nextafter(q, math.inf)
    return q


def max_diff_up(hi: F64, lo: F64) -> float:
    """The smallest double >= max_t (hi[t] - lo[t]) in exact arithmetic, for hi >= lo elementwise.

    Round-to-nearest is monotone, so the exact maximiser is among the entries whose rounded
    difference equals the rounded maximum; an error-free TwoSum on those tells whether the exact
    maximum lies above it (then the next double up is the upward rounding).
    """
    d = hi - lo
    m = float(d.max())
    if m <= 0.0:  # with gradual underflow a - b rounds to 0 only when a == b: exact
        return 0.0
    idx = np.flatnonzero(d == m)
    a, b, s = hi[idx], lo[idx], d[idx]
    b_virtual = s - a
    a_virtual = s - b_virtual
    err = (a - a_virtual) + (-b - b_virtual)  # a - b == s + err exactly (Knuth's TwoSum)
    return math.nextafter(m, math.inf) if bool(np.any(err > 0)) else m


def diff_up(hi: F64, lo: F64) -> F64:
    """Elementwise upward-rounded hi - lo (vectorised TwoSum)."""
    s = hi - lo
    b_virtual = s - hi
    a_virtual = s - b_virtual
    err = (hi - a_virtual) + (-lo - b_virtual)
    return np.where(err > 0, np.nextafter(s, np.inf), s)
