"""Layer 3: the query IR. An immutable builder, checked against a public schema, yields a frozen IR.

``Query(dataset).filter(...).group_by(...).agg(name=mean("col"), ...).build(schema)`` returns a
``QueryIR`` in normal form, whose ``canonical()`` text and ``fingerprint()`` are equal for queries that
mean the same thing (reordered filters or aggregates, equivalent numeric spellings, repeated filters,
reordered ``in`` lists) and differ otherwise. Only public facts enter: the schema's declared kinds,
bounds and keys, and the literals the analyst wrote.
"""

from dpsense.query._aggregates import (
    Aggregate,
    AggregateKind,
    approx_bounds,
    clipped_count,
    count,
    count_units,
    hierarchical_count,
    histogram,
    max,
    mean,
    median,
    min,
    min_distance,
    quantile,
    quantiles,
    sum,
    triangle_count,
    trimmed_mean,
    variance,
)
from dpsense.query._builder import Query
from dpsense.query._ir import CANONICAL_VERSION, AggregateIR, FilterIR, FilterOp, GroupByIR, QueryIR
from dpsense.query._meaning import by_meaning
from dpsense.query._mechanisms import Family, Mechanism, MechanismInfo, RecordCost
from dpsense.query._schema import Column, ColumnKind, Schema
from dpsense.query.planner import Plan, PlanStep, StepPart, assert_loss_equals, plan

__all__ = [
    "CANONICAL_VERSION",
    "Aggregate",
    "AggregateIR",
    "AggregateKind",
    "Column",
    "ColumnKind",
    "Family",
    "FilterIR",
    "FilterOp",
    "GroupByIR",
    "Mechanism",
    "MechanismInfo",
    "Plan",
    "PlanStep",
    "Query",
    "QueryIR",
    "RecordCost",
    "Schema",
    "StepPart",
    "approx_bounds",
    "assert_loss_equals",
    "by_meaning",
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
    "plan",
    "quantile",
    "quantiles",
    "sum",
    "triangle_count",
    "trimmed_mean",
    "variance",
]
