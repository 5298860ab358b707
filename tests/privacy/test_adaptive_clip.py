"""The adaptive-clip mean and sum on neighbours whose approximate bounds are found: the calibrated sum's change.

``test_neighbours`` runs ``adaptive_clip`` on its small datasets, where the log2 histogram rarely
reaches its threshold (the declared bounds are then the clip). Here 300 units hold values in
[32, 64) of the declared [0, 100], so the bounds are found on both sides of each pair and the centred
sum runs at the clip's sensitivity (the mean's centred sum C (b - a)/2, 2x under replace; the sum
C max(|a|, |b|), 2x grouped under replace); the neighbour adds (or, under
replace, moves) a unit whose rows sit at the declared edge 100, outside the clip. The harness checks
the histogram's L1 change and, since both sides release the same clip, the sum's change against that
calibrated sensitivity (``harness.check_global``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from tests.privacy import harness as h

C = 2
#: statistic -> (its aggregate, the part calibrated to the clip, that part's sensitivity on the clip [32, 64])
STATISTICS = {
    "mean": (dp.mean("v", mechanism="adaptive_clip"), "centered_sum", lambda replace, grouped: C * 16 * (1 + replace)),
    "sum": (
        dp.sum("v", mechanism="adaptive_clip"),
        "value",
        lambda replace, grouped: C * 64 * (1 + (replace and grouped)),
    ),
}


def _frame(units: int, rng: np.random.Generator, *, edge_unit: bool) -> pd.DataFrame:
    rows = []
    for i in range(units):
        for _ in range(C):
            rows.append({"uid": f"u{i}", "g": str(rng.choice(h.GROUPS)), "h": "p", "f": 1, "v": 32 + 31 * rng.random()})
    if edge_unit:
        rows += [{"uid": "edge", "g": "a", "h": "p", "f": 1, "v": 100.0}] * C
    frame = pd.DataFrame(rows)
    for column in ("px", "py"):
        frame[column] = 50.0
    frame["src"], frame["dst"] = 0, 1
    return frame


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@pytest.mark.parametrize("grouped", [False, True])
def test_the_calibrated_sum_moves_within_its_clip_sensitivity(
    statistic: str, adjacency: str, grouped: bool, tmp_path: Path
) -> None:
    ctx = h.Context(adjacency, grouped, filtered=False)
    rng = np.random.default_rng(7)
    x = _frame(300, rng, edge_unit=False)
    if adjacency == "add_remove":
        y = pd.concat([x, _frame(0, rng, edge_unit=True)], ignore_index=True)
    else:  # replace: the last unit's rows become the edge unit's
        y = x.copy()
        last = y["uid"] == "u299"
        y.loc[last, "v"] = 100.0
    aggregate, part, expected = STATISTICS[statistic]
    agg = {"m": aggregate}
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as s:
        warm = h.register(s, "warmup", h.frame(h.unit_rows(np.random.default_rng(0), "w", 1)), ctx, 1)
        s.release(warm.query().agg(n=dp.count()), epsilon=1)
        outcomes = []
        for name, data in (("x", x), ("y", y)):
            ds = h.register(s, name, data, ctx, C)
            query = ds.query().group_by("g").max_groups_per_unit(1) if grouped else ds.query()
            outcomes.append(
                h.release(s, query.agg(**agg), epsilon=8, delta=0, seed=11, request_id=f"{name}-{adjacency}-{grouped}")
            )
    ox, oy = outcomes
    assert ox.status == oy.status == "ok", (ox.error, oy.error)
    sums = [next(c for c in o.calls if c.kind == "additive" and c.step.part.value == part) for o in outcomes]
    # found on both sides and equal: the sum ran at the clip's (smaller) sensitivity, so the check below is not vacuous
    assert sums[0].step == sums[1].step
    planned = next(st for st in ox.plan.steps if st.part.value == part)
    assert sums[0].step.sensitivity < planned.sensitivity
    # the values fill [32, 64): the released clip is that bin, and the sum runs at that clip's sensitivity
    assert sums[0].step.sensitivity == expected(adjacency == "replace", grouped)
    assert h.check_pair("m", ox, oy) == []


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
def test_a_broken_calibration_is_caught(statistic: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the sum calibrated to a quarter of the clip's sensitivity is flagged by the same check."""
    from dpsense.statistics import mean as mean_module
    from dpsense.statistics import sum as sum_module

    module, function = (
        (mean_module, "centered_sensitivity_for") if statistic == "mean" else (sum_module, "sum_sensitivity_for")
    )
    real = getattr(module, function)
    monkeypatch.setattr(module, function, lambda b, **kw: real(b, **kw) / 4)
    aggregate, part, _ = STATISTICS[statistic]
    ctx = h.Context("add_remove", False, filtered=False)
    rng = np.random.default_rng(7)
    x = _frame(300, rng, edge_unit=False)
    y = pd.concat([x, _frame(0, rng, edge_unit=True)], ignore_index=True)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with dp.Session.open(url, analyst="steward", role="steward", allow_test_noise=True) as s:
        warm = h.register(s, "warmup", h.frame(h.unit_rows(np.random.default_rng(0), "w", 1)), ctx, 1)
        s.release(warm.query().agg(n=dp.count()), epsilon=1)
        outcomes = [
            h.release(
                s,
                h.register(s, name, data, ctx, C).query().agg(m=aggregate),
                epsilon=8,
                delta=0,
                seed=11,
                request_id=name,
            )
            for name, data in (("x", x), ("y", y))
        ]
    problems = h.check_pair("m", *outcomes)
    assert any(f"/{part} " in p and "stated sensitivity" in p for p in problems), problems
