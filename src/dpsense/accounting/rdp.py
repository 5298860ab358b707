"""Renyi DP (Mironov 2017): curves of common mechanisms, composition, conversion to (ε, δ).

A mechanism is (α, ε(α))-RDP when the Renyi divergence of order α between its output
distributions on neighbouring inputs is at most ε(α). Formulas (docs/math/composition.md):

* Gaussian, L2 sensitivity Δ, standard deviation σ: ε(α) = αΔ²/(2σ²).
* Laplace, scale b, L1 sensitivity Δ, t = Δ/b (Mironov 2017, Prop 6):
  ε(α) = (1/(α-1)) ln( (α/(2α-1)) e^{(α-1)t} + ((α-1)/(2α-1)) e^{-αt} ), evaluated as
  t + log1p((α-1)/(2α-1) · expm1((1-2α)t)) / (α-1) (the same value, stable near α = 1).
* Binary randomized response reporting the true bit with probability p:
  ε(α) = (1/(α-1)) ln( p^α (1-p)^{1-α} + (1-p)^α p^{1-α} ).
* Any pure ε-DP mechanism (tight; the worst case is randomized response with p = e^ε/(1+e^ε)):
  ε̂(α) = (1/(α-1)) ln( e^{αε}/(e^ε+1) + e^ε e^{-αε}/(e^ε+1) ).

Composition adds the curves order by order (Mironov 2017, Prop 1). Conversion to (ε, δ)-DP,
minimised over the order grid and rounded up:

* Mironov 2017, Prop 3: ε = ε(α) + ln(1/δ)/(α-1).
* Canonne-Kamath-Steinke 2020 / Balle et al. 2020 (tighter, used by default):
  ε = ε(α) + ln(1 - 1/α) - (ln δ + ln α)/(α-1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpsense.accounting._checks import (
    count,
    epsilon_target,
    positive_delta,
    positive_float,
    renyi_order,
    sensitivity_float,
)
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, round_up, to_fraction
from dpsense.core.privacy_loss import ApproxDP, check_rho

#: The default grid of Renyi orders (the same grid as Google's ``dp_accounting`` RdpAccountant):
#: 1.1, 1.2, ..., 10.9, then 11, 12, ..., 63, then 128, 256, 512, 1024.
DEFAULT_ORDERS: tuple[float, ...] = (
    tuple(1.0 + x / 10.0 for x in range(1, 100))
    + tuple(float(a) for a in range(11, 64))
    + (128.0, 256.0, 512.0, 1024.0)
)


def gaussian_rdp(alpha: NumberLike, *, sigma: NumberLike, sensitivity: NumberLike) -> float:
    """RDP of the Gaussian mechanism at order α: αΔ²/(2σ²) (Mironov 2017, Prop 7).

    Args:
        alpha: the Renyi order (> 1).
        sigma: the noise standard deviation (> 0).
        sensitivity: the L2 sensitivity Δ (>= 0) under the declared adjacency.

    Returns:
        ε(α) as a float.

    """
    a = renyi_order(alpha)
    s = positive_float(sigma, name="sigma", example="sigma=2.0")
    delta = sensitivity_float(sensitivity)
    return a * delta * delta / (2.0 * s * s)


def laplace_rdp(alpha: NumberLike, *, scale: NumberLike, sensitivity: NumberLike) -> float:
    """RDP of the Laplace mechanism at order α (Mironov 2017, Prop 6, with 1/b replaced by Δ/b).

    ε(α) = (1/(α-1)) ln((α/(2α-1)) e^{(α-1)t} + ((α-1)/(2α-1)) e^{-αt}), t = Δ/b, computed as
    t + log1p((α-1)/(2α-1) expm1((1-2α)t))/(α-1).

    Args:
        alpha: the Renyi order (> 1).
        scale: the Laplace scale b (> 0); the density is e^{-|z|/b}/(2b).
        sensitivity: the L1 sensitivity Δ (>= 0) under the declared adjacency.

    Returns:
        ε(α) as a float.

    """
    a = renyi_order(alpha)
    b = positive_float(scale, name="scale", example="scale=2.0")
    t = sensitivity_float(sensitivity) / b
    return _laplace(a, t)


def randomized_response_rdp(alpha: NumberLike, *, p: NumberLike) -> float:
    """RDP of binary randomized response that keeps the true bit with probability p.

    ε(α) = (1/(α-1)) ln(p^α (1-p)^{1-α} + (1-p)^α p^{1-α}) (Renyi divergence between the
    two-point distributions (p, 1-p) and (1-p, p)), evaluated with logaddexp.

    Args:
        alpha: the Renyi order (> 1).
        p: the probability of reporting the true bit, in (0, 1).

    Returns:
        ε(α) as a float.

    """
    a = renyi_order(alpha)
    prob = _probability(p)
    # log(1 - p) from the exact rational keeps precision when p is within 1e-16 of 1
    return _randomized_response(a, math.log(prob), math.log(1 - prob))


def pure_dp_rdp(alpha: NumberLike, *, epsilon: NumberLike) -> float:
    """The tight RDP curve implied by pure ε-DP (attained by randomized response).

    ε̂(α) = (1/(α-1)) ln(e^{αε}/(e^ε+1) + e^ε e^{-αε}/(e^ε+1)) (docs/math/composition.md;
    Steinke 2024), evaluated as (logaddexp((α-1)ε, -αε) - ln(1+e^{-ε}))/(α-1). It is at most
    min(ε, αε²/2).

    Args:
        alpha: the Renyi order (> 1).
        epsilon: the pure-DP epsilon (> 0).

    Returns:
        ε̂(α) as a float.

    """
    a = renyi_order(alpha)
    eps = float(epsilon_target(epsilon))
    return _pure(a, eps)


@dataclass(frozen=True)
class RdpCurve:
    """An RDP guarantee sampled on a fixed grid of orders; immutable, composed by ``+``.

    ``epsilons[j]`` bounds the Renyi divergence of order ``orders[j]``. Composition adds curves on
    the same grid (Mironov 2017, Prop 1); ``times(k)`` is the k-fold composition. Conversions to
    (ε, δ)-DP minimise over the grid and round up.

    Attributes:
        orders: strictly increasing Renyi orders, each finite and > 1.
        epsilons: the RDP bound at each order, >= 0 (``inf`` is allowed and simply never chosen).

    """

    orders: tuple[float, ...]
    epsilons: tuple[float, ...]

    def __post_init__(self) -> None:
        orders = tuple(renyi_order(a, name="order") for a in self.orders)
        if not orders or any(b <= a for a, b in itertools.pairwise(orders)):
            raise InvalidPrivacyParameter(
                "RDP orders must be a non-empty, strictly increasing sequence", self.orders, "pass e.g. DEFAULT_ORDERS"
            )
        epsilons = tuple(float(e) for e in self.epsilons)
        if len(epsilons) != len(orders) or any(math.isnan(e) or e < 0 for e in epsilons):
            raise InvalidPrivacyParameter(
                "RDP epsilons must be one value >= 0 per order",
                f"{len(epsilons)} values for {len(orders)} orders",
                "build curves with the RdpCurve constructors (gaussian, laplace, ...)",
            )
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "epsilons", epsilons)

    @classmethod
    def zero(cls, orders: Sequence[float] = DEFAULT_ORDERS) -> RdpCurve:
        """The curve of releasing nothing (the identity of composition)."""
        return cls(tuple(orders), tuple(0.0 for _ in orders))

    @classmethod
    def from_function(cls, rdp: Callable[[float], float], orders: Sequence[float] = DEFAULT_ORDERS) -> RdpCurve:
        """Sample an RDP curve ``rdp(alpha)`` on the grid (for mechanisms without a constructor)."""
        return cls(tuple(orders), tuple(float(rdp(float(a))) for a in orders))

    @classmethod
    def gaussian(
        cls, *, sigma: NumberLike, sensitivity: NumberLike, orders: Sequence[float] = DEFAULT_ORDERS
    ) -> RdpCurve:
        """The Gaussian mechanism's curve αΔ²/(2σ²) (see ``gaussian_rdp``)."""
        return cls.from_function(lambda a: gaussian_rdp(a, sigma=sigma, sensitivity=sensitivity), orders)

    @classmethod
    def laplace(
        cls, *, scale: NumberLike, sensitivity: NumberLike, orders: Sequence[float] = DEFAULT_ORDERS
    ) -> RdpCurve:
        """The Laplace mechanism's curve (see ``laplace_rdp``)."""
        return cls.from_function(lambda a: laplace_rdp(a, scale=scale, sensitivity=sensitivity), orders)

    @classmethod
    def randomized_response(cls, *, p: NumberLike, orders: Sequence[float] = DEFAULT_ORDERS) -> RdpCurve:
        """Binary randomized response's curve (see ``randomized_response_rdp``)."""
        return cls.from_function(lambda a: randomized_response_rdp(a, p=p), orders)

    @classmethod
    def pure_dp(cls, *, epsilon: NumberLike, orders: Sequence[float] = DEFAULT_ORDERS) -> RdpCurve:
        """The tight curve of an arbitrary pure ε-DP mechanism (see ``pure_dp_rdp``)."""
        return cls.from_function(lambda a: pure_dp_rdp(a, epsilon=epsilon), orders)

    @classmethod
    def zcdp(cls, *, rho: NumberLike, orders: Sequence[float] = DEFAULT_ORDERS) -> RdpCurve:
        """The curve αρ of a ρ-zCDP mechanism (definition of zCDP, Bun-Steinke 2016)."""
        r = float(check_rho(rho, allow_zero=True))
        return cls.from_function(lambda a: a * r, orders)

    def __add__(self, other: RdpCurve) -> RdpCurve:
        if not isinstance(other, RdpCurve):
            return NotImplemented
        if other.orders != self.orders:
            raise UsageError(
                "RDP curves compose only on the same grid of orders",
                f"{len(self.orders)} vs {len(other.orders)} orders",
                "build every curve with the same orders= argument (default DEFAULT_ORDERS)",
            )
        return RdpCurve(self.orders, tuple(a + b for a, b in zip(self.epsilons, other.epsilons, strict=True)))

    def times(self, k: int) -> RdpCurve:
        """The k-fold composition of this mechanism with itself (k >= 1)."""
        n = count(k)
        return RdpCurve(self.orders, tuple(n * e for e in self.epsilons))

    def to_approx(self, delta: NumberLike) -> ApproxDP:
        """(ε, δ)-DP by the CKS 2020 / Balle et al. 2020 conversion, minimised over the grid.

        ε = min_α [ε(α) + ln(1 - 1/α) - (ln δ + ln α)/(α-1)], clamped at 0 and rounded up.
        """
        d = positive_delta(delta)
        log_delta = math.log(float(d))
        terms = [
            (e, math.log1p(-1.0 / a), -(log_delta + math.log(a)) / (a - 1.0))
            for a, e in zip(self.orders, self.epsilons, strict=True)
        ]
        return ApproxDP(_best(terms), d)

    def to_approx_mironov(self, delta: NumberLike) -> ApproxDP:
        """(ε, δ)-DP by Mironov 2017, Prop 3: ε = min_α [ε(α) + ln(1/δ)/(α-1)], rounded up."""
        d = positive_delta(delta)
        log_inv_delta = -math.log(float(d))
        terms = [(e, log_inv_delta / (a - 1.0)) for a, e in zip(self.orders, self.epsilons, strict=True)]
        return ApproxDP(_best(terms), d)


