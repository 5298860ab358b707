"""SQL for the unit index: per-unit work done once at registration, so that bounding is a projection.

``unit_index_query`` orders each privacy unit's rows by a keyed hash under a registration secret and
stores, per row, three hidden columns: ``__dps_pos`` (the row's position 0..n_u-1 in that order),
``__dps_n`` (n_u, the unit's number of rows) and ``__dps_uh`` (an unkeyed 64-bit hash of the unit
value, so a release does not hash a string per row). ``rotation_condition`` then keeps at most C rows
per unit with no window and no aggregate: a row stays iff ``(pos + r) mod n_u < C``, where ``r`` is
a 31-bit key derived from the release's salt (32-bit arithmetic: the cheapest modulo DuckDB has).

As in ``_query``, only quoted identifiers are spliced into the text; keys are parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dpsense.engine._types import Predicate
from dpsense.engine.sql._query import DUCKDB, Dialect, passing_condition, quote

#: The hidden columns of an indexed snapshot, in table order after the public columns.
POSITION, UNIT_ROWS, UNIT_HASH = "__dps_pos", "__dps_n", "__dps_uh"
HIDDEN_COLUMNS = (POSITION, UNIT_ROWS, UNIT_HASH)
#: Prefix of the hidden columns holding stored grid units of declared clipped sums (``index_units(sums=)``).
STORED_UNITS_PREFIX = "__dps_q"
#: Prefix of the hidden columns holding a unit's number of distinct values of a group column
#: (``index_units(group_columns=)``), in the order of the sorted column names.
GROUP_COUNTS_PREFIX = "__dps_d"
#: Parameters of the registration order (derived from the index key) and of a release's rotation.
INDEX_KEYS = ("ik1", "ik2")
ROTATION_KEY, ROTATION_ROWS = "rot_k", "rot_c"
#: Bits of the release's rotation r: pos + r stays below 2**32 (UINTEGER) while n_u <= 2**31.
ROTATION_BITS = 31
#: The most rows one unit may hold in an indexed snapshot; registration refuses more, so the 32-bit
#: rotation can never overflow in a release (docs/design.md invariant 6: no failure after data access).
MAX_UNIT_ROWS = 2**31


def unit_index_query(
    source: str, columns: Sequence[str], *, unit_column: str, dialect: Dialect = DUCKDB, extra: Sequence[str] = ()
) -> str:
    """SELECT of the table with the hidden columns added, stored in (unit, position) order.

    Within a unit the rows are ordered by ``K(h, j)``: ``h`` an unkeyed hash of the whole row, ``j``
    the copy number among identical rows (which copy is which does not matter: they are identical)
    and ``K`` the keyed 64-bit hash ``Dialect.keyed64`` under ``$ik1``, ``$ik2``. So every copy gets
    its own key, the order is a pseudo-random permutation of the unit's rows as a multiset, and it
    does not depend on the physical row order. ``row_number`` makes the positions a permutation of
    0..n_u-1 whatever the hashes do (a collision of two distinct rows, probability about
    n_u**2 / 2**65, only lets physical order pick their relative order). Rows whose unit is NULL get
    NULL hidden columns (bounding drops them). ``extra`` are further hidden ``<expr> AS <name>``
    columns computed from the row's public columns (the stored grid units of declared sums).
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    present = f"{unit} IS NOT NULL"
    order_key = dialect.keyed64(dialect.row_hash.format("__dps_h, __dps_occ"), "$ik1", "$ik2")
    int_type = dialect.index_int
    return (
        f"WITH __dps_hashed AS (SELECT {cols}, {dialect.row_hash.format(cols)} AS __dps_h FROM {source}),\n"
        "__dps_copies AS (SELECT *, row_number() OVER (PARTITION BY "
        f"{unit}, __dps_h) AS __dps_occ FROM __dps_hashed)\n"
        f"SELECT {cols}, "
        f"CASE WHEN {present} THEN CAST(row_number() OVER __dps_w - 1 AS {int_type}) END AS {POSITION}, "
        f"CASE WHEN {present} THEN CAST(count(*) OVER (PARTITION BY {unit}) AS {int_type}) END AS {UNIT_ROWS}, "
        f"CASE WHEN {present} THEN {dialect.row_hash.format(unit)} END AS {UNIT_HASH}"
        f"{''.join(', ' + e for e in extra)} "
        f"FROM __dps_copies WINDOW __dps_w AS (PARTITION BY {unit} ORDER BY {order_key}, __dps_h) "
        f"ORDER BY {unit} NULLS LAST, {POSITION}"
    )


