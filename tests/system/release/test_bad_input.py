"""Bad input is refused before any data access with a clear error, and leaves the ledger unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import dpsense as dp
from dpsense.core.errors import (
    ChargedFailure,
    InvalidBounds,
    InvalidData,
    InvalidPrivacyParameter,
    UsageError,
)
from dpsense.ledger import ChargeState
from tests.system.release.support import planted, policy, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as session:
        yield session


def ledger_state(session: dp.Session) -> tuple[object, ...]:
    charges = session.ledger.charges("events")
    return (len(charges), session.budget("events").spent, session.ledger.verify().entries)


BAD_QUERIES: dict[str, tuple[Callable[[dp.Dataset], dp.Query], dict[str, object], type[Exception], str]] = {
    "unknown column": (lambda d: d.query().agg(m=dp.mean("weight")), {}, UsageError, "use one of"),
    "epsilon zero": (lambda d: d.query().agg(n=dp.count()), {"epsilon": 0}, InvalidPrivacyParameter, "epsilon"),
    "epsilon negative": (lambda d: d.query().agg(n=dp.count()), {"epsilon": -1}, InvalidPrivacyParameter, "epsilon"),
    "delta one": (
        lambda d: d.query().agg(n=dp.count(mechanism="gaussian")),
        {"delta": 1},
        InvalidPrivacyParameter,
        "delta",
    ),
    "reversed bounds": (lambda d: d.query().agg(m=dp.mean("hours", bounds=(24, 0))), {}, InvalidBounds, "swap"),
    "over the per-release cap": (lambda d: d.query().agg(n=dp.count()), {"epsilon": 3}, InvalidPrivacyParameter, "cap"),
    "unused delta": (lambda d: d.query().agg(n=dp.count()), {"delta": 1e-9}, UsageError, "no step"),
    "unknown mechanism": (lambda d: d.query().agg(n=dp.count(mechanism="lapalce")), {}, UsageError, "one of"),
    "trim fraction of one half": (lambda d: d.query().agg(t=dp.trimmed_mean("hours", 0.5)), {}, UsageError, "0.5"),
    "histogram with other statistics": (
        lambda d: d.query().agg(h=dp.histogram("region", keys=["north"]), n=dp.count()),
        {},
        UsageError,
        "release it alone",
    ),
    "PTR without delta": (
        lambda d: d.query().agg(m=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1)),
        {},
        UsageError,
        "delta > 0",
    ),
    "public n": (lambda d: d.query().agg(n=dp.count()), {"public_n": 100}, UsageError, "public_n"),
    "a key set of the wrong shape": (
        lambda d: d.query().group_by("region", "age", keys=[("north",)]).agg(n=dp.count()),
        {},
        UsageError,
        "in the order ['region', 'age']",
    ),
    "too many combinations": (
        lambda d: d.query().group_by("age", keys=range(300_000)).group_by("region").agg(n=dp.count()),
        {},
        UsageError,
        "group by fewer columns",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_QUERIES))
def test_bad_queries_are_refused_before_any_charge(steward: dp.Session, case: str) -> None:
    events = register(steward, planted())
    build, kwargs, error, fix = BAD_QUERIES[case]
    before = ledger_state(steward)
    with pytest.raises(error) as info:
        query = build(events)
        steward.release(query, **({"epsilon": 1} | kwargs))  # type: ignore[arg-type]
    assert fix in str(info.value)
    assert ledger_state(steward) == before


BAD_REGISTRATIONS: dict[str, tuple[dict[str, object], type[Exception], str]] = {
    "missing privacy unit": ({"privacy_unit": "patient"}, UsageError, "privacy_unit="),
    "reversed bounds": ({"bounds": {"hours": (24, 0)}}, InvalidBounds, "swap"),
    "bounds on an unknown column": ({"bounds": {"weight": (0, 1)}}, UsageError, "use one of"),
    "delta near 1/population": (
        {"budget": dp.Budget(epsilon=4, delta=1e-6), "policy": policy(population=1_000_000)},
        InvalidPrivacyParameter,
        "delta <=",
    ),
    "cap above the budget": ({"policy": policy(per_release_epsilon=20)}, InvalidPrivacyParameter, "at most"),
    "epsilon zero budget": ({"budget": dp.Budget(epsilon=0)}, InvalidPrivacyParameter, "epsilon"),
    "unknown policy": ({"policies": {"hours": "ignore"}}, UsageError, "refuse, drop, clamp"),
    "clamp without bounds": ({"policies": {"hours": "clamp"}, "bounds": {}}, UsageError, "declare bounds"),
    "incomplete policy": ({"policy": policy(approved_by="")}, UsageError, "approved_by"),
    "bad review date": ({"policy": policy(next_review="soon")}, UsageError, "ISO date"),
}


@pytest.mark.parametrize("case", sorted(BAD_REGISTRATIONS))
def test_bad_registrations_are_refused_and_register_nothing(steward: dp.Session, case: str) -> None:
    changes, error, fix = BAD_REGISTRATIONS[case]
    with pytest.raises(error) as info:
        register(steward, planted(), **changes)
    assert fix in str(info.value)
    assert steward.datasets() == []
    register(steward, planted())  # the name is still free afterwards


def test_only_a_steward_registers(tmp_path: Path) -> None:
    with (
        dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="alice") as alice,
        pytest.raises(UsageError, match="only a steward"),
    ):
        register(alice, planted())


def test_nan_under_refuse_names_the_column_and_the_fix(steward: dp.Session) -> None:
    frame = planted()
    frame.loc[5, "hours"] = np.nan
    with pytest.raises(InvalidData) as info:
        register(steward, frame)
    assert info.value.value == "hours" and "'drop' or 'clamp'" in str(info.value)
    assert steward.datasets() == []


def test_a_text_marker_in_a_numeric_csv_column_is_named_as_the_cause(steward: dp.Session, tmp_path: Path) -> None:
    """Issue 17, item 8: an 'n/a' in a numeric CSV column used to say "drop these bounds"."""
    frame = planted().astype({"age": object})
    frame.loc[7, "age"] = "n/a"
    source = tmp_path / "events.csv"
    frame.to_csv(source, index=False)
    with pytest.raises(InvalidData, match="holds as text") as info:
        register(steward, planted(), source=source)
    assert info.value.value == "age" and "'n/a'" in str(info.value) and "empty cells" in info.value.fix
    assert steward.datasets() == []


def test_infinity_and_rows_without_unit_under_refuse(steward: dp.Session) -> None:
    frame = planted()
    frame.loc[3, "hours"] = np.inf
    with pytest.raises(InvalidData, match="hours"):
        register(steward, frame)
    frame = planted()
    frame.loc[3, "person_id"] = None
    with pytest.raises(InvalidData) as info:
        register(steward, frame)
    assert info.value.value == "person_id" and "'drop'" in str(info.value)


def test_drop_and_clamp_policies_clean_the_snapshot(steward: dp.Session) -> None:
    frame = planted(persons=400, rows_per_person=1)
    frame.loc[0:99, "hours"] = np.inf  # 100 rows: clamped to 24 under 'clamp'
    frame.loc[100:199, "person_id"] = None  # 100 rows without a unit: dropped
    events = register(steward, frame, policies={"hours": "clamp", "person_id": "drop"}, budget=dp.Budget(epsilon=100))
    release = steward.release(events.query().agg(n=dp.count(), total=dp.sum("hours")), epsilon=2)
    n, total = release.table["n"].iloc[0], release.table["total"].iloc[0]
    assert abs(n - 300) < 40
    true_total = 100 * 24 + frame.loc[200:, "hours"].sum()
    assert abs(total - true_total) < 24 * 5 * 40  # sensitivity C·24 = 120 at ε = 1: |noise| < 40 scales


def test_a_failure_after_data_access_is_charged_and_says_nothing(steward: dp.Session) -> None:
    events = register(steward, planted())
    engine = steward._engine

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("true sum was 4242.4242")

    original = engine.group_aggregates
    engine.group_aggregates = broken  # type: ignore[method-assign]
    try:
        with pytest.raises(ChargedFailure) as info:
            steward.release(events.query().agg(n=dp.count()), epsilon=1, request_id="r-fail")
    finally:
        engine.group_aggregates = original  # type: ignore[method-assign]
    assert "4242" not in str(info.value) and info.value.__cause__ is None
    [charge] = steward.ledger.charges("events")
    assert charge.state is ChargeState.FAILED
    assert steward.budget("events").spent == dp.ApproxDP(1, 0)
    assert engine.temporary_names() == []


def test_releases_refuse_the_test_noise_source_unless_the_session_allows_it(tmp_path: Path) -> None:
    from dpsense.noise.testing import deterministic_entropy

    values = []
    for i in range(2):
        url = f"sqlite:///{tmp_path / f'{i}.db'}"
        with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as session:
            events = register(session, planted())
            with deterministic_entropy(7):
                release = session.release(events.query().agg(n=dp.count()), epsilon=1, request_id="fixed")
            assert release.record.parameters["test_noise"] is True
            values.append(release.table["n"].iloc[0])
    assert values[0] == values[1]
    with dp.Session.open(f"sqlite:///{tmp_path / 'p.db'}", analyst="steward", role="steward") as session:
        events = register(session, planted())
        with deterministic_entropy(7), pytest.raises(UsageError, match="test-only"):
            session.release(events.query().agg(n=dp.count()), epsilon=1)
        assert session.ledger.charges("events") == []
