from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsense.core.errors import UsageError
from dpsense.noise import categorical, entropy
from dpsense.noise.categorical import CategoricalSampler, sample_categorical
from dpsense.noise.testing import deterministic_entropy

_CTX = Context(prec=80, Emin=MIN_EMIN, Emax=MAX_EMAX)


def exact_boundaries(base: list[float], exponents: list[int], rate: Fraction) -> list[Decimal]:
    """True normalised CDF boundaries, computed directly at 80 digits (independent of the sampler)."""
    e0 = min(e for b, e in zip(base, exponents, strict=True) if b > 0)
    weights = [
        _CTX.multiply(Decimal(b), _CTX.exp(-_CTX.divide(Decimal(rate.numerator * (e - e0)), Decimal(rate.denominator))))
        if b > 0
        else Decimal(0)
        for b, e in zip(base, exponents, strict=True)
    ]
    total = sum(weights, Decimal(0))
    out, acc = [Decimal(0)], Decimal(0)
    for w in weights:
        acc = _CTX.add(acc, w)
        out.append(_CTX.divide(acc, total))
    return out


@pytest.mark.parametrize(
    ("base", "exponents", "rate"),
    [
        ([], [], Fraction(1)),
        ([1.0, 2.0], [0], Fraction(1)),
        ([1.0, -1.0], [0, 0], Fraction(1)),
        ([1.0, float("nan")], [0, 0], Fraction(1)),
        ([1.0, float("inf")], [0, 0], Fraction(1)),
        ([0.0, 0.0], [0, 0], Fraction(1)),
        ([1.0, 1.0], [0, -1], Fraction(1)),
        ([1.0, 1.0], [0, 1], Fraction(-1)),
        ([1.0, 1.0], [0.5, 1.0], Fraction(1)),
    ],
)
def test_rejects_bad_inputs(base: list[float], exponents: list[float], rate: Fraction) -> None:
    with pytest.raises(UsageError):
        sample_categorical(base, exponents, rate)


def test_zero_measure_never_drawn_and_single_support_is_certain() -> None:
    draws = sample_categorical([0.0, 3.0, 0.0], [5, 9, 0], Fraction(2), size=20_000)
    assert set(np.unique(draws).tolist()) == {1}


def test_extreme_measures_and_rates_stay_exact_in_practice() -> None:
    # 5e-324 / 1.7e308 is far below 2^-64: index 0 has probability ~1e-632.
    assert set(sample_categorical([5e-324, 1.7e308], [0, 0], Fraction(0), size=5_000).tolist()) == {1}
    # rate 10^400 does not fit a float: the float path treats e=1 as negligible with a certified error.
    huge = CategoricalSampler.build([1.0, 1e308], [0, 1], Fraction(10**400))
    assert set(huge.draw(5_000).tolist()) == {0}
    assert huge.margin < 2.0**-40


def test_margin_is_tiny_for_ordinary_weights() -> None:
    sampler = CategoricalSampler.build(np.arange(1.0, 1001.0), np.arange(1000) % 37, Fraction(3, 7))
    assert sampler.margin < 2.0**-35
    assert sampler.cumulative[0] == 0.0 and sampler.cumulative[-1] == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.just(0.0), st.floats(min_value=5e-324, max_value=1e300, allow_subnormal=True)),
            st.integers(min_value=0, max_value=10**6),
        ),
        min_size=1,
        max_size=30,
    ).filter(lambda rows: any(b > 0 for b, _ in rows)),
    st.fractions(min_value=0, max_value=50, max_denominator=1000),
)
def test_certified_error_bound_holds(rows: list[tuple[float, int]], rate: Fraction) -> None:
    base = [b for b, _ in rows]
    exponents = [e for _, e in rows]
    sampler = CategoricalSampler.build(base, exponents, rate)
    truth = exact_boundaries(base, exponents, rate)
    bound = sampler.margin - categorical.EVAL_SLACK
    for approx, exact_value in zip(sampler.cumulative.tolist(), truth, strict=True):
        assert abs(Decimal(approx) - exact_value) <= Decimal(bound)


