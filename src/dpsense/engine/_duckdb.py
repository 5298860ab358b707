"""``DuckDBEngine``: the reference engine, in-process DuckDB (``pip install dpsense[duckdb]``).

Registered sources are copied into temporary tables (a snapshot: later edits of a DataFrame or file
do not change what a release reads). Every step is one SQL statement from ``_sql``; values and the
salt are bound as parameters. DuckDB error texts can quote data values, so they never propagate:
failures after data access become ``InternalError`` without the original message.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import _checks, _sql, _sql_steward
from dpsense.engine._checks import MIN_SECRET_BYTES as MIN_SALT_BYTES
from dpsense.engine._errors import UnknownTable
from dpsense.engine._types import (
    NO_CLAMP,
    Aggregate,
    BoundedView,
    Clip,
    ClippedSum,
    ColumnInfo,
    ColumnQuality,
    CountRows,
    CountUnits,
    FixedPointSum,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
)

__all__ = ["MIN_SALT_BYTES", "DuckDBEngine"]

_TMP_PREFIX = _sql.INTERNAL_PREFIX + "tmp_"
_SRC_PREFIX = _sql.INTERNAL_PREFIX + "src_"
_CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_FRAME_MODULES = frozenset({"pandas", "pyarrow", "polars"})

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


class DuckDBEngine:
    """The engine seam on an in-process DuckDB connection.

    Use one engine per thread (a DuckDB connection is not shared across threads).

    Args:
        database: a DuckDB database path, or ":memory:" (default).
        connection: an existing connection to use instead (then ``close`` leaves it open, but still
            removes everything the engine created). Existing tables there can be registered by name.

    """

    def __init__(self, database: str = ":memory:", *, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self._owns_connection = connection is None
        self._con = duckdb.connect(database) if connection is None else connection
        self._tables: dict[str, tuple[str, TableInfo]] = {}  # public name -> (SQL relation, schema)
        self._copies: set[str] = set()  # source copies this engine created
        self._temporaries: set[str] = set()
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
        for name in sorted(self._temporaries | self._copies):
            self._con.execute(f"DROP TABLE IF EXISTS {_sql.quote(name)}")
        self._temporaries.clear()
        self._copies.clear()
        self._tables.clear()
        if self._owns_connection:
            self._con.close()
        self._closed = True

    def drop(self, view: BoundedView) -> None:
        """Remove a temporary view now (idempotent)."""
        self._check_open()
        self._con.execute(f"DROP TABLE IF EXISTS {_sql.quote(view.name)}")
        self._temporaries.discard(view.name)

    def release_scope(self) -> AbstractContextManager[None]:
        """A context that removes the temporary views created inside it on exit, even on error."""
        return self._scope()

    @contextmanager
    def _scope(self) -> Iterator[None]:
        before = set(self._temporaries)
        try:
            yield
        finally:
            if not self._closed:
                for name in sorted(self._temporaries - before):
                    self._con.execute(f"DROP TABLE IF EXISTS {_sql.quote(name)}")
                    self._temporaries.discard(name)

    def temporary_names(self) -> list[str]:
        """Temporary relations of this engine that exist in DuckDB's catalog right now."""
        self._check_open()
        rows = self._con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, $p) "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE starts_with(view_name, $p) ORDER BY 1",
            {"p": _TMP_PREFIX},
        ).fetchall()
        return [str(r[0]) for r in rows]

    # -- registration --------------------------------------------------------------------------------

    def register(self, name: str, source: object) -> TableInfo:
        """Register a pandas/pyarrow/polars table, a CSV or Parquet path, or a DuckDB table name.

        Returns the public schema. Sources other than an existing DuckDB table are copied into a
        temporary table, so the registered data is a snapshot.
        """
        self._check_open()
        if not isinstance(name, str) or not name or name.startswith(_sql.INTERNAL_PREFIX):
            raise UsageError(
                "a table name must be a non-empty string not starting with '__dps_'", name, "choose another name"
            )
        if name in self._tables:
            raise UsageError("a table of this name is already registered", name, "choose another name or close()")
        relation = self._materialize(source)
        info = self._describe(name, relation)
        clash = [c for c in info.column_names if c.startswith(_sql.INTERNAL_PREFIX)]
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
        if found is not None:
            self._drop_copy(found[0])

    def _materialize(self, source: object) -> str:
        if isinstance(source, str | PathLike):
            path = Path(source)
            lowered = path.name.lower()
            if lowered.endswith(_CSV_SUFFIXES):
                return self._copy_file(path, "read_csv($path, header = true)")
            if lowered.endswith(_PARQUET_SUFFIXES):
                return self._copy_file(path, "read_parquet($path)")
            if isinstance(source, str) and self._catalog_has(source):
                return _sql.quote(source)
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
        copy = f"{_SRC_PREFIX}{next(self._counter)}"
        scratch = f"{copy}_in"
        self._con.register(scratch, source)
        try:
            self._con.execute(f"CREATE TEMP TABLE {_sql.quote(copy)} AS SELECT * FROM {_sql.quote(scratch)}")
        finally:
            self._con.unregister(scratch)
        self._copies.add(copy)
        return _sql.quote(copy)

    def _copy_file(self, path: Path, reader: str) -> str:
        if not path.is_file():
            raise InvalidData("the source file does not exist", str(path), "check the path")
        copy = f"{_SRC_PREFIX}{next(self._counter)}"
        try:
            self._con.execute(f"CREATE TEMP TABLE {_sql.quote(copy)} AS SELECT * FROM {reader}", {"path": str(path)})
        except duckdb.Error:
            # The parser's message may quote file contents: keep it out of the error.
            raise InvalidData("the file could not be read as a table", str(path), "check its format") from None
        self._copies.add(copy)
        return _sql.quote(copy)

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
        raw = relation.strip('"')
        if raw in self._copies:
            self._con.execute(f"DROP TABLE IF EXISTS {relation}")
            self._copies.discard(raw)

    # -- steward steps at registration ---------------------------------------------------------------

    def fingerprint(self, table: str, key: bytes) -> str:
        """Keyed, order-independent fingerprint of the snapshot (see ``Engine.fingerprint``).

        Per row the first 64 bits of ``sha256(row key || injective row encoding)`` (the row key is
        derived from ``key`` and bound as a parameter), summed exactly; then
        ``HMAC-SHA256(key, schema | count | sum mod 2**64)`` in Python. The count stays in here.
        """
        self._check_open()
        relation, info = self._table(table)
        secret = _checks.secret(key, "fingerprint key")
        sql = _sql_steward.fingerprint_query(relation, info.columns)
        row = self._one_row(sql, {"key": _sql_steward.fingerprint_row_key(secret)})
        return _sql_steward.fingerprint_digest(secret, info, int(row[0]), int(row[1]))

    def data_quality(self, table: str, columns: Sequence[str]) -> dict[str, ColumnQuality]:
        """NULL, NaN and infinity counts per column (steward-only; unnoised counts of private data)."""
        self._check_open()
        relation, info = self._table(table)
        names = list(dict.fromkeys(_checks.column_names(columns, "columns")))
        infos = [_checks.require(info, c) for c in names]
        if not infos:
            return {}
        row = self._one_row(_sql_steward.data_quality_query(relation, infos), {})
        counts = [int(v) for v in row]
        return {c: ColumnQuality(*counts[3 * i : 3 * i + 3]) for i, c in enumerate(names)}

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
        it, so a DuckDB table registered by name is never modified.
        """
        self._check_open()
        relation, info = self._table(table)
        missing, nonfinite, clips = _checks.policies(info, drop_missing, drop_nonfinite, clamp)
        sql, params = _sql_steward.policy_query(
            relation, info, drop_missing=missing, drop_nonfinite=nonfinite, clamp=clips
        )
        copy = f"{_SRC_PREFIX}{next(self._counter)}"
        self._run(f"CREATE TEMP TABLE {_sql.quote(copy)} AS {sql}", params)
        self._copies.add(copy)
        if self._describe(table, _sql.quote(copy)) != info:
            self._drop_copy(_sql.quote(copy))
            raise InternalError("a policy changed the table's schema")
        self._drop_copy(relation)
        self._tables[table] = (_sql.quote(copy), info)
        return info

    # -- relational steps ----------------------------------------------------------------------------

    def bounded_rows(
        self,
        table: str,
        *,
        unit_column: str,
        max_rows_per_unit: int,
        salt: bytes,
        group_column: str | None = None,
        max_groups_per_unit: int | None = None,
        where: Sequence[Predicate] = (),
    ) -> BoundedView:
        """Keep at most C rows (and G groups) per unit, a uniformly random subset under a fresh salt.

        Rows failing a filter in ``where`` and rows with a NULL unit are dropped before the bound
        (registration policies handle other missing values). The salt only enters DuckDB through
        64-bit keys derived from it, as parameters (``_sql.bounded_rows_query`` has the steps).
        """
        self._check_open()
        relation, info = self._table(table)
        _checks.require(info, unit_column)
        max_rows = _checks.positive_int(max_rows_per_unit, "max_rows_per_unit")
        if group_column is not None:
            _checks.require(info, group_column)
        if max_groups_per_unit is not None:
            _checks.positive_int(max_groups_per_unit, "max_groups_per_unit")
            if group_column is None:
                raise UsageError(
                    "max_groups_per_unit needs the group column", max_groups_per_unit, "pass group_column as well"
                )
        filters = _checks.predicates(info, where)
        _checks.secret(salt, "salt")
        sql, params = _sql.bounded_rows_query(
            relation,
            info.column_names,
            unit_column=unit_column,
            group_column=group_column,
            max_groups_per_unit=max_groups_per_unit,
            where=filters,
            kinds={c.name: c.kind for c in info.columns},
        )
        params.update(_sql.derived_keys(salt, "rows", _sql.ROW_KEYS))
        params["max_rows"] = max_rows
        if max_groups_per_unit is not None:
            params.update(_sql.derived_keys(salt, "groups", _sql.GROUP_KEYS))
            params["max_groups"] = max_groups_per_unit
        name = f"{_TMP_PREFIX}{next(self._counter)}"
        # A TEMP TABLE, not a view: a view would store its query, with the salt's keys, in the catalog.
        self._run(f"CREATE TEMP TABLE {_sql.quote(name)} AS {sql}", params)
        self._temporaries.add(name)
        return BoundedView(name, table, info, unit_column, max_rows, group_column, max_groups_per_unit, filters)

    def group_aggregates(
        self,
        view: BoundedView,
        *,
        group_column: str | None,
        keys: Sequence[Any] | None,
        aggregates: Sequence[Aggregate],
    ) -> list[GroupRow]:
        """Counts and exact fixed-point sums per group; public keys always appear, unlisted keys never."""
        self._check_view(view)
        aggs = list(aggregates)
        if not aggs or not all(isinstance(a, CountRows | CountUnits | ClippedSum) for a in aggs):
            raise UsageError(
                "aggregates must be a non-empty list of count_rows(), count_units(), clipped_sum(...)",
                [type(a).__name__ for a in aggs],
                "build them with dpsense.engine.count_rows / count_units / clipped_sum",
            )
        names = [a.name for a in aggs]
        if len(set(names)) != len(names):
            raise UsageError("aggregate names must be distinct", names, "pass name=... to tell them apart")
        for a in aggs:
            if isinstance(a, ClippedSum):
                _checks.require_numeric(view.schema, a.clip.column)
        key_type: str | None = None
        if group_column is None:
            if keys is not None:
                raise UsageError("public keys need a group column", "keys without group_column", "pass group_column")
        else:
            column = _checks.require(view.schema, group_column)
            if view.max_groups_per_unit is not None and group_column != view.group_column:
                raise UnsupportedRequest(
                    "the view caps groups per unit on another column",
                    group_column,
                    f"group by {view.group_column!r} or bound rows again with this group column",
                )
            key_type = column.sql_type
            if keys is not None:
                keys = list(keys)
                self._check_keys(keys, key_type)
                if not keys:
                    return []
        sql, params = _sql.group_aggregates_query(
            _sql.quote(view.name),
            unit_column=view.unit_column,
            group_column=group_column,
            key_type=key_type,
            n_keys=None if keys is None else len(keys),
            aggregates=aggs,
        )
        if keys is not None:
            params["keys"] = keys
        out = []
        for row in self._run(sql, params).fetchall():
            key = keys[int(row[0])] if keys is not None else row[0]
            counts = {a.name: int(v) for a, v in zip(aggs, row[1:], strict=True) if not isinstance(a, ClippedSum)}
            sums = {
                a.name: FixedPointSum(int(v), a.grid_exponent)
                for a, v in zip(aggs, row[1:], strict=True)
                if isinstance(a, ClippedSum)
            }
            out.append(GroupRow(key, counts, sums))
        return out

    def order_statistics_window(
        self, view: BoundedView, *, column: str, low: float, high: float, rank: int, width: int
    ) -> OrderStatisticsWindow:
        """Clipped order statistics x_(rank-width) .. x_(rank+width), padded with low / high (ALGORITHMS §4).

        Missing values (NULL, NaN) are left out. The count is never returned.
        """
        self._check_view(view)
        _checks.require_numeric(view.schema, column)
        bounds = Clip(column, low, high)
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise UsageError("rank must be an integer (1-based)", rank, "pass an int")
        if isinstance(width, bool) or not isinstance(width, int) or width < 0:
            raise UsageError("width must be a non-negative integer", width, "pass an int >= 0")
        params: dict[str, object] = {
            "lo": bounds.low,
            "hi": bounds.high,
            "first": rank - width,
            "last": rank + width,
        }
        rows = self._run(_sql.order_statistics_query(_sql.quote(view.name), column), params).fetchall()
        ranks = np.array([int(r[0]) for r in rows], dtype=np.int64)
        values = np.array([float(r[1]) for r in rows], dtype=np.float64)
        return OrderStatisticsWindow(ranks, values)

    def collect(self, view: BoundedView, *, columns: Sequence[str]) -> dict[str, NDArray[Any]]:
        """The view's rows on ``columns`` as numpy arrays, sorted by those columns; rows with NULLs left out."""
        self._check_view(view)
        cols = list(columns)
        if not cols or isinstance(columns, str):
            raise UsageError("columns must be a non-empty list of names", columns, "pass e.g. ['x', 'y']")
        for c in cols:
            _checks.require(view.schema, c)
        quoted = ", ".join(_sql.quote(c) for c in cols)
        present = " AND ".join(f"{_sql.quote(c)} IS NOT NULL" for c in cols)
        result = self._run(f"SELECT {quoted} FROM {_sql.quote(view.name)} WHERE {present} ORDER BY {quoted}", {})
        arrays = result.fetchnumpy()
        return {c: np.asarray(arrays[c]) for c in cols}

    # -- helpers -------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the engine is closed", "closed engine", "open a new DuckDBEngine")

    def _table(self, name: str) -> tuple[str, TableInfo]:
        found = self._tables.get(name)
        if found is None:
            raise UnknownTable(name)
        return found

    def _check_view(self, view: BoundedView) -> None:
        self._check_open()
        if not isinstance(view, BoundedView):
            raise UsageError(
                "aggregates run on a BoundedView", type(view).__name__, "call engine.bounded_rows(...) first"
            )
        if view.name not in self._temporaries:
            raise UnknownTable(view.name, "the view was dropped or belongs to another engine; call bounded_rows again")

    def _check_keys(self, keys: list[Any], key_type: str) -> None:
        """Public keys must be distinct and exactly representable in the group column's type.

        All keys are cast in one statement (one list parameter); only when that fails are they tried
        one by one, to name the offending key.
        """
        if any(key is None for key in keys):
            raise UsageError("a public key may not be None", None, "list only non-NULL keys")
        if not keys:
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
        if len({repr(k) for k in keys}) != len(keys):
            raise UsageError("public keys must be distinct", "a repeated key", "list each key once")

    def _cast_key(self, key: Any, key_type: str) -> Any:
        try:
            rows = self._con.execute(f"SELECT CAST($k AS {key_type})", {"k": key}).fetchall()
        except (duckdb.Error, TypeError, ValueError):
            return None
        return rows[0][0] if rows else None

    def _one_row(self, sql: str, params: dict[str, object]) -> tuple[Any, ...]:
        """The single row of a statement, fully fetched (DuckDB refuses new work on an open result)."""
        rows = self._run(sql, params).fetchall()
        if len(rows) != 1:
            raise InternalError(f"a single-row statement returned {'no' if not rows else 'several'} rows")
        return tuple(rows[0])

    def _run(self, sql: str, params: dict[str, object]) -> duckdb.DuckDBPyConnection:
        try:
            return self._con.execute(sql, params)
        except duckdb.Error as exc:
            # DuckDB messages can quote data values; report only the error class.
            raise InternalError(f"DuckDB failed a planned statement ({type(exc).__name__})") from None
