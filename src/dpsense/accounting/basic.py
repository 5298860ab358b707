"""Basic (sequential) composition of privacy losses in exact arithmetic.

Theorems used (docs/math/composition.md):

* Dwork-Roth, Thm 3.16: the adaptive composition of (ε_i, δ_i)-DP mechanisms is
  (Σ ε_i, Σ δ_i)-DP; pure ε-DP is the case δ_i = 0.
* Bun-Steinke 2016, Lemma 2.3: the adaptive composition of ρ_i-zCDP mechanisms is (Σ ρ_i)-zCDP,
  and ε-DP implies (ε²/2)-zCDP (Prop 1.4), so pure losses join a zCDP composition exactly.

zCDP and (ε, δ)-DP do not compose into either form without a conversion that needs a δ, so a
mixture is refused with the fix spelled out.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from dpsense.core.errors import InvalidPrivacyParameter, UnsupportedRequest, UsageError
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP


def compose_basic(losses: Sequence[PrivacyLoss]) -> PrivacyLoss:
    """Compose privacy losses by basic composition (sums of ε, δ, or ρ), exactly.

    Rules (Dwork-Roth Thm 3.16; Bun-Steinke 2016 Lemma 2.3 and Prop 1.4):

    * only ``PureDP`` losses: ``PureDP(Σ ε_i)``;
    * ``PureDP`` and ``ApproxDP`` losses: ``ApproxDP(Σ ε_i, Σ δ_i)``;
    * ``ZCDP`` and ``PureDP`` losses: ``ZCDP(Σ ρ_i + Σ ε_j² / 2)``;
    * ``ZCDP`` together with ``ApproxDP``: refused (convert the zCDP parts to (ε, δ) first);
    * no losses: ``PureDP(0)`` (nothing released, nothing spent).

    Args:
        losses: the privacy losses of the mechanisms run one after the other (adaptively).

    Returns:
        The composed loss, exact (``Fraction`` arithmetic, no rounding needed).

    Raises:
        UsageError: an element is not a ``PureDP``, ``ApproxDP`` or ``ZCDP``.
        UnsupportedRequest: zCDP and (ε, δ)-DP losses are mixed.
        InvalidPrivacyParameter: the deltas sum to 1 or more (the guarantee would be vacuous).

    """
    for position, loss in enumerate(losses):
        if not isinstance(loss, (PureDP, ApproxDP, ZCDP)):
            raise UsageError(
                "every loss to compose must be a PureDP, ApproxDP or ZCDP",
                f"element {position}: {type(loss).__name__}",
                "wrap the mechanism's guarantee in one of dpsense.core's loss types",
            )
    has_zcdp = any(isinstance(loss, ZCDP) for loss in losses)
    has_approx = any(isinstance(loss, ApproxDP) for loss in losses)
    if has_zcdp and has_approx:
        raise UnsupportedRequest(
            "zCDP and (ε, δ)-DP losses cannot be composed directly",
            [str(loss) for loss in losses],
            "convert each ZCDP to (ε, δ) with zcdp_to_approx_tight(rho, delta) (or ZCDP.to_approx(delta)) "
            "and compose everything as ApproxDP, or keep every mechanism in zCDP",
        )
    if has_zcdp:
        rho = sum((_as_rho(loss) for loss in losses), Fraction(0))
        return ZCDP(rho)
    epsilon = sum((loss.epsilon for loss in losses if not isinstance(loss, ZCDP)), Fraction(0))
    if not has_approx:
        return PureDP(epsilon)
    delta = sum((loss.delta for loss in losses if isinstance(loss, ApproxDP)), Fraction(0))
    if delta >= 1:
        raise InvalidPrivacyParameter(
            "the composed delta must stay below 1 (basic composition adds the deltas)",
            float(delta),
            "give each mechanism a smaller delta so that their sum is far below 1/n",
        )
    return ApproxDP(epsilon, delta)


def _as_rho(loss: PrivacyLoss) -> Fraction:
    if isinstance(loss, ZCDP):
        return loss.rho
    if isinstance(loss, PureDP):
        return loss.as_zcdp().rho
    raise UnsupportedRequest("an (ε, δ) loss has no zCDP rho", str(loss), "compose in (ε, δ) instead")
