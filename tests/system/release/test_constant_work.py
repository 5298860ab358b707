"""``Session(constant_work=K)``: every smooth-sensitivity step evaluates K terms (public work), not an early stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dpsense as dp
from dpsense import mechanisms
from tests.system.release.support import planted, register


def test_constant_work_reaches_the_smooth_mechanism(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = mechanisms.smooth_min_distance

    def recording(*args: Any, **kwargs: Any) -> Any:  # the real mechanism, its arguments recorded
        seen.append(kwargs.get("constant_work"))
        return real(*args, **kwargs)

    monkeypatch.setattr(mechanisms, "smooth_min_distance", recording)
    for work in (None, 256):
        url = f"sqlite:///{tmp_path / f'ledger{work}.db'}"
        with dp.Session.open(url, analyst="steward", role="steward", constant_work=work) as session:
            assert session.constant_work == work
            events = register(session, planted(), kinds={"hours": "point"})
            release = session.release(events.query().agg(g=dp.min_distance(["hours"])), epsilon=1)
            assert 0 <= release.table["g"].iloc[0] <= 24
    assert seen == [None, 256]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64"])
def test_constant_work_must_be_a_positive_integer(tmp_path: Path, bad: object) -> None:
    with pytest.raises(dp.DPSenseError, match="constant_work"):
        dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="a", constant_work=bad)  # type: ignore[arg-type]
