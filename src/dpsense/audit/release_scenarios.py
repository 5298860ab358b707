"""Audit scenarios for the release system's soundness rules (issue 13): groups under replace, empty views, q.

Each scenario draws the mechanism's own exact sampler in one batch (the cell draws of
``dpsense.mechanisms.inverse_sensitivity`` and ``dpsense.mechanisms.quantile``; the public functions
release the midpoint of the same cell) on a pair the release system meets, with a broken control:

* **A unit moving between public groups under replace.** A grouped inverse-sensitivity median with
  C = 1: the replaced unit's record 7 leaves group B = {0, 1, 7} while its replacement's record 0
  enters group A = {1}. Both groups' outputs shift towards cell 0 (exact per-group log-ratio 0.82 ε_g,
  joint 1.64 ε_g on the event "both outputs in cell 0", found by exhaustive search over groups of up to
  four records on 8 cells). The release system runs each group at ε_g = ε / (2C)
  (``query._planner_rules.unit_record_cost``): joint loss 0.85 at ε = 1. The control runs each group
  at ε / C, the calibration before issue 13: joint 1.64 > 1, caught. The output audited is the number
  of groups whose release is in cell 0 (0, 1 or 2), a public function of the joint release.
* **An empty view and its neighbour with one record.** The inverse-sensitivity order statistic of no
  records is a uniform public cell (its definition); one record added moves every path length by at
  most 1. The control refuses on the empty view, as the minimum distance and the quantiles did before
  issue 13 (a refusal with probability 1 on one side and 0 on the other: unbounded loss).
* **A long-denominator q.** The exponential-mechanism quantile with q = 1 / ceil(2^62 / 11) on 9 vs 10
  records: the old int64 guard (n + 1) den + num n >= 2^62 failed exactly at n = 10. The release is
  exact for every n now; the control reproduces the old guard as a refusal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense.audit._types import Sampler, Scenario
from dpsense.mechanisms import inverse_sensitivity as inverse
from dpsense.mechanisms._quantile_candidates import to_cells
from dpsense.mechanisms._rank_sampler import draw_cells

F64 = NDArray[np.float64]

#: 8 public cells of [0, 8): a value v lies in cell floor(v).
CELLS = 8
BOUNDS = (0.0, 8.0)

#: The cross-group replace pair (C = 1): x has A = {1}, B = {0, 1, 7}; x' has A = {1, 0}, B = {0, 1}.
CROSS_X = ((1.5,), (0.5, 1.5, 7.5))
CROSS_Y = ((1.5, 0.5), (0.5, 1.5))

#: The empty-view pair: no record vs one record at the far end.
EMPTY_X: tuple[float, ...] = ()
EMPTY_Y = (7.5,)

#: The q-threshold pair: q = 1 / ceil(2^62 / 11), 9 records vs 10 (the old guard failed at n = 10).
THRESHOLD_Q = Fraction(1, -(-(2**62) // 11))
THRESHOLD_X = tuple(0.5 + (i % 8) for i in range(9))
THRESHOLD_Y = (*THRESHOLD_X, 0.5)


def _inverse_cells(values: Sequence[float], q: Fraction, epsilon: Fraction, size: int) -> NDArray[np.int64]:
    """``size`` draws of the cell an inverse-sensitivity order statistic releases (rank max(1, ceil(q n)))."""
    cells = inverse._to_sorted_cells(np.asarray(values, dtype=np.float64), BOUNDS[0], BOUNDS[1], CELLS)
    rank = max(1, math.ceil(q * cells.size))
    return inverse._draw_cells(cells, rank, epsilon, CELLS, size)


def _cross_group(epsilon_per_group: Fraction) -> Sampler:
    def sample(n: int) -> tuple[F64, F64]:
        def joint(groups: tuple[tuple[float, ...], ...]) -> F64:
            hits = [_inverse_cells(g, Fraction(1, 2), epsilon_per_group, n) == 0 for g in groups]
            return np.asarray(np.sum(hits, axis=0), dtype=np.float64)

        return joint(CROSS_X), joint(CROSS_Y)

    return sample


def _empty_view(*, refuse_empty: bool) -> Sampler:
    def sample(n: int) -> tuple[F64, F64]:
        def draw(values: tuple[float, ...]) -> F64:
            if refuse_empty and not values:
                return np.full(n, np.nan)
            return _inverse_cells(values, Fraction(1, 2), Fraction(1), n).astype(np.float64)

        return draw(EMPTY_X), draw(EMPTY_Y)

    return sample


def _old_guard_trips(n: int, q: Fraction) -> bool:
    """The int64 guard the exponential-mechanism quantile had before issue 13 (a test on the private n)."""
    return (n + 1) * q.denominator + q.numerator * n >= 2**62


def _q_threshold(*, old_guard: bool) -> Sampler:
    def sample(n: int) -> tuple[F64, F64]:
        def draw(values: tuple[float, ...]) -> F64:
            if old_guard and _old_guard_trips(len(values), THRESHOLD_Q):
                return np.full(n, np.nan)
            cells = to_cells(np.asarray(values, dtype=np.float64), BOUNDS[0], BOUNDS[1], CELLS)
            return draw_cells(cells, THRESHOLD_Q, Fraction(1), n).astype(np.float64)

        return draw(THRESHOLD_X), draw(THRESHOLD_Y)

    return sample


def release_scenarios() -> list[Scenario]:
    """The issue-13 pairs, each with its broken control (controls last)."""
    return [
        Scenario(
            "grouped inverse_sensitivity_median (replace)",
            1.0,
            0.0,
            "C=1, unit leaves B={0,1,7}, replacement enters A={1}; ε/2C per group",
            _cross_group(Fraction(1, 2)),
        ),
        Scenario(
            "inverse_sensitivity order statistic: empty view",
            1.0,
            0.0,
            "no record vs one record at 7.5 (8 cells)",
            _empty_view(refuse_empty=False),
        ),
        Scenario(
            "em_quantile: long-denominator q",
            1.0,
            0.0,
            "q = 1/ceil(2^62/11), 9 vs 10 records",
            _q_threshold(old_guard=False),
        ),
        Scenario(
            "control: grouped median at ε/C per group",
            1.0,
            0.0,
            "the cross-group pair at the pre-issue-13 calibration (joint loss 1.64 ε)",
            _cross_group(Fraction(1)),
            control=True,
        ),
        Scenario(
            "control: refusing an empty view",
            1.0,
            0.0,
            "the empty-view pair, refused when no record is present",
            _empty_view(refuse_empty=True),
            control=True,
        ),
        Scenario(
            "control: the old int64 guard on q",
            1.0,
            0.0,
            "the q pair with the pre-issue-13 guard (fails at n = 10 only)",
            _q_threshold(old_guard=True),
            control=True,
        ),
    ]
