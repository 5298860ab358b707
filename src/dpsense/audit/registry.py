"""Every audit scenario: the classical mechanisms, the beyond-global ones, the release scenarios, the controls."""

from __future__ import annotations

from dpsense.audit._types import Scenario
from dpsense.audit.release_scenarios import release_scenarios
from dpsense.audit.scenarios import classical_scenarios
from dpsense.audit.smooth_scenarios import smooth_scenarios


def all_scenarios() -> list[Scenario]:
    """Every registered audit scenario (classical and beyond-global mechanisms, and the controls)."""
    scenarios = classical_scenarios() + smooth_scenarios() + release_scenarios()
    return sorted(scenarios, key=lambda s: s.control)  # stable: the controls last
