"""The fields each aggregate kind takes in a declarative request (YAML spec, HTTP JSON), and the builder.

One table for every front end that describes a statistic as a mapping of fields (``dpsense release
SPEC.yaml``, the service's JSON body), so that they accept exactly the same requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from dpsense.query import _aggregates as agg
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._builder import Query

__all__ = ["AGGREGATE_FIELDS", "DeclarativeRequest", "aggregate_from_fields", "build_query"]

_SHARED = frozenset({"kind", "max_rows_per_unit", "mechanism"})
_NUMERIC = _SHARED | {"column", "bounds"}
_PTR = frozenset({"proposed_bound"})

#: Per kind: (fields it accepts, fields it requires).
AGGREGATE_FIELDS: dict[AggregateKind, tuple[frozenset[str], frozenset[str]]] = {
    AggregateKind.COUNT: (_SHARED, frozenset()),
    AggregateKind.COUNT_UNITS: (frozenset({"kind", "mechanism"}), frozenset()),
    AggregateKind.CLIPPED_COUNT: (_NUMERIC, frozenset({"column"})),
    AggregateKind.SUM: (_NUMERIC, frozenset({"column"})),
    AggregateKind.MEAN: (_NUMERIC, frozenset({"column"})),
    AggregateKind.VARIANCE: (_NUMERIC, frozenset({"column"})),
    AggregateKind.MEDIAN: (_NUMERIC | _PTR, frozenset({"column"})),
    AggregateKind.QUANTILE: (_NUMERIC | _PTR | {"q"}, frozenset({"column", "q"})),
    AggregateKind.TRIMMED_MEAN: (_NUMERIC | _PTR | {"trim_fraction"}, frozenset({"column", "trim_fraction"})),
    AggregateKind.HISTOGRAM: (_SHARED | {"column", "keys"}, frozenset({"column"})),
    AggregateKind.APPROX_BOUNDS: (_SHARED | {"column"}, frozenset({"column"})),
    AggregateKind.MIN_DISTANCE: (_SHARED | _PTR | {"columns", "bounds"}, frozenset({"columns"})),
    AggregateKind.TRIANGLE_COUNT: (_SHARED | _PTR | {"columns"}, frozenset({"columns"})),
}

_Builder = Callable[[Mapping[str, Any]], Aggregate]


def _common(f: Mapping[str, Any]) -> dict[str, Any]:
    return {"max_rows_per_unit": f.get("max_rows_per_unit"), "mechanism": f.get("mechanism")}


def _bounds(f: Mapping[str, Any]) -> tuple[Any, Any] | None:
    bounds = f.get("bounds")
    return None if bounds is None else (bounds[0], bounds[1])


def _numeric(build: Callable[..., Aggregate], *extra: str) -> _Builder:
    def make(f: Mapping[str, Any]) -> Aggregate:
        options = {name: f.get(name) for name in extra}
        return build(f["column"], bounds=_bounds(f), **_common(f), **options)

    return make


_BUILDERS: dict[AggregateKind, _Builder] = {
    AggregateKind.COUNT: lambda f: agg.count(**_common(f)),
    AggregateKind.COUNT_UNITS: lambda f: agg.count_units(mechanism=f.get("mechanism")),
    AggregateKind.CLIPPED_COUNT: _numeric(agg.clipped_count),
    AggregateKind.SUM: _numeric(agg.sum),
    AggregateKind.MEAN: _numeric(agg.mean),
    AggregateKind.VARIANCE: _numeric(agg.variance),
    AggregateKind.MEDIAN: _numeric(agg.median, "proposed_bound"),
    AggregateKind.QUANTILE: lambda f: agg.quantile(
        f["column"], f["q"], bounds=_bounds(f), proposed_bound=f.get("proposed_bound"), **_common(f)
    ),
    AggregateKind.TRIMMED_MEAN: lambda f: agg.trimmed_mean(
        f["column"], f["trim_fraction"], bounds=_bounds(f), proposed_bound=f.get("proposed_bound"), **_common(f)
    ),
    AggregateKind.HISTOGRAM: lambda f: agg.histogram(f["column"], f.get("keys"), **_common(f)),
    AggregateKind.APPROX_BOUNDS: lambda f: agg.approx_bounds(f["column"], **_common(f)),
    AggregateKind.MIN_DISTANCE: lambda f: agg.min_distance(
        f["columns"], bounds=_bounds(f), proposed_bound=f.get("proposed_bound"), **_common(f)
    ),
    AggregateKind.TRIANGLE_COUNT: lambda f: agg.triangle_count(
        f["columns"], proposed_bound=f.get("proposed_bound"), **_common(f)
    ),
}


def aggregate_from_fields(kind: AggregateKind, fields: Mapping[str, Any]) -> Aggregate:
    """The aggregate of ``kind`` from its fields (absent ones ``None``).

    The caller has checked the field names against ``AGGREGATE_FIELDS`` (required ones present, no
    others); the constructors check the values.
    """
    return _BUILDERS[kind]({k: v for k, v in fields.items() if v is not None})


class _Filter(Protocol):
    @property
    def column(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def value(self) -> Any: ...


class _GroupBy(Protocol):
    @property
    def column(self) -> str: ...
    @property
    def keys(self) -> Sequence[Any] | None: ...


class _Statistic(Protocol):
    def aggregate(self) -> Aggregate: ...


class DeclarativeRequest(Protocol):
    """What a YAML spec and an HTTP release body both state (their models have these fields)."""

    @property
    def dataset(self) -> str: ...
    @property
    def filters(self) -> Sequence[_Filter]: ...
    @property
    def group_by(self) -> _GroupBy | None: ...
    @property
    def max_groups_per_unit(self) -> int | None: ...
    @property
    def aggregates(self) -> Mapping[str, _Statistic]: ...


def build_query(request: DeclarativeRequest, field: Callable[[str], AbstractContextManager[None]]) -> Query:
    """The query a declarative request describes, each step inside ``field(name)``.

    ``field`` turns a refusal of the query layer into the front end's error naming the request field
    (``filters[0]``, ``group_by``, ``aggregates.mean_hours``, ...).
    """
    with field("dataset"):
        query = Query(request.dataset)
    for i, f in enumerate(request.filters):
        with field(f"filters[{i}]"):
            query = query.filter(f.column, f.op, f.value)
    if request.group_by is not None:
        with field("group_by"):
            query = query.group_by(request.group_by.column, keys=request.group_by.keys)
    if request.max_groups_per_unit is not None:
        with field("max_groups_per_unit"):
            query = query.max_groups_per_unit(request.max_groups_per_unit)
    for name, spec in request.aggregates.items():
        with field(f"aggregates.{name}"):
            query = query.agg(**{name: spec.aggregate()})
    return query
