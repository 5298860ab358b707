"""Public value types that cross the engine seam: schemas, aggregate specs and their results.

Nothing here carries a row count or a data value of a registered table except the results that the
caller asked for (aggregates, an order-statistics window, collected rows), which are unnoised and
must stay inside the process until the DP math has run on them.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, UsageError

#: Largest |grid units| one clipped value may take, so that a sum over < 2**64 rows fits in 128 bits.
MAX_GRID_UNITS = 1 << 62
#: Grid exponents allowed: 2**e must be a normal double and so must its inverse.
MIN_GRID_EXPONENT, MAX_GRID_EXPONENT = -1000, 1000

NUMERIC_KINDS = frozenset({"integer", "float", "decimal"})

#: Comparison operators of a ``Predicate``; the ordering ones apply to numeric columns only.
PREDICATE_OPS = ("==", "!=", "<", "<=", ">", ">=", "in")
ORDERING_OPS = frozenset({"<", "<=", ">", ">="})
#: The empty clamp policy (an immutable default for ``Engine.apply_policies``).
NO_CLAMP: Mapping[str, tuple[float, float]] = MappingProxyType({})
#: Python types a predicate value may have (the column's kind decides which of them fit).
_SCALARS = (bool, int, float, Decimal, str, dt.date, dt.time, dt.timedelta)


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a public schema: its name, the engine's type name and a portable kind."""

    name: str
    sql_type: str
    kind: str  # integer | float | decimal | string | boolean | temporal | other

    @property
    def is_numeric(self) -> bool:
        """True when the column can be clipped and summed."""
        return self.kind in NUMERIC_KINDS


