"""The mean over a public n (replace adjacency, one row per unit, the whole snapshot): built neighbours.

Under replace adjacency every neighbour holds the registered number of units, so the Session releases
an ungrouped, unfiltered mean bounded to one row per unit as sum / n in one step, sensitivity
(U - L)/n (``release._profile.public_units``; docs/math/global-sensitivity.md §1.3). Here the harness
builds replace pairs (a unit's rows swapped for another unit's: other values, at the bounds, more or
fewer rows) on datasets of 1 to 6 units, releases on both sides and checks that

* both plans use the same public n, the snapshot's number of units;
* the pre-noise value sum / n moves by at most the stated sensitivity (``harness.check_pair``);

and a broken control (the sensitivity halved) is caught on the same pairs. Where n is not public
(add/remove, more rows per unit, a filter, a grouping, a column that may hold missing values) the
mean stays a noisy sum over a noisy count.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.query import StepPart
from tests.privacy import harness as h

PAIRS = 14


def _register(session: dp.Session, name: str, data: pd.DataFrame, *, adjacency: str = "replace", rows: int = 1,
              policy: str = "refuse") -> dp.Dataset:  # fmt: skip
    return session.register_dataset(
        name,
        source=data,
        privacy_unit="uid",
        adjacency=adjacency,
        bounds={"v": (h.LOW, h.HIGH), "px": (h.LOW, h.HIGH), "py": (h.LOW, h.HIGH)},
        keys={"g": list(h.GROUPS)},
        kinds={"px": "point", "py": "point"},
        policies={"v": policy},
        max_rows_per_unit=rows,
        budget=dp.Budget(epsilon=10**6),
        policy=h.policy(),
    )


def _pair(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A replace pair: the target unit's rows (1-3, values anywhere in the bounds or at them) for another unit's."""
    rng = np.random.default_rng(seed)
    base = [r for i in range(int(rng.integers(0, 6))) for r in h.unit_rows(rng, f"u{i}", 1, style="bounds")]
    mine = h.unit_rows(rng, "t", 1, rows=int(rng.integers(1, 4)), style=str(rng.choice(["bounds", "mixed"])))
    other = h.unit_rows(rng, "t", 1, rows=int(rng.integers(1, 4)), style="bounds")
    for r in mine + other + base:  # refuse policy: values inside the bounds, none missing
        r["v"] = float(min(max(r["v"], h.LOW), h.HIGH)) if np.isfinite(r["v"]) else 50.0
        r["px"] = r["py"] = 50.0
    return h.frame(base + mine), h.frame(base + other)


def _releases(tmp_path: Path, seed: int) -> tuple[h.Outcome, h.Outcome]:
    x, y = _pair(seed)
    url = f"sqlite:///{tmp_path / f'l{seed}.db'}"
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as s:
        # a first registration draws the ledger's keys, so that x and y then draw the same registration
        # secrets under the same seed (the bounded view's row choice of the unchanged units is alike)
        _register(s, "warmup", _frame(1))
        outcomes = []
        for name, data in (("x", x), ("y", y)):
            with h.deterministic_entropy(seed):
                ds = _register(s, name, data)
            query = ds.query().agg(m=dp.mean("v"))
            outcomes.append(h.release(s, query, epsilon=Fraction(1), delta=0, seed=seed, request_id=name))
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize("seed", range(PAIRS))
def test_the_public_n_mean_moves_within_its_sensitivity(seed: int, tmp_path: Path) -> None:
    ox, oy = _releases(tmp_path, seed)
    assert ox.status == oy.status == "ok", (ox.error, oy.error)
    assert ox.plan.public_n == oy.plan.public_n  # the same public n on both neighbours: the units
    assert [s.part for s in ox.plan.steps] == [StepPart.VALUE]
    assert ox.plan.steps[0].sensitivity == Fraction(h.HIGH - h.LOW, ox.plan.public_n)
    assert h.check_pair("m", ox, oy) == []


def test_a_halved_sensitivity_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the same pairs with the one-step mean's sensitivity halved fail the same check."""
    from dpsense.statistics import mean as mean_module

    real = mean_module.public_n_mean_sensitivity
    monkeypatch.setattr(mean_module, "public_n_mean_sensitivity", lambda b, **kw: real(b, **kw) / 2)
    caught = []
    for seed in range(PAIRS):
        problems = h.check_pair("m", *_releases(tmp_path, seed))
        caught.append(any("stated sensitivity" in p for p in problems))
    assert sum(caught) >= 3, caught  # pairs whose replaced unit sits at the other bound move by the full (U - L)/n


def _frame(units: int) -> pd.DataFrame:
    rng = np.random.default_rng(units)
    rows = [r for i in range(units) for r in h.unit_rows(rng, f"u{i}", 1, rows=1, style="bounds")]
    for r in rows:
        r["v"] = 25.0
        r["px"] = r["py"] = 50.0
    return h.frame(rows)


@pytest.mark.parametrize(
    ("declared", "query"),
    [
        ({"adjacency": "add_remove"}, lambda d: d.query()),
        ({"rows": 2}, lambda d: d.query()),
        ({"policy": "clamp"}, lambda d: d.query()),
        ({"policy": "drop"}, lambda d: d.query()),
        ({}, lambda d: d.query().filter("f", "==", 1)),
        ({}, lambda d: d.query().group_by("g").max_groups_per_unit(1)),
    ],
    ids=["add_remove", "two_rows_per_unit", "missing_values_kept", "rows_dropped", "filtered", "grouped"],
)
def test_n_stays_private_wherever_it_could_differ_between_neighbours(
    declared: dict[str, object], query: object, tmp_path: Path
) -> None:
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as s:
        ds = _register(s, "d", _frame(40), **declared)  # type: ignore[arg-type]
        plan = s.preview(query(ds).agg(m=dp.mean("v")), epsilon=1)  # type: ignore[operator]
        assert plan.public_n is None and [st.part for st in plan.steps] == [StepPart.CENTERED_SUM, StepPart.COUNT]
        # a drop policy can remove a unit whose replacement stays: then the count is not public either
        recorded = declared.get("adjacency", "replace") == "replace" and declared.get("policy") != "drop"
        assert ("units" in ds.profile.to_json()) == recorded


def test_a_public_n_from_the_request_is_refused_and_nothing_is_charged(tmp_path: Path) -> None:
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as s:
        ds = _register(s, "d", _frame(40))
        with pytest.raises(dp.UnsupportedRequest, match="does not take its public n from the request"):
            s.release(ds.query().agg(m=dp.mean("v")), epsilon=1, public_n=40)
        assert s.ledger.charges("d") == []
        assert ds.profile.units == 40
