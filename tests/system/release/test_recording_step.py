"""A steward's declared recording step: medians and quantiles choose among its points (docs/planner.md).

``register_dataset(..., steps={"alcohol": "0.01"})``: the profile keeps the step, the plan states the
candidates, every median or quantile released is a multiple of the step, a tie at a recorded value
is released at it, and the step enters the question (a release with and without it are two releases).
Bad steps are refused before anything is registered; an amendment adds or removes a step.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import UsageError
from dpsense.core.steps import DecimalStep
from dpsense.noise.testing import deterministic_entropy
from tests.system.release.support import REGIONS, register


@pytest.fixture
def steward(test_steward: dp.Session) -> dp.Session:
    return test_steward


def _wines(n: int = 400) -> pd.DataFrame:
    persons = np.arange(n)
    alcohol = np.round(11.0 + (persons * 7919 % 400) / 100.0, 2)  # hundredths in [11, 15)
    alcohol[n // 2 - 20 : n // 2 + 20] = 13.05  # a tie of 40 records holds the median
    income = (persons * 37 % 90 + 10) * 1000  # rounded to the thousand
    return pd.DataFrame(
        {
            "person_id": persons.astype(str),
            "region": np.array(REGIONS)[persons % 4],
            "alcohol": alcohol,
            "income": income.astype(np.int64),
        }
    )


def _register(session: dp.Session, name: str = "wines", **kw: object) -> dp.Dataset:
    args: dict[str, object] = {
        "bounds": {"alcohol": (0, 20), "income": (0, 10**6)},
        "kinds": {"income": "integer"},
        "max_rows_per_unit": 1,
        "budget": dp.Budget(epsilon=100, delta=1e-8),
    }
    args.update(kw)
    return register(session, _wines(), name, **args)


def test_a_declared_step_makes_every_quantile_a_point_of_it(steward: dp.Session) -> None:
    wines = _register(steward, steps={"alcohol": "0.01", "income": 1000})
    assert wines.profile.columns["alcohol"].step == DecimalStep(1, -2)
    assert wines.profile.columns["income"].step == DecimalStep(1, 3)
    query = (
        wines.query()
        .group_by("region")
        .agg(m=dp.median("alcohol"), i=dp.median("income"), q=dp.quantiles("alcohol", [0.25, 0.75]))
    )
    released = steward.release(query, epsilon=1)
    assert "points of the declared step 0.01" in released.explain()
    table = released.table
    for column, step in (("m", Fraction(1, 100)), ("i", Fraction(1000)), ("q_p25", Fraction(1, 100))):
        for value in table[column]:
            assert float(round(Fraction(float(value)) / step) * step) == value, (column, value)


def test_a_tie_at_a_recorded_value_is_released_at_it(steward: dp.Session) -> None:
    wines = _register(steward, steps={"alcohol": "0.01"})
    with deterministic_entropy(3):
        out = [
            steward.release(wines.query().filter("alcohol", ">=", -run).agg(m=dp.median("alcohol")), epsilon=1).values[
                "m"
            ][0]
            for run in range(12)
        ]
    assert sum(v == 13.05 for v in out) >= 10, out


def test_the_step_enters_the_question_only_where_it_is_declared(steward: dp.Session) -> None:
    wines = _register(steward)
    median, mean = wines.query().agg(m=dp.median("alcohol")), wines.query().agg(m=dp.mean("alcohol"))
    before = [steward.preview(q, epsilon=1).query_fingerprint for q in (median, mean)]
    wines = steward.amend_dataset("wines", steps={"alcohol": "0.01"}, source=_wines())
    after = [steward.preview(wines.query().agg(m=s), epsilon=1).query_fingerprint for s in (dp.median("alcohol"),)]
    after.append(steward.preview(wines.query().agg(m=dp.mean("alcohol")), epsilon=1).query_fingerprint)
    assert after[0] != before[0]  # the median now chooses among the step's points: another question
    assert after[1] == before[1]  # a mean does not read the step: its canonical form is unchanged


def test_a_query_bound_without_a_point_falls_back_to_the_default_candidates(steward: dp.Session) -> None:
    wines = _register(steward, steps={"alcohol": "10"})
    query = wines.query().agg(m=dp.median("alcohol", bounds=(11, 19)))  # no multiple of 10 in [11, 19]
    released = steward.release(query, epsilon=1)
    assert "declared step" not in released.explain()
    assert 11 <= released.values["m"][0] <= 19


@pytest.mark.parametrize(
    ("steps", "kinds", "match"),
    [
        ({"alcohol": "1/3"}, {}, "positive decimal"),
        ({"alcohol": -1}, {}, "positive decimal"),
        ({"alcohol": True}, {}, "positive decimal"),
        ({"region": "1"}, {}, "numeric or integer column"),
        ({"income": "0.5"}, {"income": "integer"}, "whole number"),
        ({"nope": "1"}, {}, "steps name a column"),
    ],
)
def test_bad_steps_are_refused_before_anything_is_registered(
    steward: dp.Session, steps: dict[str, object], kinds: dict[str, str], match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        _register(steward, steps=steps, kinds=kinds)
    assert "wines" not in steward.datasets()


def test_an_amendment_adds_and_removes_a_step(steward: dp.Session) -> None:
    _register(steward)
    amended = steward.amend_dataset("wines", steps={"alcohol": "0.01"}, source=_wines())
    assert amended.profile.columns["alcohol"].step == DecimalStep(1, -2)
    assert any("step of column 'alcohol'" in change for change in amended.amended), amended.amended
    removed = steward.amend_dataset("wines", steps={"alcohol": None}, source=_wines())
    assert removed.profile.columns["alcohol"].step is None