def _best(candidates: Sequence[tuple[float, ...]]) -> Fraction:
    """Round up the smallest finite sum of terms, with a margin scaled to the terms' size."""
    finite = [c for c in candidates if all(math.isfinite(x) for x in c)]
    if not finite:
        raise UsageError(
            "the RDP curve is infinite at every order", "inf", "check the mechanisms composed into the curve"
        )
    best = min(finite, key=lambda c: math.fsum(c))
    return round_up(math.fsum(best), scale=sum(abs(x) for x in best))


def _laplace(alpha: float, t: float) -> float:
    if t == 0.0:
        return 0.0
    ratio = (alpha - 1.0) / (2.0 * alpha - 1.0)
    return max(0.0, t + math.log1p(ratio * math.expm1((1.0 - 2.0 * alpha) * t)) / (alpha - 1.0))


def _randomized_response(alpha: float, log_p: float, log_q: float) -> float:
    value = np.logaddexp(alpha * log_p + (1.0 - alpha) * log_q, alpha * log_q + (1.0 - alpha) * log_p)
    return max(0.0, float(value) / (alpha - 1.0))


def _pure(alpha: float, eps: float) -> float:
    value = float(np.logaddexp((alpha - 1.0) * eps, -alpha * eps)) - math.log1p(math.exp(-eps))
    return min(eps, max(0.0, value / (alpha - 1.0)))


def _probability(p: NumberLike) -> Fraction:
    exact = to_fraction(p, name="p")
    if not 0 < exact < 1:
        raise InvalidPrivacyParameter(
            "the randomized-response probability p must lie in (0, 1)",
            p,
            "pass p = e^ε/(1+e^ε) for ε-DP randomized response, e.g. p=0.75",
        )
    return exact
