"""``DuckDBEngine``: the reference engine, in-process DuckDB (``pip install dpsense[duckdb]``).

Registered sources are copied into temporary tables (a snapshot: later edits of a DataFrame or file
do not change what a release reads). Every step is one SQL statement from ``dpsense.engine.sql``
(``_query``, ``_index_query`` or ``_steward_query``); values and the salt's derived keys are bound as
parameters. DuckDB error texts can quote data values, so they never propagate: failures after data
access become ``InternalError`` without the original message.

With ``portable=True`` the bounds and the unit index follow ``_portable`` (SQL in
``sql._portable_query``), the rules ``SparkEngine`` runs, so both engines keep the same rows.

Bounded views come in two forms. On a table indexed with ``index_units`` (and, with a group cap, with
the capped columns' per-unit group counts stored), a view is a *selection*: a projection of the
indexed snapshot kept in this object's memory (its SQL and parameters, never in DuckDB's catalog) and
inlined as a subquery wherever the view is read, because materialising 5 * 10^6 rows costs more than
filtering 10^7 rows again; only the units above a filter's C or a group cap are windowed inside it.
Otherwise it is a temporary table (the windowed bounding is too costly to repeat per read).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import _checks, _portable
from dpsense.engine._checks import MIN_SECRET_BYTES as MIN_SALT_BYTES
from dpsense.engine._errors import CollectLimitExceeded, UnknownTable
from dpsense.engine._types import (
    Aggregate,
    BoundedView,
    CenteredSquares,
    Clip,
    ClippedSum,
    ColumnInfo,
    FixedPointSum,
    GroupColumns,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
)
from dpsense.engine.duckdb._steward import COPIES_DATABASE, SRC_PREFIX, DuckDBStewardSteps, SumKey, sql_text, sum_key
from dpsense.engine.sql import _index_query, _portable_query, _query

__all__ = ["MIN_SALT_BYTES", "DuckDBEngine", "SharedTable"]

#: Aggregates returned as exact fixed-point sums (the others are counts).
_SUMS = (ClippedSum, CenteredSquares)

_TMP_PREFIX = _query.INTERNAL_PREFIX + "tmp_"
#: Temporary tables of public key rows (``_key_relation``), and how many an engine keeps.
_KEYS_PREFIX = _query.INTERNAL_PREFIX + "keys_"
_KEY_TABLES = 16
_CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_FRAME_MODULES = frozenset({"pandas", "pyarrow", "polars"})
#: How many checked public key lists to remember before starting over.
_CHECKED_KEY_LISTS = 64

_KINDS: tuple[tuple[str, str], ...] = (
    (r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$", "integer"),
    (r"^(FLOAT|DOUBLE)$", "float"),
    (r"^DECIMAL", "decimal"),
    (r"^VARCHAR", "string"),
    (r"^BOOLEAN$", "boolean"),
    (r"^(DATE|TIME|TIMESTAMP|INTERVAL)", "temporal"),
)


def _kind(sql_type: str) -> str:
    return next((kind for pattern, kind in _KINDS if re.match(pattern, sql_type)), "other")


@dataclass(frozen=True)
class _Selection:
    """A bounded view kept as a query over an indexed snapshot (see the module docstring).

    ``params`` holds the key derived from the release's salt: it lives only in this process's memory
    until the view is dropped, and reaches DuckDB only as a bound parameter.
    """

    relation: str
    sql: str
    params: dict[str, object]
    stored: Mapping[SumKey, str] = field(default_factory=dict)  # hidden grid-unit columns the view carries


@dataclass(frozen=True)
class SharedTable:
    """A registered table of a ``shared`` engine, as another engine on the same database adopts it.

    Names and public facts only (the relation, the public schema, the unit the snapshot is indexed
    on, the hidden columns of its stored sums and group counts): no data, no key, no count.
    """

    relation: str
    info: TableInfo
    unit_column: str | None
    stored_sums: Mapping[SumKey, str]
    portable: bool
    group_counts: Mapping[str, str] = field(default_factory=dict)


class DuckDBEngine(DuckDBStewardSteps):
    """The engine seam on an in-process DuckDB connection.

    Use one engine per thread (a DuckDB connection is not shared across threads).

    Args:
        database: a DuckDB database path, or ":memory:" (default).
        connection: an existing connection to use instead (then ``close`` leaves it open, but still
            removes everything the engine created). Existing tables there can be registered by name.
        portable: bound and index by the portable rules (``_portable``: SHA-256 of text and 64-bit
            arithmetic that Spark computes identically), so that a release keeps the same rows as on
            ``SparkEngine``; slower than the default rules, which use DuckDB's own ``hash()``. Units
            and capped group columns must then be integer or string columns.
        shared: keep copies of registered sources as regular tables of the database instead of
            temporary tables of the connection, so that engines on other connections (cursors) to the
            same database can ``adopt`` them (``export``): one copy of a snapshot serves them all.
            Bounded views stay temporary tables of the connection that made them either way.
        memory_limit: the most memory DuckDB may use, as DuckDB spells it (``"512MB"``, ``"2GB"``);
            beyond it sorts, joins and aggregates spill to disk. Default: the environment variable
            ``DPSENSE_DUCKDB_MEMORY_LIMIT`` if set, else DuckDB's own default (80 % of the machine's
            memory). Only for a connection the engine opens. A statement that still exceeds it fails
            after reading data (a charged failure in a release): size it for the largest snapshot.

    An engine that opens its connection points DuckDB's spill files (``temp_directory``) at a new
    private directory (mode 0700) that ``close`` removes: spilled rows are private data, and DuckDB's
    default for an in-memory database is ``.tmp`` in the working directory.

    """

    #: The compressed in-memory database that holds the engine's copies (``_steward.COPIES_DATABASE``).
    COPIES_DATABASE = COPIES_DATABASE

    def __init__(
        self,
        database: str = ":memory:",
        *,
        connection: duckdb.DuckDBPyConnection | None = None,
        portable: bool = False,
        shared: bool = False,
        memory_limit: str | None = None,
    ) -> None:
        self.portable = portable
        self.shared = shared
        self._owns_connection = connection is None
        self._spill: Path | None = None
        if connection is not None and memory_limit is not None:
            raise UsageError(
                "memory_limit applies to a connection the engine opens", memory_limit, "SET memory_limit on yours"
            )
        limit = _memory_limit(memory_limit) if connection is None else None
        self._con = duckdb.connect(database) if connection is None else connection
        if connection is None:  # DuckDB's own progress bar would write into a CLI's stdout (a --json document)
            self._con.execute("SET enable_progress_bar = false")
            self._spill = Path(tempfile.mkdtemp(prefix="dpsense-spill-"))  # 0700: mkdtemp's mode
            self._con.execute(f"SET temp_directory = {sql_text(self._spill)}")
            if limit is not None:
                self._con.execute(f"SET memory_limit = {sql_text(limit)}")
        # The engine's copies are kept compressed (``_compress``) in COPIES_DATABASE, an in-memory database
        # attached with COMPRESS: its own when it opened an in-memory connection, else the one a shared
        # engine's connection already uses (``release._shared.SharedSnapshots`` attaches it for its cursors).
        if connection is None and database == ":memory:" and not shared:
            self._con.execute(f"ATTACH ':memory:' AS {COPIES_DATABASE} (COMPRESS)")
            self._con.execute(f"USE {COPIES_DATABASE}")
            self._compressed = True
        else:
            self._compressed = shared and self._one_row("SELECT current_database()", {})[0] == COPIES_DATABASE
        self._tables: dict[str, tuple[str, TableInfo]] = {}  # public name -> (SQL relation, schema)
        self._copies: set[str] = set()  # source copies this engine created
        self._temporaries: dict[str, str] = {}  # bounded views kept as temporary tables -> the relation read
        self._selections: dict[str, _Selection] = {}  # bounded views kept as queries, by view name
        self._indexes: dict[str, str] = {}  # public name -> the unit column its snapshot is indexed on
        self._stored_sums: dict[str, dict[SumKey, str]] = {}  # public name -> stored grid units, by sum
        self._group_counts: dict[str, dict[str, str]] = {}  # public name -> stored distinct groups per unit, by column
        self._files: dict[str, str] = {}  # relation of an attached snapshot file -> its attachment
        self._row_counts: dict[str, int] = {}  # stored snapshot relation -> its rows (``_table_rows``)
        # id of a public key tuple -> (the tuple, its key types, its temporary table) (``_key_relation``)
        self._key_tables: dict[int, tuple[Sequence[Any], list[str], str]] = {}
        self._checked_keys: set[tuple[object, ...]] = set()  # (key type, *(type, key)) of key lists that passed
        self._counter = itertools.count()
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> DuckDBEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Drop every temporary view and registered copy; close the connection if the engine opened it."""
        if self._closed:
            return
        for name in sorted(self._temporaries.keys() | self._copies):
            self._con.execute(f"DROP TABLE IF EXISTS {_query.quote(name)}")
        for alias in sorted(self._files.values()):
            self._con.execute(f"DETACH DATABASE IF EXISTS {_query.quote(alias)}")
        self._files.clear()
        self._temporaries.clear()
        self._selections.clear()
        self._copies.clear()
        self._tables.clear()
        self._indexes.clear()
        if self._owns_connection:
            self._con.close()
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)
        self._closed = True

    @property
    def collect_limit(self) -> int | None:
        """``None``: DuckDB runs in the caller's process, so ``collect`` has no limit of its own."""
        return None

    def drop(self, view: BoundedView) -> None:
        """Remove a temporary view now (idempotent)."""
        self._check_open()
        if self._selections.pop(view.name, None) is None:
            self._con.execute(f"DROP TABLE IF EXISTS {_query.quote(view.name)}")
            self._temporaries.pop(view.name, None)

    def release_scope(self) -> AbstractContextManager[None]:
        """A context that removes the temporary views created inside it on exit, even on error."""
        return self._scope()

    @contextmanager
    def _scope(self) -> Iterator[None]:
        before = set(self._temporaries)
        before_selections = set(self._selections)
        try:
            yield
        finally:
            if not self._closed:
                for name in set(self._selections) - before_selections:
                    del self._selections[name]
                for name in sorted(self._temporaries.keys() - before):
                    self._con.execute(f"DROP TABLE IF EXISTS {_query.quote(name)}")
                    del self._temporaries[name]

    def temporary_names(self) -> list[str]:
        """Temporary relations of this engine in DuckDB's catalog, and the live selections held in memory."""
        self._check_open()
        rows = self._con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, $p) "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE starts_with(view_name, $p)",
            {"p": _TMP_PREFIX},
        ).fetchall()
        return sorted([str(r[0]) for r in rows] + list(self._selections))

    # -- registration --------------------------------------------------------------------------------

    def register(self, name: str, source: object) -> TableInfo:
        """Register a pandas/pyarrow/polars table, a CSV or Parquet path, or a DuckDB table name.

        Returns the public schema. Sources other than an existing DuckDB table are copied into a
        temporary table, so the registered data is a snapshot.
        """
        self._check_open()
        if not isinstance(name, str) or not name or name.startswith(_query.INTERNAL_PREFIX):
            raise UsageError(
                "a table name must be a non-empty string not starting with '__dps_'", name, "choose another name"
            )
        if name in self._tables:
            raise UsageError("a table of this name is already registered", name, "choose another name or close()")
        relation = self._materialize(source)
        info = self._describe(name, relation)
        clash = [c for c in info.column_names if c.startswith(_query.INTERNAL_PREFIX)]
        if clash:
            self._drop_copy(relation)
            raise UsageError("column names may not start with '__dps_'", clash[0], "rename the column")
        self._tables[name] = (relation, info)
        return info

    def table_info(self, name: str) -> TableInfo:
        """The public schema of a registered table."""
        self._check_open()
        return self._table(name)[1]

    def forget(self, table: str) -> None:
        """Unregister ``table`` and drop the engine's copy (idempotent; a DuckDB table by name stays)."""
        self._check_open()
        found = self._tables.pop(table, None)
        self._indexes.pop(table, None)
        self._stored_sums.pop(table, None)
        self._group_counts.pop(table, None)
        if found is not None:
            self._drop_copy(found[0])

    def export(self, table: str) -> SharedTable:
        """What another engine on this database needs to ``adopt`` ``table`` (a ``shared`` engine only).

        The table stays this engine's: ``close`` or ``forget`` here drops it, so the caller keeps this
        engine open while any adopter may read it.
        """
        self._check_open()
        if not self.shared:
            raise UsageError(
                "only an engine opened with shared=True keeps copies that other connections can read",
                table,
                "open the engine that registers the snapshot as DuckDBEngine(connection=..., shared=True)",
            )
        relation, info = self._table(table)
        stored = dict(self._stored_sums.get(table, {}))
        counts = dict(self._group_counts.get(table, {}))
        return SharedTable(relation, info, self._indexes.get(table), stored, self.portable, counts)

    def adopt(self, name: str, table: SharedTable) -> TableInfo:
        """Register under ``name`` a table another engine on the same database exported (no copy is made).

        Releases read it exactly as a table this engine registered and indexed itself; this engine
        never drops it (``forget`` only unregisters it), its bounded views stay its own temporary tables.
        """
        self._check_open()
        if name in self._tables:
            raise UsageError("a table of this name is already registered", name, "choose another name or forget it")
        if table.portable != self.portable:
            raise UsageError(
                "an adopted table must follow this engine's bounding rules (portable or not)",
                table.portable,
                "adopt it on an engine with the same portable setting as the one that indexed it",
            )
        if not self._catalog_has(table.relation.strip('"')):
            raise UnknownTable(name, "the shared table is not in this database; adopt it on a cursor of the same one")
        self._tables[name] = (table.relation, table.info)
        if table.unit_column is not None:
            self._indexes[name] = table.unit_column
            self._stored_sums[name] = dict(table.stored_sums)
            self._group_counts[name] = dict(table.group_counts)
        return table.info

    def _materialize(self, source: object) -> str:
        if isinstance(source, str | PathLike):
            path = Path(source)
            lowered = path.name.lower()
            if lowered.endswith(_CSV_SUFFIXES):
                return self._copy_file(path, "read_csv($path, header = true)")
            if lowered.endswith(_PARQUET_SUFFIXES):
                return self._copy_file(path, "read_parquet($path)")
            if isinstance(source, str) and source.startswith(_query.INTERNAL_PREFIX):
                # the engine's own relations (copies, views, attached snapshots) are never a source: a
                # registration of one would share, and its forget() drop, another table's snapshot
                raise UsageError(
                    "a source table name must not start with '__dps_' (the engine's own tables)",
                    source,
                    "register the source itself (a file, a frame or your table's name)",
                )
            if isinstance(source, str) and self._catalog_has(source):
                return _query.quote(source)
            raise UnknownTable(
                str(source), "pass a .csv/.parquet path, a DataFrame or Arrow table, or an existing DuckDB table name"
            )
        module = type(source).__module__.split(".")[0]
        if module not in _FRAME_MODULES:
            raise UnsupportedRequest(
                "a source must be a pandas/polars DataFrame, a pyarrow Table, a CSV or Parquet path, or a table name",
                type(source).__name__,
                "convert the data to one of those",
            )
        copy, create = self._new_copy()
        scratch = f"{SRC_PREFIX}{next(self._counter)}_in"
        self._con.register(scratch, source)
        try:
            self._con.execute(f"{create}SELECT * FROM {_query.quote(scratch)}")
        finally:
            self._con.unregister(scratch)
        self._keep_copy(copy)
        return _query.quote(copy)

    def _copy_file(self, path: Path, reader: str) -> str:
        if not path.is_file():
            raise InvalidData("the source file does not exist", str(path), "check the path")
        copy, create = self._new_copy()
        try:
            self._con.execute(f"{create}SELECT * FROM {reader}", {"path": str(path)})
        except (duckdb.Error, RuntimeError) as exc:
            if _interrupted(exc):
                raise KeyboardInterrupt from None
            if not isinstance(exc, duckdb.Error):
                raise
            # The parser's message may quote file contents: keep it out of the error.
            raise InvalidData("the file could not be read as a table", str(path), "check its format") from None
        self._keep_copy(copy)
        return _query.quote(copy)

    def _catalog_has(self, name: str) -> bool:
        row = self._one_row(
            "SELECT count(*) FROM (SELECT table_name AS n FROM duckdb_tables() "
            "UNION ALL SELECT view_name FROM duckdb_views()) WHERE n = $n",
            {"n": name},
        )
        return int(row[0]) > 0

    def _describe(self, name: str, relation: str) -> TableInfo:
        rows = self._con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        return TableInfo(name, tuple(ColumnInfo(str(r[0]), str(r[1]), _kind(str(r[1]))) for r in rows))

    def _drop_copy(self, relation: str) -> None:
        alias = self._files.pop(relation, None)
        if alias is not None:
            self._con.execute(f"DETACH DATABASE IF EXISTS {_query.quote(alias)}")
            return
        raw = relation.strip('"')
        if raw in self._copies:
            self._con.execute(f"DROP TABLE IF EXISTS {relation}")
            self._copies.discard(raw)

    # -- relational steps ----------------------------------------------------------------------------

    def bounded_rows(
        self,
        table: str,
        *,
        unit_column: str,
        max_rows_per_unit: int,
        salt: bytes,
        group_column: GroupColumns | None = None,
        max_groups_per_unit: int | None = None,
        where: Sequence[Predicate] = (),
    ) -> BoundedView:
        """Keep at most C rows (and G groups) per unit, chosen under the index's key or a fresh secret salt.

        Rows failing a filter in ``where`` and rows with a NULL unit are dropped before the bound
        (registration policies handle other missing values). Secrets only enter DuckDB through
        64-bit keys derived from them, as parameters.

        On a table indexed on ``unit_column`` (``index_units``) the view is a selection
        (``_indexed_view``): each unit keeps the first C rows of its secret registration order
        (of its passing rows, with ``where``), exactly min(C, n_u), a uniformly random C-subset over
        the registration's key, the same in every release; with ``max_groups_per_unit`` on columns
        whose per-unit group counts the index stored, the units within the cap are bounded so and
        only the others choose their groups per release. Otherwise (``_query.bounded_rows_query``)
        each unit keeps a uniformly random C-subset through a window per release. Privacy does not
        depend on which rule runs: each unit's choice depends on that unit's rows (and the secrets)
        only, so adding, removing or replacing one unit changes at most C rows of the view.
        """
        self._check_open()
        relation, info = self._table(table)
        unit = _checks.require(info, unit_column)
        max_rows = _checks.positive_int(max_rows_per_unit, "max_rows_per_unit")
        groups = _checks.group_columns(info, group_column)
        if max_groups_per_unit is not None:
            _checks.positive_int(max_groups_per_unit, "max_groups_per_unit")
            if not groups:
                raise UsageError(
                    "max_groups_per_unit needs the group column", max_groups_per_unit, "pass group_column as well"
                )
            if self.portable:
                for group in groups:
                    _portable.require_text_column(group, "capped group")
        filters = _checks.predicates(info, where)
        _checks.secret(salt, "salt")
        if self.portable:
            _portable.require_text_column(unit, "privacy unit")
        counted = self._group_counts.get(table, {})
        cap: tuple[list[str], int] | None = None
        if max_groups_per_unit is not None and all(g.name in counted for g in groups):
            cap = ([counted[g.name] for g in groups], max_groups_per_unit)
        indexed = self._indexes.get(table) == unit_column and (max_groups_per_unit is None or cap is not None)
        if indexed and (not filters or not self.portable):
            return self._indexed_view(table, relation, info, unit_column, max_rows, salt, group_column, filters, cap)
        if self.portable:
            capped = groups if max_groups_per_unit is not None else ()
            sql, params = _portable_query.bounded_rows_query(
                relation, info.columns, unit=unit, groups=capped, max_groups_per_unit=max_groups_per_unit, where=filters
            )
            params["rows_key"] = _portable.text_key(salt, "rows")
            if capped:
                params["groups_key"] = _portable.text_key(salt, "groups")
        else:
            sql, params = _query.bounded_rows_query(
                relation,
                info.column_names,
                unit_column=unit_column,
                group_columns=[g.name for g in groups],
                max_groups_per_unit=max_groups_per_unit,
                where=filters,
                kinds={c.name: c.kind for c in info.columns},
            )
            params.update(_query.derived_keys(salt, "rows", _query.ROW_KEYS))
            if max_groups_per_unit is not None:
                params.update(_query.derived_keys(salt, "groups", _query.GROUP_KEYS))
        params["max_rows"] = max_rows
        if max_groups_per_unit is not None:
            params["max_groups"] = max_groups_per_unit
        name = f"{_TMP_PREFIX}{next(self._counter)}"
        # A TEMP TABLE, not a view: a view would store its query, with the salt's keys, in the catalog.
        self._run(f"CREATE TEMP TABLE {_query.quote(name)} AS {sql}", params)
        self._temporaries[name] = relation
        return BoundedView(name, table, info, unit_column, max_rows, group_column, max_groups_per_unit, filters)

    def _indexed_view(
        self,
        table: str,
        relation: str,
        info: TableInfo,
        unit_column: str,
        max_rows: int,
        salt: bytes,
        group_column: GroupColumns | None,
        filters: Sequence[Predicate] = (),
        cap: tuple[list[str], int] | None = None,
    ) -> BoundedView:
        """The fast paths of ``bounded_rows`` on an indexed table: a selection, kept as a query.

        ``cap``: a group cap G on columns whose distinct values per unit the index stored (the hidden
        count columns, ``index_units(group_columns=)``). The units whose counts multiply to at most G
        (``_index_query.within_cap_condition``) touch at most G groups, so they take the fast path
        below as they are; only the other units go through ``_index_query.capped_query`` (a uniform
        choice of groups, then of rows, keyed on stored integers), on their rows alone. Each unit's
        rows are still chosen from that unit's rows (and its stored columns) alone.

        Without filters, no window, no aggregate and no arithmetic: each unit keeps the rows with
        ``pos < C``, the first C of its secret registration order (``_index_query.first_rows_condition``),
        which the snapshot stores as a prefix of the table; exactly min(C, n_u) rows, a uniformly random
        C-subset over the registration secret, the same in every release (portable engines rotate each
        unit by a keyed hash of the unit per release instead). With filters (DuckDB's own rules only),
        each unit keeps the first C of its passing rows in that order (``_index_query.filtered_query``).
        The stored grid units ride along either way, so the declared sums stay integer sums.
        """
        params: dict[str, object]
        stored = self._stored_sums.get(table, {})
        kinds = {c.name: c.kind for c in info.columns}
        columns = [*info.column_names, *stored.values()]
        source = relation
        if cap is not None:  # the units within the cap take the fast path; the others are windowed below
            source = f"(SELECT * FROM {relation} WHERE {_index_query.within_cap_condition(cap[0])})"
        if filters:
            masks = self._table_rows(relation) >= _index_query.MASKED_TABLE_ROWS
            sql, params = _index_query.filtered_query(
                source, columns, unit_column=unit_column, where=filters, kinds=kinds, masks=masks
            )
            params[_index_query.MAX_ROWS] = max_rows
        elif self.portable:  # the rotation of _portable: 64-bit arithmetic Spark computes alike
            params = _portable_query.rotation_keys(salt)
            params[_portable_query.ROTATION_ROWS] = max_rows
            sql = _portable_query.rotation_query(relation, info.column_names)
        else:
            params = {_index_query.MAX_ROWS: max_rows}
            sql = _index_query.first_rows_query(source, columns)
        if cap is not None:
            beyond = f"(SELECT * FROM {relation} WHERE NOT {_index_query.within_cap_condition(cap[0])})"
            capped = group_column if isinstance(group_column, tuple) else (group_column,) if group_column else ()
            windowed, more = _index_query.capped_query(
                beyond, columns, unit_column=unit_column, group_columns=capped, where=filters, kinds=kinds
            )
            params.update(more)
            params.update(_query.derived_keys(salt, "groups", _query.GROUP_KEYS))
            params["max_rows"], params["max_groups"] = max_rows, cap[1]
            cols = ", ".join(_query.quote(c) for c in columns)
            sql = f"{sql}\nUNION ALL\nSELECT {cols} FROM ({windowed})"
        name = f"{_TMP_PREFIX}{next(self._counter)}"
        self._selections[name] = _Selection(relation, sql, params, dict(stored))
        groups_cap = None if cap is None else cap[1]
        return BoundedView(name, table, info, unit_column, max_rows, group_column, groups_cap, tuple(filters))

    def _known_key_table(self, given: Sequence[Any], key_types: list[str]) -> str | None:
        """The key table ``_key_relation`` made for this very tuple and key types, if it is still kept."""
        entry = self._key_tables.get(id(given))
        return entry[2] if entry is not None and entry[0] is given and entry[1] == key_types else None

    def _key_relation(self, given: Sequence[Any], parts: list[list[Any]], key_types: list[str]) -> str | None:
        """A temporary table of the checked public keys' rows (``_query.key_rows_query``), for a new key tuple.

        The declared keys of a schema are one tuple (``release._executor.engine_keys``), which every
        release of it passes, so its rows are not bound as list parameters again. ``None`` for another
        sequence (a list may change): the keys are then bound as parameters.
        """
        if not isinstance(given, tuple):
            return None
        name = _query.quote(f"{_KEYS_PREFIX}{next(self._counter)}")
        params: dict[str, object] = {f"keys{j}": part for j, part in enumerate(parts)}
        self._run(f"CREATE TEMP TABLE {name} AS {_query.key_rows_query(key_types)}", params)
        if len(self._key_tables) >= _KEY_TABLES:
            oldest = next(iter(self._key_tables))
            self._con.execute(f"DROP TABLE IF EXISTS {self._key_tables.pop(oldest)[2]}")
        self._key_tables[id(given)] = (given, list(key_types), name)
        return name

    def _table_rows(self, relation: str) -> int:
        """The stored snapshot's number of rows (DuckDB's table metadata), once per relation.

        It picks between two plans that keep the same rows (``_index_query.filtered_query``'s
        ``masks``); like DuckDB's own plan choices, only the release's time depends on the table's
        size (docs/threat-model.md, item 5).
        """
        rows = self._row_counts.get(relation)
        if rows is None:
            rows = int(self._one_row(f"SELECT count(*) FROM {relation}", {})[0])
            self._row_counts[relation] = rows
        return rows

    def group_aggregates(
        self,
        view: BoundedView,
        *,
        group_column: GroupColumns | None,
        keys: Sequence[Any] | None,
        aggregates: Sequence[Aggregate],
    ) -> list[GroupRow]:
        """Counts and exact fixed-point sums per group; public keys always appear, unlisted keys never.

        With several group columns a key is a tuple of their values, in the order of ``group_column``.
        """
        relation, view_params = self._check_view(view)
        aggs = _checks.aggregates(view.schema, list(aggregates))
        groups = _checks.group_columns(view.schema, group_column)
        key_relation: str | None = None
        parts: list[list[Any]] = []
        if not groups:
            if keys is not None:
                raise UsageError("public keys need a group column", "keys without group_column", "pass group_column")
        else:
            if view.max_groups_per_unit is not None and group_column != view.group_column:
                raise UnsupportedRequest(
                    "the view caps groups per unit on another grouping",
                    group_column,
                    f"group by {view.group_column!r} or bound rows again with this grouping",
                )
            if keys is not None:
                given, keys = keys, list(keys)
                if not keys:
                    return []
                key_types = [g.sql_type for g in groups]
                key_relation = self._known_key_table(given, key_types)  # a tuple already checked and bound
                if key_relation is None:
                    parts = _checks.key_parts(groups, keys)
                    for group, part in zip(groups, parts, strict=True):
                        self._check_keys(part, group.sql_type, distinct=len(groups) == 1)
                    key_relation = self._key_relation(given, parts, key_types)
        selection = self._selections.get(view.name)
        carried = selection.stored if selection is not None else {}
        stored = {
            i: carried[sum_key(a)] for i, a in enumerate(aggs) if isinstance(a, ClippedSum) and sum_key(a) in carried
        }
        sql, params = _query.group_aggregates_query(
            relation,
            unit_column=view.unit_column,
            group_columns=[g.name for g in groups],
            key_types=None if keys is None else [g.sql_type for g in groups],
            aggregates=aggs,
            kinds={c.name: c.kind for c in view.schema.columns},
            stored=stored,
            keys_relation=key_relation,
        )
        if key_relation is None:
            params.update({f"keys{j}": part for j, part in enumerate(parts)})
        counted = [(i, a.name) for i, a in enumerate(aggs, 1) if not isinstance(a, _SUMS)]
        summed = [(i, a.name, _checks.sum_exponent(a)) for i, a in enumerate(aggs, 1) if isinstance(a, _SUMS)]
        out = []
        width = max(len(groups), 1) if keys is None else 1  # leading key columns of an output row
        for row in self._run(sql, _merged(params, view_params)).fetchall():
            found = tuple(row[:width]) if len(groups) > 1 else row[0]
            key = keys[int(row[0])] if keys is not None else found
            counts = {name: int(row[i + width - 1]) for i, name in counted}
            sums = {name: FixedPointSum(int(row[i + width - 1]), e) for i, name, e in summed}
            out.append(GroupRow(key, counts, sums))
        return out

    def order_statistics_window(
        self, view: BoundedView, *, column: str, low: float, high: float, rank: int, width: int
    ) -> OrderStatisticsWindow:
        """Clipped order statistics x_(rank-width) .. x_(rank+width), padded with low / high.

        The window of docs/math/order-statistics.md.

        Missing values (NULL, NaN) are left out. The count is never returned.
        """
        relation, view_params = self._check_view(view)
        _checks.require_numeric(view.schema, column)
        bounds = Clip(column, low, high)
        if not integer_in(rank):
            raise UsageError("rank must be an integer (1-based)", rank, "pass an int")
        if not integer_in(width, 0):
            raise UsageError("width must be a non-negative integer", width, "pass an int >= 0")
        params: dict[str, object] = {
            "lo": bounds.low,
            "hi": bounds.high,
            "first": rank - width,
            "last": rank + width,
        }
        rows = self._run(_query.order_statistics_query(relation, column), _merged(params, view_params)).fetchall()
        ranks = np.array([int(r[0]) for r in rows], dtype=np.int64)
        values = np.array([float(r[1]) for r in rows], dtype=np.float64)
        return OrderStatisticsWindow(ranks, values)

    def collect(
        self, view: BoundedView, *, columns: Sequence[str], max_rows: int | None = None
    ) -> dict[str, NDArray[Any]]:
        """The view's rows on ``columns`` as numpy arrays, sorted by those columns; rows with NULLs left out.

        With ``max_rows`` at most ``max_rows + 1`` rows are read, and more than ``max_rows`` raises
        ``CollectLimitExceeded`` (a failure that depends on the data: charged by the caller).
        """
        relation, view_params = self._check_view(view)
        cols = list(columns)
        if not cols or isinstance(columns, str):
            raise UsageError("columns must be a non-empty list of names", columns, "pass e.g. ['x', 'y']")
        for c in cols:
            _checks.require(view.schema, c)
        limit = "" if max_rows is None else f" LIMIT {_checks.positive_int(max_rows, 'max_rows') + 1}"
        quoted = ", ".join(_query.quote(c) for c in cols)
        present = " AND ".join(f"{_query.quote(c)} IS NOT NULL" for c in cols)
        result = self._run(f"SELECT {quoted} FROM {relation} WHERE {present} ORDER BY {quoted}{limit}", view_params)
        arrays = {c: np.asarray(a) for c, a in result.fetchnumpy().items()}
        if max_rows is not None and len(arrays[cols[0]]) > max_rows:
            raise CollectLimitExceeded(max_rows)
        return {c: arrays[c] for c in cols}

    # -- helpers -------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the engine is closed", "closed engine", "open a new DuckDBEngine")

    def _table(self, name: str) -> tuple[str, TableInfo]:
        found = self._tables.get(name)
        if found is None:
            raise UnknownTable(name)
        return found

    def _check_view(self, view: BoundedView) -> tuple[str, dict[str, object]]:
        """The SQL relation of a live view (a table name or an aliased subquery) and its parameters."""
        self._check_open()
        if not isinstance(view, BoundedView):
            raise UsageError(
                "aggregates run on a BoundedView", type(view).__name__, "call engine.bounded_rows(...) first"
            )
        selection = self._selections.get(view.name)
        read = selection.relation if selection is not None else self._temporaries.get(view.name)
        if read is None:
            raise UnknownTable(view.name, "the view was dropped or belongs to another engine; call bounded_rows again")
        current = self._tables.get(view.source)
        if current is None or current[0] != read:
            # Every view reads one snapshot: a view of a replaced one would mix two snapshots in a release.
            raise UnknownTable(
                view.name, "the table was forgotten or its snapshot replaced since the view was made; bound again"
            )
        if selection is not None:
            return f"({selection.sql}) AS {_query.quote(view.name)}", selection.params
        return _query.quote(view.name), {}

    def _check_keys(self, keys: list[Any], key_type: str, *, distinct: bool = True) -> None:
        """Public keys must be exactly representable in the group column's type, and distinct.

        Not ``distinct``: the keys are one column's part of several-column keys, where values repeat.

        All keys are cast in one statement (one list parameter); only when that fails are they tried
        one by one, to name the offending key. A key list that passed is remembered (keys are public),
        so the several aggregates of one release check it once.
        """
        if any(key is None for key in keys):
            raise UsageError("a public key may not be None", None, "list only non-NULL keys")
        if not keys:
            return
        try:
            remembered: tuple[object, ...] | None = (key_type, distinct, *((type(k), k) for k in keys))
            checked = remembered in self._checked_keys
        except TypeError:  # an unhashable key: check it every time
            remembered, checked = None, False
        if checked:
            return
        try:
            rows = self._con.execute(f"SELECT CAST($keys AS {key_type}[])", {"keys": keys}).fetchall()
        except (duckdb.Error, TypeError, ValueError):
            rows = []
        batch = rows[0][0] if rows else None
        if isinstance(batch, list) and len(batch) == len(keys):
            cast = batch
        else:
            cast = [self._cast_key(key, key_type) for key in keys]
        for key, value in zip(keys, cast, strict=True):
            if value is None or value != key or type(value) is not type(key):
                raise UsageError(
                    f"every public key must be a value of the group column's type {key_type}",
                    key,
                    "pass keys of the column's type",
                )
        if distinct and len({repr(k) for k in keys}) != len(keys):
            raise UsageError("public keys must be distinct", "a repeated key", "list each key once")
        if remembered is not None:
            if len(self._checked_keys) >= _CHECKED_KEY_LISTS:
                self._checked_keys.clear()
            self._checked_keys.add(remembered)

    def _cast_key(self, key: Any, key_type: str) -> Any:
        try:
            rows = self._con.execute(f"SELECT CAST($k AS {key_type})", {"k": key}).fetchall()
        except (duckdb.Error, TypeError, ValueError):
            return None
        return rows[0][0] if rows else None

    def _compress(self) -> None:
        """Compress the copies just written: a checkpoint of ``COPIES_DATABASE`` (none where copies live elsewhere).

        DuckDB stores a new table uncompressed and compresses an in-memory database attached with
        COMPRESS at its checkpoint: the indexed snapshot of 10^7 rows (three public and five hidden
        columns) goes from about 510 to 115 MiB, and scans of it run as fast (docs/performance.md).
        DuckDB refuses a checkpoint while another connection writes to the database (a ``shared``
        engine's loader beside another's): the copy then stays uncompressed until the next checkpoint
        (memory, not correctness; it depends on the other connections, not on the data).
        """
        if not self._compressed:
            return
        try:
            self._con.execute(f"CHECKPOINT {COPIES_DATABASE}")
        except duckdb.TransactionException:
            return
        except (duckdb.Error, RuntimeError) as exc:
            raise _failure(exc) from None

    def _one_row(self, sql: str, params: dict[str, object]) -> tuple[Any, ...]:
        """The single row of a statement, fully fetched (DuckDB refuses new work on an open result)."""
        rows = self._run(sql, params).fetchall()
        if len(rows) != 1:
            raise InternalError(f"a single-row statement returned {'no' if not rows else 'several'} rows")
        return tuple(rows[0])

    def _run(self, sql: str, params: dict[str, object]) -> duckdb.DuckDBPyConnection:
        try:
            return self._con.execute(sql, params)
        except (duckdb.Error, RuntimeError) as exc:
            raise _failure(exc) from None


