"""Privacy-loss values in exact arithmetic: pure epsilon-DP, approximate (epsilon, delta)-DP, rho-zCDP.

Each value is an immutable ``Fraction``-backed record with

* a component-wise partial order (``a <= b`` means "a is at most as much loss as b"; values of
  different kinds are compared after converting the smaller kind up, see ``as_approx``),
* addition (basic composition: Dwork-Roth Thm 3.16 for DP, Bun-Steinke 2016 Lemma 2.3 for zCDP),
* conversions: pure -> zCDP (rho = eps^2/2, BS16 Prop 1.4, exact), pure -> approx (exact),
  zCDP -> (eps, delta) (BS16 Prop 1.3, eps = rho + 2 sqrt(rho ln(1/delta)), rounded *up*).

Values render themselves for messages: ``str(ApproxDP(1/2, 1/10**6))`` is ``(ε=0.5, δ=1e-06)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.errors import InvalidPrivacyParameter
from dpsense.core.numbers import (
    NumberLike,
    ceil_fraction,
    dec_ln,
    dec_sqrt,
    decimal_of,
    parse_ratio,
    ratio_text,
    to_fraction,
)


def _render(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    if Fraction(repr(as_float)) == value:
        return repr(as_float)
    return f"{as_float:.6g}…"


def check_epsilon(value: NumberLike, *, name: str = "epsilon", allow_zero: bool = False) -> Fraction:
    """Validate an epsilon: finite, and > 0 (or >= 0 when ``allow_zero``)."""
    eps = to_fraction(value, name=name)
    if eps < 0 or (eps == 0 and not allow_zero):
        rule = f"{name} must be {'>= 0' if allow_zero else '> 0'}"
        raise InvalidPrivacyParameter(rule, value, f"pass a positive, finite {name}, e.g. {name}=0.5")
    return eps


def check_delta(value: NumberLike, *, name: str = "delta") -> Fraction:
    """Validate a delta in [0, 1)."""
    delta = to_fraction(value, name=name)
    if not 0 <= delta < 1:
        raise InvalidPrivacyParameter(
            f"{name} must lie in [0, 1)", value, f"pass {name} in [0, 1); typical values are below 1/n^2, e.g. 1e-8"
        )
    return delta


def check_rho(value: NumberLike, *, name: str = "rho", allow_zero: bool = False) -> Fraction:
    """Validate a zCDP rho: finite, and > 0 (or >= 0)."""
    rho = to_fraction(value, name=name)
    if rho < 0 or (rho == 0 and not allow_zero):
        raise InvalidPrivacyParameter(
            f"{name} must be > 0", value, f"pass a positive, finite {name}, e.g. {name}=0.125"
        )
    return rho


@dataclass(frozen=True, order=False)
class PureDP:
    """epsilon-DP (delta = 0)."""

    epsilon: Fraction

    def __init__(self, epsilon: NumberLike) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(epsilon, allow_zero=True))

    def __add__(self, other: PureDP) -> PureDP:
        if not isinstance(other, PureDP):
            return NotImplemented
        return PureDP(self.epsilon + other.epsilon)

    def __le__(self, other: PrivacyLoss) -> bool:
        if isinstance(other, PureDP):
            return self.epsilon <= other.epsilon
        if isinstance(other, ApproxDP):
            return self.as_approx() <= other
        return self.as_zcdp() <= other

    def as_approx(self) -> ApproxDP:
        """The same guarantee as (epsilon, 0)-DP (exact)."""
        return ApproxDP(self.epsilon, 0)

    def as_zcdp(self) -> ZCDP:
        """epsilon-DP implies (epsilon^2/2)-zCDP (Bun-Steinke 2016, Prop 1.4); exact."""
        return ZCDP(self.epsilon * self.epsilon / 2)

    def __str__(self) -> str:
        return f"(ε={_render(self.epsilon)})"


@dataclass(frozen=True, order=False)
class ApproxDP:
    """(epsilon, delta)-DP."""

    epsilon: Fraction
    delta: Fraction

    def __init__(self, epsilon: NumberLike, delta: NumberLike) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(epsilon, allow_zero=True))
        object.__setattr__(self, "delta", check_delta(delta))

    def __add__(self, other: ApproxDP | PureDP) -> ApproxDP:
        if isinstance(other, PureDP):
            other = other.as_approx()
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(self.epsilon + other.epsilon, self.delta + other.delta)

    def __le__(self, other: PrivacyLoss) -> bool:
        if isinstance(other, PureDP):
            other = other.as_approx()
        if not isinstance(other, ApproxDP):
            raise InvalidPrivacyParameter(
                "an (ε, δ) loss cannot be compared with a zCDP budget",
                str(other),
                "state the budget in (ε, δ), or account in zCDP throughout",
            )
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def as_approx(self) -> ApproxDP:
        """Identity."""
        return self

    def __str__(self) -> str:
        return f"(ε={_render(self.epsilon)}, δ={_render(self.delta)})"


@dataclass(frozen=True, order=False)
class ZCDP:
    """rho-zero-concentrated DP (Bun-Steinke 2016)."""

    rho: Fraction

    def __init__(self, rho: NumberLike) -> None:
        object.__setattr__(self, "rho", check_rho(rho, allow_zero=True))

    def __add__(self, other: ZCDP | PureDP) -> ZCDP:
        if isinstance(other, PureDP):
            other = other.as_zcdp()
        if not isinstance(other, ZCDP):
            return NotImplemented
        return ZCDP(self.rho + other.rho)

    def __le__(self, other: PrivacyLoss) -> bool:
        if isinstance(other, PureDP):
            other = other.as_zcdp()
        if not isinstance(other, ZCDP):
            raise InvalidPrivacyParameter(
                "a zCDP loss cannot be compared with an (ε, δ) budget directly",
                str(other),
                "convert with ZCDP.to_approx(delta) first, or state the budget as rho",
            )
        return self.rho <= other.rho

    def to_approx(self, delta: NumberLike) -> ApproxDP:
        """rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (BS16 Prop 1.3), epsilon rounded up."""
        d = check_delta(delta)
        if d == 0:
            raise InvalidPrivacyParameter(
                "zCDP implies (ε, δ)-DP only for δ > 0", delta, "pass a positive delta, e.g. 1e-8"
            )
        rho = decimal_of(self.rho)
        eps = rho + 2 * dec_sqrt(rho * dec_ln(1 / decimal_of(d)))
        return ApproxDP(ceil_fraction(eps), d)

    def __str__(self) -> str:
        return f"(ρ={_render(self.rho)})"


PrivacyLoss = PureDP | ApproxDP | ZCDP


def loss_to_json(loss: PrivacyLoss) -> dict[str, str]:
    """The one JSON form of a privacy loss: its kind and exact ``"n/d"`` parameters (``ratio_text``).

    ``{"kind": "pure", "epsilon"}``, ``{"kind": "approx", "epsilon", "delta"}`` or ``{"kind": "zcdp",
    "rho"}``. The ledger stores and hashes it; the front ends send it with float approximations added
    (``dpsense.interface.documents.loss_document``).
    """
    if isinstance(loss, PureDP):
        return {"kind": "pure", "epsilon": ratio_text(loss.epsilon)}
    if isinstance(loss, ApproxDP):
        return {"kind": "approx", "epsilon": ratio_text(loss.epsilon), "delta": ratio_text(loss.delta)}
    return {"kind": "zcdp", "rho": ratio_text(loss.rho)}


def loss_from_json(data: dict[str, str]) -> PrivacyLoss:
    """Inverse of ``loss_to_json``; an unknown kind is a ``ValueError``."""
    kind = data["kind"]
    if kind == "pure":
        return PureDP(parse_ratio(data["epsilon"]))
    if kind == "approx":
        return ApproxDP(parse_ratio(data["epsilon"]), parse_ratio(data["delta"]))
    if kind == "zcdp":
        return ZCDP(parse_ratio(data["rho"]))
    raise ValueError(f"unknown privacy-loss kind {kind!r}")
