"""The portable bounding rules of ``_portable`` as Spark DataFrame transformations.

Everything per unit runs on the executors: one shuffle by unit (a hash partitioning that the windows
share), then windows ordered by integers cut from SHA-256 digests of public text and a derived key.
Keys derived from the salt enter as literals of the plan (never the salt); nothing is registered in
the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf

from dpsense.engine import _portable
from dpsense.engine._portable import POSITION, ROW_HASH, UNIT_HASH, UNIT_ROWS
from dpsense.engine._types import ColumnInfo, Predicate, TableInfo
from dpsense.engine.spark._expr import as_text, col, hex_int, predicate_condition, text_frame

_COPY, _RANK, _GROUP_RANK = "__dps_copy", "__dps_rank", "__dps_grank"


def _keyed(key: str, unit: Column, *rest: Column) -> Column:
    """``hex_int(sha256(key || '|' || u [|| '|' || rest ...]))``: a keyed 60-bit order value."""
    parts = [sf.lit(key), sf.lit("|"), unit]
    for part in rest:
        parts += [sf.lit("|"), part]
    return hex_int(sf.sha2(sf.concat(*parts), 256))


def with_row_hash(frame: DataFrame, info: TableInfo) -> DataFrame:
    """The public columns of ``frame`` and ``rh``, the row-content hash."""
    staged, text = text_frame(public(frame, info), info.columns)
    return staged.select(*[col(c) for c in info.column_names], hex_int(sf.md5(text)).alias(ROW_HASH))


def with_copies(frame: DataFrame, info: TableInfo, unit: ColumnInfo) -> DataFrame:
    """``frame`` with ``rh`` (the row-content hash) and ``j`` (the copy number among identical rows)."""
    ordered = Window.partitionBy(col(unit.name)).orderBy(col(ROW_HASH))
    copy = sf.row_number().over(ordered) - sf.rank().over(ordered) + 1
    return with_row_hash(frame, info).withColumn(_COPY, copy)


def _row_order(key: str, unit: ColumnInfo) -> list[Column]:
    """The keyed order of a unit's rows: ``K(u, rh, j)``, then (rh, j) so that it is a total order."""
    keyed = _keyed(key, as_text(unit), col(ROW_HASH).cast("string"), col(_COPY).cast("string"))
    return [keyed, col(ROW_HASH), col(_COPY)]


def public(frame: DataFrame, info: TableInfo) -> DataFrame:
    """The public columns of a snapshot (hidden ``__dps_`` columns dropped)."""
    return frame.select(*[col(c) for c in info.column_names])


def filtered(frame: DataFrame, info: TableInfo, unit: ColumnInfo, where: Sequence[Predicate]) -> DataFrame:
    """The public columns of the rows with a unit that pass every public filter."""
    condition = col(unit.name).isNotNull()
    kinds = {c.name: c.kind for c in info.columns}
    for pred in where:
        condition = condition & predicate_condition(pred, kinds.get(pred.column, "other"))
    return public(frame, info).where(condition)


def windowed(
    frame: DataFrame,
    info: TableInfo,
    *,
    unit: ColumnInfo,
    max_rows: int,
    row_key: str,
    groups: Sequence[ColumnInfo] = (),
    max_groups: int | None = None,
    group_key: str | None = None,
) -> DataFrame:
    """The windowed bound: optional group cap, then the first ``max_rows`` rows by keyed rank per unit."""
    by_unit = Window.partitionBy(col(unit.name))
    if groups and max_groups is not None and group_key is not None:
        texts = [
            sf.when(col(g.name).isNull(), sf.lit("-")).otherwise(sf.concat(sf.lit(":"), as_text(g))) for g in groups
        ]
        ranked = by_unit.orderBy(_keyed(group_key, as_text(unit), *texts), *texts)
        frame = frame.withColumn(_GROUP_RANK, sf.dense_rank().over(ranked)).where(col(_GROUP_RANK) <= max_groups)
    copied = with_copies(frame, info, unit)
    order = by_unit.orderBy(*_row_order(row_key, unit))
    kept = copied.withColumn(_RANK, sf.row_number().over(order)).where(col(_RANK) <= max_rows)
    return public(kept, info)


def indexed(frame: DataFrame, info: TableInfo, *, unit: ColumnInfo, index_key: str, unit_key: str) -> DataFrame:
    """The snapshot with the hidden index columns: position, unit size and unit hash (NULL units: NULL).

    Positions follow ``H(K_index, u, rh)``, then ``rh``: identical rows tie and take adjacent
    positions in any order, which changes nothing a release can see (the copies are identical), so
    no copy numbers (one sort fewer). The windows leave each unit's rows in position order; no
    further sort is needed (a release only filters the snapshot).
    """
    present = col(unit.name).isNotNull()
    by_unit = Window.partitionBy(col(unit.name))
    hashed = with_row_hash(frame, info)
    order = [_keyed(index_key, as_text(unit), col(ROW_HASH).cast("string")), col(ROW_HASH)]
    position = (sf.row_number().over(by_unit.orderBy(*order)) - 1).cast("long")
    size = sf.count(sf.lit(1)).over(by_unit).cast("long")
    return hashed.select(
        *[col(c) for c in info.column_names],
        sf.when(present, position).alias(POSITION),
        sf.when(present, size).alias(UNIT_ROWS),
        sf.when(present, _keyed(unit_key, as_text(unit))).alias(UNIT_HASH),
    )


def rotation_condition(keys: dict[str, int]) -> Column:
    """``(pos + r_u) mod n_u`` (the caller compares it with C); see ``_portable`` for ``r_u``."""
    uh = col(UNIT_HASH)
    hi = sf.shiftright(uh, _portable.HALF_BITS)
    lo = uh.bitwiseAND(sf.lit(_portable.HALF_MASK).cast("long"))
    prime = sf.lit(_portable.PRIME).cast("long")

    def lin(a: str, b: str, c: str) -> Column:
        # Keys are below 2**31 (int literals); hi and lo are BIGINT, so every product is a BIGINT.
        return (sf.lit(keys[a]) * hi + sf.lit(keys[b]) * lo + sf.lit(keys[c])) % prime

    rotation = lin("a1", "a2", "b1") * prime + lin("a3", "a4", "b2")
    return (col(POSITION) + rotation) % col(UNIT_ROWS)


def rotated(frame: DataFrame, info: TableInfo, *, max_rows: int, keys: dict[str, int]) -> DataFrame:
    """The fast path on an indexed snapshot: a filter, no window, no shuffle."""
    return public(frame.where(rotation_condition(keys) < sf.lit(max_rows).cast("long")), info)
