"""Audit scenarios for the data-dependent mechanisms: smooth sensitivity and Propose-Test-Release.

Every data-dependent release of dpsense is run many times on two neighbouring datasets chosen to be
as hard as possible, and ``dpsense.audit.empirical.epsilon_lower_bound`` bounds its privacy loss from
below (Clopper-Pearson, events chosen on a pilot half, refusals included). A correct mechanism stays
under its claim; the ``control:`` scenarios are deliberately broken variants built here from the
product's own pieces, and the same audit on the same pairs must flag them. Nothing in this module is
on a release path.

**Mechanisms covered.** ``smooth_median`` / ``smooth_quantile`` (order statistics),
``smooth_trimmed_mean``, ``smooth_min_distance`` (exact 1-D deletion values and the 2-D
neighbour-rank bound W), ``smooth_triangle_count``, with every noise family of
``dpsense.mechanisms.smooth_noise`` (Cauchy, Student's t, polynomial tails: pure ε; Laplace,
Gaussian: (ε, δ); LLN, ULN: ρ-zCDP, audited at the (ε, δ) of ``zcdp_to_approx_tight``), and
``ptr_order_statistic``, ``ptr_trimmed_mean``, ``ptr_min_distance`` (PTR, ALGORITHMS.md 5), and
``inverse_sensitivity_median`` (its output law depends on the data through path lengths).

**What makes a pair hard** (ALGORITHMS.md 3.3). A smooth release is f(x) + (S(x)/s) Z with S a
β-smooth upper bound on the local sensitivity. Between neighbours the two output laws differ by a
shift |f(x) - f(x')| <= LS(x) <= S(x) and a dilation S(x)/S(x') in [e^-β, e^β]. The pairs below were
found by exhaustive search over small datasets (order statistics and trimmed means: n = 7 on the
grid {0, 10, ..., 100}; the 1-D closest pair: n = 5 on {0, ..., 12}; all graphs on 6 vertices) and,
for the 2-D point sets, over ~100 000 (A) and ~16 000 (B) moves of one point, maximising the exact
loss of the release; most reach both extremes at once (a shift by the full LS and a dilation by the
full e^β). The exact loss quoted for a pair is the hockey-stick divergence of the two (clamped,
gridded) output laws, computed offline by numerical integration of the noise CDF, not by this audit.
With the calibration s = t = 1/2 (ε = 1) no Cauchy pair can exceed about 0.63 (shift by min(S, S')
and dilation e^β together), and the audit's coarse events see part of that: a correct Cauchy release
reads 0.25-0.5 here, not 1. Laplace and Gaussian noise at δ = 0.05 read near 0 (their loss beyond
an event of probability 0.05 is small); their δ-events become visible under control 3. LLN and ULN
read about 0.4 against the 3.54 of the zCDP conversion, which is loose for these noises.

**Sampling.** S(x) is a deterministic function of the data, so a smooth release on x is
clamp(round_g(f(x) + (S(x)/s) Z)) with fresh Z each time. ``SmoothLaw.sample`` computes f(x) and
S(x) once with the product functions (the same ones, with the same β, that the public mechanism
calls), reads the public output grid, clamp and cap from one end-to-end call, and then evaluates
``release_with_smooth_bound``'s arithmetic on a vector of Z drawn by the product sampler
``standard_noise``: the same law as calling the mechanism n times (the statistical tests check the
arithmetic bit for bit). PTR is vectorised the same way (the distance is deterministic, the test and
release noise come from the Laplace mechanism's own plan and exact sampler, the threshold from the
public details of one ``propose_test_release`` call). Scenarios named ``(end to end)`` instead call
the public function once per output; they are marked ``slow``.

**Controls** (each must be flagged; ALGORITHMS.md 0(b), 0(d), 2, 3.2, 3.3):

1. noise calibrated to the local sensitivity (on the seed median pair LS(x) = 0, so the output is
   exactly f(x));
2. the k-loop truncated after K terms without the tail term e^{-Kβ} G;
3. S computed with a larger β than the noise was calibrated for;
4. PTR with the threshold 0.5 (the lecture's removal count, and a valid distance).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.accounting.zcdp import zcdp_to_approx_tight
from dpsense.audit.scenarios import Sampler, Scenario
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PureDP
from dpsense.mechanisms import smooth_noise
from dpsense.mechanisms.inverse_sensitivity import inverse_sensitivity_median
from dpsense.mechanisms.laplace import laplace_plan
from dpsense.mechanisms.ptr import Refusal, propose_test_release, ptr_distance_cap
from dpsense.mechanisms.ptr_statistics import ptr_min_distance, ptr_order_statistic, ptr_trimmed_mean
from dpsense.mechanisms.result import MechanismResult
from dpsense.mechanisms.smooth import (
    S_FLOOR,
    smooth_median,
    smooth_min_distance,
    smooth_triangle_count,
    smooth_trimmed_mean,
)
from dpsense.mechanisms.smooth_noise import Family, SmoothNoisePlan, plan_smooth_noise
from dpsense.noise import exact, grid
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
    smooth_order_statistic,
)
from dpsense.sensitivity.smooth import MonotoneFamily, distance_to_instability
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

        Line for line as in ``release_with_smooth_bound``: 1/s rounded up, the scale S/s rounded up
        by one ulp, value + scale * Z with Z from the product sampler ``standard_noise``, rounding to
        the grid, then the clamp. Each output has the law of one call of the mechanism.
        """
        inv_s = float(1 / self.plan.scale_divisor)
        if Fraction(inv_s) < 1 / self.plan.scale_divisor:
            inv_s = float(np.nextafter(inv_s, math.inf))
        scale = float(np.nextafter(self.bound * inv_s, math.inf)) if self.bound > 0 else 0.0
        noisy = self.value + scale * smooth_noise.standard_noise(self.plan, n)
        out = np.rint(noisy / self.output_grid) * self.output_grid
        return np.asarray(np.clip(out, self.clamp[0], self.clamp[1]), dtype=np.float64)


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
            bound = max(self.bound(data, plan.beta_float), float(public["public_cap"]) * S_FLOOR)
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
#: The seed notes' pair (ALGORITHMS.md 2): both medians are 0, LS(x) = 0 but LS(x') = 100. S*(x) =
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
#: origin (so f = 0, ALGORITHMS.md 0(h)), plus an outlier at (10, 10).
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
#: is e^-17β G = 0.0007), so B's smooth bound is 50 times smaller than A's (ALGORITHMS.md 0(h)).
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
    """Control 1: ``release_with_smooth_bound`` handed LS(x) instead of a smooth bound (ALGORITHMS.md 2)."""
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
    """Control 3: S computed by the product with ``beta`` larger than the plan's (ALGORITHMS.md 3.3 (2))."""
    return pair_sampler(lambda d, n: stat.law(d, noise, bound=stat.bound(d, beta)).sample(n), x, y)


