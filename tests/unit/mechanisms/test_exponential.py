from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import PureDP
from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, InvalidSensitivity, UsageError
from dpsense.mechanisms import _quantile_candidates as quantile_candidates
from dpsense.mechanisms import _rank_sampler as rank_sampler
from dpsense.mechanisms import quantile
from dpsense.mechanisms.exponential import em_weights, exponential_mechanism, report_noisy_max
from dpsense.mechanisms.quantile import em_quantile, em_quantiles
from dpsense.noise import entropy, exact
from dpsense.noise.testing import deterministic_entropy
from tests.statistical.gof import P_THRESHOLD, chi_square_pvalue
from tests.statistical.power import assert_calibrated

# ---------------------------------------------------------------- exponential mechanism


def test_em_result_carries_loss_guarantee_and_public_details() -> None:
    result = exponential_mechanism([3, 1, 2], epsilon=0.5, sensitivity=1, candidates=["a", "b", "c"])
    assert result.value in {"a", "b", "c"}
    assert result.loss == PureDP(Fraction(1, 2))
    assert result.accuracy is None
    assert "DR Thm 3.10" in result.guarantee
    assert result.details["candidates"] == 3
    # DR Thm 3.11: (2 Delta / eps)(ln m + ln(1/beta)) with beta = 0.05.
    assert result.details["utility_shortfall_bound"] == pytest.approx(4 * (math.log(3) + math.log(20)))
    assert ["a", "b", "c"][result.details["index"]] == result.value


def test_em_weights_are_exact_for_rationals_and_monotone_halves_the_divisor() -> None:
    utilities: list[int | Fraction] = [Fraction(1, 2), Fraction(2, 3), 1]
    exponents, rate = em_weights(utilities, epsilon=Fraction(1, 10), sensitivity=Fraction(3), monotone=False)
    assert exponents.tolist() == [3, 2, 0]  # (1 - u) * 6
    assert rate == Fraction(1, 10) / (2 * 3 * 6)
    _, rate_monotone = em_weights([1, 2], epsilon=Fraction(1), sensitivity=Fraction(1), monotone=True)
    assert rate_monotone == 1


def test_em_accepts_whole_floats_and_numpy_ints() -> None:
    assert em_weights(np.array([2.0, 5.0]), epsilon=Fraction(1), sensitivity=Fraction(1), monotone=False)[
        0
    ].tolist() == [3, 0]
    assert em_weights(np.array([7, -2], dtype=np.int32), epsilon=Fraction(1), sensitivity=Fraction(1), monotone=False)[
        0
    ].tolist() == [0, 9]


def test_em_weights_handle_extreme_integer_ranges_exactly() -> None:
    one = Fraction(1)
    wide_unsigned = np.array([2**64 - 1, 2**64 - 5], dtype=np.uint64)
    assert em_weights(wide_unsigned, epsilon=one, sensitivity=one, monotone=False)[0].tolist() == [0, 4]
    big_floats = np.array([1e20, 1e20 + 2**14])
    assert em_weights(big_floats, epsilon=one, sensitivity=one, monotone=False)[0].tolist() == [2**14, 0]
    with pytest.raises(InvalidData):
        em_weights(np.array([-(2**62), 2**62], dtype=np.int64), epsilon=one, sensitivity=one, monotone=False)


