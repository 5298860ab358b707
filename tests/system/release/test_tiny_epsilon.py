"""A tiny ε must not make a release fail after data access (docs/design.md invariant 6).

A statistic on a noisy public n resizes its values to n^ = the noisy count. At ε = 1e-9 the count's
noise is in the billions, and resizing to such an n^ asked for tens of GiB: a ChargedFailure after
data access whose chance depends on the true count. n^ is now clamped to a public cap (the policy's
population x C, at most 2^25, 2^15 for the quadratic inverse-sensitivity trimmed mean): post-processing
of the released count.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

import dpsense as dp
from dpsense.core.errors import ChargedFailure, UsageError
from dpsense.release._data_dependent import MAX_PUBLIC_SIZE, public_size, public_size_cap
from tests.system.release.support import planted, register


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        yield session


AGGREGATES = {
    "smooth_median": (lambda: dp.median("age", mechanism="smooth_median"), 0),
    "smooth_quantile": (lambda: dp.quantile("age", 0.9, mechanism="smooth_quantile"), 0),
    "trimmed_mean": (lambda: dp.trimmed_mean("age", 0.1), 0),
    "inverse_trimmed_mean": (lambda: dp.trimmed_mean("age", 0.1, mechanism="inverse_sensitivity_trimmed_mean"), 0),
    "ptr_median": (lambda: dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1), 1e-9),
    "em_median": (lambda: dp.median("age"), 0),  # the default: the EM quantile, its rank window
    "em_quantiles": (lambda: dp.quantiles("age", [0.1, 0.5, 0.9]), 0),
}


@pytest.mark.parametrize("epsilon", [1e-9, 1e-12, 1e-30])
@pytest.mark.parametrize("name", sorted(AGGREGATES))
@pytest.mark.parametrize("grouped", [False, True])
def test_a_tiny_epsilon_is_released_or_refused_before_the_ledger(
    steward: dp.Session, epsilon: float, name: str, grouped: bool
) -> None:
    events = register(steward, planted(persons=40))
    make, delta = AGGREGATES[name]
    query = events.query()
    if grouped:
        query = query.group_by("region").max_groups_per_unit(1)
    for i in range(3):  # three distinct releases: three noise draws of n^
        before = steward.budget("events").spent
        try:
            release = steward.release(query.filter("age", ">=", -i).agg(v=make()), epsilon=epsilon, delta=delta)
        except ChargedFailure:  # pragma: no cover - the failure this test exists to catch
            pytest.fail(f"{name} at ε = {epsilon} failed after data access")
        except UsageError:
            assert steward.budget("events").spent == before  # refused before the ledger: nothing charged
            continue
        columns = [c for c in release.table.columns if c == "v" or c.startswith("v_")]  # quantiles: v_<q> each
        assert columns
        cells = [v for c in columns for v in release.table[c]]
        values = [v for v in cells if v is not None and not (isinstance(v, float) and math.isnan(v))]
        assert all(0 <= v <= 120 for v in values)


def test_the_public_size_is_the_clamped_rounded_count() -> None:
    cap = public_size_cap(600 * 5)
    assert cap == 3000
    assert public_size_cap(None) == MAX_PUBLIC_SIZE == public_size_cap(10**12)
    assert public_size_cap(10**12, "inverse_sensitivity_trimmed_mean") == 1 << 15 < MAX_PUBLIC_SIZE
    assert [public_size(v, cap) for v in (-5.0, 0.2, 0.6, 41.5, 2999.4, 3000.0, 1e18)] == [
        1,
        1,
        1,
        42,
        2999,
        3000,
        3000,
    ]
    assert public_size(float("inf"), cap) == cap and public_size(float("nan"), cap) == cap
    assert public_size(float("-inf"), cap) == 1
