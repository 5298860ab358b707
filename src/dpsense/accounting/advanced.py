"""Composition of k identical (ε, δ)-DP mechanisms: advanced and optimal homogeneous bounds.

Theorems used (docs/math/composition.md):

* Advanced composition (Dwork-Rothblum-Vadhan 2010; Dwork-Roth Thm 3.20): for every δ' > 0 the
  k-fold adaptive composition of (ε, δ)-DP mechanisms is (ε', kδ + δ')-DP with
  ε' = sqrt(2k ln(1/δ')) ε + k ε (e^ε - 1).
* Optimal homogeneous composition (Kairouz-Oh-Viswanath, ICML 2015, Thm 3.3): for
  i = 0, ..., floor(k/2) the k-fold composition is ((k - 2i) ε, 1 - (1-δ)^k (1 - δ_i))-DP with
  δ_i = Σ_{l=0}^{i-1} C(k, l) (e^{(k-l)ε} - e^{(k-2i+l)ε}) / (1 + e^ε)^k,
  and no better bound holds at those epsilons (the composition of randomized response attains it).

Budgets are returned rounded up: ε' is bounded with 40-digit decimal arithmetic; the KOV deltas are
evaluated in decimal arithmetic whose precision grows with k and with log(1/δ'), with a rigorous
error margin, so a chosen index i is never one whose true δ_i exceeds the target.
"""

from __future__ import annotations

import math
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from fractions import Fraction

from dpsense.accounting._checks import ceil_rational, count, epsilon_target, positive_delta
from dpsense.core.errors import InvalidPrivacyParameter, UnsupportedRequest
from dpsense.core.numbers import NumberLike, ceil_fraction, dec_exp, dec_ln, dec_sqrt, decimal_of
from dpsense.core.privacy_loss import ApproxDP, check_delta

#: Largest k for the term-by-term KOV computation (O(k) decimal operations, about a second).
MAX_KOV_K = 10**6


def advanced_composition(*, epsilon: NumberLike, delta: NumberLike, k: int, delta_prime: NumberLike) -> ApproxDP:
    """The advanced composition bound for k adaptive (ε, δ)-DP mechanisms.

    Dwork-Rothblum-Vadhan 2010 (Dwork-Roth Thm 3.20): the composition is (ε', kδ + δ')-DP with
    ε' = sqrt(2k ln(1/δ')) ε + k ε (e^ε - 1). It beats basic composition (kε) only for small ε
    and large k; see ``best_homogeneous_composition``.

    Args:
        epsilon: the epsilon of each mechanism (> 0).
        delta: the delta of each mechanism, in [0, 1).
        k: the number of mechanisms (>= 1).
        delta_prime: the extra slack δ' in (0, 1) the bound spends.

    Returns:
        ``ApproxDP(ε', kδ + δ')`` with ε' rounded up to a rational.

    Raises:
        InvalidPrivacyParameter: on an invalid parameter, or if kδ + δ' >= 1.

    """
    eps = epsilon_target(epsilon)
    d = check_delta(delta)
    n = count(k)
    dp = positive_delta(delta_prime, name="delta_prime")
    total_delta = _checked_total(n * d + dp)
    e = decimal_of(eps)
    root = dec_sqrt(2 * n * dec_ln(1 / decimal_of(dp)))
    eps_total = root * e + n * e * (dec_exp(e) - 1)
    return ApproxDP(ceil_fraction(eps_total), total_delta)


def optimal_homogeneous_composition(
    *, epsilon: NumberLike, delta: NumberLike, k: int, delta_prime: NumberLike
) -> ApproxDP:
    """The optimal (ε, δ) bound for k adaptive (ε, δ)-DP mechanisms at the KOV grid of epsilons.

    Kairouz-Oh-Viswanath 2015, Thm 3.3: the k-fold composition is
    ((k - 2i) ε, 1 - (1-δ)^k (1 - δ_i))-DP for i = 0..floor(k/2), with
    δ_i = Σ_{l=0}^{i-1} C(k, l) (e^{(k-l)ε} - e^{(k-2i+l)ε}) / (1 + e^ε)^k (non-decreasing in i).
    This returns the smallest grid epsilon (k - 2i) ε whose δ_i <= δ'; i = 0 (basic composition,
    δ_0 = 0) is always admissible. The reported delta is 1 - (1-δ)^k (1 - δ'), rounded up to 20
    digits, and never more than kδ + δ'. Cost: O(k) decimal operations (about a second at
    k = 10^6); larger k is refused.

    Args:
        epsilon: the epsilon of each mechanism (> 0).
        delta: the delta of each mechanism, in [0, 1).
        k: the number of mechanisms (>= 1).
        delta_prime: the bound on δ_i, in (0, 1).

    Returns:
        ``ApproxDP((k - 2i) ε, 1 - (1-δ)^k (1-δ'))``; the epsilon is exact.

    Raises:
        InvalidPrivacyParameter: on an invalid parameter.
        UnsupportedRequest: k > MAX_KOV_K.

    """
    eps = epsilon_target(epsilon)
    d = check_delta(delta)
    n = count(k)
    dp = positive_delta(delta_prime, name="delta_prime")
    if n > MAX_KOV_K:
        raise UnsupportedRequest(
            f"optimal homogeneous composition is computed term by term for k <= {MAX_KOV_K}",
            n,
            "use advanced_composition, or RDP / PLD accounting, for this many mechanisms",
        )
    i = _kov_largest_index(eps, n, dp)
    return ApproxDP((n - 2 * i) * eps, _kov_total_delta(d, n, dp))


