"""dpsense: differentially private statistics with the least noise that is still provably safe.

Layers (imports point down only): ``core`` and ``noise`` (L0); ``mechanisms``, ``sensitivity`` and
``accounting`` (L1); ``engine`` and ``ledger`` (L2); ``query`` (L3); ``release`` (L4); ``cli`` (L5).
See docs/ and the README for the guarantees each part states.

The release API is imported lazily (``dpsense.Session`` loads DuckDB and pandas on first use), and
type checkers see the real classes and constructors (the ``TYPE_CHECKING`` imports below)::

    import dpsense as dp
    session = dp.Session.open("sqlite:///dpsense.db", analyst="alice")

Every error dpsense raises on purpose is a ``DPSenseError``; the ones a user meets are exported here
(``dp.BudgetExhausted``, ``dp.ChargedFailure``, ``dp.UsageError``, ...).
"""

from typing import TYPE_CHECKING, Any

from dpsense._version import __version__ as __version__
from dpsense.core import ZCDP as ZCDP
from dpsense.core import Adjacency as Adjacency
from dpsense.core import ApproxDP as ApproxDP
from dpsense.core import PrivacyUnit as PrivacyUnit
from dpsense.core import PureDP as PureDP
from dpsense.core.errors import BudgetExhausted as BudgetExhausted
from dpsense.core.errors import ChargedFailure as ChargedFailure
from dpsense.core.errors import DPSenseError as DPSenseError
from dpsense.core.errors import InternalError as InternalError
from dpsense.core.errors import InvalidBounds as InvalidBounds
from dpsense.core.errors import InvalidData as InvalidData
from dpsense.core.errors import InvalidPrivacyParameter as InvalidPrivacyParameter
from dpsense.core.errors import InvalidSensitivity as InvalidSensitivity
from dpsense.core.errors import LedgerBusy as LedgerBusy
from dpsense.core.errors import LedgerStateError as LedgerStateError
from dpsense.core.errors import LedgerUnreadable as LedgerUnreadable
from dpsense.core.errors import RegistrationConflict as RegistrationConflict
from dpsense.core.errors import RequestIdConflict as RequestIdConflict
from dpsense.core.errors import SnapshotNotCurrent as SnapshotNotCurrent
from dpsense.core.errors import UnknownAnalyst as UnknownAnalyst
from dpsense.core.errors import UnknownDataset as UnknownDataset
from dpsense.core.errors import UnsupportedRequest as UnsupportedRequest
from dpsense.core.errors import UsageError as UsageError

if TYPE_CHECKING:  # the real types for mypy and IDEs; at run time they load on first use (``__getattr__``)
    from dpsense.query import (
        Aggregate as Aggregate,
    )
    from dpsense.query import (
        Query as Query,
    )
    from dpsense.query import (
        approx_bounds as approx_bounds,
    )
    from dpsense.query import (
        clipped_count as clipped_count,
    )
    from dpsense.query import (
        count as count,
    )
    from dpsense.query import (
        count_units as count_units,
    )
    from dpsense.query import (
        hierarchical_count as hierarchical_count,
    )
    from dpsense.query import (
        histogram as histogram,
    )
    from dpsense.query import (
        max as max,
    )
    from dpsense.query import (
        mean as mean,
    )
    from dpsense.query import (
        median as median,
    )
    from dpsense.query import (
        min as min,
    )
    from dpsense.query import (
        min_distance as min_distance,
    )
    from dpsense.query import (
        quantile as quantile,
    )
    from dpsense.query import (
        quantiles as quantiles,
    )
    from dpsense.query import (
        sum as sum,
    )
    from dpsense.query import (
        triangle_count as triangle_count,
    )
    from dpsense.query import (
        trimmed_mean as trimmed_mean,
    )
    from dpsense.query import (
        variance as variance,
    )
    from dpsense.release import Budget as Budget
    from dpsense.release import Dataset as Dataset
    from dpsense.release import PrivacyPolicy as PrivacyPolicy
    from dpsense.release import Release as Release
    from dpsense.release import Session as Session

_RELEASE = ("Budget", "Dataset", "PrivacyPolicy", "Release", "Session")
_QUERY = (
    "Aggregate",
    "Query",
    "approx_bounds",
    "clipped_count",
    "count",
    "count_units",
    "hierarchical_count",
    "histogram",
    "max",
    "mean",
    "median",
    "min",
    "min_distance",
    "quantile",
    "quantiles",
    "sum",
    "triangle_count",
    "trimmed_mean",
    "variance",
)
_ERRORS = (
    "BudgetExhausted",
    "ChargedFailure",
    "DPSenseError",
    "InternalError",
    "InvalidBounds",
    "InvalidData",
    "InvalidPrivacyParameter",
    "InvalidSensitivity",
    "LedgerBusy",
    "LedgerStateError",
    "LedgerUnreadable",
    "RegistrationConflict",
    "RequestIdConflict",
    "SnapshotNotCurrent",
    "UnknownAnalyst",
    "UnknownDataset",
    "UnsupportedRequest",
    "UsageError",
)

__all__ = [
    "ZCDP",
    "Adjacency",
    "ApproxDP",
    "PrivacyUnit",
    "PureDP",
    "__version__",
    *_ERRORS,
    *_RELEASE,
    *_QUERY,
]


def __getattr__(name: str) -> Any:
    if name in _RELEASE:
        from dpsense import release

        return getattr(release, name)
    if name in _QUERY:
        from dpsense import query

        return getattr(query, name)
    raise AttributeError(f"module 'dpsense' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
