"""The statistics the planner knows: one module each, and this registry (one entry per statistic).

Each module states a statistic's planner rule: the mechanisms an analyst may name and the default,
the parts it is released in, its contribution bound and its global sensitivity per adjacency x
grouping (``_base.Statistic``). Adding a statistic: its module, its tests, an entry below (and its
``AggregateKind`` and constructor in ``query._aggregates``).
"""

from __future__ import annotations

from dpsense.query._aggregates import AggregateKind
from dpsense.query._mechanisms import Mechanism
from dpsense.query.statistics._base import Facts, Statistic, choose
from dpsense.query.statistics.approx_bounds import ApproxBounds
from dpsense.query.statistics.clipped_count import ClippedCount
from dpsense.query.statistics.count import Count
from dpsense.query.statistics.count_units import CountUnits
from dpsense.query.statistics.histogram import Histogram
from dpsense.query.statistics.mean import Mean
from dpsense.query.statistics.min_distance import MinDistance
from dpsense.query.statistics.quantile import Median, Quantile
from dpsense.query.statistics.sum import Sum
from dpsense.query.statistics.triangle_count import TriangleCount
from dpsense.query.statistics.trimmed_mean import TrimmedMean
from dpsense.query.statistics.variance import Variance

#: Every statistic, by kind.
STATISTICS: dict[AggregateKind, Statistic] = {
    s.kind: s
    for s in (
        Count(),
        CountUnits(),
        ClippedCount(),
        Histogram(),
        Sum(),
        Mean(),
        Variance(),
        Median(),
        Quantile(),
        TrimmedMean(),
        MinDistance(),
        TriangleCount(),
        ApproxBounds(),
    )
}

#: The mechanisms an analyst may name per statistic (a view of the registry).
ALLOWED_MECHANISMS: dict[AggregateKind, tuple[Mechanism, ...]] = {k: s.mechanisms for k, s in STATISTICS.items()}


def statistic(kind: AggregateKind) -> Statistic:
    """The registered statistic of ``kind``."""
    return STATISTICS[kind]


__all__ = ["ALLOWED_MECHANISMS", "STATISTICS", "Facts", "Statistic", "choose", "statistic"]
