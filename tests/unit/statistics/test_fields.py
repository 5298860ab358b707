"""Each statistic's declarative spelling (its module's fields and from_fields): YAML spec and HTTP body."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.core.errors import UsageError
from dpsense.query import AggregateKind
from dpsense.statistics import AGGREGATE_FIELDS, STATISTICS, aggregate_from_fields

EXAMPLES = {
    AggregateKind.COUNT: {"max_rows_per_unit": 3},
    AggregateKind.COUNT_UNITS: {},
    AggregateKind.CLIPPED_COUNT: {"column": "x", "bounds": (0, 24), "mechanism": "geometric"},
    AggregateKind.SUM: {"column": "x", "bounds": (0, 1)},
    AggregateKind.MEAN: {"column": "x"},
    AggregateKind.VARIANCE: {"column": "x", "mechanism": "gaussian"},
    AggregateKind.MEDIAN: {"column": "x", "mechanism": "ptr_order_statistic", "proposed_bound": "0.5"},
    AggregateKind.QUANTILE: {"column": "x", "q": 0.9},
    AggregateKind.QUANTILES: {"column": "x", "qs": [0.25, "0.5", 0.75], "bounds": (0, 10)},
    AggregateKind.TRIMMED_MEAN: {"column": "x", "trim_fraction": "0.1", "proposed_bound": 2},
    AggregateKind.HISTOGRAM: {"column": "g", "keys": ["a", "b"]},
    AggregateKind.APPROX_BOUNDS: {"column": "x", "max_rows_per_unit": 2},
    AggregateKind.MIN_DISTANCE: {"columns": ["p", "q"], "bounds": (0, 1)},
    AggregateKind.TRIANGLE_COUNT: {"columns": ["s", "t"], "proposed_bound": 4},
    AggregateKind.HIERARCHICAL_COUNT: {"hierarchy": "geo", "split": [1, "1", 2]},
}


@pytest.mark.parametrize("kind", list(AggregateKind))
def test_every_kind_builds_from_its_fields(kind: AggregateKind) -> None:
    fields = EXAMPLES[kind]
    allowed, required = AGGREGATE_FIELDS[kind]
    assert required <= set(fields) | {"kind"} <= allowed | {"kind"}
    agg = aggregate_from_fields(kind, {**fields, "unused": None})
    assert agg.kind is kind
    if "proposed_bound" in fields:
        assert agg.proposed_bound == Fraction(str(fields["proposed_bound"]))


def test_proposed_bound_is_offered_exactly_where_ptr_runs() -> None:
    with_ptr = {k for k, (allowed, _) in AGGREGATE_FIELDS.items() if "proposed_bound" in allowed}
    assert with_ptr == {
        AggregateKind.MEDIAN,
        AggregateKind.QUANTILE,
        AggregateKind.TRIMMED_MEAN,
        AggregateKind.MIN_DISTANCE,
        AggregateKind.TRIANGLE_COUNT,
    }
    with pytest.raises(UsageError, match="> 0"):
        aggregate_from_fields(AggregateKind.MEDIAN, {"column": "x", "proposed_bound": 0})


@pytest.mark.parametrize("kind", list(AggregateKind))
def test_every_field_a_statistic_accepts_reaches_its_aggregate(kind: AggregateKind) -> None:
    """A field the table accepts but from_fields ignored would be silently dropped: each one changes the result."""
    base = aggregate_from_fields(kind, EXAMPLES[kind])
    changed = {
        "max_rows_per_unit": 7,
        "mechanism": STATISTICS[kind].mechanisms[-1],
        "bounds": (0, 5),
        "proposed_bound": "0.25",
        "keys": ["z"],
        "q": "0.3",
        "trim_fraction": "0.2",
        "hierarchy": "geo2",
        "split": [1, 2, 3],
    }
    allowed, _ = AGGREGATE_FIELDS[kind]
    for name, value in changed.items():
        if name in allowed and EXAMPLES[kind].get(name) != value:
            assert aggregate_from_fields(kind, {**EXAMPLES[kind], name: value}) != base, name
