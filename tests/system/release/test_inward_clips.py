"""Every clip a release sends to an engine lies inside the declared bounds (issue 13: inward, not nearest).

``float(Fraction(7, 10))`` is below 7/10 and ``float(Fraction(11, 10))`` above 11/10: a clip at the
nearest doubles would let a clipped value leave the [L, U] on which the sensitivity was computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

import dpsense as dp
from dpsense.engine._types import Clip
from dpsense.statistics._steps import bounded_sum
from tests.system.release.support import planted, register

LOW, HIGH = Fraction(7, 10), Fraction(11, 10)


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


def test_bounded_sum_clips_inside_the_exact_bounds() -> None:
    assert float(LOW) < LOW and float(HIGH) > HIGH  # the nearest doubles lie outside on both sides
    spec = bounded_sum("hours", LOW, HIGH)
    assert LOW <= Fraction(spec.clip.low) <= Fraction(spec.clip.high) <= HIGH


def test_every_clip_of_a_release_lies_inside_the_declared_bounds(
    steward: dp.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    clips: list[Clip] = []
    original = Clip.__post_init__

    def recording(self: Clip) -> None:
        original(self)
        clips.append(self)

    monkeypatch.setattr(Clip, "__post_init__", recording)
    events = register(steward, planted(), bounds={"hours": ("0.7", "1.1"), "age": (0, 120)})
    query = (
        events.query()
        .group_by("region")
        .agg(s=dp.sum("hours"), m=dp.mean("hours"), v=dp.variance("hours"), c=dp.clipped_count("hours"))
    )
    steward.release(query, epsilon=2)
    hours = [c for c in clips if c.column == "hours"]
    assert hours  # the sum, mean, variance and clipped count all clip at the engine
    for c in hours:
        assert LOW <= Fraction(c.low) <= Fraction(c.high) <= HIGH, c