def best_homogeneous_composition(
    *, epsilon: NumberLike, delta: NumberLike, k: int, delta_prime: NumberLike
) -> ApproxDP:
    """The smallest-epsilon bound among basic, advanced and optimal (KOV grid) composition.

    Candidates: basic (Dwork-Roth Thm 3.16) ``(kε, kδ)``; ``advanced_composition``;
    ``optimal_homogeneous_composition``. Every candidate's delta is at most kδ + δ'. The KOV grid
    bound lies up to one grid step (2ε) above the exact optimum, so in principle the advanced bound
    can undercut it; all three are compared (the KOV bound only for k <= MAX_KOV_K). Ties go to
    the smaller delta.

    Args:
        epsilon: the epsilon of each mechanism (> 0).
        delta: the delta of each mechanism, in [0, 1).
        k: the number of mechanisms (>= 1).
        delta_prime: the extra slack δ' in (0, 1) the non-basic bounds spend.

    Returns:
        The candidate ``ApproxDP`` with the smallest epsilon.

    Raises:
        InvalidPrivacyParameter: on an invalid parameter, or if kδ + δ' >= 1.

    """
    eps = epsilon_target(epsilon)
    d = check_delta(delta)
    n = count(k)
    dp = positive_delta(delta_prime, name="delta_prime")
    _checked_total(n * d + dp)
    candidates = [ApproxDP(n * eps, n * d), advanced_composition(epsilon=eps, delta=d, k=n, delta_prime=dp)]
    if n <= MAX_KOV_K:
        candidates.append(optimal_homogeneous_composition(epsilon=eps, delta=d, k=n, delta_prime=dp))
    return min(candidates, key=lambda loss: (loss.epsilon, loss.delta))


def _kov_largest_index(epsilon: Fraction, k: int, target: Fraction) -> int:
    """The largest i in 0..floor(k/2) whose KOV δ_i (of pure ε-DP parts) is provably <= target.

    With p = e^ε/(1+e^ε) and q = 1 - p, write a_l = C(k,l) p^{k-l} q^l and b_l = C(k,l) p^l q^{k-l}
    (so a_l = e^{(k-l)ε}C(k,l)/(1+e^ε)^k and e^{(k-2i)ε} b_l = e^{(k-2i+l)ε}C(k,l)/(1+e^ε)^k); then
    δ_i = A_i - e^{(k-2i)ε} B_i with prefix sums A_i = Σ_{l<i} a_l, B_i = Σ_{l<i} b_l, all terms
    in [0, 1]. Decimal precision 60 + log10(1/target) + log10(k) digits; an index counts only when
    δ_i plus the error margin k * 10^(10 - precision) is <= target.
    """
    digits_below_one = math.log10(target.denominator) - math.log10(target.numerator)  # any magnitude
    precision = 60 + max(0, math.ceil(digits_below_one)) + len(str(k))
    ctx = Context(prec=precision, Emax=MAX_EMAX, Emin=MIN_EMIN)
    margin = Decimal(k) * Decimal(10) ** (10 - precision)
    eps = ctx.divide(Decimal(epsilon.numerator), Decimal(epsilon.denominator))
    e_eps = ctx.exp(eps)
    e_neg = ctx.exp(-eps)
    p = ctx.divide(e_eps, ctx.add(1, e_eps))
    q = ctx.divide(1, ctx.add(1, e_eps))
    a = ctx.power(p, k)
    b = ctx.power(q, k)
    shift = ctx.exp(ctx.multiply(k, eps))
    step = ctx.exp(ctx.multiply(-2, eps))
    prefix_a = Decimal(0)
    prefix_b = Decimal(0)
    tgt = ctx.divide(Decimal(target.numerator), Decimal(target.denominator))
    for i in range(1, k // 2 + 1):
        prefix_a = ctx.add(prefix_a, a)
        prefix_b = ctx.add(prefix_b, b)
        shift = ctx.multiply(shift, step)
        delta_i = ctx.subtract(prefix_a, ctx.multiply(shift, prefix_b))
        if ctx.add(delta_i, margin) > tgt:
            return i - 1
        ratio = ctx.divide(k - i + 1, i)
        a = ctx.multiply(ctx.multiply(a, ratio), e_neg)
        b = ctx.multiply(ctx.multiply(b, ratio), e_eps)
    return k // 2


def _kov_total_delta(delta: Fraction, k: int, delta_prime: Fraction) -> Fraction:
    """1 - (1-δ)^k (1-δ'), rounded up to 20 digits, and capped by its upper bound kδ + δ'."""
    if delta == 0:
        return delta_prime
    if k * len(str(delta.denominator)) <= 4000:  # exact rational arithmetic stays small
        return min(k * delta + delta_prime, ceil_rational(1 - (1 - delta) ** k * (1 - delta_prime)))
    ctx = Context(prec=50)
    survive = ctx.power(ctx.subtract(1, decimal_of(delta)), k)
    value = ctx.subtract(1, ctx.multiply(survive, ctx.subtract(1, decimal_of(delta_prime))))
    return min(k * delta + delta_prime, ceil_fraction(value))


def _checked_total(total: Fraction) -> Fraction:
    if total >= 1:
        raise InvalidPrivacyParameter(
            "the composed delta k*delta + delta_prime must stay below 1",
            float(total),
            "use a smaller per-mechanism delta or delta_prime",
        )
    return total