def test_em_overwhelming_utility_gap_picks_the_best() -> None:
    # The runner-up has probability exp(-1000): never observed.
    picks = {exponential_mechanism([0, 2000, 0], epsilon=1, sensitivity=1).value for _ in range(200)}
    assert picks == {1}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"utilities": [1, 2], "epsilon": 0, "sensitivity": 1}, InvalidPrivacyParameter),
        ({"utilities": [1, 2], "epsilon": -1, "sensitivity": 1}, InvalidPrivacyParameter),
        ({"utilities": [1, 2], "epsilon": 1, "sensitivity": 0}, InvalidSensitivity),
        ({"utilities": [1, 2], "epsilon": 1, "sensitivity": float("nan")}, InvalidSensitivity),
        ({"utilities": [], "epsilon": 1, "sensitivity": 1}, InvalidData),
        ({"utilities": [1.5, 2.0], "epsilon": 1, "sensitivity": 1}, InvalidData),
        ({"utilities": [float("inf"), 2.0], "epsilon": 1, "sensitivity": 1}, InvalidData),
        ({"utilities": ["x", 2], "epsilon": 1, "sensitivity": 1}, InvalidData),
        ({"utilities": [0, 2**64], "epsilon": 1, "sensitivity": 1}, InvalidData),
        ({"utilities": [1, 2], "epsilon": 1, "sensitivity": 1, "candidates": ["only one"]}, InvalidData),
    ],
)
def test_em_refuses_bad_input(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        exponential_mechanism(**kwargs)  # type: ignore[arg-type]


def test_report_noisy_max_is_the_em_sampled_exactly() -> None:
    with deterministic_entropy(3):
        via_em = [exponential_mechanism([4, 1, 7, 7], epsilon=2, sensitivity=1).value for _ in range(50)]
    with deterministic_entropy(3):
        results = [report_noisy_max([4, 1, 7, 7], epsilon=2, sensitivity=1) for _ in range(50)]
    assert [r.value for r in results] == via_em
    assert results[0].mechanism.startswith("report_noisy_max/gumbel")
    assert "Gumbel" in results[0].guarantee


# ---------------------------------------------------------------- quantiles


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"values": [[1.0, 2.0]], "q": 0.5, "bounds": (0, 1), "epsilon": 1}, InvalidData),
        ({"values": [0.1, float("nan")], "q": 0.5, "bounds": (0, 1), "epsilon": 1}, InvalidData),
        ({"values": [0.1], "q": 0.5, "bounds": (1, 0), "epsilon": 1}, InvalidBounds),
        ({"values": [0.1], "q": 0.5, "bounds": (0, float("inf")), "epsilon": 1}, InvalidBounds),
        ({"values": [0.1], "q": 0.5, "bounds": (0,), "epsilon": 1}, InvalidBounds),
        ({"values": [0.1], "q": 1.5, "bounds": (0, 1), "epsilon": 1}, UsageError),
        ({"values": [0.1], "q": -0.1, "bounds": (0, 1), "epsilon": 1}, UsageError),
        ({"values": [0.1], "q": 0.5, "bounds": (0, 1), "epsilon": 0}, InvalidPrivacyParameter),
        ({"values": [0.1], "q": 0.5, "bounds": (0, 1), "epsilon": 1, "resolution": 0}, UsageError),
        ({"values": [0.1], "q": 0.5, "bounds": (0, 1), "epsilon": 1, "resolution": 2**53}, UsageError),
    ],
)
def test_quantile_refuses_bad_input(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        em_quantile(**kwargs)  # type: ignore[arg-type]


def test_quantiles_refuse_empty_qs() -> None:
    with pytest.raises(UsageError):
        em_quantiles([0.1, 0.2], qs=[], bounds=(0, 1), epsilon=1)


def test_quantile_output_is_a_public_cell_midpoint_inside_the_bounds() -> None:
    values = [-5.0, 0.1, 0.2, 0.25, 0.9, float("inf")]
    for _ in range(200):
        result = em_quantile(values, q=0.5, bounds=(0, 1), epsilon=1, resolution=8)
        assert 0 <= result.value <= 1
        assert (result.value * 8 - 0.5) == pytest.approx(round(result.value * 8 - 0.5))
    assert result.loss == PureDP(1)
    assert result.accuracy is None
    assert result.details["rank_excess_bound"] == pytest.approx(2 * math.log(8 / 0.05))


def test_degenerate_bounds_release_the_bound() -> None:
    assert em_quantile([3.0, 4.0], q=0.5, bounds=(2, 2), epsilon=1).value == 2.0


def test_huge_bounds_do_not_overflow() -> None:
    result = em_quantile([0.0, 1e300, -1e300], q=0.5, bounds=(-1.7e308, 1.7e308), epsilon=1)
    assert math.isfinite(result.value)


def test_public_function_uses_the_same_randomness_as_the_bulk_sampler() -> None:
    values = np.array([0.3, 0.1, 0.7, 0.7, 0.2])
    cells = quantile_candidates.to_cells(values, 0.0, 1.0, 64)
    for seed in range(20):
        with deterministic_entropy(seed):
            released = em_quantile(values, q=0.3, bounds=(0, 1), epsilon=2, resolution=64).value
        with deterministic_entropy(seed):
            cell = rank_sampler.draw_cells(cells, Fraction(3, 10), Fraction(2), 1)
        assert released == quantile_candidates.cell_midpoints(cell, 0.0, 1.0, 64)[0]


def test_accurate_on_large_data() -> None:
    values = np.linspace(0, 1, 10_001)
    # Rank error bound with beta = 1e-12 (DR Thm 3.11): (2/eps) ln(K / beta), values in distinct cells.
    slack = 2.0 * math.log(2**32 / 1e-12) + 1
    for q in (0.1, 0.5, 0.97):
        released = em_quantile(values, q=q, bounds=(0, 1), epsilon=1).value
        rank = int(np.sum(values < released))
        assert abs(rank - q * values.size) <= slack + 1


def test_quantiles_split_epsilon_and_keep_order() -> None:
    values = np.linspace(0, 100, 2_001)
    result = em_quantiles(values, qs=[0.9, 0.1, 0.5], bounds=(0, 100), epsilon=Fraction(3))
    assert result.loss == PureDP(3)
    assert result.details["epsilon_per_quantile"] == "1"
    assert result.value.shape == (3,)
    assert result.value[1] < result.value[2] < result.value[0]
    assert "basic composition" in result.guarantee


# -- total on every input: no records, and every exact q with every n ------------------------------


def em_cell_pmf(values: np.ndarray, q: Fraction, epsilon: Fraction, resolution: int) -> np.ndarray:
    """The EM quantile's law by its definition: cell c has weight exp(-epsilon dist(q n, [#{< c}, #{<= c}]) / 2)."""
    cells = quantile_candidates.to_cells(values, 0.0, 1.0, resolution).sorted_cells
    below = np.searchsorted(cells, np.arange(resolution), side="left")  # records in cells < c
    at_most = np.searchsorted(cells, np.arange(resolution), side="right")  # records in cells <= c
    qn = q * cells.size
    gaps = [max(int(a) - qn, qn - int(b), Fraction(0)) for a, b in zip(below, at_most, strict=True)]
    weights = np.array([math.exp(-float(epsilon * g / 2)) for g in gaps])
    return weights / weights.sum()


def em_law_pvalue(values: np.ndarray, q: Fraction, epsilon: Fraction, resolution: int, draws: int) -> float:
    cells = quantile_candidates.to_cells(values, 0.0, 1.0, resolution)
    sample = rank_sampler.draw_cells(cells, q, epsilon, draws)
    pmf = em_cell_pmf(values, q, epsilon, resolution)
    return chi_square_pvalue(sample, lambda s: pmf[s], 0, resolution - 1)


def test_no_records_release_a_uniform_public_cell_at_the_same_loss() -> None:
    result = em_quantile([], q=0.5, bounds=(0, 1), epsilon=1, resolution=8)
    assert result.loss == PureDP(1) and 0 <= result.value <= 1
    assert (result.value * 8 - 0.5) == pytest.approx(round(result.value * 8 - 0.5))
    several = em_quantiles(np.array([]), qs=[0.1, 0.9], bounds=(0, 1), epsilon=2, resolution=8)
    assert several.loss == PureDP(2) and several.value.shape == (2,)


@pytest.mark.statistical
def test_no_records_law_is_uniform_over_the_cells() -> None:
    empty = np.array([])
    assert np.all(em_cell_pmf(empty, Fraction(1, 2), Fraction(1), 16) == 1 / 16)  # every utility equal
    assert em_law_pvalue(empty, Fraction(1, 2), Fraction(1), 16, 100_000) > P_THRESHOLD


def _threshold_q(n_star: int) -> Fraction:
    """q = 1 / ceil(2^62 / (n* + 1)): the old int64 guard refused exactly the n >= n*."""
    return Fraction(1, -(-(2**62) // (n_star + 1)))


@pytest.mark.parametrize(
    ("q", "sizes"),
    [(Fraction(1, 4 * 10**18), (0, 1, 7)), (_threshold_q(10), (9, 10, 11))],
)
def test_long_denominators_are_exact_for_every_n(q: Fraction, sizes: tuple[int, ...]) -> None:
    """q a long exact rational: no exception on either side of the old guard, at the same loss."""
    for n in sizes:
        values = np.linspace(0.05, 0.95, n)
        result = em_quantile(values, q=q, bounds=(0, 1), epsilon=1, resolution=64)
        assert result.loss == PureDP(1) and 0 <= result.value <= 1


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("q", "sizes"),
    [(Fraction(1, 4 * 10**18), (0, 1, 7)), (_threshold_q(10), (9, 10)), (Fraction(1, 3) + Fraction(1, 10**9), (5,))],
)
def test_long_denominators_follow_the_em_law(q: Fraction, sizes: tuple[int, ...]) -> None:
    for n in sizes:
        values = np.linspace(0.05, 0.95, n)
        assert em_law_pvalue(values, q, Fraction(2), 16, 60_000) > P_THRESHOLD


@pytest.mark.statistical
def test_grid_and_direct_exponents_give_the_same_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """q = 1/3 directly (D = den) and on a coarse grid D = 2 with the exact acceptance step: one law."""
    values = np.array([0.05, 0.3, 0.3, 0.55, 0.8])  # q n = 5/3: the fractional part weighs at epsilon = 4
    q, epsilon = Fraction(1, 3), Fraction(4)
    assert em_law_pvalue(values, q, epsilon, 16, 100_000) > P_THRESHOLD
    monkeypatch.setattr(rank_sampler, "_GRID", 2)
    cells = quantile_candidates.to_cells(values, 0.0, 1.0, 16)
    table = rank_sampler.rank_table(cells, q, epsilon)
    assert table.accept_below > 0 and table.accept_above > 0  # the acceptance step runs on this path
    assert em_law_pvalue(values, q, epsilon, 16, 100_000) > P_THRESHOLD
    # power: the grid exponents alone (no acceptance step) are a different law, and the test sees it
    used = np.flatnonzero(table.lengths > 0)  # the segment (gap or occupied cell) holding each cell
    owner = used[np.searchsorted(table.starts[used], np.arange(16), side="right") - 1]
    grid_only = np.exp(-float(table.rate) * table.exponents[owner].astype(float))
    pmf_wrong = grid_only / grid_only.sum()
    sample = rank_sampler.draw_cells(cells, q, epsilon, 100_000)
    assert chi_square_pvalue(sample, lambda s: pmf_wrong[s], 0, 15) < P_THRESHOLD


# ---------------------------------------------------------------- add/remove sensitivity, ties, integer candidates


def _public_cells(released: np.ndarray, resolution: int) -> np.ndarray:
    return np.floor(released * resolution).astype(np.int64)  # midpoint -> its cell on [0, 1]


@pytest.mark.statistical
@pytest.mark.parametrize("q", [Fraction(1, 2), Fraction(3, 10)])
def test_add_remove_runs_the_law_at_rate_epsilon_over_max_q(q: Fraction) -> None:
    """Under add/remove Δu = max(q, 1 - q): the law is the EM's at ε / Δu, and not at ε / Δu x (1 ± 0.3)."""
    values = np.array([0.05, 0.3, 0.3, 0.3, 0.55, 0.8, 0.81])  # a tie block holding q n for q = 1/2
    epsilon, resolution = Fraction(1), 16
    rate = epsilon / max(q, 1 - q)
    released = np.array(
        [
            em_quantile(
                values, q=q, bounds=(0, 1), epsilon=epsilon, resolution=resolution, adjacency=Adjacency.ADD_REMOVE
            ).value
            for _ in range(8_000)  # p < 1e-70 at ε x 0.7 and x 1.3 already
        ]
    )
    sample = _public_cells(released, resolution)
    assert_calibrated(
        lambda f: chi_square_pvalue(
            sample, lambda s: em_cell_pmf(values, q, rate * Fraction(str(f)), resolution)[s], 0, resolution - 1
        ),
        what="ε / Δu",
    )


def test_replace_and_unstated_adjacency_keep_sensitivity_one() -> None:
    for q in (Fraction(1, 2), Fraction(1, 10), Fraction(0), Fraction(1)):
        assert quantile.utility_sensitivity(q, Adjacency.REPLACE) == 1
        assert quantile.utility_sensitivity(q, None) == 1
        assert quantile.utility_sensitivity(q, Adjacency.ADD_REMOVE) == max(q, 1 - q)


def test_a_tie_holding_the_target_rank_is_a_zero_utility_cell() -> None:
    """The occupied cell of a tie block that holds q n gets exponent 0; the gaps beside it do not."""
    cells = quantile_candidates.to_cells(np.array([0.1, 0.5, 0.5, 0.5, 0.9]), 0.0, 1.0, 10)
    table = rank_sampler.rank_table(cells, Fraction(1, 2), Fraction(1))
    tie = int(np.flatnonzero((table.starts == 5) & (table.lengths == 1))[0])
    assert table.exponents[tie] == 0 and table.sides[tie] == rank_sampler.EXACT
    beside = [j for j in range(table.lengths.size) if table.lengths[j] > 0 and j != tie]
    assert all(table.exponents[j] > 0 for j in beside)


def test_integer_candidates_answer_a_tied_median_exactly() -> None:
    """An integer column's tied median at ε = 1: every release is the integer itself, never a point beside it."""
    ages = np.array([30] * 40 + [31, 45, 60, 2, 90] * 2, dtype=np.float64)
    with deterministic_entropy(7):
        out = {
            em_quantile(ages, q=0.5, bounds=(0, 120), epsilon=1, adjacency=Adjacency.ADD_REMOVE, integers=True).value
            for _ in range(50)
        }
    assert out == {30.0}


@pytest.mark.statistical
def test_integer_candidates_follow_the_em_law_over_the_integers() -> None:
    values = np.array([1.0, 2.0, 2.0, 2.0, 4.0, 6.0, 7.0])
    q, epsilon, first, last = Fraction(1, 2), Fraction(1, 2), 0, 9
    released = np.array(
        [em_quantile(values, q=q, bounds=(first, last), epsilon=epsilon, integers=True).value for _ in range(20_000)]
    )
    assert set(np.unique(released)) <= {float(v) for v in range(first, last + 1)}
    ints = sorted(int(v) for v in values)

    def pmf(f: float) -> np.ndarray:
        qn = q * len(ints)
        dist = [
            max(sum(x < c for x in ints) - qn, qn - sum(x <= c for x in ints), Fraction(0))
            for c in range(first, last + 1)
        ]
        w = np.array([math.exp(-float(epsilon * Fraction(str(f)) * d / 2)) for d in dist])
        return w / w.sum()

    sample = released.astype(np.int64) - first
    assert_calibrated(lambda f: chi_square_pvalue(sample, lambda s: pmf(f)[s], 0, last - first), what="ε")


def test_integer_candidates_refuse_bounds_without_an_integer_and_a_resolution() -> None:
    with pytest.raises(UsageError, match="integer candidates need"):
        em_quantile([0.2], q=0.5, bounds=(0.1, 0.9), epsilon=1, integers=True)
    with pytest.raises(UsageError, match="fix the resolution"):
        em_quantile([1.0], q=0.5, bounds=(0, 9), epsilon=1, integers=True, resolution=10)


@pytest.mark.statistical
def test_cells_and_decimal_points_follow_the_mixed_em_law() -> None:
    """K cells (2^20 each) and the points of each decimal grid (2^20 K / J per grid), ranks from the definition.

    A point of G_e also pays FIT_WEIGHT for each record off G_e (§8.6), and each set runs at its own Δu
    (§8.7): the points at ε / (2 Δ) with Δ = 1 + FIT_WEIGHT (no adjacency stated), the cells at ε / 2 (the rank
    term's Δu = 1). The cells' rate per rank ε / 2 = 1/2 gives the grids half the cells' measure together
    (§8.8). Hundredths around a tie at 2: the tenths' and whole numbers' points pay for 20 and 22 records
    off them, so a law without the fit, or with twice it, is rejected; so is one whose cells run 30 % slower
    or faster than their own Δu gives, and one whose points weigh as much as the cells (@7) or a quarter.
    """
    values = np.array(
        [2.0] * 4
        + [0.37, 0.81, 1.13, 1.29, 1.42, 1.66, 1.78, 1.97, 2.14, 2.36, 2.51]
        + [2.73, 3.08, 3.45, 3.5, 3.92, 4.2, 4.61, 5.04, 5.55, 6.12, 6.87]
    )
    q, epsilon, resolution, low, high = Fraction(1, 2), Fraction(1), 8, 0.0, 7.0
    grids = quantile.point_grids((low, high), resolution)
    assert [g.exponent for g in grids] == [-3, -2, -1, 0]  # 7001, 701, 71 and 8 points; 10^1 holds one
    misfits = [
        sum(1 for v in values if float(round(Fraction(v) / 10**g.exponent) * Fraction(10) ** g.exponent) != v)
        for g in grids
    ]
    assert misfits == [0, 0, 20, 22]
    sens = 1 + quantile.FIT_WEIGHT
    # the cell midpoints (i + 1/2) 7/8 have four decimals: no grid holds them, so every output names its candidate
    points = [
        (j, float(k * Fraction(10) ** g.exponent)) for j, g in enumerate(grids) for k in range(g.first, g.last + 1)
    ]
    released = np.array(
        [
            em_quantile(values, q=q, bounds=(low, high), epsilon=epsilon, resolution=resolution, decimal_points=True)
            for _ in range(20_000)
        ],
        dtype=object,
    )
    assert released[0].details["utility_sensitivity"] == str(sens)
    assert released[0].details["cells_utility_sensitivity"] == "1"
    assert released[0].details["points_measure"] == "2^-1 of the cells'"
    outputs = np.array([r.value for r in released])
    # outcome index: a cell midpoint (x.5 on this grid) -> its cell; a decimal point -> the first grid holding it
    # (points of several grids with one value are merged into one outcome)
    values_of = {}
    for _, p in points:
        values_of.setdefault(p, len(values_of))
    index = np.array([resolution + values_of[o] if o in values_of else int(o * resolution / high) for o in outputs])

    def pmf(f: float, fit: float = 1.0, cells_f: float = 1.0, share: float = 1.0) -> np.ndarray:
        rate = epsilon * Fraction(str(f)) / sens
        cells_rate = epsilon * Fraction(str(f)) * Fraction(str(cells_f))  # the cells' Δu: 1
        cells = np.minimum(np.floor(values * resolution / high), resolution - 1)
        qn = q * len(values)

        def weight(a: int, b: int, measure: int, off: int, at: Fraction = rate) -> float:
            price = Fraction(str(fit)) * quantile.FIT_WEIGHT * off
            return measure * math.exp(-float(at * (max(a - qn, qn - b, Fraction(0)) + price) / 2))

        w = [weight(int(np.sum(cells < c)), int(np.sum(cells <= c)), 2**20, 0, cells_rate) for c in range(resolution)]
        merged = np.zeros(len(values_of))
        for j, p in points:
            measure = int(2**20 * resolution * share) // (len(grids) * grids[j].size * 2)  # the grids: half the cells'
            merged[values_of[p]] += weight(int(np.sum(values < p)), int(np.sum(values <= p)), measure, misfits[j])
        arr = np.concatenate([np.array(w), merged])
        return arr / arr.sum()

    last = resolution + len(values_of) - 1
    assert_calibrated(lambda f: chi_square_pvalue(index, lambda s: pmf(f)[s], 0, last), what="ε")
    assert_calibrated(
        lambda f: chi_square_pvalue(index, lambda s: pmf(1.0, f)[s], 0, last), wrong=(0.0, 2.0), what="fit weight"
    )
    assert_calibrated(lambda f: chi_square_pvalue(index, lambda s: pmf(1.0, 1.0, f)[s], 0, last), what="cells' rate")
    assert_calibrated(
        lambda f: chi_square_pvalue(index, lambda s: pmf(1.0, 1.0, 1.0, f)[s], 0, last),
        wrong=(0.5, 2.0),
        what="points' share",
    )


def test_the_records_are_clipped_and_sorted_on_a_copy_and_never_copied_when_already_so() -> None:
    inside = np.array([1.0, 2.0, 2.0, 7.5])
    assert quantile_candidates._sorted_clipped(inside, 0.0, 10.0) is inside  # sorted, inside the bounds: as given
    for given in (np.array([3.0, 1.0, 2.0]), np.array([-1.0, 2.0, 30.0])):
        kept = given.copy()
        out = quantile_candidates._sorted_clipped(given, 0.0, 10.0)
        np.testing.assert_array_equal(given, kept)  # the caller's array is unchanged
        np.testing.assert_array_equal(out, np.sort(np.clip(kept, 0.0, 10.0)))


def test_the_fit_counts_records_off_each_grid_after_clipping(monkeypatch: pytest.MonkeyPatch) -> None:
    """d_e = records that are no point of G_e (§8.6): whole numbers are on every grid, hundredths on G_-2 only."""
    grids = quantile.point_grids((0.0, 120.0))
    assert [g.exponent for g in grids] == [-2, -1, 0, 1, 2]
    data = np.sort(np.array([42.0, 42.0, 3.5, 0.07, 130.0, -5.0, 1e-9, 57.13, 100.0]))
    clipped = np.clip(data, 0.0, 120.0)  # 130 -> 120 and -5 -> 0: points of G_0 and G_1 (0 of G_2 too)
    # off G_-2: 1e-9; off G_-1: and 0.07, 57.13; off G_0: and 3.5; off G_1: and 42 x 2; off G_2: and 120
    assert quantile_candidates.misfits(clipped, grids) == (1, 3, 4, 6, 7)
    assert quantile_candidates.misfits(np.zeros(0), grids) == (0, 0, 0, 0, 0)
    # counted for many groups in one pass: each group's own counts, an empty group included
    groups = [clipped, np.zeros(0), clipped[::-1].copy(), clipped[:3]]
    expected = [(1, 3, 4, 6, 7), (0, 0, 0, 0, 0), (1, 3, 4, 6, 7), (1, 2, 2, 2, 2)]  # the last: 0, 1e-9, 0.07
    assert quantile_candidates.misfits_of_groups(groups, grids) == expected
    monkeypatch.setattr(quantile_candidates, "_MISFIT_CHUNK", 4)  # a chunk per group or two: the same counts
    assert quantile_candidates.misfits_of_groups(groups, grids) == expected
    assert quantile_candidates.misfits_of_groups([], grids) == []
    candidates, _ = quantile_candidates.prepared(data, (0.0, 120.0), None, False, True)
    assert candidates.misfits == (0, 1, 3, 4, 6, 7)  # the cells hold every record: no fit to pay
    assert quantile_candidates.prepared(data, (0.0, 120.0), None, False, False)[0].misfits is None


def test_the_fit_widens_the_sensitivity_by_its_own_range() -> None:
    half, q = Fraction(1, 2), Fraction(9, 10)
    assert Fraction(1, 16) == quantile.FIT_WEIGHT
    assert quantile.utility_sensitivity(half, Adjacency.ADD_REMOVE, fitted=True) == half + Fraction(1, 16)
    assert quantile.utility_sensitivity(q, Adjacency.ADD_REMOVE, fitted=True) == q + Fraction(1, 16)
    assert quantile.utility_sensitivity(half, Adjacency.REPLACE, fitted=True) == 1 + Fraction(1, 16)
    assert quantile.utility_sensitivity(half, None, fitted=True) == 1 + Fraction(1, 16)
    result = em_quantile([1.0], q=0.5, bounds=(0, 8), epsilon=1, adjacency=Adjacency.ADD_REMOVE, decimal_points=True)
    assert result.details["utility_sensitivity"] == "9/16"
    assert em_quantile([1.0], q=0.5, bounds=(0, 8), epsilon=1).details["utility_sensitivity"] == "1"


def test_the_fit_adds_its_price_to_every_segment_of_a_grid() -> None:
    """Exponent of a point of G_e = the rank exponent + floor(D / 16) d_e; the cells pay nothing."""
    data = np.array([0.37, 1.5, 2.0, 2.0, 6.25])
    fitted, _ = quantile_candidates.prepared(data, (0.0, 8.0), 8, False, True)
    plain = quantile_candidates.Candidates(fitted.records, fitted.lattices, fitted.weights)
    q, rate = Fraction(1, 2), Fraction(1)
    with_fit, without = rank_sampler.rank_table(fitted, q, rate), rank_sampler.rank_table(plain, q, rate)
    target = rank_sampler.Target.of(data.size, q, rate, fitted=True)
    assert target.grid == 32 and target.misfit == 2  # 16 den: FIT_WEIGHT D = 2 exponent units per record
    assert rank_sampler.Target.of(data.size, q, rate).grid == 2
    # the plain table runs on D = 2: its exponents scale by 16 to D = 32
    price = np.asarray(fitted.misfits)[with_fit.parts] * target.misfit
    np.testing.assert_array_equal(with_fit.exponents, without.exponents * 16 + price)
    assert fitted.misfits == (0, 0, 0, 2, 3)  # G_-3, G_-2 hold all; G_-1 misses 0.37 and 6.25, G_0 also 1.5
    assert float(with_fit.rate) == float(rate) / 64


def test_the_decimal_points_share_halves_with_each_halving_of_the_cells_rate_per_rank() -> None:
    """§8.8: the grids weigh 2^-k of the cells, k the least with 2^-k <= ε / (2 Δu); the measure follows.

    At the boundaries of each power of two, under each adjacency (Δu = 1/2 for the median under
    add/remove, 1 otherwise, 9/10 for q = 1/10); per point the measure is 2^-k of @7's, rounded down; a
    rate so small that a grid's points round to nothing leaves that grid out, and then the cells alone.
    """
    half = Fraction(1, 2)
    add_remove = Adjacency.ADD_REMOVE
    cases = [
        (Fraction(1), add_remove, 0),
        (Fraction(99, 100), add_remove, 1),
        (Fraction(1, 2), add_remove, 1),
        (Fraction(49, 100), add_remove, 2),
        (Fraction(1, 10), add_remove, 4),
        (Fraction(1, 16), add_remove, 4),
        (Fraction(1, 100), add_remove, 7),
        (Fraction(10), add_remove, 0),
        (Fraction(2), None, 0),
        (Fraction(1), None, 1),
        (Fraction(1), Adjacency.REPLACE, 1),
        (Fraction(1, 10), Adjacency.REPLACE, 5),
    ]
    for epsilon, adjacency, k in cases:
        assert quantile.points_shift(epsilon, half, adjacency) == k, (epsilon, adjacency)
    assert quantile.points_shift(Fraction(9, 5), Fraction(1, 10), add_remove) == 0  # r = (9/5) / (9/5) = 1
    assert quantile.points_shift(Fraction(17, 10), Fraction(1, 10), add_remove) == 1
    assert quantile.points_shift(Fraction(1, 10**300), half, add_remove) == 997  # 2^-997 <= 10^-300 < 2^-996
    bounds = (0.0, 120.0)
    whole = quantile_candidates.candidate_sets(bounds, None, False, True)
    for k in (1, 4, 7):
        shifted = quantile_candidates.candidate_sets(bounds, None, False, True, None, k)
        assert shifted.weights[0] == whole.weights[0]  # the cells keep theirs
        assert shifted.weights[1:] == tuple(w >> k for w in whole.weights[1:])  # floor(floor(a / b) / 2^k)
    tiny = quantile_candidates.candidate_sets(bounds, None, False, True, None, 60)
    assert len(tiny.lattices) == 1  # every grid's points round to nothing: the cells alone
    released = em_quantile([1.0, 1.0], q=0.5, bounds=bounds, epsilon=1e-30, adjacency=add_remove, decimal_points=True)
    assert "points_measure" not in released.details and 0.0 <= released.value <= 120.0
    # so small a rate that the window's reach passed int64 raised after the data were read (the reach is now
    # capped at the table's exponent limit: the whole table)
    for points in (False, True):
        grouped = quantile.em_quantile_groups(
            [[1.0] * 5, [2.0], []], q=0.3, bounds=bounds, epsilon=1e-300, decimal_points=points
        )
        assert all(0.0 <= r.value <= 120.0 for r in grouped)


def test_several_quantiles_each_take_the_points_share_of_their_own_rate() -> None:
    """em_quantiles: each quantile draws as em_quantile at ε / m, so each has its own shift (§8.8).

    At ε = 1.2 for two quantiles each runs at 0.6: the median's rate per rank 0.6 (grids at 1/2 of the
    cells), the 0.9-quantile's 0.6 / 1.8 (1/4). Under one test source the joint release equals the two
    single ones drawn in turn, seed by seed; with one shift for both it would not.
    """
    add_remove = Adjacency.ADD_REMOVE
    assert quantile.points_shift(Fraction(3, 5), Fraction(1, 2), add_remove) == 1
    assert quantile.points_shift(Fraction(3, 5), Fraction(9, 10), add_remove) == 2
    x = np.array([3.0] * 6 + [4.0] * 5 + [5.5, 6.0, 6.0, 7.0, 7.0, 7.0, 8.25, 9.0])
    options = {"bounds": (0, 10), "adjacency": add_remove, "decimal_points": True}
    for seed in range(20):
        with deterministic_entropy(seed):
            joint = em_quantiles(x, qs=[0.5, 0.9], epsilon=1.2, **options).value  # type: ignore[arg-type]
        with deterministic_entropy(seed):
            each = [em_quantile(x, q=q, epsilon=0.6, **options).value for q in (0.5, 0.9)]  # type: ignore[arg-type]
        assert list(joint) == each, seed


def test_each_candidate_set_runs_at_its_own_utility_sensitivity() -> None:
    """§8.7: the cells at the rank term's Δu, the points at it plus the fit's 1/16, under each adjacency.

    Under replace (and with no adjacency stated) 1 and 17/16, for every q; under add/remove max(q, 1 - q)
    and that plus 1/16 (9/8 faster cells for the median). The sampler's table multiplies the cells'
    exponents by the ratio's numerator and the points' by its denominator, at the rate divided by the
    latter; the table without the gains is @6's one rate.
    """
    half = Fraction(1, 2)
    for q in (half, Fraction(9, 10), Fraction(1, 3)):
        for adjacency in (None, Adjacency.REPLACE):
            assert quantile.utility_sensitivity(q, adjacency) == 1
            assert quantile.utility_sensitivity(q, adjacency, fitted=True) == Fraction(17, 16)
            assert quantile.cells_sharper(q, adjacency) == Fraction(17, 16)
        du = max(q, 1 - q)
        exact = (du + Fraction(1, 16)) / du
        sharper = quantile.cells_sharper(q, Adjacency.ADD_REMOVE)
        assert exact - Fraction(1, 64) < sharper <= exact and (sharper * 64).denominator == 1
    assert quantile.cells_sharper(half, Adjacency.ADD_REMOVE) == Fraction(9, 8)
    # a q with a long denominator: Δu_c = 1 - q has one too, and the gains stay small (a release must not fail)
    tiny = Fraction(1, 4 * 10**18)
    assert quantile.cells_sharper(tiny, Adjacency.ADD_REMOVE) == Fraction(17, 16)
    table = rank_sampler.rank_table(
        quantile_candidates.prepared(np.array([0.5, 1.5]), (0.0, 8.0), 8, False, True)[0],
        tiny,
        1 / quantile.utility_sensitivity(tiny, Adjacency.ADD_REMOVE, fitted=True),
        quantile.cells_sharper(tiny, Adjacency.ADD_REMOVE),
    )
    assert table.gains == (17, 16)
    released = em_quantile([1.0], q=0.5, bounds=(0, 8), epsilon=1, adjacency=Adjacency.REPLACE, decimal_points=True)
    assert released.details["utility_sensitivity"] == "17/16"
    assert released.details["cells_utility_sensitivity"] == "1"
    released = em_quantile([1.0], q=0.5, bounds=(0, 8), epsilon=1, adjacency=Adjacency.ADD_REMOVE, decimal_points=True)
    assert released.details["utility_sensitivity"] == "9/16"
    assert released.details["cells_utility_sensitivity"] == "1/2"
    data = np.array([0.37, 1.5, 2.0, 2.0, 6.25])
    fitted, _ = quantile_candidates.prepared(data, (0.0, 8.0), 8, False, True)
    rate = Fraction(1)
    one_rate = rank_sampler.rank_table(fitted, half, rate)
    own = rank_sampler.rank_table(fitted, half, rate, Fraction(17, 16))
    gains = np.where(own.parts == 0, 17, 16)
    np.testing.assert_array_equal(own.exponents, one_rate.exponents * gains)
    assert own.rate == one_rate.rate / 16 and own.gains == (17, 16) and one_rate.gains == (1, 1)
    weights = own.exponents * float(own.rate)
    cells = own.parts == 0
    np.testing.assert_allclose(weights[cells], one_rate.exponents[cells] * float(one_rate.rate) * 17 / 16)
    np.testing.assert_allclose(weights[~cells], one_rate.exponents[~cells] * float(one_rate.rate))
    # integer candidates have no points: no gains, whatever is asked
    integers, _ = quantile_candidates.prepared(data, (0.0, 8.0), None, True, False)
    assert rank_sampler.rank_table(integers, half, rate, Fraction(17, 16)).gains == (1, 1)
    # the window's table is the whole table's rows near q n, the same exponents and gains
    many = np.round(np.linspace(0.0, 8.0, 4001), 2)  # hundredths: the points of G_-2 and G_-3 pay no fit
    wide, _ = quantile_candidates.prepared(many, (0.0, 8.0), None, False, True)
    assert wide.misfits is not None and 0 in wide.misfits[1:]
    window = rank_sampler.rank_window(wide, half, Fraction(2), Fraction(17, 16))
    assert window is not None and window.outside.measure > 0
    whole = rank_sampler.rank_table(wide, half, Fraction(2), Fraction(17, 16))
    rows = window.rows_in_whole(wide)
    np.testing.assert_array_equal(window.table.exponents, whole.exponents[rows])
    # every row left out reaches the window's bound R in exponent units, whatever its set's gain
    left_out = np.setdiff1d(np.arange(whole.exponents.size), rows)
    assert left_out.size and int(whole.exponents[left_out].min()) >= window.outside.exponent


@functools.cache
def _value_law(records: tuple[float, ...], rate: Fraction, sharper: Fraction, shift: int) -> dict[float, float]:
    """The exact output law of the EM median with decimal points on [0, 8] (8 cells), by value.

    ``rate``: the points' (ε over their Δu); ``sharper``: the cells' over it; ``shift``: the grids' share 2^-shift.
    """
    sorted_records = np.sort(np.asarray(records))
    candidates, release = quantile_candidates.prepared(sorted_records, (0.0, 8.0), 8, False, True, None, shift)
    table = rank_sampler.rank_table(candidates, Fraction(1, 2), rate, sharper)
    assert not table.accept_below and not table.accept_above
    log_w = np.full(table.lengths.size, -np.inf)
    held = table.lengths > 0
    log_w[held] = np.log(table.lengths[held]) - float(table.rate) * table.exponents[held].astype(float)
    weights = np.exp(log_w - log_w.max())
    weights /= weights.sum()
    segments = np.repeat(np.arange(table.parts.size), table.counts)  # one row per candidate position
    offsets = np.arange(segments.size) - np.repeat(np.cumsum(table.counts) - table.counts, table.counts)
    strides = np.array([lattice.stride for lattice in candidates.lattices])[table.parts[segments]]
    outputs = np.asarray(release(table.parts[segments], table.starts[segments] + strides * offsets), dtype=float)
    mass = weights[segments] / table.counts[segments]
    found, where = np.unique(outputs, return_inverse=True)
    law = np.zeros(found.size)
    np.add.at(law, where, mass)
    return dict(zip(found.tolist(), law.tolist(), strict=True))


def _worst_loss(
    pairs: list[tuple[tuple[float, ...], tuple[float, ...]]], rate: Fraction, sharper: Fraction, shift: int
) -> float:
    worst = 0.0
    for x, y in pairs:
        lx, ly = (_value_law(tuple(sorted(v)), rate, sharper, shift) for v in (x, y))
        worst = max(worst, max(abs(math.log(lx[o] / ly[o])) for o in lx.keys() & ly.keys()))
    return worst


@pytest.mark.parametrize("epsilon", [Fraction(1), Fraction(1, 10)], ids=["eps1", "eps0.1"])
@pytest.mark.parametrize("adjacency", [Adjacency.REPLACE, Adjacency.ADD_REMOVE], ids=["replace", "add-remove"])
def test_the_cells_own_rate_keeps_the_loss_under_epsilon_on_every_small_pair(
    adjacency: Adjacency, epsilon: Fraction
) -> None:
    """Exact laws of every pair of <= 3 records on 7 values (on and off the grids): loss <= ε at §8.7's rates.

    Replace: one record changed; add/remove: one added. The grids at the released share (§8.8: 2^-1 or 2^0 of
    the cells at ε = 1, 2^-5 or 2^-4 at ε = 1/10). With the cells at twice their rate the loss passes ε (the
    audit's control): the check can fail.
    """
    values = [0.5, 1.0, 2.0, 3.45, 6.5, 7.0, 7.5]
    pairs = []
    for n in range(1, 4):
        for x in itertools.combinations_with_replacement(values, n):
            if adjacency is Adjacency.REPLACE:
                pairs += [(x, (*x[:i], v, *x[i + 1 :])) for i, v in itertools.product(range(n), values)]
            else:
                pairs += [(x, (*x, v)) for v in values]
    half = Fraction(1, 2)
    rate = epsilon / quantile.utility_sensitivity(half, adjacency, fitted=True)
    sharper = quantile.cells_sharper(half, adjacency)
    shift = quantile.points_shift(epsilon, half, adjacency)
    worst, control = (_worst_loss(pairs, rate, gain, shift) for gain in (sharper, 2 * sharper))
    assert worst <= epsilon < control


def test_the_cells_acceptance_step_scales_with_their_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    """A q whose q n D is not whole: a cell off q n is accepted with exp(-g_c a), a point with exp(-g_p a)."""
    q = Fraction(1, 3) + Fraction(1, 2**40)  # a denominator above 2^16: D stops at 2^20, q n D is not whole
    data = np.array([0.37, 1.5, 2.0, 2.0, 6.25])
    fitted, _ = quantile_candidates.prepared(data, (0.0, 8.0), 8, False, True)
    sharper = quantile.cells_sharper(q, Adjacency.REPLACE)
    table = rank_sampler.rank_table(fitted, q, Fraction(1), sharper)
    assert table.accept_below > 0 and table.accept_above > 0
    assert table.gains == (sharper.numerator, sharper.denominator) and table.gains[0] > table.gains[1]
    asked: list[Fraction] = []

    def bernoulli(num: int, den: int) -> bool:
        asked.append(Fraction(num, den))
        return True

    monkeypatch.setattr(exact, "python_bernoulli_exp", bernoulli)
    seen = set()
    for run in range(table.exponents.size):
        side = int(table.sides[run])
        if side == rank_sampler.EXACT:
            continue
        asked.clear()
        assert rank_sampler._accepted(table, np.array([run]))[0]
        base = table.accept_below if side == rank_sampler.BELOW else table.accept_above
        cell = int(table.parts[run]) == 0
        assert asked == [base * table.gains[0 if cell else 1]]
        seen.add(cell)
    assert seen == {True, False}


def test_decimal_points_release_ties_at_their_recorded_value() -> None:
    ages = np.array([42.0] * 30 + list(np.arange(18.0, 90.0)))  # whole numbers stored as floats
    carats = np.array([0.7] * 40 + [round(0.3 + 0.01 * i, 2) for i in range(80)])  # hundredths
    with deterministic_entropy(3):
        for data, bounds, tie in ((ages, (0, 120), 42.0), (carats, (0, 6), 0.7)):
            points = [
                em_quantile(data, q=0.5, bounds=bounds, epsilon=1, adjacency=Adjacency.ADD_REMOVE, decimal_points=True)
                for _ in range(100)
            ]
            cells = [
                em_quantile(data, q=0.5, bounds=bounds, epsilon=1, adjacency=Adjacency.ADD_REMOVE) for _ in range(100)
            ]
            assert sum(r.value == tie for r in points) >= 70  # the recorded value holds the median's ranks (about 82 %)
            assert sum(r.value == tie for r in cells) == 0  # cells only: a midpoint, never the value itself
            assert points[0].details["candidates"] == "cells and decimal points"


def test_decimal_grids_hold_two_to_two_to_the_sixteen_points() -> None:
    assert [(g.exponent, g.first, g.last) for g in quantile.decimal_grids((0, 120))] == [
        (-2, 0, 12000),
        (-1, 0, 1200),
        (0, 0, 120),
        (1, 0, 12),
        (2, 0, 1),
    ]
    assert [g.exponent for g in quantile.decimal_grids((2000, 7000))] == [-1, 0, 1, 2, 3]
    narrow = quantile.decimal_grids((0.21, 0.22))
    assert [(g.exponent, g.size) for g in narrow] == [(-6, 10001), (-5, 1001), (-4, 101), (-3, 11), (-2, 2)]
    assert quantile.decimal_grids((1e300, 1e300)) == ()  # one value: no grid holds two points
    assert quantile.point_grids((0, 120), resolution=2**33) == ()  # past 2^32 cells: cells alone
    result = em_quantile([1.0, 2.0], q=0.5, bounds=(0.5, 0.5), epsilon=1, decimal_points=True)
    assert result.details["candidates"] == "cells"
    grid = quantile.DecimalGrid(-2, 0, 600)
    assert grid.values(np.array([70.0, 3.0])).tolist() == [0.7, 0.03]  # the doubles the decimals parse to


@pytest.mark.parametrize(
    ("bounds", "values", "exponents"),
    [
        ((-1e-300, 1e-300), [0.0], []),  # no decimal grid of 2 to 2^16 points within |e| <= 22
        ((0, 1e300), [1.0, 2.0], []),
        ((3.7, 3.7), [3.7], []),
        ((-5, 5), [-1.5, -1.5, 0.3], [-3, -2, -1, 0]),
        ((1e15, 1e15 + 1000), [1e15 + 5, 1e15 + 5, 1e15 + 7], [0, 1, 2, 3]),
        ((0, 2.0**54), [5.0], [12, 13, 14, 15, 16]),
        ((-(2.0**60), -(2.0**59)), [-(2.0**59) - 1024], [13, 14, 15, 16, 17]),
    ],
)
def test_decimal_points_on_extreme_bounds_release_inside_them(
    bounds: tuple[float, float], values: list[float], exponents: list[int]
) -> None:
    """Tiny, huge, degenerate, negative and far-from-zero domains: the grids are the rule's, the output inside."""
    assert [g.exponent for g in quantile.decimal_grids(bounds)] == exponents
    for _ in range(20):
        out = em_quantile(values, q=0.5, bounds=bounds, epsilon=1, adjacency=Adjacency.ADD_REMOVE, decimal_points=True)
        assert bounds[0] <= out.value <= bounds[1]
        assert out.details["candidates"] == ("cells and decimal points" if exponents else "cells")


def test_integer_span_is_the_one_rule_for_candidates_and_points() -> None:
    assert quantile.integer_span(Fraction(1, 3), Fraction(7, 2)) == (1, 3)
    assert quantile.integer_span(0.2, 0.8) is None
    assert quantile.integer_span(-(2**53), 2**53 - 1, limit=2**60) == (-(2**53), 2**53 - 1)
    assert quantile.integer_span(0, 2**53 + 2, limit=2**60) is None  # past the exact doubles
    assert quantile.integer_span(0, 2**20, limit=2**20) is None  # 2^20 + 1 integers
    with pytest.raises(UsageError, match="inside ±2\\^53"):
        quantile.integer_candidates((0.0, 2.0**60))


def _large_inputs() -> list[tuple[np.ndarray, dict[str, object]]]:
    rng = np.random.default_rng(17)
    continuous = np.floor(rng.uniform(0, 100, 6_000) * 1e4) / 1e4
    tied = np.round(rng.normal(40, 2, 8_000), 1)
    whole_years = np.round(rng.normal(40, 1, 8_000))  # runs of hundreds of tied records around the median
    return [
        (continuous, {"q": Fraction(1, 2), "decimal_points": True, "adjacency": Adjacency.ADD_REMOVE}),
        (continuous, {"q": Fraction(37, 100), "decimal_points": False}),
        (tied, {"q": Fraction(1, 3), "decimal_points": True, "adjacency": Adjacency.ADD_REMOVE}),
        (tied, {"q": Fraction(123456789, 1000000007), "integers": True}),  # long denominator: acceptance step
        (whole_years, {"q": Fraction(1, 2), "decimal_points": True}),
        # the fit with a long denominator: D = 2^20 (a multiple of 16), the acceptance step and the fit together
        (tied, {"q": Fraction(123456789, 1000000007), "decimal_points": True, "adjacency": Adjacency.ADD_REMOVE}),
    ]


@pytest.mark.parametrize("case", range(6))
def test_the_window_holds_the_whole_tables_rows_and_leaves_out_only_light_ones(case: int) -> None:
    values, options = _large_inputs()[case]
    q = Fraction(str(options["q"]))
    candidates, _ = quantile_candidates.prepared(
        values, (0.0, 100.0), None, bool(options.get("integers")), bool(options.get("decimal_points"))
    )
    window = rank_sampler.rank_window(candidates, q, Fraction(1))
    whole = rank_sampler.rank_table(candidates, q, Fraction(1))
    assert window is not None
    assert window.table.lengths.size < whole.lengths.size // 2
    index = window.rows_in_whole(candidates)
    for name in ("lengths", "starts", "counts", "parts", "exponents", "sides"):
        np.testing.assert_array_equal(getattr(window.table, name), getattr(whole, name)[index])
    left_out = np.setdiff1d(np.arange(whole.lengths.size), index)
    assert int(whole.exponents[left_out].min()) >= window.outside.exponent
    assert float(whole.lengths[left_out].sum()) <= window.outside.measure
    # the bound is the sets' total measure: every candidate's, which the whole table's segments sum to exactly
    assert int(whole.lengths.sum()) == rank_sampler.total_measure(candidates)
    assert window.outside.measure <= 2 * rank_sampler.total_measure(candidates)


@pytest.mark.parametrize("case", range(6))
def test_a_windowed_release_equals_the_whole_tables_draw_for_draw(monkeypatch: pytest.MonkeyPatch, case: int) -> None:
    values, options = _large_inputs()[case]
    released = []
    for windowed in (True, False):
        if not windowed:  # every group by ``draw``, and ``draw`` on the whole table
            monkeypatch.setattr(rank_sampler, "_group_windows", lambda groups, *_: [None] * len(groups))
            monkeypatch.setattr(rank_sampler, "rank_window", lambda *_: None)
        with deterministic_entropy(23):
            results = [em_quantile(values, bounds=(0.0, 100.0), epsilon=1, **options).value for _ in range(40)]  # type: ignore[arg-type]
            released.append((results, int(entropy.words(1)[0])))
    assert released[0] == released[1]


def _group_inputs(kind: str, sizes: list[int], rng: np.random.Generator) -> list[np.ndarray]:
    """Groups of records of one kind: continuous, ties at tenths, whole years, one value, the bounds."""
    out = []
    for n in sizes:
        if kind == "continuous":
            out.append(np.floor(rng.uniform(0, 100, n) * 1e4) / 1e4)
        elif kind == "tenths":
            out.append(np.round(rng.normal(40, 2, n), 1))
        elif kind == "years":
            out.append(np.round(rng.normal(40, 1, n)))
        elif kind == "one value":
            out.append(np.full(n, 37.0))
        else:
            out.append(rng.choice([0.0, 50.0, 100.0, 250.0, -3.0], n))  # at and past the bounds
    return out


#: Empty and single-record groups, groups the window holds whole, and groups it cuts (at ε = 1/10 it holds ~1 300
#: ranks), in an order that puts several in one batch and the large ones in batches of their own.
_GROUP_SIZES = [0, 1, 2, 3, 17, 500, 4_600, 9_000, 20_000, 1, 0, 300, 2_000, 2_000, 2_000, 2_000, 2_000, 2_000]


@pytest.mark.parametrize("kind", ["continuous", "tenths", "years", "one value", "bounds"])
@pytest.mark.parametrize(
    "options",
    [
        {"decimal_points": True, "adjacency": Adjacency.ADD_REMOVE},
        {"decimal_points": True, "adjacency": Adjacency.REPLACE},  # the cells at their own rate (§8.7)
        {"decimal_points": False},
        {"integers": True},
        {"step": "0.5", "adjacency": Adjacency.ADD_REMOVE},
    ],
    ids=["points", "points-replace", "cells", "integers", "step"],
)
@pytest.mark.parametrize(
    ("q", "epsilon"),
    [
        (Fraction(1, 2), Fraction(1, 10)),
        (Fraction(37, 100), Fraction(1)),
        (Fraction(123456789, 1000000007), Fraction(5)),
    ],
    ids=["median", "q=0.37", "long-q"],
)
def test_groups_drawn_together_equal_em_quantile_group_by_group(
    monkeypatch: pytest.MonkeyPatch, kind: str, options: dict[str, object], q: Fraction, epsilon: Fraction
) -> None:
    """The batched windows and float tables give every group the draw ``em_quantile`` gives it, from the same words."""
    monkeypatch.setattr(rank_sampler, "BATCH_RECORDS", 4_096)  # several batches, some of one group
    groups = _group_inputs(kind, _GROUP_SIZES, np.random.default_rng(len(kind)))
    with deterministic_entropy(11):
        together = quantile.em_quantile_groups(groups, q=q, bounds=(0.0, 100.0), epsilon=epsilon, **options)  # type: ignore[arg-type]
        after_together = int(entropy.words(1)[0])
    with monkeypatch.context() as patched, deterministic_entropy(11):  # each group by ``draw`` (``rank_window``)
        patched.setattr(rank_sampler, "_group_windows", lambda groups, *_: [None] * len(groups))
        one_by_one = [
            em_quantile(x, q=q, bounds=(0.0, 100.0), epsilon=epsilon, **options).value  # type: ignore[arg-type]
            for x in groups
        ]
        after_one = int(entropy.words(1)[0])
    assert [r.value for r in together] == one_by_one
    assert after_together == after_one


def test_groups_drawn_together_take_windows_and_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched path is the one taken: cut windows, whole ones, and several batches (not ``draw`` per group)."""
    monkeypatch.setattr(rank_sampler, "BATCH_RECORDS", 4_096)
    groups = _group_inputs("continuous", _GROUP_SIZES, np.random.default_rng(3))
    candidates = [quantile_candidates.prepared(x, (0.0, 100.0), None, False, True)[0] for x in groups]
    rate = Fraction(1, 10) / quantile.utility_sensitivity(Fraction(1, 2), Adjacency.ADD_REMOVE, fitted=True)
    batches = rank_sampler._batches(candidates, Fraction(1, 2), rate)
    assert len(batches) > 2 and sum(len(b) for b in batches) == len(candidates)
    built = [w for batch in batches for w in rank_sampler._group_samplers(batch, Fraction(1, 2), rate)]
    assert [w is None for w in built] == [x.size == 0 for x in groups]  # empty groups take ``draw``
    cut = [w[0].outside.measure > 0 for w in built if w is not None]
    assert any(cut) and not all(cut)


def test_the_cached_candidate_sets_keep_equal_values_of_other_types_apart() -> None:
    """A resolution of True is refused even after resolution=1 was made (True == 1 in Python, and hash alike)."""
    quantile_candidates.candidate_sets((0.0, 1.0), 1, False, False)
    with pytest.raises(UsageError, match="resolution"):
        quantile_candidates.candidate_sets((0.0, 1.0), True, False, False)  # type: ignore[arg-type]
    listed = quantile_candidates.candidate_sets([0.0, 1.0], 4, False, False)  # type: ignore[arg-type]
    assert listed.lattices == quantile_candidates.candidate_sets((0.0, 1.0), 4, False, False).lattices
    with pytest.raises(InvalidBounds):
        quantile_candidates.candidate_sets(np.array([1.0, 0.0]), 4, False, False)  # type: ignore[arg-type]
