"""Public value types that cross the engine seam: schemas, aggregate specs and their results.

Nothing here carries a row count or a data value of a registered table except the results that the
caller asked for (aggregates, an order-statistics window, collected rows), which are unnoised and
must stay inside the process until the DP math has run on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InvalidBounds, UsageError

#: Largest |grid units| one clipped value may take, so that a sum over < 2**64 rows fits in 128 bits.
MAX_GRID_UNITS = 1 << 62
#: Grid exponents allowed: 2**e must be a normal double and so must its inverse.
MIN_GRID_EXPONENT, MAX_GRID_EXPONENT = -1000, 1000

NUMERIC_KINDS = frozenset({"integer", "float", "decimal"})


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
class BoundedView:
    """A temporary relation holding at most ``max_rows_per_unit`` rows per privacy unit.

    Created by ``Engine.bounded_rows``; valid until ``Engine.drop`` (or the end of the release scope).
    It never holds the salt that chose its rows.
    """

    name: str
    source: str
    schema: TableInfo
    unit_column: str
    max_rows_per_unit: int
    group_column: str | None = None
    max_groups_per_unit: int | None = None


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
class ClippedSum:
    """An exact fixed-point sum of ``clip(column, low, high)``.

    Each clipped value ``x`` becomes the integer ``q = clamp(round_half_away(x / 2**e), q_low, q_high)``
    with ``q_low = ceil(low / 2**e)`` and ``q_high = floor(high / 2**e)``; the engine sums the ``q`` as
    integers, so the result is exact (ALGORITHMS.md section 1, pitfall 1). Every rounded value lies in
    ``[grid_low, grid_high]`` within ``[low, high]``: use those for the sensitivity.
    """

    clip: Clip
    grid_exponent: int
    name: str = "clipped_sum"

    def __post_init__(self) -> None:
        e = self.grid_exponent
        if isinstance(e, bool) or not isinstance(e, int) or not MIN_GRID_EXPONENT <= e <= MAX_GRID_EXPONENT:
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


def count_rows(name: str = "count_rows") -> CountRows:
    """Aggregate: number of rows per group."""
    return CountRows(name)


def count_units(name: str = "count_units") -> CountUnits:
    """Aggregate: number of distinct privacy units per group."""
    return CountUnits(name)


def clipped_sum(column: str, *, low: float, high: float, grid_exponent: int, name: str | None = None) -> ClippedSum:
    """Aggregate: exact sum of ``clip(column, low, high)`` on the grid 2**grid_exponent."""
    return ClippedSum(Clip(column, low, high), grid_exponent, name if name is not None else f"sum_{column}")


Aggregate = CountRows | CountUnits | ClippedSum


@dataclass(frozen=True)
class FixedPointSum:
    """An exact sum: ``units`` grid steps of size 2**grid_exponent."""

    units: int
    grid_exponent: int

    @property
    def value(self) -> Fraction:
        """The exact sum as a fraction."""
        return self.units * Fraction(2) ** self.grid_exponent


@dataclass(frozen=True)
class GroupRow:
    """One group's unnoised aggregates (keep inside the process until noised)."""

    key: Any
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, FixedPointSum] = field(default_factory=dict)


@dataclass(frozen=True)
class OrderStatisticsWindow:
    """Clipped order statistics of ranks ``ranks`` (1-based; low below rank 1, high above the last rank)."""

    ranks: NDArray[np.int64]
    values: NDArray[np.float64]
