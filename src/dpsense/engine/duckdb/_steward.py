"""The steward's steps of ``DuckDBEngine``: fingerprint, data checks, policies and the unit index.

These run at registration, by the steward, and read every row: the keyed fingerprint, the counts of
missing and non-finite values, the drop / clamp policies, and the unit index with the stored grid
units of the declared clipped sums. Mixed into ``DuckDBEngine`` (``_engine``), whose state they use;
the SQL is in ``sql._steward_query``, ``sql._index_query`` and ``sql._portable_query``.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from dpsense.core.errors import InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import _checks, _portable
from dpsense.engine._types import NO_CLAMP, ClippedSum, ColumnQuality, TableInfo
from dpsense.engine.sql import _index_query, _portable_query, _query, _steward_query

#: The compressed in-memory database holding the copies of an engine with its own in-memory connection.
COPIES_DATABASE = "__dps_copies"
#: Prefix of the engine's own copies of registered sources.
SRC_PREFIX = _query.INTERNAL_PREFIX + "src_"
#: Prefix of the copies of a ``shared`` engine: regular tables of the database, which other connections see.
SHARED_PREFIX = _query.INTERNAL_PREFIX + "shared_"
#: One numbering of shared copies per process (the database of a shared engine is this process's), so
#: that engines on one database never pick the same name.
_SHARED_COPIES = itertools.count()

#: Prefix of the read-only attachments of snapshot files (``load_snapshot``), and their one table's name.
FILE_PREFIX = _query.INTERNAL_PREFIX + "file_"
SNAPSHOT_TABLE = "snapshot"

#: What makes two clipped sums equal for the stored grid units: (column, low, high, grid exponent).
SumKey = tuple[str, float, float, int]


def sum_key(spec: ClippedSum) -> SumKey:
    """The identity of a clipped sum for its stored grid units (the output name does not count)."""
    return (spec.clip.column, spec.clip.low, spec.clip.high, spec.grid_exponent)


class DuckDBStewardSteps(ABC):
    """The registration-time steps of ``DuckDBEngine`` (the engine's state is declared, not owned, here)."""

    portable: bool
    shared: bool
    _compressed: bool
    _tables: dict[str, tuple[str, TableInfo]]
    _copies: set[str]
    _indexes: dict[str, str]
    _stored_sums: dict[str, dict[SumKey, str]]
    _group_counts: dict[str, dict[str, str]]
    _files: dict[str, str]
    _con: duckdb.DuckDBPyConnection
    _counter: itertools.count[int]

    @abstractmethod
    def _check_open(self) -> None:
        """Raise unless the engine is open."""

    @abstractmethod
    def _table(self, name: str) -> tuple[str, TableInfo]:
        """The SQL relation and public schema of a registered table."""

    @abstractmethod
    def _describe(self, name: str, relation: str) -> TableInfo:
        """The schema of a relation under a public name."""

    @abstractmethod
    def _drop_copy(self, relation: str) -> None:
        """Drop an engine-owned copy (a table registered by name stays)."""

    @abstractmethod
    def _compress(self) -> None:
        """Compress the copies just written (a checkpoint of ``COPIES_DATABASE``)."""

    @abstractmethod
    def _one_row(self, sql: str, params: dict[str, object]) -> tuple[Any, ...]:
        """The single row of a statement."""

    @abstractmethod
    def _run(self, sql: str, params: dict[str, object]) -> duckdb.DuckDBPyConnection:
        """Execute a planned statement (DuckDB's message, which can quote data, is never shown)."""

    def _new_copy(self) -> tuple[str, str]:
        """A fresh name for an engine-owned copy and the statement head that creates it from a SELECT.

        A temporary table of this connection, or a table of ``COPIES_DATABASE`` when the engine opened
        its own in-memory database (as private, and compressed); with ``shared=True`` a regular table of
        the database, named from a process-wide counter (a temporary table of that name would hide it),
        so that engines on other connections to the database can ``adopt`` it.
        """
        if self.shared:
            copy = f"{SHARED_PREFIX}{next(_SHARED_COPIES)}"
            return copy, f"CREATE TABLE {_query.quote(copy)} AS "
        copy = f"{SRC_PREFIX}{next(self._counter)}"
        if self._compressed:  # the engine's own in-memory database (``COPIES_DATABASE``): private as a temp table
            return copy, f"CREATE TABLE {_query.quote(copy)} AS "
        return copy, f"CREATE TEMP TABLE {_query.quote(copy)} AS "

    def _keep_copy(self, copy: str) -> None:
        """Hold a copy just written by a statement from ``_new_copy``: dropped on ``forget``/``close``, compressed."""
        self._copies.add(copy)
        self._compress()

    def fingerprint(self, table: str, key: bytes) -> str:
        """Keyed, order-independent fingerprint of the snapshot (see ``Engine.fingerprint``).

        Per row the first 64 bits of ``sha256(row key || injective row encoding)`` (the row key is
        derived from ``key`` and bound as a parameter), summed exactly; then
        ``HMAC-SHA256(key, schema | count | sum mod 2**64)`` in Python. The count stays in here.
        """
        self._check_open()
        relation, info = self._table(table)
        secret = _checks.secret(key, "fingerprint key")
        sql = _steward_query.fingerprint_query(relation, info.columns)
        row = self._one_row(sql, {"key": _steward_query.fingerprint_row_key(secret)})
        return _steward_query.fingerprint_digest(secret, info, int(row[0]), int(row[1]))

    def data_quality(self, table: str, columns: Sequence[str]) -> dict[str, ColumnQuality]:
        """NULL, NaN and infinity counts per column (steward-only; unnoised counts of private data)."""
        self._check_open()
        relation, info = self._table(table)
        names = list(dict.fromkeys(_checks.column_names(columns, "columns")))
        infos = [_checks.require(info, c) for c in names]
        if not infos:
            return {}
        row = self._one_row(_steward_query.data_quality_query(relation, infos), {})
        counts = [int(v) for v in row]
        return {c: ColumnQuality(*counts[3 * i : 3 * i + 3]) for i, c in enumerate(names)}

    def unit_count(self, table: str, *, unit_column: str) -> int:
        """Distinct non-NULL units of ``table`` (steward-only; see ``Engine.unit_count``)."""
        self._check_open()
        relation, info = self._table(table)
        unit = _checks.require(info, unit_column)
        return int(self._one_row(f"SELECT COUNT(DISTINCT {_query.quote(unit.name)}) FROM {relation}", {})[0])

    def apply_policies(
        self,
        table: str,
        *,
        drop_missing: Sequence[str] = (),
        drop_nonfinite: Sequence[str] = (),
        clamp: Mapping[str, tuple[float, float]] = NO_CLAMP,
    ) -> TableInfo:
        """A new snapshot of ``table`` with the policies applied (see ``Engine.apply_policies``).

        The result is always a new engine-owned copy; the previous copy goes only if the engine made
        it, so a DuckDB table registered by name is never modified. A unit index is dropped (the new
        snapshot holds only the public columns): call ``index_units`` again afterwards.
        """
        self._check_open()
        relation, info = self._table(table)
        missing, nonfinite, clips = _checks.policies(info, drop_missing, drop_nonfinite, clamp)
        sql, params = _steward_query.policy_query(
            relation, info, drop_missing=missing, drop_nonfinite=nonfinite, clamp=clips
        )
        copy, create = self._new_copy()
        self._run(f"{create}{sql}", params)
        self._keep_copy(copy)
        if self._describe(table, _query.quote(copy)) != info:
            self._drop_copy(_query.quote(copy))
            raise InternalError("a policy changed the table's schema")
        self._drop_copy(relation)
        self._tables[table] = (_query.quote(copy), info)
        self._indexes.pop(table, None)
        self._stored_sums.pop(table, None)
        self._group_counts.pop(table, None)
        return info

    def index_units(
        self,
        table: str,
        *,
        unit_column: str,
        key: bytes,
        sums: Sequence[ClippedSum] = (),
        group_columns: Sequence[str] = (),
    ) -> None:
        """Replace the snapshot of ``table`` by one indexed on ``unit_column`` (see ``Engine.index_units``).

        ``sums`` (not on the portable rules): each distinct clipped sum's grid units are stored as a
        hidden BIGINT column (``_query.stored_grid_units``), so that a release's clipped sum on the
        indexed path is an integer sum of that column, exactly equal to clipping and rounding again.
        ``group_columns`` (not on the portable rules): each one's number of distinct values per unit
        is stored as a hidden column (``_index_query.group_count_expr``), so that a group cap on those
        columns keeps the units within it with no window (``bounded_rows``).

        One window pass over the table, then a sort by (position, unit): a one-time steward cost
        (about 4 s for 10^7 rows on 2 cores) that makes every later ``bounded_rows`` on this unit
        column a projection that reads only the rows it keeps. The key enters DuckDB only as two 64-bit
        keys derived from it (``_index_query.unit_index_query`` has the steps); a table registered by
        name is never modified. Positions and counts are 32-bit: a unit with more than
        ``_index_query.MAX_UNIT_ROWS`` rows is refused here, by the steward, with ``InvalidData`` (bad
        data is found at registration; a release can then never meet it).
        """
        self._check_open()
        relation, info = self._table(table)
        unit = _checks.require(info, unit_column)
        secret = _checks.secret(key, "index key")
        params: dict[str, object]
        stored: dict[SumKey, str] = {}  # the portable rules store no sums
        counts: dict[str, str] = {}  # ... and no group counts
        if self.portable:
            _portable.require_text_column(unit, "privacy unit")
            sql = _portable_query.unit_index_query(relation, info.columns, unit=unit)
            params = {"index_key": _portable.text_key(secret, "index"), "unit_key": _portable.text_key(secret, "unit")}
        else:
            params = dict(_query.derived_keys(secret, "index", _index_query.INDEX_KEYS))
            extra, stored = _stored_units(info, sums, params)
            counted, counts = _group_counts(info, unit_column, group_columns)
            sql = _index_query.unit_index_query(
                relation, info.column_names, unit_column=unit_column, extra=[*extra, *counted]
            )
        copy, create = self._new_copy()
        self._run(f"{create}{sql}", params)
        if not self.portable:  # then sorted by position, in a statement of its own (it spills alone)
            unsorted = copy
            self._copies.add(unsorted)
            copy, create = self._new_copy()
            try:
                self._run(f"{create}{_index_query.position_order_query(_query.quote(unsorted), unit_column)}", {})
            finally:
                self._drop_copy(_query.quote(unsorted))
        self._keep_copy(copy)
        if not self.portable:
            self._refuse_large_units(_query.quote(copy))
        described = self._describe(table, _query.quote(copy))
        public = TableInfo(table, described.columns[: len(info.columns)])
        hidden = described.column_names[len(info.columns) :]
        index = _portable.INDEX_COLUMNS if self.portable else _index_query.HIDDEN_COLUMNS
        if public != info or hidden != (*index, *stored.values(), *counts.values()):
            self._drop_copy(_query.quote(copy))
            raise InternalError("indexing changed the table's schema")
        self._drop_copy(relation)
        self._tables[table] = (_query.quote(copy), info)
        self._indexes[table] = unit_column
        self._stored_sums[table] = stored
        self._group_counts[table] = counts

    @property
    def stores_snapshots(self) -> bool:
        """True on the default rules of an unshared engine (see ``SnapshotFiles``)."""
        return not self.portable and not self.shared

    def save_snapshot(self, table: str, path: Path) -> None:
        """Write the indexed snapshot ``table`` to a new DuckDB database file at ``path`` (``SnapshotFiles``).

        One table, ``snapshot``, holds the public columns, the index and the stored grid units in the
        snapshot's (position, unit) order; the file is checkpointed and closed when this returns.
        DuckDB's failure to write it (a full disk, a missing folder) is an ``OSError``, as the store's
        own file operations are.
        """
        self._check_open()
        self._require_files()
        relation, _ = self._table(table)
        if self._indexes.get(table) is None:
            raise InternalError("only an indexed snapshot is saved to a file")
        if path.exists():
            raise InternalError("a snapshot file is written once, to a new path")
        alias = _query.quote(f"{FILE_PREFIX}{next(self._counter)}")
        try:
            self._con.execute(f"ATTACH {sql_text(path)} AS {alias}")
        except duckdb.Error:
            raise OSError("the snapshot file could not be created") from None
        try:
            self._con.execute(f"CREATE TABLE {alias}.{SNAPSHOT_TABLE} AS SELECT * FROM {relation}")
        except duckdb.Error:  # a full disk, a lost directory: the caller keeps the data in memory
            raise OSError("the snapshot file could not be written") from None
        finally:
            self._con.execute(f"DETACH DATABASE IF EXISTS {alias}")

    def load_snapshot(
        self,
        name: str,
        path: Path,
        *,
        info: TableInfo,
        unit_column: str,
        sums: Sequence[ClippedSum] = (),
        group_columns: Sequence[str] = (),
    ) -> None:
        """Register the snapshot file at ``path`` read-only as ``name`` (``SnapshotFiles``); no row is read.

        The file's columns must be ``info``'s, then the index's hidden columns, then the stored grid
        units of the distinct ``sums`` in order, then the group counts of ``group_columns`` (what
        ``index_units`` made at registration from the same declarations); anything else is
        ``InvalidData`` and nothing stays attached.
        """
        self._check_open()
        self._require_files()
        if name in self._tables:
            raise UsageError("a table of this name is already registered", name, "choose another name or forget it")
        _checks.require(info, unit_column)
        alias = f"{FILE_PREFIX}{next(self._counter)}"
        relation = f"{_query.quote(alias)}.{SNAPSHOT_TABLE}"
        try:
            self._con.execute(f"ATTACH {sql_text(path)} AS {_query.quote(alias)} (READ_ONLY)")
        except duckdb.Error:
            raise InvalidData("the snapshot file could not be opened", str(path), "register again") from None
        _, stored = _stored_units(info, sums, {})
        _, counts = _group_counts(info, unit_column, group_columns)
        try:
            described = self._describe(name, relation)
        except duckdb.Error:
            described = TableInfo(name, ())
        expected = [
            (*info.column_names, *hidden, *stored.values(), *counts.values())
            for hidden in (_index_query.HIDDEN_COLUMNS, _index_query.LEGACY_HIDDEN_COLUMNS)
        ]
        if TableInfo(name, described.columns[: len(info.columns)]) != info or described.column_names not in expected:
            self._con.execute(f"DETACH {_query.quote(alias)}")
            raise InvalidData("the snapshot file does not hold the registered schema", str(path), "register again")
        self._files[relation] = alias
        self._tables[name] = (relation, info)
        self._indexes[name] = unit_column
        self._stored_sums[name] = stored
        self._group_counts[name] = counts

    def _require_files(self) -> None:
        if not self.stores_snapshots:
            raise UnsupportedRequest(
                "snapshot files hold the default rules' index of an unshared engine",
                "portable" if self.portable else "shared",
                "attach from the source on this engine",
            )

    def _refuse_large_units(self, copy: str) -> None:
        """Refuse (at registration) an indexed snapshot whose largest unit exceeds ``MAX_UNIT_ROWS`` rows."""
        largest = self._one_row(f"SELECT max({_query.quote(_index_query.UNIT_ROWS)}) FROM {copy}", {})[0]
        if largest is not None and int(largest) > _index_query.MAX_UNIT_ROWS:
            self._drop_copy(copy)
            raise InvalidData(
                f"a privacy unit holds more than {_index_query.MAX_UNIT_ROWS} rows, the most the embedded engine's "
                "per-release row selection can index",
                None,
                "check the privacy unit column (a constant or a placeholder value is a common cause), or register "
                "the data on the Spark engine",
            )


def sql_text(value: Path | str) -> str:
    """``value`` (a path, a setting) as a SQL string literal (ATTACH and SET take no parameter)."""
    return "'" + str(value).replace("'", "''") + "'"


def _stored_units(
    info: TableInfo, sums: Sequence[ClippedSum], params: dict[str, object]
) -> tuple[list[str], dict[SumKey, str]]:
    """The ``<expr> AS <hidden name>`` columns of the distinct ``sums`` and their names by sum.

    Their parameters are added to ``params`` (the index statement's).
    """
    extra: list[str] = []
    stored: dict[SumKey, str] = {}
    kinds = {c.name: c.kind for c in info.columns}
    for spec in sums:
        _checks.require_numeric(info, spec.clip.column)
        if sum_key(spec) in stored:
            continue
        name = f"{_index_query.STORED_UNITS_PREFIX}{len(stored)}"
        expr, p = _query.stored_grid_units(spec, kinds.get(spec.clip.column, "float"), f"q{len(stored)}")
        extra.append(f"{expr} AS {_query.quote(name)}")
        params.update(p)
        stored[sum_key(spec)] = name
    return extra, stored


def _group_counts(info: TableInfo, unit_column: str, group_columns: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The ``<expr> AS <hidden name>`` columns of the distinct ``group_columns`` (sorted) and their names by column."""
    extra: list[str] = []
    counts: dict[str, str] = {}
    for column in sorted(set(_checks.column_names(group_columns, "group_columns"))):
        _checks.require(info, column)
        name = f"{_index_query.GROUP_COUNTS_PREFIX}{len(counts)}"
        extra.append(f"{_index_query.group_count_expr(unit_column, column)} AS {_query.quote(name)}")
        counts[column] = name
    return extra, counts
