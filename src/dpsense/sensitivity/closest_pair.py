"""Closest-pair distance: global, local and smooth sensitivity, and PTR distance to instability.

Provides, for f(x) = min_{i<j} d(x_i, x_j) on points in a public box [low, high]^p (Euclidean, 0 when
two points coincide), the global sensitivity cap G, the exact local sensitivity (analysis only), two
exactly computed monotone families (``DeletionValueFamily1D``, the deletion value M_m in 1-D;
``NeighbourRankFamily``, the rank bound W_m in any dimension), the beta-smooth bound
S(x) = max_k e^{-k beta} min(G, V_{k+1}(x)) with its tail term, and the PTR distance. Adjacency:
replace with n public, or add/remove; only G differs. A unit owning up to C points uses
``PersonLevel(..., direct=True)`` (no factor C). No published smooth bound for this query is known
to us: the bounds are the project's own, proved in docs/math/closest-pair.md (§6.3-§6.6; the misquoted
formula, §6.7) and checked by brute force in ``tests/unit/sensitivity/test_closest_pair.py``. Points
must lie in the public box and be finite and below 2^480; nothing computed here may be released.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidSensitivity, UnsupportedRequest, UsageError
from dpsense.sensitivity._closest_pair_engine import (
    F64,
    DeletionValues1D,
    NeighbourDistances,
    largest_empty_radius_2d,
    pair_distances,
)
from dpsense.sensitivity.smooth import MonotoneFamily, PersonLevel, distance_to_instability, smooth_upper_bound

Variant = Literal["auto", "exact_1d", "W"]

_MAX_ABS_COORDINATE = 2.0**480
_LOCAL_MAX_POINTS = {"matrix": 2048, "box_2d": 128}


def _as_points(points: ArrayLike) -> F64:
    """An (n, p) float64 copy of the points, with -0.0 normalised to 0.0."""
    try:
        arr = np.array(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidData(
            "points must be numeric", type(points).__name__, "pass an (n,) or (n, p) array of floats"
        ) from None
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InvalidData("points must have shape (n,) or (n, p)", arr.shape, "pass one row per point")
    if not bool(np.all(np.abs(arr) <= _MAX_ABS_COORDINATE)):  # also false for NaN
        raise InvalidData(
            "points must be finite with |coordinate| <= 2**480",
            "<values withheld>",
            "clip the points to the public domain before computing sensitivities",
        )
    return arr + 0.0


def _check_positive(value: float, *, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not (v > 0 and math.isfinite(v)):
        raise InvalidSensitivity(f"{name} must be finite and > 0", value, f"pass a public {name}")
    return v


def _check_box(low: float, high: float) -> tuple[float, float]:
    lo, hi = float(low), float(high)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InvalidBounds("the domain needs finite low < high", (low, high), "declare the public box [low, high]^p")
    return lo, hi


def _round_up(value: float) -> float:
    """A double >= value times (1 + 2^-40): absorbs the rounding of computed distances and widths."""
    return math.nextafter(value * (1.0 + 2.0**-40) + 2.0**-1000, math.inf)


def min_pairwise_distance(points: ArrayLike) -> float:
    """f(x) = min_{i<j} d(x_i, x_j), 0 when two points coincide, ``inf`` for fewer than two points.

    Exact for the library's per-pair distance routine: |a - b| in 1-D, otherwise sqrt of the sum of
    squared coordinate differences in coordinate order. The BLAS expansion ||a||^2 + ||b||^2 - 2 a.b
    is never used: it cancels catastrophically for close points (0 or negative for distinct points)
    and its rounding depends on batching, which would break the exact monotonicity the smooth
    bounds rely on (docs/math/closest-pair.md §6.6). Callers releasing under add/remove define f as G below two
    points.

    Args:
        points: shape (n,) or (n, p).

    Returns:
        The minimum pairwise distance (a data value: never release it without noise).

    """
    P = _as_points(points)
    if P.shape[0] < 2:
        return math.inf
    if P.shape[1] == 1:
        x = np.sort(P[:, 0])
        return float(np.min(x[1:] - x[:-1]))
    return NeighbourDistances(P, base_neighbours=1).order_statistic(0)


def closest_pair_global_sensitivity(
    *, adjacency: Adjacency | str, dim: int, low: float, high: float, n: int | None = None
) -> float:
    """A public G >= GS of the closest-pair distance on [low, high]^dim (docs/math/closest-pair.md §6.1).

    Replace (n public): GS = D_n, the largest min-distance of n points (collapsing a point reaches
    0). In 1-D D_n = Lambda/(n-1) exactly; in the cube, pigeonhole over m^p < n sub-cubes with
    m = ceil(n^{1/p}) - 1 gives D_n <= sqrt(p) Lambda / m. Add/remove (n private, f := G below two
    points): the diameter sqrt(p) Lambda. Also valid per unit owning C points (f stays in [0, G]).
    Rounded up by a relative 2^-40 so it bounds the *computed* distances too.

    Args:
        adjacency: ``"replace"`` or ``"add_remove"``.
        dim: p >= 1.
        low: the public lower corner coordinate.
        high: the public upper corner coordinate.
        n: the public number of points (replace only, >= 2).

    Returns:
        G as a float, rounded up.

    Raises:
        UsageError: for a missing or invalid n or dim.
        InvalidBounds: unless low < high are finite.

    """
    return _round_up(closest_pair_range_top(adjacency=adjacency, dim=dim, low=low, high=high, n=n))


def closest_pair_range_top(
    *, adjacency: Adjacency | str, dim: int, low: float, high: float, n: int | None = None
) -> float:
    """The largest value a released minimum distance is clamped to: G before its upward rounding.

    The diameter sqrt(p) Lambda (add/remove) or the pigeonhole bound on D_n (replace), computed in
    plain float arithmetic. No minimum distance of points in the box exceeds it, so clamping a
    release to [0, top] is post-processing that keeps every answer inside the box's possible range
    (the cap G itself lies a relative 2^-40 above it, to bound the computed distances).
    """
    adj = Adjacency.parse(adjacency)
    lo, hi = _check_box(low, high)
    if not integer_in(dim, 1, 1024):
        raise UsageError("dim must be an integer in [1, 1024]", dim, "pass the number of coordinates")
    diameter = math.sqrt(dim) * float(hi - lo)
    if adj is Adjacency.ADD_REMOVE:
        return diameter
    if not integer_in(n, 2):
        raise UsageError("replace adjacency needs the public n >= 2", n, "pass n=<number of points>")
    side = max(2, round(n ** (1.0 / dim)))
    while side**dim < n:
        side += 1
    while side > 2 and (side - 1) ** dim >= n:
        side -= 1
    return float(diameter / (side - 1))  # (side - 1)^dim < n <= side^dim


def closest_pair_local_sensitivity(points: ArrayLike, *, low: float, high: float, adjacency: Adjacency | str) -> float:
    """Exact LS(x) on the box [low, high]^p (docs/math/closest-pair.md §6.2) — for analysis and tests only.

    Never calibrate noise with this value: local sensitivity is itself data-dependent and leaks
    (docs/math/local-sensitivity.md); use ``closest_pair_smooth_bound`` or PTR instead.

    Replace: LS = max(f, max_i min(f_{-i}, R_i) - f), R_i = sup over the box of the distance to the
    nearest point other than i; only the endpoints of one closest pair can make the second term
    positive. Add/remove: LS = max(f, max_i f_{-i} - f), with f := diameter below two points.
    Supported: 1-D (any n); 2-D under replace for n <= 128 (R_i by evaluation at all candidate
    maximisers: box corners, bisector/edge points, circumcentres; exact up to rounding); any p under
    add/remove for n <= 2048.

    Args:
        points: shape (n,) or (n, p), n >= 2, inside the box.
        low: the public lower corner coordinate of the box.
        high: the public upper corner coordinate of the box.
        adjacency: ``"replace"`` or ``"add_remove"``.

    Returns:
        LS(x) (a data value: never release it, never use it as a noise scale).

    Raises:
        UnsupportedRequest: outside the supported cases above.
        InvalidData: for fewer than two points or points outside the box.

    """
    adj = Adjacency.parse(adjacency)
    lo, hi = _check_box(low, high)
    pts = _as_points(points)
    n, p = pts.shape
    if n < 2 or not bool(np.all((lo <= pts) & (pts <= hi))):
        raise InvalidData("need n >= 2 points inside the box", n, "clip the points to [low, high]^p first")
    replace = adj is Adjacency.REPLACE
    limit = _LOCAL_MAX_POINTS["box_2d" if replace and p == 2 else "matrix"]
    if p > 1 and (n > limit or (replace and p > 2)):
        raise UnsupportedRequest(
            "exact local sensitivity is implemented for 1-D, 2-D (replace, n <= 128) and add/remove (n <= 2048)",
            (n, p),
            "use the smooth bound, which needs no local sensitivity",
        )
    fewer_than_two = math.inf if replace else math.sqrt(p) * (hi - lo)
    if p == 1:
        pts = pts[np.argsort(pts[:, 0], kind="stable")]
        x = pts[:, 0]
        gaps = x[1:] - x[:-1]
        a = int(np.argmin(gaps))
        f, ends = float(gaps[a]), (a, a + 1)
    else:
        D = pair_distances(pts[:, None, :], pts[None, :, :])
        np.fill_diagonal(D, np.inf)
        flat = int(np.argmin(D))
        f, ends = float(D.flat[flat]), (flat // n, flat % n)
    worst = f
    for i in ends:
        rest = np.delete(pts, i, axis=0)
        f_minus = min_pairwise_distance(rest) if rest.shape[0] >= 2 else fewer_than_two
        if replace:
            f_minus = min(f_minus, _largest_empty_radius(rest, lo, hi))
        worst = max(worst, f_minus - f)
    return worst


def _largest_empty_radius(rest: F64, lo: float, hi: float) -> float:
    if rest.shape[1] == 2:
        return largest_empty_radius_2d(rest, lo, hi)
    y = np.sort(rest[:, 0])
    inner = float(np.max(y[1:] - y[:-1])) / 2.0 if y.size >= 2 else 0.0
    return max(float(y[0]) - lo, hi - float(y[-1]), inner)


class NeighbourRankFamily:
    """U_k = min(G, W_{k+1}): a monotone family for the closest pair in any dimension (docs/math/closest-pair.md §6.3).

    W_m(x) = the (m+1)-th smallest over points i of rho_i^(m+1)(x), the distance from x_i to its
    (m+1)-th nearest other point (``inf`` when m >= n - 1). Guarantee (proof in docs/math/closest-pair.md §6.3,
    derived there): W_m >= M_m >= A^(m-1) (so U_0 >= LS) and W_m(x) <= W_{m+1}(x') for neighbours
    under replace and under add/remove. Computed exactly: a k-d tree proposes neighbours, the
    distances are recomputed per pair and certified, and the neighbour count grows as needed.

    Args:
        points: shape (n,) or (n, p), inside the public domain G was computed for.
        G: a public cap >= the global sensitivity.

    """

    def __init__(self, points: ArrayLike, *, G: float) -> None:
        self._P = _as_points(points)
        self._G = _check_positive(G, name="cap G")
        self._engine: NeighbourDistances | None = None

    @property
    def cap(self) -> float:
        """The public cap G."""
        return self._G

    def deletion_value(self, m: int) -> float:
        """W_m (uncapped), an upper bound on the best min-distance after deleting any m points."""
        if m < 0:
            raise UsageError("m must be >= 0", m, "pass a number of deleted points")
        if m >= self._P.shape[0] - 1:
            return math.inf
        if self._engine is None:
            self._engine = NeighbourDistances(self._P)
        return self._engine.order_statistic(m)

    def upper(self, k: int) -> float:
        """U_k = min(G, W_{k+1})."""
        return min(self._G, self.deletion_value(k + 1))


class DeletionValueFamily1D:
    """U_k = min(G, M_{k+1}) for 1-D points: the exact deletion values (docs/math/closest-pair.md §6.3).

    M_m(x) = max over subsets T of n - m points of f(x_T) (``inf`` when n - m < 2), computed exactly
    for the computed gaps fl(x_b - x_a): these are monotone in x_b and in -x_a, so the greedy
    selection is optimal and Claims A/B of docs/math/closest-pair.md §6.3 (derived there) hold for the computed
    quantity: M_{k+1} >= A^(k) and M_m(x) <= M_{m+1}(x') under replace and add/remove. Bisection over
    the bit patterns of non-negative doubles, O(n log n + 63 m) per value after one sort.

    Args:
        points: shape (n,) or (n, 1), inside the public interval G was computed for.
        G: a public cap >= the global sensitivity.

    Raises:
        UnsupportedRequest: for points with more than one coordinate.

    """

    def __init__(self, points: ArrayLike, *, G: float) -> None:
        P = _as_points(points)
        if P.shape[1] != 1:
            raise UnsupportedRequest(
                "exact deletion values exist only in 1-D", P.shape[1], "use NeighbourRankFamily (variant='W')"
            )
        self._G = _check_positive(G, name="cap G")
        self._values = DeletionValues1D(P[:, 0])

    @property
    def cap(self) -> float:
        """The public cap G."""
        return self._G

    def deletion_value(self, m: int) -> float:
        """M_m (uncapped): the largest min-distance left after deleting m points."""
        if m < 0:
            raise UsageError("m must be >= 0", m, "pass a number of deleted points")
        return self._values.value(m)

    def upper(self, k: int) -> float:
        """U_k = min(G, M_{k+1})."""
        return min(self._G, self.deletion_value(k + 1))


def closest_pair_family(
    points: ArrayLike, *, G: float, variant: Variant, max_records_per_unit: int = 1
) -> MonotoneFamily:
    """The monotone family behind the smooth bound and PTR: ``auto`` picks exact M in 1-D, W otherwise.

    Args:
        points: shape (n,) or (n, p), clipped to the public domain of G.
        G: public cap >= GS.
        variant: ``"exact_1d"``, ``"W"`` or ``"auto"``.
        max_records_per_unit: C; for C > 1 the family is ``PersonLevel(family, C, direct=True)``,
            valid without the factor C for this statistic (proof in docs/math/closest-pair.md §6.6).

    Returns:
        A ``MonotoneFamily`` whose ``upper(k)`` is min(G, V_{k+1}) (or its unit-level version).

    Raises:
        UsageError: for an unknown variant or a non-integer C.
        UnsupportedRequest: for ``"exact_1d"`` on points with more than one coordinate.

    """
    if variant not in ("auto", "exact_1d", "W"):
        raise UsageError("variant must be 'auto', 'exact_1d' or 'W'", variant, "pick one of the three")
    if not integer_in(max_records_per_unit):
        raise UsageError("max_records_per_unit must be an integer >= 1", max_records_per_unit, "declare C")
    P = _as_points(points)
    exact = variant == "exact_1d" or (variant == "auto" and P.shape[1] == 1)
    family: MonotoneFamily = DeletionValueFamily1D(P, G=G) if exact else NeighbourRankFamily(P, G=G)
    if max_records_per_unit == 1:
        return family
    # direct=True (no factor C) is justified for this statistic: see docs/math/closest-pair.md §6.6.
    return PersonLevel(family, max_records_per_unit, direct=True)


def closest_pair_smooth_bound(
    points: ArrayLike,
    *,
    beta: float,
    G: float,
    variant: Variant = "auto",
    max_records_per_unit: int = 1,
    constant_work: int | None = None,
) -> float:
    """S(x) = max(max_{k<K} e^{-k beta} min(G, V_{k+1}(x)), e^{-K beta} G): a beta-smooth upper bound on LS.

    Guarantee: S >= LS_f and S(x) <= e^beta S(x') for neighbours x, x' (docs/math/smooth-sensitivity.md §3.2 with the
    families of 6.3, derived there), under replace or add/remove as encoded in G, per unit owning
    up to ``max_records_per_unit`` points. The tail term is always included. Calibrate noise with it
    via docs/math/smooth-sensitivity.md §3.3 using the *same* beta, chosen from (epsilon, delta) only.

    Args:
        points: shape (n,) or (n, p), already clipped to the public domain of G.
        beta: the smoothing parameter (> 0).
        G: public cap >= GS (``closest_pair_global_sensitivity``).
        variant: ``"exact_1d"`` (M, 1-D only), ``"W"`` (any dimension) or ``"auto"``.
        max_records_per_unit: C, points one privacy unit may own.
        constant_work: evaluate exactly this many terms, then the tail (public amount of terms).

    Returns:
        The smooth bound (a data-dependent value: use it only as a noise scale), floored at the
        public constant max(G 2^-900, 2^-1000) so that it is never zero or subnormal.

    """
    family = closest_pair_family(points, G=G, variant=variant, max_records_per_unit=max_records_per_unit)
    bound = smooth_upper_bound(family, beta=beta, constant_work=constant_work)
    # A public floor keeps beta-smoothness (max(S(x), c) <= e^beta max(S(x'), c)) and stops e^{-k beta}
    # underflow (e.g. thousands of coincident points) from yielding a zero or subnormal noise scale.
    return max(bound, _smooth_floor(family.cap))


def _smooth_floor(G: float) -> float:
    return max(G * 2.0**-900, 2.0**-1000)


def closest_pair_distance_to_instability(
    points: ArrayLike,
    *,
    proposed_bound: float,
    G: float,
    cap: int,
    variant: Variant = "auto",
    max_records_per_unit: int = 1,
) -> int:
    """gamma_L(x) = min{k >= 0 : min(G, V_{k+1}(x)) > b}, capped at ``cap`` (docs/math/index.md sections 5 and 6.5).

    A valid PTR statistic: 1-Lipschitz, >= 0, and gamma_L(x) >= 1 implies LS(x) <= b, under the
    adjacency G was computed for and per unit of ``max_records_per_unit`` points. Unlike a count of
    "sensitive records" it sees additions and replacements (docs/math/ptr.md §5.5). Use the PTR threshold
    ln(1/(2 delta))/epsilon_1, not 0.5.

    Args:
        points: shape (n,) or (n, p), clipped to the public domain of G.
        proposed_bound: the proposed sensitivity bound b > 0 (public).
        G: public cap >= GS.
        cap: the public cap c >= 1 on the returned distance.
        variant: as in ``closest_pair_smooth_bound``.
        max_records_per_unit: C, points one privacy unit may own.

    Returns:
        An integer in [0, cap]; never release it without the PTR noise.

    """
    b = _check_positive(proposed_bound, name="proposed bound")
    family = closest_pair_family(points, G=G, variant=variant, max_records_per_unit=max_records_per_unit)
    return distance_to_instability(family, bound=b, cap=cap)


def closest_pair_inputs(
    points: ArrayLike, *, low: float, high: float, adjacency: Adjacency | str
) -> tuple[F64, float, float, float]:
    """The points clipped to the public box as an (n, p) array, f(x), the public cap G and the output top.

    f is defined as G below two points (add/remove) and never exceeds G. The releases clamp to
    [0, top] (``closest_pair_range_top``: G before rounding up), so no answer exceeds the box's
    diameter. Shared by the smooth, PTR and inverse-sensitivity releases of the minimum pairwise distance.

    Total on every number of points, none included: an (0, p) array (or an empty 1-D one, p = 1)
    keeps its p public coordinates and gives f = G, as one point does. The families then give
    V_m = inf for every m (fewer than two points remain), so U_k = G for all k: the smooth bound is
    G (a valid beta-smooth upper bound: LS <= GS <= G everywhere, and a neighbour with at most two
    points also has U_0 = G), PTR's distance to instability is 0 for b < G, and the
    inverse-sensitivity lower bound on the path length is that of a dataset where f = G.
    """
    adj = Adjacency.parse(adjacency)
    raw = np.asarray(points, dtype=np.float64)
    # (n, d1, d2, ...) -> (n, d1 d2 ...): spelled with the public shape, so n = 0 reshapes too.
    shape = (raw.shape[0], math.prod(raw.shape[1:])) if raw.ndim > 1 else (-1, 1)
    pts = np.clip(raw.reshape(shape), low, high)
    n, dim = pts.shape
    top = closest_pair_range_top(adjacency=adj, dim=dim, low=low, high=high, n=n if adj is Adjacency.REPLACE else None)
    cap = _round_up(top)  # = closest_pair_global_sensitivity for the same box, adjacency and n
    value = min(cap, min_pairwise_distance(pts)) if n >= 2 else cap
    return pts, value, cap, top
