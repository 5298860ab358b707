"""DuckDB SQL for the portable rules of ``_portable`` (``DuckDBEngine(portable=True)``).

Each query computes, value for value, what ``spark._bound`` and ``spark._expr`` compute on Spark:
SHA-256 of the same texts, the same copy numbers, ranks and 64-bit integer arithmetic. As in
``_query``, only quoted identifiers are spliced into the text; keys derived from a salt travel as
parameters (``$rows_key``, ``$groups_key``, ``$index_key``, ``$unit_key``, ``$rot_a1`` ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from dpsense.engine import _portable
from dpsense.engine._portable import POSITION, ROW_HASH, UNIT_HASH, UNIT_ROWS
from dpsense.engine._types import ColumnInfo, Predicate
from dpsense.engine.sql._query import predicate_condition, quote

_PLAIN_TEXT_KINDS = frozenset({"integer", "float", "decimal", "boolean", "temporal"})


def float_text(expr: str) -> str:
    """The portable text of a float value (``_portable``): ``<m>p<s>`` with ``x = m * 2**s`` exactly."""
    x = f"CAST({expr} AS DOUBLE)"
    magnitude = f"abs({x})"
    guess = f"CAST(floor(log2({magnitude})) AS BIGINT)"
    exponent = (
        f"(CASE WHEN {magnitude} < pow(2.0, {guess}) THEN {guess} - 1 "
        f"WHEN {magnitude} >= pow(2.0, {guess} + 1) THEN {guess} + 1 ELSE {guess} END)"
    )
    scale = f"(greatest({exponent}, -1022) - 52)"
    half = f"CAST(floor(-{scale} / 2) AS BIGINT)"
    mantissa = f"CAST({x} * pow(2.0, {half}) * pow(2.0, -{scale} - {half}) AS BIGINT)"
    exact = f"CAST({mantissa} AS VARCHAR) || 'p' || CAST({scale} AS VARCHAR)"
    return (
        f"(CASE WHEN {x} IS NULL THEN NULL WHEN isnan({x}) THEN 'nan' "
        f"WHEN {x} = 'infinity'::DOUBLE THEN 'inf' WHEN {x} = '-infinity'::DOUBLE THEN '-inf' "
        f"WHEN {x} = 0 THEN (CASE WHEN starts_with(CAST({x} AS VARCHAR), '-') THEN '-0' ELSE '0' END) "
        f"ELSE {exact} END)"
    )


def value_text(column: ColumnInfo) -> str:
    """A value's text in the fingerprint and the row hash: portable floats, zoned times as epoch microseconds."""
    col = quote(column.name)
    if column.kind == "float":
        return float_text(col)
    if column.sql_type.startswith("TIMESTAMP WITH TIME ZONE"):
        return f"CAST(epoch_us({col}) AS VARCHAR)"
    return f"CAST({col} AS VARCHAR)"


def row_text(columns: Sequence[ColumnInfo]) -> str:
    """The injective row text (``_steward_query.fingerprint_query``'s encoding, portable floats)."""
    parts = []
    for column in columns:
        text = value_text(column)
        if column.kind in _PLAIN_TEXT_KINDS:
            parts.append(f"coalesce({text}, '-')")
        else:
            parts.append(f"coalesce(CAST(strlen({text}) AS VARCHAR) || ':' || {text}, '-')")
    return " || ',' || ".join(parts) if parts else "''"


def row_hash(columns: Sequence[ColumnInfo]) -> str:
    """``__dps_rh``: the first 60 bits of the MD5 of the row text, a BIGINT (``_portable``)."""
    return hex_int(f"md5({row_text(columns)})")


def hex_int(digest: str) -> str:
    """The first 60 bits of a hex digest as a BIGINT (``_portable.HEX_DIGITS``)."""
    return f"CAST('0x' || left({digest}, {_portable.HEX_DIGITS}) AS BIGINT)"


def unit_text(column: ColumnInfo) -> str:
    """The unit or group as text (integers and strings only: ``_portable.require_text_column``)."""
    return f"CAST({quote(column.name)} AS VARCHAR)"


def _keyed(key: str, *parts: str) -> str:
    """``hex_int(sha256($key || '|' || part || '|' || ...))``: a keyed 60-bit order value."""
    text = " || '|' || ".join([f"${key}", *parts])
    return hex_int(f"sha256({text})")


def _with_copies(rows_from: str, columns: Sequence[ColumnInfo], unit: str) -> list[str]:
    """CTEs adding ``__dps_rh`` (row-content hash) and ``__dps_copy`` (copy number among identical rows)."""
    window = f"(PARTITION BY {unit} ORDER BY {ROW_HASH})"
    return [
        f"__dps_hashed AS (SELECT *, {row_hash(columns)} AS {ROW_HASH} FROM {rows_from})",
        f"__dps_copied AS (SELECT *, row_number() OVER {window} - rank() OVER {window} + 1 AS __dps_copy "
        "FROM __dps_hashed)",
    ]


def _row_order(key: str, unit: ColumnInfo) -> str:
    keyed = _keyed(key, unit_text(unit), f"CAST({ROW_HASH} AS VARCHAR)", "CAST(__dps_copy AS VARCHAR)")
    return f"{keyed}, {ROW_HASH}, __dps_copy"


