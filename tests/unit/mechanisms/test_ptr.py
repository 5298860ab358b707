from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import ApproxDP
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.mechanisms import ptr
from dpsense.mechanisms.laplace import laplace_plan
from dpsense.mechanisms.ptr import Refusal, propose_test_release, ptr_distance_cap, ptr_with_family
from dpsense.mechanisms.result import MechanismResult
from dpsense.sensitivity.smooth import distance_to_instability

# ------------------------------------------------------------ a monotone family for the median
# (docs/math/order-statistics.md)


class OrderStatisticFamily:
    """U_k = A^(k)(x) = max_{0<=j<=k+1} (x_(r+j) - x_(r+j-k-1)), padded with L and U (exact, replace adjacency)."""

    def __init__(self, values: list[float] | tuple[float, ...], rank: int, low: float, high: float) -> None:
        self.sorted = sorted(values)
        self.rank, self.low, self.high = rank, low, high

    def _at(self, i: int) -> float:
        if i <= 0:
            return self.low
        if i > len(self.sorted):
            return self.high
        return self.sorted[i - 1]

    @property
    def cap(self) -> float:
        return self.high - self.low

    def upper(self, k: int) -> float:
        r = self.rank
        return max(self._at(r + j) - self._at(r + j - k - 1) for j in range(k + 2))


def lower_median(y: tuple[float, ...] | list[float]) -> float:
    return sorted(y)[(len(y) + 1) // 2 - 1]


# ---------------------------------------------------------------- results and refusals


def test_a_passing_release_carries_the_full_cost_and_public_accuracy() -> None:
    result = propose_test_release(10.0, math.inf, proposed_bound=2, epsilon_test=0.5, epsilon_release=0.5, delta=1e-6)
    assert isinstance(result, MechanismResult)
    assert result.loss == ApproxDP(1, Fraction(1, 10**6))
    assert result.accuracy is not None
    assert result.accuracy.scale == pytest.approx(4.0, rel=2.0**-22)  # b / epsilon_2, plus the grid step
    assert abs(result.value - 10.0) < 80  # Laplace(4): |noise| > 80 has probability e^-20
    assert "Dwork-Lei 2009" in result.guarantee and "Vadhan 2017" in result.guarantee
    assert result.mechanism == ptr.MECHANISM


def test_a_refusal_is_an_answer_charged_like_a_release() -> None:
    # gamma = 0: refused unless Lap noise exceeds tau = ln(1/(2e-12))/1 ~ 26.9 (probability <= 1e-12).
    refusal = propose_test_release(5.0, 0, proposed_bound=1, epsilon_test=1, epsilon_release=2, delta=1e-12)
    assert isinstance(refusal, Refusal)
    assert refusal.loss == ApproxDP(3, Fraction(1, 10**12))
    assert refusal.mechanism == ptr.MECHANISM
    assert "Propose-Test-Release" in refusal.guarantee
    assert "stability test" in refusal.reason
    assert str(refusal).startswith("refused by ptr/laplace@1")
    with pytest.raises(FrozenInstanceError):
        refusal.reason = "other"  # type: ignore[misc]


def test_refusals_carry_no_data_dependent_number() -> None:
    # Different private values and distances give identical refusals: nothing in them depends on the data.
    refusals = [
        propose_test_release(v, d, proposed_bound=1, epsilon_test=1, epsilon_release=1, delta=1e-12)
        for v, d in [(5.0, 0), (123.456, 1), (-7.25, 3), (0.0, 2)]
    ]
    assert all(isinstance(r, Refusal) for r in refusals)
    assert all(r == refusals[0] for r in refusals)
    text = repr(refusals[0])
    for private in ("123.456", "7.25"):
        assert private not in text


def test_output_clamp_is_post_processing() -> None:
    result = propose_test_release(
        0.0, math.inf, proposed_bound=100, epsilon_test=1, epsilon_release=0.01, delta=1e-6, output_clamp=(0, 1)
    )
    assert isinstance(result, MechanismResult)
    assert 0.0 <= result.value <= 1.0
    assert result.details["output_clamp"] == (0.0, 1.0)


def test_large_distances_are_capped_and_pass() -> None:
    cap = ptr_distance_cap(1, 1e-6)
    for distance in (cap, cap + 1, 10**30, np.int64(10**15), math.inf):
        assert isinstance(
            propose_test_release(1.0, distance, proposed_bound=1, epsilon_test=1, epsilon_release=1, delta=1e-6),
            MechanismResult,
        )


def test_public_details_hold_only_public_parameters() -> None:
    result = propose_test_release(3.0, 4321, proposed_bound=0.5, epsilon_test=1, epsilon_release=1, delta=1e-6)
    assert isinstance(result, MechanismResult)
    public = {k: v for k, v in result.details.items() if k not in {"release_noise", "output_clamp"}}
    refused = propose_test_release(3.0, 0, proposed_bound=0.5, epsilon_test=1, epsilon_release=1, delta=1e-6)
    assert isinstance(refused, Refusal)
    assert refused.details == public  # the same public keys and values whatever the data
    assert "4321" not in repr(result.details) and "distance" not in {k.lower() for k in result.details}


# ---------------------------------------------------------------- validation (public first, no private echo)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"proposed_bound": 0}, UsageError),
        ({"proposed_bound": -1}, UsageError),
        ({"proposed_bound": math.nan}, UsageError),
        ({"proposed_bound": math.inf}, UsageError),
        ({"epsilon_test": 0}, InvalidPrivacyParameter),
        ({"epsilon_release": -1}, InvalidPrivacyParameter),
        ({"delta": 0}, InvalidPrivacyParameter),
        ({"delta": 0.5}, InvalidPrivacyParameter),
        ({"delta": 1.5}, InvalidPrivacyParameter),
        ({"output_clamp": (2, 1)}, InvalidBounds),
        ({"output_clamp": (0, math.inf)}, InvalidBounds),
        ({"output_clamp": "ab"}, InvalidBounds),
    ],
)
def test_public_parameters_are_validated(kwargs: dict[str, object], error: type[Exception]) -> None:
    params: dict[str, object] = {"proposed_bound": 1, "epsilon_test": 1, "epsilon_release": 1, "delta": 1e-6}
    params.update(kwargs)
    with pytest.raises(error):
        propose_test_release(1.0, 3, **params)  # type: ignore[arg-type]


