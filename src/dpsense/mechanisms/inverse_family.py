"""An inverse-sensitivity mechanism for any statistic with a monotone family (a generic EM baseline).

The inverse-sensitivity mechanism (Asi-Duchi, NeurIPS 2020) releases y with probability proportional
to exp(-epsilon len(x; y) / 2), where len(x; y) is the number of record changes needed to make f
equal y. Any 1-Lipschitz *lower* bound on len keeps it epsilon-DP (the exponential mechanism only
needs a utility of sensitivity 1), and a monotone family (``dpsense.sensitivity.smooth``) gives one:

    len_L(x; y) = min{k : |y - f(x)| <= C_k(x)},   C_k(x) = sum_{i<k} min(G, U_i(x)).

*Lower bound:* along any path x = z_0, ..., z_k = z, |f(z) - f(x)| <= sum_i LS(z_i) and
LS(z_i) <= A^(i)(x) <= min(G, U_i(x)), so reaching f(z) = y takes at least len_L changes.
*1-Lipschitz:* for adjacent x, x' and k = len_L(x; y), |y - f(x')| <= C_k(x) + |f(x) - f(x')|
<= sum_{i<k} min(G, U_{i+1}(x')) + min(G, U_0(x')) = C_{k+1}(x'), so len_L(x'; y) <= k + 1 (and
symmetrically). The minimum over the y of a public output cell is 1-Lipschitz too, so the release
(the EM over ``resolution`` public cells of the output range, exact sampling) is epsilon-DP under the
adjacency of the family, for one record (wrap the family in ``PersonLevel`` for units of C records).

The loop that accumulates C_k depends on the data (work bound ``MAX_STEPS``, a public cap: len is
capped there, which keeps it 1-Lipschitz). Floating-point sums are rounded upward; the argument above
is in real arithmetic, as for the smooth-sensitivity families.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms.exponential import exponential_mechanism
from dpsense.mechanisms.result import MechanismResult
from dpsense.sensitivity._numeric import bounds_interval, clipped_sorted, finite_values
from dpsense.sensitivity.closest_pair import (
    closest_pair_family,
    closest_pair_inputs,
)
from dpsense.sensitivity.smooth import MonotoneFamily
from dpsense.sensitivity.triangles import TriangleFamily, as_graph, check_edge_privacy_unit, triangle_count
from dpsense.sensitivity.trimmed_mean import TrimmedMeanFamily, trimmed_mean

#: Public cap on the path-length scan (len is capped here; capping keeps it 1-Lipschitz).
MAX_STEPS = 1 << 20


def cumulative_reach(family: MonotoneFamily, needed: float) -> list[float]:
    """C_0 = 0, C_1, ... up to the first C_k >= ``needed`` (or ``MAX_STEPS`` terms), rounded upward."""
    cap = float(family.cap)
    reach = [0.0]
    k = 0
    while reach[-1] < needed and k < MAX_STEPS:
        reach.append(math.nextafter(reach[-1] + min(cap, float(family.upper(k))), math.inf))
        k += 1
    return reach


def inverse_sensitivity_with_family(
    value: float,
    family: MonotoneFamily,
    *,
    output_range: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = 1024,
) -> MechanismResult:
    """Release f(x) by the inverse-sensitivity mechanism with the family's path-length lower bound.

    Args:
        value: f(x) (private; it never appears in the result).
        family: a monotone family for f under the adjacency being protected.
        output_range: the public range [lo, hi] split into ``resolution`` equal cells.
        epsilon: the privacy loss (> 0).
        resolution: number of public output cells (1 <= K <= 2**20).

    Returns:
        The midpoint of the chosen cell, with loss ``PureDP(epsilon)``.

    """
    eps = check_epsilon(epsilon)
    lo, hi = float(output_range[0]), float(output_range[1])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidBounds("output_range must be finite with lo < hi", output_range, "declare e.g. (0, 100)")
    if not integer_in(resolution, 1, 1 << 20):
        raise UsageError("resolution must be an integer in [1, 2^20]", resolution, "pass e.g. resolution=1024")
    edges = lo + (hi - lo) * np.arange(resolution + 1) / resolution
    v = min(max(float(value), lo), hi)
    gap = np.maximum(0.0, np.maximum(edges[:-1] - v, v - edges[1:]))
    reach = cumulative_reach(family, float(gap.max()))
    lengths = np.searchsorted(np.asarray(reach), gap, side="left")
    chosen = exponential_mechanism([-int(n) for n in lengths], epsilon=eps, sensitivity=1)
    index = int(chosen.value)
    return MechanismResult(
        value=float((edges[index] + edges[index + 1]) / 2),
        loss=PureDP(eps),
        accuracy=None,
        mechanism="inverse_sensitivity/family@1",
        guarantee=(
            f"{PureDP(eps)}-DP under the adjacency of the monotone family: exponential mechanism with a 1-Lipschitz "
            "lower bound on the path length (Asi-Duchi 2020; McSherry-Talwar 2007)"
        ),
        details={"output_range": (lo, hi), "resolution": resolution, "sampler": "exact categorical"},
    )


def inverse_sensitivity_trimmed_mean(
    values: ArrayLike,
    *,
    trim: int,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    resolution: int = 1 << 16,
) -> MechanismResult:
    """The m-trimmed mean by the family-based inverse-sensitivity mechanism (replace, n public)."""
    lo, hi = bounds_interval(bounds)
    ordered = clipped_sorted(np.sort(finite_values(values)), lo, hi)
    return inverse_sensitivity_with_family(
        trimmed_mean(ordered, trim, (lo, hi)),
        TrimmedMeanFamily(ordered, trim, (lo, hi)),
        output_range=(lo, hi),
        epsilon=epsilon,
        resolution=resolution,
    )


def inverse_sensitivity_min_distance(
    points: ArrayLike,
    *,
    box: tuple[float, float],
    epsilon: NumberLike,
    adjacency: Adjacency | str,
    resolution: int = 1024,
) -> MechanismResult:
    """The minimum pairwise distance by the family-based inverse-sensitivity mechanism, on [0, G]."""
    adj = Adjacency.parse(adjacency)
    pts, value, cap, top = closest_pair_inputs(points, low=float(box[0]), high=float(box[1]), adjacency=adj)
    family = closest_pair_family(pts, G=cap, variant="auto")
    return inverse_sensitivity_with_family(
        value, family, output_range=(0.0, top), epsilon=epsilon, resolution=resolution
    )


def inverse_sensitivity_triangle_count(
    graph: object,
    *,
    privacy_unit: str,
    count_bound: float,
    epsilon: NumberLike,
    resolution: int | None = None,
) -> MechanismResult:
    """The triangle count (edge-level) by the family-based inverse-sensitivity mechanism on [0, count_bound]."""
    check_edge_privacy_unit(privacy_unit)
    g = as_graph(graph)
    cells = resolution if resolution is not None else max(1, min(1 << 20, math.ceil(count_bound)))
    return inverse_sensitivity_with_family(
        float(triangle_count(g)),
        TriangleFamily(g),
        output_range=(0.0, float(count_bound)),
        epsilon=epsilon,
        resolution=cells,
    )
