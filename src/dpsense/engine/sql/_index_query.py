"""SQL for the unit index: per-unit work done once at registration, so that bounding is a projection.

``unit_index_query`` orders each privacy unit's rows by a keyed hash under a registration secret and
stores, per row, two hidden columns: ``__dps_pos`` (the row's position 0..n_u-1 in that order) and
``__dps_n`` (n_u, the unit's number of rows), with the table stored in (position, unit) order.
``first_rows_condition`` then keeps at most C rows per unit with no window, no aggregate and no
arithmetic: a row stays iff ``pos < C``, the first C rows of the unit's secret order, which the stored
order puts in a prefix of the table (a release reads the rows it keeps and skips the rest).
``filtered_query`` keeps the first C *passing* rows of that order.

As in ``_query``, only quoted identifiers are spliced into the text; keys are parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dpsense.engine._types import Predicate
from dpsense.engine.sql._query import DUCKDB, Dialect, passing_condition, quote

#: The hidden columns of an indexed snapshot, in table order after the public columns.
POSITION, UNIT_ROWS = "__dps_pos", "__dps_n"
HIDDEN_COLUMNS = (POSITION, UNIT_ROWS)
#: The hidden columns of a snapshot file stored before the position order (a third, the unit's hash,
#: is no longer read): such a file still attaches, and releases from it keep the same rows, reading
#: the whole table instead of a prefix.
LEGACY_HIDDEN_COLUMNS = (POSITION, UNIT_ROWS, "__dps_uh")
#: Prefix of the hidden columns holding stored grid units of declared clipped sums (``index_units(sums=)``).
STORED_UNITS_PREFIX = "__dps_q"
#: Prefix of the hidden columns holding a unit's number of distinct values of a group column
#: (``index_units(group_columns=)``), in the order of the sorted column names.
GROUP_COUNTS_PREFIX = "__dps_d"
#: Parameters of the registration order (derived from the index key) and of a release's bound C.
INDEX_KEYS = ("ik1", "ik2")
MAX_ROWS = "max_rows"
#: The most rows one unit may hold in an indexed snapshot (positions and counts are 32-bit); registration
#: refuses more, so a release never meets a unit its columns cannot describe (docs/design.md invariant 6:
#: no failure after data access).
MAX_UNIT_ROWS = 2**31
#: Units of at most this many rows are bounded under a filter by a 64-bit mask of their failing positions
#: (``filtered_query``); larger ones by a window.
MASK_ROWS = 64
#: Below this many rows in the snapshot a filter is bounded by the window alone (``filtered_query``'s
#: ``masks=False``): the masks' aggregate and join cost more fixed time than they save on small tables.
MASKED_TABLE_ROWS = 1 << 15


def unit_index_query(
    source: str, columns: Sequence[str], *, unit_column: str, dialect: Dialect = DUCKDB, extra: Sequence[str] = ()
) -> str:
    """SELECT of the table with the hidden columns added (``position_order_query`` then sorts it).

    Within a unit the rows are ordered by ``K(h, j)``: ``h`` an unkeyed hash of the whole row, ``j``
    the copy number among identical rows (which copy is which does not matter: they are identical)
    and ``K`` the keyed 64-bit hash ``Dialect.keyed64`` under ``$ik1``, ``$ik2``. So every copy gets
    its own key, the order is a pseudo-random permutation of the unit's rows as a multiset, and it
    does not depend on the physical row order. ``row_number`` makes the positions a permutation of
    0..n_u-1 whatever the hashes do (a collision of two distinct rows, probability about
    n_u**2 / 2**65, only lets physical order pick their relative order). Rows whose unit is NULL get
    NULL hidden columns (bounding drops them) and are stored last. ``extra`` are further hidden
    ``<expr> AS <name>`` columns computed from the row's public columns (the stored grid units of
    declared sums).

    The windows and the sort are two statements: in one, DuckDB cannot spill the sort behind the
    windows within a small memory limit.
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
        f"CASE WHEN {present} THEN CAST(count(*) OVER (PARTITION BY {unit}) AS {int_type}) END AS {UNIT_ROWS}"
        f"{''.join(', ' + e for e in extra)} "
        f"FROM __dps_copies WINDOW __dps_w AS (PARTITION BY {unit} ORDER BY {order_key}, __dps_h)"
    )


def position_order_query(relation: str, unit_column: str) -> str:
    """SELECT of an indexed ``relation`` in the order it is stored in: by position, then unit.

    Every unit's first row, then every unit's second, and so on (rows of a NULL unit last): the rows a
    bound by C keeps (``pos < C``) form a prefix of the table, whose later blocks DuckDB skips by
    their position range without reading them.
    """
    return f"SELECT * FROM {relation} ORDER BY {POSITION} NULLS LAST, {quote(unit_column)}"


def first_rows_condition() -> str:
    """The row filter ``pos < $max_rows``: each unit's first C rows in its secret registration order.

    Each unit keeps exactly min(C, n_u) rows, and they are a uniformly random C-subset of its rows
    over the registration secret (the positions are a pseudo-random permutation of the unit's rows,
    ``unit_index_query``); the subset is the snapshot's, the same in every release. Privacy does not
    depend on which subset: a unit's kept rows are chosen from its own rows and the secret alone, so
    adding, removing or replacing one unit changes at most C rows of the view, which is the bound every
    sensitivity assumes (docs/math/global-sensitivity.md §1.1). Rows with a NULL unit
    have NULL hidden columns, so the condition is NULL for them and a WHERE drops them.
    """
    return f"{POSITION} < ${MAX_ROWS}"


