"""Global sensitivities: the seed table, docs/math/index.md sections 1.3 and 2.3, and brute force over neighbours."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core import Adjacency, InvalidSensitivity, UnsupportedRequest, UsageError
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    Norm,
    Sqrt,
    centered_sum_sensitivity,
    count_rows_sensitivity,
    count_units_sensitivity,
    histogram_sensitivity,
    mean_sensitivity_public_n,
    sum_sensitivity,
    window_max_rows,
)

AR, RP = Adjacency.ADD_REMOVE, Adjacency.REPLACE
ONE = ContributionBound(1)

# ---------------------------------------------------------------------------------------------
# The seed table (lesson 14.3, section 2) and the 30-day window.


def test_seed_table_distinct_persons():
    assert count_units_sensitivity(adjacency="add_remove", contribution=ONE) == 1


@pytest.mark.parametrize("c", [1, 7, 1000])
def test_seed_table_events_with_at_most_c_rows(c):
    assert count_rows_sensitivity(adjacency=AR, contribution=ContributionBound(c)) == c


def test_seed_table_total_hours():
    assert sum_sensitivity(Bounds(0, 24), adjacency=AR, contribution=ONE) == 24


@pytest.mark.parametrize("n", [1, 30, 1000])
def test_seed_table_mean_hours_public_n_replace(n):
    assert mean_sensitivity_public_n(Bounds(0, 24), n, adjacency=RP, contribution=ONE) == Fraction(24, n)


def test_seed_one_row_per_day_over_30_days_gives_720():
    c = ContributionBound(window_max_rows(1, 30))
    assert sum_sensitivity(Bounds(0, 24), adjacency=AR, contribution=c) == 720


# ---------------------------------------------------------------------------------------------
# The table of docs/math/global-sensitivity.md §1.3, and section 2.3.


@pytest.mark.parametrize("c", [1, 3])
def test_table_sum_and_centered_sum(c):
    cb = ContributionBound(c)
    b = Bounds(-2, 6)
    assert sum_sensitivity(b, adjacency=AR, contribution=cb) == 6 * c
    assert sum_sensitivity(b, adjacency=RP, contribution=cb) == 8 * c
    assert centered_sum_sensitivity(b, adjacency=AR, contribution=cb) == 4 * c
    assert centered_sum_sensitivity(b, adjacency=RP, contribution=cb) == 8 * c


def test_replace_sum_with_zero_outside_the_bounds_is_larger_than_the_table():
    b, c = Bounds(20, 50), ContributionBound(2)
    # one row of 20 replaced by two rows of 50: the sum moves by 80, not C(U - L) = 60
    assert sum_sensitivity(b, adjacency=RP, contribution=c) == 100
    assert abs(2 * 50 - 20) > 2 * (50 - 20)
    fixed = ContributionBound(2, fixed_rows_per_unit=True)
    assert sum_sensitivity(b, adjacency=RP, contribution=fixed) == 60
    assert sum_sensitivity(b, adjacency=RP, contribution=ContributionBound(1, fixed_rows_per_unit=True)) == 30


def test_section_0e_histogram_values():
    assert histogram_sensitivity("l1", adjacency=AR, contribution=ONE) == 1
    assert histogram_sensitivity("l2", adjacency=AR, contribution=ONE).exact == 1
    assert histogram_sensitivity("linf", adjacency=AR, contribution=ONE) == 1
    assert histogram_sensitivity("l1", adjacency=RP, contribution=ONE) == 2
    l2 = histogram_sensitivity(Norm.L2, adjacency=RP, contribution=ONE)
    assert l2.squared == 2 and l2.exact is None and str(l2) == "√2"
    assert histogram_sensitivity(Norm.LINF, adjacency=RP, contribution=ONE) == 1
    c = ContributionBound(5)
    assert histogram_sensitivity("l1", adjacency=AR, contribution=c) == 5
    assert histogram_sensitivity("l1", adjacency=RP, contribution=c) == 10
    assert histogram_sensitivity("l2", adjacency=AR, contribution=c) <= Sqrt(Fraction(25))
    assert histogram_sensitivity("l2", adjacency=RP, contribution=c) <= Sqrt(Fraction(50))


def test_histogram_l2_is_tighter_than_the_table_bound():
    c = ContributionBound(5, max_rows_per_group=2)
    assert histogram_sensitivity("l2", adjacency=AR, contribution=c).exact == 3
    assert min(5, math.sqrt(5) * 2) > 3
    c0 = ContributionBound(6, max_groups_per_unit=2, max_rows_per_group=2)
    assert histogram_sensitivity("l1", adjacency=AR, contribution=c0) == 4  # C0 * C_inf < C
    assert histogram_sensitivity("linf", adjacency=RP, contribution=c0) == 2


def test_section_0g_mean_of_ages_needs_far_more_than_0_03():
    gs = mean_sensitivity_public_n(Bounds(0, 120), 1000, adjacency=RP, contribution=ONE)
    assert gs == Fraction(3, 25)
    assert gs > Fraction(3, 100)


def test_mean_public_n_scales_with_the_rows_a_unit_can_own():
    b = Bounds(0, 24)
    assert mean_sensitivity_public_n(b, 100, adjacency=RP, contribution=ContributionBound(30)) == Fraction(720, 100)
    assert mean_sensitivity_public_n(b, 10, adjacency=RP, contribution=ContributionBound(30)) == 24


def test_mean_public_n_refuses_add_remove_and_names_the_alternative():
    with pytest.raises(UnsupportedRequest) as info:
        mean_sensitivity_public_n(Bounds(0, 24), 100, adjacency="add_remove", contribution=ONE)
    assert "mean_private_n_plan" in info.value.fix


@pytest.mark.parametrize("n", [0, -3, 2.5, True, "10", None])
def test_mean_public_n_needs_a_positive_integer(n):
    with pytest.raises(UsageError):
        mean_sensitivity_public_n(Bounds(0, 24), n, adjacency=RP, contribution=ONE)


def test_unknown_adjacency_and_norm_are_refused():
    with pytest.raises(UsageError):
        sum_sensitivity(Bounds(0, 1), adjacency="bounded", contribution=ONE)
    with pytest.raises(UsageError):
        count_rows_sensitivity(adjacency="row", contribution=ONE)
    with pytest.raises(UsageError):
        histogram_sensitivity("l3", adjacency=AR, contribution=ONE)


def test_count_units_does_not_need_a_row_bound():
    assert count_units_sensitivity(adjacency=RP) == 1
    assert count_units_sensitivity(adjacency=AR, contribution=ContributionBound(50)) == 1


# ---------------------------------------------------------------------------------------------
# Sqrt: exact square, rounding up.


@given(st.fractions(min_value=0, max_value=10**12, max_denominator=10**6))
def test_sqrt_rounds_up(squared):
    s = Sqrt(squared)
    assert s.upper() ** 2 >= squared
    assert Fraction(float(s)) ** 2 >= squared
    assert float(s) <= math.sqrt(float(squared)) * (1 + 1e-15) + 1e-300
    if s.exact is not None:
        assert s.exact**2 == squared and s.upper() == s.exact


def test_sqrt_validates_and_accepts_ints():
    assert Sqrt(9).exact == 3
    assert Sqrt(Fraction(9, 4)).exact == Fraction(3, 2)
    with pytest.raises(InvalidSensitivity):
        Sqrt(Fraction(-1))
    with pytest.raises(InvalidSensitivity):
        Sqrt(2.0)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Brute force: the formulas are upper bounds and are attained.


def _unit_row_counts(c, adjacency, fixed):
    if fixed:
        return [c]
    return range(1, c + 1) if adjacency is AR else range(c + 1)


def _unit_sums(values, c, adjacency, fixed):
    return {
        sum(rows, Fraction(0))
        for k in _unit_row_counts(c, adjacency, fixed)
        for rows in itertools.combinations_with_replacement(values, k)
    }


def _brute_force(unit_values, adjacency):
    """Max |f(x) - f(x')|: f is additive over units, so only the changed unit's part differs."""
    if adjacency is AR:
        return max(abs(v) for v in unit_values)
    return max(abs(a - b) for a, b in itertools.product(unit_values, repeat=2))


bound_pairs = st.tuples(st.integers(-6, 6), st.integers(-6, 6), st.integers(1, 2)).map(
    lambda t: Bounds(Fraction(min(t[0], t[1]), t[2]), Fraction(max(t[0], t[1]), t[2]))
)


@settings(max_examples=60, deadline=None)
@given(
    bounds=bound_pairs,
    c=st.integers(1, 3),
    adjacency=st.sampled_from([AR, RP]),
    fixed=st.booleans(),
    interior=st.lists(st.fractions(0, 1, max_denominator=7), max_size=2),
)
def test_sum_and_centered_sum_brute_force(bounds, c, adjacency, fixed, interior):
    lo, hi = bounds.lower, bounds.upper
    values = sorted({lo, hi, *(lo + t * (hi - lo) for t in interior)} | ({Fraction(0)} if lo <= 0 <= hi else set()))
    cb = ContributionBound(c, fixed_rows_per_unit=fixed)
    sums = _unit_sums(values, c, adjacency, fixed)
    assert _brute_force(sums, adjacency) == sum_sensitivity(bounds, adjacency=adjacency, contribution=cb)
    m = bounds.midpoint
    centered = _unit_sums([v - m for v in values], c, adjacency, fixed)
    assert _brute_force(centered, adjacency) == centered_sum_sensitivity(bounds, adjacency=adjacency, contribution=cb)


@pytest.mark.parametrize("c", [1, 2, 4])
@pytest.mark.parametrize("adjacency", [AR, RP])
def test_count_rows_brute_force(c, adjacency):
    counts = list(_unit_row_counts(c, adjacency, fixed=False))
    assert _brute_force(counts, adjacency) == count_rows_sensitivity(
        adjacency=adjacency, contribution=ContributionBound(c)
    )
    fixed = ContributionBound(c, fixed_rows_per_unit=True)
    assert _brute_force([c], adjacency) <= count_rows_sensitivity(adjacency=adjacency, contribution=fixed)


def _unit_histograms(cb, adjacency, n_bins):
    vectors = set()
    for k in _unit_row_counts(cb.max_rows_per_unit, adjacency, cb.fixed_rows_per_unit):
        for rows in itertools.combinations_with_replacement(range(n_bins), k):
            v = tuple(rows.count(b) for b in range(n_bins))
            if cb.max_groups_per_unit is not None and sum(x > 0 for x in v) > cb.max_groups_per_unit:
                continue
            if cb.max_rows_per_group is not None and max(v, default=0) > cb.max_rows_per_group:
                continue
            vectors.add(v)
    return vectors


CAPS = [None, 1, 2, 3]


HISTOGRAM_CASES = [
    (c, c0, cinf, fixed)
    for c, c0, cinf, fixed in itertools.product([1, 2, 3, 4], CAPS, CAPS, [False, True])
    if not fixed or min(c0 or c, c) * min(cinf or c, c) >= c  # a fixed row count must be feasible
]


@pytest.mark.parametrize("c, c0, cinf, fixed", HISTOGRAM_CASES)
def test_histogram_brute_force(c, c0, cinf, fixed):
    cb = ContributionBound(c, max_groups_per_unit=c0, max_rows_per_group=cinf, fixed_rows_per_unit=fixed)
    n_bins = 2 * cb.groups_cap  # enough bins for two units with disjoint supports
    for adjacency in (AR, RP):
        vectors = np.array(sorted(_unit_histograms(cb, adjacency, n_bins)), dtype=np.int64)
        diffs = vectors if adjacency is AR else (vectors[:, None, :] - vectors[None, :, :]).reshape(-1, n_bins)
        l1 = int(np.abs(diffs).sum(axis=1).max())
        l2sq = int((diffs * diffs).sum(axis=1).max())
        linf = int(np.abs(diffs).max())
        assert histogram_sensitivity("l1", adjacency=adjacency, contribution=cb) == l1
        assert histogram_sensitivity("l2", adjacency=adjacency, contribution=cb).squared == l2sq
        assert histogram_sensitivity("linf", adjacency=adjacency, contribution=cb) == linf
        # never above the table's bounds (docs/math/global-sensitivity.md)
        c0e, cinfe = cb.groups_cap, cb.rows_per_group_cap
        table_l2 = min(c, math.sqrt(c0e) * cinfe) * (math.sqrt(2) if adjacency is RP else 1)
        assert math.sqrt(l2sq) <= table_l2 + 1e-12


# ---------------------------------------------------------------------------------------------
# Whole datasets: random neighbours never move the query by more than the formula.

unit_rows = st.lists(st.fractions(0, 1, max_denominator=16), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    bounds=bound_pairs,
    others=st.lists(unit_rows, max_size=4),
    changed=unit_rows,
    replacement=st.lists(st.fractions(0, 1, max_denominator=16), max_size=3),
    adjacency=st.sampled_from([AR, RP]),
)
def test_random_neighbouring_datasets_stay_within_the_bound(bounds, others, changed, replacement, adjacency):
    cb = ContributionBound(3)

    def scale(rows):
        return [bounds.lower + t * bounds.width for t in rows]

    x = [scale(rows) for rows in others] + [scale(changed)]
    x_prime = [scale(rows) for rows in others] + ([scale(replacement)] if adjacency is RP else [])

    def total(data):
        return sum((v for rows in data for v in rows), Fraction(0))

    def n_rows(data):
        return sum(len(rows) for rows in data)

    def n_units(data):
        return sum(1 for rows in data if rows)

    assert abs(total(x) - total(x_prime)) <= sum_sensitivity(bounds, adjacency=adjacency, contribution=cb)
    assert abs(n_rows(x) - n_rows(x_prime)) <= count_rows_sensitivity(adjacency=adjacency, contribution=cb)
    assert abs(n_units(x) - n_units(x_prime)) <= count_units_sensitivity(adjacency=adjacency, contribution=cb)
    m = bounds.midpoint
    centered = abs((total(x) - m * n_rows(x)) - (total(x_prime) - m * n_rows(x_prime)))
    assert centered <= centered_sum_sensitivity(bounds, adjacency=adjacency, contribution=cb)


@settings(max_examples=40, deadline=None)
@given(
    bounds=bound_pairs,
    others=st.lists(st.fractions(0, 1, max_denominator=16), min_size=0, max_size=6),
    k=st.integers(1, 3),
    old=st.lists(st.fractions(0, 1, max_denominator=16), min_size=3, max_size=3),
    new=st.lists(st.fractions(0, 1, max_denominator=16), min_size=3, max_size=3),
)
def test_public_n_mean_random_replacements(bounds, others, k, old, new):
    cb = ContributionBound(3)

    def scale(rows):
        return [bounds.lower + t * bounds.width for t in rows]

    x, x_prime = scale(others) + scale(old[:k]), scale(others) + scale(new[:k])  # same n on both sides
    n = len(x)
    diff = abs(sum(x, Fraction(0)) - sum(x_prime, Fraction(0))) / n
    assert diff <= mean_sensitivity_public_n(bounds, n, adjacency=RP, contribution=cb)
    # attained when the unit owns C = 3 rows that all jump from L to U
    low, high = scale(others) + [bounds.lower] * k, scale(others) + [bounds.upper] * k
    jump = (sum(high, Fraction(0)) - sum(low, Fraction(0))) / n
    assert jump <= mean_sensitivity_public_n(bounds, n, adjacency=RP, contribution=cb)
    if k == 3:
        assert jump == mean_sensitivity_public_n(bounds, n, adjacency=RP, contribution=cb)
