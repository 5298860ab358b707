"""The fit of the decimal grids (math §8.6) on its tightest pair, by the exact law written from the definition.

A point of G_e scores -(dist + d_e / 16), d_e the records off G_e, and the rate is ε / (2 Δ) with
Δ = Δu + 1/32 under add/remove. The pair below was found by exhaustive search over datasets of at
most three values from {0.5, 2, 3.25, 4, 6.75, 8} on [0, 8] and one added value: its loss uses the
fit's share of the width (above 16/17 ε, which the rank utility alone cannot reach at this rate), and
the mechanism run without that share (at Δu, i.e. 17/16 the rate) loses more than ε on it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tests.privacy import harness as h

HALF = Fraction(1, 2)
PAIR = ([0.5, 8.0, 8.0], [0.5, 0.5, 8.0, 8.0])  # one record 0.5 added: off G_0, and below the median


def _loss(epsilon: Fraction, x: list[float], y: list[float]) -> float:
    laws = [
        h.em_law(np.array(v), q=HALF, epsilon=epsilon, low=0.0, high=8.0, add_remove=True, decimal_points=True)
        for v in (x, y)
    ]
    low, high = h.log_ratio_range(*laws)
    return max(high, -low)


def test_the_fit_stays_within_epsilon_and_uses_its_share_of_the_width() -> None:
    loss = _loss(Fraction(1), *PAIR)
    assert loss <= 1.0
    assert loss > 16 / 17  # the rank utility alone moves at most 16/17 of the width at this rate


def test_a_fit_charged_without_its_width_is_caught() -> None:
    # the broken control: the fit's price paid but the rate left at ε / (2 Δu), as if the fit were free
    assert _loss(Fraction(17, 16), *PAIR) > 1.0


def test_the_fit_holds_on_every_small_add_remove_pair() -> None:
    """Every dataset of up to two values from the search's set and every added value: loss <= ε."""
    values = [0.5, 2.0, 3.25, 4.0, 6.75, 8.0]
    worst = 0.0
    for x in [[], *([v] for v in values), *([a, b] for i, a in enumerate(values) for b in values[i:])]:
        for added in values:
            worst = max(worst, _loss(Fraction(1), x, [*x, added]))
    assert worst <= 1.0
