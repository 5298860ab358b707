"""Grouped aggregation on Spark: counts and exact fixed-point sums over public keys, in one pass.

Each requested aggregate becomes one or a few Spark aggregate columns (``Aggregation``); one
``groupBy`` computes them all, partially on each executor, and only one row per group reaches the
driver. Public keys always appear in the output (absent ones with zeros), other keys never.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from dpsense.core.errors import InternalError
from dpsense.engine._checks import sum_exponent
from dpsense.engine._types import (
    Aggregate,
    CenteredSquares,
    ClippedSum,
    CountOutside,
    CountPresent,
    CountRows,
    CountUnits,
    FixedPointSum,
    GroupRow,
)
from dpsense.engine.spark import _expr
from dpsense.engine.spark._expr import col

#: Rows per group below which 64-bit sums of the 31-bit halves of grid units cannot overflow.
NARROW_ROWS = 1 << 32
_HALF = 31
#: Integer keys spanning at most 2 * len(keys) + this many values are selected by a range.
_DENSE_SLACK = 1024
#: How many public key lists to keep as built IN conditions.
_KEY_LISTS = 64

Runner = Callable[..., Any]


class WideSumNeeded(Exception):
    """A group summed 2**32 rows or more: recompute the exact sums as DECIMAL(38, 0)."""


@dataclass(frozen=True)
class _Planned:
    """The Spark aggregate columns of one requested aggregate and how their values combine into an int."""

    columns: list[Column]
    combine: Callable[[list[Any]], int]


def _first(values: list[Any]) -> int:
    return int(values[0] or 0)


def _combine_halves(values: list[Any]) -> int:
    high, low, rows = (int(v or 0) for v in values)
    if rows >= NARROW_ROWS:
        raise WideSumNeeded
    return (high << _HALF) + low


def _planned(agg: Aggregate, unit_column: str, kinds: dict[str, str], *, wide: bool) -> _Planned:
    """Spark columns for one aggregate; exact clipped sums in two 64-bit halves unless ``wide``.

    A grid value ``q`` (|q| <= 2**62) splits exactly into ``hi = q >> 31`` (|hi| < 2**31) and
    ``lo = q & (2**31 - 1)`` (0 <= lo < 2**31), so ``sum(q) = sum(hi) * 2**31 + sum(lo)``; below
    2**32 rows per group neither 64-bit sum can overflow, which the row count beside them checks.
    Two BIGINT sums run about twice as fast as one DECIMAL(38, 0) sum; with 2**32 rows or more the
    DECIMAL sum (exact up to 2**64 rows) is used instead.
    """
    if isinstance(agg, CountRows):
        return _Planned([sf.count(sf.lit(1))], _first)
    if isinstance(agg, CountUnits):
        return _Planned([sf.count_distinct(col(unit_column))], _first)
    if isinstance(agg, CountPresent):
        return _Planned([_expr.count_present(agg, kinds.get(agg.column, "float"))], _first)
    if isinstance(agg, CountOutside):
        return _Planned([_expr.count_outside(agg, kinds.get(agg.clip.column, "float"))], _first)
    kind = kinds.get(agg.clip.column, "float")
    # squared centered units are each below 2**62, like a grid unit
    units = _expr.squared_centered_units(agg, kind) if isinstance(agg, CenteredSquares) else _expr.grid_units(agg, kind)
    if wide:
        return _Planned([_expr.exact_sum(units)], _first)
    halves = [sf.sum(sf.shiftright(units, _HALF)), sf.sum(units.bitwiseAND(sf.lit((1 << _HALF) - 1))), sf.count(units)]
    return _Planned(halves, _combine_halves)


class KeyConditions:
    """Filters keeping the rows of public keys, built once per key list (building an IN list is slow)."""

    def __init__(self) -> None:
        self._built: dict[tuple[object, ...], Column] = {}

    def get(self, group_column: str, keys: list[Any]) -> Column:
        """A condition keeping the public keys' rows (and, for a dense integer range, only a public few more).

        Integer keys that fill most of a range become ``BETWEEN min AND max``: no per-key literal to
        plan, and the groups in the range number at most its public width (those that are not keys
        are dropped on the driver). Other key lists become an ``IN`` list.
        """
        if all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
            low, high = min(keys), max(keys)
            if high - low + 1 <= 2 * len(keys) + _DENSE_SLACK:
                return col(group_column).between(_expr.literal(low), _expr.literal(high))
        remembered = (group_column, tuple((type(k), k) for k in keys))
        condition = self._built.get(remembered)
        if condition is None:
            if len(self._built) >= _KEY_LISTS:
                self._built.clear()
            condition = col(group_column).isin([_expr.literal(k) for k in keys])
            self._built[remembered] = condition
        return condition


class Aggregation:
    """Checked aggregates of one ``group_aggregates`` call, run in one pass (two if a sum needs DECIMAL)."""

    def __init__(self, aggregates: Sequence[Aggregate], unit_column: str, kinds: dict[str, str]) -> None:
        self.aggregates = list(aggregates)
        self.unit_column = unit_column
        self.kinds = kinds

    def run(
        self,
        frame: DataFrame,
        group_columns: Sequence[str],
        keys: list[Any] | None,
        *,
        key_condition: Callable[[str, list[Any]], Column],
        run: Runner,
    ) -> list[GroupRow]:
        """One ``GroupRow`` per output group (see ``Engine.group_aggregates``)."""
        try:
            return self._pass(frame, group_columns, keys, key_condition, run, wide=False)
        except WideSumNeeded:
            return self._pass(frame, group_columns, keys, key_condition, run, wide=True)

    def _pass(
        self,
        frame: DataFrame,
        group_columns: Sequence[str],
        keys: list[Any] | None,
        key_condition: Callable[[str, list[Any]], Column],
        run: Runner,
        *,
        wide: bool,
    ) -> list[GroupRow]:
        planned = [_planned(a, self.unit_column, self.kinds, wide=wide) for a in self.aggregates]
        exprs = [c for p in planned for c in p.columns]
        try:
            rows = _grouped(frame, group_columns, keys, exprs, key_condition, run)
        except InternalError:
            if wide or not any(isinstance(a, ClippedSum | CenteredSquares) for a in self.aggregates):
                raise
            raise WideSumNeeded from None  # ANSI mode raises on a 64-bit overflow: recompute as DECIMAL
        out = []
        for key, values in rows:
            counts: dict[str, int] = {}
            sums: dict[str, FixedPointSum] = {}
            position = 0
            for agg, plan in zip(self.aggregates, planned, strict=True):
                value = plan.combine(values[position : position + len(plan.columns)])
                position += len(plan.columns)
                if isinstance(agg, ClippedSum | CenteredSquares):
                    sums[agg.name] = FixedPointSum(value, sum_exponent(agg))
                else:
                    counts[agg.name] = value
            out.append(GroupRow(key, counts, sums))
        return out


def _grouped(
    frame: DataFrame,
    group_columns: Sequence[str],
    keys: list[Any] | None,
    exprs: list[Column],
    key_condition: Callable[[str, list[Any]], Column],
    run: Runner,
) -> list[tuple[Any, list[Any]]]:
    """(key, aggregate values) per output row: one row without a group, the public keys in order, or every key.

    With several group columns a key is the tuple of their values.
    """
    if not group_columns:
        rows = run(frame.agg(*exprs).collect)
        if len(rows) != 1:
            raise InternalError("an ungrouped aggregate returned other than one row")
        return [(None, list(rows[0]))]
    width = len(group_columns)
    names = [f"__dps_k{j}" for j in range(width)]
    key_columns = [col(c).alias(k) for c, k in zip(group_columns, names, strict=True)]

    def key_of(row: Any) -> Any:
        return row[0] if width == 1 else tuple(row[:width])

    if keys is None:
        grouped = frame.groupBy(*key_columns).agg(*exprs).orderBy(*(sf.col(k).asc_nulls_last() for k in names))
        return [(key_of(r), list(r[width:])) for r in run(grouped.collect)]
    parts = [keys] if width == 1 else [list(dict.fromkeys(k[j] for k in keys)) for j in range(width)]
    condition = key_condition(group_columns[0], parts[0])
    for column, part in zip(group_columns[1:], parts[1:], strict=True):
        # each column's own keys: the rows of every listed combination (and of unlisted combinations of
        # listed values, which the lookup below drops)
        condition = condition & key_condition(column, part)
    selected = frame.where(condition)
    found = {key_of(r): list(r[width:]) for r in run(selected.groupBy(*key_columns).agg(*exprs).collect)}
    absent: list[Any] = [None] * len(exprs)
    return [(k, found.get(k, absent)) for k in keys]