def first_rows_query(source: str, columns: Sequence[str]) -> str:
    """SELECT of the public ``columns`` of an indexed ``source`` keeping the rows of ``first_rows_condition``."""
    cols = ", ".join(quote(c) for c in columns)
    return f"SELECT {cols} FROM {source} WHERE {first_rows_condition()}"


def filtered_query(
    source: str,
    columns: Sequence[str],
    *,
    unit_column: str,
    where: Sequence[Predicate],
    kinds: Mapping[str, str],
    dialect: Dialect = DUCKDB,
    masks: bool = True,
) -> tuple[str, dict[str, object]]:
    """SELECT of an indexed ``source`` keeping, per unit, the first ``$max_rows`` rows that pass ``where``.

    "First" is in the unit's secret registration order (``__dps_pos``): the kept rows are exactly
    min(C, k) of the unit's k passing rows, a uniformly random C-subset of them over the registration
    secret. A passing row at position p stays iff fewer than C passing rows precede it, that is iff
    p - f(p) < C where f(p) is the number of the unit's rows before p that do not pass. Three parts,
    none of which reads another unit's rows:

    - rows of units with n_u <= C, and rows at positions p < C of units with n_u <= ``MASK_ROWS``:
      they stay whenever they pass (fewer than C rows of any kind precede them), no window, no join;
    - rows at p >= C of units with C < n_u <= ``MASK_ROWS``: f(p) is the number of set bits below p of
      the unit's 64-bit mask of non-passing positions, one aggregate over the non-passing rows (a
      unit none of whose rows fails keeps only its first C, so it needs no mask and the join drops
      its later rows);
    - units with n_u > C and n_u > ``MASK_ROWS``: a window numbering their passing rows by position.

    With ``masks=False`` (small tables: ``MASKED_TABLE_ROWS``) the window numbers the passing rows of
    every unit with n_u > C, and the other units keep every passing row: the same rows, two parts.

    Shifts take ``least(p, 63)`` and differences are BIGINT, so no row of any unit can make an
    expression fail whatever order the engine evaluates the conditions in. Each unit's kept rows
    depend on that unit's rows and the registration secret alone, so adding, removing or replacing a
    unit still changes at most C rows of the view. Parameters: ``$max_rows`` and the filters'
    (``$w<i>_<j>``).
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    passing, params = passing_condition(unit_column, where, kinds, dialect)
    c, pos, n = f"${MAX_ROWS}", POSITION, UNIT_ROWS
    if not masks:
        small = f"SELECT {cols} FROM {source} WHERE {n} <= {c} AND {passing}"
        large = (
            f"SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY {pos}) AS __dps_rn "
            f"FROM {source} WHERE {n} > {c} AND {passing}) WHERE __dps_rn <= {c}"
        )
        return f"{small}\nUNION ALL\n{large}", params
    bit = f"(CAST(1 AS UBIGINT) << least({pos}, 63))"
    direct = f"SELECT {cols} FROM {source} WHERE ({n} <= {c} OR ({pos} < {c} AND {n} <= {MASK_ROWS})) AND {passing}"
    failing = (
        f"SELECT {unit} AS __dps_u, bit_or({bit}) AS __dps_m FROM {source} "
        f"WHERE {n} > {c} AND {n} <= {MASK_ROWS} AND ({passing}) IS NOT TRUE GROUP BY {unit}"
    )
    # Unqualified names in the join are the row's: the masks' two columns have reserved hidden names.
    masked = (
        f"SELECT {cols} FROM {source} AS __dps_r JOIN ({failing}) AS __dps_f ON {unit} = __dps_u "
        f"WHERE {n} > {c} AND {n} <= {MASK_ROWS} AND {pos} >= {c} AND {passing} "
        f"AND bit_count(__dps_m & ({bit} - 1)) >= CAST({pos} AS BIGINT) - {c} + 1"
    )
    windowed = (
        f"SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY {pos}) AS __dps_rn "
        f"FROM {source} WHERE {n} > {c} AND {n} > {MASK_ROWS} AND {passing}) WHERE __dps_rn <= {c}"
    )
    return f"{direct}\nUNION ALL\n{masked}\nUNION ALL\n{windowed}", params


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
    its groups (value combinations of ``group_columns``) are ranked by ``K(hash(unit, group))`` under
    the release's ``$gk1``, ``$gk2``, ties by the group's values, and the first ``$max_groups`` stay
    (``dense_rank``: never more, whatever the hashes do): a fresh uniform choice of groups per salt;
    then its rows in those groups are numbered by position and the first ``$max_rows`` stay: a
    uniformly random C-subset of them over the registration secret, as ``filtered_query`` keeps.
    Each unit's choice depends on its own rows, stored columns and the secrets alone.
    """
    cols = ", ".join(quote(c) for c in columns)
    unit = quote(unit_column)
    groups = ", ".join(quote(c) for c in group_columns)
    passing, params = passing_condition(unit_column, where, kinds, dialect)
    group_key = dialect.keyed64(dialect.row_hash.format(f"{unit}, {groups}"), "$gk1", "$gk2")
    grouped = (
        f"SELECT *, dense_rank() OVER (PARTITION BY {unit} ORDER BY {group_key}, {groups}) AS __dps_grank "
        f"FROM {source} WHERE {passing}"
    )
    ranked = (
        f"SELECT {cols}, row_number() OVER (PARTITION BY {unit} ORDER BY {POSITION}) AS __dps_rn "
        f"FROM ({grouped}) WHERE __dps_grank <= $max_groups"
    )
    return f"SELECT {cols} FROM ({ranked}) WHERE __dps_rn <= $max_rows", params
