"""Exact numbers for privacy parameters.

A user's ``epsilon=0.1`` means the decimal one tenth, so parameters are converted through their
shortest decimal string (``repr`` of a float), never with ``Fraction(float)``: with the latter,
3 x 0.1 exceeds 0.3 and 1000 x 0.01 exceeds 10. Quantities that have no exact rational value
(square roots, logarithms) are bounded with 40-digit decimal arithmetic and rounded *up* to a
rational, never down, so a budget computed from them is never understated.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Context, Decimal
from fractions import Fraction
from numbers import Rational

from dpsense.core.errors import InvalidBounds, InvalidPrivacyParameter

#: Anything a user may pass where dpsense expects an exact number.
NumberLike = int | float | str | Fraction | Decimal

_CTX = Context(prec=40)
#: Slack added before rounding up; far above the 40-digit arithmetic's error, far below any budget.
_SLACK = Decimal("1e-30")

#: The rounding rule's one tolerance (docs/math/floating-point.md §9.1): a float64 result of dpsense's
#: short formulas (a few logs, exps and products) is within 1e-12 relative of the exact value, so a
#: float that *bounds* a privacy or accuracy quantity is widened outward by this margin.
FLOAT_MARGIN = 1e-12
#: A calibration evaluated in floats aims at δ (1 − DELTA_SLACK) (docs/math/floating-point.md §9.1):
#: the float error of δ(σ) or δ(ε) (about 1e-13 relative) cannot then carry the true δ past the target.
DELTA_SLACK = 1e-9


def ratio_text(value: Fraction) -> str:
    """An exact number as ``"n/d"`` in lowest terms (``Fraction`` keeps it reduced; ``"1/1"`` for one).

    The one spelling of exact numbers in plans, queries, profiles, policies and the ledger.
    """
    return f"{value.numerator}/{value.denominator}"


def parse_ratio(text: str) -> Fraction:
    """Inverse of ``ratio_text`` (a bare integer ``"n"`` reads as n/1)."""
    num, _, den = text.partition("/")
    return Fraction(int(num), int(den or "1"))


def to_fraction(value: NumberLike, *, name: str = "value") -> Fraction:
    """Convert a user-supplied number to an exact ``Fraction`` through its decimal string.

    Raises:
        InvalidPrivacyParameter: for NaN, infinities, booleans and non-numbers.

    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction, Decimal, Rational)):
        raise InvalidPrivacyParameter(
            f"{name} must be a number", value, f"pass {name} as an int, float, decimal string or Fraction"
        )
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Rational):
        return Fraction(value.numerator, value.denominator)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidPrivacyParameter(f"{name} must be finite", value, f"pass a finite {name}")
        return Fraction(repr(float(value)))
    try:
        dec = Decimal(str(value).strip())
    except ArithmeticError:
        raise InvalidPrivacyParameter(
            f"{name} must be a decimal number", value, f"write {name} like '0.5' or '1e-6'"
        ) from None
    if not dec.is_finite():
        raise InvalidPrivacyParameter(f"{name} must be finite", value, f"pass a finite {name}")
    return Fraction(dec)


def decimal_of(value: Fraction) -> Decimal:
    """The 40-digit decimal closest to ``value`` (for bounding irrational quantities)."""
    return _CTX.divide(Decimal(value.numerator), Decimal(value.denominator))


def ceil_fraction(value: Decimal, digits: int = 20) -> Fraction:
    """A rational upper bound on a 40-digit decimal, rounded up to ``digits`` significant digits."""
    bumped = _CTX.add(value, _SLACK)
    rounded = Context(prec=digits, rounding=ROUND_CEILING).plus(bumped)
    return Fraction(rounded)


def ceil_fraction_float(value: float, digits: int = 15) -> Fraction:
    """A rational upper bound on a float result whose relative error is below ``FLOAT_MARGIN``."""
    if not math.isfinite(value):
        raise ValueError("ceil_fraction_float needs a finite value")
    margin = abs(value) * FLOAT_MARGIN + 1e-300
    return Fraction(Context(prec=digits, rounding=ROUND_CEILING).plus(Decimal(value + margin)))


def round_up(value: float, *, scale: float = 0.0) -> Fraction:
    """A rational upper bound on a float result, with an absolute margin for cancellation.

    ``scale`` is the size of the largest intermediate the float result was computed from; the
    margin ``FLOAT_MARGIN * (1 + scale)`` exceeds the accumulated float64 error of the short
    formulas of dpsense by several orders of magnitude.
    """
    if not math.isfinite(value):
        raise ValueError("round_up needs a finite value")
    bound = value + FLOAT_MARGIN * (1.0 + abs(scale))
    if bound <= 0:
        return Fraction(0)
    return ceil_fraction_float(bound)


def widen(bound: float) -> float:
    """A non-negative float bound (an error bound, a shortfall) widened outward by ``FLOAT_MARGIN``."""
    return bound * (1.0 + FLOAT_MARGIN)


def inward_interval(low: Fraction, high: Fraction) -> tuple[float, float]:
    """The doubles closest to the exact interval [low, high] from the inside.

    ``lo`` is the smallest double >= ``low`` and ``hi`` the largest double <= ``high``, so a value
    clipped to [lo, hi] lies in the declared [low, high] on which a sensitivity is computed
    (``float(Fraction(1, 10))`` is above 1/10: a clip rounded to nearest could leave the interval).
    For a double x, ``low <= x <= high`` holds exactly when ``lo <= x <= hi``.

    Raises:
        InvalidBounds: if low > high, or no finite double lies in [low, high].

    """
    if low > high:
        raise InvalidBounds("clipping bounds must satisfy low <= high", (low, high), "swap the bounds")
    lo, hi = double_at_or_above(low), -double_at_or_above(-high)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise InvalidBounds(
            "no finite double lies inside the bounds",
            (str(low), str(high)),
            "widen the bounds or use bounds that are doubles",
        )
    return lo, hi


def double_at_or_above(value: Fraction) -> float:
    """The smallest double >= ``value`` (-max for a value below the double range, inf above it).

    A bound stated as a float is never rounded down.
    """
    try:
        nearest = float(value)
    except OverflowError:
        nearest = math.inf if value > 0 else -math.inf
    if nearest == -math.inf:
        return math.nextafter(-math.inf, 0.0)  # the most negative double
    if math.isfinite(nearest) and Fraction(nearest) < value:
        return math.nextafter(nearest, math.inf)
    return nearest


def dec_sqrt(value: Decimal) -> Decimal:
    """40-digit square root."""
    return _CTX.sqrt(value)


def dec_ln(value: Decimal) -> Decimal:
    """40-digit natural logarithm."""
    return _CTX.ln(value)


def dec_exp(value: Decimal) -> Decimal:
    """40-digit exponential."""
    return _CTX.exp(value)
