"""The audit's plain types: a scenario (a mechanism, its claim, a sampler of neighbouring outputs) and its row.

Every scenario module imports these from here, and ``registry.all_scenarios`` lists them all, so no
scenario module imports another's registry (no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpsense.audit.empirical import AuditResult, epsilon_lower_bound

F64 = NDArray[np.float64]
Sampler = Callable[[int], tuple[F64, F64]]


@dataclass(frozen=True)
class Scenario:
    """One audit: a mechanism, its claim, and a sampler of outputs on two neighbouring inputs."""

    name: str
    epsilon: float
    delta: float
    neighbours: str
    sample: Sampler
    control: bool = False
    slow: bool = False


@dataclass(frozen=True)
class AuditRow:
    """A scenario's claim next to its empirical lower bound."""

    scenario: Scenario
    result: AuditResult

    @property
    def flagged(self) -> bool:
        """True when the lower bound exceeds the claimed epsilon."""
        return self.result.epsilon_lower_bound > self.scenario.epsilon


def run_audit(scenario: Scenario, *, samples: int, alpha: float = 1e-9) -> AuditRow:
    """Draw ``samples`` outputs per side and bound epsilon from below at the scenario's delta."""
    x, y = scenario.sample(samples)
    return AuditRow(scenario, epsilon_lower_bound(x, y, delta=scenario.delta, alpha=alpha))
