"""The statistics dpsense releases: one module each, and this registry (one entry per statistic).

Each module states a statistic's planner rule: the mechanisms an analyst may name and the default,
the parts it is released in, its contribution bound and its global sensitivity per adjacency x
grouping (``_base.Statistic``), and its declarative spelling (``fields``, ``from_fields``: the YAML
spec and the HTTP body). Adding a statistic: its module, its tests, an entry below (and its
``AggregateKind`` and constructor in ``query._aggregates``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._mechanisms import Mechanism
from dpsense.query._rules import Facts
from dpsense.query.planner import plan as plan_with_rules
from dpsense.statistics._base import Fields, Statistic
from dpsense.statistics.approx_bounds import ApproxBounds
from dpsense.statistics.clipped_count import ClippedCount
from dpsense.statistics.count import Count
from dpsense.statistics.count_units import CountUnits
from dpsense.statistics.hierarchical_count import HierarchicalCount
from dpsense.statistics.histogram import Histogram
from dpsense.statistics.mean import Mean
from dpsense.statistics.min_distance import MinDistance
from dpsense.statistics.quantile import Median, Quantile
from dpsense.statistics.quantiles import Quantiles
from dpsense.statistics.sum import Sum
from dpsense.statistics.triangle_count import TriangleCount
from dpsense.statistics.trimmed_mean import TrimmedMean
from dpsense.statistics.variance import Variance

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
        Quantiles(),
        TrimmedMean(),
        MinDistance(),
        TriangleCount(),
        ApproxBounds(),
        HierarchicalCount(),
    )
}

#: The mechanisms an analyst may name per statistic (a view of the registry).
ALLOWED_MECHANISMS: dict[AggregateKind, tuple[Mechanism, ...]] = {k: s.mechanisms for k, s in STATISTICS.items()}


#: Per statistic, its declarative spelling: (fields it accepts, fields it requires) (a view of the registry).
AGGREGATE_FIELDS: dict[AggregateKind, Fields] = {k: s.fields for k, s in STATISTICS.items()}


def statistic(kind: AggregateKind) -> Statistic:
    """The registered statistic of ``kind``."""
    return STATISTICS[kind]


def aggregate_from_fields(kind: AggregateKind, fields: Mapping[str, Any]) -> Aggregate:
    """The aggregate of ``kind`` from its declarative fields (absent ones ``None``): its module's ``from_fields``.

    The caller has checked the field names against ``AGGREGATE_FIELDS`` (required ones present, no
    others); the constructors check the values.
    """
    return STATISTICS[kind].from_fields({k: v for k, v in fields.items() if v is not None})


#: ``dpsense.query.plan`` with every registered statistic's rule (what the Session plans with).
plan = partial(plan_with_rules, rules=STATISTICS)


__all__ = [
    "AGGREGATE_FIELDS",
    "ALLOWED_MECHANISMS",
    "STATISTICS",
    "Facts",
    "Statistic",
    "aggregate_from_fields",
    "plan",
    "statistic",
]