@pytest.fixture
def restore_constants() -> Iterator[None]:
    saved = (categorical.EVAL_SLACK, categorical.FIRST_PRECISION, categorical.PRECISION_STEP)
    yield
    categorical.EVAL_SLACK, categorical.FIRST_PRECISION, categorical.PRECISION_STEP = saved


WEIGHTS = ([1.0, 2.5, 0.0, 0.75, 3.0, 1e-3, 4.0, 2.0], [0, 3, 1, 7, 2, 0, 5, 4], Fraction(1, 2))


@pytest.mark.usefixtures("restore_constants")
def test_exact_fallback_returns_the_same_index_as_the_fast_path_for_the_same_bits() -> None:
    with deterministic_entropy(7):
        fast = sample_categorical(*WEIGHTS, size=3_000)
    categorical.EVAL_SLACK = 1.0  # every draw now goes through the decimal fallback
    with deterministic_entropy(7):
        slow = sample_categorical(*WEIGHTS, size=3_000)
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.usefixtures("restore_constants")
def test_low_precision_fallback_needs_several_rounds_and_still_agrees() -> None:
    with deterministic_entropy(11):
        fast = sample_categorical(*WEIGHTS, size=500)
    categorical.EVAL_SLACK = 1.0
    categorical.FIRST_PRECISION = 1  # brackets start wide: decisions need more digits and more bits
    categorical.PRECISION_STEP = 1
    with deterministic_entropy(11):
        slow = sample_categorical(*WEIGHTS, size=500)
    np.testing.assert_array_equal(fast, slow)


def _scripted_words(script: list[int]) -> object:
    queue = list(script)

    def words(n: int) -> np.ndarray:
        out = np.array(queue[:n], dtype=np.uint64)
        del queue[:n]
        return out

    return words


@pytest.mark.parametrize(("extra_word", "expected"), [(2**62, 0), (2**63 + 5, 1)])
def test_boundary_inside_the_first_64_bits_is_decided_by_more_bits(
    monkeypatch: pytest.MonkeyPatch, extra_word: int, expected: int
) -> None:
    # Boundaries at 2^-65 and 1 - (2^13 - 1) 2^-65: U = 0 cannot tell bin 0 from bin 1.
    base = [1.0, float(2**65 - 2**13), float(2**13 - 1)]
    monkeypatch.setattr(entropy, "words", _scripted_words([0, extra_word]))
    assert int(sample_categorical(base, [0, 0, 0], Fraction(0))[0]) == expected


@pytest.mark.parametrize(("word", "expected"), [(2**63 - 1, 0), (2**63, 1)])
def test_dyadic_boundary_is_split_exactly(monkeypatch: pytest.MonkeyPatch, word: int, expected: int) -> None:
    monkeypatch.setattr(entropy, "words", _scripted_words([word]))
    assert int(sample_categorical([1.0, 1.0], [4, 4], Fraction(5))[0]) == expected


