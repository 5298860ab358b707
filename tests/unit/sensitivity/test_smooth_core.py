from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from dpsense.core import InvalidPrivacyParameter, UsageError
from dpsense.sensitivity.smooth import PersonLevel, distance_to_instability, smooth_upper_bound


@dataclass(frozen=True)
class Table:
    """A family given by a table of U_k values (beyond the table: the cap)."""

    values: tuple[float, ...]
    cap: float

    def upper(self, k: int) -> float:
        return self.values[k] if k < len(self.values) else self.cap


def brute(values: tuple[float, ...], cap: float, beta: float) -> float:
    terms = [math.exp(-k * beta) * min(cap, v) for k, v in enumerate(values)]
    return max([*terms, math.exp(-len(values) * beta) * cap])


@pytest.mark.parametrize("beta", [0.05, 0.5, 2.0])
def test_early_stop_equals_the_untruncated_maximum(beta: float) -> None:
    fam = Table((0.0, 0.0, 1.0, 1.0, 3.0, 50.0, 60.0, 100.0), 100.0)
    assert smooth_upper_bound(fam, beta=beta) == pytest.approx(brute(fam.values, 100.0, beta))


def test_constant_work_adds_the_tail_term() -> None:
    fam = Table((0.0,) * 50, 100.0)
    assert smooth_upper_bound(fam, beta=0.1, constant_work=3) == pytest.approx(100 * math.exp(-0.3))
    # without the tail term the bound would be 0 here: a privacy bug (not smooth)
    assert smooth_upper_bound(fam, beta=0.1) == pytest.approx(100 * math.exp(-0.1 * 50))


def test_distance_to_instability_scans_to_the_first_exceedance() -> None:
    fam = Table((0.0, 0.5, 0.9, 2.0), 10.0)
    assert distance_to_instability(fam, bound=1.0, cap=100) == 3
    assert distance_to_instability(fam, bound=0.1, cap=100) == 1
    assert distance_to_instability(fam, bound=20.0, cap=7) == 7


def test_person_level_multiplies_unless_direct() -> None:
    fam = Table((1.0, 2.0, 3.0, 4.0, 5.0, 6.0), 10.0)
    general = PersonLevel(fam, 2)
    assert general.upper(0) == 2 * 2.0 and general.upper(1) == 2 * 4.0 and general.cap == 20.0
    direct = PersonLevel(fam, 2, direct=True)
    assert direct.upper(0) == 2.0 and direct.cap == 10.0


@pytest.mark.parametrize("beta", [0, -1, float("nan"), float("inf"), True, "0.1"])
def test_bad_beta_refused(beta: object) -> None:
    with pytest.raises(InvalidPrivacyParameter):
        smooth_upper_bound(Table((1.0,), 1.0), beta=beta)  # type: ignore[arg-type]


def test_bad_work_bounds_refused() -> None:
    with pytest.raises(UsageError):
        smooth_upper_bound(Table((1.0,), 1.0), beta=0.1, constant_work=0)
    with pytest.raises(UsageError):
        distance_to_instability(Table((1.0,), 1.0), bound=1.0, cap=0)
    with pytest.raises(UsageError):
        PersonLevel(Table((1.0,), 1.0), 0)
