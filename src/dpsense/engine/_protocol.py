"""The engine seam: the few relational steps a release runs on private data.

Every engine implements all of it (a backend that raises NotImplementedError for part of the seam is
not a backend); ``tests/conformance`` runs one suite over every engine. The engine knows no DP math:
it bounds contributions, clips, aggregates exactly, and hands small results back to numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from numpy.typing import NDArray

from dpsense.engine._types import Aggregate, BoundedView, GroupRow, OrderStatisticsWindow, TableInfo


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

    def bounded_rows(
        self,
        table: str,
        *,
        unit_column: str,
        max_rows_per_unit: int,
        salt: bytes,
        group_column: str | None = None,
        max_groups_per_unit: int | None = None,
    ) -> BoundedView:
        """A temporary view with at most ``max_rows_per_unit`` rows (and groups) per privacy unit.

        Each unit keeps a uniformly random subset given a fresh secret salt: rows are ordered within
        the unit by a keyed hash of (salt, row identity). Rows whose unit is NULL are dropped.
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
