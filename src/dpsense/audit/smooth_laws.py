"""Smooth-sensitivity audit laws: noise settings, statistics, adversarial pairs and controls.

The building blocks of ``dpsense.audit.smooth_scenarios`` (see its docstring for the method).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.accounting.zcdp import zcdp_to_approx_tight
from dpsense.audit._types import Sampler
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PureDP
from dpsense.mechanisms import smooth_noise
from dpsense.mechanisms.result import MechanismResult
from dpsense.mechanisms.smooth import (
    noise_floor,
    smooth_median,
    smooth_min_distance,
    smooth_triangle_count,
    smooth_trimmed_mean,
)
from dpsense.mechanisms.smooth_noise import Family, SmoothNoisePlan, plan_smooth_noise
from dpsense.sensitivity.closest_pair import (
    closest_pair_family,
    closest_pair_global_sensitivity,
    closest_pair_local_sensitivity,
    closest_pair_smooth_bound,
    min_pairwise_distance,
)
from dpsense.sensitivity.order_statistics import (
    OrderStatisticFamily,
    median_rank,
    order_statistic_local_sensitivity,
    resize_to_public_n,
    smooth_order_statistic,
)
from dpsense.sensitivity.smooth import MonotoneFamily
from dpsense.sensitivity.triangles import (
    TriangleFamily,
    UndirectedGraph,
    triangle_count,
    triangle_local_sensitivity,
    triangle_smooth_sensitivity,
)
from dpsense.sensitivity.trimmed_mean import (
    TrimmedMeanFamily,
    trimmed_mean,
    trimmed_mean_local_sensitivity,
    trimmed_mean_smooth_sensitivity,
)

F64 = NDArray[np.float64]
Points = tuple[tuple[float, ...], ...]
Edges = tuple[tuple[int, int], ...]

# --------------------------------------------------------------------------------------------------
# Noise choices and their claims.


@dataclass(frozen=True)
class Noise:
    """A public noise choice for a smooth release, in the form the public functions take it.

    Attributes:
        family: the smooth-noise family.
        epsilon: ε (pure and (ε, δ) families).
        delta: δ ('laplace', 'gaussian').
        rho: ρ ('lln', 'uln').
        options: shape parameters (``noise_options`` of the public functions), e.g. (("dof", 3.0),).
        audit_delta: for a ρ-zCDP family, the δ at which the claim is converted to (ε, δ).

    """

    family: Family
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    options: tuple[tuple[str, float], ...] = ()
    audit_delta: float = 0.0

    @property
    def plan(self) -> SmoothNoisePlan:
        """The product's calibration for this choice."""
        return _plan(self)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``smooth_median`` and the other public smooth releases."""
        return {
            "noise": self.family,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "noise_options": dict(self.options) or None,
        }

    def claim(self) -> tuple[float, float]:
        """The claimed (ε, δ): the plan's own loss, a ρ-zCDP loss converted at ``audit_delta``."""
        loss = self.plan.loss
        if isinstance(loss, PureDP):
            return float(loss.epsilon), 0.0
        if isinstance(loss, ApproxDP):
            return float(loss.epsilon), float(loss.delta)
        assert isinstance(loss, ZCDP)
        approx = zcdp_to_approx_tight(loss.rho, self.audit_delta)
        return float(approx.epsilon), float(approx.delta)

    @property
    def label(self) -> str:
        """A short name for tables, e.g. ``cauchy`` or ``student_t(dof=3)``."""
        opts = ",".join(f"{k}={v:g}" for k, v in self.options)
        return f"{self.family}({opts})" if opts else self.family


@cache
def _plan(noise: Noise) -> SmoothNoisePlan:
    options = dict(noise.options)
    return plan_smooth_noise(
        family=noise.family,
        epsilon=noise.epsilon,
        delta=noise.delta,
        rho=noise.rho,
        gamma=options.get("gamma"),
        dof=options.get("dof"),
    )