@pytest.mark.parametrize("distance", [-7, 2.5, "3", True, None, math.nan, -math.inf])
def test_bad_distances_are_refused_without_echoing_them(distance: object) -> None:
    with pytest.raises(InvalidData) as info:
        propose_test_release(1.0, distance, proposed_bound=1, epsilon_test=1, epsilon_release=1, delta=1e-6)  # type: ignore[arg-type]
    assert "-7" not in str(info.value) and "2.5" not in str(info.value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "x"])
def test_bad_values_are_refused_without_echoing_them(value: object) -> None:
    with pytest.raises(InvalidData) as info:
        propose_test_release(value, 5, proposed_bound=1, epsilon_test=1, epsilon_release=1, delta=1e-6)  # type: ignore[arg-type]
    assert "nan" not in str(info.value).lower().replace("non-finite", "")


def test_there_is_no_naive_threshold_option() -> None:
    # The 0.5-threshold "count sensitive records" test (docs/math/ptr.md §5.5) is not DP: no switch may enable it.
    assert set(inspect.signature(propose_test_release).parameters) == {
        "value",
        "distance",
        "proposed_bound",
        "epsilon_test",
        "epsilon_release",
        "delta",
        "output_clamp",
    }
    assert set(inspect.signature(ptr_with_family).parameters) == {
        "value",
        "family",
        "proposed_bound",
        "epsilon_test",
        "epsilon_release",
        "delta",
        "output_clamp",
    }
    assert not [name for name in dir(ptr) if "naive" in name.lower() or "count" in name.lower()]


# ---------------------------------------------------------------- the exact threshold and the cap

_CTX = Context(prec=60)


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [("1", "0.05"), ("0.5", "1e-6"), ("0.1", "1e-9"), ("3", "0.2"), ("1", "1e-300"), ("2e-9", "1e-6")],
)
def test_unstable_data_pass_with_probability_at_most_delta_exactly(epsilon: str, delta: str) -> None:
    eps, d = Fraction(epsilon), Fraction(delta)
    plan = ptr._plan(eps, d)
    k, t = laplace_plan(sensitivity=1, epsilon=eps)
    assert (plan.exponent, plan.scale_steps) == (k, t)
    q = _CTX.exp(Decimal(-1) / Decimal(t))
    pass_probability = lambda j: _CTX.power(q, j) / (1 + q)  # noqa: E731 -- P(N >= j), N discrete Laplace
    j = plan.threshold_steps
    assert pass_probability(j) <= Decimal(d.numerator) / Decimal(d.denominator)
    assert j == 1 or pass_probability(j - 1) > Decimal(d.numerator) / Decimal(d.denominator)  # tight
    tau = math.log(1 / (2 * float(d))) / float(eps)
    # the grid inflates the scale by a relative g and rounds the threshold up to a whole step
    assert plan.threshold == pytest.approx(tau, rel=1e-9 + 2.0 ** (k + 1) * (1 + 1 / tau))
    assert ptr_distance_cap(eps, d) == math.ceil(plan.threshold + 20 / float(eps))


