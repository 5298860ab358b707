"""The immutable query builder and its validation against a schema.

Every builder call returns a new ``Query``; nothing is mutated, so a partial query can be shared and
extended in two directions safely. ``build(schema)`` checks the query against the public schema and
returns the normalised ``QueryIR``; every refusal is a ``UsageError`` naming the rule, the offending
value (a column name or a literal of the query, never data) and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, cast

from dpsense.core.errors import InvalidBounds, UnsupportedRequest, UsageError
from dpsense.core.numbers import inward_interval
from dpsense.core.steps import DecimalStep
from dpsense.mechanisms.quantile import integer_span, step_span
from dpsense.query._aggregates import NUMERIC_KINDS, Aggregate, AggregateKind
from dpsense.query._hierarchy import LEVEL_COLUMN
from dpsense.query._ir import AggregateIR, FilterIR, FilterOp, GroupByIR, QueryIR
from dpsense.query._mechanisms import Family, mechanism_named
from dpsense.query._schema import Bounds, Column, ColumnKind, Schema
from dpsense.query._typos import check_filter_bounds, check_keys, check_override
from dpsense.query._values import PublicValue, Value, normalise, normalise_set, positive_int, sort_key, tagged

_FILTERABLE = frozenset({ColumnKind.NUMERIC, ColumnKind.INTEGER, ColumnKind.CATEGORICAL})
_GROUPABLE = frozenset({ColumnKind.INTEGER, ColumnKind.CATEGORICAL})
_ORDERING = frozenset({FilterOp.LT, FilterOp.LE, FilterOp.GT, FilterOp.GE})


@dataclass(frozen=True)
class _Filter:
    column: str
    op: FilterOp
    value: PublicValue | tuple[PublicValue, ...]


@dataclass(frozen=True)
class _GroupBy:
    column: str
    keys: tuple[PublicValue, ...] | None


@dataclass(frozen=True)
class Query:
    """An immutable query over one dataset: filters, groupings and named aggregates.

    Example::

        q = Query("events").filter("age", ">=", 18).group_by("region", keys=["north", "south"])
        ir = q.agg(people=count_units(), mean_hours=mean("hours")).build(schema)
    """

    dataset: str
    _filters: tuple[_Filter, ...] = ()
    _group_by: tuple[_GroupBy, ...] = ()
    _max_groups_per_unit: int | None = None
    _aggregates: tuple[tuple[str, Aggregate], ...] = ()
    #: (columns, key tuples) of a declared key set of several group columns, as given.
    _key_set: tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise UsageError("a query needs the dataset's name", self.dataset, "pass Query('events')")

    def filter(self, column: str, op: str, value: PublicValue | Iterable[PublicValue]) -> Query:
        """Keep rows where ``column op value`` holds, for a public literal ``value``."""
        try:
            parsed = FilterOp(op)
        except ValueError:
            choices = ", ".join(o.value for o in FilterOp)
            raise UsageError("filter op must be a public comparison", op, f"use one of: {choices}") from None
        if parsed is FilterOp.IN:
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                raise UsageError("an 'in' filter needs a list of values", value, "pass e.g. ['a', 'b']")
            stored: PublicValue | tuple[PublicValue, ...] = tuple(value)
        elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            stored = cast("PublicValue", value)  # its type is judged against the column at build()
        else:
            raise UsageError(f"a {op!r} filter compares with one value", value, "use op='in' for a list")
        return replace(self, _filters=(*self._filters, _Filter(column, parsed, stored)))

    def group_by(self, *columns: str, keys: Iterable[Any] | None = None) -> Query:
        """Group by ``columns``; public ``keys`` (or the schema's) avoid a private partition selection.

        One column: ``keys`` lists its values. Several (``group_by("region", "diagnosis")``, or one
        ``group_by`` call per column): the groups are their value combinations, and ``keys``, if given,
        lists the combinations that exist as tuples in the order of ``columns`` (a declared key set);
        without it the keys are the cross product of each column's keys. Either way the keys are
        public facts: a combination never listed is never released.
        """
        if not columns:
            raise UsageError("group_by needs a column", columns, "pass group_by('region')")
        if keys is not None and (isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable)):
            raise UsageError("group_by keys must be a list of values", keys, "pass keys=['a', 'b'] or omit them")
        raw = None if keys is None else tuple(keys)
        if len(columns) == 1:
            return replace(self, _group_by=(*self._group_by, _GroupBy(columns[0], raw)))
        if raw is not None and self._key_set is not None:
            raise UsageError("a query declares one key set", list(columns), "list every combination in one group_by")
        if raw is not None:
            for key in raw:
                if not isinstance(key, tuple | list) or len(key) != len(columns):
                    raise UsageError(
                        f"a key of a grouping by {len(columns)} columns is a tuple of {len(columns)} values",
                        key,
                        f"pass keys=[{tuple('...' for _ in columns)}, ...] in the order {list(columns)}",
                    )
        grouped = tuple(_GroupBy(c, None) for c in columns)
        key_set = None if raw is None else (tuple(columns), tuple(tuple(k) for k in raw))
        return replace(self, _group_by=(*self._group_by, *grouped), _key_set=key_set or self._key_set)

    def max_groups_per_unit(self, k: int) -> Query:
        """Bound how many groups one privacy unit may contribute to."""
        bound = positive_int(k, what="max_groups_per_unit", example="max_groups_per_unit(3)")
        return replace(self, _max_groups_per_unit=bound)

    def grouping_columns(self) -> tuple[str, ...]:
        """The columns passed to ``group_by`` so far, as written."""
        return tuple(g.column for g in self._group_by)

    @property
    def declared_max_groups_per_unit(self) -> int | None:
        """The query's own ``max_groups_per_unit``, if it states one."""
        return self._max_groups_per_unit

    def agg(self, **aggregates: Aggregate) -> Query:
        """Add named statistics; the keyword order does not matter."""
        for name, aggregate in aggregates.items():
            if not isinstance(aggregate, Aggregate):
                raise UsageError(
                    "agg() takes aggregates built by count(), sum(), mean(), ...", name, f"pass {name}=mean('col')"
                )
        return replace(self, _aggregates=(*self._aggregates, *aggregates.items()))

    def output_names(self) -> tuple[str, ...]:
        """The aggregates' output names in the order they were asked for."""
        return tuple(name for name, _ in self._aggregates)

    def build(self, schema: Schema) -> QueryIR:
        """Check the query against ``schema`` and return its normalised, frozen IR."""
        if not isinstance(schema, Schema):
            raise UsageError("build() needs the dataset's Schema", type(schema).__name__, "pass a dpsense Schema")
        filters = {_resolve_filter(f, schema) for f in self._filters}
        groups = _resolve_groups(self._group_by, schema)
        key_set = None
        if self._key_set is not None:
            groups, key_set = _resolve_key_set(*self._key_set, groups, schema)
        census = _census(self, schema)
        if census is not None:  # a hierarchical count's grouping is its hierarchy's leaf key set
            groups, key_set = census
        if self._max_groups_per_unit is not None and not groups:
            raise UsageError("max_groups_per_unit needs a group_by", self._max_groups_per_unit, "add group_by(...)")
        ir = QueryIR(
            dataset=self.dataset,
            filters=tuple(sorted(filters, key=lambda f: json.dumps(f.to_json(), sort_keys=True))),
            group_by=groups,
            max_groups_per_unit=self._max_groups_per_unit,
            aggregates=_resolve_aggregates(self._aggregates, groups, schema),
            key_set=key_set,
        )
        _check_group_count(ir)
        return ir


def _resolve_filter(spec: _Filter, schema: Schema) -> FilterIR:
    column = schema.column(spec.column)
    if column.kind not in _FILTERABLE:
        raise UnsupportedRequest(
            f"filters apply to numeric, integer or categorical columns, not {column.kind.value}",
            column.name,
            "filter on another column",
        )
    if spec.op in _ORDERING and not column.kind.is_numeric:
        raise UsageError(f"{spec.op.value!r} compares numbers only", column.name, "use '==', '!=' or 'in'")
    numeric = column.kind.is_numeric
    what = f"filter value for {column.name!r}"
    if isinstance(spec.value, tuple):
        values = normalise_set(spec.value, numeric=numeric, what=what)
        resolved = FilterIR(column.name, FilterOp.EQ, values[0]) if len(values) == 1 else None  # `x in [v]` is `x == v`
        resolved = resolved or FilterIR(column.name, FilterOp.IN, values)
    else:
        resolved = FilterIR(column.name, spec.op, normalise(spec.value, numeric=numeric, what=what))
    literals = resolved.value if isinstance(resolved.value, tuple) else (resolved.value,)
    if resolved.op not in _ORDERING:  # ==, != and in name keys; an ordering compares against the bounds
        check_keys(column, literals, what="the filter value")
    check_filter_bounds(column, resolved.op, resolved.value)
    return resolved


def _resolve_groups(specs: tuple[_GroupBy, ...], schema: Schema) -> tuple[GroupByIR, ...]:
    resolved: dict[str, GroupByIR] = {}
    for spec in specs:
        column = schema.column(spec.column)
        if column.kind not in _GROUPABLE:
            raise UnsupportedRequest(
                f"group_by needs a categorical or integer column, not {column.kind.value}",
                column.name,
                "group by a categorical column",
            )
        if column.name in resolved:
            raise UsageError("each column is grouped by once", column.name, "remove the repeated group_by")
        resolved[column.name] = GroupByIR(column.name, _keys(spec.keys, column))
    return tuple(resolved[name] for name in sorted(resolved))


def _census(query: Query, schema: Schema) -> tuple[tuple[GroupByIR, ...], tuple[tuple[Value, ...], ...] | None] | None:
    """The leaf grouping of a hierarchical count (released alone): its hierarchy's levels and leaf key set."""
    census = [(n, a) for n, a in query._aggregates if a.kind is AggregateKind.HIERARCHICAL_COUNT]
    if not census:
        return None
    name, agg = census[0]
    if len(query._aggregates) > 1 or query._group_by:
        raise UnsupportedRequest(
            "a hierarchical count is released on its own: its hierarchy is the grouping (one row per node)",
            name,
            f"release {name} alone, without group_by or other aggregates",
        )
    if name == LEVEL_COLUMN:
        raise UsageError(f"a census table has a column {LEVEL_COLUMN!r} of its own", name, "name the output otherwise")
    hierarchy = schema.hierarchy(agg.hierarchy or "")
    levels = hierarchy.levels
    groups = _resolve_groups(tuple(_GroupBy(c, None) for c in levels), schema)
    if len(levels) == 1:
        return (GroupByIR(levels[0], tuple(leaf[0] for leaf in hierarchy.leaves)),), None
    return _resolve_key_set(levels, hierarchy.leaves, groups, schema)


def _split(name: str, spec: Aggregate, levels: tuple[str, ...]) -> tuple[Fraction, ...]:
    """The hierarchical count's share of ε per level (the total first), from its weights (default equal)."""
    weights = spec.split or (Fraction(1),) * (len(levels) + 1)
    if len(weights) != len(levels) + 1:
        raise UsageError(
            f"split ({name}) has one weight per level, the total first: {len(levels) + 1} for {['total', *levels]}",
            [float(w) for w in weights],
            f"pass split=[{', '.join('1' for _ in range(len(levels) + 1))}] (equal shares) or other positive weights",
        )
    total = sum(weights, Fraction(0))
    return tuple(w / total for w in weights)


def _resolve_key_set(
    columns: tuple[str, ...], raw: tuple[tuple[Any, ...], ...], groups: tuple[GroupByIR, ...], schema: Schema
) -> tuple[tuple[GroupByIR, ...], tuple[tuple[Value, ...], ...]]:
    """A declared key set in the IR's column order, sorted and deduplicated; each column's keys its projection.

    Every value is checked as a key of its column (declared keys, kind), so a typo is refused here.
    """
    order = [g.column for g in groups]
    if sorted(columns) != sorted(set(columns)) or set(columns) != set(order):
        raise UsageError(
            "a key set names every group column once",
            list(columns),
            f"group by exactly these columns: {order}, with one group_by(..., keys=...) call",
        )
    position = [columns.index(c) for c in order]
    resolved: dict[str, tuple[Value, ...]] = {}
    for key in raw:
        values = tuple(
            _keys((key[i],), schema.column(c))[0]  # type: ignore[index]
            for i, c in zip(position, order, strict=True)
        )
        resolved[json.dumps([tagged(v) for v in values])] = values
    if not resolved:
        raise UsageError("a key set must not be empty", [], "list at least one combination of keys")
    key_set = tuple(sorted(resolved.values(), key=lambda k: [sort_key(v) for v in k]))
    projected = tuple(
        GroupByIR(g.column, tuple(sorted({tagged(k[j]): k[j] for k in key_set}.values(), key=sort_key)))
        for j, g in enumerate(groups)
    )
    return projected, key_set


#: The most groups one release's cross product of public keys may hold (each is a noisy row).
MAX_GROUPS = 1_000_000


def _check_group_count(ir: QueryIR) -> None:
    count = ir.public_groups
    if len(ir.group_by) > 1 and count is not None and count > MAX_GROUPS:
        raise UsageError(
            f"the cross product of the group columns' keys has {count:,} groups, more than the "
            f"{MAX_GROUPS:,} a release holds",
            list(ir.group_columns),
            "group by fewer columns, filter to fewer keys, or declare the combinations that exist with "
            "group_by(columns..., keys=[tuples])",
        )


def _keys(keys: tuple[PublicValue, ...] | None, column: Column) -> tuple[Value, ...] | None:
    if keys is None:
        return column.keys  # the declared public keys, or None: private partition selection
    given = normalise_set(keys, numeric=column.kind.is_numeric, what=f"keys of {column.name!r}")
    check_keys(column, given, what="the group key")
    return given


def _vertex_set(columns: tuple[Column, ...]) -> tuple[Value, ...] | None:
    """The public vertex set of a triangle count: the declared keys of its two edge columns, together.

    ``None`` when a column has no declared keys (the release system then refuses to run it).
    """
    if any(c.keys is None for c in columns):
        return None
    union = {tagged(v): v for c in columns for v in c.keys or ()}.values()
    return tuple(sorted(union, key=sort_key))


def _resolve_aggregates(
    specs: tuple[tuple[str, Aggregate], ...], groups: tuple[GroupByIR, ...], schema: Schema
) -> tuple[AggregateIR, ...]:
    if not specs:
        raise UsageError("a query needs at least one aggregate", "no agg()", "add .agg(n=count())")
    taken = {g.column for g in groups}
    resolved = []
    for name, spec in specs:
        if name in taken:
            raise UsageError("output names must be unique (and differ from group_by columns)", name, "rename it")
        taken.add(name)
        resolved.append(_resolve_aggregate(name, spec, schema))
    return tuple(sorted(resolved, key=lambda a: a.name))


def _resolve_aggregate(name: str, spec: Aggregate, schema: Schema) -> AggregateIR:
    kind = spec.kind
    columns = tuple(schema.column(c) for c in spec.columns)
    bounds: tuple[Bounds, ...] = ()
    keys: tuple[Value, ...] | None = None
    names, split = spec.columns, None
    if kind is AggregateKind.HIERARCHICAL_COUNT:  # its columns: the hierarchy's levels, from the top down
        names = schema.hierarchy(spec.hierarchy or "").levels
        split = _split(name, spec, names)
    if kind is AggregateKind.COUNT_UNITS and schema.unit_column is None:
        raise UnsupportedRequest(
            "count_units needs a privacy-unit column in the schema", name, "declare a 'unit' column or use count()"
        )
    if kind in NUMERIC_KINDS:
        _require_kind(name, kind, columns, lambda k: k.is_numeric, "a numeric or integer")
        bounds = _bounds(name, kind, columns, spec.bounds)
    elif kind is AggregateKind.APPROX_BOUNDS:
        _require_kind(name, kind, columns, lambda k: k.is_numeric, "a numeric or integer")
    elif kind is AggregateKind.HISTOGRAM:
        _require_kind(name, kind, columns, lambda k: k in _GROUPABLE, "a categorical or integer")
        keys = _keys(spec.keys, columns[0])
    elif kind is AggregateKind.MIN_DISTANCE:
        _require_kind(name, kind, columns, lambda k: k is ColumnKind.POINT, "point")
        bounds = _bounds(name, kind, columns, spec.bounds)
    elif kind is AggregateKind.TRIANGLE_COUNT:
        _require_kind(name, kind, columns, lambda k: k is ColumnKind.EDGE, "edge")
        keys = _vertex_set(columns)
    return AggregateIR(
        name=name,
        kind=kind,
        columns=names,
        bounds=bounds,
        max_rows_per_unit=spec.max_rows_per_unit,
        mechanism=spec.mechanism,
        q=spec.q,
        trim_fraction=spec.trim_fraction,
        keys=keys,
        proposed_bound=_checked_proposed_bound(name, spec),
        integer_candidates=_integer_candidates(kind, columns, bounds),
        step=_step_candidates(kind, columns, bounds),
        typical=columns[0].typical if kind in _ADAPTIVE_KINDS and columns else None,
        qs=spec.qs,
        split=split,
    )


#: The statistics whose default reads a column's declared typical range (``statistics._adaptive``).
_ADAPTIVE_KINDS = frozenset({AggregateKind.MEAN, AggregateKind.SUM})


def _integer_candidates(kind: AggregateKind, columns: tuple[Column, ...], bounds: tuple[Bounds, ...]) -> bool:
    """An order statistic of a column declared integer whose bounds hold integer candidates (``integer_span``)."""
    if kind not in (AggregateKind.MEDIAN, AggregateKind.QUANTILE) or columns[0].kind is not ColumnKind.INTEGER:
        return False
    low, high = bounds[0]
    return integer_span(low, high) is not None


def _step_candidates(
    kind: AggregateKind, columns: tuple[Column, ...], bounds: tuple[Bounds, ...]
) -> DecimalStep | None:
    """The declared recording step of a quantile's column when its bounds hold a point of it (``step_span``)."""
    if kind not in _ORDER_KINDS or columns[0].step is None:
        return None
    try:
        low, high = inward_interval(*bounds[0])  # the doubles the release clips to
    except InvalidBounds:
        return None
    return columns[0].step if step_span(low, high, columns[0].step) is not None else None


#: The statistics whose exponential mechanism chooses among a declared step's points.
_ORDER_KINDS = frozenset({AggregateKind.MEDIAN, AggregateKind.QUANTILE, AggregateKind.QUANTILES})


def _checked_proposed_bound(name: str, spec: Aggregate) -> Fraction | None:
    """PTR needs a proposed bound and nothing else takes one."""
    named = None if spec.mechanism is None else mechanism_named(spec.mechanism)
    ptr = named is not None and named.family is Family.PTR
    if ptr and spec.proposed_bound is None:
        raise UsageError(
            f"{spec.mechanism} ({name}) needs proposed_bound, the local-sensitivity bound its test checks",
            None,
            "pass proposed_bound=b (public: from domain knowledge, never from the data)",
        )
    if not ptr and spec.proposed_bound is not None:
        raise UsageError(
            f"proposed_bound ({name}) is used only by Propose-Test-Release",
            float(spec.proposed_bound),
            "drop proposed_bound, or ask for a ptr_* mechanism",
        )
    return spec.proposed_bound


def _require_kind(
    name: str, kind: AggregateKind, columns: tuple[Column, ...], ok: Callable[[ColumnKind], bool], wanted: str
) -> None:
    for column in columns:
        if not ok(column.kind):
            raise UsageError(
                f"{kind.value} ({name}) needs {wanted} column, and {column.name!r} is {column.kind.value}",
                column.name,
                f"pick {wanted} column",
            )


def _bounds(name: str, kind: AggregateKind, columns: tuple[Column, ...], override: Bounds | None) -> tuple[Bounds, ...]:
    out = []
    for column in columns:
        if override is not None:
            check_override(name, column, override)
        effective = override if override is not None else column.bounds
        if effective is None:
            raise InvalidBounds(
                f"{kind.value} ({name}) needs public bounds for {column.name!r}",
                column.name,
                f"declare bounds for {column.name!r} when registering the dataset, or pass bounds=(L, U)",
            )
        out.append(effective)
    return tuple(out)