# --------------------------------------------------------------------------------------------------
# Propose-Test-Release.


@dataclass(frozen=True)
class PtrSetting:
    """The public parameters of one PTR release: proposed bound b, ε_test, ε_release, δ."""

    proposed_bound: float = 1.0
    epsilon_test: float = 1.0
    epsilon_release: float = 1.0
    delta: float = 0.05

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``propose_test_release`` and the ``ptr_*`` functions."""
        return {
            "proposed_bound": self.proposed_bound,
            "epsilon_test": self.epsilon_test,
            "epsilon_release": self.epsilon_release,
            "delta": self.delta,
        }

    @property
    def cap(self) -> int:
        """The public distance cap of the test."""
        return ptr_distance_cap(self.epsilon_test, self.delta)


#: b = 1, ε_test = ε_release = 1, δ = 0.05 (large, so that δ-events are observable): claim (2, 0.05).
PTR = PtrSetting()


def laplace_draws(value: float, *, sensitivity: float, epsilon: float, n: int) -> F64:
    """``n`` independent outputs of the scalar ``laplace(value, sensitivity=..., epsilon=...)``.

    The scalar mechanism snaps the value to the grid 2^k of ``laplace_plan`` (dimension 1) and adds
    exact discrete Laplace noise of integer scale t (served from a pool filled by
    ``exact.discrete_laplace``); this draws the same noise for n values at once. (Calling ``laplace``
    on an array instead would widen the scale for the dimension.)
    """
    k, t = laplace_plan(sensitivity=sensitivity, epsilon=epsilon)
    return np.asarray(grid.unsnap(grid.snap(np.full(n, value), k), exact.discrete_laplace(Fraction(t), n), k))


def ptr_draws(
    value: float, distance: int, setting: PtrSetting, clamp: tuple[float, float] | None, n: int, *, threshold: float
) -> F64:
    """``n`` outputs of ``propose_test_release(value, distance, ...)`` (NaN = refusal), vectorised.

    As in the product: noisy = distance + Lap(1/ε_test) (the Laplace mechanism); refuse unless
    noisy >= threshold; otherwise value + Lap(b/ε_release), clamped.
    """
    noisy = laplace_draws(float(distance), sensitivity=1.0, epsilon=setting.epsilon_test, n=n)
    out = laplace_draws(value, sensitivity=setting.proposed_bound, epsilon=setting.epsilon_release, n=n)
    if clamp is not None:
        out = np.clip(out, clamp[0], clamp[1])
    return np.asarray(np.where(noisy >= threshold, out, math.nan), dtype=np.float64)


def ptr_threshold(setting: PtrSetting) -> float:
    """The exact public threshold of the PTR test, read from the details of one (refused or not) answer."""
    answer = propose_test_release(0.0, 0, **setting.kwargs())
    return float(answer.details["threshold"])


@dataclass(frozen=True)
class PtrStatistic:
    """A statistic with a PTR release: value, the product's monotone family, clamp, public function."""

    name: str
    value: Callable[[Any], float]
    family: Callable[[Any], MonotoneFamily]
    clamp: Callable[[Any], tuple[float, float]]
    release: Callable[[Any, PtrSetting], MechanismResult | Refusal]

    def distance(self, data: Any, setting: PtrSetting) -> int:
        """gamma_L(x), exactly as ``ptr_with_family`` computes it (b is a float here)."""
        return distance_to_instability(self.family(data), bound=setting.proposed_bound, cap=setting.cap)