def _light_tails(m: int = 4_000) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """A V of exponents around index m/2 with varied measures: the tails weigh below e^-200."""
    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**30, m).astype(np.float64) * 2.0**10
    exponents = np.abs(np.arange(m, dtype=np.int64) - m // 2) * 3
    return base, exponents, Fraction(1, 4)


def _window(lo: int, hi: int) -> tuple[categorical.WindowedSampler | None, CategoricalSampler]:
    base, exponents, rate = _light_tails()
    whole = CategoricalSampler.build(base, exponents, rate)
    left_out = np.r_[0:lo, hi : base.size]
    outside = categorical.Outside(measure=float(base[left_out].sum()), exponent=int(exponents[left_out].min()))
    window = categorical.WindowedSampler.build(
        base[lo:hi], exponents[lo:hi], rate, outside=outside, whole=lambda: whole
    )
    return window, whole


def test_a_window_draws_what_the_whole_table_draws_from_the_same_words() -> None:
    window, whole = _window(1_700, 2_300)  # outside: exponents >= 900, weight < e^-200
    assert window is not None
    assert window.margin < 2.0**-35
    with deterministic_entropy(3):
        rows, inside = window.draw(20_000)
        from_window = np.where(inside, rows + 1_700, rows)
        after_window = entropy.words(1)
    with deterministic_entropy(3):
        from_whole = whole.draw(20_000)
        after_whole = entropy.words(1)
    np.testing.assert_array_equal(from_window, from_whole)
    assert after_window[0] == after_whole[0]


@pytest.mark.usefixtures("restore_constants")
def test_an_undecided_window_draw_goes_to_the_whole_law_with_the_same_word() -> None:
    window, whole = _window(1_700, 2_300)
    assert window is not None
    with deterministic_entropy(9):
        fast = whole.draw(300)
    window.margin = 1.0  # nothing is decided in the window: every draw is the whole law's exact fallback
    with deterministic_entropy(9):
        slow, inside = window.draw(300)
    assert not inside.any()
    np.testing.assert_array_equal(fast, slow)


def test_a_window_that_leaves_out_real_weight_is_refused() -> None:
    window, _ = _window(1_990, 2_010)  # outside: exponents >= 30, weight about e^-7.5 each
    assert window is None


def test_the_window_margin_certifies_the_whole_law() -> None:
    base, exponents, _ = _light_tails(200)
    rate = Fraction(1)
    window_lo, window_hi = 60, 140  # outside: exponents >= 120, weight < e^-100 each
    left_out = np.r_[0:window_lo, window_hi:200]
    outside = categorical.Outside(measure=left_out.size * 2.0**40, exponent=int(exponents[left_out].min()))
    table = categorical.WindowedSampler.build(
        base[window_lo:window_hi],
        exponents[window_lo:window_hi],
        rate,
        outside=outside,
        whole=lambda: CategoricalSampler.build(base, exponents, rate),
    )
    assert table is not None
    truth = exact_boundaries(base.tolist(), exponents.tolist(), rate)
    bound = table.margin - categorical.EVAL_SLACK
    for k, approx in enumerate(table.cumulative.tolist()):
        assert abs(Decimal(approx) - truth[window_lo + k]) <= Decimal(bound)


@pytest.mark.parametrize(("left_out_weight", "accepted"), [(2.0**-57, True), (2.0**-55, False)])
def test_a_window_is_used_only_below_the_outside_limit(left_out_weight: float, accepted: bool) -> None:
    # ten categories of measure 1 and exponent 0 (largest weight 1); outside: measure M at exponent 1,
    # so the certified weight left out is M e^-1, on either side of OUTSIDE_LIMIT = 2^-56
    def window(outside: categorical.Outside) -> categorical.WindowedSampler | None:
        base, exponents = np.ones(10), np.zeros(10, dtype=np.int64)
        whole = CategoricalSampler.build(base, exponents, Fraction(1))
        return categorical.WindowedSampler.build(base, exponents, Fraction(1), outside=outside, whole=lambda: whole)

    windowed = window(categorical.Outside(measure=left_out_weight * math.e, exponent=1))
    assert (windowed is not None) is accepted
    if windowed is not None:  # the left-out weight joins the margin: 2 x 2^-57 / T (T = 10) more than nothing left out
        alone = window(categorical.Outside(measure=0.0, exponent=0))
        assert alone is not None
        assert windowed.margin - alone.margin == pytest.approx(2 * 2.0**-57 / 10, rel=2.0**-20)


def _laws_together() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[categorical.Outside]]:
    """Three windows of the light-tailed law, one whole law of mixed measures, and a window of one category."""
    base, exponents, _ = _light_tails()
    rng = np.random.default_rng(8)
    mixed = rng.integers(0, 2**20, 300).astype(np.float64) * 2.0 ** rng.integers(-40, 40, 300)
    mixed_exponents = rng.integers(0, 60, 300)
    pieces = [(1_700, 2_300), (1_800, 2_200), (1_850, 2_150)]
    parts_base = [base[lo:hi] for lo, hi in pieces] + [mixed, np.array([3.0])]
    parts_exps = [exponents[lo:hi] for lo, hi in pieces] + [mixed_exponents, np.array([7])]
    outside = []
    for lo, hi in pieces:
        left_out = np.r_[0:lo, hi : base.size]
        outside.append(
            categorical.Outside(measure=float(base[left_out].sum()), exponent=int(exponents[left_out].min()))
        )
    outside += [categorical.Outside(measure=0.0, exponent=0), categorical.Outside(measure=0.0, exponent=0)]
    starts = np.cumsum([0] + [p.size for p in parts_base])
    return np.concatenate(parts_base), np.concatenate(parts_exps).astype(np.int64), starts, outside


