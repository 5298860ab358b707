"""The engine seam: the few relational steps a release runs on private data.

Every engine implements all of it (a backend that raises NotImplementedError for part of the seam is
not a backend); ``tests/conformance`` runs one suite over every engine. The engine knows no DP math:
it bounds contributions, clips, aggregates exactly, and hands small results back to numpy.

The seam has two sides: ``StewardEngine``, the steps that load and prepare a snapshot (registration,
and a Session attaching a registered snapshot), and ``ReleaseEngine``, the steps a release runs on a
prepared snapshot. ``Engine`` is both; code that needs only one side is typed with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from dpsense.engine._types import (
    NO_CLAMP,
    Aggregate,
    BoundedView,
    ClippedSum,
    ColumnQuality,
    GroupColumns,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
)


@runtime_checkable
class StewardEngine(Protocol):
    """The steps that load and prepare a snapshot: the steward's at registration, a Session's at attach.

    ``register`` a source (its public schema back), check it (``fingerprint``, ``data_quality``,
    ``unit_count``: each reads every row and says who may see its output), apply the steward's
    policies (``apply_policies``) and index it on its privacy unit (``index_units``); ``forget``
    unregisters it.
    """

    def register(self, name: str, source: object) -> TableInfo:
        """Register ``source`` (pandas/pyarrow table, CSV or Parquet path, engine table name) as ``name``."""
        ...

    def forget(self, table: str) -> None:
        """Unregister ``table`` and drop the engine's copy of it (a table registered by name stays).

        Forgetting a name that is not registered does nothing, so cleanup paths may call it freely.
        """
        ...

    def fingerprint(self, table: str, key: bytes) -> str:
        """A keyed, order-independent fingerprint (hex) of the registered snapshot ``table``.

        Equal multisets of rows under an equal schema (column names and kinds, in table order) give
        equal fingerprints whatever the row order; changing a value, adding, removing or duplicating
        a row changes it (but for a negligible chance). Without the secret ``key`` (>= 16 bytes, else
        ``UsageError``) nothing about the content can be learnt from it. The row count is never
        returned or logged. Steward-only: it reads every row.
        """
        ...

    def data_quality(self, table: str, columns: Sequence[str]) -> dict[str, ColumnQuality]:
        """Per column the number of NULLs, NaNs and infinities (the last two only in float columns).

        Steward-only: these are unnoised counts of private data, for the registration report.
        """
        ...

    def unit_count(self, table: str, *, unit_column: str) -> int:
        """The number of distinct non-NULL values of ``unit_column`` in the snapshot ``table``.

        Steward-only, at registration: an unnoised count of private data, compared there with the
        policy's declared population and never returned to an analyst or logged.
        """
        ...

    def apply_policies(
        self,
        table: str,
        *,
        drop_missing: Sequence[str] = (),
        drop_nonfinite: Sequence[str] = (),
        clamp: Mapping[str, tuple[float, float]] = NO_CLAMP,
    ) -> TableInfo:
        """Replace the snapshot of ``table`` by one with the steward's per-column policies applied.

        Rows with NULL in a ``drop_missing`` column are removed; rows with NaN or an infinity in a
        ``drop_nonfinite`` column are removed (a no-op for non-float columns); ``clamp`` columns have
        infinities and finite values outside [low, high] clamped into the bounds (NaN and NULL stay
        missing; integer, decimal and FLOAT columns are clamped to the bounds rounded inwards to
        their type). Column names and types are preserved; the previous engine-owned copy is
        dropped and a table the engine did not create (registered by name) is never modified.
        Returns the (unchanged) public schema. A unit index (``index_units``) is dropped: the new
        snapshot holds the public columns only, so call ``index_units`` again after the policies.
        """
        ...

    def index_units(
        self,
        table: str,
        *,
        unit_column: str,
        key: bytes,
        sums: Sequence[ClippedSum] = (),
        group_columns: Sequence[str] = (),
    ) -> None:
        """Index ``table`` on ``unit_column`` so that later ``bounded_rows`` on it need no window.

        ``group_columns``: columns whose number of distinct values per unit (NULL counted as a value)
        the engine may store per row, so that a ``bounded_rows`` capping groups on them keeps the units
        that touch few enough groups with no window (the others are windowed as before); an engine may
        ignore them (Spark and portable DuckDB do).

        ``sums``: clipped sums the engine may store per row as integer grid units (hidden columns), so
        that a ``group_aggregates`` of an equal ``ClippedSum`` (same column, bounds and grid) on an
        indexed view adds stored integers instead of clipping and rounding each row again. The result
        is the same exact sum either way; an engine may ignore them (Spark and portable DuckDB do).

        Replaces the snapshot by one holding, per row, hidden columns (names starting with
        ``__dps_``, never in ``table_info``, ``collect``, ``fingerprint`` or ``data_quality``): the
        row's position 0..n_u-1 within its unit in the order of a keyed hash under the secret ``key``
        (>= 16 bytes, else ``UsageError``; identical rows get distinct positions, so the positions
        are a permutation, and the order does not depend on the physical row order) and n_u, the
        unit's number of rows. Rows whose unit is NULL are kept as they are (``bounded_rows`` drops
        them). The snapshot is stored ordered by unit. Steward-only, a one-time cost at registration:
        it reads and rewrites every row. The engine remembers the unit column per table; indexing
        again (on any column) replaces the index, and ``apply_policies`` drops it.
        """
        ...


@runtime_checkable
class ReleaseEngine(Protocol):
    """The steps a release runs on a prepared snapshot: bound, aggregate, select, collect, clean up."""

    def table_info(self, name: str) -> TableInfo:
        """The public schema of a registered table."""
        ...

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
        """A temporary view with at most ``max_rows_per_unit`` rows (and groups) per privacy unit.

        Rows failing any public filter in ``where`` (all must hold; a NULL, or a NaN in a float
        column, fails every predicate) and rows whose unit is NULL are removed first; the bound then
        applies to the remaining rows: a unit with n_u of them keeps exactly min(C, n_u)
        (C = ``max_rows_per_unit``; with a group cap, n_u counts the rows of its kept groups), chosen
        by the secret salt and that unit's rows only, and never by physical row order. Two rules, by
        the table's state:

        - Indexed path: the table is indexed on ``unit_column`` (``index_units``), without a group
          cap on columns the index did not count. The unit's rows sit at positions 0..n_u-1 of a
          secret keyed-hash order fixed at registration. On DuckDB's own rules the unit keeps its
          first C rows of that order (its first C passing rows under ``where``): a uniformly random
          C-subset over the registration's key, the same in every release of the snapshot. On
          portable engines (no ``where``) the salt gives the unit an offset o_u, a keyed hash of
          the unit mod n_u, and the rows with ``(position - o_u) mod n_u < C`` stay: C consecutive
          positions, cyclically, each row with probability C / n_u given a fresh salt (bias below
          n_u / 2**63), but not uniform over all C-subsets.
        - Windowed path (otherwise): rows are ordered within the unit by a keyed hash of (salt, row
          content, copy number among identical rows) and the first C stay, a uniformly random
          C-subset per release; identical rows are interchangeable. With ``max_groups_per_unit``
          each unit first keeps that many of its distinct ``group_column`` values (value
          combinations, when ``group_column`` is a tuple of several columns), chosen the same way.

        Portable engines (``DuckDBEngine(portable=True)``, ``SparkEngine``) run both rules with the
        hashes of ``dpsense.engine._portable`` (SHA-256 of text both engines spell alike, 64-bit
        integer arithmetic), so the same snapshot, salt and request keep the same rows on each; their
        unit and capped group columns must be integer or string columns (else ``UnsupportedRequest``).

        Privacy does not depend on which rule runs, nor on how random it is: each unit's choice is a
        function of that unit's rows (and the secrets) alone, so adding, removing or replacing one
        unit changes the view by at most C rows, all of that unit, and the stability bound of
        contribution bounding (a row-additive statistic moves by at most C rows' contributions)
        holds for any such rule and any value of the secrets. So every release is DP given the
        registration order, and releases compose as usual although they share that order. The
        randomness only spreads which rows represent a unit, for accuracy.

        The view reads the table's current snapshot; it is valid until ``drop``, the end of the
        ``release_scope`` that made it, or a change of that snapshot (``apply_policies``,
        ``index_units``, ``forget``), after which reading it raises ``UnknownTable``.
        """
        ...

    def group_aggregates(
        self,
        view: BoundedView,
        *,
        group_column: GroupColumns | None,
        keys: Sequence[Any] | None,
        aggregates: Sequence[Aggregate],
    ) -> list[GroupRow]:
        """Aggregates per group; public ``keys`` always appear (in the given order), other keys never.

        ``group_column`` is one column or a tuple of several; with several, the groups are their value
        combinations and each key (public or returned) is a tuple of values in that column order. A
        view bounded with ``max_groups_per_unit`` may only be grouped by the grouping it capped.
        """
        ...

    def order_statistics_window(
        self, view: BoundedView, *, column: str, low: float, high: float, rank: int, width: int
    ) -> OrderStatisticsWindow:
        """Clipped order statistics of ranks ``rank - width .. rank + width``, padded with low / high."""
        ...

    def collect(
        self, view: BoundedView, *, columns: Sequence[str], max_rows: int | None = None
    ) -> dict[str, NDArray[Any]]:
        """The view's rows restricted to ``columns`` (rows with a NULL there left out), in sorted order.

        ``max_rows`` is a public bound on the number of rows (derived from public facts, e.g. the
        declared population times ``max_rows_per_unit``): at most ``max_rows + 1`` rows are read and
        a view holding more raises ``CollectLimitExceeded``. That error depends on the data, so it is
        charged (the Session turns it into ``ChargedFailure``). Without a bound, an engine whose
        driver memory needs one (Spark, unless opened with ``collect_limit``) refuses with a
        ``UsageError`` before reading anything; DuckDB reads the whole view.
        """
        ...

    @property
    def collect_limit(self) -> int | None:
        """The most rows ``collect`` may bring to the caller, or ``None`` for no limit of the engine's own.

        A public setting (the driver's memory), never derived from data: the release layer compares
        a public worst case with it before charging.
        """
        ...

    def drop(self, view: BoundedView) -> None:
        """Remove a temporary view now."""
        ...

    def release_scope(self) -> AbstractContextManager[None]:
        """A context in which every temporary view created is removed on exit, even on error."""
        ...

    def temporary_names(self) -> list[str]:
        """Names of the live temporary views and relations of the engine (for hygiene checks).

        Includes views that an engine keeps as queries in memory rather than as catalog tables.
        """
        ...

    def close(self) -> None:
        """Drop every temporary relation and registered copy; release the engine's resources."""
        ...


@runtime_checkable
class SnapshotFiles(Protocol):
    """An engine that keeps a prepared snapshot in a file and attaches it again without its source.

    ``save_snapshot`` writes the registered, policy-applied and indexed snapshot ``table`` (its hidden
    index, stored grid-unit and group-count columns included) to a new file at ``path``, complete when
    the call returns. ``load_snapshot`` registers that file read-only as ``name``, indexed on
    ``unit_column`` with the stored sums of ``sums`` and the group counts of ``group_columns``, after
    checking that its columns are exactly ``info``'s and the index's (``InvalidData`` otherwise: the
    caller attaches from the source instead). Neither reads
    a row: what makes the file the registered snapshot is the caller's keyed checksum
    (``dpsense.release._store``). ``stores_snapshots`` is False where the engine cannot (e.g. a
    portable or shared DuckDB engine), and then neither method may be called.
    """

    @property
    def stores_snapshots(self) -> bool:
        """True when ``save_snapshot`` and ``load_snapshot`` work on this engine."""
        ...

    def save_snapshot(self, table: str, path: Path) -> None:
        """Write the indexed snapshot ``table`` to a new file at ``path`` (which must not exist)."""
        ...

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
        """Register the snapshot file at ``path`` as ``name``, read-only, indexed on ``unit_column``."""
        ...


@runtime_checkable
class Engine(ReleaseEngine, StewardEngine, Protocol):
    """A data engine behind dpsense, both sides of the seam (DuckDB embedded; Spark beyond one machine).

    Rules every implementation keeps:
    - deterministic: the only randomness is the caller's secret ``salt`` (never logged, stored in a
      view definition, or returned);
    - errors are ``UsageError`` subclasses judged from the public schema and never contain data values
      (the one error that depends on the data, ``CollectLimitExceeded``, is charged by the caller);
    - temporary relations are removed by ``drop``, at the end of ``release_scope()`` and by ``close``.
    """
