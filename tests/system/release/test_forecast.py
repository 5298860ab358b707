"""Accuracy before spending (``Session.forecast``, ``Session.epsilon_for``): issue 17, item 4.

The forecast must be the bound the release then states (the same functions, before the data), the
inverse must be the least ε that meets a target (to its rounding), the policy's goal must be checked,
and none of it may read data or charge.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import UsageError
from dpsense.release._forecast import ExpectedError, goal_check
from tests.system.release.support import planted, policy, register


@pytest.fixture
def session(tmp_path: Path) -> dp.Session:
    steward = dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward")
    register(steward, planted(), policy=policy(minimum_useful_accuracy="counts within ±100 per region"))
    return steward


def test_the_forecast_is_the_bound_the_release_then_states(session: dp.Session) -> None:
    events = session.dataset("events")
    query = (
        events.query()
        .group_by("region")
        .max_groups_per_unit(1)
        .agg(n=dp.count(), h=dp.sum("hours"), people=dp.count_units())
    )
    spent = session.budget("events").spent
    expected = {e.name: e for e in session.forecast(query, epsilon=0.3).expected}
    assert session.budget("events").spent == spent  # a forecast charges nothing
    table = session.release(query, epsilon=0.3).table
    for name in ("n", "h", "people"):
        assert expected[name].bound is not None and expected[name].confidence == 0.95
        assert set(table[f"{name}_error95"]) == {expected[name].bound}
    ungrouped = session.dataset("events").query().agg(total=dp.sum("age"))
    bound = session.forecast(ungrouped, epsilon=0.7).expected[0].bound
    assert session.release(ungrouped, epsilon=0.7).table["total_error95"][0] == bound


def test_a_private_n_mean_is_forecast_as_a_formula_in_the_group_size(session: dp.Session) -> None:
    query = session.dataset("events").query().group_by("region").agg(m=dp.mean("hours"), med=dp.median("age"))
    mean, median = session.forecast(query, epsilon=0.5).expected
    assert mean.bound is None and "/ n" in mean.how and mean.noise_dominated_below is not None
    assert "noise-dominated" in mean.how and f"n = {mean.noise_dominated_below:,}" in mean.how
    assert median.bound is None and "its error is in ranks" in median.how
    released = session.release(query, epsilon=0.5)  # the release states the same rank accuracy
    assert released.record.value["notes"]["median(age)"]["accuracy"] == median.how
    smooth = session.dataset("events").query().agg(s=dp.median("age", mechanism="smooth_median"))
    assert "calibrates to the data" in session.forecast(smooth, epsilon=0.5).expected[0].how
    with pytest.raises(UsageError, match="no number before the data"):
        session.epsilon_for(query, error={"m": 1.0})


def test_epsilon_for_is_the_least_epsilon_meeting_the_target_to_three_digits(session: dp.Session) -> None:
    query = session.dataset("events").query().agg(n=dp.count())
    epsilon = session.epsilon_for(query, error=40)
    bound = session.forecast(query, epsilon=epsilon).expected[0].bound
    assert bound is not None and bound <= 40
    step = Fraction(1, 100) if epsilon >= 1 else Fraction(1, 1000)
    smaller = session.forecast(query, epsilon=epsilon - step).expected[0].bound
    assert smaller is not None and smaller > 40
    both = session.dataset("events").query().agg(n=dp.count(), h=dp.sum("hours"))
    assert session.epsilon_for(both, error={"n": 40}) > epsilon  # the ε is shared by two statistics


def test_epsilon_for_refuses_unknown_names_bad_targets_and_unreachable_errors(session: dp.Session) -> None:
    query = session.dataset("events").query().agg(n=dp.count())
    with pytest.raises(UsageError, match="no statistic of that name"):
        session.epsilon_for(query, error={"count": 40})
    with pytest.raises(UsageError, match="a target error is a positive number"):
        session.epsilon_for(query, error={"n": -1})
    with pytest.raises(UsageError, match="no ε up to the per-release cap"):
        session.epsilon_for(query, error={"n": 0.01})  # the cap is ε = 2


def test_the_policy_goal_is_checked_against_the_forecast(session: dp.Session) -> None:
    query = session.dataset("events").query().group_by("region").agg(n=dp.count())
    low = session.forecast(query, epsilon=0.1)
    assert len(low.goal_misses) == 1 and "counts within ±100 per region" in low.goal_misses[0]
    assert "Warning: the policy's accuracy goal" in low.text()
    assert session.forecast(query, epsilon=2).goal_misses == ()


def test_goal_texts_that_can_and_cannot_be_checked() -> None:
    count = ExpectedError("n", "count", 120.0, 0.95, "")
    mean = ExpectedError("m", "mean", None, 0.95, "")
    total = ExpectedError("s", "sum", 2_000.0, 0.95, "")
    assert goal_check("counts within ±100", [count, mean], Fraction(1)) != []
    assert goal_check("Counts within ± 150 per region", [count], Fraction(1)) == []
    assert goal_check("sums within ±1,500", [total], Fraction(1)) != []
    assert goal_check("useful for planning", [count], Fraction(1)) == []
    assert goal_check(None, [count], Fraction(1)) == []


def test_groups_selected_privately_have_no_number_before_the_data(session: dp.Session) -> None:
    """The kept groups' number sets the noise's calibration (a review's finding): no number is promised."""
    query = session.dataset("events").query().group_by("age").max_groups_per_unit(1).agg(n=dp.count())
    (expected,) = session.forecast(query, epsilon=1, delta=1e-9).expected
    assert expected.bound is None and "selected privately" in expected.how
    with pytest.raises(UsageError, match="no number before the data"):
        session.epsilon_for(query, error={"n": 100}, delta=1e-9)


def test_epsilon_for_says_why_when_the_request_is_refused_whatever_the_epsilon(session: dp.Session) -> None:
    query = session.dataset("events").query().agg(n=dp.count())
    with pytest.raises(UsageError, match="no step of this plan uses it"):  # δ given to a pure-ε plan
        session.epsilon_for(query, error={"n": 40}, delta=1e-7)