def rotation_condition(dialect: Dialect = DUCKDB) -> str:
    """The row filter ``(pos + $rot_k) mod n_u < $rot_c``, ``$rot_k`` a 31-bit secret drawn per release.

    This is the rule ``(pos - o_u) mod n_u < C`` with the offset ``o_u = -r mod n_u``: one addition
    and one modulo per row, no hash (the unit's hash column is not even read). Every unit shares the
    release's r, but each unit's positions are its own secret keyed-hash permutation of its rows
    fixed at registration, so which rows a unit keeps is independent of which rows another unit
    keeps, exactly as with a per-unit offset; and given a fresh r, ``r mod n_u`` is uniform on
    0..n_u-1 up to a bias below n_u / 2**31, so each row stays with probability C / n_u (the bias moves
    which rows are likelier, never how many: privacy holds for any rule that keeps at most C of a
    unit's rows by that unit's rows alone). The sum stays in 32 bits while n_u <= 2**31
    (``MAX_UNIT_ROWS``), which registration guarantees: ``index_units`` refuses a snapshot with a
    larger unit, so a release never meets one. Rows with a
    NULL unit have NULL hidden columns, so the condition is NULL for them and a WHERE drops them.
    (Portable engines keep a per-unit keyed offset: ``_portable_query``, computed alike by Spark.)
    """
    return f"({POSITION} + CAST(${ROTATION_KEY} AS {dialect.index_int})) % {UNIT_ROWS} < ${ROTATION_ROWS}"


def rotation_query(source: str, columns: Sequence[str], dialect: Dialect = DUCKDB) -> str:
    """SELECT of the public ``columns`` of an indexed ``source`` keeping the rows of ``rotation_condition``."""
    cols = ", ".join(quote(c) for c in columns)
    return f"SELECT {cols} FROM {source} WHERE {rotation_condition(dialect)}"