#: Pure ε = 1: s = t = 1/2, the library's default smooth noise.
CAUCHY = Noise("cauchy", epsilon=1.0)
#: (1, 0.05): δ large enough that δ-events are observable; β = 1/(2 ln 40) ~ 0.136 (plan checks the exact condition).
LAPLACE = Noise("laplace", epsilon=1.0, delta=0.05)
GAUSSIAN = Noise("gaussian", epsilon=1.0, delta=0.05)
STUDENT_T = Noise("student_t", epsilon=1.0, options=(("dof", 3.0),))
POLYNOMIAL = Noise("polynomial", epsilon=1.0, options=(("gamma", 4.0),))
#: ρ = 1/2 (ε_c = 1), audited at (zcdp_to_approx_tight(1/2, 1e-3).epsilon ~ 3.54, 1e-3).
LLN = Noise("lln", rho=0.5, audit_delta=1e-3)
ULN = Noise("uln", rho=0.5, audit_delta=1e-3)

# --------------------------------------------------------------------------------------------------
# One smooth release on one dataset, sampled many times.


@dataclass(frozen=True)
class SmoothLaw:
    """The output law of one smooth release on one dataset: clamp(round_g(f(x) + (S(x)/s) Z)), Z ~ plan.

    Attributes:
        value: f(x).
        bound: the noise bound S(x) handed to ``release_with_smooth_bound`` (the smooth bound with the
            public floor of ``dpsense.mechanisms.smooth``, or a control's wrong bound).
        plan: the public noise plan.
        output_grid: the public output grid g.
        clamp: the public output range.

    """

    value: float
    bound: float
    plan: SmoothNoisePlan
    output_grid: float
    clamp: tuple[float, float]

    def sample(self, n: int) -> F64:
        """``n`` independent releases: ``release_with_smooth_bound``'s arithmetic on a vector of noise.

        The product's own arithmetic (``smooth_noise.gridded_noisy_values``, which
        ``release_with_smooth_bound`` runs): 1/s and the scale S/s rounded up, value + scale * Z with
        Z from the product sampler, rounding to the grid with exact ties broken by a fair bit, then
        the clamp. Each output has the law of one call of the mechanism.
        """
        values = np.full(n, self.value, dtype=np.float64)
        return smooth_noise.gridded_noisy_values(
            values, self.bound, self.plan, output_grid=self.output_grid, clamp=self.clamp
        )


@dataclass(frozen=True)
class SmoothStatistic:
    """A statistic with a smooth release, as the product computes it, for one public setting.

    Attributes:
        name: the public function's name.
        value: f(x).
        bound: (x, β) -> the product's β-smooth upper bound S_β(x) (before the release's public floor).
        local: the exact local sensitivity LS(x) (for the LS control only).
        family: the product's monotone family U_k of x (for the truncated-loop control only).
        release: (x, noise) -> one end-to-end call of the public function.

    """

    name: str
    value: Callable[[Any], float]
    bound: Callable[[Any, float], float]
    local: Callable[[Any], float]
    family: Callable[[Any], MonotoneFamily]
    release: Callable[[Any, Noise], MechanismResult]

    def law(self, data: Any, noise: Noise, *, bound: float | None = None) -> SmoothLaw:
        """The product's release law on ``data``, or the law with a control's ``bound`` (no floor)."""
        public = self.release(data, noise).details
        plan = noise.plan
        if bound is None:
            floor = noise_floor(float(public["public_cap"]))
            bound = max(self.bound(data, plan.beta_float), floor)
        return SmoothLaw(self.value(data), bound, plan, float(public["output_grid"]), tuple(public["clamp"]))


