"""Clipping, random per-unit row bounding, and exact sums (the Casacuberta et al. CCS 2022 pitfall)."""

import ast
import itertools
import math
import pathlib
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

import dpsense.sensitivity as sens
from dpsense.core import Adjacency, InvalidBounds, InvalidData, UsageError
from dpsense.noise.testing import deterministic_entropy
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    bound_rows_per_unit,
    clip,
    exact_clipped_sum,
    sum_sensitivity,
)

HOURS = Bounds(0, 24)

# ---------------------------------------------------------------------------------------------
# clip


def test_clip_maps_into_the_bounds():
    out = clip([-3, 5, 30.5, 24], HOURS)
    assert out.dtype == np.float64
    assert out.tolist() == [0.0, 5.0, 24.0, 24.0]


def test_clip_keeps_shape_and_accepts_int_and_float32():
    assert clip(np.arange(6, dtype=np.int32).reshape(2, 3), Bounds(1, 4)).tolist() == [[1, 1, 2], [3, 4, 4]]
    assert clip(np.array([0.5], dtype=np.float32), Bounds(0, 1)).tolist() == [0.5]


def test_clip_stays_inside_the_exact_rational_bounds():
    out = clip([0.7, 1.1, 0.0, 5.0], Bounds("0.7", "1.1"))
    assert all(Fraction(7, 10) <= Fraction(v) <= Fraction(11, 10) for v in out.tolist())


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_clip_refuses_non_finite_values_without_naming_them(bad):
    with pytest.raises(InvalidData) as info:
        clip([1.0, 2.5, bad], HOURS)
    assert "per-column" in info.value.fix
    assert "2.5" not in str(info.value)


@pytest.mark.parametrize(
    "values",
    [
        ["a", "b"],
        np.array([1, None], dtype=object),
        [True, False],
        [1 + 2j],
        [[1, 2], [3]],
        3.0,
        np.datetime64("2024-01-01"),
    ],
)
def test_clip_refuses_non_numeric_input(values):
    with pytest.raises(InvalidData):
        clip(values, HOURS)


def test_empty_input_is_not_an_error():
    # refusing would reveal that the (private) data set is empty
    assert clip([], HOURS).shape == (0,)
    assert exact_clipped_sum(np.array([]), HOURS).value == 0
    assert bound_rows_per_unit([], max_rows=3).shape == (0,)


# ---------------------------------------------------------------------------------------------
# bound_rows_per_unit


def test_bound_rows_keeps_at_most_c_rows_per_unit():
    ids = np.array(["a"] * 7 + ["b"] * 2 + ["c"] + ["a"] * 3)
    kept = bound_rows_per_unit(ids, max_rows=3)
    assert kept.dtype == np.intp
    assert np.all(np.diff(kept) > 0)
    assert Counter(ids[kept].tolist()) == {"a": 3, "b": 2, "c": 1}


def test_bound_rows_accepts_integer_and_float_ids():
    assert len(bound_rows_per_unit(np.array([5, 5, 5, 9]), max_rows=1)) == 2
    assert len(bound_rows_per_unit([1.5, 1.5, 2.0], max_rows=np.int64(2))) == 3


@pytest.mark.parametrize("c", [0, -1, 2.0, True, None])
def test_bound_rows_validates_the_bound(c):
    with pytest.raises(UsageError):
        bound_rows_per_unit(["a", "b"], max_rows=c)


@pytest.mark.parametrize(
    "ids", [np.array([[1, 2], [3, 4]]), [1.0, np.nan], np.array(["a", 1, None], dtype=object), [[1, 2], [3]]]
)
def test_bound_rows_refuses_bad_ids(ids):
    with pytest.raises(InvalidData):
        bound_rows_per_unit(ids, max_rows=1)


def test_bound_rows_is_reproducible_only_through_the_entropy_hook():
    ids = np.repeat(np.arange(20), 5)
    with deterministic_entropy(7):
        first = bound_rows_per_unit(ids, max_rows=2)
    with deterministic_entropy(7):
        second = bound_rows_per_unit(ids, max_rows=2)
    assert np.array_equal(first, second)


def test_bound_rows_picks_a_uniform_subset_not_the_first_rows():
    # One unit with 5 rows, C = 2: each of the 10 subsets has probability 1/10. Also two other units
    # interleaved, so the subset must not depend on row position or on the other units.
    ids = np.array(["x", "u", "u", "y", "u", "u", "y", "u"])
    unit_rows = np.flatnonzero(ids == "u")
    subsets = [frozenset(s) for s in itertools.combinations(unit_rows.tolist(), 2)]
    trials = 20_000
    counts = Counter()
    with deterministic_entropy(2024):
        for _ in range(trials):
            kept = bound_rows_per_unit(ids, max_rows=2)
            counts[frozenset(set(kept.tolist()) & set(unit_rows.tolist()))] += 1
    observed = [counts[s] for s in subsets]
    assert sum(observed) == trials
    assert stats.chisquare(observed).pvalue > 1e-10
    # power: the same test rejects a sampler that favours the first two rows by 30 %
    tilted = np.array([1.3 if s == subsets[0] else 1.0 for s in subsets])
    expected = trials * tilted / tilted.sum()
    assert stats.chisquare(observed, expected).pvalue < 1e-10