def bounded_rows_query(
    source: str,
    columns: Sequence[ColumnInfo],
    *,
    unit: ColumnInfo,
    groups: Sequence[ColumnInfo],
    max_groups_per_unit: int | None,
    where: Sequence[Predicate] = (),
) -> tuple[str, dict[str, object]]:
    """SELECT keeping <= $max_rows rows per unit (and <= $max_groups groups) by the portable windowed rule.

    ``columns`` are the table's public columns. Parameters: ``$rows_key`` (and ``$groups_key`` with a
    group cap) from ``_portable.text_key``, ``$max_rows``, ``$max_groups`` and those of the filters
    (``$w<i>_<j>``).
    """
    kinds = {c.name: c.kind for c in columns}
    cols = ", ".join(quote(c.name) for c in columns)
    u = quote(unit.name)
    params: dict[str, object] = {}
    conditions = [f"{u} IS NOT NULL"]
    for i, pred in enumerate(where):
        condition, p = predicate_condition(pred, kinds.get(pred.column, "other"), f"w{i}")
        conditions.append(condition)
        params.update(p)
    parts = [f"__dps_in AS (SELECT {cols} FROM {source} WHERE {' AND '.join(conditions)})"]
    rows_from = "__dps_in"
    if groups and max_groups_per_unit is not None:
        # one text per group column ('-' for NULL, else ':' and its text): the keyed hash reads them
        # joined, the tie-break orders by each, so distinct value combinations never share a rank
        texts = [f"(CASE WHEN {quote(g.name)} IS NULL THEN '-' ELSE ':' || {unit_text(g)} END)" for g in groups]
        parts.append(
            f"__dps_grouped AS (SELECT {cols} FROM (SELECT *, dense_rank() OVER (PARTITION BY {u} ORDER BY "
            f"{_keyed('groups_key', unit_text(unit), *texts)}, {', '.join(texts)}) AS __dps_grank FROM __dps_in) "
            "WHERE __dps_grank <= $max_groups)"
        )
        rows_from = "__dps_grouped"
    parts += _with_copies(rows_from, columns, u)
    ranked = (
        f"SELECT {cols}, row_number() OVER (PARTITION BY {u} ORDER BY {_row_order('rows_key', unit)}) "
        "AS __dps_rank FROM __dps_copied"
    )
    sql = "WITH " + ",\n".join(parts) + f"\nSELECT {cols} FROM ({ranked}) WHERE __dps_rank <= $max_rows"
    return sql, params


def unit_index_query(source: str, columns: Sequence[ColumnInfo], *, unit: ColumnInfo) -> str:
    """SELECT of the public columns with the portable index columns (pos, n, uh), in (unit, position) order.

    Parameters: ``$index_key`` and ``$unit_key`` from ``_portable.text_key``.
    """
    cols = ", ".join(quote(c.name) for c in columns)
    u = quote(unit.name)
    present = f"{u} IS NOT NULL"
    # Identical rows tie and take adjacent positions in any order: the copies are interchangeable.
    order = f"{_keyed('index_key', unit_text(unit), f'CAST({ROW_HASH} AS VARCHAR)')}, {ROW_HASH}"
    return (
        f"WITH __dps_hashed AS (SELECT {cols}, {row_hash(columns)} AS {ROW_HASH} FROM {source})\nSELECT {cols}, "
        f"CASE WHEN {present} THEN CAST(row_number() OVER __dps_w - 1 AS BIGINT) END AS {POSITION}, "
        f"CASE WHEN {present} THEN CAST(count(*) OVER (PARTITION BY {u}) AS BIGINT) END AS {UNIT_ROWS}, "
        f"CASE WHEN {present} THEN {_keyed('unit_key', unit_text(unit))} END AS {UNIT_HASH} "
        f"FROM __dps_hashed WINDOW __dps_w AS (PARTITION BY {u} ORDER BY {order}) "
        f"ORDER BY {u} NULLS LAST, {POSITION}"
    )


#: The parameter holding C in the rotation filter.
ROTATION_ROWS = "rot_c"


def rotation_keys(salt: bytes) -> dict[str, object]:
    """The rotation's parameters ``$rot_a1`` .. ``$rot_b2`` (``_portable.rotation_keys``)."""
    return {f"rot_{name}": value for name, value in _portable.rotation_keys(salt).items()}


def rotation_query(source: str, columns: Sequence[str]) -> str:
    """SELECT of the public columns of an indexed snapshot keeping ``(pos + r_u) mod n_u < $rot_c``."""
    cols = ", ".join(quote(c) for c in columns)
    hi = f"({UNIT_HASH} >> {_portable.HALF_BITS})"
    lo = f"({UNIT_HASH} & {_portable.HALF_MASK})"
    prime = _portable.PRIME

    def lin(a: str, b: str, c: str) -> str:
        return f"((CAST($rot_{a} AS BIGINT) * {hi} + CAST($rot_{b} AS BIGINT) * {lo} + $rot_{c}) % {prime})"

    rotation = f"{lin('a1', 'a2', 'b1')} * {prime} + {lin('a3', 'a4', 'b2')}"
    return f"SELECT {cols} FROM {source} WHERE ({POSITION} + {rotation}) % {UNIT_ROWS} < $rot_c"