def ptr_median_statistic(bounds: tuple[float, float]) -> PtrStatistic:
    """``ptr_order_statistic`` at the median rank, replace adjacency."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.clip(np.asarray(x, dtype=np.float64), *bounds))

    return PtrStatistic(
        "ptr_order_statistic",
        value=lambda x: float(ordered(x)[median_rank(len(x)) - 1]),
        family=lambda x: OrderStatisticFamily(ordered(x), median_rank(len(x)), bounds),
        clamp=lambda x: bounds,
        release=lambda x, st: ptr_order_statistic(x, bounds=bounds, adjacency="replace", **st.kwargs()),
    )


def ptr_trimmed_mean_statistic(trim: int, bounds: tuple[float, float]) -> PtrStatistic:
    """``ptr_trimmed_mean``, replace adjacency."""

    def ordered(x: Sequence[float]) -> F64:
        return np.sort(np.clip(np.asarray(x, dtype=np.float64), *bounds))

    return PtrStatistic(
        "ptr_trimmed_mean",
        value=lambda x: trimmed_mean(ordered(x), trim, bounds),
        family=lambda x: TrimmedMeanFamily(ordered(x), trim, bounds),
        clamp=lambda x: bounds,
        release=lambda x, st: ptr_trimmed_mean(x, trim=trim, bounds=bounds, adjacency="replace", **st.kwargs()),
    )


def ptr_min_distance_statistic(box: tuple[float, float]) -> PtrStatistic:
    """``ptr_min_distance``, replace adjacency (exact deletion values in 1-D, W otherwise)."""

    def points(x: Points) -> F64:
        return np.asarray(x, dtype=np.float64)

    def cap(x: Points) -> float:
        return closest_pair_global_sensitivity(
            adjacency="replace", dim=points(x).shape[1], low=box[0], high=box[1], n=len(x)
        )

    return PtrStatistic(
        "ptr_min_distance",
        value=lambda x: min(cap(x), min_pairwise_distance(points(x))),
        family=lambda x: closest_pair_family(points(x), G=cap(x), variant="auto"),
        clamp=lambda x: (0.0, cap(x)),
        release=lambda x, st: ptr_min_distance(points(x), box=box, adjacency="replace", **st.kwargs()),
    )


PTR_BOUNDS = (0.0, 20.0)
#: PTR median (n = 7, [0, 20], b = 1): x is stable (distance 1), x' unstable (distance 0), and the
#: median moves by exactly b, so the test costs ε_test and the release ε_release: the proof gives PURE
#: ε_test + ε_release on such a pair (one side stable), audited at δ = 0.
PTR_STABLE = (0.0, 0.0, 0.0, 0.0, 1.0, 20.0, 20.0)
PTR_UNSTABLE = (0.0, 0.0, 0.0, 1.0, 20.0, 20.0, 20.0)
#: Unstable as well (distance 0) with the median at 20: both sides pass only with probability <= δ,
#: and then release values 19 apart. Only δ separates them.
PTR_FAR = (0.0, 0.0, 1.0, 20.0, 20.0, 20.0, 20.0)
#: PTR 1-trimmed mean (n = 7, [0, 20], b = 1): x has LS = 1 and distance 1; replacing one 0 by 20
#: moves the mean by exactly b = 1 and makes LS(x') = 4 (distance 0).
PTR_TRIM_STABLE = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0)
PTR_TRIM_UNSTABLE = (0.0, 0.0, 0.0, 0.0, 0.0, 5.0, 20.0)
PTR_LINE_BOX = (0.0, 6.0)
#: PTR 1-D closest pair (n = 4 in [0, 6], G = 2, b = 1; exhaustive search on the half-grid): x has a
#: coincident pair but M_1(x) = 1 <= b (distance 1); moving one copy of 0 to 6 gives f = 1 = b and
#: M_1(x') = 2 > b (distance 0). The shift and the distance change are both maximal.
PTR_LINE_STABLE = ((0.0,), (0.0,), (1.0,), (2.0,))
PTR_LINE_UNSTABLE = ((0.0,), (1.0,), (2.0,), (6.0,))


def ptr_pair(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Outputs of the product's PTR on x and on y (vectorised: deterministic distance, product noise)."""

    def draw(data: Any, n: int) -> F64:
        distance = stat.distance(data, setting)
        return ptr_draws(stat.value(data), distance, setting, stat.clamp(data), n, threshold=ptr_threshold(setting))

    return pair_sampler(draw, x, y)


