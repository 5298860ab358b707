"""Privacy-loss-distribution (PLD) accounting through Google's ``dp_accounting`` (optional extra).

Method (docs/math/composition.md; Meiser-Mohammadi 2018, Koskela et al. 2020, Google
``dp_accounting``): for a dominating pair (P, Q) the privacy loss is L = ln(P(Y)/Q(Y)), Y ~ P, and
δ(ε) = E[(1 - e^{ε - L})_+] plus the mass at L = ∞. Composition convolves loss distributions on a
grid. Every PLD here is built with ``pessimistic_estimate=True``: losses are rounded *up* to the
grid and truncated mass is moved to L = ∞, so the δ(ε) and ε(δ) returned are upper bounds.

Events are one-dimensional releases:

* ``LaplaceEvent(scale=b, sensitivity=Δ)``: f(x) + Lap(b) with |f(x) - f(x')| <= Δ. Its exact
  curve is δ(ε) = 1 - exp((ε - Δ/b)/2) for 0 <= ε <= Δ/b and 0 beyond. A d-dimensional Laplace
  release is covered by one event per coordinate (each with its own coordinate sensitivity).
* ``GaussianEvent(sigma=σ, sensitivity=Δ)``: f(x) + N(0, σ²) with ||f(x) - f(x')||_2 <= Δ (by
  rotation invariance this also covers d-dimensional releases with L2 sensitivity Δ).

Both noise distributions are symmetric, so add/remove and replace adjacency give the same PLD once
Δ is the sensitivity under the adjacency actually enforced. ``dp_accounting`` is imported inside
the functions, so ``dpsense.accounting`` stays importable without it
(``pip install 'dpsense[accounting]'``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpsense.accounting._checks import epsilon_query, positive_delta, positive_float, sensitivity_float
from dpsense.core.errors import UnsupportedRequest, UsageError
from dpsense.core.numbers import NumberLike, round_up
from dpsense.core.privacy_loss import ApproxDP

#: Default width of the privacy-loss grid. The pessimistic ε overshoots the exact one by at most
#: about (number of distinct events) x this width.
DEFAULT_DISCRETIZATION = 1e-4


@dataclass(frozen=True)
class LaplaceEvent:
    """One Laplace release: noise scale b (density e^{-|z|/b}/(2b)) and L1 sensitivity Δ."""

    scale: float
    sensitivity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_float(self.scale, name="scale", example="scale=2.0"))
        object.__setattr__(self, "sensitivity", sensitivity_float(self.sensitivity))


@dataclass(frozen=True)
class GaussianEvent:
    """One Gaussian release: noise standard deviation σ and L2 sensitivity Δ."""

    sigma: float
    sensitivity: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", positive_float(self.sigma, name="sigma", example="sigma=2.0"))
        object.__setattr__(self, "sensitivity", sensitivity_float(self.sensitivity))


PldEvent = LaplaceEvent | GaussianEvent


def pld_epsilon(
    events: Sequence[PldEvent], *, delta: NumberLike, discretization: float = DEFAULT_DISCRETIZATION
) -> ApproxDP:
    """The (ε, δ)-DP guarantee of composing the events, ε from the pessimistic PLD, rounded up.

    ε = the smallest ε >= 0 whose hockey-stick divergence of the composed pessimistic PLD is <= δ
    (``dp_accounting`` ``get_epsilon_for_delta``), an upper bound on the exact ε.

    Args:
        events: the releases to compose (adaptively), in any order.
        delta: the target δ in (0, 1).
        discretization: the width of the privacy-loss grid (> 0); smaller is tighter and slower.

    Returns:
        ``ApproxDP(ε, δ)``.

    Raises:
        UsageError: an event of an unknown type, or δ below the PLD's numerical floor (the
            probability mass the pessimistic PLD had to place at infinite loss).
        UnsupportedRequest: ``dp_accounting`` is not installed.

    """
    d = positive_delta(delta)
    pld = _composed(events, discretization)
    if pld is None:
        return ApproxDP(0, d)
    eps = float(pld.get_epsilon_for_delta(float(d)))
    if not math.isfinite(eps):
        raise UsageError(
            "delta is below the PLD accountant's numerical floor (mass at infinite privacy loss)",
            float(d),
            "use a larger delta, or the exact balle_wang_delta for Gaussian-only compositions",
        )
    return ApproxDP(round_up(eps, scale=eps), d)


def pld_delta(
    events: Sequence[PldEvent], *, epsilon: NumberLike, discretization: float = DEFAULT_DISCRETIZATION
) -> float:
    """The δ(ε) of composing the events, from the pessimistic PLD (an upper bound).

    δ(ε) = E[(1 - e^{ε - L})_+] + P[L = ∞] for the composed pessimistic privacy loss L.

    Args:
        events: the releases to compose (adaptively), in any order.
        epsilon: the ε >= 0 at which to evaluate δ.
        discretization: the width of the privacy-loss grid (> 0).

    Returns:
        δ(ε) as a float in [0, 1].

    Raises:
        UsageError: an event of an unknown type.
        UnsupportedRequest: ``dp_accounting`` is not installed.

    """
    eps = epsilon_query(epsilon)
    pld = _composed(events, discretization)
    if pld is None:
        return 0.0
    return min(1.0, float(pld.get_delta_for_epsilon(float(eps))))


def _composed(events: Sequence[PldEvent], discretization: float) -> Any:
    """The composed pessimistic PLD of the events, or None when no event leaks anything."""
    width = positive_float(discretization, name="discretization", example="discretization=1e-4")
    for position, event in enumerate(events):
        if not isinstance(event, (LaplaceEvent, GaussianEvent)):
            raise UsageError(
                "PLD events must be LaplaceEvent or GaussianEvent",
                f"element {position}: {type(event).__name__}",
                "describe each release as LaplaceEvent(scale, sensitivity) or GaussianEvent(sigma, sensitivity)",
            )
    groups = Counter(event for event in events if event.sensitivity > 0)
    if not groups:
        return None
    module = _pld_module()
    composed: Any = None
    for event, times in sorted(groups.items(), key=lambda item: repr(item[0])):
        if isinstance(event, LaplaceEvent):
            single = module.from_laplace_mechanism(
                event.scale,
                sensitivity=event.sensitivity,
                pessimistic_estimate=True,
                value_discretization_interval=width,
            )
        else:
            single = module.from_gaussian_mechanism(
                event.sigma,
                sensitivity=event.sensitivity,
                pessimistic_estimate=True,
                value_discretization_interval=width,
            )
        part = single.self_compose(times) if times > 1 else single
        composed = part if composed is None else composed.compose(part)
    return composed


def _pld_module() -> Any:
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError:
        raise UnsupportedRequest(
            "PLD accounting needs the optional dependency dp-accounting",
            "dp_accounting not importable",
            "pip install 'dpsense[accounting]' (or use the RDP / zCDP accountants, which need no extra)",
        ) from None
    return privacy_loss_distribution