def median_statistic(bounds: tuple[float, float]) -> SmoothStatistic:
    """``smooth_median`` under replace adjacency: rank (n + 1) // 2, S* of ``smooth_order_statistic``."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.asarray(x, dtype=np.float64))

    return SmoothStatistic(
        "smooth_median",
        value=lambda x: smooth_order_statistic(x, bounds=bounds, beta=1.0).value,
        bound=lambda x, beta: smooth_order_statistic(x, bounds=bounds, beta=beta).smooth_sensitivity,
        local=lambda x: order_statistic_local_sensitivity(ordered(x), median_rank(len(x)), bounds),
        family=lambda x: OrderStatisticFamily(ordered(x), median_rank(len(x)), bounds),
        release=lambda x, noise: smooth_median(x, bounds=bounds, adjacency="replace", **noise.kwargs()),
    )


def trimmed_mean_statistic(trim: int, bounds: tuple[float, float]) -> SmoothStatistic:
    """``smooth_trimmed_mean`` under replace adjacency (Bun-Steinke's A^(k) family)."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.asarray(x, dtype=np.float64))

    return SmoothStatistic(
        "smooth_trimmed_mean",
        value=lambda x: trimmed_mean(ordered(x), trim, bounds),
        bound=lambda x, beta: trimmed_mean_smooth_sensitivity(x, bounds=bounds, trim=trim, beta=beta),
        local=lambda x: trimmed_mean_local_sensitivity(ordered(x), trim, bounds),
        family=lambda x: TrimmedMeanFamily(ordered(x), trim, bounds),
        release=lambda x, noise: smooth_trimmed_mean(
            x, trim=trim, bounds=bounds, adjacency="replace", **noise.kwargs()
        ),
    )


def median_public_n_statistic(bounds: tuple[float, float], public_n: int) -> SmoothStatistic:
    """``smooth_median`` under add/remove adjacency with a public n: the data resized to n first.

    This is how the release system runs a smooth quantile (n is a released noisy count): one added or
    removed record is at most one replacement of the resized data (``resize_to_public_n``).
    """

    def resized(x: Sequence[float]) -> F64:
        return resize_to_public_n(x, public_n=public_n, bounds=bounds)

    rank = median_rank(public_n)
    return SmoothStatistic(
        "smooth_median",
        value=lambda x: float(resized(x)[rank - 1]),
        bound=lambda x, beta: (
            smooth_order_statistic(
                x, bounds=bounds, beta=beta, adjacency="add_remove", public_n=public_n
            ).smooth_sensitivity
        ),
        local=lambda x: order_statistic_local_sensitivity(resized(x), rank, bounds),
        family=lambda x: OrderStatisticFamily(resized(x), rank, bounds),
        release=lambda x, noise: smooth_median(
            x, bounds=bounds, adjacency="add_remove", public_n=public_n, **noise.kwargs()
        ),
    )


def trimmed_mean_public_n_statistic(trim: int, bounds: tuple[float, float], public_n: int) -> SmoothStatistic:
    """``smooth_trimmed_mean`` under add/remove adjacency with a public n (the release system's form)."""

    def resized(x: Sequence[float]) -> F64:
        return resize_to_public_n(x, public_n=public_n, bounds=bounds)

    return SmoothStatistic(
        "smooth_trimmed_mean",
        value=lambda x: trimmed_mean(resized(x), trim, bounds),
        bound=lambda x, beta: trimmed_mean_smooth_sensitivity(
            x, bounds=bounds, trim=trim, beta=beta, adjacency="add_remove", public_n=public_n
        ),
        local=lambda x: trimmed_mean_local_sensitivity(resized(x), trim, bounds),
        family=lambda x: TrimmedMeanFamily(resized(x), trim, bounds),
        release=lambda x, noise: smooth_trimmed_mean(
            x, trim=trim, bounds=bounds, adjacency="add_remove", public_n=public_n, **noise.kwargs()
        ),
    )


def min_distance_statistic(box: tuple[float, float]) -> SmoothStatistic:
    """``smooth_min_distance`` under replace adjacency in the box [low, high]^d (M in 1-D, W otherwise)."""

    def points(x: Points) -> F64:
        return np.asarray(x, dtype=np.float64)

    def cap(x: Points) -> float:
        p = points(x)
        return closest_pair_global_sensitivity(adjacency="replace", dim=p.shape[1], low=box[0], high=box[1], n=len(x))

    return SmoothStatistic(
        "smooth_min_distance",
        value=lambda x: min(cap(x), min_pairwise_distance(points(x))),
        bound=lambda x, beta: closest_pair_smooth_bound(points(x), beta=beta, G=cap(x)),
        local=lambda x: closest_pair_local_sensitivity(points(x), low=box[0], high=box[1], adjacency="replace"),
        family=lambda x: closest_pair_family(points(x), G=cap(x), variant="auto"),
        release=lambda x, noise: smooth_min_distance(points(x), box=box, adjacency="replace", **noise.kwargs()),
    )


@cache
def _graph(edges: Edges, num_vertices: int) -> UndirectedGraph:
    # One validated graph per edge set: it caches its (deterministic) pair analysis, so repeated
    # end-to-end releases do not redo the sparse products; each release still runs the whole public path.
    return UndirectedGraph(np.asarray(edges, dtype=np.int64).reshape(-1, 2), num_vertices=num_vertices)


def triangle_statistic(num_vertices: int) -> SmoothStatistic:
    """``smooth_triangle_count`` on the public vertex set [n], edge-level adjacency."""

    def graph(edges: Edges) -> UndirectedGraph:
        return _graph(edges, num_vertices)

    return SmoothStatistic(
        "smooth_triangle_count",
        value=lambda e: float(triangle_count(graph(e))),
        bound=lambda e, beta: triangle_smooth_sensitivity(graph(e), beta=beta, privacy_unit="edge"),
        local=lambda e: float(triangle_local_sensitivity(graph(e))),
        family=lambda e: TriangleFamily(graph(e)),
        release=lambda e, noise: smooth_triangle_count(graph(e), privacy_unit="edge", **noise.kwargs()),
    )


# --------------------------------------------------------------------------------------------------
# The adversarial neighbouring pairs (replace one record / one point / one edge).

MEDIAN_BOUNDS = (0.0, 100.0)
#: The seed notes' pair (docs/math/local-sensitivity.md §2.2): both medians are 0, LS(x) = 0 but LS(x') = 100. S*(x) =
#: 100 e^-β (one change away the median is unstable) and S*(x') = 100: a pure dilation by the full
#: e^β. Noise calibrated to LS releases exactly 0 on x (control 1). Exact Cauchy loss 0.50.
SEED_X = (0.0, 0.0, 0.0, 0.0, 0.0, 100.0, 100.0)
SEED_Y = (0.0, 0.0, 0.0, 0.0, 100.0, 100.0, 100.0)
#: The worst pair for the Cauchy median (exhaustive search, n = 7 on {0, 10, ..., 100}): replacing 70
#: by 100 moves the median by LS(x) = 30 and S* from 50 e^-β to 50 (β = 1/2): shift and dilation
#: are both maximal. Exact Cauchy loss 0.625 (about the most any pair can reach with s = t = 1/2).
SHIFT_X = (50.0, 50.0, 50.0, 70.0, 100.0, 100.0, 100.0)
SHIFT_Y = (50.0, 50.0, 50.0, 100.0, 100.0, 100.0, 100.0)
#: The median's LS is 1 and A^(1) = 2, but two changes away lies LS = 96 (n = 9, rank 5): S*(x) =
#: 96 e^-2β, and one change later (6 -> 100) S*(x') = 96 e^-β. A loop cut after K = 2 terms without
#: its tail term sees at most 2 e^-β on x but 96 e^-β on x' (control 2, scale ratio 48).
JUMP_X = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0, 100.0)
JUMP_Y = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 100.0, 100.0, 100.0)

