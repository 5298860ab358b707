"""The adaptive-clip mean through the Session: a wide declared domain, the clip released first, one charge.

``dp.mean(column, mechanism="adaptive_clip")``: approximate bounds of the column (charged, a step of
its own), then the private-n mean on the values clipped to them, the sum's noise calibrated to the
clip (docs/math/global-sensitivity.md §1.5, "Adaptive clip"). Its neighbours are checked in
tests/privacy/test_adaptive_clip.py.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import PureDP
from dpsense.noise.testing import deterministic_entropy
from dpsense.query import AggregateKind
from dpsense.statistics import aggregate_from_fields
from tests.system.release.support import REGIONS, fresh, policy, register


@pytest.fixture
def steward(test_steward: dp.Session) -> dp.Session:
    return test_steward


def _latencies() -> pd.DataFrame:
    persons = np.arange(4000)
    latency = 200.0 + (persons * 7919 % 1000) / 10.0  # in [200, 300) ms, declared against a 10^6 ms timeout
    return pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "latency": latency, "age": 30}
    )


def test_the_plan_is_clip_sum_count_and_explain_says_the_clip_comes_first(steward: dp.Session) -> None:
    events = register(steward, _latencies(), bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1)
    plan = steward.preview(events.query().agg(m=dp.mean("latency", mechanism="adaptive_clip")), epsilon=1)
    assert [(s.part.value, s.mechanism.value, s.loss) for s in plan.steps] == [
        ("clip", "approx_bounds", PureDP(Fraction(9, 31))),
        ("centered_sum", "laplace", PureDP(Fraction(13, 31))),
        ("count", "laplace", PureDP(Fraction(9, 31))),
    ]
    assert plan.steps[1].sensitivity == Fraction(10**6, 2)  # the ceiling, for the declared bounds
    assert "approximate bounds" in plan.explain() and "calibrated to that clip" in plan.explain()
    spelled = aggregate_from_fields(AggregateKind.MEAN, {"column": "latency", "mechanism": "adaptive_clip"})
    assert spelled == dp.mean("latency", mechanism="adaptive_clip")  # YAML and HTTP spell it with the mechanism field


def test_a_wide_domain_mean_is_far_closer_with_the_clip_and_charged_once(steward: dp.Session) -> None:
    frame = _latencies()
    truth = float(frame["latency"].mean())
    events = register(
        steward,
        frame,
        bounds={"latency": (0, 10**6), "age": (0, 120)},
        max_rows_per_unit=1,
        budget=dp.Budget(epsilon=100, delta=1e-8),
        policy=policy(per_release_epsilon=1),
    )
    errors: dict[str, list[float]] = {"laplace": [], "adaptive_clip": []}
    with deterministic_entropy(5):
        for i in range(20):
            for mechanism in errors:
                query = fresh(events.query(), "latency", i).agg(m=dp.mean("latency", mechanism=mechanism))
                release = steward.release(query, epsilon=1, request_id=f"{mechanism}-{i}")
                errors[mechanism].append(abs(release.values["m"][0] - truth))
    # the Laplace mean's noise is (10^6/2)/(ε n) ~ 200 ms and it clamps at an edge; the clip [128, 512] cuts it ~2 600x
    assert np.median(errors["adaptive_clip"]) < 1.0 < 50.0 < np.median(errors["laplace"])
    with deterministic_entropy(6):  # the same question again (test noise, as above): the stored release
        adaptive = steward.release(
            fresh(events.query(), "latency", 0).agg(again=dp.mean("latency", mechanism="adaptive_clip")),
            epsilon=1,
            request_id="again",
        )
    assert adaptive.cached and adaptive.charged is None  # nothing charged again
    text = adaptive.explain()
    assert "adaptive clip: approximate bounds released first" in text and "bias column bounds the clipping" in text
    assert len(steward.ledger.charges("events")) == 40


def test_grouped_the_clip_is_shared_and_every_group_gets_a_mean(steward: dp.Session) -> None:
    events = register(steward, _latencies(), bounds={"latency": (0, 10**6), "age": (0, 120)}, max_rows_per_unit=1)
    with deterministic_entropy(9):
        release = steward.release(
            events.query().group_by("region").agg(m=dp.mean("latency", mechanism="adaptive_clip")), epsilon=2
        )
    means = release.values["m"]
    assert len(means) == len(REGIONS) and all(200 <= m <= 300 for m in means)
    # the error column is the noise's bound, as before the bias bound; the bias column is wide (dozens of rows may
    # hide in each bin above the clip [128, 512] up to 10^6 for all we know), within max(U - a, b - L) together
    assert all(e is not None and e < 20 for e in release.values["m_error95"])
    errors, biases = release.values["m_error95"], release.values["m_bias95"]
    assert all(b > 20 and e + b <= 10**6 - 128 for e, b in zip(errors, biases, strict=True))


def test_degenerate_views_are_released_or_refused_before_the_charge(steward: dp.Session) -> None:
    """Empty and one-record views, a missing value clamped, a huge domain: total; δ and a sum refused for free."""
    frame = pd.DataFrame({"person_id": ["a", "b", "c"], "latency": [1.0, np.nan, 2.0], "f": [1, 1, 0]})
    frame["region"], frame["age"] = REGIONS[0], 30
    events = register(
        steward,
        frame,
        bounds={"latency": (0, 10**200), "age": (0, 120)},
        policies={"latency": "clamp"},
        max_rows_per_unit=1,
        budget=dp.Budget(epsilon=100, delta=1e-8),
    )
    adaptive = dp.mean("latency", mechanism="adaptive_clip")
    total = dp.sum("latency", mechanism="adaptive_clip")
    for query in (events.query(), events.query().filter("f", "==", 5), events.query().filter("f", "==", 0)):
        release = steward.release(query.agg(m=adaptive, s=total), epsilon=1)
        assert 0 <= release.values["m"][0] <= 10**200 and release.charged == PureDP(1)
        assert np.isfinite(release.values["s"][0])
    grouped = steward.release(events.query().group_by("region").agg(m=adaptive, s=total), epsilon=1)
    assert len(grouped.values["m"]) == len(grouped.values["s"]) == len(REGIONS)
    spent = len(steward.ledger.charges("events"))
    with pytest.raises(dp.DPSenseError, match="no step of this plan uses it"):
        steward.release(events.query().agg(m=adaptive), epsilon=1, delta=1e-9)
    with pytest.raises(dp.DPSenseError, match="not valid for count"):
        steward.release(events.query().agg(n=dp.count(mechanism="adaptive_clip")), epsilon=1)
    assert len(steward.ledger.charges("events")) == spent  # the refusals cost nothing
