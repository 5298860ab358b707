"""Mean and trimmed-mean sensitivities against brute force over small multiset domains (exact fractions)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core import InvalidData, UsageError
from dpsense.sensitivity.order_statistics import resize_to_public_n
from dpsense.sensitivity.smooth import PersonLevel, smooth_upper_bound
from dpsense.sensitivity.trimmed_mean import (
    TrimmedMeanFamily,
    mean_local_sensitivity,
    trimmed_mean,
    trimmed_mean_local_sensitivity,
    trimmed_mean_smooth_sensitivity,
)
from tests.unit.sensitivity.test_order_statistics import (
    _add_remove_domain,
    arr,
    brute_S,
    distances,
    multisets,
    replace_neighbours,
)


def exact_trimmed(y, m):
    return Fraction(sum(y[m : len(y) - m]), len(y) - 2 * m)


def exact_ls(values, nbrs):
    return [max((abs(values[i] - values[j]) for j in s), default=Fraction(0)) for i, s in enumerate(nbrs)]


def assert_rounded_up(got: float, exact: Fraction) -> None:
    """``got`` is the smallest double >= exact."""
    assert Fraction(got) >= exact
    assert got == 0 or Fraction(math.nextafter(got, -math.inf)) < exact


@pytest.fixture(scope="module", params=[(6, 4, 1), (7, 4, 2), (5, 5, 0), (5, 3, 2)], ids=str)
def trimmed_domain(request):
    n, V, m = request.param
    doms = multisets(n, V)
    nbrs = replace_neighbours(doms, V)
    ls = exact_ls([exact_trimmed(y, m) for y in doms], nbrs)
    return n, V, m, doms, nbrs, distances(nbrs), ls


def test_family_is_exact_A_k_rounded_up_and_monotone(trimmed_domain):
    _, V, m, doms, nbrs, dist, ls = trimmed_domain
    families = [TrimmedMeanFamily(arr(y), m, (0, V)) for y in doms]
    for k in range(2 * m + 4):
        expected = [max(ls[j] for j in np.flatnonzero(dist[i] <= k)) for i in range(len(doms))]
        for fam, e in zip(families, expected, strict=True):
            assert_rounded_up(fam.upper(k), e)
        if k >= 2 * m + 1:
            assert all(fam.upper(k) == fam.cap for fam in families)
    for i, y in enumerate(doms):
        assert_rounded_up(trimmed_mean_local_sensitivity(arr(y), m, (0, V)), ls[i])
        assert Fraction(trimmed_mean(arr(y), m, (0, V))) == pytest.approx(exact_trimmed(y, m), rel=1e-15)
    U = np.array([[f.upper(k) for k in range(2 * m + 4)] for f in families])
    for i, s in enumerate(nbrs):
        for j in s:
            assert np.all(U[i, :-1] <= U[j, 1:])


@pytest.mark.parametrize("beta", [0.1, 0.9])
def test_smooth_sensitivity_equals_brute_force(trimmed_domain, beta):
    _, V, m, doms, nbrs, dist, ls = trimmed_domain
    expected = brute_S(np.array([float(v) for v in ls]), dist, beta)
    got = np.array([trimmed_mean_smooth_sensitivity(arr(y)[::-1], bounds=(0, V), trim=m, beta=beta) for y in doms])
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    for i, s in enumerate(nbrs):
        assert all(got[i] <= math.exp(beta) * got[j] * (1 + 1e-12) for j in s)


def test_mean_local_sensitivity_replace_brute_force():
    V = 5
    for n in (1, 2, 4):
        doms = multisets(n, V)
        nbrs = replace_neighbours(doms, V)
        ls = exact_ls([Fraction(sum(y), n) for y in doms], nbrs)
        for y, e in zip(doms, ls, strict=True):
            assert_rounded_up(mean_local_sensitivity(arr(y), bounds=(0, V), adjacency="replace"), e)
            assert mean_local_sensitivity(arr(y), bounds=(0, V), adjacency="replace") == TrimmedMeanFamily(
                arr(y), 0, (0, V)
            ).upper(0)


def test_mean_local_sensitivity_add_remove_brute_force():
    V = 4
    doms, nbrs = _add_remove_domain(V, 6, 1)
    mean = [Fraction(sum(y), len(y)) if y else None for y in doms]
    for i, y in enumerate(doms):
        if not 2 <= len(y) <= 5:  # size 6 is the domain's edge: no additions enumerated there
            continue
        # neighbours: add any grid value (extremes L, U are on the grid) or remove one record
        e = max(abs(mean[i] - mean[j]) for j in nbrs[i])
        got = mean_local_sensitivity(arr(y), bounds=(0, V), adjacency="add_remove")
        assert got == pytest.approx(float(e), rel=1e-14)
    with pytest.raises(InvalidData):
        mean_local_sensitivity([1.0], bounds=(0, V), adjacency="add_remove")


@settings(max_examples=100, deadline=None)
@given(
    data=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=30),
    m_frac=st.floats(0, 0.49),
    beta=st.sampled_from([0.05, 0.5]),
)
def test_mean_add_remove_formula_on_floats(data, m_frac, beta):
    x = np.array(data)
    n = x.size
    mu = sum(map(Fraction, data)) / n
    exact = max(
        max(mu - Fraction(-1e3), Fraction(1e3) - mu) / (n + 1),
        max(abs(Fraction(v) - mu) for v in data) / (n - 1),
    )
    assert mean_local_sensitivity(x, bounds=(-1e3, 1e3), adjacency="add_remove") == pytest.approx(
        float(exact), rel=1e-12
    )
    m = int(m_frac * n) if n - 2 * int(m_frac * n) >= 1 else 0
    s = trimmed_mean_smooth_sensitivity(x, bounds=(-1e3, 1e3), trim=m, beta=beta)
    assert s >= trimmed_mean_local_sensitivity(np.sort(x), m, (-1e3, 1e3))
    assert s <= TrimmedMeanFamily(np.sort(x), m, (-1e3, 1e3)).cap


def test_add_remove_through_public_n_is_valid():
    V, public_n, m, beta = 4, 5, 1, 0.4
    doms, nbrs = _add_remove_domain(V, 7, 1)
    resized = [resize_to_public_n(arr(y), public_n=public_n, bounds=(0, V)) for y in doms]
    f = [exact_trimmed(tuple(int(v) for v in t), m) for t in resized]
    ls = exact_ls(f, nbrs)
    U = np.array([[TrimmedMeanFamily(t, m, (0, V)).upper(k) for k in range(5)] for t in resized])
    assert all(Fraction(U[i, 0]) >= ls[i] for i in range(len(doms)))
    S = [
        trimmed_mean_smooth_sensitivity(arr(y), bounds=(0, V), trim=m, beta=beta, adjacency="add_remove", public_n=5)
        for y in doms
    ]
    for i, s in enumerate(nbrs):
        for j in s:
            assert np.all(U[i, :-1] <= U[j, 1:])
            assert S[i] <= math.exp(beta) * S[j] * (1 + 1e-12)


def test_person_level_two_records_per_unit():
    n, V, m, C = 6, 3, 1, 2
    doms = multisets(n, V)
    nbrs = replace_neighbours(doms, V, records=C)
    ls = exact_ls([exact_trimmed(y, m) for y in doms], nbrs)
    families = [TrimmedMeanFamily(arr(y), m, (0, V)) for y in doms]
    wrapped = np.array([[PersonLevel(f, C).upper(k) for k in range(4)] for f in families])
    assert all(Fraction(wrapped[i, 0]) >= ls[i] for i in range(len(doms)))
    assert all(np.all(wrapped[i, :-1] <= wrapped[j, 1:]) for i, s in enumerate(nbrs) for j in s)
    assert any(Fraction(f.upper(0)) < ls[i] for i, f in enumerate(families))  # unwrapped is not an upper bound
    y = doms[17]
    assert trimmed_mean_smooth_sensitivity(
        arr(y), bounds=(0, V), trim=m, beta=0.2, max_records_per_unit=C
    ) == smooth_upper_bound(PersonLevel(families[17], C), beta=0.2)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: TrimmedMeanFamily([1.0, 2.0], 1, (0, 4)), UsageError),
        (lambda: TrimmedMeanFamily([1.0, 2.0], -1, (0, 4)), UsageError),
        (lambda: TrimmedMeanFamily([2.0, 1.0], 0, (0, 4)), InvalidData),
        (
            lambda: trimmed_mean_smooth_sensitivity([1.0], bounds=(0, 4), trim=0, beta=0.1, adjacency="add_remove"),
            UsageError,
        ),
        (lambda: mean_local_sensitivity([], bounds=(0, 4), adjacency="replace"), InvalidData),
        (lambda: mean_local_sensitivity([1.0], bounds=(0, 4), adjacency="sideways"), UsageError),
    ],
)
def test_refusals(call, error):
    with pytest.raises(error):
        call()
