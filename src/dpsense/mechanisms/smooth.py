"""Smooth-sensitivity releases of statistics whose global sensitivity is useless.

Each function computes a beta-smooth upper bound S(x) on the statistic's local sensitivity with the
beta of a public noise plan (``dpsense.mechanisms.smooth_noise.plan_smooth_noise``), then releases
f(x) + (S(x)/s) Z rounded to a public grid and clamped to the public range
(``release_with_smooth_bound``). The guarantee is the plan's (pure epsilon for Cauchy-type and
Student's t noise, (epsilon, delta) for Laplace/Gaussian, rho-zCDP for LLN/ULN; NRS07 section 2-3,
Bun-Steinke 2019 section 3), under the adjacency the smooth bound is computed for:

* order statistics and trimmed means: replace one record with n public, or add/remove one record
  with a declared ``public_n`` (the data are resized to public_n; one added or removed record is then
  at most one replacement, ``dpsense.sensitivity.order_statistics.resize_to_public_n``);
* the minimum pairwise distance: replace or add/remove one point (docs/math/closest-pair.md);
* triangle counts: one edge (edge-level privacy only).

With ``max_records_per_unit=C`` the bound is the unit-level family U'_k (``PersonLevel``).

Two public constants keep the release well defined: the output grid g is ``max(|L|, |U|) * 2**-20``
rounded up to a power of two unless the caller names one, and S is raised to at least G * 2**-52
(``noise_floor``; a public constant c keeps S beta-smooth, since max(S(x), c) <= max(e^beta S(x'), c)
<= e^beta max(S(x'), c)). A noisy value on an exact half-grid point (the float corner of
``dpsense.noise.continuous``: a bound at its floor adds less than one ulp) is rounded up or down by a
fresh fair bit, as the ideal mechanism's output would be by symmetry. Nothing data-dependent
(f(x), S(x), the noise scale) appears in the result.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike
from dpsense.mechanisms.result import MechanismResult
from dpsense.mechanisms.smooth_noise import Family, SmoothNoisePlan, plan_smooth_noise, release_with_smooth_bound
from dpsense.sensitivity._numeric import bounds_interval, clipped_sorted, finite_values
from dpsense.sensitivity.closest_pair import closest_pair_inputs, closest_pair_smooth_bound
from dpsense.sensitivity.order_statistics import (
    RankedValues,
    median_rank,
    resize_to_public_n,
    smooth_order_statistic,
)
from dpsense.sensitivity.triangles import (
    as_graph,
    check_edge_privacy_unit,
    triangle_count,
    triangle_global_sensitivity,
    triangle_smooth_sensitivity,
)
from dpsense.sensitivity.trimmed_mean import trimmed_mean, trimmed_mean_smooth_sensitivity

#: Relative floor of S (a public constant times the public cap G).
S_FLOOR = 2.0**-52
#: Default output grid: max(|L|, |U|) * 2**-OUTPUT_GRID_BITS, rounded up to a power of two.
OUTPUT_GRID_BITS = 20


def _plan(
    noise: Family,
    epsilon: NumberLike | None,
    delta: NumberLike | None,
    rho: NumberLike | None,
    options: dict[str, Any] | None,
) -> SmoothNoisePlan:
    return plan_smooth_noise(family=noise, epsilon=epsilon, delta=delta, rho=rho, **(options or {}))


def _grid(clamp: tuple[float, float], output_grid: float | None) -> float:
    if output_grid is not None:
        return output_grid
    magnitude = max(abs(clamp[0]), abs(clamp[1]))
    return float(2.0 ** math.ceil(math.log2(magnitude * 2.0**-OUTPUT_GRID_BITS)))


def noise_floor(cap: float) -> float:
    """The public floor of the smooth bound: G * S_FLOOR (a public constant keeps S beta-smooth).

    A floor at one output grid cell (g * s) was tried for the float corner of an exact half-grid tie
    and dropped: the fair tie bit of ``smooth_noise.gridded_noisy_values`` removes that corner, and
    the grid floor multiplied the error of sparse triangle counts at ε = 1 by about 10 and of the
    minimum distance at ε = 0.1 by about 3.6 (benchmarks/estimators.py, issue 13 note).
    """
    return cap * S_FLOOR


def _release(
    value: float,
    bound: float,
    cap: float,
    plan: SmoothNoisePlan,
    *,
    clamp: tuple[float, float],
    output_grid: float | None,
    statistic: str,
    adjacency: str,
) -> MechanismResult:
    grid = _grid(clamp, output_grid)
    floor = noise_floor(cap)
    result = release_with_smooth_bound(value, max(bound, floor), plan, output_grid=grid, clamp=clamp)
    details = {**result.details, "statistic": statistic, "adjacency": adjacency, "public_cap": cap}
    return MechanismResult(
        value=result.value,
        loss=result.loss,
        accuracy=result.accuracy,
        mechanism=f"smooth/{statistic}/{result.mechanism}",
        guarantee=f"{result.guarantee}; smooth sensitivity of the {statistic} under {adjacency}",
        details=details,
    )


def smooth_quantile(
    values: ArrayLike | RankedValues,
    *,
    q: float | None = None,
    rank: int | None = None,
    bounds: tuple[float, float],
    noise: Family = "cauchy",
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    rho: NumberLike | None = None,
    adjacency: Adjacency | str,
    public_n: int | None = None,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
    output_grid: float | None = None,
    noise_options: dict[str, Any] | None = None,
) -> MechanismResult:
    """Release an order statistic (rank r, or r = max(1, ceil(q n)) with n public) by smooth sensitivity.

    The rank is computed from the public n (``public_n`` under add/remove, len(values) under replace),
    never from anything else in the data. ``values`` may be ``RankedValues`` (clipped values known by
    rank, e.g. an engine's distributed selection): only the window of ranks the bound needs is read.
    """
    adj = Adjacency.parse(adjacency)
    plan = _plan(noise, epsilon, delta, rho, noise_options)
    if (q is None) == (rank is None):
        raise UsageError("pass exactly one of q and rank", (q, rank), "e.g. q=0.5 for the median")
    if rank is None:
        size = values.size if isinstance(values, RankedValues) else np.asarray(values).size
        n = public_n if adj is Adjacency.ADD_REMOVE else size
        if n is None:
            raise UsageError("add/remove adjacency needs a declared public_n", None, "declare public_n")
        qq = float(q)  # type: ignore[arg-type]
        if not 0 <= qq <= 1:
            raise UsageError("q must lie in [0, 1]", q, "pass e.g. q=0.5")
        rank = max(1, math.ceil(qq * n)) if qq != 0.5 else median_rank(n)
    stat = smooth_order_statistic(
        values,
        bounds=bounds,
        beta=plan.beta_float,
        rank=rank,
        adjacency=adj,
        public_n=public_n,
        max_records_per_unit=max_records_per_unit,
        constant_work=constant_work,
    )
    lo, hi = bounds_interval(bounds)
    return _release(
        stat.value,
        stat.smooth_sensitivity,
        hi - lo,
        plan,
        clamp=(lo, hi),
        output_grid=output_grid,
        statistic=f"order statistic of rank {rank}",
        adjacency=adj.value,
    )


def smooth_median(values: ArrayLike, **kwargs: Any) -> MechanismResult:
    """``smooth_quantile`` at the median rank (n + 1) // 2 (the lower median for even n, never an average)."""
    return smooth_quantile(values, q=0.5, **kwargs)


def smooth_trimmed_mean(
    values: ArrayLike,
    *,
    trim: int,
    bounds: tuple[float, float],
    noise: Family = "lln",
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    rho: NumberLike | None = None,
    adjacency: Adjacency | str,
    public_n: int | None = None,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
    output_grid: float | None = None,
    noise_options: dict[str, Any] | None = None,
) -> MechanismResult:
    """Release the m-trimmed mean (drop ``trim`` values at each end, n public) by smooth sensitivity.

    Bun-Steinke 2019 pair it with Laplace-log-normal noise (rho-zCDP), the default here.
    """
    adj = Adjacency.parse(adjacency)
    plan = _plan(noise, epsilon, delta, rho, noise_options)
    lo, hi = bounds_interval(bounds)
    data = finite_values(values)
    if adj is Adjacency.ADD_REMOVE:
        if public_n is None:
            raise UsageError("add/remove adjacency needs a declared public_n", None, "declare public_n")
        data = resize_to_public_n(data, public_n=public_n, bounds=(lo, hi))
    ordered = clipped_sorted(np.sort(data), lo, hi)
    value = trimmed_mean(ordered, trim, (lo, hi))
    bound = trimmed_mean_smooth_sensitivity(
        values,
        bounds=(lo, hi),
        trim=trim,
        beta=plan.beta_float,
        adjacency=adj,
        public_n=public_n,
        max_records_per_unit=max_records_per_unit,
        constant_work=constant_work,
    )
    return _release(
        value,
        bound,
        hi - lo,
        plan,
        clamp=(lo, hi),
        output_grid=output_grid,
        statistic=f"{trim}-trimmed mean",
        adjacency=adj.value,
    )


def smooth_min_distance(
    points: ArrayLike,
    *,
    box: tuple[float, float],
    noise: Family = "cauchy",
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    rho: NumberLike | None = None,
    adjacency: Adjacency | str,
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
    output_grid: float | None = None,
    noise_options: dict[str, Any] | None = None,
) -> MechanismResult:
    """Release the minimum pairwise distance of points in the public box [low, high]^d by smooth sensitivity.

    The cap G is the public global sensitivity of ``closest_pair_global_sensitivity`` for the box,
    the adjacency and n (public under replace); the monotone family is the exact 1-D deletion value
    in one dimension and the neighbour-rank bound W otherwise (docs/math/closest-pair.md).
    """
    adj = Adjacency.parse(adjacency)
    plan = _plan(noise, epsilon, delta, rho, noise_options)
    pts, value, cap, top = closest_pair_inputs(points, low=float(box[0]), high=float(box[1]), adjacency=adj)
    bound = closest_pair_smooth_bound(
        pts,
        beta=plan.beta_float,
        G=cap,
        max_records_per_unit=max_records_per_unit,
        constant_work=constant_work,
    )
    return _release(
        value,
        bound,
        cap,
        plan,
        clamp=(0.0, top),
        output_grid=output_grid,
        statistic="minimum pairwise distance",
        adjacency=adj.value,
    )


def smooth_triangle_count(
    graph: Any,
    *,
    privacy_unit: str,
    noise: Family = "cauchy",
    epsilon: NumberLike | None = None,
    delta: NumberLike | None = None,
    rho: NumberLike | None = None,
    constant_work: int | None = None,
    count_bound: float | None = None,
    output_grid: float | None = None,
    noise_options: dict[str, Any] | None = None,
) -> MechanismResult:
    """Release the triangle count of a graph on a public vertex set, edge-level, by smooth sensitivity.

    Refuses any privacy unit other than an edge (node-level privacy needs other tools). The output is
    clamped to [0, count_bound] (public; default C(n, 3)) and rounded to the public grid
    max(1, count_bound * 2**-20), a power of two, unless another public grid is named.
    """
    check_edge_privacy_unit(privacy_unit)
    plan = _plan(noise, epsilon, delta, rho, noise_options)
    g = as_graph(graph)
    n = g.num_vertices
    cap = float(max(triangle_global_sensitivity(n), 1))
    top = float(math.comb(n, 3)) if count_bound is None else float(count_bound)
    bound = triangle_smooth_sensitivity(g, beta=plan.beta_float, privacy_unit=privacy_unit, constant_work=constant_work)
    return _release(
        float(triangle_count(g)),
        bound,
        cap,
        plan,
        clamp=(0.0, top),
        output_grid=max(1.0, _grid((0.0, top), None)) if output_grid is None else output_grid,
        statistic="triangle count",
        adjacency="add/remove one edge",
    )