TRIM = 1
#: The worst pair for the Cauchy 1-trimmed mean (exhaustive, n = 7 on {0, 10, ..., 100}): replacing a
#: kept 50 by 100 moves the mean by LS(x) = 30/5 = 6 and S* from 10 e^-β to 10: both extremes.
#: Exact loss 0.625 (Cauchy), 0.67 at δ = 1e-3 (ULN).
TRIM_X = (50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 80.0)
TRIM_Y = (50.0, 50.0, 50.0, 50.0, 50.0, 80.0, 100.0)
#: The worst pair for the LLN (ρ = 1/2, β = 1/5) trimmed mean (same search): the mean moves by 12 and
#: S* by e^β. Exact loss 0.58 at δ = 1e-3 (claim 3.54: the zCDP conversion is loose for this noise).
TRIM_LLN_X = (30.0, 30.0, 70.0, 70.0, 70.0, 70.0, 90.0)
TRIM_LLN_Y = (30.0, 70.0, 70.0, 70.0, 70.0, 90.0, 100.0)
#: All seven values equal: LS(x) = 0, while one value moved to 100 gives LS(x') = 10 with the same
#: mean (control 1 for the trimmed mean).
FLAT_X = (50.0,) * 7
FLAT_Y = (50.0,) * 6 + (100.0,)

