"""The adaptive mean and sum report their clipping bias: its public bound is the bias column, stated in the note.

Through the Session (docs/math/global-sensitivity.md §1.5a): every log2 bin outside the released clip
had a noisy count below τ, so with probability >= 0.975 it holds at most m = τ - 1 + t rows, each moved
at most to its bin's far edge within the declared bounds; ``<name>_bias95`` is that bias bound and
``<name>_error95`` the noise bound (0.95 each), and |value - truth| <= error + bias holds with probability
>= 0.925 per value, against the statistic of the values clipped to the declared bounds.

The coverage test puts exactly τ values at the declared upper bound U = 250, in the bin [128, 256) just
above the bulk's [64, 128): that bin reaches τ only when its noise is >= 0, so the clip often stops at
128 and the true bias is τ (250 - 128), more than τ - 1 rows of the bin could add. The bound holds in
every release and error + bias covers the error; the same checks catch a bound made with t = 0, or
without the bias term (a bias column of 0: the noise bound alone, as before this bound).
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
    not_covered: int = 0  # releases whose |released - true| exceeded the error column plus the bias column


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
            (bound,) = release.values["s_bias95"]
            a, b, stated = _clip_and_bias(_note(release))
            bias = truth_sum - float(np.clip(x, a, b).sum())  # what the clip [a, b] took from the sum
            if statistic == "sum":
                assert bound == pytest.approx(stated, rel=1e-5)  # the column is the note's max(B_up, B_low)
            else:  # the mean's column is B / n_lo, n_lo from its noisy count: at least B / n for the true n
                bias /= x.size
            audit.runs += 1
            audit.cuts += bias > 0
            audit.bias_over_bound += bias > bound
            audit.not_covered += abs(value - truth) > error + bound
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
    return 0  # m = 0: no bias term, a bias column of 0 (the noise bound alone)


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
def test_the_bias_bound_holds_and_the_error_column_covers_with_a_heavy_tail(
    steward: dp.Session, statistic: str
) -> None:
    runs = 160
    audit = _audit(steward, statistic, runs, seed=21)
    assert audit.cuts >= runs // 5, audit  # the clip often cuts the tail off: the check is not vacuous
    assert audit.bias_over_bound == 0, audit
    # error + bias claim coverage >= 0.925: more misses than Binomial(runs, 0.075)'s 99.9 % quantile refute it
    assert audit.not_covered <= _binomial_upper(runs, 0.075, 0.999), audit


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
        assert audit.not_covered > _binomial_upper(runs, 0.075, 0.999), audit


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
    while bins * math.exp(-rate * (t + 1)) / (1 + math.exp(-rate)) > 0.025:
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
    # τ = 16 and t = 13 at ε = 1/2 over the 41 bins of [0, 10^6]; the 11 bins [512, 1024) ... [2^19, 2^20) above
    # the clip move their values by at most 2^10 + ... + 2^19 + 10^6 - 11 x 512 = 2 041 920 together
    assert (m, above) == (28, 28 * 2_041_920)
    for release in (total, grouped):
        note = _note(release)
        assert "the clip [128, 512] of the declared [0, 1e+06]" in note
        assert f"at most m = {m} rows (τ - 1 + t, τ = 16, t = 13)" in note
        assert "with probability 0.975 (a union bound over the 41 bins the declared bounds meet)" in note
        stated_above, stated_below = _stated(note)
        assert stated_above == pytest.approx(float(above), rel=1e-5) and stated_above >= above  # printed upwards
        assert stated_below == pytest.approx(float(below), rel=1e-5) and stated_below >= below
        assert "error + bias with probability >= 0.925" in note
        # the bias column: max(B_up, B_low), the same for every group, never rounded down; the error column
        # is the noise bound alone (far smaller: the clip [128, 512] is 2 000x narrower than the bounds)
        assert all(
            bias == float(above) or bias == math.nextafter(float(above), math.inf)
            for bias in release.values["s_bias95"]
        )
        assert all(e < float(above) / 1000 for e in release.values["s_error95"])
    assert len(grouped.values["s_bias95"]) == len(REGIONS)

    note = _note(means)
    m_mean, above_mean, _ = _expected_bias(Fraction(2 * 9, 31), 128, 512, 0, 10**6)
    assert f"at most m = {m_mean} rows" in note and _stated(note)[0] == pytest.approx(float(above_mean), rel=1e-5)
    assert "n_lo = max(1, ceil(n^ - b_count))" in note and "b at 97.5% each" in note
    for e, bias in zip(means.values["m_error95"], means.values["m_bias95"], strict=True):
        # each group (about 1 000 values): a noise bound of a few ms, a bias bound of about B_up / 1000
        assert e < 100 and above_mean / 1000 < bias and e + bias <= 10**6 - 128


def test_a_clip_that_cuts_nothing_states_no_bias_and_keeps_its_noise_bound(steward: dp.Session) -> None:
    """No bounds found (three rows): the clip is [L, U], no bias (a bias column of 0); the noise bound at 0.95."""
    frame = pd.DataFrame({"person_id": ["a", "b", "c"], "latency": [1.0, 5.0, 2.0], "region": REGIONS[0], "age": 30})
    events = register(steward, frame, bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1)
    with deterministic_entropy(4):
        both = {"s": dp.sum("latency", mechanism="adaptive_clip"), "m": dp.mean("latency", mechanism="adaptive_clip")}
        release = steward.release(events.query().agg(**both), epsilon=1)
    notes = release.record.value["notes"]
    for label in notes:
        note = notes[label]["accuracy"]
        assert "none found: the clip is the declared bounds [0, 1e+06], no clipping bias" in note
        assert "the error column is that noise bound (at 0.95); the clip is the declared bounds" in note
    assert release.values["s_bias95"] == [0.0] and release.values["m_bias95"] == [0.0]
    assert release.values["s_error95"][0] > 0


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
