"""The engine seam: the few relational steps a release runs on private data.

Every engine implements all of it (a backend that raises NotImplementedError for part of the seam is
not a backend); ``tests/conformance`` runs one suite over every engine. The engine knows no DP math:
it bounds contributions, clips, aggregates exactly, and hands small results back to numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from dpsense.engine._types import (
    NO_CLAMP,
    Aggregate,
    BoundedView,
    ColumnQuality,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
)


@runtime_checkable
class Engine(Protocol):
    """A data engine behind dpsense (DuckDB embedded; Spark later).

    Rules every implementation keeps:
    - deterministic: the only randomness is the caller's secret ``salt`` (never logged, stored in a
      view definition, or returned);
    - errors are ``UsageError`` subclasses judged from the public schema and never contain data values;
    - temporary relations are removed by ``drop``, at the end of ``release_scope()`` and by ``close``.
    """

    def register(self, name: str, source: object) -> TableInfo:
        """Register ``source`` (pandas/pyarrow table, CSV or Parquet path, engine table name) as ``name``."""
        ...

    def table_info(self, name: str) -> TableInfo:
        """The public schema of a registered table."""
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
        Returns the (unchanged) public schema.
        """
        ...

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
        """A temporary view with at most ``max_rows_per_unit`` rows (and groups) per privacy unit.

        Rows failing any public filter in ``where`` (all must hold; a NULL, or a NaN in a float
        column, fails every predicate) and rows whose unit is NULL are removed first; the bound then
        applies to the remaining rows. Each unit keeps a uniformly random subset given a fresh
        secret salt: rows are ordered within the unit by a keyed hash of (salt, row content, copy
        number among identical rows), so identical rows are interchangeable and the choice does not
        depend on physical row order. With ``max_groups_per_unit`` each unit first keeps that many
        of its distinct ``group_column`` values, chosen the same way.
        """
        ...

    def group_aggregates(
        self,
        view: BoundedView,
        *,
        group_column: str | None,
        keys: Sequence[Any] | None,
        aggregates: Sequence[Aggregate],
    ) -> list[GroupRow]:
        """Aggregates per group; public ``keys`` always appear (in the given order), other keys never."""
        ...

    def order_statistics_window(
        self, view: BoundedView, *, column: str, low: float, high: float, rank: int, width: int
    ) -> OrderStatisticsWindow:
        """Clipped order statistics of ranks ``rank - width .. rank + width``, padded with low / high."""
        ...

    def collect(self, view: BoundedView, *, columns: Sequence[str]) -> dict[str, NDArray[Any]]:
        """The view's rows restricted to ``columns`` (rows with a NULL there left out), in sorted order."""
        ...

    def drop(self, view: BoundedView) -> None:
        """Remove a temporary view now."""
        ...

    def release_scope(self) -> AbstractContextManager[None]:
        """A context in which every temporary view created is removed on exit, even on error."""
        ...

    def temporary_names(self) -> list[str]:
        """Names of the temporary relations that currently exist in the engine (for hygiene checks)."""
        ...

    def close(self) -> None:
        """Drop every temporary relation and registered copy; release the engine's resources."""
        ...
