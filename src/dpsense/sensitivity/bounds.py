"""Public declarations every sensitivity is computed from: value bounds and per-unit contribution bounds.

Both are *public* choices made before any data is read (docs/math/global-sensitivity.md, pitfall 3: bounds
chosen from the data leak). They are validated here without looking at data, so a bad declaration
is refused before anything is spent (docs/design.md invariant 6).

Numbers are exact: ``Bounds(0, 0.1)`` means the decimal one tenth, kept as ``Fraction(1, 10)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from numbers import Rational

import numpy as np

from dpsense.core.adjacency import PrivacyUnit
from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, inward_interval, to_fraction


def exact_number(value: object, *, name: str, error: type[UsageError]) -> Fraction:
    """Convert a public number to a ``Fraction`` through its decimal string, raising ``error`` if it is not one.

    NumPy scalars are accepted (``to_fraction`` alone refuses ``np.float64`` because its ``repr``
    is ``'np.float64(...)'`` under NumPy 2).
    """
    if isinstance(value, np.floating):
        value = float(value)
    elif isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction, Decimal, Rational)):
        raise error(
            f"{name} must be a finite number", value, f"pass {name} as an int, float, decimal string or Fraction"
        )
    if isinstance(value, Rational) and not isinstance(value, (int, Fraction)):
        return Fraction(value)
    try:
        return to_fraction(value, name=name)
    except InvalidPrivacyParameter as exc:
        raise error(exc.rule, value, exc.fix) from None


def _require_count(value: object, *, name: str, example: str) -> int:
    if isinstance(value, np.integer):
        value = int(value)
    if not integer_in(value, 1):
        raise UsageError(f"{name} must be an integer >= 1", value, f"declare it as a positive integer, e.g. {example}")
    return value


@dataclass(frozen=True)
class Bounds:
    """Public clipping bounds [lower, upper] for one numeric column, as exact fractions.

    Every value is clipped into the closed interval before aggregation; all sensitivities of this
    package are stated for clipped values. The bounds must be chosen without looking at the data.

    Attributes:
        lower: L, finite.
        upper: U, finite, with L <= U.

    Raises:
        InvalidBounds: if a bound is not a finite number (NaN, infinity, bool, text), is too large for
            a double, or if L > U.

    """

    lower: Fraction
    upper: Fraction

    def __init__(self, lower: NumberLike, upper: NumberLike) -> None:
        lo = exact_number(lower, name="lower bound", error=InvalidBounds)
        hi = exact_number(upper, name="upper bound", error=InvalidBounds)
        for bound in (lo, hi):
            if abs(bound) >= 2**1023:
                raise InvalidBounds(
                    "bounds must be representable as finite doubles", str(bound), "choose bounds below 1e300"
                )
        if lo > hi:
            raise InvalidBounds(
                "lower bound must not exceed upper bound", f"[{lower}, {upper}]", "swap the bounds, e.g. Bounds(0, 24)"
            )
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @property
    def width(self) -> Fraction:
        """U - L: how far one clipped value can move when it is replaced."""
        return self.upper - self.lower

    @property
    def magnitude(self) -> Fraction:
        """max(|L|, |U|): the largest absolute clipped value (what one added value can add)."""
        return max(abs(self.lower), abs(self.upper))

    @property
    def midpoint(self) -> Fraction:
        """The midpoint m = (L + U) / 2, the centre used by the centered sum."""
        return (self.lower + self.upper) / 2

    def float_interval(self) -> tuple[float, float]:
        """The doubles closest to [L, U] from the inside: ``L <= lo`` and ``hi <= U`` hold exactly.

        ``float(Fraction(1, 10))`` is slightly above 1/10, so clipping at it would let a value exceed
        the exact bound on which the sensitivity is computed; rounding inwards keeps every clipped
        double inside the exact interval (``dpsense.core.numbers.inward_interval``).

        Raises:
            InvalidBounds: when no double lies in [L, U] (possible only for L = U not a double).

        """
        return inward_interval(self.lower, self.upper)

    def __str__(self) -> str:
        return f"[{self.lower}, {self.upper}]"


@dataclass(frozen=True)
class ContributionBound:
    """How much one privacy unit may contribute over the whole release window (enforced before aggregation).

    Attributes:
        max_rows_per_unit: C, rows one unit may own in total (>= 1).
        max_groups_per_unit: C0, distinct groups (histogram bins, partitions) one unit may touch;
            ``None`` means not bounded separately (at most C anyway).
        max_rows_per_group: C_inf, rows one unit may own inside one group; ``None`` means at most C.
        fixed_rows_per_unit: ``True`` declares that every unit owns *exactly* C rows (e.g. "one value
            per person", or rows padded to C). Only then is the replace-adjacency sum sensitivity
            C(U - L) when 0 is outside [L, U]; see ``sum_sensitivity``. The engine must enforce it.

    Raises:
        UsageError: if a count is not an integer >= 1, or a fixed row count is impossible under the
            group caps (C0 * C_inf < C).

    """

    max_rows_per_unit: int
    max_groups_per_unit: int | None = None
    max_rows_per_group: int | None = None
    fixed_rows_per_unit: bool = False

    def __post_init__(self) -> None:
        _require_count(self.max_rows_per_unit, name="max_rows_per_unit", example="max_rows_per_unit=30")
        if self.max_groups_per_unit is not None:
            _require_count(self.max_groups_per_unit, name="max_groups_per_unit", example="max_groups_per_unit=3")
        if self.max_rows_per_group is not None:
            _require_count(self.max_rows_per_group, name="max_rows_per_group", example="max_rows_per_group=1")
        if not isinstance(self.fixed_rows_per_unit, bool):
            raise UsageError("fixed_rows_per_unit must be a bool", self.fixed_rows_per_unit, "pass True or False")
        if self.fixed_rows_per_unit and self.groups_cap * self.rows_per_group_cap < self.max_rows_per_unit:
            raise UsageError(
                "a unit cannot own exactly max_rows_per_unit rows when max_groups_per_unit * max_rows_per_group"
                " is smaller",
                (self.max_rows_per_unit, self.max_groups_per_unit, self.max_rows_per_group),
                "drop fixed_rows_per_unit or raise the group caps",
            )

    @classmethod
    def from_privacy_unit(cls, unit: PrivacyUnit) -> ContributionBound:
        """The row bound a ``PrivacyUnit`` declares (``max_rows``), with no group caps."""
        return cls(max_rows_per_unit=unit.max_rows)

    @property
    def groups_cap(self) -> int:
        """Effective C0 = min(C0, C): a unit owning at most C rows touches at most C groups."""
        c0 = self.max_groups_per_unit
        return self.max_rows_per_unit if c0 is None else min(c0, self.max_rows_per_unit)

    @property
    def rows_per_group_cap(self) -> int:
        """Effective C_inf = min(C_inf, C)."""
        cinf = self.max_rows_per_group
        return self.max_rows_per_unit if cinf is None else min(cinf, self.max_rows_per_unit)


def window_max_rows(rows_per_period: int, periods: int) -> int:
    """Rows one unit may own over a release window: ``rows_per_period * periods``.

    The contribution bound must cover the whole window a release aggregates: "one row per person per
    day" over a 30-day total is C = 30, not 1 (seed lesson 14.3 section 2; with values in [0, 24]
    the person-level sum sensitivity is then 720).

    Raises:
        UsageError: if either argument is not an integer >= 1.

    """
    per = _require_count(rows_per_period, name="rows_per_period", example="rows_per_period=1")
    count = _require_count(periods, name="periods", example="periods=30")
    return per * count
