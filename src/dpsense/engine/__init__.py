"""Layer 2: the engine seam, the few relational steps a release runs on private data.

``Engine`` is the typed protocol, both of its sides: ``StewardEngine`` (the steps that load and
prepare a snapshot, at registration and when a Session attaches it) and ``ReleaseEngine`` (the steps a
release runs on it). ``DuckDBEngine`` is the reference implementation (in-process DuckDB, ``pip install
dpsense[duckdb]``, in ``engine/duckdb``); ``SparkEngine`` runs the same steps on Apache Spark (``pip
install dpsense[spark]``, in ``engine/spark``); the SQL text is in ``engine/sql``. Both can follow
the portable rules (``DuckDBEngine(portable=True)``; Spark always), under which the same data, salt
and request keep the same rows on either engine.

Steps: ``register`` a source (public schema back, never counts); for the steward at registration
``fingerprint`` (keyed, order-independent, the same on every engine), ``data_quality`` (NULL, NaN
and infinity counts) and ``apply_policies`` (drop or clamp bad values into a new snapshot);
``index_units`` (a one-time per-unit index, so that bounding needs no window); ``bounded_rows``
(public ``predicate`` filters first, then at most C rows and G groups per privacy unit, chosen by a
secret-salted keyed hash), ``group_aggregates`` (counts of rows, units and present values, and exact
fixed-point clipped sums over public keys), ``order_statistics_window`` (clipped, padded order
statistics around a rank) and ``collect`` (points or edges as numpy arrays, at most a public
``max_rows``; more is ``CollectLimitExceeded``, a charged failure). Temporary relations go away with
``drop``, ``release_scope()`` or ``close``; ``forget`` unregisters a table.

The engine imports no DP math (docs/design.md, layers): it never adds noise; its outputs are unnoised and
stay in the process until ``dpsense.mechanisms`` has run on them. The only randomness it uses is the
caller's salt (``dpsense.noise.entropy.random_bytes``), which it never logs, stores or returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpsense.engine._checks import group_keys as check_group_keys
from dpsense.engine._checks import predicates as check_predicates
from dpsense.engine._errors import CollectLimitExceeded, UnknownColumn, UnknownTable
from dpsense.engine._protocol import Engine, ReleaseEngine, SnapshotFiles, StewardEngine
from dpsense.engine._types import (
    Aggregate,
    BoundedView,
    CenteredSquares,
    Clip,
    ClippedSum,
    ColumnInfo,
    ColumnQuality,
    CountOutside,
    CountPresent,
    CountRows,
    CountUnits,
    FixedPointSum,
    GroupColumns,
    GroupRow,
    OrderStatisticsWindow,
    Predicate,
    TableInfo,
    centered_squares,
    clip,
    clipped_sum,
    count_outside,
    count_present,
    count_rows,
    count_units,
    predicate,
)

if TYPE_CHECKING:
    from dpsense.engine.duckdb._engine import DuckDBEngine, SharedTable
    from dpsense.engine.spark._engine import SparkEngine

__all__ = [
    "Aggregate",
    "BoundedView",
    "CenteredSquares",
    "Clip",
    "ClippedSum",
    "CollectLimitExceeded",
    "ColumnInfo",
    "ColumnQuality",
    "CountOutside",
    "CountPresent",
    "CountRows",
    "CountUnits",
    "DuckDBEngine",
    "Engine",
    "FixedPointSum",
    "GroupColumns",
    "GroupRow",
    "OrderStatisticsWindow",
    "Predicate",
    "ReleaseEngine",
    "SharedTable",
    "SnapshotFiles",
    "SparkEngine",
    "StewardEngine",
    "TableInfo",
    "UnknownColumn",
    "UnknownTable",
    "centered_squares",
    "check_group_keys",
    "check_predicates",
    "clip",
    "clipped_sum",
    "count_outside",
    "count_present",
    "count_rows",
    "count_units",
    "predicate",
]


def __getattr__(name: str) -> object:
    # DuckDB is an optional extra: import it only when DuckDBEngine is asked for.
    if name in ("DuckDBEngine", "SharedTable"):
        try:
            from dpsense.engine.duckdb import _engine
        except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(f"{name} needs DuckDB: pip install 'dpsense[duckdb]'") from exc
        return getattr(_engine, name)
    if name == "SparkEngine":
        # Spark is an optional extra too: pyspark (and a Java runtime) only when SparkEngine is asked for.
        try:
            from dpsense.engine.spark._engine import SparkEngine
        except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError("SparkEngine needs pyspark: pip install 'dpsense[spark]'") from exc
        return SparkEngine
    raise AttributeError(f"module 'dpsense.engine' has no attribute {name!r}")
