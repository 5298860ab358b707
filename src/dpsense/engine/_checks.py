"""Argument checks every engine shares, judged from the public schema and the caller's input only.

Nothing here reads data, so every error is a ``UsageError`` that names the rule, the offending public
value (a column name, an operator, a type; never a data value) and the fix.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidData, UnsupportedRequest, UsageError
from dpsense.engine._errors import UnknownColumn
from dpsense.engine._types import (
    NUMERIC_KINDS,
    ORDERING_OPS,
    Aggregate,
    CenteredSquares,
    Clip,
    ClippedSum,
    ColumnInfo,
    CountOutside,
    CountPresent,
    CountRows,
    CountUnits,
    Predicate,
    TableInfo,
)

#: A salt or fingerprint key shorter than this is refused (draw it with dpsense.noise.entropy.random_bytes).
MIN_SECRET_BYTES = 16

#: Which predicate value types fit a column kind.
_VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int, float, Decimal),
    "float": (int, float, Decimal),
    "decimal": (int, float, Decimal),
    "string": (str,),
    "boolean": (bool,),
    "temporal": (dt.date, dt.time, dt.timedelta),
}


def positive_int(value: object, what: str) -> int:
    """``value`` when it is an int >= 1 (bools refused)."""
    if not integer_in(value, 1):
        raise UsageError(f"{what} must be a positive integer", value, f"pass an int >= 1 as {what}")
    return value


def secret(value: object, what: str) -> bytes:
    """``value`` when it is at least ``MIN_SECRET_BYTES`` bytes; the error never shows the bytes."""
    if not isinstance(value, bytes) or len(value) < MIN_SECRET_BYTES:
        shown = f"{type(value).__name__} of length {len(value) if isinstance(value, bytes) else '?'}"
        raise UsageError(
            f"the {what} must be at least {MIN_SECRET_BYTES} secret bytes",
            shown,
            "draw a fresh one with dpsense.noise.entropy.random_bytes(32)",
        )
    return value


def require(info: TableInfo, column: str) -> ColumnInfo:
    """The column ``column`` of ``info``, or ``UnknownColumn``."""
    found = info.column(column) if isinstance(column, str) else None
    if found is None:
        raise UnknownColumn(str(column), info.name, info.column_names)
    return found


def require_numeric(info: TableInfo, column: str, purpose: str = "clipped") -> ColumnInfo:
    """The numeric column ``column`` of ``info``; a non-numeric one is refused."""
    found = require(info, column)
    if not found.is_numeric:
        raise InvalidData(
            f"column {column!r} must be numeric to be {purpose}",
            found.sql_type,
            f"name a numeric column to be {purpose}",
        )
    return found


def column_names(columns: object, what: str) -> list[str]:
    """A list of column names from a sequence of strings (a bare string is refused)."""
    if isinstance(columns, str) or not isinstance(columns, Sequence | set | frozenset):
        raise UsageError(f"{what} is a list of column names", type(columns).__name__, f"pass e.g. {what}=['x']")
    return list(columns)


def predicates(info: TableInfo, where: object) -> tuple[Predicate, ...]:
    """The filters ``where`` checked against the public schema (columns exist, values fit their kind)."""
    if isinstance(where, Predicate | str) or not isinstance(where, Sequence):
        raise UsageError(
            "where is a list of predicates (all must hold)",
            type(where).__name__,
            "pass where=[dpsense.engine.predicate('column', '==', value), ...]",
        )
    out = []
    for pred in where:
        if not isinstance(pred, Predicate):
            raise UsageError(
                "every filter is a Predicate", type(pred).__name__, "build it with dpsense.engine.predicate(...)"
            )
        column = require(info, pred.column)
        if pred.op in ORDERING_OPS and column.kind not in NUMERIC_KINDS:
            raise UsageError(
                f"the ordering operator {pred.op!r} needs a numeric column",
                f"{pred.column} ({column.sql_type})",
                "filter this column with '==', '!=' or 'in'",
            )
        accepted = _VALUE_TYPES.get(column.kind)
        if accepted is None:
            raise UnsupportedRequest(
                "filters apply to numeric, string, boolean and temporal columns",
                f"{pred.column} ({column.sql_type})",
                "filter on another column",
            )
        for value in pred.values:
            fits = isinstance(value, accepted) and (column.kind == "boolean" or not isinstance(value, bool))
            if not fits:
                raise UsageError(
                    f"a filter value must match the kind of its column ({column.kind})",
                    f"{pred.column} {pred.op} <{type(value).__name__}>",
                    f"compare {pred.column!r} with a {column.kind} value",
                )
        out.append(pred)
    return tuple(out)


#: The values an integer column of each SQL type holds (DuckDB's names, and Spark's where they differ).
INTEGER_RANGES: dict[str, tuple[int, int]] = {
    name: (low, high)
    for names, low, high in (
        (("TINYINT", "BYTE"), -(1 << 7), (1 << 7) - 1),
        (("SMALLINT", "SHORT"), -(1 << 15), (1 << 15) - 1),
        (("INTEGER", "INT"), -(1 << 31), (1 << 31) - 1),
        (("BIGINT", "LONG"), -(1 << 63), (1 << 63) - 1),
        (("HUGEINT",), -(1 << 127), (1 << 127) - 1),
        (("UTINYINT",), 0, (1 << 8) - 1),
        (("USMALLINT",), 0, (1 << 16) - 1),
        (("UINTEGER",), 0, (1 << 32) - 1),
        (("UBIGINT",), 0, (1 << 64) - 1),
        (("UHUGEINT",), 0, (1 << 128) - 1),
    )
    for name in names
}


def group_columns(info: TableInfo, group_column: object) -> tuple[ColumnInfo, ...]:
    """The columns of a grouping: ``None`` (none), one name, or a tuple of distinct names (several)."""
    if group_column is None:
        return ()
    if isinstance(group_column, str):
        return (require(info, group_column),)
    if not isinstance(group_column, tuple) or not group_column or not all(isinstance(c, str) for c in group_column):
        raise UsageError(
            "group_column is a column name or a non-empty tuple of names",
            type(group_column).__name__,
            "pass e.g. 'region' or ('region', 'diagnosis')",
        )
    if len(set(group_column)) != len(group_column):
        raise UsageError("a grouping names each column once", list(group_column), "drop the repeated column")
    return tuple(require(info, c) for c in group_column)


def key_parts(columns: Sequence[ColumnInfo], keys: Sequence[object]) -> list[list[object]]:
    """Per group column, its part of every public key (a key of several columns is a tuple of that many).

    Several columns: the tuples must be distinct (one column's part repeats, so the engines check each
    part's type but not its distinctness; a single column's keys are checked by the engine's own key check).
    """
    if len(columns) == 1:
        return [list(keys)]
    parts: list[list[object]] = [[] for _ in columns]
    for key in keys:
        if not isinstance(key, tuple) or len(key) != len(columns):
            raise UsageError(
                f"a public key of a grouping by {len(columns)} columns is a tuple of {len(columns)} values",
                type(key).__name__,
                "pass keys as tuples in the order of the group columns, e.g. [('north', 'flu')]",
            )
        for part, value in zip(parts, key, strict=True):
            part.append(value)
    if len({repr(k) for k in keys}) != len(keys):  # repr keeps True and 1 apart
        raise UsageError("public keys must be distinct", "a repeated key", "list each key once")
    return parts


def group_keys(info: TableInfo, column: str | tuple[str, ...], keys: Sequence[object]) -> None:
    """Refuse public keys an integer group column cannot hold, from the public schema alone.

    A key outside the column's type (2^64 on a BIGINT column, 1.5 on an INTEGER one) matches no row;
    the engines' own key check would refuse it inside a release, after data access, so a caller
    checks here first (``release._admission``). With several group columns each key is a tuple,
    checked part by part.
    """
    found = group_columns(info, column)
    for part, values in zip(found, key_parts(found, keys), strict=True):
        limits = INTEGER_RANGES.get(part.sql_type.upper())
        if limits is None:
            continue
        for key in values:
            if isinstance(key, bool) or not isinstance(key, int) or not limits[0] <= key <= limits[1]:
                raise UsageError(
                    f"a public key of {part.name!r} is not a value its type {part.sql_type} can hold",
                    key,
                    f"list keys that are integers from {limits[0]} to {limits[1]}",
                )


def policies(
    info: TableInfo, drop_missing: object, drop_nonfinite: object, clamp: object
) -> tuple[list[str], list[str], dict[str, Clip]]:
    """Checked registration policies: every column exists and clamped columns are numeric.

    ``drop_nonfinite`` may name a column of any kind: only float columns hold NaN or infinities.
    """
    missing = column_names(drop_missing, "drop_missing")
    nonfinite = column_names(drop_nonfinite, "drop_nonfinite")
    for column in [*missing, *nonfinite]:
        require(info, column)
    if not isinstance(clamp, Mapping):
        raise UsageError(
            "clamp maps column names to (low, high) bounds", type(clamp).__name__, "pass clamp={'x': (0.0, 1.0)}"
        )
    clips: dict[str, Clip] = {}
    for column, bounds in clamp.items():
        require_numeric(info, column, "clamped")
        if not isinstance(bounds, tuple | list) or len(bounds) != 2:
            raise UsageError(
                "a clamp is a (low, high) pair of public bounds", column, f"pass clamp={{{column!r}: (low, high)}}"
            )
        clips[column] = Clip(column, bounds[0], bounds[1])
    return missing, nonfinite, clips


def aggregates(info: TableInfo, aggs: Sequence[object]) -> list[Aggregate]:
    """The requested aggregates, checked against the public schema (types, distinct names, columns)."""
    checked: list[Aggregate] = []
    for a in aggs:
        if not isinstance(a, CountRows | CountUnits | CountPresent | CountOutside | ClippedSum | CenteredSquares):
            raise UsageError(
                "aggregates are a non-empty list of count_rows(), count_units(), count_present(...), "
                "count_outside(...), clipped_sum(...), centered_squares(...)",
                [type(x).__name__ for x in aggs],
                "build them with the dpsense.engine functions of those names",
            )
        checked.append(a)
    if not checked:
        raise UsageError("aggregates are a non-empty list", [], "pass at least one aggregate, e.g. count_rows()")
    names = [a.name for a in checked]
    if len(set(names)) != len(names):
        raise UsageError("aggregate names must be distinct", names, "pass name=... to tell them apart")
    for a in checked:
        if isinstance(a, ClippedSum | CenteredSquares | CountOutside):
            require_numeric(info, a.clip.column)
        elif isinstance(a, CountPresent):
            require(info, a.column)
    return checked


def sum_exponent(agg: ClippedSum | CenteredSquares) -> int:
    """The exponent of one unit of the integer an engine returns for a sum (``2 e`` for squares)."""
    return 2 * agg.grid_exponent if isinstance(agg, CenteredSquares) else agg.grid_exponent