LINE_BOX = (0.0, 12.0)
#: 1-D closest pair, exact deletion values (exhaustive, n = 5 on {0, ..., 12}): the isolated point 6 is
#: moved onto 9, so f drops from 1 to 0 (by LS = 1) and S from 1.82 to 1.10 (e^-β). Exact Cauchy loss 0.57.
LINE_X = ((6.0,), (9.0,), (10.0,), (11.0,), (12.0,))
LINE_Y = ((9.0,), (9.0,), (10.0,), (11.0,), (12.0,))

UNIT_BOX = (0.0, 1.0)
#: Dataset A of the seed notes: 20 uniform points in [0, 1]^2 (numpy seed 42, rounded to 4 decimals).
POINTS_A: Points = (
    (0.3745, 0.9507), (0.732, 0.5987), (0.156, 0.156), (0.0581, 0.8662), (0.6011, 0.7081),
    (0.0206, 0.9699), (0.8324, 0.2123), (0.1818, 0.1834), (0.3042, 0.5248), (0.4319, 0.2912),
    (0.6119, 0.1395), (0.2921, 0.3664), (0.4561, 0.7852), (0.1997, 0.5142), (0.5924, 0.0465),
    (0.6075, 0.1705), (0.0651, 0.9489), (0.9656, 0.8084), (0.3046, 0.0977), (0.6842, 0.4402),
)  # fmt: skip
#: A with point 19 moved onto point 15 (an endpoint of A's closest pair 10-15): a coincident pair is
#: created, so f drops by its full LS(A) = f(A) = 0.031, and S falls from 0.130 to 0.085 (ratio 1.52,
#: close to e^β = 1.65): the hardest of ~100 000 single-point moves searched (3 000 random targets and
#: targets around every point, for each of the 20 points). Exact Cauchy loss 0.43.
POINTS_A_COLLAPSED: Points = (*POINTS_A[:19], POINTS_A[15])

CLUSTER_BOX = (0.0, 10.0)
#: Dataset B of the seed notes: 19 points within 0.02 of the origin, three of them coincident at the
#: origin (so f = 0, docs/math/closest-pair.md §6.7), plus an outlier at (10, 10).
POINTS_B: Points = (
    (0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0158, 0.0077), (0.0047, 0.0054), (0.0046, 0.0047),
    (0.0024, 0.0191), (0.0172, 0.0056), (0.0101, 0.0031), (0.0091, 0.0141), (0.0147, 0.0023),
    (0.0007, 0.0142), (0.0054, 0.0011), (0.0115, 0.0038), (0.006, 0.0029), (0.006, 0.0185),
    (0.0001, 0.0106), (0.0082, 0.0122), (0.0021, 0.0196), (10.0, 10.0),
)  # fmt: skip
#: B with the outlier moved into the cluster, to (0.005, 0.005) (the hardest of ~16 000 single-point
#: moves searched): f stays 0, but the new point sits next to the coincident triple, W_2 (the third
#: smallest distance to a third-nearest neighbour) drops from 0.0044 to 0.0023 and S falls by exactly
#: e^-β (a pure dilation, exact Cauchy loss 0.50). Moving the outlier anywhere outside the cluster
#: changes nothing: S(B) = 0.0026 is set by the cluster's k = 1 term, not by the outlier (whose term
#: is e^-17β G = 0.0007), so B's smooth bound is 50 times smaller than A's (docs/math/closest-pair.md §6.7).
POINTS_B_MERGED: Points = (*POINTS_B[:19], (0.005, 0.005))

