"""dp.max / dp.min: the extreme order statistics through the quantile machinery (issue 15's added statistic).

``dp.max(c)`` is ``dp.quantile(c, 1)`` and ``dp.min(c)`` is ``dp.quantile(c, 0)``: the same canonical
question as SQL's MAX / MIN , planned and released by the quantile's
mechanisms under both adjacencies, grouped or not. The exact output laws of the two order-statistic
mechanisms at q = 0 and 1 are ε-DP on every neighbouring pair of small datasets (checked exhaustively
with the neighbour harness's own implementation of the laws).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from tests.privacy import harness as h
from tests.system.release.support import REGIONS, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def test_max_and_min_are_the_extreme_quantiles_and_sql_max_min() -> None:
    assert dp.max("age") == dp.quantile("age", 1) and dp.min("age") == dp.quantile("age", 0)
    assert dp.max("age", mechanism="smooth_quantile", max_rows_per_unit=2) == dp.quantile(
        "age", 1, mechanism="smooth_quantile", max_rows_per_unit=2
    )


@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@pytest.mark.parametrize("grouped", [False, True])
def test_a_release_of_max_and_min_stays_in_the_bounds_like_sql_max_min(
    steward: dp.Session, adjacency: str, grouped: bool
) -> None:
    persons = np.arange(2000)
    frame = pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "hours": 1.0, "age": persons % 90}
    )
    events = register(steward, frame, max_rows_per_unit=1, adjacency=adjacency)
    query = events.query()
    if grouped:
        query = query.group_by("region").max_groups_per_unit(1)
    release = steward.release(query.agg(top=dp.max("age"), bottom=dp.min("age")), epsilon=2)
    assert release.charged == dp.PureDP(2)
    for value in [*release.values["top"], *release.values["bottom"]]:
        assert 0 <= value <= 120
    plan = steward.preview(query.agg(top=dp.max("age")), epsilon=1)
    assert plan.canonical() == steward.preview(query.agg(top=dp.quantile("age", 1)), epsilon=1).canonical()
    assert {s.mechanism.family.value for s in plan.steps} <= {"exponential", "inverse_sensitivity"}
    if not grouped:  # SQL's MAX / MIN are the same statistics (its outputs are named after the quantile)
        sql = steward.sql("SELECT MAX(age) AS top, MIN(age) AS bottom FROM events", epsilon=2)
        assert [o.expr for o in sql.outputs] == [("agg", "quantile(age,1/1)"), ("agg", "quantile(age,0/1)")]


@pytest.mark.parametrize("q", [Fraction(0), Fraction(1)])
def test_the_order_statistic_laws_at_the_extremes_are_epsilon_dp_on_every_small_neighbour(q: Fraction) -> None:
    epsilon, low, high = Fraction(1, 2), 0.0, 4.0
    grid = [0.5, 1.5, 2.5, 3.5]
    worst = 0.0
    for n in range(0, 4):
        for values in itertools.combinations_with_replacement(grid, n):
            x = np.array(values, dtype=np.float64)
            for extra in grid:  # add/remove one record
                y = np.append(x, extra)
                for law in (
                    lambda v: h.em_law(v, q=q, epsilon=epsilon, low=low, high=high),
                    lambda v: h.inverse_sensitivity_law(
                        v, rank=max(1, int(np.ceil(q * v.size))), epsilon=epsilon, low=low, high=high
                    ),
                ):
                    if y.size == 0:
                        continue
                    lo, hi = h.log_ratio_range(law(x) if x.size else h.uniform_law(), law(y))
                    worst = max(worst, abs(lo), abs(hi))
    assert worst <= float(epsilon) + 1e-9
    assert worst > float(epsilon) / 4  # the pairs are not all trivial
