"""The shared rule of the statistics whose default is smooth sensitivity with Cauchy noise."""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.query._ir import AggregateIR
from dpsense.query._planner_rules import Choice
from dpsense.statistics._base import Statistic


class SmoothDefault(Statistic):
    """Data-dependent, collected, and smooth sensitivity with Cauchy noise by default (benchmarks/estimators.py)."""

    data_dependent: ClassVar[bool] = True
    collects: ClassVar[bool] = True

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """Smooth sensitivity with Cauchy noise (pure ε-DP): the accuracy benchmark's default."""
        return Choice(self.mechanisms[0], "default", "the accuracy benchmark's default (Cauchy noise)")
