"""Spark column expressions for the engine's steps: the same semantics as the DuckDB SQL, value for value.

Every function returns a ``pyspark.sql.Column`` built from quoted column names and public constants
(bounds, grid scales, filter values). Secrets never enter here: keys derived from a salt are passed
in by ``_bound`` only. The arithmetic mirrors ``sql._query`` and ``sql._steward_query`` exactly:

* a clipped value rounds to grid units half away from zero, computed as ``floor(|y|)`` plus one when
  the exact remainder ``|y| - floor(|y|)`` is at least 1/2 (Spark's ``round`` goes through a decimal
  string of the double and is wrong above 2**53; this form is exact wherever DuckDB's ``round`` is);
* missing values (NULL, and NaN in float columns) add nothing, fail every filter and are counted
  apart; Spark orders NaN above every number, as DuckDB does, so NaN is excluded explicitly;
* the fingerprint's row text is ``sql._steward_query.fingerprint_query``'s, with the portable float text
  of ``_portable`` in both engines.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf
from pyspark.sql import types as st

from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.engine._portable import HEX_DIGITS
from dpsense.engine._types import CenteredSquares, Clip, ClippedSum, ColumnInfo, CountOutside, CountPresent, Predicate
from dpsense.engine.sql._steward_query import _decimal_bounds, _float32_bounds, _integer_bounds

#: The exact sum type: a sum of < 2**64 values of at most 2**62 grid units fits in 38 digits.
WIDE = st.DecimalType(38, 0)

_INTEGER_TYPES: dict[str, str] = {"TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "INT": "INTEGER", "BIGINT": "BIGINT"}
_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    "==": lambda c, v: c == v,
    "!=": lambda c, v: c != v,
    "<": lambda c, v: c < v,
    "<=": lambda c, v: c <= v,
    ">": lambda c, v: c > v,
    ">=": lambda c, v: c >= v,
}


def col(name: str) -> Column:
    """The column ``name``, quoted so that dots and backticks in names stay part of the name."""
    return sf.col("`" + name.replace("`", "``") + "`")


def kind_of(data_type: st.DataType) -> str:
    """The portable kind of a Spark type (``ColumnInfo.kind``)."""
    if isinstance(data_type, st.ByteType | st.ShortType | st.IntegerType | st.LongType):
        return "integer"
    if isinstance(data_type, st.FloatType | st.DoubleType):
        return "float"
    if isinstance(data_type, st.DecimalType):
        return "decimal"
    if isinstance(data_type, st.StringType | st.VarcharType | st.CharType):
        return "string"
    if isinstance(data_type, st.BooleanType):
        return "boolean"
    temporal = (st.DateType, st.TimestampType, st.TimestampNTZType, st.DayTimeIntervalType, st.YearMonthIntervalType)
    if isinstance(data_type, temporal):
        return "temporal"
    return "other"


def column_info(field: st.StructField) -> ColumnInfo:
    """A public ``ColumnInfo`` for one field of a Spark schema (type name upper-cased, e.g. ``BIGINT``)."""
    return ColumnInfo(field.name, field.dataType.simpleString().upper(), kind_of(field.dataType))


def is_missing(column: ColumnInfo) -> Column:
    """NULL, or NaN in a float column."""
    c = col(column.name)
    return (c.isNull() | sf.isnan(c)) if column.kind == "float" else c.isNull()


def is_infinite(c: Column) -> Column:
    """Either infinity."""
    return c.isin(sf.lit(math.inf), sf.lit(-math.inf))


def as_text(column: ColumnInfo) -> Column:
    """The text of a unit or group value: identical to DuckDB's ``CAST(x AS VARCHAR)`` for integers and strings."""
    c = col(column.name)
    return c if column.kind == "string" else c.cast("string")


# -- filters -----------------------------------------------------------------------------------------