def filtered_query(
    source: str,
    columns: Sequence[str],
    *,
    unit_column: str,
    where: Sequence[Predicate],
    kinds: Mapping[str, str],
    dialect: Dialect = DUCKDB,
) -> tuple[str, dict[str, object]]:
    """SELECT of an indexed ``source`` keeping the rows that pass ``where``, at most ``$max_rows`` per unit.

    A unit with n_u <= C rows (``__dps_n``, stored at registration) keeps every row that passes the
    filters: no window, no hash, the same rows any bound by C keeps. A unit with more rows keeps the
    first C of its passing rows in the order of ``K(hash(uh, pos))``, the keyed 64-bit hash under the
    release's ``$rk1``, ``$rk2`` of its stored unit hash and position: positions are distinct within
    a unit (a permutation of 0..n_u-1, identical rows included), so under a fresh salt the order is a
    fresh pseudo-random permutation of the unit's rows and the kept rows a uniformly random C-subset
    of the passing ones (``row_number`` keeps at most C whatever the hashes do; a collision only lets
    the position decide). One window over the large units' passing rows, on two stored integers: no
    hash of the row's content, no copy numbers. Each unit's rows are chosen from that unit's rows, its
    stored hidden columns and the salt alone, so adding, removing or replacing a unit still changes at
    most C rows of the view. Parameters: ``$max_rows``, ``$rk1``, ``$rk2`` and the filters'
    (``$w<i>_<j>``).
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    passing, params = passing_condition(unit_column, where, kinds, dialect)
    order = dialect.keyed64(dialect.row_hash.format(f"{UNIT_HASH}, {POSITION}"), "$rk1", "$rk2")
    small = f"SELECT {cols} FROM {source} WHERE {UNIT_ROWS} <= $max_rows AND {passing}"
    large = (
        f"SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY {order}, {POSITION}) "
        f"AS __dps_rn FROM {source} WHERE {UNIT_ROWS} > $max_rows AND {passing}) WHERE __dps_rn <= $max_rows"
    )
    return f"{small}\nUNION ALL\n{large}", params


def group_count_expr(unit_column: str, column: str, dialect: Dialect = DUCKDB) -> str:
    """The unit's number of distinct values of ``column`` (NULL one of them), on every row of the unit.

    NULL where the unit is NULL. The group cap of ``_query.bounded_rows_query`` ranks a NULL group like
    any other, so it counts here too.
    """
    unit, col = quote(unit_column), quote(column)
    window = f"OVER (PARTITION BY {unit})"
    return (
        f"CASE WHEN {unit} IS NOT NULL THEN CAST(count(DISTINCT {col}) {window} + "
        f"max(CAST({col} IS NULL AS INTEGER)) {window} AS {dialect.index_int}) END"
    )


def within_cap_condition(counts: Sequence[str]) -> str:
    """True on the rows of units whose stored group counts multiply to at most ``$max_groups``.

    A unit with d_c distinct values of each capped column touches at most prod d_c value
    combinations, so such a unit needs no group selection. The product is a DOUBLE: exact below 2^53,
    and above it far beyond any cap, so the comparison is exact either way. NULL for a NULL unit.
    """
    product = " * ".join(f"CAST({quote(c)} AS DOUBLE)" for c in counts)
    return f"({product} <= $max_groups)"


def capped_query(
    source: str,
    columns: Sequence[str],
    *,
    unit_column: str,
    group_columns: Sequence[str],
    where: Sequence[Predicate],
    kinds: Mapping[str, str],
    dialect: Dialect = DUCKDB,
) -> tuple[str, dict[str, object]]:
    """SELECT of an indexed ``source`` keeping <= ``$max_groups`` groups and <= ``$max_rows`` rows per unit.

    For the units above a group cap (``DuckDBEngine._indexed_view``). Among a unit's passing rows,
    its groups (value combinations of ``group_columns``) are ranked by ``K(hash(uh, group))`` under
    the release's ``$gk1``, ``$gk2``, ties by the group's values, and the first ``$max_groups`` stay
    (``dense_rank``: never more, whatever the hashes do); then its rows in those groups are ranked by
    ``K(hash(uh, pos))`` under ``$rk1``, ``$rk2`` and the first ``$max_rows`` stay. Positions are a
    permutation of the unit's rows, so both orders are fresh pseudo-random permutations per salt: a
    uniform choice of groups, then a uniform C-subset of their rows, as ``_query.bounded_rows_query``
    draws, with two windows on stored integers instead of a hash of every row's content. Each unit's
    choice depends on its own rows, stored columns and the salt alone.
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    groups = ", ".join(quote(c) for c in group_columns)
    passing, params = passing_condition(unit_column, where, kinds, dialect)
    group_key = dialect.keyed64(dialect.row_hash.format(f"{UNIT_HASH}, {groups}"), "$gk1", "$gk2")
    row_key = dialect.keyed64(dialect.row_hash.format(f"{UNIT_HASH}, {POSITION}"), "$rk1", "$rk2")
    grouped = (
        f"SELECT *, dense_rank() OVER (PARTITION BY {unit} ORDER BY {group_key}, {groups}) AS __dps_grank "
        f"FROM {source} WHERE {passing}"
    )
    ranked = (
        f"SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY {row_key}, {POSITION}) AS __dps_rn "
        f"FROM ({grouped}) WHERE __dps_grank <= $max_groups"
    )
    return f"SELECT {cols} FROM ({ranked}) WHERE __dps_rn <= $max_rows", params
