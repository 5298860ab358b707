"""The adaptive mean and sum report their clipping bias: its public bound is in the error column and the note.

Through the Session (docs/math/global-sensitivity.md §1.5a): every log2 bin outside the released clip
had a noisy count below τ, so with probability >= 0.99 it holds at most m = τ - 1 + t rows, each moved at
most to its bin's far edge within the declared bounds; the error column is the noise bound (at 0.96)
plus that bias bound, so it holds with probability >= 0.95 per value, against the statistic of the
values clipped to the declared bounds.

The coverage test puts exactly τ values at the declared upper bound U = 250, in the bin [128, 256) just
above the bulk's [64, 128): that bin reaches τ only when its noise is >= 0, so the clip often stops at
128 and the true bias is τ (250 - 128), more than τ - 1 rows of the bin could add. The bound holds in
every release and the error column covers the error; the same checks catch a bound made with t = 0, or
without the bias term (the error column of the noise alone, as before this bound).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.mechanisms.approx_bounds import (
    LARGEST_EXPONENT,
    SMALLEST_EXPONENT,
    approx_bounds_threshold,
    bin_edges,
    log_bin_indices,
)
from dpsense.noise.testing import deterministic_entropy
from dpsense.statistics import _adaptive
from tests.system.release.support import REGIONS, fresh, policy, register

L, U = 64, 250
BULK = 500
BINS = 2 * (LARGEST_EXPONENT - SMALLEST_EXPONENT) + 1
#: statistic -> its aggregate and the ε of its clip step at a release ε of 1 (an even share; 9/31 for the mean)
STATISTICS: dict[str, tuple[Callable[..., Any], Fraction]] = {
    "sum": (dp.sum, Fraction(1, 2)),
    "mean": (dp.mean, Fraction(9, 31)),
}


@pytest.fixture
def steward(test_steward: dp.Session) -> dp.Session:
    return test_steward


def _threshold(clip_epsilon: Fraction) -> int:
    return approx_bounds_threshold(sensitivity=1, epsilon=clip_epsilon, bins=BINS, success_probability=0.95)


def _tailed(tail: int) -> pd.DataFrame:
    """BULK values spread over [64, 128) and ``tail`` values at U = 250, one per person."""
    persons = np.arange(BULK + tail)
    bulk = 64.0 + (persons * 7919 % 1000) / 1000.0 * 63.9
    return pd.DataFrame(
        {
            "person_id": persons.astype(str),
            "region": np.array(REGIONS)[persons % 4],
            "v": np.where(persons < BULK, bulk, float(U)),
            "age": 30,
        }
    )


_CLIP = re.compile(r"the clip \[([^,\]]+), ([^\]]+)\] of the declared")
_BIAS = re.compile(r"B_up = ([0-9.e+-]+) above the clip, B_low = ([0-9.e+-]+) below it")
_NOISE = re.compile(r"\|error\| <= ([0-9.e+-]+) with probability 0\.96 per value")


def _note(release: dp.Release) -> str:
    (notes,) = release.record.value["notes"].values()
    return str(notes["accuracy"])


def _clip_and_bias(note: str) -> tuple[float, float, float]:
    """(a, b, max(B_up, B_low)) as the note states them; the declared bounds and 0 when the clip cuts nothing."""
    clip, bias = _CLIP.search(note), _BIAS.search(note)
    if clip is None:
        assert "no clipping bias" in note
        return float(L), float(U), 0.0
    assert bias is not None, note
    return float(clip.group(1)), float(clip.group(2)), max(float(bias.group(1)), float(bias.group(2)))


@dataclass
class Audit:
    runs: int = 0
    cuts: int = 0  # releases whose clip cut the tail off (a true bias > 0)
    bias_over_bound: int = 0  # releases whose true clipping bias exceeded the stated bound
    not_covered: int = 0  # releases whose |released - true| exceeded the error column


def _audit(steward: dp.Session, statistic: str, runs: int, seed: int) -> Audit:
    aggregate, clip_epsilon = STATISTICS[statistic]
    tail = _threshold(clip_epsilon)
    frame = _tailed(tail)
    ds = register(
        steward, frame, name=f"{statistic}_{seed}", bounds={"v": (L, U), "age": (0, 120)}, max_rows_per_unit=1,
        budget=dp.Budget(epsilon=10_000, delta=1e-8), policy=policy(per_release_epsilon=1),
    )  # fmt: skip
    x = frame["v"].to_numpy()
    truth_sum = float(np.clip(x, L, U).sum())
    truth = truth_sum if statistic == "sum" else truth_sum / x.size
    audit = Audit()
    with deterministic_entropy(seed):
        for i in range(runs):
            query = fresh(ds.query(), "v", i).agg(s=aggregate("v", mechanism="adaptive_clip"))
            release = steward.release(query, epsilon=1, request_id=f"{statistic}-{seed}-{i}")
            (value,), (error,) = release.values["s"], release.values["s_error95"]
            a, b, bound = _clip_and_bias(_note(release))
            bias = truth_sum - float(np.clip(x, a, b).sum())  # what the clip [a, b] took from the sum
            if statistic == "mean":  # the bins' event bounds the mean's bias by B / n for the group's true n
                bias, bound = bias / x.size, bound / x.size
            audit.runs += 1
            audit.cuts += bias > 0
            audit.bias_over_bound += bias > bound
            audit.not_covered += abs(value - truth) > error
    return audit


def _binomial_upper(runs: int, p: float, level: float) -> int:
    """The least k with P[Binomial(runs, p) > k] <= 1 - level: more misses than k refute a coverage of 1 - p."""
    total = 0.0
    for k in range(runs + 1):
        total += math.comb(runs, k) * p**k * (1 - p) ** (runs - k)
        if total >= level:
            return k
    return runs


def _broken_t0(**kw: Any) -> int:
    return int(kw["threshold"]) - 1  # t = 0: a bin of τ rows can stay below τ (its noise <= -1), so this is too small


def _no_bias(**kw: Any) -> int:
    return 0  # m = 0: no bias term, the error column of the noise alone


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
def test_the_bias_bound_holds_and_the_error_column_covers_with_a_heavy_tail(
    steward: dp.Session, statistic: str
) -> None:
    runs = 160
    audit = _audit(steward, statistic, runs, seed=21)
    assert audit.cuts >= runs // 5, audit  # the clip often cuts the tail off: the check is not vacuous
    assert audit.bias_over_bound == 0, audit
    # the column claims coverage >= 0.95: more misses than Binomial(runs, 0.05)'s 99.9 % quantile would refute it
    assert audit.not_covered <= _binomial_upper(runs, 0.05, 0.999), audit


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
@pytest.mark.parametrize("broken", [_broken_t0, _no_bias], ids=["t=0", "no bias term"])
def test_the_same_checks_catch_a_broken_bound(
    steward: dp.Session, statistic: str, broken: Callable[..., int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Controls: m computed with t = 0, or m = 0 (no bias term), through the product's own release path."""
    monkeypatch.setattr(_adaptive, "skipped_bin_rows", broken)
    runs = 60
    audit = _audit(steward, statistic, runs, seed=22)
    assert audit.cuts > 0 and audit.bias_over_bound > 0, audit
    if broken is _no_bias:  # the noise bound alone misses the bias of every cut release
        assert audit.not_covered > _binomial_upper(runs, 0.05, 0.999), audit


