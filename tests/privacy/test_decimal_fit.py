"""The fit of the decimal grids (math §8.6-8.7) on its tightest pair, by the exact law written from the definition.

A point of G_e scores -(dist + d_e / 16), d_e the records off G_e; under add/remove the cells run at
ε / (2 Δu) and the points at ε / (2 (Δu + 1/16)). The pair below was found by exhaustive search over
datasets of at most three values from {0.5, 2, 3.25, 4, 6.75, 8} on [0, 8] and one added value: it loses
0.954 ε, and the mechanism run 17/16 faster (both sets) loses more than ε on it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tests.privacy import harness as h

HALF = Fraction(1, 2)
PAIR = ([0.5, 0.5, 8.0], [0.5, 0.5, 8.0, 8.0])  # one record 8 added above the median


def _loss(epsilon: Fraction, x: list[float], y: list[float]) -> float:
    laws = [
        h.em_law(np.array(v), q=HALF, epsilon=epsilon, low=0.0, high=8.0, add_remove=True, decimal_points=True)
        for v in (x, y)
    ]
    low, high = h.log_ratio_range(*laws)
    return max(high, -low)


def test_the_fit_stays_within_epsilon_on_its_tightest_pair() -> None:
    loss = _loss(Fraction(1), *PAIR)
    assert 0.95 < loss <= 1.0  # within 5 % of ε: the pair is adversarial


def test_the_mechanism_run_a_sixteenth_faster_is_caught() -> None:
    # the broken control: every weight 17/16 sharper than the Δu's allow
    assert _loss(Fraction(17, 16), *PAIR) > 1.0


def test_the_fit_holds_on_every_small_add_remove_pair() -> None:
    """Every dataset of up to two values from the search's set and every added value: loss <= ε."""
    values = [0.5, 2.0, 3.25, 4.0, 6.75, 8.0]
    worst = 0.0
    for x in [[], *([v] for v in values), *([a, b] for i, a in enumerate(values) for b in values[i:])]:
        for added in values:
            worst = max(worst, _loss(Fraction(1), x, [*x, added]))
    assert worst <= 1.0
