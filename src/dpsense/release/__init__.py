"""Layer 4: the release system. ``Session`` joins the planner, the engine and the ledger.

``Session.open(url, analyst=...)`` -> ``register_dataset`` (steward) or ``dataset(name)`` ->
``release(query, epsilon=..., delta=...)`` -> ``Release`` (noisy table, public accuracy, explain
report, the stored record). Every release is planned from public facts, charged atomically before the
data is read, checked (realised loss == charge) and stored; the same request again returns the
stored answer at no cost.

The names below are imported lazily (PEP 562 ``__getattr__``): ``import dpsense.release._progress``
or ``from dpsense.release import Budget`` does not load pandas and DuckDB, which the release modules
need, until a name that needs them is used. Type checkers see the real classes (the ``TYPE_CHECKING``
imports).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy and IDEs; at run time they load on first use (``__getattr__``)
    from dpsense.release._datasets import Dataset as Dataset
    from dpsense.release._forecast import ExpectedError as ExpectedError
    from dpsense.release._forecast import Forecast as Forecast
    from dpsense.release._policy import DELTA_POPULATION_FACTOR as DELTA_POPULATION_FACTOR
    from dpsense.release._policy import Budget as Budget
    from dpsense.release._policy import PrivacyPolicy as PrivacyPolicy
    from dpsense.release._release import Release as Release
    from dpsense.release._session import MECHANISM_VERSION as MECHANISM_VERSION
    from dpsense.release._session import Session as Session
    from dpsense.release._shared import SharedSnapshots as SharedSnapshots
    from dpsense.release._sql import SqlRelease as SqlRelease

#: Where each public name lives.
_HOMES = {
    "DELTA_POPULATION_FACTOR": "dpsense.release._policy",
    "MECHANISM_VERSION": "dpsense.release._session",
    "Budget": "dpsense.release._policy",
    "Dataset": "dpsense.release._datasets",
    "ExpectedError": "dpsense.release._forecast",
    "Forecast": "dpsense.release._forecast",
    "PrivacyPolicy": "dpsense.release._policy",
    "Release": "dpsense.release._release",
    "Session": "dpsense.release._session",
    "SharedSnapshots": "dpsense.release._shared",
    "SqlRelease": "dpsense.release._sql",
}

__all__ = [
    "DELTA_POPULATION_FACTOR",
    "MECHANISM_VERSION",
    "Budget",
    "Dataset",
    "ExpectedError",
    "Forecast",
    "PrivacyPolicy",
    "Release",
    "Session",
    "SharedSnapshots",
    "SqlRelease",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dpsense.release' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