def _latencies() -> pd.DataFrame:
    persons = np.arange(4000)
    latency = 200.0 + (persons * 7919 % 1000) / 10.0  # in [200, 300) ms, declared against a 10^6 ms timeout
    return pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "latency": latency, "age": 30}
    )


def _expected_bias(clip_epsilon: Fraction, a: int, b: int, low: int, high: int) -> tuple[int, Fraction, Fraction]:
    """(m, B_up, B_low) recomputed here from the definitions (bins, τ, the least t), for C = 1 under add/remove."""
    tau = _threshold(clip_epsilon)
    first, last = (int(j) for j in log_bin_indices([low, high], smallest_exponent=-20, largest_exponent=62))
    bins, rate = last - first + 1, float(clip_epsilon)
    t = 0
    while bins * math.exp(-rate * (t + 1)) / (1 + math.exp(-rate)) > 0.01:
        t += 1
    m = tau - 1 + t
    edges = [tuple(Fraction(e) for e in bin_edges(j, smallest_exponent=-20)) for j in range(first, last + 1)]
    above = sum((min(high, u) - b for lo, u in edges if lo >= b), Fraction(0))
    below = sum((a - max(low, lo) for lo, u in edges if u <= a), Fraction(0))
    return m, m * above, m * below


def _stated(note: str) -> tuple[float, float]:
    found = _BIAS.search(note)
    assert found is not None, note
    return float(found.group(1)), float(found.group(2))


