"""SQL text for the engine's relational steps (DuckDB dialect; Spark SQL has the same shape).

Only identifiers are spliced into the text (always quoted); every value, bound and secret travels as
a named parameter, so the salt never appears in SQL text or in a catalog entry. The dialect-specific
pieces (the hash function, the 128-bit integer type) sit in ``Dialect`` so a Spark engine can swap them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dpsense.engine._types import ClippedSum, CountRows, CountUnits

#: Prefix of every relation the engine creates; source columns may not use it.
INTERNAL_PREFIX = "__dps_"


@dataclass(frozen=True)
class Dialect:
    """The few SQL spellings that differ between engines."""

    hash_hex: str = "sha256({})"  # a keyed-hash input string -> hex digest (Spark: sha2({}, 256))
    wide_int: str = "HUGEINT"  # exact 128-bit sum (Spark: DECIMAL(38, 0))


DUCKDB = Dialect()


def quote(identifier: str) -> str:
    """A double-quoted identifier (embedded quotes doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def encode(expr: str) -> str:
    """An injective text encoding of one value: ``<byte length>:<text>`` or ``-`` for NULL."""
    text = f"CAST({expr} AS VARCHAR)"
    return f"coalesce(CAST(strlen({text}) AS VARCHAR) || ':' || {text}, '-')"


def _missing(column: str) -> str:
    value = f"CAST({quote(column)} AS DOUBLE)"
    return f"({quote(column)} IS NULL OR isnan({value}))"


def clipped_value(column: str, low_param: str, high_param: str) -> str:
    """``clip(column, low, high)`` as a DOUBLE; NULL when the value is missing (NULL or NaN).

    The CASE comes first because DuckDB's GREATEST/LEAST ignore NULL arguments.
    """
    value = f"CAST({quote(column)} AS DOUBLE)"
    return f"CASE WHEN {_missing(column)} THEN NULL ELSE least(greatest({value}, ${low_param}), ${high_param}) END"


def fixed_point_units(spec: ClippedSum, prefix: str) -> tuple[str, dict[str, object]]:
    """The expression of one clipped value in integer grid units, and its parameters.

    Multiplying a double by a power of two is exact and ROUND rounds half away from zero, so the
    integer equals the exact ``round_half_away(clip(x) / 2**e)``, then clamped to the grid bounds.
    """
    column = spec.clip.column
    clipped = f"least(greatest(CAST({quote(column)} AS DOUBLE), ${prefix}_lo), ${prefix}_hi)"
    units = f"CAST(round({clipped} * ${prefix}_m) AS BIGINT)"
    # GREATEST/LEAST skip NULLs (they would turn a missing value into a bound): test for missing first.
    expr = f"CASE WHEN {_missing(column)} THEN NULL ELSE least(greatest({units}, ${prefix}_qlo), ${prefix}_qhi) END"
    params: dict[str, object] = {
        f"{prefix}_lo": spec.clip.low,
        f"{prefix}_hi": spec.clip.high,
        f"{prefix}_m": 2.0 ** (-spec.grid_exponent),
        f"{prefix}_qlo": spec.q_low,
        f"{prefix}_qhi": spec.q_high,
    }
    return expr, params


def bounded_rows_query(
    source: str,
    columns: Sequence[str],
    *,
    unit_column: str,
    group_column: str | None,
    max_groups_per_unit: int | None,
    dialect: Dialect = DUCKDB,
) -> str:
    """SELECT keeping <= $max_rows rows per unit (and <= $max_groups groups), ordered by a keyed hash.

    Row identity is the row's content plus its occurrence number among identical rows of the same
    content, so the choice does not depend on physical row order (identical rows are interchangeable).
    Parameters: ``$salt`` (hex text), ``$max_rows``, and ``$max_groups`` when groups are capped.
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    row_enc = " || ',' || ".join(encode(quote(c)) for c in columns)
    row_key = dialect.hash_hex.format("$salt || '|row|' || __dps_enc || '#' || CAST(__dps_occ AS VARCHAR)")
    parts = [
        f"WITH __dps_src AS (SELECT {cols}, {row_enc} AS __dps_enc FROM {source} WHERE {unit} IS NOT NULL)",
        "__dps_occ AS (SELECT *, row_number() OVER (PARTITION BY __dps_enc) AS __dps_occ FROM __dps_src)",
    ]
    rows_from = "__dps_occ"
    if group_column is not None and max_groups_per_unit is not None:
        group = quote(group_column)
        group_key = dialect.hash_hex.format(f"$salt || '|group|' || {encode('__dps_u')} || ',' || {encode('__dps_g')}")
        parts.append(
            "__dps_groups AS (SELECT __dps_u, __dps_g FROM ("
            f"SELECT __dps_u, __dps_g, row_number() OVER (PARTITION BY __dps_u ORDER BY {group_key}, "
            f"{encode('__dps_g')}) AS __dps_grank "
            f"FROM (SELECT DISTINCT {unit} AS __dps_u, {group} AS __dps_g FROM __dps_src)"
            ") WHERE __dps_grank <= $max_groups)"
        )
        parts.append(
            "__dps_kept AS (SELECT o.* FROM __dps_occ o SEMI JOIN __dps_groups g "
            f"ON o.{unit} IS NOT DISTINCT FROM g.__dps_u AND o.{group} IS NOT DISTINCT FROM g.__dps_g)"
        )
        rows_from = "__dps_kept"
    parts.append(
        f"__dps_ranked AS (SELECT *, row_number() OVER (PARTITION BY {unit} "
        f"ORDER BY {row_key}, __dps_enc, __dps_occ) AS __dps_rank FROM {rows_from})"
    )
    return ",\n".join(parts) + f"\nSELECT {cols} FROM __dps_ranked WHERE __dps_rank <= $max_rows"


def order_statistics_query(view: str, column: str) -> str:
    """Clipped values of ranks $first..$last (1-based, ascending), padded with $lo below 1 and $hi above n."""
    clipped = clipped_value(column, "lo", "hi")
    return (
        f"WITH __dps_v AS (SELECT {clipped} AS v FROM {view} WHERE NOT {_missing(column)}),\n"
        "__dps_r AS (SELECT row_number() OVER (ORDER BY v) AS i, v FROM __dps_v)\n"
        "SELECT w.i, coalesce(r.v, CASE WHEN w.i <= 0 THEN $lo ELSE $hi END) "
        "FROM range($first, $last + 1) AS w(i) LEFT JOIN __dps_r r ON r.i = w.i ORDER BY w.i"
    )


def group_aggregates_query(
    view: str,
    *,
    unit_column: str,
    group_column: str | None,
    key_type: str | None,
    n_keys: int | None,
    aggregates: Sequence[CountRows | CountUnits | ClippedSum],
    dialect: Dialect = DUCKDB,
) -> tuple[str, dict[str, object]]:
    """Aggregates per group; with ``n_keys`` the output has exactly the public keys $k0.. in order.

    Output columns: the key (or the key's position when keys are public), then one per aggregate.
    Counts of absent keys are 0 and their sums 0 (COALESCE after the LEFT JOIN).
    """
    params: dict[str, object] = {}
    selects: list[str] = []
    for i, agg in enumerate(aggregates):
        if isinstance(agg, CountRows):
            selects.append(f"count(*) AS __dps_a{i}")
        elif isinstance(agg, CountUnits):
            selects.append(f"count(DISTINCT {quote(unit_column)}) AS __dps_a{i}")
        else:
            expr, p = fixed_point_units(agg, f"s{i}")
            selects.append(f"sum(CAST({expr} AS {dialect.wide_int})) AS __dps_a{i}")
            params.update(p)
    outs = ", ".join(f"coalesce(a.__dps_a{i}, 0)" for i in range(len(aggregates)))
    if group_column is None:
        return f"SELECT NULL, {outs} FROM (SELECT {', '.join(selects)} FROM {view}) a", params
    group = quote(group_column)
    agg_sql = f"SELECT {group} AS __dps_key, {', '.join(selects)} FROM {view} GROUP BY {group}"
    if n_keys is None:
        return f"SELECT a.__dps_key, {outs} FROM ({agg_sql}) a ORDER BY a.__dps_key NULLS LAST", params
    values = ", ".join(f"(CAST($k{j} AS {key_type}), {j})" for j in range(n_keys))
    sql = (
        f"SELECT k.__dps_ord, {outs} FROM (VALUES {values}) AS k(__dps_key, __dps_ord) "
        f"LEFT JOIN ({agg_sql}) a ON k.__dps_key = a.__dps_key ORDER BY k.__dps_ord"
    )
    return sql, params