def test_sensitivity_package_draws_no_randomness_of_its_own():
    root = pathlib.Path(sens.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"random", "secrets"}, path
        assert "np.random" not in path.read_text(), path


# ---------------------------------------------------------------------------------------------
# exact_clipped_sum


def test_float_sum_can_exceed_the_sensitivity_but_the_exact_sum_cannot():
    b, c = Bounds(0, 1), ContributionBound(1)
    x = np.array([3 * 2.0**-53])
    x_prime = np.append(x, 1.0)
    delta = sum_sensitivity(b, adjacency=Adjacency.ADD_REMOVE, contribution=c)
    naive = Fraction(float(np.sum(x_prime))) - Fraction(float(np.sum(x)))
    assert naive > delta  # 1 + 2^-53: the textbook float sum breaks the stated sensitivity
    exact = exact_clipped_sum(x_prime, b).value - exact_clipped_sum(x, b).value
    assert exact == delta


def test_exact_sum_is_exact_where_int64_would_overflow():
    # 5000 values of 1.0 on the default grid 2^-52: 5000 * 2^52 > 2^63
    s = exact_clipped_sum(np.ones(5000), Bounds(0, 1))
    assert s.grid == Fraction(1, 2**52)
    assert s.value == 5000


def test_exact_sum_of_large_arrays_is_exact_and_clipped():
    values = np.concatenate([np.full(300_000, 0.5), np.full(1000, 99.0), np.full(7, -4.0)])
    assert exact_clipped_sum(values, HOURS).value == 150_000 + 24_000


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), max_size=40), st.integers(-8, 4))
def test_exact_sum_matches_rational_reference(values, exponent):
    b = Bounds(-1000, "1000.5")
    grid = Fraction(2) ** exponent
    got = exact_clipped_sum(np.array(values, dtype=float), b, grid=grid)
    lo, hi = b.float_interval()
    ref = Fraction(0)
    for v in values:
        q = round(Fraction(min(max(v, lo), hi)) / grid)  # round half to even, as np.rint
        q = min(max(q, math.ceil(b.lower / grid)), math.floor(b.upper / grid))
        ref += q * grid
    assert got.grid == grid
    assert got.value == ref


@pytest.mark.parametrize("grid", [3, "0.1", 0, -2, "abc"])
def test_grid_must_be_a_positive_power_of_two(grid):
    with pytest.raises(UsageError):
        exact_clipped_sum([1.0], HOURS, grid=grid)


def test_grid_too_fine_or_too_coarse_is_refused():
    with pytest.raises(UsageError):
        exact_clipped_sum([1.0], HOURS, grid=Fraction(1, 2**60))
    with pytest.raises(InvalidBounds):
        exact_clipped_sum([1.0], Bounds("0.3", "0.4"), grid=1)


def test_exact_sum_with_zero_bounds():
    assert exact_clipped_sum([5.0, -3.0], Bounds(0, 0)).value == 0


unit_values = st.lists(st.floats(-1e12, 1e12, allow_subnormal=True), min_size=1, max_size=12)


@settings(max_examples=80, deadline=None)
@given(
    lower=st.sampled_from(["-7.3", "0", "0.1", "-1e-3", "20", "-1e9"]),
    width=st.sampled_from(["0", "0.7", "24", "1e-5", "3e9"]),
    units=st.lists(unit_values, min_size=1, max_size=6),
    replacement=unit_values,
    c=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_bounded_exact_sum_neighbours_stay_within_sum_sensitivity(lower, width, units, replacement, c, seed):
    """Bound rows (keys coupled across neighbours), clip, sum exactly: |S(x) - S(x')| <= Delta exactly."""
    b = Bounds(lower, Fraction(lower) + Fraction(width))
    assume(not (b.width == 0 and Fraction(float(b.lower)) != b.lower))  # such a point holds no double
    ids = np.concatenate([np.full(len(rows), i) for i, rows in enumerate(units)] + [np.full(len(replacement), -1)])
    values = np.concatenate([np.array(rows) for rows in units] + [np.array(replacement)])
    with deterministic_entropy(seed):
        kept = bound_rows_per_unit(ids, max_rows=c)
    ids, values = ids[kept], values[kept]
    cb = ContributionBound(c)
    # add/remove: x has unit 0, x' lacks it; replace: unit 0's rows swapped for the replacement unit's
    x = values[ids != -1]
    x_prime_ar = values[(ids != -1) & (ids != 0)]
    x_prime_rp = values[ids != 0]
    s = exact_clipped_sum(x, b).value
    for x_prime, adjacency in ((x_prime_ar, Adjacency.ADD_REMOVE), (x_prime_rp, Adjacency.REPLACE)):
        moved = abs(s - exact_clipped_sum(x_prime, b).value)
        assert moved <= sum_sensitivity(b, adjacency=adjacency, contribution=cb)


def test_public_names_are_curated():
    import types

    public = {n for n in dir(sens) if not n.startswith("_") and not isinstance(getattr(sens, n), types.ModuleType)}
    assert set(sens.__all__) == public
    assert sorted(sens.__all__) == sens.__all__
