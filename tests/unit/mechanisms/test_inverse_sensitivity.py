from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import PureDP
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.mechanisms import inverse_sensitivity as inv
from dpsense.mechanisms.inverse_sensitivity import (
    inverse_sensitivity_median,
    inverse_sensitivity_order_statistic,
    order_statistic_path_lengths,
)
from dpsense.mechanisms.quantile import em_quantile
from dpsense.noise.testing import deterministic_entropy
from tests.statistical.gof import P_THRESHOLD, chi_square_pvalue
from tests.statistical.power import assert_calibrated

# ---------------------------------------------------------------- the exact path length, by brute force


def brute_force_lengths(domain: range, n: int) -> dict[tuple[tuple[int, ...], int, int, int], int]:
    """min Hamming distance from x to some x' in domain^n with lo <= x'_(r) < hi, for every x, r, [lo, hi)."""
    tuples = np.array(list(itertools.product(domain, repeat=n)), dtype=np.int64)
    order_stats = np.sort(tuples, axis=1)
    hamming = (tuples[:, None, :] != tuples[None, :, :]).sum(axis=2)
    out: dict[tuple[tuple[int, ...], int, int, int], int] = {}
    for r in range(1, n + 1):
        for lo in domain:
            for hi in range(lo + 1, domain.stop + 1):
                hits = (order_stats[:, r - 1] >= lo) & (order_stats[:, r - 1] < hi)
                best = hamming[:, hits].min(axis=1)
                for i, x in enumerate(tuples):
                    out[(tuple(int(v) for v in x), r, lo, hi)] = int(best[i])
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_point_and_interval_path_lengths_match_brute_force(n: int) -> None:
    domain = range(4)
    brute = brute_force_lengths(domain, n)
    for (x, r, lo, hi), expected in brute.items():
        data = np.array(x)
        if hi == lo + 1:  # a single point y = lo
            assert order_statistic_path_lengths(data, rank=r, candidates=[lo])[0] == expected
        formula = max(0, int((data < lo).sum()) - r + 1, r - int((data < hi).sum()))
        assert formula == expected, (x, r, lo, hi)


def test_path_length_is_one_lipschitz_under_replace() -> None:
    domain, n = range(4), 4
    candidates = list(domain)
    for x in itertools.product(domain, repeat=n):
        for r in range(1, n + 1):
            base = order_statistic_path_lengths(x, rank=r, candidates=candidates)
            for i, v in itertools.product(range(n), domain):
                y = (*x[:i], v, *x[i + 1 :])
                assert np.abs(order_statistic_path_lengths(y, rank=r, candidates=candidates) - base).max() <= 1


def test_runs_expand_to_the_per_cell_path_lengths() -> None:
    resolution = 12
    for cells in ([3, 3, 3, 7, 11], [0, 0, 5], [11], [2, 4, 4, 4, 4, 9, 10], [0, 11]):
        sorted_cells = np.array(sorted(cells), dtype=np.int64)
        for r in range(1, len(cells) + 1):
            starts, sizes, lengths = inv._runs(sorted_cells, r, resolution)
            per_cell = np.repeat(lengths, sizes)
            assert per_cell.size == resolution
            assert np.array_equal(
                np.concatenate([np.arange(s, s + z) for s, z in zip(starts, sizes, strict=True)]), np.arange(resolution)
            )
            expected = order_statistic_path_lengths(sorted_cells, rank=r, candidates=np.arange(resolution))
            assert np.array_equal(per_cell, expected)
            assert per_cell.min() == 0 and per_cell[sorted_cells[r - 1]] == 0


# ---------------------------------------------------------------- the mechanism


def test_result_states_pure_dp_and_public_rank_bound() -> None:
    result = inverse_sensitivity_order_statistic([1.0, 2.0, 3.0, 4.0, 5.0], rank=2, bounds=(0, 10), epsilon=0.5)
    assert result.loss == PureDP(Fraction(1, 2))
    assert result.accuracy is None
    assert "Asi-Duchi" in result.guarantee and "replace adjacency" in result.guarantee
    assert 0.0 <= result.value <= 10.0
    assert result.details["rank"] == 2
    assert result.details["rank_error_bound"] == pytest.approx(4 * math.log(2**32 / 0.05))


def test_median_uses_the_lower_median_rank() -> None:
    assert inverse_sensitivity_median([1.0, 2.0, 3.0, 4.0], bounds=(0, 5), epsilon=1).details["rank"] == 2
    assert inverse_sensitivity_median([1.0, 2.0, 3.0], bounds=(0, 5), epsilon=1).details["rank"] == 2


def test_accurate_on_dense_data() -> None:
    values = np.linspace(0.0, 100.0, 2001)
    with deterministic_entropy(7):
        outs = [inverse_sensitivity_median(values, bounds=(0, 100), epsilon=1).value for _ in range(20)]
    # (2/eps) ln(K/beta) ~ 50 ranks = 2.5 units: every draw is within that of the true median 50.
    assert max(abs(v - 50.0) for v in outs) < 2.5


