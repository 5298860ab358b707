"""Aggregate constructors: what the analyst asks for, checked for everything that needs no schema.

Each constructor returns a frozen ``Aggregate``. Options shared by the statistics:

* ``max_rows_per_unit``: the per-statistic contribution bound (an int >= 1; ``None`` = the dataset's);
* ``bounds=(L, U)``: a clipping override of the column's declared public bounds;
* ``mechanism``: the analyst's explicit choice, stored as given and judged later by the planner.

Numbers are held as exact fractions, so ``quantile("age", 0.5)`` and ``quantile("age", Fraction(1, 2))``
build equal objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction

from dpsense.core.errors import UsageError
from dpsense.query._schema import Bounds, check_bounds
from dpsense.query._values import PublicValue, exact, positive_int


class AggregateKind(str, Enum):
    """The statistic an aggregate computes."""

    COUNT = "count"
    COUNT_UNITS = "count_units"
    SUM = "sum"
    MEAN = "mean"
    VARIANCE = "variance"
    MEDIAN = "median"
    QUANTILE = "quantile"
    QUANTILES = "quantiles"
    HISTOGRAM = "histogram"
    TRIMMED_MEAN = "trimmed_mean"
    MIN_DISTANCE = "min_distance"
    TRIANGLE_COUNT = "triangle_count"
    CLIPPED_COUNT = "clipped_count"
    APPROX_BOUNDS = "approx_bounds"
    HIERARCHICAL_COUNT = "hierarchical_count"


#: Statistics over one numeric column, which need public bounds (declared or overridden).
NUMERIC_KINDS = frozenset(
    {
        AggregateKind.SUM,
        AggregateKind.MEAN,
        AggregateKind.VARIANCE,
        AggregateKind.MEDIAN,
        AggregateKind.QUANTILE,
        AggregateKind.QUANTILES,
        AggregateKind.TRIMMED_MEAN,
        AggregateKind.CLIPPED_COUNT,
    }
)


@dataclass(frozen=True)
class Aggregate:
    """One requested statistic, before it is checked against a schema.

    ``keys`` is the raw public key list of a histogram (normalised once the column's kind is known);
    ``qs`` the increasing quantiles of ``quantiles``.
    """

    kind: AggregateKind
    columns: tuple[str, ...] = ()
    bounds: Bounds | None = None
    max_rows_per_unit: int | None = None
    mechanism: str | None = None
    q: Fraction | None = None
    trim_fraction: Fraction | None = None
    keys: tuple[PublicValue, ...] | None = None
    proposed_bound: Fraction | None = None
    qs: tuple[Fraction, ...] | None = None
    hierarchy: str | None = None
    split: tuple[Fraction, ...] | None = None


def _make(
    kind: AggregateKind,
    columns: Sequence[str] = (),
    *,
    bounds: object = None,
    max_rows_per_unit: object = None,
    mechanism: object = None,
    q: Fraction | None = None,
    trim_fraction: Fraction | None = None,
    keys: tuple[PublicValue, ...] | None = None,
    proposed_bound: PublicValue | None = None,
    qs: tuple[Fraction, ...] | None = None,
) -> Aggregate:
    for col in columns:
        if not isinstance(col, str) or not col:
            raise UsageError(f"{kind.value} needs column names as strings", col, "pass the column's name")
    if mechanism is not None and (not isinstance(mechanism, str) or not mechanism):
        raise UsageError("mechanism must be a mechanism's name", mechanism, "pass e.g. mechanism='laplace' or omit it")
    return Aggregate(
        kind=kind,
        columns=tuple(columns),
        bounds=None if bounds is None else check_bounds(bounds, what=f"{kind.value} bounds"),
        max_rows_per_unit=None
        if max_rows_per_unit is None
        else positive_int(max_rows_per_unit, what="max_rows_per_unit", example="max_rows_per_unit=30"),
        mechanism=mechanism,
        q=q,
        trim_fraction=trim_fraction,
        keys=keys,
        proposed_bound=_proposed_bound(proposed_bound),
        qs=qs,
    )


def _proposed_bound(value: PublicValue | None) -> Fraction | None:
    """PTR's proposed bound b on the local sensitivity: a public number > 0 (never taken from the data)."""
    if value is None:
        return None
    bound = exact(value, what="proposed_bound")
    if bound <= 0:
        raise UsageError("proposed_bound must be > 0", value, "pass the local-sensitivity bound PTR tests, e.g. 0.5")
    return bound


def count(*, max_rows_per_unit: int | None = None, mechanism: str | None = None) -> Aggregate:
    """The number of rows (each unit contributing at most ``max_rows_per_unit`` of them)."""
    return _make(AggregateKind.COUNT, max_rows_per_unit=max_rows_per_unit, mechanism=mechanism)


def clipped_count(
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """The number of rows whose value lies outside the public bounds: the rows clipping moves.

    Clipping bias is private, so it is measured only on request, as this charged noisy count (next to
    the mean or sum it concerns, on the same bounded rows of the same release).
    """
    return _numeric(AggregateKind.CLIPPED_COUNT, column, bounds, max_rows_per_unit, mechanism)


def approx_bounds(column: str, *, max_rows_per_unit: int | None = None, mechanism: str | None = None) -> Aggregate:
    """Private approximate bounds [low, high] of a numeric column, for choosing a clipping range.

    A charged release (``dpsense.mechanisms.approx_bounds``: a noisy log2-binned histogram, pure ε-DP)
    that needs no declared bounds; its output is two columns, ``<name>_low`` and ``<name>_high``
    (powers of two, or null when no bin had enough rows). Pass them as ``bounds=(low, high)`` to a
    later statistic: a released value is public.
    """
    return _make(AggregateKind.APPROX_BOUNDS, (column,), max_rows_per_unit=max_rows_per_unit, mechanism=mechanism)


def hierarchical_count(
    hierarchy: str,
    *,
    split: Sequence[PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """A census table: the rows counted at every level of a declared hierarchy, made consistent. One release.

    ``hierarchy`` names a hierarchy the steward declared at registration (``hierarchies={"geo":
    {"levels": [...], "keys": [...]}}``). Every level (the total first, then each level's nodes) gets
    its own noisy count vector at ε·w_l/Σw, ``split`` giving the weights w (one per level including the
    total; default equal); post-processing then makes children sum exactly to their parent, as
    non-negative integers (``dpsense.mechanisms.consistency``; docs/census.md). Released alone, one
    row per node.
    """
    if not isinstance(hierarchy, str) or not hierarchy:
        raise UsageError("hierarchical_count names a declared hierarchy", hierarchy, "pass e.g. hierarchy='geo'")
    weights = None
    if split is not None:
        if isinstance(split, (str, bytes)) or not isinstance(split, Iterable):
            raise UsageError("split is a list of weights, one per level", split, "pass e.g. split=[1, 1, 2]")
        weights = tuple(exact(w, what="split weight") for w in split)
        if not weights or any(w <= 0 for w in weights):
            raise UsageError(
                "split weights are positive numbers, one per level (the total first)",
                [float(w) for w in weights],
                "pass e.g. split=[1, 1, 2] for a total, regions and districts",
            )
    aggregate = _make(AggregateKind.HIERARCHICAL_COUNT, max_rows_per_unit=max_rows_per_unit, mechanism=mechanism)
    return replace(aggregate, hierarchy=hierarchy, split=weights)


def count_units(*, mechanism: str | None = None) -> Aggregate:
    """The number of distinct privacy units."""
    return _make(AggregateKind.COUNT_UNITS, mechanism=mechanism)


def _numeric(
    kind: AggregateKind,
    column: str,
    bounds: tuple[PublicValue, PublicValue] | None,
    max_rows_per_unit: int | None,
    mechanism: str | None,
    q: Fraction | None = None,
    trim_fraction: Fraction | None = None,
    proposed_bound: PublicValue | None = None,
    qs: tuple[Fraction, ...] | None = None,
) -> Aggregate:
    return _make(
        kind,
        (column,),
        bounds=bounds,
        max_rows_per_unit=max_rows_per_unit,
        mechanism=mechanism,
        proposed_bound=proposed_bound,
        q=q,
        trim_fraction=trim_fraction,
        qs=qs,
    )


def sum(  # shadows the builtin on purpose: the statistic's own name, as in dp.sum("hours")
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """The sum of a numeric column, each value clipped to the public bounds."""
    return _numeric(AggregateKind.SUM, column, bounds, max_rows_per_unit, mechanism)


def mean(
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """The mean of a numeric column, each value clipped to the public bounds."""
    return _numeric(AggregateKind.MEAN, column, bounds, max_rows_per_unit, mechanism)


def variance(
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """The variance of a numeric column, each value clipped to the public bounds."""
    return _numeric(AggregateKind.VARIANCE, column, bounds, max_rows_per_unit, mechanism)


def median(
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The median of a numeric column, searched within the public bounds.

    ``proposed_bound`` is PTR's proposed local-sensitivity bound (with ``mechanism='ptr_order_statistic'``).
    """
    return _numeric(AggregateKind.MEDIAN, column, bounds, max_rows_per_unit, mechanism, proposed_bound=proposed_bound)


def quantile(
    column: str,
    q: PublicValue,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The ``q``-quantile (0 <= q <= 1) of a numeric column, searched within the public bounds."""
    exact_q = exact(q, what="quantile q")
    if not 0 <= exact_q <= 1:
        raise UsageError("quantile q must lie in [0, 1]", q, "pass q between 0 and 1, e.g. 0.9 for the 90th percentile")
    return _numeric(
        AggregateKind.QUANTILE, column, bounds, max_rows_per_unit, mechanism, q=exact_q, proposed_bound=proposed_bound
    )


#: The most quantiles one ``quantiles`` aggregate releases (the percentiles 1..99 fit).
MAX_QUANTILES = 99


def quantiles(
    column: str,
    qs: Sequence[PublicValue],
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """Several quantiles of a numeric column in one release (e.g. the quartiles, the deciles).

    ``qs`` are strictly increasing, strictly between 0 and 1, at most ``MAX_QUANTILES``. One output column
    per quantile, named ``<name>_p<100 q>`` (``q_p25``, ``q_p50``, ``q_p12_5``). The default mechanism
    splits recursively (Kaplan-Schnapp-Stemmer 2022): each quantile gets ε/⌈log2(m + 1)⌉ instead of ε/m,
    and the released values are sorted (docs/planner.md, "Several quantiles at once").
    """
    if isinstance(qs, (str, bytes)) or not isinstance(qs, Iterable):
        raise UsageError("quantiles takes a list of quantiles", qs, "pass e.g. qs=[0.25, 0.5, 0.75]")
    exact_qs = tuple(exact(q, what="quantile q") for q in qs)
    if not 1 <= len(exact_qs) <= MAX_QUANTILES:
        raise UsageError(
            f"quantiles takes 1 to {MAX_QUANTILES} quantiles", len(exact_qs), "pass e.g. qs=[0.25, 0.5, 0.75]"
        )
    if any(not 0 < q < 1 for q in exact_qs) or any(b <= a for a, b in itertools.pairwise(exact_qs)):
        raise UsageError(
            "quantiles' qs must be strictly increasing and strictly between 0 and 1",
            [float(q) for q in exact_qs],
            "pass distinct quantiles in increasing order, e.g. qs=[0.1, 0.5, 0.9]",
        )
    if len({quantile_label(q) for q in exact_qs}) != len(exact_qs):
        raise UsageError(
            "two of the quantiles share an output name (they agree to 10 digits of 100 q)",
            [float(q) for q in exact_qs],
            "pass quantiles that differ in their first 10 digits",
        )
    return _numeric(AggregateKind.QUANTILES, column, bounds, max_rows_per_unit, mechanism, qs=exact_qs)


def quantile_label(q: Fraction) -> str:
    """The output-column suffix of one quantile of ``quantiles``: ``p`` and 100 q, a decimal point as ``_``."""
    percent = q * 100
    if percent.denominator == 1:
        return f"p{percent.numerator}"
    text = f"{float(percent):.10g}".replace(".", "_").replace("-", "m").replace("+", "")
    return f"p{text}"


def max(  # shadows the builtin on purpose, as dp.sum does: the statistic's own name
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The largest value of a numeric column within the public bounds: the quantile at q = 1.

    The same statistic as ``quantile(column, 1)`` and SQL's ``MAX``, released by the quantile's
    mechanisms: private, but an extreme order statistic is as hard as it
    gets (one unit can move it anywhere in [L, U]), so expect answers spread between the true maximum
    and the upper bound. For a robust top of the data ask ``quantile(column, 0.99)``.
    """
    return quantile(
        column,
        1,
        bounds=bounds,
        max_rows_per_unit=max_rows_per_unit,
        mechanism=mechanism,
        proposed_bound=proposed_bound,
    )


def min(  # shadows the builtin on purpose, as dp.sum does: the statistic's own name
    column: str,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The smallest value of a numeric column within the public bounds: the quantile at q = 0 (see ``max``)."""
    return quantile(
        column,
        0,
        bounds=bounds,
        max_rows_per_unit=max_rows_per_unit,
        mechanism=mechanism,
        proposed_bound=proposed_bound,
    )


def trimmed_mean(
    column: str,
    trim_fraction: PublicValue,
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The mean after dropping ``trim_fraction`` (0 <= t < 1/2) of the rows from each tail."""
    exact_t = exact(trim_fraction, what="trim_fraction")
    if not 0 <= exact_t < Fraction(1, 2):
        raise UsageError("trim_fraction must lie in [0, 1/2)", trim_fraction, "pass e.g. trim_fraction=0.1")
    return _numeric(
        AggregateKind.TRIMMED_MEAN,
        column,
        bounds,
        max_rows_per_unit,
        mechanism,
        trim_fraction=exact_t,
        proposed_bound=proposed_bound,
    )


def histogram(
    column: str,
    keys: Iterable[PublicValue] | None = None,
    *,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
) -> Aggregate:
    """Counts per value of a categorical column over public keys.

    ``keys=None`` uses the declared keys; private key selection is not implemented yet, so without
    declared keys the planner refuses the histogram.
    """
    if keys is not None and (isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable)):
        raise UsageError("histogram keys must be a list of values", keys, "pass keys=['a', 'b'] or omit them")
    raw = None if keys is None else tuple(keys)
    return _make(AggregateKind.HISTOGRAM, (column,), max_rows_per_unit=max_rows_per_unit, mechanism=mechanism, keys=raw)


def min_distance(
    point_cols: Sequence[str],
    *,
    bounds: tuple[PublicValue, PublicValue] | None = None,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The smallest distance between two points whose coordinates are the ``point_cols``."""
    cols = _column_list(point_cols, "min_distance point_cols", minimum=1)
    return _make(
        AggregateKind.MIN_DISTANCE,
        cols,
        bounds=bounds,
        max_rows_per_unit=max_rows_per_unit,
        mechanism=mechanism,
        proposed_bound=proposed_bound,
    )


def triangle_count(
    edge_cols: Sequence[str],
    *,
    max_rows_per_unit: int | None = None,
    mechanism: str | None = None,
    proposed_bound: PublicValue | None = None,
) -> Aggregate:
    """The number of triangles in the graph whose edges are the (source, target) ``edge_cols``."""
    cols = _column_list(edge_cols, "triangle_count edge_cols", minimum=2)
    if len(cols) != 2:
        raise UsageError("triangle_count needs exactly two edge columns", cols, "pass (source, target) columns")
    return _make(
        AggregateKind.TRIANGLE_COUNT,
        cols,
        max_rows_per_unit=max_rows_per_unit,
        mechanism=mechanism,
        proposed_bound=proposed_bound,
    )


def _column_list(columns: object, what: str, *, minimum: int) -> tuple[str, ...]:
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
        raise UsageError(f"{what} must be a list of column names", columns, "pass e.g. ['x', 'y']")
    cols = tuple(columns)
    if len(cols) < minimum or len(set(cols)) != len(cols):
        raise UsageError(f"{what} must list at least {minimum} distinct columns", cols, "list each column once")
    return cols


def public_range(kind: AggregateKind, bounds: tuple[Fraction, Fraction]) -> tuple[Fraction, Fraction] | None:
    """The values a statistic can take over public bounds [L, U], or None where they are unbounded.

    A mean or trimmed mean lies in [L, U]; a variance of values in [L, U] in [0, ((U - L) / 2)^2].
    A released value whose interval ``value ± error bound`` holds this whole range says nothing the
    bounds did not (``Release`` flags it noise-dominated). Counts and sums have no such range.
    """
    low, high = bounds
    if kind in (AggregateKind.MEAN, AggregateKind.TRIMMED_MEAN):
        return low, high
    if kind is AggregateKind.VARIANCE:
        return Fraction(0), ((high - low) / 2) ** 2
    return None
