"""dpsense: differentially private statistics with the least noise that is still provably safe.

Layers (imports point down only): ``core`` and ``noise`` (L0); ``mechanisms``, ``sensitivity`` and
``accounting`` (L1); ``engine`` and ``ledger`` (L2); ``query`` (L3); ``release`` (L4); ``cli`` (L5).
See docs/ and the README for the guarantees each part states.

The release API is imported lazily (``dpsense.Session`` loads DuckDB and pandas on first use)::

    import dpsense as dp
    session = dp.Session.open("sqlite:///dpsense.db", analyst="alice")
"""

from typing import Any

from dpsense._version import __version__
from dpsense.core import ZCDP, Adjacency, ApproxDP, DPSenseError, PrivacyUnit, PureDP

_RELEASE = ("Budget", "Dataset", "PrivacyPolicy", "Release", "Session")
_QUERY = (
    "Query",
    "approx_bounds",
    "clipped_count",
    "count",
    "count_units",
    "histogram",
    "mean",
    "median",
    "min_distance",
    "quantile",
    "sum",
    "triangle_count",
    "trimmed_mean",
    "variance",
)

__all__ = [
    "ZCDP",
    "Adjacency",
    "ApproxDP",
    "DPSenseError",
    "PrivacyUnit",
    "PureDP",
    "__version__",
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
