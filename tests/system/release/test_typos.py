"""Typos refused for free (issue 17 item 5): keys, empty-by-declaration filters and wide bounds, before any charge.

The builder checks them against the declarations (``query._typos``), so the Session, SQL, YAML and HTTP
refuse them alike, name the rule, suggest the closest key, and charge nothing.
"""

from __future__ import annotations

import pytest

import dpsense as dp
from tests.system.release.support import planted, register


@pytest.fixture
def events(test_steward: dp.Session) -> dp.Dataset:
    return register(test_steward, planted())


CASES = {
    "a filter key typo": (lambda d: d.query().filter("region", "==", "norht"), "did you mean 'north'?"),
    "a != key typo": (lambda d: d.query().filter("region", "!=", "Sout"), "did you mean 'south'?"),
    "a typo inside an in list": (lambda d: d.query().filter("region", "in", ["north", "wset"]), "'west'"),
    "a group key typo": (lambda d: d.query().group_by("region", keys=["north", "sout"]), "did you mean 'south'?"),
    "age above its bounds": (lambda d: d.query().filter("age", ">=", 200), "empty by declaration"),
    "age below its bounds": (lambda d: d.query().filter("age", "<", 0), "empty by declaration"),
    "an equality outside the bounds": (lambda d: d.query().filter("age", "==", 130), "empty by declaration"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_typo_is_refused_with_the_fix_and_nothing_is_charged(
    test_steward: dp.Session, events: dp.Dataset, case: str
) -> None:
    build, message = CASES[case]
    with pytest.raises(dp.UsageError, match=message.replace("?", r"\?")):
        test_steward.release(build(events).agg(n=dp.count()), epsilon=1)
    with pytest.raises(dp.UsageError, match=message.replace("?", r"\?")):
        test_steward.preview(build(events).agg(n=dp.count()), epsilon=1)
    assert test_steward.ledger.charges("events") == []


def test_bounds_wider_than_the_declared_ones_are_refused(test_steward: dp.Session, events: dp.Dataset) -> None:
    with pytest.raises(dp.InvalidBounds, match=r"reach beyond the declared bounds \[0, 24\]"):
        test_steward.release(events.query().agg(s=dp.sum("hours", bounds=(0, 1e200))), epsilon=1)
    narrower = test_steward.release(events.query().agg(s=dp.sum("hours", bounds=(0, 12))), epsilon=1)
    assert narrower.charged == dp.PureDP(1)  # bounds inside the declared ones are a legitimate choice
    assert len(test_steward.ledger.charges("events")) == 1


def test_sql_typos_are_refused_alike(test_steward: dp.Session, events: dp.Dataset) -> None:
    with pytest.raises(dp.UsageError, match=r"did you mean 'north'\?"):
        test_steward.sql("SELECT COUNT(*) FROM events WHERE region = 'norht'", epsilon=1)
    with pytest.raises(dp.UsageError, match="empty by declaration"):
        test_steward.sql("SELECT COUNT(*) FROM events WHERE age >= 200", epsilon=1)
    assert test_steward.ledger.charges("events") == []


def test_filters_every_value_satisfies_and_keys_that_exist_still_run(
    test_steward: dp.Session, events: dp.Dataset
) -> None:
    release = test_steward.release(
        events.query().filter("age", ">=", -1).filter("region", "in", ["north", "south"]).agg(n=dp.count()),
        epsilon=1,
    )
    assert release.charged == dp.PureDP(1)
