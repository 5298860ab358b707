"""Census tables (``dp.hierarchical_count``) through the neighbour harness: every level's vector, measured.

A 3-level hierarchy (the total, 2 regions, 4 districts, plus a district ``z9`` in the data that is
not a declared leaf) and random neighbouring pairs (``tests.privacy.harness``' capture of the release
path, deterministic entropy on both sides): under add/remove a unit of up to C + 2 rows (a whale
beyond C) in one or two districts is added; under replace a unit is replaced by one living in the
*other region* (its rows leave two levels' nodes and enter others), or redrawn. For each pair and each
counting mechanism:

* totality, and a consistent table on both sides (children sum exactly to parents);
* one captured mechanism input per level, each level's measured change (L1, or L2 for Gaussian)
  <= the sensitivity its step states;
* the levels' losses compose to the charge: Σ ε_l = the step's ε (and Σ δ_l), and for the Laplace and
  geometric mechanisms the realised loss of the measured change, Σ_l change_l · ε_l / Δ_l, stays <= ε.

Control: upper levels noised as if their sensitivity were half the leaf's (the plan's charge unchanged,
so the bookkeeping check "realised == charged" passes) is caught by the measurement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.statistics import hierarchical_count
from tests.privacy import harness as h

HIERARCHY = {"r1": ["d11", "d12"], "r2": ["d21", "d22"]}
LEAVES = [(r, d) for r, ds in HIERARCHY.items() for d in ds]
OUTSIDE = ("r2", "z9")  # present in the data, not a declared leaf: never counted
PAIRS = 10
MECHANISMS = (("laplace", 0), ("geometric", 0), ("gaussian", Fraction(1, 10**9)))
SPLIT = [1, 2, 3]
EPSILON = Fraction(3)


def _unit(
    rng: np.random.Generator, uid: str, c: int, homes: list[tuple[str, str]], rows: int | None = None
) -> list[dict[str, Any]]:
    count = rows if rows is not None else int(rng.integers(1, c + 3))
    return [
        {"uid": uid, "region": home[0], "district": home[1], "f": int(rng.random() < 0.7)}
        for home in (homes[int(rng.integers(len(homes)))] for _ in range(count))
    ]


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["uid", "region", "district", "f"]).astype({"f": "int64"})


def make_pair(adjacency: str, seed: int) -> tuple[int, pd.DataFrame, pd.DataFrame]:
    """(C, x, y): neighbours under ``adjacency``; seed % 3 == 0 is a whale at C + 2 rows."""
    rng = np.random.default_rng(seed)
    c = int(rng.choice([1, 2, 3]))
    every = [*LEAVES, OUTSIDE]
    base = [r for i in range(int(rng.integers(1, 6))) for r in _unit(rng, f"u{i}", c, every)]
    region = str(rng.choice(list(HIERARCHY)))
    mine = [leaf for leaf in LEAVES if leaf[0] == region]
    others = [leaf for leaf in LEAVES if leaf[0] != region]
    rows = c + 2 if seed % 3 == 0 else None
    target = _unit(rng, "t", c, mine, rows)
    if adjacency == "add_remove":
        x, y = base, base + target
    else:  # the replacement lives in the other region (or anywhere, redrawn)
        other = _unit(rng, "t", c, others if rng.random() < 0.7 else every, rows)
        x, y = base + target, base + other
    if rng.random() < 0.5:
        x, y = y, x
    return c, _frame(x), _frame(y)


def _register(session: dp.Session, name: str, data: pd.DataFrame, adjacency: str, c: int) -> dp.Dataset:
    return session.register_dataset(
        name,
        source=data,
        privacy_unit="uid",
        adjacency=adjacency,
        max_rows_per_unit=c,
        hierarchies={"geo": {"levels": ["region", "district"], "keys": LEAVES}},
        budget=dp.Budget(epsilon=10**6, delta=Fraction(1, 10**6)),
        policy=h.policy(),
    )


def _consistent(table: pd.DataFrame) -> bool:
    total = table[table.level == "total"]["t"].sum()
    regions = table[table.level == "region"]
    districts = table[table.level == "district"]
    return bool(regions["t"].sum() == total) and all(
        districts[districts.region == r]["t"].sum() == v for r, v in zip(regions.region, regions["t"], strict=True)
    )


def _check(ox: h.Outcome, oy: h.Outcome, mechanism: str, tightness: list[float]) -> list[str]:
    if ox.status != "ok" or oy.status != "ok":
        return [f"not total: x {ox.status} {ox.error!r}; y {oy.status} {oy.error!r}"]
    label = ox.names["t"]
    (step,) = [s for s in ox.plan.steps if s.output == label]
    xs = [c for c in ox.calls if c.agg == label and c.kind == "additive"]
    ys = [c for c in oy.calls if c.agg == label and c.kind == "additive"]
    if not len(xs) == len(ys) == 3:
        return [f"{len(xs)} and {len(ys)} levels captured, 3 planned"]
    problems = []
    levels = [c.step for c in xs]
    if sum(s.loss.epsilon for s in levels if s is not None) != step.loss.epsilon:
        problems.append("the levels' ε do not compose to the step's")
    realised = 0.0
    for level, (run, cx, cy) in enumerate(zip(levels, xs, ys, strict=True)):
        assert run is not None and run.sensitivity is not None and run.norm is not None
        measured = h.norm_change(cx.values, cy.values, run.norm)
        tightness.append(measured / float(run.sensitivity))
        if not h.within(measured, run.sensitivity, run.norm):
            problems.append(f"level {level}: measured change {measured:g} > stated {run.sensitivity}")
        realised += measured * float(run.loss.epsilon) / float(run.sensitivity)
    if mechanism != "gaussian" and realised > float(step.loss.epsilon) * (1 + h.TOLERANCE):
        problems.append(f"realised loss {realised:g} > charged ε {step.loss.epsilon}")
    return problems


def run_pairs(adjacency: str, mechanism: str, delta: Fraction, workdir: Path) -> tuple[list[str], float]:
    """The violations over the pairs, and the largest measured change / stated sensitivity of any level."""
    problems: list[str] = []
    tightness: list[float] = []
    url = f"sqlite:///{workdir / f'{adjacency}-{mechanism}.db'}"
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as session:
        warm = _register(session, "warmup", _frame(_unit(np.random.default_rng(0), "w", 1, LEAVES)), adjacency, 1)
        session.release(warm.query().agg(n=dp.count()), epsilon=1)
        for seed in range(PAIRS):
            c, x, y = make_pair(adjacency, seed)
            outcomes = []
            for side, data in (("x", x), ("y", y)):
                with h.deterministic_entropy(seed * 1000):
                    ds = _register(session, f"p{seed}{side}", data, adjacency, c)
                query = ds.query().agg(t=dp.hierarchical_count("geo", split=SPLIT, mechanism=mechanism))
                outcome = h.release(session, query, epsilon=EPSILON, delta=delta, seed=seed, request_id=f"{seed}{side}")
                if outcome.status == "ok":
                    table = session.release(query, epsilon=EPSILON, delta=delta).table  # the stored release
                    if not _consistent(table):
                        problems.append(f"pair {seed} {side}: an inconsistent table")
                outcomes.append(outcome)
            found = _check(outcomes[0], outcomes[1], mechanism, tightness)
            problems.extend(f"pair {seed} (C={c}): {p}" for p in found)
    return problems, max(tightness, default=0.0)


@pytest.mark.parametrize(("mechanism", "delta"), MECHANISMS)
@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
def test_census_levels_between_neighbours(adjacency: str, mechanism: str, delta: Fraction, tmp_path: Path) -> None:
    problems, tightest = run_pairs(adjacency, mechanism, delta, tmp_path)
    assert not problems, "\n".join(problems[:6])
    assert tightest >= 0.5  # the pairs reach the stated sensitivity (a whale moves C rows, C + 2 kept to C)


@pytest.fixture
def halved_upper_levels(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Noise every level above the leaves as if its sensitivity were half the leaf's; the charge unchanged."""
    original = hierarchical_count.level_steps

    def broken(agg: Any, step: Any) -> Any:
        steps = original(agg, step)
        halved = [s.sensitivity / 2 if isinstance(s.sensitivity, Fraction) else s.sensitivity for s in steps[:-1]]
        return [dataclasses.replace(s, sensitivity=v) for s, v in zip(steps, halved, strict=False)] + steps[-1:]

    monkeypatch.setattr(hierarchical_count, "level_steps", broken)
    yield


@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
def test_upper_levels_noised_at_half_their_sensitivity_are_caught(
    adjacency: str, tmp_path: Path, halved_upper_levels: None
) -> None:
    problems, _ = run_pairs(adjacency, "laplace", Fraction(0), tmp_path)
    assert problems and not any("not total" in p for p in problems), problems[:3]
    # the total under add/remove (a unit's C rows > C/2); the regions under replace, where the total moves by
    # at most C (a unit replaced keeps the count within C) but a unit moving regions moves 2C > 2C/2
    assert any(("level 0" if adjacency == "add_remove" else "level 1") in p for p in problems), problems[:3]