def test_windows_built_together_draw_what_each_built_alone_draws() -> None:
    base, exponents, starts, outside = _laws_together()
    rate = Fraction(1, 4)
    alone = [
        categorical.WindowedSampler.build(
            base[a:b], exponents[a:b], rate, outside=o, whole=lambda: CategoricalSampler.build([1.0], [0], rate)
        )
        for a, b, o in zip(starts[:-1], starts[1:], outside, strict=True)
    ]
    together = categorical.WindowedSampler.build_many(
        base, exponents, rate, starts, outside=outside, whole=[lambda: CategoricalSampler.build([1.0], [0], rate)] * 5
    )
    assert all(s is not None for s in alone) and all(s is not None for s in together)
    for one, many in zip(alone, together, strict=True):
        assert one is not None and many is not None
        with deterministic_entropy(4):
            first = one.draw(5_000)
        with deterministic_entropy(4):
            second = many.draw(5_000)
        np.testing.assert_array_equal(first[0], second[0])
        np.testing.assert_array_equal(first[1], second[1])


def test_float_tables_built_together_certify_each_law() -> None:
    base, exponents, starts, _ = _laws_together()
    rate = Fraction(1, 4)
    e0 = np.array([exponents[a:b][base[a:b] > 0].min() for a, b in itertools.pairwise(starts)])
    shifts = np.where(base > 0, exponents - np.repeat(e0, np.diff(starts)), 0)
    cumulative, margins, _ = categorical._float_tables(base, shifts, rate, starts)
    for g, (a, b) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True)):
        truth = exact_boundaries(base[a:b].tolist(), exponents[a:b].tolist(), rate)
        table = cumulative[a + g : b + g + 1]
        assert table[0] == 0.0 and table[-1] == 1.0
        bound = Decimal(float(margins[g]) - categorical.EVAL_SLACK)
        assert max(abs(Decimal(c) - t) for c, t in zip(table.tolist(), truth, strict=True)) <= bound


def test_windows_built_together_are_refused_as_each_alone_would_be() -> None:
    base = np.array([1.0, 2.0, 0.0, 0.0, 5.0, 1.0, 1.0])
    exponents = np.array([0, 1, 0, 3, 2, 0, 0], dtype=np.int64)
    starts = np.array([0, 2, 4, 5, 7])
    outside = [
        categorical.Outside(measure=1.0, exponent=400),  # light: kept
        categorical.Outside(measure=0.0, exponent=0),  # no positive measure: refused
        categorical.Outside(measure=1.0, exponent=2),  # outside exponent not above the window's least: refused
        categorical.Outside(measure=1e30, exponent=10),  # heavy outside: refused
    ]
    built = categorical.WindowedSampler.build_many(
        base,
        exponents,
        Fraction(1),
        starts,
        outside=outside,
        whole=[lambda: CategoricalSampler.build([1.0], [0], Fraction(1))] * 4,
    )
    assert [b is not None for b in built] == [True, False, False, False]
    for a, b, o, many in zip(starts[:-1].tolist(), starts[1:].tolist(), outside, built, strict=True):
        if base[a:b].any():
            one = categorical.WindowedSampler.build(
                base[a:b],
                exponents[a:b],
                Fraction(1),
                outside=o,
                whole=lambda: CategoricalSampler.build([1.0], [0], Fraction(1)),
            )
            assert (one is None) == (many is None)
    with pytest.raises(UsageError, match="non-empty runs"):
        categorical.WindowedSampler.build_many(
            base,
            exponents,
            Fraction(1),
            np.array([0, 3, 3, 7]),
            outside=outside[:3],
            whole=[lambda: None] * 3,  # type: ignore[list-item, return-value]
        )
