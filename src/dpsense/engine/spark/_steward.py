"""The steward's registration steps on Spark: keyed fingerprint, data-quality counts, per-column policies.

The same results as ``sql._steward_query`` on DuckDB, value for value: the fingerprint hashes the same
portable row text, the counts count the same values, the policies clamp to the same bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from dpsense.engine._types import Clip, ColumnInfo, ColumnQuality, TableInfo
from dpsense.engine.spark import _expr
from dpsense.engine.spark._expr import col

#: Rows below which BIGINT sums of 32-bit halves of the row hashes cannot overflow.
NARROW_ROWS = 1 << 31

Runner = Callable[..., Any]


def _one_row(frame: DataFrame, run: Runner) -> tuple[Any, ...]:
    rows = run(frame.collect)
    return tuple(rows[0])


def distinct_count(frame: DataFrame, column: ColumnInfo, run: Runner) -> int:
    """The number of distinct non-NULL values of ``column`` (the registration's count of units)."""
    return int(_one_row(frame.agg(sf.countDistinct(col(column.name))), run)[0])


def fingerprint_sum(frame: DataFrame, columns: tuple[ColumnInfo, ...], row_key: str, run: Runner) -> tuple[int, int]:
    """(row count, exact sum of the first 64 bits of ``sha256(row key || '|' || row text)`` per row).

    Summed as two BIGINT sums of 32-bit halves below 2**31 rows (neither can overflow), as
    DECIMAL(38, 0) beyond.
    """
    staged, text = _expr.text_frame(frame, columns)
    digest = sf.sha2(sf.concat(sf.lit(row_key), sf.lit("|"), text), 256)
    high, low = _expr.hex32_halves(digest)
    zero = sf.lit(0)
    count, high_sum, low_sum = _one_row(
        staged.agg(sf.count(sf.lit(1)), sf.coalesce(sf.sum(high), zero), sf.coalesce(sf.sum(low), zero)), run
    )
    if int(count) < NARROW_ROWS:
        return int(count), (int(high_sum) << 32) + int(low_sum)
    (total,) = _one_row(staged.agg(_expr.exact_sum(_expr.hex64(digest))), run)
    return int(count), int(total)


def quality(frame: DataFrame, infos: list[ColumnInfo], run: Runner) -> dict[str, ColumnQuality]:
    """NULL, NaN and infinity counts per column, in one pass (the last two only in float columns)."""
    counts: list[Column] = []
    for info in infos:
        c = col(info.name)
        counts.append(sf.count(sf.when(c.isNull(), 1)))
        if info.kind == "float":
            counts.append(sf.count(sf.when(sf.isnan(c), 1)))
            counts.append(sf.count(sf.when(_expr.is_infinite(c), 1)))
    row = _one_row(frame.agg(*counts), run)
    out: dict[str, ColumnQuality] = {}
    position = 0
    for info in infos:
        if info.kind == "float":
            out[info.name] = ColumnQuality(int(row[position]), int(row[position + 1]), int(row[position + 2]))
            position += 3
        else:
            out[info.name] = ColumnQuality(int(row[position]), 0, 0)
            position += 1
    return out


def with_policies(
    frame: DataFrame, info: TableInfo, *, drop_missing: list[str], drop_nonfinite: list[str], clamp: dict[str, Clip]
) -> DataFrame:
    """The public columns of ``frame`` with the policies applied (``sql._steward_query.policy_query``'s rules)."""
    types = {f.name: f.dataType for f in frame.schema.fields}
    selects = [_expr.clamped(c, types[c.name], clamp[c.name]) if c.name in clamp else col(c.name) for c in info.columns]
    condition: Column = sf.lit(True)
    for name in dict.fromkeys(drop_missing):
        condition = condition & col(name).isNotNull()
    for name in dict.fromkeys(drop_nonfinite):
        found = info.column(name)
        if found is not None and found.kind == "float":
            c = col(name)
            condition = condition & (c.isNull() | ~(sf.isnan(c) | _expr.is_infinite(c)))
    return frame.where(condition).select(*selects)