def test_distance_cap_is_ceil_tau_plus_twenty_scales() -> None:
    assert ptr_distance_cap(1, 0.05) == math.ceil(math.log(10) + 20)
    assert ptr_distance_cap(0.5, 1e-6) == math.ceil(math.log(1 / 2e-6) / 0.5 + 40)
    with pytest.raises(InvalidPrivacyParameter):
        ptr_distance_cap(1, 0.5)
    with pytest.raises(InvalidPrivacyParameter):
        ptr_distance_cap(1e-17, 1e-6)  # the threshold would exceed 2^52 grid steps


# ---------------------------------------------------------------- PTR with a monotone family


@pytest.mark.parametrize(("n", "bound"), [(5, 1.0), (5, 0.5), (5, 2.0), (6, 1.0), (6, 2.5)])
def test_family_distance_is_the_exact_distance_to_instability_for_the_median(n: int, bound: float) -> None:
    # Brute force on a small domain (replace adjacency on multisets): gamma_b(x) = min{d(x,y) : LS(y) > b}.
    domain = range(5)
    rank = (n + 1) // 2
    multisets = list(itertools.combinations_with_replacement(domain, n))
    index = {m: i for i, m in enumerate(multisets)}

    def neighbours(m: tuple[int, ...]) -> set[tuple[int, ...]]:
        out = set()
        for i, v in itertools.product(range(n), domain):
            out.add(tuple(sorted((*m[:i], v, *m[i + 1 :]))))
        out.discard(m)
        return out

    graph = [[index[y] for y in neighbours(m)] for m in multisets]
    ls = [max(abs(lower_median(m) - lower_median(multisets[j])) for j in graph[i]) for i, m in enumerate(multisets)]
    # multi-source BFS from the unstable datasets
    dist = [math.inf] * len(multisets)
    frontier = [i for i in range(len(multisets)) if ls[i] > bound]
    for i in frontier:
        dist[i] = 0
    while frontier:
        nxt = []
        for i in frontier:
            for j in graph[i]:
                if dist[j] == math.inf:
                    dist[j] = dist[i] + 1
                    nxt.append(j)
        frontier = nxt
    for i, m in enumerate(multisets):
        family = OrderStatisticFamily(m, rank, 0.0, 4.0)
        gamma = distance_to_instability(family, bound=bound, cap=50)
        assert gamma == min(dist[i], 50)
        if gamma >= 1:
            assert ls[i] <= bound
        assert all(
            abs(
                gamma - distance_to_instability(OrderStatisticFamily(multisets[j], rank, 0.0, 4.0), bound=bound, cap=50)
            )
            <= 1
            for j in graph[i]
        )


