"""clipped_count: the number of rows whose value lies outside the public bounds (the rows clipping moves).

A count of rows: the sensitivity of ``count`` (docs/math/global-sensitivity.md §1.3), on the same
bounded rows as the statistic it concerns. Mechanisms: Laplace (default), Gaussian, geometric.
"""

from __future__ import annotations

from typing import ClassVar

from dpsense.query._aggregates import AggregateKind
from dpsense.statistics.count import Count


class ClippedCount(Count):
    """Rows outside [L, U], counted like ``count``."""

    kind: ClassVar[AggregateKind] = AggregateKind.CLIPPED_COUNT