def _failure(exc: duckdb.Error | RuntimeError) -> BaseException:
    """What a failed statement raises: Ctrl-C as ``KeyboardInterrupt``, DuckDB's errors by class alone.

    DuckDB stops a statement at once when the process is interrupted; its messages can quote data
    values, so only the error's class is reported. Other runtime errors pass unchanged.
    """
    if _interrupted(exc):
        return KeyboardInterrupt()
    if not isinstance(exc, duckdb.Error):
        return exc
    return InternalError(f"DuckDB failed a planned statement ({type(exc).__name__})")


def _interrupted(exc: BaseException) -> bool:
    """True when DuckDB stopped a statement because the process was interrupted (Ctrl-C)."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()
    )


def _merged(params: dict[str, object], view_params: dict[str, object]) -> dict[str, object]:
    """A statement's parameters and those of the view it reads (a selection's subquery), kept apart."""
    clash = params.keys() & view_params.keys()
    if clash:
        raise InternalError(f"parameter names clash between a statement and its view: {sorted(clash)}")
    return {**params, **view_params}


#: DuckDB's spelling of a memory size: a number and a unit (``512MB``, ``1.5GiB``).
_MEMORY = re.compile(r"^\d{1,9}(\.\d{1,3})?\s?(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$", re.IGNORECASE)
#: The environment variable a default ``memory_limit`` comes from.
MEMORY_LIMIT_ENV = "DPSENSE_DUCKDB_MEMORY_LIMIT"


def _memory_limit(given: str | None) -> str | None:
    """The checked memory limit: the argument, else the environment's, else ``None`` (DuckDB's default)."""
    value, where = (
        (given, "memory_limit") if given is not None else (os.environ.get(MEMORY_LIMIT_ENV), MEMORY_LIMIT_ENV)
    )
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _MEMORY.match(value.strip()):
        raise UsageError(
            f"{where} is a memory size: a number and a unit",
            value if isinstance(value, str) else type(value).__name__,
            f"set {where} to e.g. 512MB or 2GB",
        )
    return value.strip()
