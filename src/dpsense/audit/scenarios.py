"""Audit scenarios: each installed mechanism run many times on adversarial neighbouring inputs.

A scenario states the mechanism's claim (epsilon, delta), the neighbouring pair it uses and why that
pair is hard, and draws ``n`` outputs on each side. ``run_audit`` turns them into the empirical lower
bound of ``dpsense.audit.empirical``. Scenarios marked ``control`` are deliberately broken mechanisms:
the audit must flag them (lower bound above the claim); they show the audit has power.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpsense.accounting.zcdp import zcdp_to_approx_tight
from dpsense.audit._types import F64, AuditRow, Sampler, Scenario, run_audit
from dpsense.core.adjacency import Adjacency
from dpsense.mechanisms import _quantile_candidates, _rank_sampler
from dpsense.mechanisms.approx_bounds import approx_bounds
from dpsense.mechanisms.discrete import discrete_gaussian, geometric
from dpsense.mechanisms.gaussian import gaussian
from dpsense.mechanisms.laplace import laplace
from dpsense.mechanisms.local import randomized_response
from dpsense.mechanisms.quantile import (
    cells_sharper,
    em_quantile,
    em_quantile_groups,
    points_shift,
    utility_sensitivity,
)


def _pair(fn: Callable[[Any], Any], x: float, y: float) -> Sampler:
    def sample(n: int) -> tuple[F64, F64]:
        return np.asarray(fn(np.full(n, x)), dtype=np.float64), np.asarray(fn(np.full(n, y)), dtype=np.float64)

    return sample


def _em_quantile(n: int) -> tuple[F64, F64]:
    # The worst replace pair on 8 cells found by exhaustive search (true loss 0.868 ε).
    x, y = [6.5, 6.5, 6.5, 6.5, 7.5], [0.5, 6.5, 6.5, 6.5, 6.5]

    def draw(data: list[float]) -> F64:
        return np.asarray([em_quantile(data, q=0.25, bounds=(0, 8), epsilon=1, resolution=8).value for _ in range(n)])

    return draw(x), draw(y)


def _em_median_add_remove(n: int, *, claimed: float = 1.0) -> tuple[F64, F64]:
    # The worst add/remove pair on 8 cells at Δu = max(q, 1 - q) = 1/2 whose worst cell has probability
    # >= 0.03 on both sides (exhaustive search over n <= 6: true loss 0.840 ε; 1.69 ε at twice the rate).
    x, y = [0.5], [0.5, 6.5]

    def draw(data: list[float]) -> F64:
        out = [
            em_quantile(data, q=0.5, bounds=(0, 8), epsilon=claimed, resolution=8, adjacency=Adjacency.ADD_REMOVE)
            for _ in range(n)
        ]
        return np.asarray([r.value for r in out])

    return draw(x), draw(y)


#: A replace pair for the EM median with decimal points on [0, 8] (8 cells): among the pairs of <= 4 records
#: on a grid of 8 values, the one whose loss on events of probability >= 0.03 grows most when the cells run
#: twice as fast as §8.7 allows (exact laws at quantile @7: 0.79 ε as released, 1.38 ε for the control; at
#: @8, the grids at half the cells' measure (§8.8): 0.79 ε and 1.42 ε).
_POINTS_PAIR = ([2.0, 6.5, 7.0, 7.0], [0.5, 2.0, 6.5, 7.0])


def _em_points_replace(n: int) -> tuple[F64, F64]:
    """``em_quantile_groups`` (one group per output) with decimal points under replace: the cells at 17/16."""

    def draw(data: list[float]) -> F64:
        out = em_quantile_groups(
            [data] * n, q=0.5, bounds=(0, 8), epsilon=1, resolution=8, adjacency=Adjacency.REPLACE, decimal_points=True
        )
        return np.asarray([r.value for r in out])

    return draw(_POINTS_PAIR[0]), draw(_POINTS_PAIR[1])


def _em_points_fast_cells(n: int) -> tuple[F64, F64]:
    """The control: the same mechanism's sampler with the cells at twice their rate (claims ε = 1)."""
    half = Fraction(1, 2)
    rate = 1 / utility_sensitivity(half, Adjacency.REPLACE, fitted=True)
    broken = 2 * cells_sharper(half, Adjacency.REPLACE)
    shift = points_shift(Fraction(1), half, Adjacency.REPLACE)  # the released mechanism's grids (§8.8)

    def draw(data: list[float]) -> F64:
        sorted_data = np.sort(np.asarray(data))
        candidates, release = _quantile_candidates.prepared(sorted_data, (0.0, 8.0), 8, False, True, None, shift)
        parts, positions = _rank_sampler.draw(candidates, half, rate, n, broken)
        return np.asarray(release(parts, positions), dtype=np.float64)

    return draw(_POINTS_PAIR[0]), draw(_POINTS_PAIR[1])


