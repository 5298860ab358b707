"""approx_bounds: private approximate bounds [low, high] of a numeric column, for choosing a clip.

A geometric-noise histogram over public log2 bins (L1 sensitivity C, 2C under replace: the count
vector of ``histogram``), thresholded by post-processing (``dpsense.mechanisms.approx_bounds``;
pure ε-DP; docs/math/global-sensitivity.md). Released ungrouped, as two columns.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Mechanism
from dpsense.query._planner_rules import Choice
from dpsense.statistics.histogram import Histogram


class ApproxBounds(Histogram):
    """The log2 histogram of one column's values, thresholded."""

    kind: ClassVar[AggregateKind] = AggregateKind.APPROX_BOUNDS
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (Mechanism.APPROX_BOUNDS,)
    collects: ClassVar[bool] = True

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction) -> Choice:
        """Its only mechanism."""
        return Choice(Mechanism.APPROX_BOUNDS, "default", "the only mechanism for approximate bounds")
