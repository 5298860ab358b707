"""Output names never change the question: one question is one release across builder, SQL, YAML and HTTP.

Issue 17 item 7: ``agg(n=dp.count())``, ``agg(count_over_50=dp.count())`` and the equivalent SQL got
three charges. Names are labels on the released table (post-processing); the Session plans, caches and
stores the question named by meaning (``dpsense.query._meaning``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import dpsense as dp
from dpsense.interface.spec import ReleaseSpec
from dpsense.query import by_meaning
from tests.system.release.support import planted as frame
from tests.system.release.support import register


@pytest.fixture
def events(test_steward: dp.Session) -> dp.Dataset:
    return register(test_steward, frame(), budget=dp.Budget(epsilon=10, delta=1e-8))


def _charges(session: dp.Session) -> int:
    return len(session.ledger.charges("events"))


def test_renaming_a_statistic_returns_the_stored_release(test_steward: dp.Session, events: dp.Dataset) -> None:
    first = test_steward.release(events.query().agg(n=dp.count()), epsilon=1)
    renamed = test_steward.release(events.query().agg(count_over_50=dp.count()), epsilon=1)
    assert not first.cached and renamed.cached and renamed.charged is None
    assert renamed.values["count_over_50"] == first.values["n"]
    assert list(renamed.values) == ["count_over_50", "count_over_50_error95"]
    assert "'count_over_50' = count()" in renamed.explain()
    sql = test_steward.sql("SELECT COUNT(*) AS c FROM events", epsilon=1)
    assert sql.cached and sql.table["c"].tolist() == first.values["n"]
    spec = ReleaseSpec.model_validate({"dataset": "events", "epsilon": 1, "aggregates": {"k": {"kind": "count"}}})
    from_spec = test_steward.release(spec.query(), epsilon=1)
    assert from_spec.cached and from_spec.values["k"] == first.values["n"]
    assert _charges(test_steward) == 1


def test_the_same_statistic_twice_in_one_query_is_released_once(test_steward: dp.Session, events: dp.Dataset) -> None:
    query = events.query().group_by("region").max_groups_per_unit(1).agg(a=dp.mean("hours"), b=dp.mean("hours"))
    plan = test_steward.preview(query, epsilon=1)
    assert [s.output for s in plan.steps] == ["mean(hours)", "mean(hours)"]  # the centred sum and the count, once
    release = test_steward.release(query, epsilon=1)
    assert release.values["a"] == release.values["b"] and release.charged == dp.PureDP(1)


def test_columns_come_in_the_order_asked(test_steward: dp.Session, events: dp.Dataset) -> None:
    release = test_steward.release(events.query().agg(zeta=dp.count(), alpha=dp.mean("hours")), epsilon=1)
    assert list(release.values) == ["zeta", "zeta_error95", "alpha", "alpha_error95"]
    assert list(release.table.columns) == ["zeta", "zeta_error95", "alpha", "alpha_error95", "alpha_noise_dominated"]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (dp.mean("hours"), dp.mean("hours", bounds=(0, 24)), True),  # the declared bounds, spelled out
        (dp.mean("hours"), dp.mean("hours", bounds=(0, 12)), False),
        (dp.mean("hours"), dp.mean("hours", mechanism="laplace"), False),  # a named mechanism is part of the question
        (dp.quantile("age", 0.9), dp.quantile("age", "0.9"), True),
        (dp.quantile("age", 0.9), dp.quantile("age", 0.5), False),
        (dp.count(), dp.count(max_rows_per_unit=2), False),
    ],
)
def test_only_what_changes_the_release_changes_the_question(
    events: dp.Dataset, first: dp.Aggregate, second: dp.Aggregate, same: bool
) -> None:
    a, _ = by_meaning(events.query().agg(x=first).build(events.schema), events.schema)
    b, _ = by_meaning(events.query().agg(y=second).build(events.schema), events.schema)
    assert (a.fingerprint() == b.fingerprint()) is same, (a.aggregates[0].name, b.aggregates[0].name)


def test_labels_read_as_the_statistic(events: dp.Dataset) -> None:
    query = events.query().agg(
        n=dp.count(),
        m=dp.mean("hours", bounds=(0, 12), mechanism="gaussian"),
        p=dp.quantile("age", 0.9),
        q=dp.quantiles("age", [0.25, 0.75]),
        t=dp.trimmed_mean("hours", 0.1),
    )
    _, labels = by_meaning(query.build(events.schema), events.schema)
    assert labels == {
        "n": "count()",
        "m": "mean(hours, bounds=[0, 12], mechanism=gaussian)",
        "p": "quantile(age, q=0.9)",
        "q": "quantiles(age, qs=[0.25, 0.75])",
        "t": "trimmed_mean(hours, trim_fraction=0.1)",
    }


def test_a_group_column_named_like_a_label_keeps_the_table_well_formed(
    test_steward: dp.Session, tmp_path: Path
) -> None:
    data = frame().rename(columns={"region": "count()"})
    ds = register(test_steward, data, name="odd", keys={"count()": ["north", "south", "east", "west"]})
    release = test_steward.release(ds.query().group_by("count()").max_groups_per_unit(1).agg(n=dp.count()), epsilon=1)
    assert list(release.values)[:2] == ["count()", "n"]
    assert isinstance(release.table, pd.DataFrame)