TRIANGLE_VERTICES = 6
#: The worst single-edge pair on 6 vertices (exhaustive over all 2^15 graphs): two triangles sharing
#: the hub 5, plus the pendant edge 0-5. Adding the edge 2-4 closes the triangle 2-4-5 (the count
#: moves by LS = 1) and raises the largest common-neighbour count from 1 to 2, so S* goes from
#: 2 e^-β to 2: both extremes. Exact Cauchy loss 0.59 (on the integer output grid).
TRIANGLES: Edges = ((0, 5), (1, 2), (1, 5), (2, 5), (3, 4), (3, 5), (4, 5))
TRIANGLES_PLUS: Edges = (*TRIANGLES, (2, 4))

# --------------------------------------------------------------------------------------------------
# Samplers for smooth releases.


def pair_sampler(draw: Callable[[Any, int], F64], x: Any, y: Any) -> Sampler:
    """A ``Scenario`` sampler: ``draw(x, n)`` and ``draw(y, n)``, n outputs of one mechanism on each side."""

    def sample(n: int) -> tuple[F64, F64]:
        return draw(x, n), draw(y, n)

    return sample


def smooth_pair(stat: SmoothStatistic, x: Any, y: Any, noise: Noise) -> Sampler:
    """Outputs of the product's smooth release on x and on y (vectorised, see the module docstring)."""
    return pair_sampler(lambda d, n: stat.law(d, noise).sample(n), x, y)


def end_to_end_pair(stat: SmoothStatistic, x: Any, y: Any, noise: Noise) -> Sampler:
    """Outputs of ``n`` calls of the public function on x and on y (tests the wiring)."""

    def draw(data: Any, n: int) -> F64:
        return np.asarray([float(stat.release(data, noise).value) for _ in range(n)], dtype=np.float64)

    return pair_sampler(draw, x, y)


def control_local_sensitivity(stat: SmoothStatistic, x: Any, y: Any, noise: Noise) -> Sampler:
    """Control 1: ``release_with_smooth_bound`` handed LS(x) instead of a smooth bound (local-sensitivity page).

    See docs/math/local-sensitivity.md.
    """
    return pair_sampler(lambda d, n: stat.law(d, noise, bound=stat.local(d)).sample(n), x, y)


def truncated_without_tail(family: MonotoneFamily, beta: float, terms: int) -> float:
    """max_{k<K} e^{-kβ} min(G, U_k): the early-stopping loop WITHOUT its tail term e^{-Kβ} G (a bug)."""
    G = float(family.cap)
    return max(math.exp(-k * beta) * min(G, family.upper(k)) for k in range(terms))


def control_truncated_loop(stat: SmoothStatistic, x: Any, y: Any, noise: Noise, *, terms: int) -> Sampler:
    """Control 2: S from the product's family, the loop cut after ``terms`` terms and the tail dropped."""

    def draw(data: Any, n: int) -> F64:
        bound = truncated_without_tail(stat.family(data), noise.plan.beta_float, terms)
        return stat.law(data, noise, bound=bound).sample(n)

    return pair_sampler(draw, x, y)


def control_wrong_beta(stat: SmoothStatistic, x: Any, y: Any, noise: Noise, *, beta: float) -> Sampler:
    """Control 3: S computed by the product with ``beta`` larger than the plan's (docs/math/smooth-sensitivity.md §3.3).

    The mismatch is pitfall 2 there.
    """
    return pair_sampler(lambda d, n: stat.law(d, noise, bound=stat.bound(d, beta)).sample(n), x, y)
