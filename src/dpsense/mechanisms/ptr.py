"""Propose-Test-Release (PTR): a privately tested, data-independent noise scale.

Provides ``propose_test_release`` and ``ptr_with_family``: for a PUBLIC bound b on LS_f, test
gamma(x) + Lap(1/epsilon_1) against tau = ln(1/(2 delta))/epsilon_1 (made exact), then refuse or
release f(x) + Lap(b/epsilon_2), both through the float-safe ``dpsense.mechanisms.laplace``.
Guarantee: (epsilon_1 + epsilon_2, delta)-DP for one privacy unit under the adjacency for which
``distance`` is valid (Dwork-Lei, STOC 2009; Dwork-Roth 2014 section 7.1); 0 < delta < 1/2. A refusal
is an answer: both branches cost ``ApproxDP(epsilon_1 + epsilon_2, delta)``. The caller's contract
for ``distance`` (integer, 1-Lipschitz, gamma >= 1 implies LS <= b for the same adjacency, counted
in unit changes) is docs/math/ptr.md §5.3; proof §5.2, exact threshold §5.4. The removal-count
shortcut with threshold 0.5 is not offered (§5.5). Neither the distance nor its noisy value leaves
the module; errors about ``value`` or ``distance`` come before any noise and are to be treated as
charged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from functools import lru_cache
from numbers import Integral
from typing import Any

from dpsense.core.errors import InvalidBounds, InvalidData, InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike, to_fraction
from dpsense.core.privacy_loss import ApproxDP, PrivacyLoss, check_delta, check_epsilon
from dpsense.mechanisms.laplace import laplace, laplace_plan, laplace_scale_ok
from dpsense.mechanisms.result import MechanismResult
from dpsense.sensitivity.smooth import MonotoneFamily, distance_to_instability

MECHANISM = "ptr/laplace@1"
#: Extra noise scales above the threshold at which distances are capped (refusal probability e^-20/2).
CAP_SCALES = 20
#: Distances and thresholds stay far below 2^53 grid steps so every comparison is exact.
_MAX_CAP = 1 << 52
_CTX = Context(prec=50)


@dataclass(frozen=True)
class Refusal:
    """A PTR refusal: the stability test failed. It is an answer, and it was charged.

    Attributes:
        mechanism: the mechanism's name and version.
        reason: a plain-language reason with public numbers only (never the distance or its noisy value).
        loss: the privacy loss this answer cost, the same as a release would have cost.
        guarantee: the guarantee that covers this answer.
        details: public parameters of the test (bound, epsilons, delta, threshold).

    """

    mechanism: str
    reason: str
    loss: PrivacyLoss
    guarantee: str
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"refused by {self.mechanism}: {self.reason} (cost {self.loss})"


@dataclass(frozen=True)
class _TestPlan:
    """The public plan of the stability test for one (epsilon_1, delta)."""

    exponent: int  # grid 2^exponent of the test noise
    scale_steps: int  # discrete-Laplace scale t in grid steps
    threshold_steps: int  # pass iff the noisy distance >= threshold_steps grid steps
    cap: int  # distances are capped here

    @property
    def threshold(self) -> float:
        """The threshold in distance units (a multiple of the grid step, exact in float64)."""
        return math.ldexp(float(self.threshold_steps), self.exponent)


def _check_test_delta(delta: NumberLike) -> Fraction:
    d = check_delta(delta)
    if not 0 < d < Fraction(1, 2):
        raise InvalidPrivacyParameter(
            "PTR needs 0 < delta < 1/2 (the unstable pass probability is delta; tau = ln(1/(2 delta))/epsilon_1)",
            delta,
            "pass a small delta, e.g. delta=1e-6 (well below 1/n)",
        )
    return d


@lru_cache(maxsize=256)
def _plan(epsilon_test: Fraction, delta: Fraction) -> _TestPlan:
    k, t = laplace_plan(sensitivity=1, epsilon=epsilon_test)
    # smallest j >= 1 with q^j/(1+q) <= delta, q = exp(-1/t): j >= t (ln(1/delta) - ln(1+q)).
    dec_t = Decimal(t)
    q = _CTX.exp(_CTX.divide(Decimal(-1), dec_t))
    ln_inv_delta = _CTX.ln(_CTX.divide(Decimal(delta.denominator), Decimal(delta.numerator)))
    bound = _CTX.multiply(dec_t, _CTX.subtract(ln_inv_delta, _CTX.ln(_CTX.add(Decimal(1), q))))
    j = max(1, int(_CTX.add(bound, Decimal("1e-20")).to_integral_value(rounding=ROUND_FLOOR)) + 1)
    try:
        threshold = math.ldexp(float(j), k)
        cap = math.ceil(threshold + CAP_SCALES / float(epsilon_test))
        beyond = cap >= _MAX_CAP or math.ldexp(float(cap), -k) >= _MAX_CAP
    except OverflowError:  # a threshold beyond the doubles (epsilon_test near 2^-1000): beyond the cap too
        beyond = True
    # Distances up to the cap are exact floats and snap to fewer than 2^52 grid steps: exact comparisons.
    if beyond:
        raise InvalidPrivacyParameter(
            "epsilon_test is too small for an exact PTR test (the threshold exceeds 2^52 noise steps)",
            str(epsilon_test),
            "use epsilon_test >= 1e-12 or a larger delta",
        )
    return _TestPlan(exponent=k, scale_steps=t, threshold_steps=j, cap=cap)


def check_plan_parameters(
    *, epsilon_test: NumberLike, epsilon_release: NumberLike, delta: NumberLike, proposed_bound: NumberLike
) -> None:
    """Refuse PTR parameters the exact test or release cannot run, judged on public values only.

    The one home of PTR's parameter limits: ``propose_test_release`` applies it before touching its
    data arguments, and the release system's admission step applies it before any charge, so a
    release it admits never trips it. None of the limits depends on the data (nor on n).

    Raises:
        InvalidPrivacyParameter: an epsilon not > 0, delta not in (0, 1/2), or a threshold or release
            noise scale beyond the exact samplers (epsilon too small). UsageError: b not finite and > 0.

    """
    eps1 = check_epsilon(epsilon_test, name="epsilon_test")
    eps2 = check_epsilon(epsilon_release, name="epsilon_release")
    bound = _check_bound(proposed_bound)
    _plan(eps1, _check_test_delta(delta))
    if not laplace_scale_ok(sensitivity=bound, epsilon=eps2):
        raise InvalidPrivacyParameter(
            "epsilon_release is too small for the proposed bound: the release noise b / epsilon_release "
            "exceeds the exact sampler's 2^52 grid steps",
            {"epsilon_release": str(eps2), "proposed_bound": str(bound)},
            "ask for a larger epsilon, or propose a smaller bound",
        )


def ptr_distance_cap(epsilon_test: NumberLike, delta: NumberLike) -> int:
    """The public cap c = ceil(tau + 20 / epsilon_1) for PTR distances, tau the test's exact threshold.

    Capping a valid distance at c >= 1 keeps it valid (docs/math/ptr.md) and bounds the work of a scan
    to c steps; a dataset at distance >= c is refused with probability at most e^-20 / 2.

    Raises:
        InvalidPrivacyParameter: epsilon_1 not > 0 (or absurdly small), delta not in (0, 1/2).

    """
    return _plan(check_epsilon(epsilon_test, name="epsilon_test"), _check_test_delta(delta)).cap


def _check_bound(proposed_bound: NumberLike) -> Fraction:
    try:
        b = to_fraction(proposed_bound, name="proposed_bound")
    except InvalidPrivacyParameter:
        raise UsageError(
            "proposed_bound must be a finite number",
            proposed_bound,
            "propose a public bound b > 0 on the local sensitivity, chosen without looking at the data",
        ) from None
    if b <= 0:
        raise UsageError(
            "proposed_bound must be > 0",
            proposed_bound,
            "propose a public bound b > 0 on the local sensitivity, chosen without looking at the data",
        )
    return b


def _check_clamp(output_clamp: tuple[float, float] | None) -> tuple[float, float] | None:
    if output_clamp is None:
        return None
    try:
        low, high = (float(v) for v in output_clamp)
    except (TypeError, ValueError):
        raise InvalidBounds("output_clamp must be a pair (L, U)", output_clamp, "pass output_clamp=(L, U)") from None
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise InvalidBounds(
            "output_clamp must be finite with L <= U", output_clamp, "pass public bounds, e.g. output_clamp=(0, 120)"
        )
    return low, high


def _check_value(value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidData("the value to release must be a real number", type(value).__name__, "pass f(x)") from None
    if not math.isfinite(v):
        raise InvalidData(
            "the value to release must be finite", "a non-finite value", "clip inputs to declared bounds first"
        )
    return v


def _check_distance(distance: int | float, cap: int) -> int:
    """The distance capped at ``cap``; refuses non-integers and negatives without echoing the value."""
    if isinstance(distance, float) and distance == math.inf:
        return cap
    if isinstance(distance, bool) or not isinstance(distance, Integral):
        raise InvalidData(
            "the PTR distance must be an integer (a distance to instability)",
            type(distance).__name__,
            "pass an int gamma_L, e.g. from dpsense.sensitivity.smooth.distance_to_instability",
        )
    if int(distance) < 0:
        raise InvalidData(
            "the PTR distance must be >= 0",
            "a negative integer",
            "pass a distance to instability, which is never negative",
        )
    return min(int(distance), cap)


@dataclass(frozen=True)
class _Public:
    """Everything a PTR answer states that depends on public parameters only."""

    loss: ApproxDP
    guarantee: str
    reason: str
    details: dict[str, Any]


@lru_cache(maxsize=256)
def _public(eps1: Fraction, eps2: Fraction, delta: Fraction, bound: Fraction) -> _Public:
    plan = _plan(eps1, delta)
    loss = ApproxDP(eps1 + eps2, delta)
    guarantee = (
        f"{loss}-DP for one privacy unit under the adjacency for which the distance is a valid distance to "
        f"instability for the public bound b = {bound} (1-Lipschitz, >= 1 only if LS <= b): Propose-Test-Release "
        "(Dwork-Lei 2009; Dwork-Roth 2014 section 7.1; Vadhan 2017 section 3), refusals included"
    )
    reason = (
        f"the data did not pass the stability test for the proposed bound b = {bound}: a noisy distance "
        f"to instability fell below the public threshold {plan.threshold:.6g}, so no value was released"
    )
    details: dict[str, Any] = {
        "proposed_bound": str(bound),
        "epsilon_test": str(eps1),
        "epsilon_release": str(eps2),
        "delta": str(delta),
        "threshold": plan.threshold,
        "threshold_nominal": math.log(1 / (2 * float(delta))) / float(eps1),
        "distance_cap": plan.cap,
        "test_noise": f"discrete Laplace on grid 2^{plan.exponent}, scale {plan.scale_steps} steps",
    }
    return _Public(loss, guarantee, reason, details)


def propose_test_release(
    value: float,
    distance: int | float,
    *,
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    output_clamp: tuple[float, float] | None = None,
) -> MechanismResult | Refusal:
    """Release ``value + Lap(b / epsilon_2)`` if a noisy distance to instability passes, else refuse.

    Guarantee: (epsilon_1 + epsilon_2, delta)-DP for one privacy unit under the adjacency for which
    ``distance`` meets the contract of docs/math/ptr.md §5.3 (Dwork-Lei 2009; Dwork-Roth 2014 section 7.1;
    Vadhan 2017 section 3). The test is ``distance + Lap(1/epsilon_1) > tau``, tau = ln(1/(2 delta)) /
    epsilon_1 (made exact: docs/math/ptr.md §5.4). Both outcomes cost ``ApproxDP(epsilon_1 + epsilon_2,
    delta)``.

    Args:
        value: the true f(x) (finite); released only if the test passes.
        distance: a distance to instability gamma_L(x) for ``proposed_bound`` (integer >= 0, or ``math.inf``);
            values above ``ptr_distance_cap`` are capped.
        proposed_bound: the public bound b > 0 on the local sensitivity (never computed from the data).
        epsilon_test: epsilon_1 > 0 of the test.
        epsilon_release: epsilon_2 > 0 of the release.
        delta: 0 < delta < 1/2; the probability that a dataset with unstable neighbourhood passes.
        output_clamp: optional public (L, U) the released value is clamped to (post-processing).

    Returns:
        A ``MechanismResult`` (value, loss, the release noise's public accuracy) or a ``Refusal``.

    Raises:
        InvalidPrivacyParameter: epsilons not > 0, delta not in (0, 1/2). UsageError: b not finite and > 0.
        InvalidBounds: malformed ``output_clamp``. InvalidData: non-finite value, negative or non-integer
        distance (data-dependent: raised before any noise is drawn; treat as charged).

    """
    check_plan_parameters(
        epsilon_test=epsilon_test, epsilon_release=epsilon_release, delta=delta, proposed_bound=proposed_bound
    )
    eps1 = check_epsilon(epsilon_test, name="epsilon_test")
    eps2 = check_epsilon(epsilon_release, name="epsilon_release")
    d = _check_test_delta(delta)
    bound = _check_bound(proposed_bound)
    clamp = _check_clamp(output_clamp)
    plan = _plan(eps1, d)
    v = _check_value(value)
    gamma = _check_distance(distance, plan.cap)
    public = _public(eps1, eps2, d, bound)
    noisy = laplace(gamma, sensitivity=1, epsilon=eps1).value
    if not noisy >= plan.threshold:
        return Refusal(MECHANISM, public.reason, public.loss, public.guarantee, dict(public.details))
    release = laplace(v, sensitivity=bound, epsilon=eps2)
    out = float(release.value)
    if clamp is not None:
        out = min(max(out, clamp[0]), clamp[1])
    return MechanismResult(
        value=out,
        loss=public.loss,
        accuracy=release.accuracy,
        mechanism=MECHANISM,
        guarantee=public.guarantee,
        details={**public.details, "release_noise": release.details, "output_clamp": clamp},
    )


def _float_at_most(bound: Fraction) -> float:
    """The largest float <= bound (a float above b would certify LS slightly above b)."""
    as_float = float(bound)
    return as_float if Fraction(as_float) <= bound else math.nextafter(as_float, -math.inf)


def ptr_with_family(
    value: float,
    family: MonotoneFamily,
    *,
    proposed_bound: NumberLike,
    epsilon_test: NumberLike,
    epsilon_release: NumberLike,
    delta: NumberLike,
    output_clamp: tuple[float, float] | None = None,
) -> MechanismResult | Refusal:
    """PTR with gamma_L(x) = min{k : min(G, U_k(x)) > b}, capped at ``ptr_distance_cap``.

    Guarantee: as ``propose_test_release``: (epsilon_1 + epsilon_2, delta)-DP under the adjacency for
    which ``family`` is a monotone family (U_0 >= LS and U_k(x) <= U_{k+1}(x') for adjacent x, x';
    docs/math/index.md sections 3.2 and 5). Such a gamma_L is 1-Lipschitz, >= 0, and >= 1 only if U_0(x) <= b, hence
    LS(x) <= b. The scan costs at most ``ptr_distance_cap(epsilon_test, delta)`` evaluations of U_k.

    Args:
        value: the true f(x).
        family: the monotone family of f for this dataset.
        proposed_bound: the public bound b > 0.
        epsilon_test: epsilon_1 > 0.
        epsilon_release: epsilon_2 > 0.
        delta: 0 < delta < 1/2.
        output_clamp: optional public (L, U) for the released value.

    Returns:
        A ``MechanismResult`` or a ``Refusal``, both charged ``ApproxDP(epsilon_1 + epsilon_2, delta)``.

    """
    eps1 = check_epsilon(epsilon_test, name="epsilon_test")
    check_epsilon(epsilon_release, name="epsilon_release")
    d = _check_test_delta(delta)
    bound = _check_bound(proposed_bound)
    _check_clamp(output_clamp)
    cap = _plan(eps1, d).cap
    gamma = distance_to_instability(family, bound=_float_at_most(bound), cap=cap)
    return propose_test_release(
        value,
        gamma,
        proposed_bound=bound,
        epsilon_test=eps1,
        epsilon_release=epsilon_release,
        delta=d,
        output_clamp=output_clamp,
    )
