"""Refusals decidable from public values are admission errors: raised before the ledger, nothing charged.

Each case used to trip a limit after data access (a charged failure, docs/design.md invariant 6): the exact
samplers' 2^52 scale, PTR's test plan, a filter literal of the wrong kind or beyond the engine's
integer width. Every case runs through ``Session.release`` and ``Session.sql`` where SQL can state it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import InvalidBounds, InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import to_fraction
from dpsense.mechanisms.laplace import laplace_scale_ok
from dpsense.mechanisms.ptr import check_plan_parameters
from dpsense.noise import exact
from tests.system.release.support import planted, register

Build = Callable[[dp.Dataset], dp.Query]

#: name -> (query, release kwargs, SQL text or None, expected error, text the error names)
CASES: dict[str, tuple[Build, dict[str, object], str | None, type[Exception], str]] = {
    "geometric scale beyond 2^52 (ε = 0.30000000000000004)": (
        lambda d: d.query().agg(n=dp.count(mechanism="geometric")),
        {"epsilon": 0.30000000000000004},
        None,
        InvalidPrivacyParameter,
        "exact sampler",
    ),
    "laplace count at ε = 1e-300": (
        lambda d: d.query().agg(n=dp.count()),
        {"epsilon": 1e-300},
        "SELECT COUNT(*) AS n FROM events",
        InvalidPrivacyParameter,
        "larger epsilon",
    ),
    "grouped mean at ε = 1e-300": (
        lambda d: d.query().group_by("region").agg(m=dp.mean("hours")),
        {"epsilon": 1e-300},
        "SELECT region, AVG(hours) AS m FROM events GROUP BY region",
        InvalidPrivacyParameter,
        "larger epsilon",
    ),
    "approx_bounds at ε = 1e-300": (
        lambda d: d.query().agg(b=dp.approx_bounds("hours")),
        {"epsilon": 1e-300},
        None,
        InvalidPrivacyParameter,
        "larger epsilon",
    ),
    "PTR test plan: epsilon_test too small": (
        lambda d: d.query().agg(m=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1)),
        {"epsilon": 1e-14, "delta": 1e-9},
        None,
        InvalidPrivacyParameter,
        "epsilon_test",
    ),
    "PTR scan above the work limit": (
        lambda d: d.query().agg(t=dp.trimmed_mean("age", 0.1, mechanism="ptr_trimmed_mean", proposed_bound=1)),
        {"epsilon": 1e-6, "delta": 1e-9},
        None,
        InvalidPrivacyParameter,
        "limit of 1048576",
    ),
    "ε = 1e400 (beyond a double)": (
        lambda d: d.query().agg(n=dp.count()),
        {"epsilon": "1e400"},
        "SELECT COUNT(*) AS n FROM events",
        InvalidPrivacyParameter,
        "between 1e-300 and 1e300",
    ),
    "a 5000-digit ε": (
        lambda d: d.query().agg(n=dp.count()),
        {"epsilon": 10**5000},
        "SELECT COUNT(*) AS n FROM events",
        InvalidPrivacyParameter,
        "between 1e-300 and 1e300",
    ),
    "filter literal of the wrong kind": (
        lambda d: d.query().filter("region", "==", 0).agg(n=dp.count()),
        {"epsilon": 0.5},
        "SELECT COUNT(*) AS n FROM events WHERE region = 0",
        UsageError,
        "string value",
    ),
    "filter literal beyond the number rule": (
        lambda d: d.query().filter("age", ">=", 1e308).agg(n=dp.count()),
        {"epsilon": 0.5},
        "SELECT COUNT(*) AS n FROM events WHERE age >= 1e308",
        UsageError,
        "1e-300",  # the number rule of every front end (query._values.number_problem) refuses it first
    ),
    "filter literal beyond the integer width": (
        # != keeps every row by declaration, so the typo rule (an empty filter) lets the engine's rule speak
        lambda d: d.query().filter("age", "!=", 1e100).agg(n=dp.count()),
        {"epsilon": 0.5},
        "SELECT COUNT(*) AS n FROM events WHERE age != 1e100",
        UsageError,
        "smaller constant",
    ),
    "group key beyond the integer width": (
        # a public key 2^64 on a BIGINT column: the engine's key check would fail after the charge
        lambda d: d.query().group_by("age", keys=[18, 2**64]).agg(n=dp.count()),
        {"epsilon": 0.5},
        None,
        UsageError,
        "its type BIGINT can hold",
    ),
    # the public range of _admission._admit_public_range (tests/system/release/test_extreme_parameters.py
    # sweeps it; each of these failed after the charge, or with a bare arithmetic error, before it)
    "ε above 2^40": (
        lambda d: d.query().agg(n=dp.count()),
        {"epsilon": 1e13},
        "SELECT COUNT(*) AS n FROM events",
        InvalidPrivacyParameter,
        "smaller epsilon",
    ),
    "δ below 2^-300": (
        lambda d: d.query().agg(n=dp.count(mechanism="gaussian")),
        {"epsilon": 1, "delta": 1e-100},
        None,
        InvalidPrivacyParameter,
        "at least 2^-300",
    ),
    "bounds a single point for a smooth median": (
        lambda d: d.query().agg(m=dp.median("hours", bounds=(5, 5), mechanism="smooth_median")),
        {"epsilon": 1},
        None,
        InvalidBounds,
        "single point",
    ),
    "bounds below 2^-900 in magnitude": (
        lambda d: d.query().agg(s=dp.sum("hours", bounds=(0, "1e-300"))),
        {"epsilon": 1},
        None,
        InvalidBounds,
        "at least 2^-900",
    ),
    "PTR's δ per record at ε = 1e3": (
        lambda d: d.query().agg(m=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1)),
        {"epsilon": 1e3, "delta": 1e-7},
        None,
        InvalidPrivacyParameter,
        "leaves no δ per record",
    ),
    "partition selection's scale at ε = 1e-17": (
        lambda d: d.query().group_by("age").max_groups_per_unit(1).agg(m=dp.median("hours")),
        {"epsilon": 1e-17, "delta": 1e-7},
        None,
        InvalidPrivacyParameter,
        "partition selection",
    ),
    "group key not an integer on an integer column": (
        lambda d: d.query().group_by("age", keys=[18, 18.5]).agg(n=dp.count()),
        {"epsilon": 0.5},
        None,
        UsageError,
        "its type BIGINT can hold",
    ),
}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dp.Session, dp.Dataset]]:
    path: Path = tmp_path_factory.mktemp("admission") / "l.db"
    with dp.Session.open(f"sqlite:///{path}", analyst="steward", role="steward") as s:
        yield s, register(s, planted(persons=40))


def _unchanged(s: dp.Session, run: Callable[[], object], error: type[Exception], names: str) -> None:
    spent, charges = s.budget("events").spent, len(s.ledger.charges("events"))
    with pytest.raises(error) as info:
        run()
    assert names in str(info.value)
    assert s.budget("events").spent == spent
    assert len(s.ledger.charges("events")) == charges  # no request recorded


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_before_the_ledger_through_release(session: tuple[dp.Session, dp.Dataset], case: str) -> None:
    s, events = session
    build, kwargs, _, error, names = CASES[case]
    _unchanged(s, lambda: s.release(build(events), **kwargs), error, names)


@pytest.mark.parametrize("case", sorted(c for c in CASES if CASES[c][2] is not None))
def test_refused_before_the_ledger_through_sql(session: tuple[dp.Session, dp.Dataset], case: str) -> None:
    s, _ = session
    _, kwargs, text, error, names = CASES[case]
    assert text is not None
    _unchanged(s, lambda: s.sql(text, **kwargs), error, names)


def test_the_mechanism_keeps_the_same_rule() -> None:
    """Defence in depth: the samplers and PTR refuse exactly what admission refuses (one rule each)."""
    eps = to_fraction(0.30000000000000004)
    assert not exact.geometric_scale_ok(5, eps)
    with pytest.raises(UsageError, match="2\\^52"):
        exact.discrete_laplace(5 / eps, 1)
    assert exact.geometric_scale_ok(5, to_fraction(0.3))
    assert not laplace_scale_ok(sensitivity=1, epsilon=1e-300)
    assert laplace_scale_ok(sensitivity=1, epsilon=1e-6, dimension=1_000_000)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_test"):
        check_plan_parameters(epsilon_test=1e-15, epsilon_release=1e-15, delta=1e-9, proposed_bound=1)
    with pytest.raises(InvalidPrivacyParameter, match="epsilon_test"):
        dp.mechanisms.propose_test_release(
            1.0, 5, proposed_bound=1, epsilon_test=1e-15, epsilon_release=1e-15, delta=1e-9
        )
    check_plan_parameters(epsilon_test=0.1, epsilon_release=0.1, delta=1e-9, proposed_bound=1)


def test_admitted_neighbours_still_release(session: tuple[dp.Session, dp.Dataset]) -> None:
    """The admission step refuses only the limits: the same queries at ordinary parameters release."""
    s, events = session
    s.release(events.query().agg(n=dp.count(mechanism="geometric")), epsilon=0.3)
    s.release(events.query().filter("region", "==", "north").agg(n=dp.count()), epsilon=0.3)
    s.sql("SELECT COUNT(*) AS n FROM events WHERE age >= 30", epsilon=0.3)
