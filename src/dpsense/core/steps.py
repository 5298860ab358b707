"""A column's declared recording step: its values are multiples of a decimal s = m 10^e (public).

A steward who knows that a column is recorded at a fixed resolution (tenths of a degree, hundredths of
a carat, incomes rounded to the thousand, grams in steps of 25) declares that step; the quantiles'
exponential mechanism then chooses among the multiples of s inside the bounds, so a median inside a
block of tied recorded values is released at that value (docs/math/exponential-mechanism.md §8.5).

A step is a fact about how values are recorded, not a bound: nothing is refused or clipped by it.
Each record is rounded to the nearest multiple (a public map of the record alone), so a wrong
declaration costs accuracy (at most half a step beyond the mechanism's own error), never privacy.

Only decimals are steps: s = m 10^e with an integer m >= 1 and |e| <= 22 (10^|e| is an exact double), so
the double of every point k s is one correctly rounded operation on exact operands, the double its
decimal text parses to, and a recorded value equals its point exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike, to_fraction

#: Points k m stay within ±2^50: exact doubles, and a record's scaled value rounds to its own point.
_EXACT_UNITS = 1 << 50
#: Decimal exponents whose power of ten is an exact double (10^22 is the largest).
_LARGEST_EXPONENT = 22
#: Multipliers up to 2^31: the step's digits, e.g. 25 in 0.25 or 2.5 (m = 25, e = -2 or -1).
_LARGEST_MULTIPLIER = 1 << 31

STEP_RULE = "a step is a positive decimal number such as 0.01, 0.5, 25 or 1000 (m x 10^e, m an integer below 2^31)"


@dataclass(frozen=True)
class DecimalStep:
    """The step s = multiplier x 10^exponent, with the multiplier not divisible by 10."""

    multiplier: int
    exponent: int

    @property
    def value(self) -> Fraction:
        """S as an exact fraction."""
        return Fraction(self.multiplier) * Fraction(10) ** self.exponent

    def text(self) -> str:
        """The decimal spelling of s (``"0.01"``, ``"25"``, ``"1000"``): how profiles and plans show it."""
        digits = str(self.multiplier)
        if self.exponent >= 0:
            return digits + "0" * self.exponent
        whole, frac = digits[: self.exponent] or "0", digits[self.exponent :].rjust(-self.exponent, "0")
        return f"{whole}.{frac}"

    def points(self, low: float, high: float) -> tuple[int, int] | None:
        """The indices k = first..last of the points whose doubles lie in [L, U]; ``None`` when there is none.

        Decided on the doubles the mechanism releases (``double``), so a released point is a point of any
        interval that ends at it (a split of the joint quantiles). Also ``None`` when a point leaves ±2^50
        step units (k m), where doubles stop being exact.
        """
        step = self.value
        first, last = math.ceil(Fraction(low) / step), math.floor(Fraction(high) / step)
        if max(abs(first), abs(last)) * self.multiplier >= _EXACT_UNITS:
            return None
        # the double of k s is within half an ulp of k s: only the points next to the exact ends can move
        if self.double(first - 1) >= low:
            first -= 1
        elif self.double(first) < low:
            first += 1
        if self.double(last + 1) <= high:
            last += 1
        elif self.double(last) > high:
            last -= 1
        return (first, last) if first <= last else None

    def double(self, k: int) -> float:
        """The double of the point k s (the scalar form of ``values``: the same correctly rounded operation)."""
        units = float(k * self.multiplier)
        return units / 10.0 ** (-self.exponent) if self.exponent < 0 else units * 10.0**self.exponent

    def values(self, k: NDArray[np.float64]) -> NDArray[np.float64]:
        """The double nearest each decimal k s: (k m) / 10^-e or (k m) 10^e, one correctly rounded operation."""
        units = k * float(self.multiplier)  # exact: |k m| <= 2^50
        if self.exponent < 0:
            out: NDArray[np.float64] = units / 10.0 ** (-self.exponent)
            return out
        return units * 10.0**self.exponent

    def nearest(self, x: NDArray[np.float64], first: int, last: int) -> NDArray[np.int64]:
        """Each value's nearest point index, clipped to first..last (non-decreasing in x: sorted stays sorted).

        The scaling takes two rounded operations, so a value within a few ulps of a half-step may go to
        either neighbour; that is still a fixed public map of the value alone. A value equal to a point's
        double scales to within 2^-2 of its index (|k| m <= 2^50), so it rounds to its own point.
        """
        scaled = x * 10.0 ** (-self.exponent) if self.exponent < 0 else x / 10.0**self.exponent
        if self.multiplier != 1:
            scaled = scaled / float(self.multiplier)
        return np.clip(np.rint(scaled), first, last).astype(np.int64)

    def holds(self, x: NDArray[np.float64], first: int, last: int) -> NDArray[np.bool_]:
        """Whether each value is the double of a point: x == values(nearest(x, first, last)).

        The same arithmetic as ``nearest`` then ``values`` (the index stays a float: |k m| <= 2^50 is
        exact), with the temporaries reused: a pass over a column costs four array operations.
        """
        power = 10.0 ** abs(self.exponent)
        k = x * power if self.exponent < 0 else x / power  # a new array (x / 1 too): the steps below reuse it
        if self.multiplier != 1:
            k /= float(self.multiplier)
        np.rint(k, out=k)
        np.clip(k, first, last, out=k)
        if self.multiplier != 1:
            k *= float(self.multiplier)
        if self.exponent < 0:
            k /= power
        elif self.exponent > 0:  # times 10^0 is the identity
            k *= power
        return np.equal(k, x)


def check_step(declared: NumberLike, *, what: str, integer: bool = False) -> DecimalStep:
    """A declared step as a ``DecimalStep``; refused with the rule when it is not a positive decimal.

    ``integer``: the column is declared integer, so its step is a whole number (1, 5, 1000).
    """
    try:
        step = to_fraction(declared, name=what)
    except Exception:  # the conversion's own error names epsilon-like parameters; restate the rule here
        raise UsageError(f"{what}: {STEP_RULE}", declared, "declare e.g. 0.01") from None
    if step <= 0:
        raise UsageError(f"{what}: {STEP_RULE}", declared, "declare a positive step, e.g. 0.01")
    if integer and step.denominator != 1:
        raise UsageError(f"{what}: an integer column's step is a whole number", declared, "declare e.g. 1, 5 or 1000")
    exponent, multiplier = 0, step
    while multiplier.denominator != 1 and exponent > -_LARGEST_EXPONENT:
        multiplier, exponent = multiplier * 10, exponent - 1
    if multiplier.denominator != 1:
        raise UsageError(f"{what}: {STEP_RULE}", declared, "declare the step as a decimal, e.g. 0.25 (not 1/3)")
    units = multiplier.numerator
    while units % 10 == 0 and exponent < _LARGEST_EXPONENT:
        units, exponent = units // 10, exponent + 1
    if units >= _LARGEST_MULTIPLIER or units % 10 == 0:
        raise UsageError(f"{what}: {STEP_RULE}", declared, "declare a step with fewer significant digits")
    return DecimalStep(units, exponent)
