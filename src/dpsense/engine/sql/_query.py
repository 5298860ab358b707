"""SQL text for the engine's relational steps (DuckDB dialect; Spark SQL has the same shape).

Only identifiers are spliced into the text (always quoted); every value, bound and secret travels as
a named parameter, so neither the salt nor a key derived from it appears in SQL text or in a catalog
entry. The dialect-specific pieces (hash functions, the 128-bit integer type, NaN tests) sit in
``Dialect`` so a Spark engine can swap them.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpsense.engine._types import (
    Aggregate,
    CenteredSquares,
    ClippedSum,
    CountOutside,
    CountPresent,
    CountRows,
    CountUnits,
    Predicate,
)

#: Prefix of every relation the engine creates; source columns may not use it.
INTERNAL_PREFIX = "__dps_"

_SQL_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True)
class Dialect:
    """The few SQL spellings that differ between engines."""

    hash_hex: str = "sha256({})"  # text -> hex digest of a cryptographic hash (Spark: sha2({}, 256))
    hex64: str = "CAST('0x' || left({}, 16) AS UBIGINT)"  # the first 64 bits of a hex digest as an integer
    wide_int: str = "HUGEINT"  # exact 128-bit sum (Spark: DECIMAL(38, 0))
    # An exact sum of BIGINTs: DuckDB's sum of BIGINT accumulates in a HUGEINT, so no per-row cast
    # (Spark: sum(CAST({} AS DECIMAL(38, 0)))).
    exact_sum: str = "sum({})"
    row_hash: str = "hash({})"  # unkeyed 64-bit hash of one or more values (Spark: xxhash64({}))
    # One keyed mixing round: a 64-bit hash of (value XOR secret key) (Spark: xxhash64({} ^ {})).
    mix64: str = "hash(xor({}, CAST({} AS UBIGINT)))"
    is_nan: str = "isnan({})"
    is_inf: str = "isinf({})"
    instant: str = "epoch_us({})"  # a zoned timestamp as an integer, independent of the session's zone
    materialized: str = "AS MATERIALIZED"  # a CTE computed once although read several times
    # The hidden position and row-count columns of a unit index: 32 bits, as every release reads them
    # (a unit may hold up to 2**32 - 1 rows) (Spark: INT, which holds 2**31 - 1).
    index_int: str = "UINTEGER"
    # (pos + r) mod n with r the top 63 bits of the 64-bit hash h, so the sum cannot overflow
    # (Spark: pmod({pos} + shiftrightunsigned({h}, 1), {n})).
    rotation: str = "({pos} + ({h} >> 1)) % {n}"

    def keyed64(self, expr: str, key1: str, key2: str) -> str:
        """A keyed 64-bit value of ``expr``: two mixing rounds, each after XOR with a secret key parameter."""
        return self.mix64.format(self.mix64.format(expr, key1), key2)


DUCKDB = Dialect()


def quote(identifier: str) -> str:
    """A double-quoted identifier (embedded quotes doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def derived_keys(salt: bytes, purpose: str, names: Sequence[str]) -> dict[str, int]:
    """64-bit secret keys ``HMAC-SHA256(salt, purpose/name)``, one per parameter name.

    Only these derived keys reach the SQL engine (as parameters); the salt itself never does.
    """
    out = {}
    for name in names:
        digest = hmac.new(salt, f"dpsense/{purpose}/{name}".encode(), hashlib.sha256).digest()
        out[name] = int.from_bytes(digest[:8], "big")
    return out


#: Parameters of the keyed hashes that order rows and groups within a unit.
ROW_KEYS = ("rk1", "rk2")
GROUP_KEYS = ("gk1", "gk2")


def _missing(column: str, dialect: Dialect = DUCKDB) -> str:
    value = f"CAST({quote(column)} AS DOUBLE)"
    return f"({quote(column)} IS NULL OR {dialect.is_nan.format(value)})"


def clipped_value(column: str, low_param: str, high_param: str) -> str:
    """``clip(column, low, high)`` as a DOUBLE; NULL when the value is missing (NULL or NaN).

    The CASE comes first because DuckDB's GREATEST/LEAST ignore NULL arguments.
    """
    value = f"CAST({quote(column)} AS DOUBLE)"
    return f"CASE WHEN {_missing(column)} THEN NULL ELSE least(greatest({value}, ${low_param}), ${high_param}) END"


def _grid_exact(spec: ClippedSum) -> bool:
    """True when both bounds are grid points, so rounding a clipped value cannot leave the grid bounds."""
    return spec.grid_low == Fraction(spec.clip.low) and spec.grid_high == Fraction(spec.clip.high)


def _between_bounds(value: str, prefix: str, low: str = "lo", high: str = "hi") -> str:
    """``value`` clamped to the parameters ``$<prefix>_lo`` / ``$<prefix>_hi`` by a CASE (NULL stays NULL)."""
    lo, hi = f"${prefix}_{low}", f"${prefix}_{high}"
    return f"CASE WHEN {value} < {lo} THEN {lo} WHEN {value} > {hi} THEN {hi} ELSE {value} END"


def fixed_point_sum(
    spec: ClippedSum, kind: str, prefix: str, dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """The exact sum of one clipped column in integer grid units, as an aggregate expression, and its parameters.

    Per row ``q = round(clip(x) * 2**-e)``, then clamped to ``[q_low, q_high]``: multiplying a double by
    a power of two is exact and ROUND rounds half away from zero, so ``q`` equals the exact
    ``round_half_away(clip(x) / 2**e)`` (docs/math/global-sensitivity.md). When both bounds are grid points
    (the usual case) the clamp to ``[q_low, q_high]`` is a no-op and left out. Missing values add
    nothing: a NULL stays NULL through the CASE (which the SUM skips) and NaN rows are filtered out
    (only float columns hold NaN). The clip is a CASE rather than GREATEST/LEAST, which skip NULLs and
    are slower here; the FILTER keeps NaN, which compares above every number, from becoming ``high``.
    """
    column = quote(spec.clip.column)
    units, params = _grid_units(spec, prefix)
    present = []
    if kind == "float":
        present.append(f"NOT {dialect.is_nan.format(column)}")
    if not _grid_exact(spec):
        # GREATEST/LEAST would turn a NULL into a bound: NULL rows are filtered out first.
        present.append(f"{column} IS NOT NULL")
    total = dialect.exact_sum.format(units)
    return (f"{total} FILTER (WHERE {' AND '.join(present)})" if present else total), params


def _grid_units(spec: ClippedSum, prefix: str) -> tuple[str, dict[str, object]]:
    """The integer grid units ``q`` of one present value (``fixed_point_sum``'s summand) and its parameters."""
    column = quote(spec.clip.column)
    clipped = _between_bounds(f"CAST({column} AS DOUBLE)", prefix)
    units = f"CAST(round({clipped} * ${prefix}_m) AS BIGINT)"
    params: dict[str, object] = {
        f"{prefix}_lo": spec.clip.low,
        f"{prefix}_hi": spec.clip.high,
        f"{prefix}_m": 2.0 ** (-spec.grid_exponent),
    }
    if not _grid_exact(spec):
        units = f"least(greatest({units}, ${prefix}_qlo), ${prefix}_qhi)"
        params.update({f"{prefix}_qlo": spec.q_low, f"{prefix}_qhi": spec.q_high})
    return units, params


def stored_grid_units(
    spec: ClippedSum, kind: str, prefix: str, dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """Per row, the grid units ``fixed_point_sum`` would add for ``spec``, NULL for a missing value.

    Stored once at registration (``DuckDBEngine.index_units(sums=...)``), so that a release sums a
    BIGINT column: ``sum`` of these values equals ``fixed_point_sum`` exactly (same summands, the
    missing ones NULL instead of filtered out).
    """
    column = quote(spec.clip.column)
    units, params = _grid_units(spec, prefix)
    missing = [f"{column} IS NULL"]
    if kind == "float":
        missing.append(dialect.is_nan.format(column))
    return f"CASE WHEN {' OR '.join(missing)} THEN NULL ELSE {units} END", params


def centered_squares_sum(
    spec: CenteredSquares, kind: str, prefix: str, dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """The exact sum of squared centred grid units of one clipped column, and its parameters.

    Per row ``q = round(clamp((clip(x) - c) * 2**-e, -k, k))`` (see ``CenteredSquares``), then
    ``q * q`` as a BIGINT (below 2**62); DuckDB sums BIGINTs in a HUGEINT, so the sum is exact.
    Missing values add nothing, as in ``fixed_point_sum``.
    """
    column = quote(spec.clip.column)
    clipped = _between_bounds(f"CAST({column} AS DOUBLE)", prefix)
    scaled = f"(({clipped}) - ${prefix}_c) * ${prefix}_m"
    bounded = _between_bounds(scaled, prefix, "mk", "k")
    units = f"CAST(round({bounded}) AS BIGINT)"
    params: dict[str, object] = {
        f"{prefix}_lo": spec.clip.low,
        f"{prefix}_hi": spec.clip.high,
        f"{prefix}_c": spec.center,
        f"{prefix}_m": 2.0 ** (-spec.grid_exponent),
        f"{prefix}_mk": -float(spec.q_max),
        f"{prefix}_k": float(spec.q_max),
    }
    total = dialect.exact_sum.format(f"{units} * {units}")
    return (f"{total} FILTER (WHERE NOT {dialect.is_nan.format(column)})" if kind == "float" else total), params


def count_outside_expr(
    spec: CountOutside, kind: str, prefix: str, dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """Rows below ``$<prefix>_lo`` or above ``$<prefix>_hi``; NaN (above every number here) is excluded."""
    column = quote(spec.clip.column)
    value = f"CAST({column} AS DOUBLE)"
    condition = f"({value} < ${prefix}_lo OR {value} > ${prefix}_hi)"
    if kind == "float":
        condition = f"{condition} AND NOT {dialect.is_nan.format(column)}"
    return f"count(*) FILTER (WHERE {condition})", {f"{prefix}_lo": spec.clip.low, f"{prefix}_hi": spec.clip.high}


def count_present_expr(spec: CountPresent, kind: str, dialect: Dialect = DUCKDB) -> str:
    """``count(column)`` skips NULLs; in a float column NaN rows are filtered out as well."""
    column = quote(spec.column)
    if kind == "float":
        return f"count({column}) FILTER (WHERE NOT {dialect.is_nan.format(column)})"
    return f"count({column})"


def predicate_condition(
    pred: Predicate, kind: str, prefix: str, dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """A boolean SQL condition for ``pred`` and its parameters ``$<prefix>_<j>``.

    NULL fails every comparison by SQL's three-valued logic (a WHERE keeps only TRUE). NaN is
    excluded explicitly in float columns: DuckDB orders NaN above every number and equal to itself.
    """
    names = [f"{prefix}_{j}" for j in range(len(pred.values))]
    column = quote(pred.column)
    if pred.op == "in":
        condition = f"{column} IN ({', '.join('$' + n for n in names)})"
    else:
        condition = f"{column} {_SQL_OPS[pred.op]} ${names[0]}"
    if kind == "float":
        condition = f"(NOT {dialect.is_nan.format(column)} AND {condition})"
    return condition, dict(zip(names, pred.values, strict=True))


def bounded_rows_query(
    source: str,
    columns: Sequence[str],
    *,
    unit_column: str,
    group_columns: Sequence[str],
    max_groups_per_unit: int | None,
    where: Sequence[Predicate] = (),
    kinds: Mapping[str, str] | None = None,
    dialect: Dialect = DUCKDB,
) -> tuple[str, dict[str, object]]:
    """SELECT keeping <= $max_rows rows per unit (and <= $max_groups groups) by a keyed hash order.

    Steps: rows with a NULL unit or failing a filter in ``where`` go first. With a group cap, each
    unit keeps the ``$max_groups`` of its distinct groups (value combinations of ``group_columns``)
    with the smallest keyed hash of (unit, group), ties broken by the group's values so that at most
    that many groups survive.
    Each row then gets the key ``K(h, 1)``, with ``h`` an unkeyed hash of the whole row and ``K`` the
    keyed 64-bit hash; one window over the unit orders by it. Identical rows tie: the j-th copy of a
    row (``j = row_number - rank + 1``, which copy is which does not matter as they are identical)
    gets its own key ``K(h, j)``, so every copy is an independent draw and the choice is uniform over
    the unit's rows as a multiset, independent of physical order. Units without identical rows keep
    their ``$max_rows`` first rows of the window; units with some are re-ranked by the per-copy keys
    among their candidates (the first ``$max_rows`` distinct rows plus every extra copy), which holds
    every row that can make the cut. ``row_number`` in both branches caps every unit at ``$max_rows``
    whatever the hashes do (collisions only change which rows are kept, never how many).

    ``K`` is ``Dialect.keyed64``: two rounds of a 64-bit mixing hash, each after XOR with a 64-bit
    key derived from the salt (an Even-Mansour-style keyed permutation; on DuckDB the mixer is the
    engine's ``hash``). It is a fast keyed pseudo-random order, not a cryptographic MAC: enough here
    because no key or hash value ever leaves the engine, and the bound itself, hence the
    sensitivity, holds for any order (each unit's choice depends on that unit's rows only). This
    replaced a SHA-256 of a text encoding of every row plus an occurrence-number window, about 10x
    slower at 10^7 rows; the uniformity and order-independence tests in tests/conformance cover it.

    Parameters: ``$rk1``, ``$rk2`` (and ``$gk1``, ``$gk2`` with a group cap) from ``derived_keys``,
    ``$max_rows``, ``$max_groups``, and those of the filters (``$w<i>_<j>``).
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    passing, params = passing_condition(unit_column, where, kinds or {}, dialect)
    parts = [f"__dps_in AS (SELECT {cols} FROM {source} WHERE {passing})"]
    rows_from = "__dps_in"
    if group_columns and max_groups_per_unit is not None:
        group = ", ".join(quote(c) for c in group_columns)
        group_key = dialect.keyed64(dialect.row_hash.format(f"{unit}, {group}"), "$gk1", "$gk2")
        parts.append(
            f"__dps_grouped AS (SELECT {cols} FROM (SELECT *, dense_rank() OVER "
            f"(PARTITION BY {unit} ORDER BY {group_key}, {group}) AS __dps_grank FROM __dps_in) "
            "WHERE __dps_grank <= $max_groups)"
        )
        rows_from = "__dps_grouped"
    row_key = dialect.keyed64(dialect.row_hash.format("__dps_h, 1"), "$rk1", "$rk2")
    copy_key = dialect.keyed64(dialect.row_hash.format("__dps_h, __dps_occ"), "$rk1", "$rk2")
    parts += [
        f"__dps_keyed AS (SELECT *, {row_key} AS __dps_r FROM "
        f"(SELECT *, {dialect.row_hash.format(cols)} AS __dps_h FROM {rows_from}))",
        "__dps_win AS (SELECT *, row_number() OVER __dps_o AS __dps_rn, rank() OVER __dps_o AS __dps_rk, "
        "dense_rank() OVER __dps_o AS __dps_dr FROM __dps_keyed "
        f"WINDOW __dps_o AS (PARTITION BY {unit} ORDER BY __dps_r))",
        f"__dps_cand {dialect.materialized} (SELECT {cols}, __dps_h, __dps_r, __dps_rn, "
        "__dps_rn - __dps_rk + 1 AS __dps_occ FROM __dps_win "
        "WHERE __dps_rn > __dps_rk OR __dps_dr <= $max_rows)",
        f"__dps_dup AS (SELECT DISTINCT {unit} AS __dps_u FROM __dps_cand WHERE __dps_occ > 1)",
    ]
    reranked = (
        f"SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY "
        f"CASE WHEN __dps_occ = 1 THEN __dps_r ELSE {copy_key} END) AS __dps_fr "
        f"FROM __dps_cand WHERE {unit} IN (SELECT __dps_u FROM __dps_dup)) WHERE __dps_fr <= $max_rows"
    )
    sql = (
        "WITH "
        + ",\n".join(parts)
        + f"\nSELECT {cols} FROM __dps_cand WHERE __dps_rn <= $max_rows AND {unit} NOT IN "
        + f"(SELECT __dps_u FROM __dps_dup)\nUNION ALL\n{reranked}"
    )
    return sql, params


def passing_condition(
    unit_column: str, where: Sequence[Predicate], kinds: Mapping[str, str], dialect: Dialect = DUCKDB
) -> tuple[str, dict[str, object]]:
    """The condition a row passes before any bound: a non-NULL unit and every filter of ``where``.

    The filters' values are parameters ``$w<i>_<j>`` (the same names wherever the same filters are
    bound, so two parts of one view can share them).
    """
    params: dict[str, object] = {}
    conditions = [f"{quote(unit_column)} IS NOT NULL"]
    for i, pred in enumerate(where):
        condition, p = predicate_condition(pred, kinds.get(pred.column, "other"), f"w{i}", dialect)
        conditions.append(condition)
        params.update(p)
    return " AND ".join(conditions), params


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
    group_columns: Sequence[str],
    key_types: Sequence[str] | None,
    aggregates: Sequence[Aggregate],
    kinds: Mapping[str, str] | None = None,
    dialect: Dialect = DUCKDB,
    stored: Mapping[int, str] | None = None,
    keys_relation: str | None = None,
) -> tuple[str, dict[str, object]]:
    """Aggregates per group; with ``key_types`` the output has exactly the public keys in order.

    The public keys are one list parameter per group column (``$keys0``, ``$keys1``, ...: column j's
    part of every key, of type ``key_types[j]``), zipped into rows; or ``keys_relation``, a table of
    those rows made once by ``key_rows_query`` (columns ``__dps_k<j>`` and ``__dps_ord``).

    ``stored`` maps the position of a ``ClippedSum`` in ``aggregates`` to a hidden column of the view
    holding its grid units (``stored_grid_units``): that sum is then a plain integer sum.

    ``view`` is a relation: a quoted table name or a parenthesised, aliased subquery. ``kinds`` maps
    columns to their kind (a column missing there is treated as float: NaN is then tested for).
    Output columns: the key's values, one column per group column (or the key's position when keys
    are public), then one per aggregate. Counts of absent keys are 0 and their sums 0 (COALESCE after
    the LEFT JOIN).
    """
    kinds = kinds or {}
    params: dict[str, object] = {}
    selects: list[str] = []
    for i, agg in enumerate(aggregates):
        if isinstance(agg, CountRows):
            selects.append(f"count(*) AS __dps_a{i}")
        elif isinstance(agg, CountUnits):
            selects.append(f"count(DISTINCT {quote(unit_column)}) AS __dps_a{i}")
        elif isinstance(agg, CountPresent):
            selects.append(f"{count_present_expr(agg, kinds.get(agg.column, 'float'), dialect)} AS __dps_a{i}")
        elif isinstance(agg, CountOutside):
            expr, p = count_outside_expr(agg, kinds.get(agg.clip.column, "float"), f"s{i}", dialect)
            selects.append(f"{expr} AS __dps_a{i}")
            params.update(p)
        elif isinstance(agg, CenteredSquares):
            expr, p = centered_squares_sum(agg, kinds.get(agg.clip.column, "float"), f"s{i}", dialect)
            selects.append(f"{expr} AS __dps_a{i}")
            params.update(p)
        elif stored and i in stored:
            selects.append(f"{dialect.exact_sum.format(quote(stored[i]))} AS __dps_a{i}")
        else:
            expr, p = fixed_point_sum(agg, kinds.get(agg.clip.column, "float"), f"s{i}", dialect)
            selects.append(f"{expr} AS __dps_a{i}")
            params.update(p)
    outs = ", ".join(f"coalesce(a.__dps_a{i}, 0)" for i in range(len(aggregates)))
    if not group_columns:
        return f"SELECT NULL, {outs} FROM (SELECT {', '.join(selects)} FROM {view}) a", params
    names = [f"__dps_k{j}" for j in range(len(group_columns))]
    keyed = ", ".join(f"{quote(c)} AS {k}" for c, k in zip(group_columns, names, strict=True))
    group = ", ".join(quote(c) for c in group_columns)
    agg_sql = f"SELECT {keyed}, {', '.join(selects)} FROM {view} GROUP BY {group}"
    if key_types is None:
        found = ", ".join(f"a.{k}" for k in names)
        order = ", ".join(f"a.{k} NULLS LAST" for k in names)
        return f"SELECT {found}, {outs} FROM ({agg_sql}) a ORDER BY {order}", params
    key_rows = keys_relation if keys_relation is not None else f"({key_rows_query(key_types)})"
    joined = " AND ".join(f"k.{k} = a.{k}" for k in names)
    sql = f"SELECT k.__dps_ord, {outs} FROM {key_rows} AS k LEFT JOIN ({agg_sql}) a ON {joined} ORDER BY k.__dps_ord"
    return sql, params


def key_rows_query(key_types: Sequence[str]) -> str:
    """The public keys' rows from the list parameters ``$keys<j>``.

    One list per group column, of type ``key_types[j]``; columns ``__dps_k<j>`` and the key's position
    ``__dps_ord``.
    """
    lists = [f"unnest(CAST($keys{j} AS {t}[])) AS __dps_k{j}" for j, t in enumerate(key_types)]
    return f"SELECT {', '.join(lists)}, unnest(range(len($keys0))) AS __dps_ord"