@dataclass(frozen=True)
class TableInfo:
    """The public schema of a registered table: column names and types only (no counts, no values)."""

    name: str
    columns: tuple[ColumnInfo, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> ColumnInfo | None:
        """The column called ``name``, or None."""
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class Predicate:
    """A public row filter ``column op value`` applied before contribution bounding.

    ``op`` is one of ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` (``values`` holds exactly one value)
    or ``in`` (``values`` holds one or more). The values are public constants of the query, never
    taken from the data. SQL NULL semantics: a row whose value is NULL fails every predicate,
    ``!=`` and ``in`` included; a NaN in a float column is missing as well and fails every predicate
    (engines that order NaN above every number must not let it pass ``>``). Ordering operators need a
    numeric column. Build one with ``predicate(column, op, value_or_values)``.
    """

    column: str
    op: str
    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise UsageError("a predicate names a column by a non-empty string", self.column, "pass the column name")
        if self.op not in PREDICATE_OPS:
            raise UsageError(
                f"a predicate operator is one of {', '.join(PREDICATE_OPS)}", self.op, "use e.g. '==' or 'in'"
            )
        if isinstance(self.values, str | bytes) or not isinstance(self.values, tuple | list):
            raise UsageError(
                "predicate values are a tuple of constants", type(self.values).__name__, "use predicate(...)"
            )
        values = tuple(self.values)
        object.__setattr__(self, "values", values)
        if self.op == "in" and not values:
            raise UsageError(
                "an 'in' predicate needs at least one value", self.column, "list the values to keep or drop the filter"
            )
        if self.op != "in" and len(values) != 1:
            raise UsageError(
                f"a {self.op!r} predicate compares with exactly one value",
                f"{len(values)} values for {self.column!r}",
                "use 'in' to match several values",
            )
        for value in values:
            self._check_value(value)

    def _check_value(self, value: object) -> None:
        what = f"{self.column} {self.op} <{type(value).__name__}>"
        if value is None:
            raise UsageError(
                "a predicate value may not be None (a NULL fails every comparison)",
                what,
                "compare with a real value; rows with missing values are handled by the steward's policies",
            )
        if not isinstance(value, _SCALARS):
            raise UsageError(
                "a predicate value is a number, string, boolean, date, time or duration", what, "pass a plain constant"
            )
        if isinstance(value, float | Decimal) and value != value:  # NaN is missing, never a filter value
            raise UsageError("a predicate value may not be NaN", what, "compare with a real number")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 127:
            raise UsageError("an integer predicate value must fit in 128 bits", what, "use a smaller constant")
        if self.op in ORDERING_OPS and (isinstance(value, bool) or not isinstance(value, int | float | Decimal)):
            raise UsageError(
                f"the ordering operator {self.op!r} compares numbers", what, "compare a numeric column with a number"
            )


def predicate(column: str, op: str, value_or_values: Any) -> Predicate:
    """The public filter ``column op value``; for ``op="in"`` pass an iterable of values.

    Examples: ``predicate("age", ">=", 18)``, ``predicate("region", "in", ["north", "south"])``.
    """
    if op == "in":
        if isinstance(value_or_values, str | bytes) or not isinstance(value_or_values, Iterable):
            raise UsageError(
                "an 'in' predicate takes a list of values",
                f"{column} in <{type(value_or_values).__name__}>",
                f"pass e.g. predicate({column!r}, 'in', [a, b])",
            )
        return Predicate(column, op, tuple(value_or_values))
    return Predicate(column, op, (value_or_values,))


@dataclass(frozen=True)
class ColumnQuality:
    """Counts of bad values in one column (steward-only: these are unnoised counts of private data).

    ``missing`` counts NULLs; ``nan`` and ``infinite`` (either sign) count only in float columns and
    are 0 for every other kind.
    """

    missing: int
    nan: int
    infinite: int


#: A grouping: one column (keys are its values) or several (keys are tuples of their values, in order).
GroupColumns = str | tuple[str, ...]


@dataclass(frozen=True)
class BoundedView:
    """A temporary relation holding at most ``max_rows_per_unit`` rows per privacy unit.

    Created by ``Engine.bounded_rows``; valid until ``Engine.drop``, the end of the release scope, or a
    change of its table's snapshot. It never holds the salt that chose its rows (nor a key derived
    from it), and an engine may keep it as a query rather than a table. ``where`` lists the public
    filters applied before the bounding.
    """

    name: str
    source: str
    schema: TableInfo
    unit_column: str
    max_rows_per_unit: int
    #: The capped grouping: a column, or several (their value combinations are the groups).
    group_column: GroupColumns | None = None
    max_groups_per_unit: int | None = None
    where: tuple[Predicate, ...] = ()


def _exact_bound(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidBounds(f"the {what} clipping bound must be a real number", value, "pass a float or an int")
    as_float = float(value)
    if not math.isfinite(as_float) or as_float != value:
        raise InvalidBounds(
            f"the {what} clipping bound must be finite and exactly representable as a double", value, "pass a float"
        )
    return as_float


@dataclass(frozen=True)
class Clip:
    """``clip(column, low, high)``: the column's value clamped to the public bounds [low, high].

    NULL and NaN values are missing: a clip of a missing value is missing (it contributes nothing to a
    sum and is left out of an order statistic). Infinities are clamped like any other value.
    """

    column: str
    low: float
    high: float

    def __post_init__(self) -> None:
        low = _exact_bound(self.low, "lower")
        high = _exact_bound(self.high, "upper")
        if low > high:
            raise InvalidBounds("clipping bounds must satisfy low <= high", (self.low, self.high), "swap the bounds")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)


def clip(column: str, low: float, high: float) -> Clip:
    """The clip expression ``clamp(column, low, high)`` (bounds are public; never take them from the data)."""
    return Clip(column, low, high)


@dataclass(frozen=True)
class CountRows:
    """Number of rows in a group (after contribution bounding)."""

    name: str = "count_rows"


@dataclass(frozen=True)
class CountUnits:
    """Number of distinct privacy units in a group."""

    name: str = "count_units"


@dataclass(frozen=True)
class CountPresent:
    """Number of rows in a group whose ``column`` is present: neither NULL nor (in a float column) NaN.

    The denominator of a mean that leaves missing values out: exactly the rows a ``ClippedSum`` of the
    same column adds up (a clipped sum skips NULL and NaN; infinities are clamped, so they count).
    """

    column: str
    name: str = "count_present"

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise UsageError("count_present names a column by a non-empty string", self.column, "pass the column name")


@dataclass(frozen=True)
class ClippedSum:
    """An exact fixed-point sum of ``clip(column, low, high)``.

    Each clipped value ``x`` becomes the integer ``q = clamp(round_half_away(x / 2**e), q_low, q_high)``
    with ``q_low = ceil(low / 2**e)`` and ``q_high = floor(high / 2**e)``; the engine sums the ``q`` as
    integers, so the result is exact (docs/math/global-sensitivity.md, pitfall 1). Every rounded value lies in
    ``[grid_low, grid_high]`` within ``[low, high]``: use those for the sensitivity.
    """

    clip: Clip
    grid_exponent: int
    name: str = "clipped_sum"

    def __post_init__(self) -> None:
        e = self.grid_exponent
        if not integer_in(e, MIN_GRID_EXPONENT, MAX_GRID_EXPONENT):
            raise UsageError(
                "the fixed-point grid is 2**grid_exponent with an integer exponent in [-1000, 1000]",
                e,
                "pass e.g. grid_exponent=-32 for a grid of 2**-32",
            )
        if self.q_low > self.q_high:
            raise InvalidBounds(
                "the fixed-point grid is too coarse: no grid point lies inside [low, high]",
                (self.clip.low, self.clip.high, e),
                "choose a smaller grid_exponent",
            )
        if max(abs(self.q_low), abs(self.q_high)) > MAX_GRID_UNITS:
            raise InvalidBounds(
                "the clipping bounds span more than 2**62 grid units",
                (self.clip.low, self.clip.high, e),
                "choose a larger grid_exponent or tighter bounds",
            )

    @property
    def grid(self) -> Fraction:
        """The grid step 2**grid_exponent, exactly."""
        return Fraction(2) ** self.grid_exponent

    @property
    def q_low(self) -> int:
        """The lowest grid unit a value can take."""
        return math.ceil(Fraction(self.clip.low) / self.grid)

    @property
    def q_high(self) -> int:
        """The highest grid unit a value can take."""
        return math.floor(Fraction(self.clip.high) / self.grid)

    @property
    def grid_low(self) -> Fraction:
        """The smallest value one row can contribute (a grid point >= low)."""
        return self.q_low * self.grid

    @property
    def grid_high(self) -> Fraction:
        """The largest value one row can contribute (a grid point <= high)."""
        return self.q_high * self.grid


#: Centered squares use grid units below 2**31 (so q**2 < 2**62 fits a signed 64-bit integer).
SQUARES_UNIT_BITS = 31


@dataclass(frozen=True)
class CenteredSquares:
    """An exact sum of squared deviations ``(clip(x) - c)**2`` on a grid, ``c`` the midpoint of the bounds.

    Each present value ``x`` becomes the integer ``q = round_half_away(clamp((clip(x) - c) / 2**e,
    -k, k))`` (clamping to the integers ±k before rounding is the same and keeps an overflow to
    infinity out of the integer cast) with ``c = low/2 + high/2`` (a double, ``center``) and
    ``e = grid_exponent`` chosen from the public half-width ``h = (high - low)/2`` so that
    ``2**29 < k = floor(h / 2**e) < 2**31``; the engine sums
    ``q * q`` as integers (each below 2**62), so the result is exact and equals
    ``FixedPointSum(sum q**2, 2 e)``. Every term lies in ``[0, (k 2**e)**2] ⊆ [0, h**2]`` whatever the
    floating-point rounding of ``clip(x) - c`` (the clamp to ``±k`` makes sure), which is all the
    sensitivity ``C h**2`` of a variance needs. Missing values (NULL, NaN) add nothing; the grid
    error per value is at most ``2**e / 2 <= h 2**-31``.
    """

    clip: Clip
    name: str = "centered_squares"

    def __post_init__(self) -> None:
        if not MIN_GRID_EXPONENT <= self.grid_exponent <= MAX_GRID_EXPONENT:
            raise InvalidBounds(
                "the clipping bounds of a variance are too close together for a fixed-point grid",
                (self.clip.low, self.clip.high),
                "declare bounds at least 2**-960 apart",
            )

    @property
    def center(self) -> float:
        """The public centre ``c`` (a double), the midpoint of the clipping bounds."""
        return self.clip.low / 2 + self.clip.high / 2

    @property
    def grid_exponent(self) -> int:
        """The grid exponent ``e`` of one unit (the sum's units are ``2**(2 e)``)."""
        half = (Fraction(self.clip.high) - Fraction(self.clip.low)) / 2
        if half == 0:
            return 0
        top = half.numerator.bit_length() - half.denominator.bit_length()  # 2**(top-1) < half < 2**(top+1)
        return top - (SQUARES_UNIT_BITS - 1)  # so half / 2**e < 2**31

    @property
    def q_max(self) -> int:
        """``k``: the largest absolute grid unit of a deviation."""
        half = (Fraction(self.clip.high) - Fraction(self.clip.low)) / 2
        return math.floor(half / Fraction(2) ** self.grid_exponent)


@dataclass(frozen=True)
class CountOutside:
    """Number of rows in a group whose ``column`` lies outside the public bounds: the rows a clip moves.

    A value counts when it is below ``low`` or above ``high`` (infinities included); NULL and NaN are
    missing and never count. This is the clipping a ``ClippedSum`` with the same bounds applies.
    """

    clip: Clip
    name: str = "count_outside"


def count_outside(column: str, *, low: float, high: float, name: str | None = None) -> CountOutside:
    """Aggregate: rows whose ``column`` lies outside [low, high] (what clipping changes)."""
    return CountOutside(Clip(column, low, high), name if name is not None else f"outside_{column}")


def count_rows(name: str = "count_rows") -> CountRows:
    """Aggregate: number of rows per group."""
    return CountRows(name)


def count_units(name: str = "count_units") -> CountUnits:
    """Aggregate: number of distinct privacy units per group."""
    return CountUnits(name)


def count_present(column: str, name: str | None = None) -> CountPresent:
    """Aggregate: number of rows per group whose ``column`` is not missing (not NULL, not NaN)."""
    return CountPresent(column, name if name is not None else f"present_{column}")


def clipped_sum(column: str, *, low: float, high: float, grid_exponent: int, name: str | None = None) -> ClippedSum:
    """Aggregate: exact sum of ``clip(column, low, high)`` on the grid 2**grid_exponent."""
    return ClippedSum(Clip(column, low, high), grid_exponent, name if name is not None else f"sum_{column}")


def centered_squares(column: str, *, low: float, high: float, name: str | None = None) -> CenteredSquares:
    """Aggregate: exact sum of ``(clip(column, low, high) - (low + high)/2)**2`` on a grid (see ``CenteredSquares``)."""
    return CenteredSquares(Clip(column, low, high), name if name is not None else f"squares_{column}")


Aggregate = CountRows | CountUnits | CountPresent | CountOutside | ClippedSum | CenteredSquares


class FixedPointSum(NamedTuple):
    """An exact sum: ``units`` grid steps of size 2**grid_exponent (a tuple: one is built per group)."""

    units: int
    grid_exponent: int

    @property
    def value(self) -> Fraction:
        """The exact sum as a fraction."""
        e = self.grid_exponent
        # Integer shifts, not Fraction(2) ** e: a release reads one value per public group.
        return Fraction(self.units << e) if e >= 0 else Fraction(self.units, 1 << -e)


@dataclass(frozen=True)
class GroupRow:
    """One group's unnoised aggregates (keep inside the process until noised).

    ``key`` is the group column's value, or a tuple of the values of several group columns.
    """

    key: Any
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, FixedPointSum] = field(default_factory=dict)


@dataclass(frozen=True)
class OrderStatisticsWindow:
    """Clipped order statistics of ranks ``ranks`` (1-based; low below rank 1, high above the last rank)."""

    ranks: NDArray[np.int64]
    values: NDArray[np.float64]