def _approx_bounds(n: int) -> tuple[F64, F64]:
    # One unit's row alone in the outermost bin (count 0 vs 1): the upper edge moves out with odds e^ε.
    # A low success probability (0.01) keeps the threshold low, so that bin passes often enough to measure.
    bulk = np.full(40, 3.0)
    far = np.append(bulk, 2.0**20)

    def draw(data: F64) -> F64:
        out = [
            approx_bounds(data, epsilon=1, smallest_exponent=0, largest_exponent=21, success_probability=0.01).high
            for _ in range(n)
        ]
        return np.asarray([-1.0 if h is None else h for h in out])

    return draw(bulk), draw(far)


def _rho_epsilon(rho: float, delta: float) -> float:
    return float(zcdp_to_approx_tight(rho, delta).epsilon)


def classical_scenarios() -> list[Scenario]:
    """The classical mechanisms on their worst-case neighbouring inputs."""
    return [
        Scenario(
            "laplace",
            1.0,
            0.0,
            "value 0 vs 1, Δ=1",
            _pair(lambda v: laplace(v, sensitivity=1, epsilon=1).value, 0.0, 1.0),
        ),
        Scenario(
            "gaussian",
            1.0,
            1e-5,
            "value 0 vs 1, Δ=1",
            _pair(lambda v: gaussian(v, sensitivity=1, epsilon=1, delta=1e-5).value, 0.0, 1.0),
        ),
        Scenario(
            "geometric",
            1.0,
            0.0,
            "count 0 vs 1, Δ=1",
            _pair(lambda v: geometric(v, sensitivity=1, epsilon=1).value, 0, 1),
        ),
        Scenario(
            "discrete_gaussian (ρ=0.5, tight (ε, 1e-5))",
            _rho_epsilon(0.5, 1e-5),
            1e-5,
            "count 0 vs 1, Δ=1",
            _pair(lambda v: discrete_gaussian(v, sensitivity=1, rho=0.5).value, 0, 1),
        ),
        Scenario(
            "randomized_response",
            1.0,
            0.0,
            "one user's bit 0 vs 1",
            _pair(lambda v: randomized_response(v, epsilon=1).value, 0, 1),
        ),
        Scenario(
            "approx_bounds",
            1.0,
            0.0,
            "40 values at 3 vs the same + one row at 2^20 (a far bin 0 vs 1)",
            _approx_bounds,
            slow=True,  # one call of the public function per output
        ),
        Scenario("em_quantile", 1.0, 0.0, "q=1/4, (6.5 x4, 7.5) vs (0.5, 6.5 x4) on [0,8]", _em_quantile, slow=True),
        Scenario(
            "em_quantile add/remove",
            1.0,
            0.0,
            "median, Δu = 1/2: (0.5) vs (0.5, 6.5) on [0,8]",
            _em_median_add_remove,
            slow=True,
        ),
        Scenario(
            "control: EM median at twice its ε",
            1.0,
            0.0,
            "the add/remove pair above, run at ε = 2 (claims 1)",
            functools.partial(_em_median_add_remove, claimed=2.0),
            control=True,
            slow=True,
        ),
        Scenario(
            "em_quantile decimal points, replace",
            1.0,
            0.0,
            "median, cells and points each at its own Δu: (2, 6.5, 7, 7) vs (0.5, 2, 6.5, 7) on [0,8]",
            _em_points_replace,
            slow=True,  # one group per output
        ),
        Scenario(
            "control: EM decimal points with the cells twice as fast",
            1.0,
            0.0,
            "the replace pair above, the cells' weights falling at twice §8.7's rate (claims 1)",
            _em_points_fast_cells,
            control=True,
        ),
        Scenario(
            "control: Laplace at half the scale",
            1.0,
            0.0,
            "value 0 vs 1, Δ=1 (claims ε=1, is ε=2)",
            _pair(lambda v: laplace(v, sensitivity=1, epsilon=2).value, 0.0, 1.0),
            control=True,
        ),
    ]


__all__ = ["AuditRow", "Sampler", "Scenario", "classical_scenarios", "run_audit"]
