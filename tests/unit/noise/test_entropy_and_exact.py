from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core import DPSenseError, UsageError
from dpsense.noise import entropy, exact, pool
from dpsense.noise.testing import ENV_FLAG, deterministic_entropy


def test_test_source_is_explicit_reproducible_and_visible() -> None:
    assert not entropy.is_test_source_active()
    with deterministic_entropy(7):
        assert entropy.is_test_source_active()
        a = exact.discrete_laplace(Fraction(3), 100)
    with deterministic_entropy(7):
        b = exact.discrete_laplace(Fraction(3), 100)
    assert np.array_equal(a, b)
    assert not entropy.is_test_source_active()


def test_test_source_refused_without_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_FLAG)
    with pytest.raises(DPSenseError, match="only be installed in tests"), deterministic_entropy(1):
        pass
    assert not entropy.is_test_source_active()


def test_os_source_gives_distinct_words() -> None:
    w = entropy.words(1000)
    assert w.dtype == np.uint64 and np.unique(w).size == 1000


def test_python_int_path_agrees_in_range() -> None:
    # exp(-1/2) via Python ints with a huge denominator
    big = 1 << 80
    hits = sum(exact.python_bernoulli_exp(big // 2, big) for _ in range(4000))
    assert abs(hits / 4000 - np.exp(-0.5)) < 0.04


def test_discrete_gaussian_beyond_int64_range_uses_python_ints() -> None:
    sigma2 = Fraction(10**12)  # 2*sigma2*t^2 ~ 2e24 > 2^62: every lane takes the exact Python-int path
    draws = exact.discrete_gaussian(sigma2, 300)
    assert abs(draws.std() / 1e6 - 1) < 0.25


def test_scale_too_large_is_refused_with_fix() -> None:
    with pytest.raises(UsageError, match="2\\^52"):
        exact.discrete_laplace(Fraction(1 << 60), 1)


def test_pool_hands_out_each_value_once() -> None:
    pool.clear()
    counter = [int(os.getpid())]

    def draw(m: int) -> np.ndarray:
        start = counter[0]
        counter[0] += m
        return np.arange(start, start + m, dtype=np.int64)

    p = pool.NoisePool(draw, batch=8)
    taken = np.concatenate([p.take(3) for _ in range(10)])
    assert np.unique(taken).size == taken.size


def test_a_new_pool_draws_a_small_batch_that_doubles_up_to_the_largest() -> None:
    sizes: list[int] = []

    def draw(m: int) -> np.ndarray:
        sizes.append(m)
        return np.zeros(m, dtype=np.int64)

    p = pool.NoisePool(draw, batch=256, first=16)
    for _ in range(200):
        p.take(4)
    assert sizes[0] == 16 and sizes[1:5] == [32, 64, 128, 256] and set(sizes[5:]) == {256}


def test_pools_are_bounded_and_the_least_recently_used_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    pool.clear()
    monkeypatch.setattr(pool, "MAX_POOLS", 3)
    for scale in (1, 2, 3):
        pool.pooled_discrete_laplace(Fraction(scale), 1)
    pool.pooled_discrete_laplace(Fraction(1), 1)  # 1 is used again: 2 is now the least recent
    pool.pooled_discrete_laplace(Fraction(4), 1)
    assert sorted(k[1] for k in pool._pools) == [1, 3, 4]
    pool.clear()


def test_forked_children_never_share_random_bytes_or_pooled_noise() -> None:
    import multiprocessing as mp

    from dpsense.mechanisms.laplace import laplace

    entropy.words(1)  # fill the parent's buffer
    laplace(0.0, sensitivity=1, epsilon=1)  # fill the parent's pool
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as workers:
        children = workers.map(_draw_in_child, range(4))
    mine = _draw_in_child(0)
    draws = [mine, *children]
    assert len({d[0] for d in draws}) == len(draws)  # entropy words all differ
    assert len({d[1] for d in draws}) == len(draws)  # pooled Laplace releases all differ


def _draw_in_child(_: int) -> tuple[int, float]:
    from dpsense.mechanisms.laplace import laplace

    return int(entropy.words(1)[0]), float(laplace(0.0, sensitivity=1, epsilon=1).value)
