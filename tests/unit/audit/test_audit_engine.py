from __future__ import annotations

import numpy as np
import pytest

from dpsense.audit import epsilon_lower_bound
from dpsense.audit.scenarios import classical_scenarios, run_audit
from dpsense.cli import main
from dpsense.mechanisms.laplace import laplace


def test_bound_is_below_the_claim_and_tight_for_laplace() -> None:
    n = 200_000
    x = laplace(np.zeros(n), sensitivity=1, epsilon=1).value
    y = laplace(np.ones(n), sensitivity=1, epsilon=1).value
    result = epsilon_lower_bound(x, y)
    assert 0.7 < result.epsilon_lower_bound <= 1.0


def test_an_impossible_event_gives_a_bound_growing_with_samples() -> None:
    small = epsilon_lower_bound(np.zeros(1000), np.ones(1000)).epsilon_lower_bound
    large = epsilon_lower_bound(np.zeros(100_000), np.ones(100_000)).epsilon_lower_bound
    assert 2.5 < small < large and large > 7


def test_refusals_are_outcomes() -> None:
    x = np.full(2000, np.nan)
    y = np.concatenate([np.full(1000, np.nan), np.zeros(1000)])
    result = epsilon_lower_bound(x, y)
    assert result.epsilon_lower_bound > 0.4


def test_control_is_caught_and_correct_mechanisms_pass() -> None:
    rows = {s.name: run_audit(s, samples=100_000) for s in classical_scenarios() if not s.slow}
    assert rows["control: Laplace at half the scale"].flagged
    assert not any(r.flagged for name, r in rows.items() if not name.startswith("control"))


def test_cli_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--samples", "20000", "--only", "laplace", "--controls"]) == 0
    out = capsys.readouterr().out
    assert "claim ε" in out and "caught" in out and "laplace" in out


@pytest.mark.statistical
def test_the_em_with_decimal_points_under_replace_passes_and_its_fast_cells_control_is_caught() -> None:
    """§8.7's rates under replace: the released mechanism stays under ε, the cells at twice their rate do not."""
    by_name = {s.name: s for s in classical_scenarios()}
    released = run_audit(by_name["em_quantile decimal points, replace"], samples=20_000)
    control = run_audit(by_name["control: EM decimal points with the cells twice as fast"], samples=200_000)
    assert not released.flagged, released.result
    assert control.flagged, control.result