def test_ptr_with_family_releases_stable_medians_and_refuses_unstable_ones() -> None:
    stable = [5.0] * 60 + [float(v) for v in range(10)]  # median 5 held by 60 records: far from instability
    released = ptr_with_family(
        lower_median(stable),
        OrderStatisticFamily(stable, (len(stable) + 1) // 2, 0.0, 10.0),
        proposed_bound=0.5,
        epsilon_test=1,
        epsilon_release=1,
        delta=1e-6,
    )
    assert isinstance(released, MechanismResult)
    assert released.loss == ApproxDP(2, Fraction(1, 10**6))
    assert abs(released.value - 5.0) < 20 * 0.5
    unstable = [0.0, 0.0, 0.0, 10.0, 10.0]
    refused = ptr_with_family(
        0.0,
        OrderStatisticFamily(unstable, 3, 0.0, 10.0),
        proposed_bound=0.5,
        epsilon_test=1,
        epsilon_release=1,
        delta=1e-12,
    )
    assert isinstance(refused, Refusal)
    assert refused.loss == ApproxDP(2, Fraction(1, 10**12))


def test_ptr_with_family_never_rounds_the_bound_up() -> None:
    b = Fraction(1, 3)
    below = ptr._float_at_most(b)
    assert Fraction(below) <= b < Fraction(math.nextafter(below, math.inf))


# ------------------------------------------------------------ why the naive test is not DP (docs/math/ptr.md §5.5)
# The naive "PTR" below exists ONLY in this test file, to document its failure. Never ship it.


def naive_sensitive_count(y: tuple[float, ...], f: Callable[[tuple[float, ...]], float], bound: float) -> int:
    """Number of records whose REMOVAL moves f by more than the bound (the lecture-notes statistic)."""
    return sum(1 for i in range(len(y)) if abs(f(y) - f(y[:i] + y[i + 1 :])) > bound)


def closest_pair(y: tuple[float, ...]) -> float:
    s = sorted(y)
    return min(b - a for a, b in itertools.pairwise(s))


def test_naive_count_is_not_one_lipschitz_for_the_median() -> None:
    x, x_prime = (0.0, 0.0, 0.0, 2.0, 2.0), (0.0, 0.0, 2.0, 2.0, 2.0)  # one record 0 -> 2: replace neighbours
    assert sum(a != b for a, b in zip(x, x_prime, strict=True)) == 1
    assert naive_sensitive_count(x, lower_median, 1.0) == 0
    assert naive_sensitive_count(x_prime, lower_median, 1.0) == 3  # jumps 0 -> (n + 1)/2
    # whereas a valid distance to instability moves by at most 1 (here both datasets are unstable):
    gammas = [distance_to_instability(OrderStatisticFamily(y, 3, 0.0, 2.0), bound=1.0, cap=10) for y in (x, x_prime)]
    assert gammas == [0, 0]


def test_naive_removal_count_misses_additions_for_the_closest_pair() -> None:
    x = (0.0, 100.0, 200.0, 300.0)
    x_prime = (*x, 0.0)  # add/remove neighbour
    assert naive_sensitive_count(x, closest_pair, 1.0) == 0
    assert naive_sensitive_count(x_prime, closest_pair, 1.0) == 2
    # yet one ADDITION collapses f(x) = 100 to 0: the local sensitivity is 100, not <= 1
    assert closest_pair(x) - min(closest_pair((*x, float(v))) for v in range(0, 301)) == 100


def _laplace_cdf(z: float, scale: float) -> float:
    return 0.5 * math.exp(z / scale) if z < 0 else 1 - 0.5 * math.exp(-z / scale)


def test_naive_ptr_violates_dp_by_40_nats_on_the_closest_pair() -> None:
    # Naive M(y): if count(y) + Lap(1/eps) <= 0.5 release f(y) + Lap(B/eps), else refuse. B = 1, eps = 1.
    eps, bound = 1.0, 1.0
    x = (0.0, 100.0, 200.0, 300.0)
    x_prime = (*x, 0.0)

    def p_release_at_most(y: tuple[float, ...], t: float) -> float:
        passes = _laplace_cdf(0.5 - naive_sensitive_count(y, closest_pair, bound), 1 / eps)
        return passes * _laplace_cdf(t - closest_pair(y), bound / eps)

    p_x_prime, p_x = p_release_at_most(x_prime, 50.0), p_release_at_most(x, 50.0)
    assert p_x_prime == pytest.approx(0.5 * math.exp(-1.5) * (1 - 0.5 * math.exp(-50)), rel=1e-12)
    assert 0.111 < p_x_prime < 0.112
    assert p_x == pytest.approx((1 - 0.5 * math.exp(-0.5)) * 0.5 * math.exp(-50), rel=1e-12)
    assert 6.7e-23 < p_x < 6.8e-23
    # P[M(x') in S] <= e^eps' P[M(x) in S] + delta fails for every eps' < 40 unless delta >= 0.11:
    for delta in (0.0, 1e-6, 0.05, 0.11):
        assert p_x_prime - delta > math.exp(40) * p_x
    # The correct test: LS(x) = 100 > B (one addition) and LS(x') >= 100 (one removal), so any valid distance is 0
    # for both and PTR refuses both except with probability delta.
    assert closest_pair(x_prime[1:]) - closest_pair(x_prime) == 100
    for y in (x, x_prime):
        refused = propose_test_release(
            closest_pair(y), 0, proposed_bound=bound, epsilon_test=eps, epsilon_release=eps, delta=1e-12
        )
        assert isinstance(refused, Refusal)
