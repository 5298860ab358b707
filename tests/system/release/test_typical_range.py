"""A steward's declared typical range: the adaptive clip becomes the default mean and sum where the rule says so.

``register_dataset(..., typical={"latency": (200, 300)})`` under bounds (0, 10^6): the power-of-two
cover of the typical range is [128, 512], 2 600x narrower than the bounds, so ``dp.mean("latency")``
and ``dp.sum("latency")`` plan the clip step first (``statistics._adaptive``, rule: >= 8x). A range
nearly as wide as the bounds keeps Laplace; the analyst's named mechanism wins; bad declarations are
refused before anything is registered; a re-registration that changes the range is a conflict.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core import PureDP
from dpsense.noise.testing import deterministic_entropy
from dpsense.sensitivity import Bounds
from dpsense.statistics._adaptive import ADAPTIVE_WIDTH_RATIO, adaptive_by_default, predicted_clip
from tests.system.release.support import REGIONS, fresh, policy, register

BOUNDS = {"latency": (0, 10**6), "age": (0, 120)}


@pytest.fixture
def steward(test_steward: dp.Session) -> dp.Session:
    return test_steward


def _latencies(n: int = 4000) -> pd.DataFrame:
    persons = np.arange(n)
    latency = 200.0 + (persons * 7919 % 1000) / 10.0  # in [200, 300) ms
    return pd.DataFrame(
        {"person_id": persons.astype(str), "region": np.array(REGIONS)[persons % 4], "latency": latency, "age": 30}
    )


def test_the_rule_compares_the_bounds_with_the_power_of_two_cover_of_the_typical_range() -> None:
    assert predicted_clip(Bounds(200, 300), Bounds(0, 10**6)) == Bounds(128, 512)
    assert predicted_clip(Bounds(-3, 5), Bounds(-10, 10)) == Bounds(-4, 8)
    assert predicted_clip(Bounds(0, 1), Bounds(0, 10)) == Bounds(0, 2)  # 0's bin reaches 2^-20; clipped to L
    assert predicted_clip(Bounds(200, 300), Bounds(250, 400)) == Bounds(250, 400)  # never wider than the bounds
    # at the threshold: (U - L) = 8 x (512 - 128) takes the clip, a hair narrower does not
    width = ADAPTIVE_WIDTH_RATIO * 384
    assert predicted_clip(Bounds(200, 300), Bounds(0, width)).upper == 512


def test_a_declared_typical_range_makes_the_clip_the_default_mean_and_sum(steward: dp.Session) -> None:
    events = register(steward, _latencies(), bounds=BOUNDS, typical={"latency": (200, 300)}, max_rows_per_unit=1)
    assert events.profile.columns["latency"].typical == (200, 300)
    plan = steward.preview(events.query().agg(m=dp.mean("latency"), s=dp.sum("latency")), epsilon=1)
    by = [(s.output, s.part.value, s.mechanism.value, s.chosen_by) for s in plan.steps]
    assert by == [
        ("mean(latency)", "clip", "approx_bounds", "default"),  # the plan names a statistic by its meaning
        ("mean(latency)", "centered_sum", "laplace", "default"),
        ("mean(latency)", "count", "laplace", "default"),
        ("sum(latency)", "clip", "approx_bounds", "default"),
        ("sum(latency)", "value", "laplace", "default"),
    ]
    # the mean's 3 shares split 9:13:9, the sum's 2 shares evenly: 5 even shares of 1/5 in all
    assert [s.loss for s in plan.steps] == [PureDP(Fraction(3, 5) * w / 31) for w in (9, 13, 9)] + [
        PureDP(Fraction(1, 5))
    ] * 2
    assert "2.6e+03x wider than the power-of-two cover [128, 512]" in plan.explain()


def test_the_default_clip_releases_a_far_closer_mean_and_sum(steward: dp.Session) -> None:
    frame = _latencies()
    truth_mean, truth_sum = float(frame["latency"].mean()), float(frame["latency"].sum())
    declared = register(
        steward, frame, bounds=BOUNDS, typical={"latency": (200, 300)}, max_rows_per_unit=1,
        budget=dp.Budget(epsilon=100, delta=1e-8), policy=policy(per_release_epsilon=1),
    )  # fmt: skip
    plain = register(
        steward, frame.assign(age=31), name="plain", bounds=BOUNDS, max_rows_per_unit=1,
        budget=dp.Budget(epsilon=100, delta=1e-8), policy=policy(per_release_epsilon=1),
    )  # fmt: skip
    errors: dict[str, list[tuple[float, float]]] = {"declared": [], "plain": []}
    with deterministic_entropy(3):
        for i in range(15):
            for name, ds in (("declared", declared), ("plain", plain)):
                query = fresh(ds.query(), "latency", i).agg(m=dp.mean("latency"), s=dp.sum("latency"))
                release = steward.release(query, epsilon=1, request_id=f"{name}-{i}")
                errors[name].append((abs(release.values["m"][0] - truth_mean), abs(release.values["s"][0] - truth_sum)))
    declared_err = np.median(np.array(errors["declared"]), axis=0)
    plain_err = np.median(np.array(errors["plain"]), axis=0)
    # Laplace on [0, 10^6]: mean noise ~ 10^6/(ε n) clamps at an edge, sum noise ~ 5 x 10^6; the clip [128, 512]
    assert declared_err[0] < 1.0 < 50.0 < plain_err[0]
    assert declared_err[1] * 100 < plain_err[1]
    release = steward.release(declared.query().agg(total=dp.sum("latency")), epsilon=1, request_id="explain")
    assert "adaptive clip: approximate bounds released first" in release.explain()


def test_a_wide_typical_range_or_a_named_mechanism_keeps_laplace(steward: dp.Session) -> None:
    events = register(steward, _latencies(), bounds=BOUNDS, typical={"latency": (0, 300_000)}, max_rows_per_unit=1)
    plan = steward.preview(events.query().agg(m=dp.mean("latency")), epsilon=1)
    assert [s.part.value for s in plan.steps] == ["centered_sum", "count"]  # the cover [0, 2^19] is only 1.9x narrower
    narrow = register(
        steward, _latencies().assign(age=29), name="narrow", bounds=BOUNDS, typical={"latency": (200, 300)},
        max_rows_per_unit=1,
    )  # fmt: skip
    named = steward.preview(narrow.query().agg(m=dp.mean("latency", mechanism="laplace")), epsilon=1)
    assert [s.part.value for s in named.steps] == ["centered_sum", "count"]
    overridden = steward.preview(narrow.query().agg(s=dp.sum("latency", bounds=(0, 1000))), epsilon=1)
    assert [s.part.value for s in overridden.steps] == ["value"]  # [0, 1000] is 2.6x the cover: no clip
    # the median and the count ignore the typical range
    other = steward.preview(narrow.query().agg(q=dp.median("latency"), n=dp.count()), epsilon=1)
    assert [s.mechanism.value for s in other.steps] == ["laplace", "em_quantile"]


@pytest.mark.parametrize(
    ("typical", "message"),
    [
        ({"latency": (-5, 300)}, "inside its declared bounds"),
        ({"latency": (300, 200)}, "reversed"),
        ({"latency": (200, 200)}, "an interval a < b"),
        ({"region": (0, 1)}, "numeric or integer column"),
        ({"missing": (0, 1)}, "typical name a column the source does not have"),
        ({"latency": "200:300"}, "must be a pair"),
    ],
)
def test_bad_typical_ranges_are_refused_before_anything_is_registered(
    steward: dp.Session, typical: dict[str, object], message: str
) -> None:
    with pytest.raises(dp.DPSenseError, match=message):
        register(steward, _latencies(100), bounds=BOUNDS, typical=typical)
    assert steward.datasets() == []


def test_a_typical_range_without_bounds_is_refused(steward: dp.Session) -> None:
    with pytest.raises(dp.DPSenseError, match="needs the column's declared bounds"):
        register(steward, _latencies(100), bounds={"age": (0, 120)}, typical={"latency": (200, 300)})


def test_registering_the_same_data_with_another_typical_range_is_a_conflict(steward: dp.Session) -> None:
    frame = _latencies(200)
    register(steward, frame, bounds=BOUNDS, typical={"latency": (200, 300)})
    with pytest.raises(dp.RegistrationConflict, match="typical of column 'latency'"):
        register(steward, frame, name="again", bounds=BOUNDS, typical={"latency": (100, 300)})


def test_the_rule_reads_only_public_facts() -> None:
    from dpsense.query import AggregateIR, AggregateKind

    def agg(bounds: tuple[int, int], typical: tuple[int, int] | None, mechanism: str | None = None) -> AggregateIR:
        return AggregateIR(
            name="m", kind=AggregateKind.MEAN, columns=("x",), bounds=((Fraction(bounds[0]), Fraction(bounds[1])),),
            max_rows_per_unit=1, mechanism=mechanism, q=None, trim_fraction=None, keys=None,
            typical=None if typical is None else (Fraction(typical[0]), Fraction(typical[1])),
        )  # fmt: skip

    assert adaptive_by_default(agg((0, 10**6), (200, 300)))
    assert not adaptive_by_default(agg((0, 10**6), None))
    assert not adaptive_by_default(agg((0, 10**6), (200, 300), mechanism="laplace"))
    assert adaptive_by_default(agg((0, 8 * 384), (200, 300)))  # exactly at the ratio
    assert not adaptive_by_default(agg((0, 8 * 384 - 1), (200, 300)))