def test_ties_are_scored_as_exact_answers_like_the_em_quantile() -> None:
    # 400 of 1000 records hold the median value 5.0 exactly.
    values = np.concatenate([np.linspace(0.0, 4.5, 300), np.full(400, 5.0), np.linspace(5.5, 10.0, 300)])
    resolution = 1 << 20
    width = 10.0 / resolution
    with deterministic_entropy(11):
        inverse = [
            inverse_sensitivity_median(values, bounds=(0, 10), epsilon=1, resolution=resolution) for _ in range(5)
        ]
        em = [em_quantile(values, q=0.5, bounds=(0, 10), epsilon=1, resolution=resolution) for _ in range(5)]
    assert all(abs(r.value - 5.0) <= width for r in inverse)
    # the EM quantile's tie-aware ranks (@2) give 5.0's cell the ranks [300, 700] around q n = 500: utility 0
    # (before @2 it scored the cell by the 300 records below it and landed in a neighbouring gap)
    assert all(abs(r.value - 5.0) <= width for r in em)


def test_single_cell_and_degenerate_bounds() -> None:
    assert inverse_sensitivity_median([3.0, 4.0], bounds=(2, 2), epsilon=1).value == 2.0
    assert inverse_sensitivity_median([3.0, 4.0], bounds=(0, 8), epsilon=1, resolution=1).value == 4.0


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: inverse_sensitivity_order_statistic([1.0], rank=0, bounds=(0, 1), epsilon=1), UsageError),
        (lambda: inverse_sensitivity_order_statistic([1.0], rank=2, bounds=(0, 1), epsilon=1), UsageError),
        (lambda: inverse_sensitivity_order_statistic([1.0], rank=True, bounds=(0, 1), epsilon=1), UsageError),
        (lambda: inverse_sensitivity_median([[1.0, 2.0]], bounds=(0, 1), epsilon=1), InvalidData),
        (lambda: inverse_sensitivity_median([math.nan], bounds=(0, 1), epsilon=1), InvalidData),
        (lambda: inverse_sensitivity_median([1.0], bounds=(2, 1), epsilon=1), InvalidBounds),
        (lambda: inverse_sensitivity_median([1.0], bounds=(0, math.inf), epsilon=1), InvalidBounds),
        (lambda: inverse_sensitivity_median([1.0], bounds=(0, 1), epsilon=0), InvalidPrivacyParameter),
        (lambda: inverse_sensitivity_median([1.0], bounds=(0, 1), epsilon=1, resolution=0), UsageError),
    ],
)
def test_validation(call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()  # type: ignore[operator]


# ---------------------------------------------------------------- distribution, with power


def exact_pmf(sorted_cells: np.ndarray, rank: int, epsilon: float, resolution: int) -> np.ndarray:
    lengths = order_statistic_path_lengths(sorted_cells, rank=rank, candidates=np.arange(resolution))
    weights = np.exp(-epsilon * lengths / 2)
    return weights / weights.sum()


@pytest.mark.statistical
def test_draws_follow_exp_minus_eps_len_over_two_and_reject_wrong_epsilon() -> None:
    resolution, rank, n_draws = 16, 3, 200_000
    cells = np.array([2, 5, 5, 9, 12, 12, 12], dtype=np.int64)
    draws = inv._draw_cells(cells, rank, Fraction(1), resolution, n_draws)
    assert_calibrated(
        lambda f: chi_square_pvalue(draws, lambda s: exact_pmf(cells, rank, f, resolution)[s], 0, resolution - 1),
        what="ε",
    )


def test_no_records_release_a_uniform_public_cell_at_the_same_loss() -> None:
    """n = 0, r = 1: the path length is 1 for every candidate (one record must be added there)."""
    lengths = order_statistic_path_lengths([], rank=1, candidates=np.linspace(0, 1, 9))
    assert np.all(lengths == 1)
    result = inverse_sensitivity_order_statistic([], rank=1, bounds=(0, 1), epsilon=1, resolution=8)
    assert result.loss == PureDP(1) and 0 <= result.value <= 1
    assert (result.value * 8 - 0.5) == pytest.approx(round(result.value * 8 - 0.5))
    assert inverse_sensitivity_median(np.array([]), bounds=(0, 1), epsilon=1).loss == PureDP(1)
    with pytest.raises(UsageError):
        inverse_sensitivity_order_statistic([], rank=2, bounds=(0, 1), epsilon=1)


@pytest.mark.statistical
def test_no_records_law_is_uniform_over_the_cells() -> None:
    empty = np.array([], dtype=np.int64)
    pmf = exact_pmf(empty, 1, 1.0, 16)
    assert np.all(pmf == 1 / 16)
    draws = inv._draw_cells(empty, 1, Fraction(1), 16, 100_000)
    assert chi_square_pvalue(draws, lambda s: pmf[s], 0, 15) > P_THRESHOLD
