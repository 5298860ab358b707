"""What every mechanism returns: the noisy value, the privacy loss it cost, and public accuracy.

``Accuracy`` is computed from public parameters only (epsilon, delta, the declared sensitivity and
the noise family), never from the data, so it may be shown to anyone who sees the release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpsense.core.privacy_loss import PrivacyLoss


@dataclass(frozen=True)
class Accuracy:
    """A public description of the noise added to one released value.

    Attributes:
        noise: the noise family actually sampled, e.g. ``"discrete Laplace on grid 2^-39"``.
        scale: the noise scale (Laplace b, Gaussian sigma, ...) in the units of the value.
        mean_abs_error: E|noise| in the units of the value.
        confidence: 1 - beta for ``error_bound``.
        error_bound: a bound that |noise| stays below with probability >= ``confidence``.

    """

    noise: str
    scale: float
    mean_abs_error: float
    confidence: float
    error_bound: float

    def __str__(self) -> str:
        return (
            f"{self.noise}: scale {self.scale:.6g}, E|noise| {self.mean_abs_error:.6g}, "
            f"|noise| <= {self.error_bound:.6g} with probability {self.confidence:g}"
        )


@dataclass(frozen=True)
class MechanismResult:
    """A noisy output with its cost and its public accuracy statement.

    Attributes:
        value: the released (noisy) value; a float, int, numpy array or a chosen candidate.
        loss: the privacy loss this release cost under ``adjacency`` of the declared unit.
        accuracy: the public accuracy statement (``None`` when the mechanism has none, e.g. selection).
        mechanism: the mechanism's name and version, e.g. ``"laplace/grid@1"``.
        guarantee: one sentence naming the guarantee and the theorem it rests on.
        details: further public parameters (granularity, integer scale, ...).

    """

    value: Any
    loss: PrivacyLoss
    accuracy: Accuracy | None
    mechanism: str
    guarantee: str
    details: dict[str, Any] = field(default_factory=dict)
