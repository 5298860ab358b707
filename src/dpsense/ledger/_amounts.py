"""Exact amounts for the ledger: rationals as text, losses in a budget's accounting mode, canonical JSON.

Amounts are stored as exact rationals written ``"numerator/denominator"`` (arbitrary precision
integers as text). Floats are never used: in float64 three debits of 0.1 against a cap of 0.3
accept only two. Integer columns are not used either, because SQLite integers are 64-bit and the
denominators of summed fractions can outgrow them.

Two accounting modes exist per budget:

* ``basic``: (ε, δ) summed component-wise (basic composition, Dwork-Roth Thm 3.16); pure-ε losses
  count as (ε, 0).
* ``zcdp``: ρ summed (Bun-Steinke 2016 Lemma 2.3); pure-ε losses count as ρ = ε²/2 (Prop 1.4, exact).
  An (ε, δ) loss with δ > 0 cannot be charged to a zCDP budget, and a zCDP loss cannot be charged
  to a basic budget without choosing a δ; both are refused before anything is written.
* ``pld``: an (ε, δ) cap whose spend is the ε at the cap's δ of composing the stored release events
  with the pessimistic privacy-loss-distribution accountant (``dpsense.accounting.pld``), rounded
  up; see ``_events``. Components are (composed ε, δ); it is never summed.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Literal

from dpsense.core.errors import InternalError, InvalidPrivacyParameter, UnsupportedRequest
from dpsense.core.numbers import parse_ratio, ratio_text
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.core.privacy_loss import loss_from_json as core_loss_from_json
from dpsense.core.privacy_loss import loss_to_json as loss_to_json  # the one form, stored as it is

Mode = Literal["basic", "zcdp", "pld"]
#: A loss in a budget's mode as two exact components: (ε, δ) for basic, (ρ, 0) for zCDP.
Pair = tuple[Fraction, Fraction]


#: Exact text form ``"n/d"`` of a rational (``core.numbers.ratio_text``, the one spelling).
frac_text = ratio_text


#: Inverse of ``frac_text`` (``core.numbers.parse_ratio``).
parse_frac = parse_ratio


def mode_of(cap: PrivacyLoss) -> Mode:
    """The accounting mode a budget cap implies: ρ caps account in zCDP, ε and (ε, δ) caps in basic."""
    return "zcdp" if isinstance(cap, ZCDP) else "basic"


def in_mode(loss: PrivacyLoss, mode: Mode) -> Pair:
    """The loss as the two exact components of ``mode``; refuses conversions that need a choice."""
    if mode == "pld":
        raise InternalError("a PLD budget is charged by composing events, never by summing losses")
    if mode == "basic":
        if isinstance(loss, ZCDP):
            raise UnsupportedRequest(
                "a zCDP loss cannot be charged to an (ε, δ) budget without choosing δ",
                str(loss),
                "convert with ZCDP.to_approx(delta) first, or account the budget in zCDP (a ρ cap)",
            )
        approx = loss.as_approx()
        return approx.epsilon, approx.delta
    if isinstance(loss, ApproxDP) and loss.delta > 0:
        raise UnsupportedRequest(
            "an (ε, δ) loss with δ > 0 cannot be charged to a zCDP budget",
            str(loss),
            "use a zCDP mechanism (charge ZCDP(rho)), or account the budget in (ε, δ)",
        )
    if isinstance(loss, ApproxDP):
        loss = PureDP(loss.epsilon)
    zcdp = loss.as_zcdp() if isinstance(loss, PureDP) else loss
    return zcdp.rho, Fraction(0)


def as_loss(pair: Pair, mode: Mode) -> PrivacyLoss:
    """A pair in ``mode`` back as a privacy-loss value (for messages and status reports)."""
    return ZCDP(pair[0]) if mode == "zcdp" else ApproxDP(pair[0], pair[1])


def check_positive(loss: object) -> PrivacyLoss:
    """Refuse anything that is not a privacy-loss value with a positive main component."""
    if not isinstance(loss, (PureDP, ApproxDP, ZCDP)):
        raise InvalidPrivacyParameter(
            "a charge must be a privacy-loss value", repr(loss), "pass PureDP(eps), ApproxDP(eps, delta) or ZCDP(rho)"
        )
    main = loss.rho if isinstance(loss, ZCDP) else loss.epsilon
    if main <= 0:
        raise InvalidPrivacyParameter("a charge must be positive", str(loss), "pass epsilon > 0 (or rho > 0)")
    return loss


def loss_from_json(data: dict[str, str]) -> PrivacyLoss:
    """A stored loss (``core.privacy_loss.loss_to_json``'s form); an unknown kind is an internal error."""
    try:
        return core_loss_from_json(data)
    except ValueError:
        raise InternalError(f"unknown stored loss kind {data.get('kind')!r}") from None


def canonical_json(value: object) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8, NaN and infinities refused."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
