"""Layer 4: the release system. ``Session`` joins the planner, the engine and the ledger.

``Session.open(url, analyst=...)`` -> ``register_dataset`` (steward) or ``dataset(name)`` ->
``release(query, epsilon=..., delta=...)`` -> ``Release`` (noisy table, public accuracy, explain
report, the stored record). Every release is planned from public facts, charged atomically before the
data is read, checked (realised loss == charge) and stored; the same request again returns the
stored answer at no cost.
"""

from dpsense.release._datasets import Dataset
from dpsense.release._policy import DELTA_POPULATION_FACTOR, Budget, PrivacyPolicy
from dpsense.release._release import Release
from dpsense.release._session import MECHANISM_VERSION, Session
from dpsense.release._shared import SharedSnapshots
from dpsense.release._sql import SqlRelease

__all__ = [
    "DELTA_POPULATION_FACTOR",
    "MECHANISM_VERSION",
    "Budget",
    "Dataset",
    "PrivacyPolicy",
    "Release",
    "Session",
    "SharedSnapshots",
    "SqlRelease",
]
