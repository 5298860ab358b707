"""``SparkEngine``: the engine seam on Apache Spark (``pip install dpsense[spark]``), always portable.

The engine runs the portable rules of ``_portable``, so the same data, salt and request keep the same
rows and give the same aggregates as ``DuckDBEngine(portable=True)``; the conformance suite checks it.

Where the work runs: every per-row and per-unit step (filters, contribution bounding, clipping, the
exact fixed-point sums, grouped counts, the counts and interval narrowing of order statistics) runs
on the executors as native Spark expressions and windows, no Python UDF. Only small results reach the
driver: one row per public group, 2 * width + 1 order statistics, a fingerprint's count and sum, or
a collected view of at most ``max_rows`` rows. The DP math then runs on the driver, in numpy.

Snapshots: a registered source is persisted, so later changes of a file, table or DataFrame do not
change what releases read: on disk (``staging_level``) while registration's checks read it, then, once
``index_units`` has built the indexed snapshot that releases read, that one at ``storage_level``
(memory and disk by default). The policies are a row-wise map of the persisted snapshot, applied
where it is read, not another persisted copy. So at most one copy of the data sits in Spark's storage
memory and the heap keeps room for the index's shuffle (docs/scaling.md, "Spark's heap").
``forget``, ``index_units`` and ``close`` unpersist what they replace. Bounded views are queries kept
in this object, never in Spark's catalog, and computed when read (a release reads each view once);
``drop``, ``release_scope`` and ``close`` forget them.

Secrets: the salt stays in Python. Keys derived from it (HMAC-SHA256, one per purpose) enter the
query plans as literals, so ``explain()`` shows derived keys, never the salt; nothing is registered
in the catalog. Spark's error messages can quote data values, so they never propagate: a failed
action becomes ``InternalError`` without the original message.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from dpsense.core.checks import integer_in
from dpsense.core.errors import DPSenseError, InternalError, InvalidData, UnsupportedRequest, UsageError
from dpsense.engine import _checks, _portable
from dpsense.engine._errors import CollectLimitExceeded, UnknownTable
from dpsense.engine._types import (
    NO_CLAMP,
    Aggregate,
    BoundedView,
    Clip,
    ClippedSum,
    ColumnQuality,
    GroupColumns,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
)
from dpsense.engine.spark import _aggregate, _bound, _expr, _select, _source, _steward
from dpsense.engine.spark._expr import col
from dpsense.engine.sql import _steward_query

__all__ = ["SparkEngine"]

_INTERNAL_PREFIX = "__dps_"
_VIEW_PREFIX = "__dps_tmp_"
_SNAPSHOT_MARKER = "__dps_snapshot"
_R = TypeVar("_R")


@dataclass
class _Snapshot:
    """A registered table: its frame (public columns, and a cache marker or the index columns), schema, state."""

    frame: DataFrame
    info: TableInfo
    version: int
    persisted: DataFrame | None
    index_unit: str | None = None


@dataclass(frozen=True)
class _View:
    """A live bounded view: the frame to read and the snapshot (table, version) it reads."""

    frame: DataFrame
    table: str
    version: int


class SparkEngine:
    """The engine seam on a ``SparkSession`` (a session passed in is the caller's: ``close`` leaves it running).

    Args:
        spark: the session to run on (local mode for tests, a cluster's master URL in production).
        storage_level: how indexed snapshots (and the values an order statistic reads) are persisted.
        staging_level: how a registered snapshot is persisted until ``index_units`` replaces it (the
            checks of registration read it a few times; on disk by default, out of the heap). A snapshot
            that is never indexed (the engine used without a Session) is read from there by releases.
        collect_limit: the public default for ``collect``'s ``max_rows`` when the caller gives none;
            with neither, ``collect`` refuses before reading (the driver's memory needs a bound).

    """

    #: The engine follows the portable rules (``dpsense.engine._portable``); it has no other mode.
    portable = True

    def __init__(
        self,
        spark: SparkSession,
        *,
        storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
        staging_level: StorageLevel = StorageLevel.DISK_ONLY,
        collect_limit: int | None = None,
    ) -> None:
        if collect_limit is not None:
            _checks.positive_int(collect_limit, "collect_limit")
        self._spark = spark
        self._storage_level = storage_level
        self._staging_level = staging_level
        self._collect_limit = collect_limit
        self._tables: dict[str, _Snapshot] = {}
        self._views: dict[str, _View] = {}
        self._counter = itertools.count()
        self._closed = False
        self._owns_session = False
        self._key_conditions = _aggregate.KeyConditions()  # public key filters, built once per key list

    @classmethod
    def start(
        cls,
        master: str = "local[*]",
        *,
        app_name: str = "dpsense",
        conf: Mapping[str, str] | None = None,
        storage_level: StorageLevel = StorageLevel.MEMORY_AND_DISK,
        staging_level: StorageLevel = StorageLevel.DISK_ONLY,
        collect_limit: int | None = None,
    ) -> SparkEngine:
        """An engine on a SparkSession for ``master`` (``local[2]``, ``spark://host:7077``, ``yarn``, ...).

        ``conf`` holds Spark settings (e.g. ``{"spark.executor.memory": "8g"}``). When no session is
        active one is created, and ``close`` stops it; an active session is reused and left running.
        The engine runs no Python on the executors (no UDFs), so they need no dpsense install.
        """
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        owns = SparkSession.getActiveSession() is None
        builder = SparkSession.builder.master(master).appName(app_name)
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        engine = cls(
            builder.getOrCreate(),
            storage_level=storage_level,
            staging_level=staging_level,
            collect_limit=collect_limit,
        )
        engine._owns_session = owns
        return engine

    @property
    def collect_limit(self) -> int | None:
        """The public default bound of ``collect`` (``None``: every ``collect`` must pass ``max_rows``).

        A caller that knows a public bound on a view's rows (the policy's population times the
        contribution bound) can compare it with this before charging: a view found to hold more rows
        after reading is a charged failure, a bound found too small beforehand is a free refusal.
        """
        return self._collect_limit

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Unpersist every view and snapshot and forget them (the SparkSession keeps running)."""
        if self._closed:
            return
        for name in list(self._views):
            self._drop_view(name)
        for snapshot in self._tables.values():
            _unpersist(snapshot.persisted)
        self._tables.clear()
        self._closed = True
        if self._owns_session:
            self._spark.stop()

    def drop(self, view: BoundedView) -> None:
        """Remove a bounded view now (idempotent)."""
        self._check_open()
        self._drop_view(view.name)

    def release_scope(self) -> AbstractContextManager[None]:
        """A context that removes the views created inside it on exit, even on error."""
        return self._scope()

    @contextmanager
    def _scope(self) -> Iterator[None]:
        before = set(self._views)
        try:
            yield
        finally:
            if not self._closed:
                for name in sorted(set(self._views) - before):
                    self._drop_view(name)

    def temporary_names(self) -> list[str]:
        """The live bounded views of this engine (kept in this object, never in Spark's catalog)."""
        self._check_open()
        return sorted(self._views)

    def _drop_view(self, name: str) -> None:
        self._views.pop(name, None)

    # -- registration --------------------------------------------------------------------------------

    def register(self, name: str, source: object) -> TableInfo:
        """Register a Spark DataFrame or catalog table name, a pandas/pyarrow/polars table, or a CSV/Parquet path.

        The source is persisted (a snapshot; see the module docstring) and read once now. Returns the
        public schema.
        """
        self._check_open()
        if not isinstance(name, str) or not name or name.startswith(_INTERNAL_PREFIX):
            raise UsageError(
                "a table name must be a non-empty string not starting with '__dps_'", name, "choose another name"
            )
        if name in self._tables:
            raise UsageError("a table of this name is already registered", name, "choose another name or close()")
        frame, from_file = _source.source_frame(self._spark, source, self._run)
        info = TableInfo(name, tuple(_expr.column_info(f) for f in frame.schema.fields))
        clash = [c for c in info.column_names if c.startswith(_INTERNAL_PREFIX)]
        if clash:
            raise UsageError("column names may not start with '__dps_'", clash[0], "rename the column")
        if len({c.lower() for c in info.column_names}) != len(info.column_names):
            raise UsageError(
                "column names must differ in more than letter case (Spark resolves names case-insensitively)",
                info.column_names,
                "rename the columns",
            )
        # The marker makes this plan differ from any query already cached (a DataFrame the caller
        # persisted): Spark would otherwise share that cache entry, and forget() would unpersist it.
        marker = sf.lit(uuid.uuid4().hex).alias(_SNAPSHOT_MARKER)
        persisted = frame.select(*[col(c) for c in info.column_names], marker).persist(self._staging_level)
        try:
            self._run(persisted.count)
        except InternalError:
            _unpersist(persisted)
            if from_file:
                raise InvalidData("the file could not be read as a table", str(source), "check its format") from None
            raise
        self._tables[name] = _Snapshot(persisted, info, next(self._counter), persisted)
        return info

    def table_info(self, name: str) -> TableInfo:
        """The public schema of a registered table."""
        self._check_open()
        return self._table(name).info

    def forget(self, table: str) -> None:
        """Unregister ``table`` and unpersist its snapshot (idempotent; a catalog table stays as it is)."""
        self._check_open()
        found = self._tables.pop(table, None)
        if found is not None:
            _unpersist(found.persisted)

    # -- steward steps at registration ---------------------------------------------------------------

    def fingerprint(self, table: str, key: bytes) -> str:
        """Keyed, order-independent fingerprint of the snapshot, equal to DuckDB's on the same data.

        Per row the first 64 bits of ``sha256(row key || '|' || row text)`` (the portable row text of
        ``_steward_query.fingerprint_query``), summed exactly: as two sums of 32-bit halves in BIGINTs
        below 2**31 rows (neither can overflow), as DECIMAL(38, 0) beyond; then
        ``HMAC-SHA256(key, schema | count | sum mod 2**64)`` in Python. The count stays in here.
        """
        self._check_open()
        snapshot = self._table(table)
        secret = _checks.secret(key, "fingerprint key")
        row_key = _steward_query.fingerprint_row_key(secret)
        count, total = _steward.fingerprint_sum(snapshot.frame, snapshot.info.columns, row_key, self._run)
        return _steward_query.fingerprint_digest(secret, snapshot.info, count, total)

    def data_quality(self, table: str, columns: Sequence[str]) -> dict[str, ColumnQuality]:
        """NULL, NaN and infinity counts per column (steward-only; unnoised counts of private data)."""
        self._check_open()
        snapshot = self._table(table)
        names = list(dict.fromkeys(_checks.column_names(columns, "columns")))
        infos = [_checks.require(snapshot.info, c) for c in names]
        if not infos:
            return {}
        return _steward.quality(snapshot.frame, infos, self._run)

    def unit_count(self, table: str, *, unit_column: str) -> int:
        """Distinct non-NULL units of ``table`` (steward-only; see ``Engine.unit_count``)."""
        self._check_open()
        snapshot = self._table(table)
        unit = _checks.require(snapshot.info, unit_column)
        return _steward.distinct_count(snapshot.frame, unit, self._run)

    def apply_policies(
        self,
        table: str,
        *,
        drop_missing: Sequence[str] = (),
        drop_nonfinite: Sequence[str] = (),
        clamp: Mapping[str, tuple[float, float]] = NO_CLAMP,
    ) -> TableInfo:
        """``table`` with the policies applied (see ``Engine.apply_policies``), read from the same persisted copy.

        The policies (drop rows, clamp values) are a deterministic row-wise map of the persisted rows,
        so the new snapshot is that map over them, not a second persisted copy: what releases read is
        still fixed by the persisted copy. It holds the public columns only: a unit index is dropped.
        """
        self._check_open()
        snapshot = self._table(table)
        info = snapshot.info
        missing, nonfinite, clips = _checks.policies(info, drop_missing, drop_nonfinite, clamp)
        frame = _steward.with_policies(
            snapshot.frame, info, drop_missing=missing, drop_nonfinite=nonfinite, clamp=clips
        )
        described = tuple(_expr.column_info(f) for f in frame.schema.fields[: len(info.columns)])
        if described != info.columns:
            raise InternalError("a policy changed the table's schema")
        # Not read here: the map cannot fail on any row (``_expr.clamped`` moves the bounds into the
        # column's type first; the drop conditions are NULL and NaN tests), and index_units reads it whole.
        self._tables[table] = _Snapshot(frame, info, next(self._counter), snapshot.persisted)
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
        """Replace the snapshot by one indexed on ``unit_column`` (the portable unit index of ``_portable``).

        ``sums`` and ``group_columns`` are not stored here (``Engine.index_units`` allows that): Spark
        clips per release and windows every group cap.

        One shuffle by unit and one ordered window, persisted: a one-time steward cost that makes
        every later ``bounded_rows`` on this unit column (without filters or a group cap) a filter.
        """
        self._check_open()
        snapshot = self._table(table)
        unit = _checks.require(snapshot.info, unit_column)
        secret = _checks.secret(key, "index key")
        _portable.require_text_column(unit, "privacy unit")
        frame = _bound.indexed(
            snapshot.frame,
            snapshot.info,
            unit=unit,
            index_key=_portable.text_key(secret, "index"),
            unit_key=_portable.text_key(secret, "unit"),
        )
        self._replace(table, snapshot, frame, index_unit=unit_column)

    def _replace(self, table: str, snapshot: _Snapshot, frame: DataFrame, *, index_unit: str | None) -> None:
        persisted = frame.persist(self._storage_level)
        try:
            self._run(persisted.count)
        except BaseException:
            _unpersist(persisted)
            raise
        _unpersist(snapshot.persisted)
        self._tables[table] = _Snapshot(persisted, snapshot.info, next(self._counter), persisted, index_unit)

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
        """Keep at most C rows (and G groups) per unit by the portable rules (``_portable``).

        On a snapshot indexed on ``unit_column``, without ``where`` and ``max_groups_per_unit``, the
        view is the rotation filter (no shuffle); otherwise one shuffle by unit and keyed windows.
        Either way the view is a query, computed when read: the executor reads each view once (one
        ``group_aggregates`` holding all its statistics, or one ``collect``), so caching it would
        cost a write for nothing; ``order_statistics_window`` caches the one column it reads often.
        """
        self._check_open()
        snapshot = self._table(table)
        info = snapshot.info
        unit = _checks.require(info, unit_column)
        max_rows = _checks.positive_int(max_rows_per_unit, "max_rows_per_unit")
        groups = _checks.group_columns(info, group_column)
        if max_groups_per_unit is not None:
            _checks.positive_int(max_groups_per_unit, "max_groups_per_unit")
            if not groups:
                raise UsageError(
                    "max_groups_per_unit needs the group column", max_groups_per_unit, "pass group_column as well"
                )
            for group in groups:
                _portable.require_text_column(group, "capped group")
        filters = _checks.predicates(info, where)
        _checks.secret(salt, "salt")
        _portable.require_text_column(unit, "privacy unit")
        name = f"{_VIEW_PREFIX}{next(self._counter)}"
        if snapshot.index_unit == unit_column and not filters and max_groups_per_unit is None:
            frame = _bound.rotated(snapshot.frame, info, max_rows=max_rows, keys=_portable.rotation_keys(salt))
            self._views[name] = _View(frame, table, snapshot.version)
        else:
            frame = _bound.windowed(
                _bound.filtered(snapshot.frame, info, unit, filters),
                info,
                unit=unit,
                max_rows=max_rows,
                row_key=_portable.text_key(salt, "rows"),
                groups=groups if max_groups_per_unit is not None else (),
                max_groups=max_groups_per_unit,
                group_key=_portable.text_key(salt, "groups") if max_groups_per_unit is not None else None,
            )
            self._views[name] = _View(frame, table, snapshot.version)
        return BoundedView(name, table, info, unit_column, max_rows, group_column, max_groups_per_unit, filters)

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
        frame = self._check_view(view)
        aggs = _checks.aggregates(view.schema, list(aggregates))
        kinds = {c.name: c.kind for c in view.schema.columns}
        groups = _checks.group_columns(view.schema, group_column)
        key_list: list[Any] | None = None
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
                key_list = list(keys)
                if not key_list:
                    return []
                types = {f.name: f.dataType for f in frame.schema.fields}
                parts = _checks.key_parts(groups, key_list)
                for column, part in zip(groups, parts, strict=True):
                    _expr.check_keys(part, column, types[column.name], distinct=len(groups) == 1)
        planned = _aggregate.Aggregation(aggs, view.unit_column, kinds)
        names = [g.name for g in groups]
        return planned.run(frame, names, key_list, key_condition=self._key_conditions.get, run=self._run)

    def order_statistics_window(
        self, view: BoundedView, *, column: str, low: float, high: float, rank: int, width: int
    ) -> OrderStatisticsWindow:
        """Clipped order statistics x_(rank-width) .. x_(rank+width), padded with low / high, by distributed selection.

        Missing values (NULL, NaN) are left out. The count is never returned; only the 2 * width + 1
        values come back to the driver (``_select``).
        """
        frame = self._check_view(view)
        info = _checks.require_numeric(view.schema, column)
        bounds = Clip(column, low, high)
        if not integer_in(rank):
            raise UsageError("rank must be an integer (1-based)", rank, "pass an int")
        if not integer_in(width, 0):
            raise UsageError("width must be a non-negative integer", width, "pass an int >= 0")
        values = frame.where(~_expr.is_missing(info)).select(
            _expr.clipped_value(column, bounds.low, bounds.high).alias("__dps_v")
        )
        first, last = rank - width, rank + width
        cached = values.persist(self._storage_level)  # read several times by the selection
        try:
            found = _select.order_statistics(cached, first=first, last=last, run=self._run)
        finally:
            _unpersist(cached)
        ranks = np.arange(first, last + 1, dtype=np.int64)
        padded = [found.get(int(i), bounds.low if i <= 0 else bounds.high) for i in ranks]
        return OrderStatisticsWindow(ranks, np.array(padded, dtype=np.float64))

    def collect(
        self, view: BoundedView, *, columns: Sequence[str], max_rows: int | None = None
    ) -> dict[str, NDArray[Any]]:
        """The view's rows on ``columns`` as numpy arrays, sorted by those columns; rows with NULLs left out.

        ``max_rows`` (or the engine's ``collect_limit``) is a public bound on the rows: at most
        ``max_rows + 1`` rows reach the driver, and a view holding more raises ``CollectLimitExceeded``, a
        failure that depends on the data (the release layer charges it). Without either bound the
        call is refused before any data is read.
        """
        frame = self._check_view(view)
        cols = list(columns)
        if not cols or isinstance(columns, str):
            raise UsageError("columns must be a non-empty list of names", columns, "pass e.g. ['x', 'y']")
        infos = [_checks.require(view.schema, c) for c in cols]
        limit = self._collect_limit if max_rows is None else _checks.positive_int(max_rows, "max_rows")
        if limit is None:
            raise UsageError(
                "collecting rows from Spark needs a public bound on their number",
                "max_rows=None",
                "pass max_rows (derived from public facts), or open SparkEngine(..., collect_limit=...)",
            )
        present: Column = sf.lit(True)
        for c in cols:
            present = present & col(c).isNotNull()
        selected = frame.select(*[col(c) for c in cols]).where(present).limit(limit + 1)
        table = self._run(selected.toArrow)
        if table.num_rows > limit:
            raise CollectLimitExceeded(limit)
        # At most ``limit`` rows are here already: sorting them here (Arrow orders NaN above every
        # number, as DuckDB does) is cheaper than a distributed sort of a few rows.
        ordered = table.sort_by([(c, "ascending") for c in cols])
        return {info.name: _source.numpy_column(ordered.column(info.name), info.kind) for info in infos}

    # -- helpers -------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("the engine is closed", "closed engine", "open a new SparkEngine")

    def _table(self, name: str) -> _Snapshot:
        found = self._tables.get(name)
        if found is None:
            raise UnknownTable(name)
        return found

    def _check_view(self, view: BoundedView) -> DataFrame:
        """The frame of a live view whose snapshot is still the table's current one."""
        self._check_open()
        if not isinstance(view, BoundedView):
            raise UsageError(
                "aggregates run on a BoundedView", type(view).__name__, "call engine.bounded_rows(...) first"
            )
        found = self._views.get(view.name)
        if found is None:
            raise UnknownTable(view.name, "the view was dropped or belongs to another engine; call bounded_rows again")
        current = self._tables.get(found.table)
        if current is None or current.version != found.version:
            raise UnknownTable(
                view.name, "the table was forgotten or its snapshot replaced since the view was made; bound again"
            )
        return found.frame

    def _one_row(self, frame: DataFrame) -> tuple[Any, ...]:
        rows = self._run(frame.collect)
        if len(rows) != 1:
            raise InternalError(f"a single-row step returned {'no' if not rows else 'several'} rows")
        return tuple(rows[0])

    @staticmethod
    def _run(action: Callable[[], _R], file: str | None = None) -> _R:
        """Run a Spark action; its errors (whose messages can quote data) become errors without the message."""
        try:
            with warnings.catch_warnings():
                # PySpark leaves its result sockets to the garbage collector by design, which warns.
                warnings.simplefilter("ignore", ResourceWarning)
                return action()
        except DPSenseError:
            raise
        except Exception as exc:  # py4j and pyspark raise many types; none may leak its text
            if file is not None:
                raise InvalidData("the file could not be read as a table", file, "check its format") from None
            raise InternalError(f"Spark failed a planned step ({type(exc).__name__})") from None


def _unpersist(frame: DataFrame | None) -> None:
    if frame is not None:
        with contextlib.suppress(Exception):  # cleanup goes on: a stopped session holds nothing to free
            frame.unpersist(blocking=True)