def test_the_note_and_the_column_state_the_bias_of_a_cut_clip(steward: dp.Session) -> None:
    events = register(
        steward, _latencies(), bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1,
        budget=dp.Budget(epsilon=100, delta=1e-8), policy=policy(per_release_epsilon=2),
    )  # fmt: skip
    with deterministic_entropy(31):
        total = steward.release(events.query().agg(s=dp.sum("latency", mechanism="adaptive_clip")), epsilon=1)
        grouped = steward.release(
            events.query().group_by("region").agg(s=dp.sum("latency", mechanism="adaptive_clip")), epsilon=1
        )
        means = steward.release(
            events.query().group_by("region").agg(m=dp.mean("latency", mechanism="adaptive_clip")), epsilon=2
        )
    m, above, below = _expected_bias(Fraction(1, 2), 128, 512, 0, 10**6)
    # τ = 16 and t = 15 at ε = 1/2 over the 41 bins of [0, 10^6]; the 11 bins [512, 1024) ... [2^19, 2^20) above
    # the clip move their values by at most 2^10 + ... + 2^19 + 10^6 - 11 x 512 = 2 041 920 together
    assert (m, above) == (30, 30 * 2_041_920)
    for release in (total, grouped):
        note = _note(release)
        assert "the clip [128, 512] of the declared [0, 1e+06]" in note
        assert f"at most m = {m} rows (τ - 1 + t, τ = 16, t = 15)" in note
        assert "with probability 0.99 (a union bound over the 41 bins the declared bounds meet)" in note
        stated_above, stated_below = _stated(note)
        assert stated_above == pytest.approx(float(above), rel=1e-5) and stated_above >= above  # printed upwards
        assert stated_below == pytest.approx(float(below), rel=1e-5) and stated_below >= below
        assert "with probability >= 0.95 per value (union bound)" in note
        noise = _NOISE.search(note)
        assert noise is not None, note
        errors = release.values["s_error95"]
        # the column: the noise bound at 0.96 plus max(B_up, B_low), the same for every group
        assert all(e == pytest.approx(float(noise.group(1)) + float(above), rel=1e-9) for e in errors)
        assert all(e >= float(noise.group(1)) * (1 - 1e-6) + float(above) for e in errors)  # rounded up, never down
    assert len(grouped.values["s_error95"]) == len(REGIONS)

    note = _note(means)
    m_mean, above_mean, _ = _expected_bias(Fraction(2 * 9, 31), 128, 512, 0, 10**6)
    assert f"at most m = {m_mean} rows" in note and _stated(note)[0] == pytest.approx(float(above_mean), rel=1e-5)
    assert "n_lo = max(1, ceil(n^ - b_count))" in note and "b at 98% each" in note
    for e in means.values["m_error95"]:  # each group: its noise plus about B_up / 1000, within max(U - a, b - L)
        assert above_mean / 1000 < e < 10**6 - 128


def test_a_clip_that_cuts_nothing_states_no_bias_and_keeps_its_noise_bound(steward: dp.Session) -> None:
    """No bounds found (three rows): the clip is [L, U], no bias; the column is the noise bound at 0.96."""
    frame = pd.DataFrame({"person_id": ["a", "b", "c"], "latency": [1.0, 5.0, 2.0], "region": REGIONS[0], "age": 30})
    events = register(steward, frame, bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1)
    with deterministic_entropy(4):
        both = {"s": dp.sum("latency", mechanism="adaptive_clip"), "m": dp.mean("latency", mechanism="adaptive_clip")}
        release = steward.release(events.query().agg(**both), epsilon=1)
    notes = release.record.value["notes"]
    for label in notes:
        note = notes[label]["accuracy"]
        assert "none found: the clip is the declared bounds [0, 1e+06], no clipping bias" in note
        assert "the error column is that noise bound (at 0.96" in note and "probability >= 0.95 per value" in note
    noise = _NOISE.search(notes[next(k for k in notes if k.startswith("sum"))]["accuracy"])
    assert noise is not None and release.values["s_error95"][0] == pytest.approx(float(noise.group(1)), rel=1e-5)


def test_the_forecast_says_the_bias_is_known_after_the_clip(steward: dp.Session) -> None:
    events = register(steward, _latencies(), bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1)
    query = events.query().agg(s=dp.sum("latency", mechanism="adaptive_clip"))
    (expected,) = steward.forecast(query, epsilon=1).expected
    assert expected.bound is None
    assert "no number before the clip is released" in expected.how
    m, _, _ = _expected_bias(Fraction(1, 2), 128, 512, 0, 10**6)
    assert f"τ = {_threshold(Fraction(1, 2))}" in expected.how and f"at most m = {m} rows" in expected.how
    with pytest.raises(dp.DPSenseError, match="no number before"):
        steward.epsilon_for(query, error={"s": 1000})