def literal(value: Any) -> Column:
    """A public constant as a Spark literal (Python ints beyond 64 bits become DECIMAL(38, 0))."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 63):
        return sf.lit(Decimal(value)).cast(WIDE)
    return sf.lit(value)


def predicate_condition(pred: Predicate, kind: str) -> Column:
    """``pred`` as a condition; NULL fails by three-valued logic, NaN explicitly (Spark orders it last)."""
    c = col(pred.column)
    if pred.op == "in":
        condition = c.isin([literal(v) for v in pred.values])
    else:
        condition = _COMPARE[pred.op](c, literal(pred.values[0]))
    if kind == "float":
        condition = ~sf.isnan(c) & condition
    return condition


# -- aggregates --------------------------------------------------------------------------------------


def _grid_exact(spec: ClippedSum) -> bool:
    return spec.grid_low == Fraction(spec.clip.low) and spec.grid_high == Fraction(spec.clip.high)


def round_half_away(y: Column) -> Column:
    """``y`` (a finite double, |y| < 2**63) rounded half away from zero, as a BIGINT, exactly.

    ``floor`` of a double is exact and so is ``|y| - floor(|y|)`` (both lie in the same binade or the
    difference is below one ulp of an integer), so the comparison with 1/2 decides the tie exactly.
    """
    magnitude = sf.abs(y)
    whole = sf.floor(magnitude)
    up = sf.when(magnitude - whole.cast("double") >= sf.lit(0.5), sf.lit(1)).otherwise(sf.lit(0))
    rounded = whole + up
    return sf.when(y < sf.lit(0.0), -rounded).otherwise(rounded)


def grid_units(spec: ClippedSum, kind: str) -> Column:
    """Per row ``q = clamp(round_half_away(clip(x) * 2**-e), q_low, q_high)``; NULL when x is missing.

    The same integer as ``sql._query.fixed_point_sum`` computes in DuckDB: the clip is a CASE (infinities
    clamp to the bounds), the multiplication by a power of two is exact, the rounding is exact, and
    the clamp to the grid bounds only applies when a bound is not itself a grid point.
    """
    x = col(spec.clip.column)
    value = x.cast("double")
    low, high = sf.lit(spec.clip.low), sf.lit(spec.clip.high)
    clipped = sf.when(value < low, low).when(value > high, high).otherwise(value)
    units = round_half_away(clipped * sf.lit(2.0 ** (-spec.grid_exponent)))
    if not _grid_exact(spec):
        units = sf.least(sf.greatest(units, sf.lit(spec.q_low)), sf.lit(spec.q_high))
    present = x.isNotNull() & ~sf.isnan(x) if kind == "float" else x.isNotNull()
    return sf.when(present, units)


def squared_centered_units(spec: CenteredSquares, kind: str) -> Column:
    """Per row ``q * q`` with ``q = round_half_away(clamp((clip(x) - c) * 2**-e, -k, k))``; NULL when x is missing.

    The same integer as ``sql._query.centered_squares_sum`` computes in DuckDB (see ``CenteredSquares``).
    """
    x = col(spec.clip.column)
    value = x.cast("double")
    low, high = sf.lit(spec.clip.low), sf.lit(spec.clip.high)
    clipped = sf.when(value < low, low).when(value > high, high).otherwise(value)
    scaled = (clipped - sf.lit(spec.center)) * sf.lit(2.0 ** (-spec.grid_exponent))
    k = sf.lit(float(spec.q_max))
    bounded = sf.when(scaled < -k, -k).when(scaled > k, k).otherwise(scaled)
    units = round_half_away(bounded)
    present = x.isNotNull() & ~sf.isnan(x) if kind == "float" else x.isNotNull()
    return sf.when(present, units * units)


def exact_sum(units: Column) -> Column:
    """The exact sum of BIGINT grid units as DECIMAL(38, 0) (0 over no rows)."""
    return sf.coalesce(sf.sum(units.cast(WIDE)), sf.lit(0).cast(WIDE))


def count_outside(spec: CountOutside, kind: str) -> Column:
    """Rows below the low bound or above the high one; NaN (above every number in Spark) is excluded."""
    c = col(spec.clip.column)
    value = c.cast("double")
    outside = (value < sf.lit(spec.clip.low)) | (value > sf.lit(spec.clip.high))
    if kind == "float":
        outside = outside & ~sf.isnan(c)
    return sf.count(sf.when(outside, sf.lit(1)))


def count_present(spec: CountPresent, kind: str) -> Column:
    """Rows whose column is neither NULL nor (in a float column) NaN."""
    c = col(spec.column)
    return sf.count(sf.when(~sf.isnan(c), c)) if kind == "float" else sf.count(c)


def clipped_value(column: str, low: float, high: float) -> Column:
    """``clip(column, low, high)`` as a double (the caller removes missing values first)."""
    value = col(column).cast("double")
    return sf.when(value < sf.lit(low), sf.lit(low)).when(value > sf.lit(high), sf.lit(high)).otherwise(value)


# -- fingerprint text --------------------------------------------------------------------------------


def _power_of_two(exponent: Column) -> Column:
    return sf.pow(sf.lit(2.0), exponent)


def _guess_column(index: int) -> str:
    return f"__dps_fg{index}"


def _scale_column(index: int) -> str:
    return f"__dps_fs{index}"


def with_float_scales(frame: DataFrame, columns: tuple[ColumnInfo, ...]) -> DataFrame:
    """``frame`` with, per float column, the scale ``s`` of its portable text (``float_text``).

    Two projections: ``floor(log2 |x|)`` first, then the exponent corrected by exact comparisons with
    powers of two and ``s = max(e, -1022) - 52``. Each refers to the one before several times, so
    Spark keeps them apart (it does not inline an expensive expression used more than once) and
    every value's log2 and powers are computed once, not once per reference. NULL, NaN, zeros and
    infinities get NULL (their text is spelled out in ``float_text``).
    """
    floats = [(i, c) for i, c in enumerate(columns) if c.kind == "float"]
    if not floats:
        return frame
    guesses = []
    for i, column in floats:
        magnitude = sf.abs(col(column.name).cast("double"))
        finite = (magnitude > sf.lit(0.0)) & (magnitude < sf.lit(math.inf))
        guesses.append(sf.when(finite, sf.floor(sf.log2(magnitude))).alias(_guess_column(i)))
    guessed = frame.select("*", *guesses)
    scales = []
    for i, column in floats:
        magnitude = sf.abs(col(column.name).cast("double"))
        guess = sf.col(_guess_column(i))
        exponent = (
            sf.when(magnitude < _power_of_two(guess), guess - 1)
            .when(magnitude >= _power_of_two(guess + 1), guess + 1)
            .otherwise(guess)
        )
        scales.append((sf.greatest(exponent, sf.lit(-1022)) - 52).alias(_scale_column(i)))
    return guessed.select("*", *scales)


def float_text(x: Column, scale: Column) -> Column:
    """The portable text of a float (``_portable``): ``<m>p<s>`` with ``x = m * 2**s`` exactly.

    ``scale`` is ``s`` from ``with_float_scales``. The scaling by ``2**-s`` is split in two factors so
    that neither overflows; scaling by powers of two in the normal range is exact.
    """
    value = x.cast("double")
    half = sf.floor(-scale / 2)
    mantissa = value * _power_of_two(half) * _power_of_two(-scale - half)
    exact = sf.concat(mantissa.cast("long").cast("string"), sf.lit("p"), scale.cast("string"))
    zero = sf.when(value.cast("string").startswith("-"), sf.lit("-0")).otherwise(sf.lit("0"))
    return (
        sf.when(value.isNull(), sf.lit(None).cast("string"))
        .when(sf.isnan(value), sf.lit("nan"))
        .when(value == sf.lit(math.inf), sf.lit("inf"))
        .when(value == sf.lit(-math.inf), sf.lit("-inf"))
        .when(value == sf.lit(0.0), zero)
        .otherwise(exact)
    )


_PLAIN_TEXT_KINDS = frozenset({"integer", "float", "decimal", "boolean", "temporal"})


def text_frame(frame: DataFrame, columns: tuple[ColumnInfo, ...]) -> tuple[DataFrame, Column]:
    """``frame`` with the helper columns the row text reads, and the row text itself.

    The injective row text of ``sql._steward_query.fingerprint_query`` (portable floats): values joined by
    commas, ``-`` for NULL, other kinds than numbers, booleans and times length-prefixed.
    """
    staged = with_float_scales(frame, columns)
    parts = []
    for i, column in enumerate(columns):
        c = col(column.name)
        if column.kind == "float":
            text = float_text(c, sf.col(_scale_column(i)))
        elif column.sql_type == "TIMESTAMP":  # Spark's zoned timestamp: its text depends on the session's zone
            text = sf.unix_micros(c).cast("string")
        else:
            text = c.cast("string")
        if column.kind in _PLAIN_TEXT_KINDS:
            parts.append(sf.coalesce(text, sf.lit("-")))
        else:
            parts.append(sf.coalesce(sf.concat(sf.octet_length(text).cast("string"), sf.lit(":"), text), sf.lit("-")))
    if not parts:
        return staged, sf.lit("")
    pieces: list[Column] = [parts[0]]
    for part in parts[1:]:
        pieces += [sf.lit(","), part]
    return staged, sf.concat(*pieces)


def hex_int(digest: Column) -> Column:
    """The first 60 bits of a hex digest as a BIGINT (``_portable.HEX_DIGITS``)."""
    return sf.conv(sf.substring(digest, 1, HEX_DIGITS), 16, 10).cast("long")


def hex32_halves(digest: Column) -> tuple[Column, Column]:
    """The first 64 bits of a hex digest as two BIGINTs of 32 bits each (high, low)."""
    high = sf.conv(sf.substring(digest, 1, 8), 16, 10).cast("long")
    low = sf.conv(sf.substring(digest, 9, 8), 16, 10).cast("long")
    return high, low


def hex64(digest: Column) -> Column:
    """The first 64 bits of a hex digest as an unsigned integer, DECIMAL(20, 0)."""
    return sf.conv(sf.substring(digest, 1, 16), 16, 10).cast(st.DecimalType(20, 0))


# -- policies ----------------------------------------------------------------------------------------


def clamped(column: ColumnInfo, data_type: st.DataType, clip: Clip) -> Column:
    """``column`` clamped into the bounds, of its own type; NULL and NaN pass unchanged.

    The bounds are moved inwards to values of the column's type first (``sql._steward_query``'s rules), so
    the cast back can neither round out of the bounds nor overflow.
    """
    c = col(column.name)
    low: Column
    high: Column
    if column.kind == "integer":
        lo_int, hi_int = _integer_bounds(clip, _INTEGER_TYPES.get(column.sql_type, "BIGINT"))
        low, high = literal(lo_int), literal(hi_int)
    elif column.kind == "decimal":
        lo_text, hi_text = _decimal_bounds(clip, column.sql_type)
        low, high = sf.lit(Decimal(lo_text)).cast(data_type), sf.lit(Decimal(hi_text)).cast(data_type)
    elif column.sql_type == "FLOAT":
        lo_float, hi_float = _float32_bounds(clip)
        low, high = sf.lit(lo_float).cast("float"), sf.lit(hi_float).cast("float")
    else:
        low, high = sf.lit(clip.low), sf.lit(clip.high)
    bounded = sf.least(sf.greatest(c, low), high)
    return sf.when(is_missing(column), c).otherwise(bounded).cast(data_type).alias(column.name)


# -- public keys -------------------------------------------------------------------------------------

_INTEGER_RANGES = {"TINYINT": 7, "SMALLINT": 15, "INT": 31, "BIGINT": 63}


def key_fits(key: object, column: ColumnInfo, data_type: st.DataType) -> bool:
    """True when ``key`` is exactly a value of the column's type (DuckDB's cast-and-compare rule)."""
    if column.kind == "integer":
        bits = _INTEGER_RANGES.get(column.sql_type, 63)
        return isinstance(key, int) and not isinstance(key, bool) and -(1 << bits) <= key < (1 << bits)
    if column.kind == "float":
        if not isinstance(key, float):
            return False
        return column.sql_type != "FLOAT" or math.isnan(key) or float(_to_float32(key)) == key
    if column.kind == "decimal":
        if not isinstance(key, Decimal) or not isinstance(data_type, st.DecimalType) or not key.is_finite():
            return False
        step = Decimal(1).scaleb(-data_type.scale)
        return key.quantize(step) == key and abs(key) < Decimal(10) ** (data_type.precision - data_type.scale)
    if column.kind == "string":
        return isinstance(key, str)
    if column.kind == "boolean":
        return isinstance(key, bool)
    if isinstance(data_type, st.DateType):
        return type(key) is dt.date
    if isinstance(data_type, st.TimestampType | st.TimestampNTZType):
        return isinstance(key, dt.datetime)
    raise UnsupportedRequest(
        "public keys apply to numeric, string, boolean, date and timestamp columns",
        f"{column.name} ({column.sql_type})",
        "group by another column",
    )


def _to_float32(value: float) -> float:
    import numpy as np

    return float(np.float32(value))


def check_keys(keys: list[Any], column: ColumnInfo, data_type: st.DataType, *, distinct: bool = True) -> None:
    """Public keys must be non-NULL, exactly representable in the group column's type, and distinct.

    Not ``distinct``: the keys are one column's part of several-column keys, where values repeat.
    """
    for key in keys:
        if key is None:
            raise UsageError("a public key may not be None", None, "list only non-NULL keys")
        if not key_fits(key, column, data_type):
            raise UsageError(
                f"every public key must be a value of the group column's type {column.sql_type}",
                key,
                "pass keys of the column's type",
            )
    if distinct and len({repr(k) for k in keys}) != len(keys):
        raise UsageError("public keys must be distinct", "a repeated key", "list each key once")
