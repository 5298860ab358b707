"""SQL for the steward's registration steps: keyed fingerprint, data-quality counts, per-column policies.

As in ``_query``, only quoted identifiers are spliced into the text; keys and bounds are parameters.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np

from dpsense.core.errors import UsageError
from dpsense.engine._checks import INTEGER_RANGES  # clamp bounds move inside their type first
from dpsense.engine._types import Clip, ColumnInfo, TableInfo
from dpsense.engine.sql._portable_query import float_text
from dpsense.engine.sql._query import DUCKDB, Dialect, quote

_FINGERPRINT_DOMAIN = b"dpsense/fingerprint/v1"


# -- fingerprint --------------------------------------------------------------------------------------


def fingerprint_row_key(key: bytes) -> str:
    """The 128-bit hex key that prefixes every row's hash, derived so that ``key`` does one job only.

    128 bits keep the key secret and leave room for a short row in one SHA-256 block (55 bytes).
    """
    return hmac.new(key, _FINGERPRINT_DOMAIN + b"/rows", hashlib.sha256).hexdigest()[:32]


#: Kinds whose text never holds a comma and is never exactly "-": their values need no length prefix.
_PLAIN_TEXT_KINDS = frozenset({"integer", "float", "decimal", "boolean", "temporal"})


def _value_text(column: ColumnInfo, dialect: Dialect) -> str:
    col = quote(column.name)
    if column.kind == "float":
        # Exact and engine-independent (``_portable``): Spark's decimal text of a double differs.
        return float_text(col)
    if column.sql_type.startswith("TIMESTAMP WITH TIME ZONE"):
        col = dialect.instant.format(col)  # the text of a zoned time depends on the session's zone
    return f"CAST({col} AS VARCHAR)"


def fingerprint_query(relation: str, columns: Sequence[ColumnInfo], dialect: Dialect = DUCKDB) -> str:
    """``count(*)`` and the exact sum of a 64-bit keyed hash per row (parameter ``$key``, hex text).

    A sum does not depend on row order. The row text is injective: values joined by commas, each
    either ``-`` for NULL or its text, which for strings and nested values carries its byte length
    first (``<length>:<text>``) and for numbers, booleans and times holds neither a comma nor is
    ``-``. Floats are spelled exactly as ``<m>p<s>`` (``_portable``), so the fingerprint of the same
    data is the same on DuckDB and Spark. Each value is cast to text once, in the inner SELECT.
    """
    texts = ", ".join(f"{_value_text(c, dialect)} AS __dps_v{i}" for i, c in enumerate(columns))
    parts = []
    for i, c in enumerate(columns):
        v = f"__dps_v{i}"
        parts.append(
            f"coalesce({v}, '-')"
            if c.kind in _PLAIN_TEXT_KINDS
            else f"coalesce(CAST(strlen({v}) AS VARCHAR) || ':' || {v}, '-')"
        )
    row_text = " || ',' || ".join(parts)
    row = dialect.hex64.format(dialect.hash_hex.format(f"$key || '|' || {row_text}"))
    return f"SELECT count(*), coalesce(sum(CAST({row} AS {dialect.wide_int})), 0) FROM (SELECT {texts} FROM {relation})"


def fingerprint_digest(key: bytes, info: TableInfo, count: int, total: int) -> str:
    """HMAC-SHA256 under ``key`` of the schema (names and kinds, in order), the row count and the sum mod 2**64."""
    schema = json.dumps([[c.name, c.kind] for c in info.columns], ensure_ascii=False, separators=(",", ":"))
    message = b"\0".join([_FINGERPRINT_DOMAIN, schema.encode(), str(count).encode(), str(total % (1 << 64)).encode()])
    return hmac.new(key, message, hashlib.sha256).hexdigest()


# -- data quality -------------------------------------------------------------------------------------


def data_quality_query(relation: str, columns: Sequence[ColumnInfo], dialect: Dialect = DUCKDB) -> str:
    """One row: for each column its NULL count, NaN count and infinity count (0 unless a float column)."""
    selects = []
    for c in columns:
        col = quote(c.name)
        selects.append(f"count(*) FILTER (WHERE {col} IS NULL)")
        if c.kind == "float":
            selects.append(f"count(*) FILTER (WHERE {dialect.is_nan.format(col)})")
            selects.append(f"count(*) FILTER (WHERE {dialect.is_inf.format(col)})")
        else:
            selects += ["0", "0"]
    return f"SELECT {', '.join(selects)} FROM {relation}"


# -- policies -----------------------------------------------------------------------------------------


def _no_value_fits(clip: Clip, sql_type: str) -> UsageError:
    return UsageError(
        f"no value of the column's type {sql_type} lies in the clamp bounds",
        (clip.column, clip.low, clip.high),
        "widen the bounds",
    )


def _integer_bounds(clip: Clip, sql_type: str) -> tuple[int, int]:
    type_low, type_high = INTEGER_RANGES.get(sql_type, INTEGER_RANGES["HUGEINT"])
    low, high = max(math.ceil(clip.low), type_low), min(math.floor(clip.high), type_high)
    if low > high:
        raise _no_value_fits(clip, sql_type)
    return low, high


def _decimal_bounds(clip: Clip, sql_type: str) -> tuple[str, str]:
    found = re.match(r"^DECIMAL\((\d+),\s*(\d+)\)$", sql_type)
    width, scale = (int(found.group(1)), int(found.group(2))) if found else (18, 3)
    step = Decimal(1).scaleb(-scale)
    largest = (Decimal(10) ** width - 1).scaleb(-scale)
    low = max(Decimal(clip.low).quantize(step, rounding=ROUND_CEILING), -largest)
    high = min(Decimal(clip.high).quantize(step, rounding=ROUND_FLOOR), largest)
    if low > high:
        raise _no_value_fits(clip, sql_type)
    return str(low), str(high)


def _float32_bounds(clip: Clip) -> tuple[float, float]:
    low, high = np.float32(clip.low), np.float32(clip.high)
    if float(low) < clip.low:
        low = np.nextafter(low, np.float32(np.inf))
    if float(high) > clip.high:
        high = np.nextafter(high, np.float32(-np.inf))
    if low > high:
        raise _no_value_fits(clip, "FLOAT")
    return float(low), float(high)


def _clamped(column: ColumnInfo, clip: Clip, prefix: str, dialect: Dialect) -> tuple[str, dict[str, object]]:
    """``column`` clamped into the bounds, of the column's own type; NULL and NaN pass unchanged.

    The bounds are first moved inwards to values of the column's type (integers: ceil/floor; decimals:
    to the scale; FLOAT: to float32), so the cast back to the type can neither round out of the bounds
    nor overflow.
    """
    col, sql_type = quote(column.name), column.sql_type
    low: object
    high: object
    if column.kind == "integer":
        low, high = _integer_bounds(clip, sql_type)
        bounded = f"least(greatest({col}, ${prefix}_lo), ${prefix}_hi)"
    elif column.kind == "decimal":
        low, high = _decimal_bounds(clip, sql_type)
        bounded = f"least(greatest({col}, CAST(${prefix}_lo AS {sql_type})), CAST(${prefix}_hi AS {sql_type}))"
    elif sql_type == "FLOAT":
        low, high = _float32_bounds(clip)
        bounded = f"least(greatest({col}, CAST(${prefix}_lo AS FLOAT)), CAST(${prefix}_hi AS FLOAT))"
    else:
        low, high = clip.low, clip.high
        bounded = f"least(greatest({col}, ${prefix}_lo), ${prefix}_hi)"
    # GREATEST/LEAST skip NULLs and would order NaN above every bound: pass both through first.
    keep = f"{col} IS NULL" + (f" OR {dialect.is_nan.format(col)}" if column.kind == "float" else "")
    expr = f"CAST(CASE WHEN {keep} THEN {col} ELSE {bounded} END AS {sql_type}) AS {col}"
    return expr, {f"{prefix}_lo": low, f"{prefix}_hi": high}


def policy_query(
    relation: str,
    info: TableInfo,
    *,
    drop_missing: Sequence[str],
    drop_nonfinite: Sequence[str],
    clamp: dict[str, Clip],
    dialect: Dialect = DUCKDB,
) -> tuple[str, dict[str, object]]:
    """SELECT of the table with the policies applied, same columns and types, and its parameters.

    Rows with NULL in a ``drop_missing`` column go; rows with NaN or an infinity in a float
    ``drop_nonfinite`` column go (a NULL there is kept: missing is a separate policy; other kinds
    hold no NaN or infinity, so the policy changes nothing there); ``clamp``
    columns are clamped into their bounds, infinities included.
    """
    params: dict[str, object] = {}
    selects = []
    for i, column in enumerate(info.columns):
        if column.name in clamp:
            expr, p = _clamped(column, clamp[column.name], f"c{i}", dialect)
            selects.append(expr)
            params.update(p)
        else:
            selects.append(quote(column.name))
    conditions = [f"{quote(c)} IS NOT NULL" for c in dict.fromkeys(drop_missing)]
    for name in dict.fromkeys(drop_nonfinite):
        found = info.column(name)
        if found is not None and found.kind == "float":
            col = quote(name)
            conditions.append(f"({col} IS NULL OR NOT ({dialect.is_nan.format(col)} OR {dialect.is_inf.format(col)}))")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT {', '.join(selects)} FROM {relation}{where}", params