def ptr_end_to_end_pair(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Outputs of ``n`` calls of the public PTR function on x and on y (NaN = refusal)."""

    def draw(data: Any, n: int) -> F64:
        out = np.empty(n, dtype=np.float64)
        for i in range(n):
            answer = stat.release(data, setting)
            out[i] = math.nan if isinstance(answer, Refusal) else float(answer.value)
        return out

    return pair_sampler(draw, x, y)


def _lower_median(y: Sequence[float]) -> float:
    return float(sorted(y)[median_rank(len(y)) - 1])


def naive_removal_count(y: Sequence[float], bound: float) -> int:
    """The seed notes' PTR statistic: records whose REMOVAL moves the median by more than b (not DP)."""
    f = _lower_median(y)
    return sum(1 for i in range(len(y)) if abs(f - _lower_median([*y[:i], *y[i + 1 :]])) > bound)


#: ALGORITHMS.md 0(d)(ii): one change moves the naive count from 0 to 3 (b = 1).
NAIVE_X = (0.0, 0.0, 0.0, 2.0, 2.0)
NAIVE_Y = (0.0, 0.0, 2.0, 2.0, 2.0)


def control_naive_ptr(x: Sequence[float], y: Sequence[float], setting: PtrSetting = PTR) -> Sampler:
    """Control 4a: the seed notes' test, count + Lap(1/ε_test) <= 0.5 passes, with the product's noise."""

    def draw(data: Sequence[float], n: int) -> F64:
        count = float(naive_removal_count(data, setting.proposed_bound))
        noisy = laplace_draws(count, sensitivity=1.0, epsilon=setting.epsilon_test, n=n)
        out = laplace_draws(
            _lower_median(data), sensitivity=setting.proposed_bound, epsilon=setting.epsilon_release, n=n
        )
        return np.asarray(np.where(noisy <= 0.5, out, math.nan), dtype=np.float64)

    return pair_sampler(draw, x, y)


def control_half_threshold(stat: PtrStatistic, x: Any, y: Any, setting: PtrSetting = PTR) -> Sampler:
    """Control 4b: the product's valid distance and noise, but the threshold 0.5 instead of ln(1/(2δ))/ε."""

    def draw(data: Any, n: int) -> F64:
        return ptr_draws(stat.value(data), stat.distance(data, setting), setting, stat.clamp(data), n, threshold=0.5)

    return pair_sampler(draw, x, y)


# --------------------------------------------------------------------------------------------------
# The inverse-sensitivity median (a data-dependent output law without a noise scale).

INVERSE_BOUNDS = (0.0, 8.0)
INVERSE_RESOLUTION = 8
#: The worst pair for the inverse-sensitivity median on the 8 public cells of [0, 8] (exhaustive over
#: all multisets of n = 5 cells and all replacements, exact output laws): replacing a 0.5 by 7.5 moves
#: the median from cell 6 to cell 7 and the path length of every cell by one. Exact loss 0.82 (ε = 1).
INVERSE_X = (0.5, 0.5, 6.5, 7.5, 7.5)
INVERSE_Y = (0.5, 6.5, 7.5, 7.5, 7.5)


def inverse_sensitivity_scenarios() -> list[Scenario]:
    """``inverse_sensitivity_median`` (Asi-Duchi; exact sampling), end to end on its worst pair."""

    def draw(data: Sequence[float], n: int) -> F64:
        return np.asarray(
            [
                float(
                    inverse_sensitivity_median(
                        data, bounds=INVERSE_BOUNDS, epsilon=1, resolution=INVERSE_RESOLUTION
                    ).value
                )
                for _ in range(n)
            ],
            dtype=np.float64,
        )

    return [
        Scenario(
            "inverse_sensitivity_median (end to end)",
            1.0,
            0.0,
            "8 cells: (.5,.5,6.5,7.5,7.5) vs .5->7.5 (every len moves)",
            pair_sampler(draw, INVERSE_X, INVERSE_Y),
            slow=True,
        )
    ]


# --------------------------------------------------------------------------------------------------
# The registry.


def _smooth(
    name: str, noise: Noise, neighbours: str, sample: Sampler, *, control: bool = False, slow: bool = False
) -> Scenario:
    epsilon, delta = noise.claim()
    return Scenario(name, epsilon, delta, neighbours, sample, control=control, slow=slow)


def smooth_release_scenarios() -> list[Scenario]:
    """The smooth-sensitivity releases, every noise family, on their adversarial pairs."""
    median = median_statistic(MEDIAN_BOUNDS)
    trim = trimmed_mean_statistic(TRIM, MEDIAN_BOUNDS)
    line = min_distance_statistic(LINE_BOX)
    plane = min_distance_statistic(UNIT_BOX)
    cluster = min_distance_statistic(CLUSTER_BOX)
    graph = triangle_statistic(TRIANGLE_VERTICES)
    seed = "seed (0,0,0,0,0,M,M) vs (0,0,0,0,M,M,M), M=100"
    shift = "(50,50,50,70,M,M,M) vs 70->M: Δf=LS, S x e^β"
    out = [
        _smooth("smooth_median cauchy: seed pair", CAUCHY, seed, smooth_pair(median, SEED_X, SEED_Y, CAUCHY)),
        _smooth("smooth_median laplace: seed pair", LAPLACE, seed, smooth_pair(median, SEED_X, SEED_Y, LAPLACE)),
    ]
    for noise in (CAUCHY, STUDENT_T, POLYNOMIAL, LAPLACE, GAUSSIAN, LLN, ULN):
        out.append(
            _smooth(
                f"smooth_median {noise.label}: shift pair",
                noise,
                shift,
                smooth_pair(median, SHIFT_X, SHIFT_Y, noise),
            )
        )
    out += [
        _smooth(
            "smooth_median cauchy (end to end)",
            CAUCHY,
            shift,
            end_to_end_pair(median, SHIFT_X, SHIFT_Y, CAUCHY),
            slow=True,
        ),
        _smooth(
            "smooth_median cauchy: far-jump pair",
            CAUCHY,
            "(0..6,M,M) vs 6->M, n=9: A^(2) jumps to 96",
            smooth_pair(median, JUMP_X, JUMP_Y, CAUCHY),
        ),
        _smooth(
            "smooth_trimmed_mean cauchy",
            CAUCHY,
            "m=1 (50 x6, 80) vs 50->100: Δf=LS=6, S x e^β",
            smooth_pair(trim, TRIM_X, TRIM_Y, CAUCHY),
        ),
        _smooth(
            "smooth_trimmed_mean uln",
            ULN,
            "m=1 (50 x6, 80) vs 50->100: Δf=LS=6, S x e^β",
            smooth_pair(trim, TRIM_X, TRIM_Y, ULN),
        ),
        _smooth(
            "smooth_trimmed_mean lln",
            LLN,
            "m=1 (30,30,70x4,90) vs 30->100: Δf=12, S x e^β",
            smooth_pair(trim, TRIM_LLN_X, TRIM_LLN_Y, LLN),
        ),
        _smooth(
            "smooth_trimmed_mean lln (end to end)",
            LLN,
            "m=1 (30,30,70x4,90) vs 30->100: Δf=12, S x e^β",
            end_to_end_pair(trim, TRIM_LLN_X, TRIM_LLN_Y, LLN),
            slow=True,
        ),
    ]
    line_text = "1-D (6,9,10,11,12) vs 6->9: f 1->0, S x e^-β"
    a_text = "A (20 uniform) vs point 19 onto 15: f->0, S/1.5"
    out += [
        _smooth("smooth_min_distance 1-D cauchy", CAUCHY, line_text, smooth_pair(line, LINE_X, LINE_Y, CAUCHY)),
        _smooth("smooth_min_distance 1-D laplace", LAPLACE, line_text, smooth_pair(line, LINE_X, LINE_Y, LAPLACE)),
        _smooth(
            "smooth_min_distance A cauchy",
            CAUCHY,
            a_text,
            smooth_pair(plane, POINTS_A, POINTS_A_COLLAPSED, CAUCHY),
        ),
        _smooth(
            "smooth_min_distance A laplace",
            LAPLACE,
            a_text,
            smooth_pair(plane, POINTS_A, POINTS_A_COLLAPSED, LAPLACE),
        ),
        _smooth(
            "smooth_min_distance A cauchy (end to end)",
            CAUCHY,
            a_text,
            end_to_end_pair(plane, POINTS_A, POINTS_A_COLLAPSED, CAUCHY),
            slow=True,
        ),
        _smooth(
            "smooth_min_distance B cauchy",
            CAUCHY,
            "B (cluster+(10,10)) vs outlier->(.005,.005): S x e^-β",
            smooth_pair(cluster, POINTS_B, POINTS_B_MERGED, CAUCHY),
        ),
    ]
    tri_text = "2 triangles on hub 5 + edge 0-5, vs +2-4: Δf=LS, S x e^β"
    out += [
        _smooth(
            "smooth_triangle_count cauchy", CAUCHY, tri_text, smooth_pair(graph, TRIANGLES, TRIANGLES_PLUS, CAUCHY)
        ),
        _smooth(
            "smooth_triangle_count laplace", LAPLACE, tri_text, smooth_pair(graph, TRIANGLES, TRIANGLES_PLUS, LAPLACE)
        ),
        _smooth(
            "smooth_triangle_count cauchy (end to end)",
            CAUCHY,
            tri_text,
            end_to_end_pair(graph, TRIANGLES, TRIANGLES_PLUS, CAUCHY),
            slow=True,
        ),
    ]
    return out


def smooth_control_scenarios() -> list[Scenario]:
    """Broken smooth releases (controls 1-3): the audit must flag each of them."""
    median = median_statistic(MEDIAN_BOUNDS)
    trim = trimmed_mean_statistic(TRIM, MEDIAN_BOUNDS)
    seed = "seed pair: LS(x)=0, the output is exactly 0"
    return [
        _smooth(
            "control: median noise ∝ LS (cauchy)",
            CAUCHY,
            seed,
            control_local_sensitivity(median, SEED_X, SEED_Y, CAUCHY),
            control=True,
        ),
        _smooth(
            "control: trimmed mean noise ∝ LS (lln)",
            LLN,
            "(50 x7) vs 50->100: LS(x)=0, exact output",
            control_local_sensitivity(trim, FLAT_X, FLAT_Y, LLN),
            control=True,
        ),
        _smooth(
            "control: median k-loop cut at K=2, no tail",
            CAUCHY,
            "far-jump pair: S_K ratio 48 (x: 2e^-β, x': 96e^-β)",
            control_truncated_loop(median, JUMP_X, JUMP_Y, CAUCHY, terms=2),
            control=True,
        ),
        _smooth(
            "control: median S at β=2ε, cauchy for β=ε/2",
            CAUCHY,
            "seed pair: S ratio e^2",
            control_wrong_beta(median, SEED_X, SEED_Y, CAUCHY, beta=2.0),
            control=True,
        ),
        _smooth(
            "control: median S(β=ε), Lap noise for β=0.14",
            LAPLACE,
            "far-jump pair: S ratio e, tails beyond δ",
            control_wrong_beta(median, JUMP_X, JUMP_Y, LAPLACE, beta=1.0),
            control=True,
        ),
    ]


def ptr_scenarios() -> list[Scenario]:
    """PTR on pairs that cross instability, and the naive-threshold controls (control 4)."""
    med = ptr_median_statistic(PTR_BOUNDS)
    trim = ptr_trimmed_mean_statistic(TRIM, PTR_BOUNDS)
    line = ptr_min_distance_statistic(PTR_LINE_BOX)
    eps = PTR.epsilon_test + PTR.epsilon_release
    med_text = "(0,0,0,0,1,20,20) vs 0->20: Δf=b, dist 1->0 (pure)"
    trim_text = "m=1 (0 x6, 5) vs 0->20: Δf=b, dist 1->0 (pure)"
    line_text = "1-D (0,0,1,2) vs 0->6: Δf=b, dist 1->0 (pure)"
    far_text = "(0,0,0,1,20,20,20) vs 1->20: both unstable"
    return [
        Scenario("ptr_order_statistic", eps, 0.0, med_text, ptr_pair(med, PTR_STABLE, PTR_UNSTABLE)),
        Scenario(
            "ptr_order_statistic (end to end)",
            eps,
            0.0,
            med_text,
            ptr_end_to_end_pair(med, PTR_STABLE, PTR_UNSTABLE),
            slow=True,
        ),
        Scenario("ptr_order_statistic: unstable pair", eps, PTR.delta, far_text, ptr_pair(med, PTR_UNSTABLE, PTR_FAR)),
        Scenario("ptr_trimmed_mean", eps, 0.0, trim_text, ptr_pair(trim, PTR_TRIM_STABLE, PTR_TRIM_UNSTABLE)),
        Scenario(
            "ptr_trimmed_mean (end to end)",
            eps,
            0.0,
            trim_text,
            ptr_end_to_end_pair(trim, PTR_TRIM_STABLE, PTR_TRIM_UNSTABLE),
            slow=True,
        ),
        Scenario("ptr_min_distance 1-D", eps, 0.0, line_text, ptr_pair(line, PTR_LINE_STABLE, PTR_LINE_UNSTABLE)),
        Scenario(
            "ptr_min_distance 1-D (end to end)",
            eps,
            0.0,
            line_text,
            ptr_end_to_end_pair(line, PTR_LINE_STABLE, PTR_LINE_UNSTABLE),
            slow=True,
        ),
        Scenario(
            "control: naive PTR (removal count, 0.5)",
            eps,
            PTR.delta,
            "(0,0,0,2,2) vs (0,0,2,2,2): naive count 0 vs 3",
            control_naive_ptr(NAIVE_X, NAIVE_Y),
            control=True,
        ),
        Scenario(
            "control: PTR valid distance, threshold 0.5",
            eps,
            PTR.delta,
            far_text,
            control_half_threshold(med, PTR_UNSTABLE, PTR_FAR),
            control=True,
        ),
    ]


def smooth_scenarios() -> list[Scenario]:
    """Every data-dependent mechanism on its adversarial pairs, then the controls (registered in the CLI)."""
    scenarios = smooth_release_scenarios() + ptr_scenarios() + inverse_sensitivity_scenarios()
    return sorted(scenarios + smooth_control_scenarios(), key=lambda s: s.control)  # stable: controls last
