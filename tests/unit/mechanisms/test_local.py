"""Unit tests for dpsense.mechanisms.local: inputs, outputs, exact expansions, estimator algebra."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core import InvalidData, InvalidPrivacyParameter, PureDP, UsageError
from dpsense.mechanisms import local
from dpsense.mechanisms.local import (
    k_ary_randomized_response,
    optimized_unary_encoding,
    randomized_response,
    recommend_frequency_oracle,
)
from dpsense.mechanisms.local_estimators import (
    Estimate,
    estimate_counts_grr,
    estimate_counts_oue,
    estimate_proportion_rr,
    grr_count_variance,
    oue_count_variance,
    rr_proportion_variance,
)
from dpsense.noise import entropy, lazy_bernoulli
from dpsense.noise.testing import deterministic_entropy

E = math.e

# ---------------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------------

BAD_EPSILONS = [0, -1, 0.0, float("nan"), float("inf"), -float("inf"), True, "abc", None]


@pytest.mark.parametrize("epsilon", BAD_EPSILONS)
def test_every_entry_point_refuses_bad_epsilon(epsilon: object) -> None:
    calls = [
        lambda: randomized_response([0, 1], epsilon=epsilon),  # type: ignore[arg-type]
        lambda: k_ary_randomized_response([0, 1], k=3, epsilon=epsilon),  # type: ignore[arg-type]
        lambda: optimized_unary_encoding([0, 1], k=3, epsilon=epsilon),  # type: ignore[arg-type]
        lambda: estimate_proportion_rr([0, 1], epsilon=epsilon),  # type: ignore[arg-type]
        lambda: estimate_counts_grr([0, 1], k=3, epsilon=epsilon),  # type: ignore[arg-type]
        lambda: estimate_counts_oue([[0, 1], [1, 0]], epsilon=epsilon),  # type: ignore[arg-type]
        lambda: recommend_frequency_oracle(k=3, epsilon=epsilon),  # type: ignore[arg-type]
        lambda: rr_proportion_variance(n=3, epsilon=epsilon),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidPrivacyParameter):
            call()


@pytest.mark.parametrize("k", [1, 0, -3, True, 2.5, "3", None, 1 << 31])
def test_bad_k_is_a_usage_error(k: object) -> None:
    for call in (
        lambda: k_ary_randomized_response([0, 1], k=k, epsilon=1),  # type: ignore[arg-type]
        lambda: optimized_unary_encoding([0, 1], k=k, epsilon=1),  # type: ignore[arg-type]
        lambda: estimate_counts_grr([0, 1], k=k, epsilon=1),  # type: ignore[arg-type]
        lambda: recommend_frequency_oracle(k=k, epsilon=1),  # type: ignore[arg-type]
    ):
        with pytest.raises(UsageError, match="k, the number of categories") as info:
            call()
        assert not isinstance(info.value, InvalidData)


def test_numpy_integer_k_is_accepted() -> None:
    assert k_ary_randomized_response([0, 1], k=np.int64(3), epsilon=1).details["k"] == 3  # type: ignore[arg-type]


BAD_CODES = [
    ([], "must not be empty"),
    (np.array([], dtype=np.int64), "must not be empty"),
    ([[0, 1], [1, 0]], "1-D"),
    (5, "1-D"),
    ([0.0, 1.0], "integer codes"),
    ([0, float("nan")], "integer codes"),
    (["a", "b"], "integer codes"),
    (np.array([0, 1], dtype=object), "integer codes"),
    ([0, 3], r"must lie in \[0, 3\)"),
    ([-1, 0], r"must lie in \[0, 3\)"),
    (np.array([0, 2**40], dtype=np.uint64), r"must lie in \[0, 3\)"),
]


@pytest.mark.parametrize(("values", "message"), BAD_CODES)
def test_bad_category_codes_are_refused(values: object, message: str) -> None:
    for call in (
        lambda: k_ary_randomized_response(values, k=3, epsilon=1),  # type: ignore[arg-type]
        lambda: optimized_unary_encoding(values, k=3, epsilon=1),  # type: ignore[arg-type]
        lambda: estimate_counts_grr(values, k=3, epsilon=1),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidData, match=message):
            call()


def test_bools_are_not_category_codes_beyond_two_values() -> None:
    with pytest.raises(InvalidData, match="integer codes"):
        k_ary_randomized_response([True, False], k=3, epsilon=1)
    assert k_ary_randomized_response([True, False], k=2, epsilon=1).value.dtype == np.int64


@pytest.mark.parametrize(
    ("bits", "message"), [([], "empty"), ([0, 2], r"\[0, 2\)"), ([0.5], "integer"), ([[1]], "1-D")]
)
def test_bad_bits_are_refused(bits: object, message: str) -> None:
    with pytest.raises(InvalidData, match=message):
        randomized_response(bits, epsilon=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidData, match=message):
        estimate_proportion_rr(bits, epsilon=1)  # type: ignore[arg-type]


def test_errors_never_echo_a_users_value() -> None:
    secret = 987_654_321
    with pytest.raises(InvalidData) as info:
        k_ary_randomized_response([0, secret], k=5, epsilon=1)
    assert str(secret) not in str(info.value)
    assert "Fix:" in str(info.value)


@pytest.mark.parametrize(
    "reports", [[0, 1], [[]], np.zeros((0, 3)), [[0], [1]], [[0, 2], [1, 0]], [[0.0, 1.0], [1.0, 0.0]]]
)
def test_bad_unary_reports_are_refused(reports: object) -> None:
    with pytest.raises(InvalidData):
        estimate_counts_oue(reports, epsilon=1)  # type: ignore[arg-type]


def test_variance_helpers_check_their_inputs() -> None:
    with pytest.raises(UsageError, match="n, the number"):
        rr_proportion_variance(n=0, epsilon=1)
    with pytest.raises(UsageError, match="n, the number"):
        grr_count_variance(n=True, k=3, epsilon=1, count=0)
    with pytest.raises(UsageError, match="n, the number"):
        oue_count_variance(n=2.0, epsilon=1, count=0)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="population_proportion"):
        rr_proportion_variance(n=3, epsilon=1, population_proportion=1.5)


# ---------------------------------------------------------------------------------------------
# Outputs and metadata
# ---------------------------------------------------------------------------------------------


def test_randomized_response_keeps_the_input_kind() -> None:
    as_bool = randomized_response(np.array([True, False, True]), epsilon=1).value
    as_int = randomized_response([1, 0, 1], epsilon=1).value
    assert as_bool.dtype == np.bool_ and as_bool.shape == (3,)
    assert as_int.dtype == np.int64 and set(np.unique(as_int)) <= {0, 1}


def test_result_states_loss_guarantee_and_adjacency() -> None:
    res = k_ary_randomized_response([0, 1, 2], k=3, epsilon=0.1)
    assert res.loss == PureDP(Fraction(1, 10))
    assert res.details["epsilon_per_user"] == Fraction(1, 10)
    assert res.accuracy is None
    assert res.mechanism == "k_ary_randomized_response/exact@1"
    assert "ε-local DP" in res.guarantee and "replace" in res.details["adjacency"]
    assert res.details["p_true"] / res.details["q_other"] == pytest.approx(math.exp(0.1), rel=1e-12)
    assert res.details["p_true"] + 2 * res.details["q_other"] == pytest.approx(1, rel=1e-12)
    rr = randomized_response([0, 1], epsilon=2)
    assert rr.details["p_truth"] == pytest.approx(E**2 / (E**2 + 1), rel=1e-12)
    oue = optimized_unary_encoding([0, 1], k=4, epsilon=2)
    assert oue.details["q_other_bit"] == pytest.approx(1 / (E**2 + 1), rel=1e-12)
    assert "Warner" in rr.guarantee and "Wang" in oue.guarantee


def test_outputs_have_the_promised_shapes() -> None:
    values = np.arange(1000) % 7
    grr = k_ary_randomized_response(values, k=7, epsilon=0.5).value
    assert grr.shape == (1000,) and grr.dtype == np.int64 and grr.min() >= 0 and grr.max() < 7
    oue = optimized_unary_encoding(values, k=7, epsilon=0.5).value
    assert oue.shape == (1000, 7) and oue.dtype == np.bool_


def test_unary_encoding_fills_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "_CHUNK_CELLS", 10)  # 3 rows per chunk for k = 3: several chunks
    with deterministic_entropy(3):
        reports = optimized_unary_encoding(np.arange(20) % 3, k=3, epsilon=Fraction(1, 1000)).value
    assert reports.shape == (20, 3)
    assert 10 < reports.sum() < 50  # ~ 30 ones expected; a missed chunk would leave garbage or zeros


def test_deterministic_entropy_reproduces_reports() -> None:
    values = np.arange(500) % 5
    runs = []
    for seed in (1, 1, 2):
        with deterministic_entropy(seed):
            runs.append(
                (
                    k_ary_randomized_response(values, k=5, epsilon=1).value,
                    optimized_unary_encoding(values, k=5, epsilon=1).value,
                )
            )
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][0], runs[2][0])


def test_huge_epsilon_reports_the_truth_and_tiny_epsilon_works() -> None:
    values = np.arange(10_000) % 9
    with deterministic_entropy(5):
        assert np.array_equal(k_ary_randomized_response(values, k=9, epsilon=80).value, values)
        oue = optimized_unary_encoding(values, k=9, epsilon=10**9).value
        grr = k_ary_randomized_response(values, k=9, epsilon="1e-12").value
    others = oue.copy()
    others[np.arange(values.size), values] = False
    assert not others.any()  # P(other bit = 1) = 1/(e^(10^9)+1)
    assert (grr == values).mean() < 0.2  # ~ 1/9 truthful at ε ≈ 0


# ---------------------------------------------------------------------------------------------
# Exact binary expansion of c/(e^ε + c) against an independent rational oracle
# ---------------------------------------------------------------------------------------------


def _oracle_floor(c: int, epsilon: Fraction, m: int) -> int:
    """floor(2^m c/(e^ε+c)) from exact Taylor brackets of e^ε (positive series, geometric tail)."""
    terms = 40
    while True:
        total, term = Fraction(0), Fraction(1)
        for j in range(terms + 1):
            total += term
            term = term * epsilon / (j + 1)
        tail = term / (1 - epsilon / (terms + 2))  # sum_{j > terms} ε^j/j! for terms + 2 > ε
        lo = math.floor(Fraction(c, 1) / (total + tail + c) * 2**m)
        hi = math.floor(Fraction(c, 1) / (total + c) * 2**m)
        if lo == hi:
            return lo
        terms *= 2


@pytest.mark.parametrize(
    ("c", "epsilon"),
    [(1, Fraction(1)), (1, Fraction(1, 10)), (4, Fraction(3, 7)), (999, Fraction(8)), (2, Fraction(123457, 100000))],
)
def test_binary_expansion_matches_rational_oracle(c: int, epsilon: Fraction) -> None:
    prob = lazy_bernoulli.RationalOddsProbability(c, epsilon)
    for m in (1, 7, 32, 64, 96, 200):
        assert prob.floor_scaled(m) == _oracle_floor(c, epsilon, m)
    rebuilt = 0
    for j in range(1, 4):
        rebuilt = (rebuilt << 32) | prob.block(j, 32)
    assert rebuilt == prob.floor_scaled(96)


def test_binary_expansion_of_vanishing_probability_is_zero() -> None:
    prob = lazy_bernoulli.RationalOddsProbability(3, Fraction(10**30))
    assert prob.floor_scaled(64) == 0 and prob.block(5, 32) == 0


def test_lazy_comparison_resolves_ties_with_later_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    prob = lazy_bernoulli.RationalOddsProbability(1, Fraction(1))
    d1, d2 = prob.block(1, 32), prob.block(2, 32)
    assert 0 < d1 < 2**32 - 1 and 0 < d2 < 2**32 - 1
    script = iter(
        [
            np.array([d1, d1, d1 - 1, d1 + 1, d1], dtype=np.uint32),  # lanes 0, 1, 4 tie at block 1
            np.array([d2 - 1, d2 + 1, d2], dtype=np.uint32),  # lane 4 ties again
            np.array([0], dtype=np.uint32),  # lane 4: block 3 of P is not 0 for this P
        ]
    )
    monkeypatch.setattr(entropy, "words32", lambda n: next(script))
    assert prob.block(3, 32) != 0
    assert lazy_bernoulli.bernoulli_lazy(prob, 5).tolist() == [True, False, True, False, True]


# ---------------------------------------------------------------------------------------------
# Estimators: closed forms, algebra, the recommendation rule
# ---------------------------------------------------------------------------------------------


def test_rr_estimate_matches_closed_form() -> None:
    reports = np.array([1] * 70 + [0] * 30)
    est = estimate_proportion_rr(reports, epsilon=1)
    assert isinstance(est, Estimate)
    assert est.value == pytest.approx(((E + 1) * 0.7 - 1) / (E - 1), rel=1e-12)
    assert est.variance == pytest.approx(E / (100 * (E - 1) ** 2), rel=1e-12)
    assert est.std_error == pytest.approx(math.sqrt(est.variance), rel=1e-15)
    pi = est.value
    assert est.population_variance == pytest.approx(pi * (1 - pi) / 100 + est.variance, rel=1e-12)
    assert rr_proportion_variance(n=100, epsilon=1, population_proportion=0.3) == pytest.approx(
        0.21 / 100 + E / (100 * (E - 1) ** 2), rel=1e-12
    )


def test_rr_estimate_can_leave_the_unit_interval_unclipped() -> None:
    est = estimate_proportion_rr(np.ones(10, dtype=bool), epsilon=1)
    assert est.value > 1  # unbiasedness forbids clipping the estimate
    assert est.population_variance == pytest.approx(est.variance)  # plug-in clipped to 1


def test_grr_estimate_and_variance_match_the_paper_formulas() -> None:
    k, eps = 4, 0.7
    reports = np.array([0] * 50 + [1] * 30 + [2] * 15 + [3] * 5)
    n = reports.size
    p, q = math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)
    est = estimate_counts_grr(reports, k=k, epsilon=eps)
    expected = (np.array([50, 30, 15, 5]) - n * q) / (p - q)
    np.testing.assert_allclose(est.value, expected, rtol=1e-12)
    c = np.clip(expected, 0, n)
    np.testing.assert_allclose(est.variance, n * q * (1 - q) / (p - q) ** 2 + c * (1 - p - q) / (p - q), rtol=1e-12)
    np.testing.assert_allclose(est.population_variance, est.variance + c * (1 - c / n), rtol=1e-12)
    np.testing.assert_allclose(est.std_error, np.sqrt(est.variance), rtol=1e-15)


def test_grr_variance_for_two_values_is_the_rr_variance() -> None:
    var = grr_count_variance(n=250, k=2, epsilon=1.5, count=np.array([0.0, 100.0, 250.0]))
    np.testing.assert_allclose(var / 250**2, rr_proportion_variance(n=250, epsilon=1.5), rtol=1e-12)


def test_oue_estimate_and_exact_variance_match_the_derivation() -> None:
    eps, n = 1.3, 40
    bits = np.zeros((n, 3), dtype=np.int64)
    bits[:25, 0] = 1
    bits[10:18, 1] = 1
    est = estimate_counts_oue(bits, epsilon=eps)
    qp = 1 / (math.exp(eps) + 1)
    expected = (np.array([25, 8, 0]) - n * qp) / (0.5 - qp)
    np.testing.assert_allclose(est.value, expected, rtol=1e-12)
    c = np.clip(expected, 0, n)
    direct = (c / 4 + (n - c) * qp * (1 - qp)) / (0.5 - qp) ** 2  # Var N_v / (1/2 - q')^2
    np.testing.assert_allclose(est.variance, direct, rtol=1e-12)
    approx = n * 4 * math.exp(eps) / (math.exp(eps) - 1) ** 2  # docs/math/local-dp.md: the c_v = 0 term
    np.testing.assert_allclose(oue_count_variance(n=n, epsilon=eps, count=0), approx, rtol=1e-12)


def test_estimators_accept_the_mechanism_output() -> None:
    values = np.arange(300) % 3
    grr = k_ary_randomized_response(values, k=3, epsilon=2)
    oue = optimized_unary_encoding(values, k=3, epsilon=2)
    assert estimate_counts_grr(grr.value, k=3, epsilon=2).value.shape == (3,)
    assert estimate_counts_oue(oue.value, epsilon=2).value.shape == (3,)
    rr = randomized_response(values % 2 == 0, epsilon=2)
    assert isinstance(estimate_proportion_rr(rr.value, epsilon=2).value, float)


def test_estimators_stay_finite_at_extreme_epsilons() -> None:
    big = estimate_counts_grr(np.array([0, 0, 1]), k=3, epsilon=5000)
    np.testing.assert_allclose(big.value, [2, 1, 0])
    assert np.all(np.isfinite(big.variance))
    small = estimate_proportion_rr(np.array([0, 1]), epsilon="1e-9")
    assert math.isfinite(small.value) and small.variance > 1e15


@given(
    reports=st.lists(st.integers(0, 5), min_size=1, max_size=200),
    epsilon=st.fractions(min_value=Fraction(1, 100), max_value=20),
)
@settings(max_examples=60, deadline=None)
def test_grr_count_estimates_sum_to_n(reports: list[int], epsilon: Fraction) -> None:
    est = estimate_counts_grr(reports, k=6, epsilon=epsilon)
    assert float(np.sum(est.value)) == pytest.approx(len(reports), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize(
    ("k", "epsilon", "choice"),
    [(2, 0.01, "grr"), (10, 1, "grr"), (11, 1, "oue"), (5, 0.1, "grr"), (6, 0.1, "oue"), (1000, 6, "grr")],
)
def test_recommendation_follows_k_below_3e_eps_plus_2(k: int, epsilon: float, choice: str) -> None:
    assert recommend_frequency_oracle(k=k, epsilon=epsilon) == choice
    assert (k < 3 * math.exp(epsilon) + 2) == (choice == "grr")
    floor = grr_count_variance(n=1, k=k, epsilon=epsilon, count=0)
    assert (floor < oue_count_variance(n=1, epsilon=epsilon, count=0)) == (choice == "grr")


def test_public_names_are_exported_and_documented() -> None:
    from dpsense.mechanisms import local_estimators

    for module in (local, local_estimators):
        for name in module.__all__:
            obj = getattr(module, name)
            assert obj.__doc__ and obj.__doc__.strip()
