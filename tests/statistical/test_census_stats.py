"""A census table's noise per level has its declared share of ε: passes at the true scale, fails at ±30 %.

``HierarchicalCount.run`` on fixed leaf counts (a stub of the release runner: the engine's part is the
grouped count, tested elsewhere), a one-leaf hierarchy so that every run gives one draw per level. The
released raw count of level l is count + noise at scale Δ/ε_l, with ε_l = ε·s_l: the geometric
mechanism's noise is discrete Laplace, the default Laplace's (on a fine grid, then rounded) is the
rounded continuous Laplace law. A level run at the whole ε, or at another level's share, is rejected.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpsense.engine import GroupRow
from dpsense.query import AggregateKind, Query, Schema, hierarchical_count, plan
from dpsense.query._hierarchy import declare_hierarchy
from dpsense.statistics import STATISTICS
from tests.statistical.gof import chi_square_pvalue, discrete_laplace_pmf
from tests.statistical.power import assert_calibrated

pytestmark = pytest.mark.statistical

#: At 6 000 draws the wrong scales (x0.7, x1.3) give p below 1e-40 on every level, the true one p >= 0.01:
#: 5 000 keeps a wide margin over the 1e-10 threshold at a quarter of the cost of the 20 000 used first.
RUNS = 5_000
TRUE = 10_000
SPLIT = (1, 2, 3)
C = 2  # Δ = C under add/remove: scales 12, 6 and 4 at ε = 1


class _Runner:
    """What ``run`` asks of the release runner: the prefetched leaf counts and the grouping."""

    def __init__(self, plan: Any, columns: tuple[str, ...]) -> None:
        self.plan, self.group_column = plan, columns

    def fetched(self, agg: Any, steps: Any) -> list[GroupRow]:
        return [GroupRow(key=("d1", "r1"), counts={f"{agg.name}|n": TRUE})]

    def step_rows(self, step: Any) -> int:
        return C


@functools.cache
def _draws(mechanism: str) -> tuple[np.ndarray, list[float]]:
    """RUNS releases' raw counts minus the truth (one column per level) and each level's true scale."""
    base = Schema({"u": "unit", "region": "categorical", "district": "categorical"})
    geo = declare_hierarchy("geo", {"levels": ["region", "district"], "keys": [("r1", "d1")]}, base)
    schema = Schema({c.name: c.kind for c in base.columns}, hierarchies={"geo": geo})
    ir = Query("e").agg(t=hierarchical_count("geo", split=SPLIT, mechanism=mechanism)).build(schema)
    the_plan = plan(ir, epsilon=1, adjacency="add_remove", max_rows_per_unit=C, rules=STATISTICS)
    (agg,), (step,) = ir.aggregates, the_plan.steps
    stat = STATISTICS[AggregateKind.HIERARCHICAL_COUNT]
    runner = _Runner(the_plan, ir.group_columns)
    raw = np.array([stat.run(runner, agg, [step])[0][1].values for _ in range(RUNS)], dtype=np.int64)  # type: ignore[arg-type]
    scales = [float(step.sensitivity / (step.loss.epsilon * Fraction(s, sum(SPLIT)))) for s in SPLIT]  # type: ignore[operator]
    return raw - TRUE, scales


def _rounded_laplace_pmf(scale: float) -> Any:
    return lambda y: stats.laplace.cdf(y + 0.5, scale=scale) - stats.laplace.cdf(y - 0.5, scale=scale)


@pytest.mark.parametrize("level", [0, 1, 2])
def test_each_level_of_a_geometric_census_table_has_its_share_of_epsilon(level: int) -> None:
    noise, scales = _draws("geometric")
    scale = scales[level]
    assert_calibrated(lambda f: chi_square_pvalue(noise[:, level], discrete_laplace_pmf(scale * f), -12 * 8, 12 * 8))


@pytest.mark.parametrize("level", [0, 1, 2])
def test_each_level_of_a_laplace_census_table_has_its_share_of_epsilon(level: int) -> None:
    noise, scales = _draws("laplace")
    scale = scales[level]
    assert_calibrated(lambda f: chi_square_pvalue(noise[:, level], _rounded_laplace_pmf(scale * f), -12 * 8, 12 * 8))
