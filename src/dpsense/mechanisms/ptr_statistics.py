"""Propose-Test-Release for order statistics, the trimmed mean, the minimum distance and triangle counts.

The statistics of docs/math/index.md sections 4-7. Each function builds the statistic's monotone family
(the same one its smooth sensitivity uses) and runs ``ptr_with_family``:
gamma_L(x) = min{k : min(G, U_k(x)) > b} is 1-Lipschitz and gamma_L >= 1 implies LS(x) <= b, so the
test is epsilon_test-DP and the whole is (epsilon_test + epsilon_release,
delta)-DP (Dwork-Lei 2009; docs/math/ptr.md). The proposed bound b is an argument: public,
stated by the analyst, never computed from the data. A failed test returns a ``Refusal`` that is
charged like an answer and carries no data-dependent number.

Adjacency: replace one record with n public, or add/remove one record with a declared
``public_n`` (order statistics, trimmed mean); replace or add/remove one point (minimum distance).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike
from dpsense.mechanisms.ptr import Refusal, ptr_with_family
from dpsense.mechanisms.result import MechanismResult
from dpsense.sensitivity._numeric import bounds_interval, clipped_sorted, finite_values
from dpsense.sensitivity.closest_pair import (
    closest_pair_family,
    closest_pair_inputs,
)
from dpsense.sensitivity.order_statistics import OrderStatisticFamily, median_rank, resize_to_public_n
from dpsense.sensitivity.triangles import TriangleFamily, as_graph, check_edge_privacy_unit, triangle_count
from dpsense.sensitivity.trimmed_mean import TrimmedMeanFamily, trimmed_mean


def _prepared(values: ArrayLike, lo: float, hi: float, adjacency: Adjacency, public_n: int | None) -> np.ndarray:
    data = finite_values(values)
    if adjacency is Adjacency.ADD_REMOVE:
        if public_n is None:
            raise UsageError(
                "add/remove adjacency needs a declared public_n", None, "declare public_n (never read from the data)"
            )
        return resize_to_public_n(data, public_n=public_n, bounds=(lo, hi))
    return clipped_sorted(np.sort(data), lo, hi)


def ptr_order_statistic(
    values: ArrayLike,
    *,
    rank: int | None = None,
    bounds: tuple[float, float],
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    adjacency: Adjacency | str,
    public_n: int | None = None,
) -> MechanismResult | Refusal:
    """PTR for the rank-r order statistic (default: the median rank (n + 1) // 2 of the public n)."""
    adj = Adjacency.parse(adjacency)
    lo, hi = bounds_interval(bounds)
    ordered = _prepared(values, lo, hi, adj, public_n)
    r = median_rank(ordered.size) if rank is None else rank
    family = OrderStatisticFamily(ordered, r, (lo, hi))
    return ptr_with_family(
        float(ordered[r - 1]),
        family,
        proposed_bound=proposed_bound,
        epsilon_test=epsilon_test,
        epsilon_release=epsilon_release,
        delta=delta,
        output_clamp=(lo, hi),
    )


def ptr_trimmed_mean(
    values: ArrayLike,
    *,
    trim: int,
    bounds: tuple[float, float],
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    adjacency: Adjacency | str,
    public_n: int | None = None,
) -> MechanismResult | Refusal:
    """PTR for the m-trimmed mean (Bun-Steinke's A^(k) family)."""
    adj = Adjacency.parse(adjacency)
    lo, hi = bounds_interval(bounds)
    ordered = _prepared(values, lo, hi, adj, public_n)
    return ptr_with_family(
        trimmed_mean(ordered, trim, (lo, hi)),
        TrimmedMeanFamily(ordered, trim, (lo, hi)),
        proposed_bound=proposed_bound,
        epsilon_test=epsilon_test,
        epsilon_release=epsilon_release,
        delta=delta,
        output_clamp=(lo, hi),
    )


def ptr_min_distance(
    points: ArrayLike,
    *,
    box: tuple[float, float],
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    adjacency: Adjacency | str,
) -> MechanismResult | Refusal:
    """PTR for the minimum pairwise distance of points in the public box [low, high]^d (section 6.5)."""
    adj = Adjacency.parse(adjacency)
    pts, value, cap, top = closest_pair_inputs(points, low=float(box[0]), high=float(box[1]), adjacency=adj)
    return ptr_with_family(
        value,
        closest_pair_family(pts, G=cap, variant="auto"),
        proposed_bound=proposed_bound,
        epsilon_test=epsilon_test,
        epsilon_release=epsilon_release,
        delta=delta,
        output_clamp=(0.0, top),
    )


def ptr_triangle_count(
    graph: object,
    *,
    privacy_unit: str,
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    count_bound: float | None = None,
) -> MechanismResult | Refusal:
    """PTR for the triangle count under edge adjacency (the family of docs/math/triangles.md).

    Refuses any privacy unit other than an edge. The release is clamped to [0, count_bound] (public;
    default C(n, 3)).
    """
    check_edge_privacy_unit(privacy_unit)
    g = as_graph(graph)
    top = float(math.comb(g.num_vertices, 3)) if count_bound is None else float(count_bound)
    return ptr_with_family(
        float(triangle_count(g)),
        TriangleFamily(g),
        proposed_bound=proposed_bound,
        epsilon_test=epsilon_test,
        epsilon_release=epsilon_release,
        delta=delta,
        output_clamp=(0.0, top),
    )
