"""recursive_quantiles: sorted outputs, the exact joint law (sampled, ±30 % power), the exact loss on small neighbours.

The joint law of three quantiles (1/4, 1/2, 3/4: two levels) on K = 4 cells is written here from the
definition (docs/math/exponential-mechanism.md §8.4): the median's EM on all records over [L, U], then
the EMs of the two halves at rescaled q' = 1/2 over [L, v] and [v, U] on the records at or below and
above the released v. Its largest log-ratio over every pair of neighbouring datasets of up to three
records on four values is the exact privacy loss, which must stay within ε; running the replace pairs
at the add/remove calibration (each split at ε/d instead of ε/2d) is the broken control that must be caught.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.mechanisms import em_quantile, recursive_quantiles
from dpsense.noise.testing import deterministic_entropy
from tests.statistical.gof import chi_square_pvalue
from tests.statistical.power import assert_calibrated

K = 4
LOW, HIGH = 0.0, 4.0
QS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
VALUES = (0.5, 1.5, 2.5, 3.5)


def _cells(records: list[float], lo: float, hi: float) -> list[int]:
    if hi == lo:
        return [0] * len(records)
    return [min(K - 1, max(0, math.floor((x * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5) * K))) for x in records]


def _midpoint(c: int, lo: float, hi: float) -> float:
    return min(max(2.0 * (lo * 0.5 + (c + 0.5) / K * (hi * 0.5 - lo * 0.5)), lo), hi)


def _em_law(records: list[float], lo: float, hi: float, q: Fraction, eps: Fraction) -> list[float]:
    """p(c) ~ exp(-eps dist(q n, [#<c, #<=c]) / (2 max(q, 1 - q))) over K cells of [lo, hi]."""
    cells, n = _cells(records, lo, hi), len(records)
    logs = []
    for c in range(K):
        below, upto = sum(1 for x in cells if x < c), sum(1 for x in cells if x <= c)
        dist = max(below - q * n, q * n - upto, Fraction(0))
        logs.append(-float(eps * dist / (2 * max(q, 1 - q))))
    top = max(logs)
    weights = [math.exp(v - top) for v in logs]
    return [w / sum(weights) for w in weights]


def joint_law(records: list[float], eps_split: Fraction) -> dict[tuple[float, float, float], float]:
    """P(released (v1, v2, v3)) for QS on [LOW, HIGH], each split at ``eps_split``."""
    law: Counter[tuple[float, float, float]] = Counter()
    clipped = sorted(min(max(x, LOW), HIGH) for x in records)
    for c, p in enumerate(_em_law(clipped, LOW, HIGH, Fraction(1, 2), eps_split)):
        v = _midpoint(c, LOW, HIGH)
        left, right = [x for x in clipped if x <= v], [x for x in clipped if x > v]
        for cl, pl in enumerate(_em_law(left, LOW, v, Fraction(1, 2), eps_split)):
            for cr, pr in enumerate(_em_law(right, v, HIGH, Fraction(1, 2), eps_split)):
                law[(_midpoint(cl, LOW, v), v, _midpoint(cr, v, HIGH))] += p * pl * pr
    return dict(law)


def test_outputs_are_sorted_and_the_budget_splits_over_the_levels() -> None:
    x = np.linspace(0, 100, 501)
    result = recursive_quantiles(
        x, qs=[i / 10 for i in range(1, 10)], bounds=(0, 100), epsilon=1, adjacency=Adjacency.ADD_REMOVE
    )
    assert np.all(np.diff(result.value) >= 0) and result.details["levels"] == 4
    assert result.details["epsilon_per_split"] == "1/4"
    replace = recursive_quantiles(x, qs=[0.5], bounds=(0, 100), epsilon=1)
    assert replace.details["epsilon_per_split"] == "1/2" and replace.details["levels"] == 1
    for bad in ([], [0.5, 0.5], [0.7, 0.3], [0, 0.5], [0.5, 1]):
        with pytest.raises(UsageError, match="qs must"):
            recursive_quantiles(x, qs=bad, bounds=(0, 100), epsilon=1)
    empty = recursive_quantiles([], qs=[0.25, 0.5, 0.75], bounds=(0, 100), epsilon=1)
    assert np.all(np.diff(empty.value) >= 0)


def test_one_quantile_is_the_em_quantile() -> None:
    x = [0.5, 1.5, 1.5, 3.5]
    with deterministic_entropy(4):
        a = [
            recursive_quantiles(
                x, qs=[0.5], bounds=(LOW, HIGH), epsilon=2, adjacency=Adjacency.ADD_REMOVE, resolution=K
            ).value[0]
            for _ in range(50)
        ]
    with deterministic_entropy(4):
        b = [
            em_quantile(x, q=0.5, bounds=(LOW, HIGH), epsilon=2, adjacency=Adjacency.ADD_REMOVE, resolution=K).value
            for _ in range(50)
        ]
    assert a == b


@pytest.mark.statistical
def test_samples_follow_the_joint_law() -> None:
    records = [0.5, 1.5, 1.5, 2.5, 3.5]
    eps = Fraction(2)  # two levels under add/remove: each split at 1
    draws = [
        tuple(
            recursive_quantiles(
                records, qs=list(QS), bounds=(LOW, HIGH), epsilon=eps, adjacency=Adjacency.ADD_REMOVE, resolution=K
            ).value.tolist()
        )
        for _ in range(7_000)  # at 7 000 draws the ε x 0.7 and x 1.3 laws already give p < 1e-59
    ]
    outcomes = sorted(joint_law(records, eps / 2))
    index = {o: i for i, o in enumerate(outcomes)}
    sample = np.array([index[d] for d in draws])

    def pmf(f: float) -> np.ndarray:
        law = joint_law(records, eps / 2 * Fraction(str(f)))
        return np.array([law[o] for o in outcomes])

    assert_calibrated(lambda f: chi_square_pvalue(sample, lambda s: pmf(f)[s], 0, len(outcomes) - 1), what="ε")


def _datasets(size: int) -> list[list[float]]:
    return [list(c) for c in itertools.combinations_with_replacement(VALUES, size)]


def _loss(a: dict[tuple[float, float, float], float], b: dict[tuple[float, float, float], float]) -> float:
    assert set(a) == set(b)
    return max(abs(math.log(a[o]) - math.log(b[o])) for o in a)


def test_the_exact_loss_stays_within_epsilon_on_every_small_neighbour_and_the_control_is_caught() -> None:
    eps = Fraction(1)
    add_remove, replace, broken = 0.0, 0.0, 0.0
    for size in range(3):
        for x in _datasets(size):
            law_x = joint_law(x, eps / 2)  # add/remove: each of the two levels at ε/2
            for extra in VALUES:  # y = x plus one record
                add_remove = max(add_remove, _loss(law_x, joint_law(sorted([*x, extra]), eps / 2)))
    for size in range(1, 4):
        for x in _datasets(size):
            law_x, law_x_broken = joint_law(x, eps / 4), joint_law(x, eps / 2)  # replace: each split at ε/4
            for i, new in itertools.product(range(size), VALUES):
                y = sorted([*x[:i], *x[i + 1 :], new])
                replace = max(replace, _loss(law_x, joint_law(y, eps / 4)))
                broken = max(broken, _loss(law_x_broken, joint_law(y, eps / 2)))
    assert add_remove <= float(eps) * (1 + 1e-9)
    assert replace <= float(eps) * (1 + 1e-9)
    assert broken > float(eps) * 1.05, broken  # the add/remove calibration is not enough under replace
