"""Unbiased estimators for local-DP reports (randomized response, k-ary RR, unary encoding), with variances.

Post-processing of the reports of ``dpsense.mechanisms.local`` (free: Dwork-Roth Prop. 2.1); the
formulas and their derivations are in that module's docstring and in docs/math/local-dp.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integral_in
from dpsense.core.errors import UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import check_epsilon
from dpsense.mechanisms.local import _as_codes, _as_unary_reports, _check_k, _exp_terms

F64 = NDArray[np.float64]
#: An estimate is one float (a proportion) or one float per category.
V = TypeVar("V", float, F64)

__all__ = [
    "Estimate",
    "estimate_counts_grr",
    "estimate_counts_oue",
    "estimate_proportion_rr",
    "grr_count_variance",
    "oue_count_variance",
    "rr_proportion_variance",
]


# --------------------------------------------------------------------------------------------
# Estimators (post-processing of the reports: no further privacy cost)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate(Generic[V]):
    """An unbiased estimate from local-DP reports, with its variance.

    Attributes:
        value: the estimate (a float, or one float per category).
        variance: Var(value) over the randomizers' coins with the n users' inputs held fixed,
            i.e. the error around the users' own proportion or counts. Exact where it depends on
            public parameters only (randomized response), otherwise the exact formula evaluated at
            the estimate clipped to its range (plug-in).
        population_variance: the variance around the population proportion or n x population
            frequency when the n users are an i.i.d. sample (law of total variance: ``variance``
            plus the sampling term n·π(1-π), resp. π(1-π)/n), plug-in.
        estimand: what ``value`` estimates.
        variance_formula: the formula behind ``variance``.

    """

    value: V
    variance: V
    population_variance: V
    estimand: str
    variance_formula: str

    @property
    def std_error(self) -> V:
        """The square root of ``variance``."""
        return cast(V, np.sqrt(self.variance))


def _check_n(n: object) -> int:
    if not integral_in(n, 1):
        raise UsageError("n, the number of reporting users, must be an integer >= 1", n, "pass n=len(reports)")
    return int(n)


def rr_proportion_variance(*, n: int, epsilon: NumberLike, population_proportion: float | None = None) -> float:
    """Variance of the randomized-response proportion estimate (public parameters only).

    With ``population_proportion=None``: e^ε/(n(e^ε-1)^2), exact, the variance around the
    proportion among the n users themselves (each report has variance e^ε/(e^ε+1)^2 whatever the
    bit). With ``population_proportion=π``: π(1-π)/n + e^ε/(n(e^ε-1)^2) (docs/math/local-dp.md),
    the variance around π when the users' bits are i.i.d. Bernoulli(π).
    """
    n = _check_n(n)
    t, d = _exp_terms(check_epsilon(epsilon))
    noise = t / d / d / n
    if population_proportion is None:
        return noise
    pi = float(population_proportion)
    if not 0 <= pi <= 1:
        raise UsageError("population_proportion must lie in [0, 1]", pi, "pass a proportion, or None")
    return pi * (1 - pi) / n + noise


def grr_count_variance(*, n: int, k: int, epsilon: NumberLike, count: ArrayLike) -> F64:
    """Exact Var(ĉ_v) of the GRR count estimate for a category with true count c_v (inputs fixed).

    Var(ĉ_v) = n·q(1-q)/(p-q)^2 + c_v(1-p-q)/(p-q) (docs/math/local-dp.md), evaluated as
    n·t(1+(k-2)t)/(1-t)^2 + c_v(k-2)t/(1-t) with t = e^-ε (the same expression, overflow-free).
    """
    n, k = _check_n(n), _check_k(k)
    t, d = _exp_terms(check_epsilon(epsilon))
    c = np.asarray(count, dtype=np.float64)
    return np.asarray(n * t * (1 + (k - 2) * t) / d / d + c * (k - 2) * t / d, dtype=np.float64)


def oue_count_variance(*, n: int, epsilon: NumberLike, count: ArrayLike) -> F64:
    """Exact Var(ĉ_v) of the OUE count estimate for a category with true count c_v (inputs fixed).

    Var(ĉ_v) = n·4e^ε/(e^ε-1)^2 + c_v. Derivation: N_v is a sum of c_v Bernoulli(1/2) and n-c_v
    Bernoulli(q') bits, q' = 1/(e^ε+1); dividing [c_v/4 + (n-c_v)q'(1-q')] by (1/2-q')^2 and using
    1/4 - q'(1-q') = (1/2-q')^2 and q'(1-q')/(1/2-q')^2 = 4e^ε/(e^ε-1)^2 gives the formula.
    The usual "≈ n·4e^ε/(e^ε-1)^2" (docs/math/local-dp.md) is the c_v = 0 term.
    """
    n = _check_n(n)
    t, d = _exp_terms(check_epsilon(epsilon))
    c = np.asarray(count, dtype=np.float64)
    return np.asarray(4 * n * t / d / d + c, dtype=np.float64)


def estimate_proportion_rr(reports: ArrayLike, *, epsilon: NumberLike) -> Estimate[float]:
    """Unbiased estimate of the proportion of 1s from randomized-response reports.

    π̂ = ((e^ε+1)ȳ - 1)/(e^ε - 1) (docs/math/local-dp.md): E[ȳ] = 1/(e^ε+1) + π(e^ε-1)/(e^ε+1).
    ``variance`` is ``rr_proportion_variance(n, ε)``, exact and public; ``population_variance``
    adds π(1-π)/n at the plug-in π̂ clipped to [0, 1].
    """
    eps = check_epsilon(epsilon)
    y = _as_codes(reports, k=2, what="randomized-response reports")
    n = y.size
    t, d = _exp_terms(eps)
    pi_hat = ((1 + t) * float(y.mean()) - t) / d
    variance = rr_proportion_variance(n=n, epsilon=eps)
    pi_c = min(1.0, max(0.0, pi_hat))
    return Estimate(
        value=pi_hat,
        variance=variance,
        population_variance=variance + pi_c * (1 - pi_c) / n,
        estimand="proportion of 1s among the n reporting users",
        variance_formula="e^ε/(n(e^ε-1)^2) (exact, public)",
    )


def estimate_counts_grr(reports: ArrayLike, *, k: int, epsilon: NumberLike) -> Estimate[F64]:
    """Unbiased per-category counts from k-ary randomized-response reports.

    ĉ_v = (N_v - n·q)/(p - q) with N_v the number of reports equal to v (docs/math/local-dp.md);
    the k estimates sum to n exactly. ``variance`` is ``grr_count_variance`` at the plug-in ĉ_v
    clipped to [0, n]; the estimates themselves are left unclipped (clipping would bias them).
    """
    eps = check_epsilon(epsilon)
    k = _check_k(k)
    y = _as_codes(reports, k=k, what="GRR reports")
    n = y.size
    t, d = _exp_terms(eps)
    observed = np.bincount(y, minlength=k).astype(np.float64)
    # (N - nq)/(p - q) with p = 1/(1+(k-1)t), q = t/(1+(k-1)t), p - q = (1-t)/(1+(k-1)t).
    counts = (observed * (1 + (k - 1) * t) - n * t) / d
    clipped = np.clip(counts, 0, n)
    variance = grr_count_variance(n=n, k=k, epsilon=eps, count=clipped)
    return Estimate(
        value=counts,
        variance=variance,
        population_variance=variance + clipped * (1 - clipped / n),
        estimand="number of the n reporting users holding each category",
        variance_formula="n·q(1-q)/(p-q)^2 + c_v(1-p-q)/(p-q), plug-in c_v = clip(ĉ_v, 0, n)",
    )


def estimate_counts_oue(reports: ArrayLike, *, epsilon: NumberLike) -> Estimate[F64]:
    """Unbiased per-category counts from optimized-unary-encoding reports ((n, k) bits).

    ĉ_v = (N_v - n·q')/(1/2 - q'), q' = 1/(e^ε+1), N_v the number of 1s in column v.
    ``variance`` is the exact ``oue_count_variance`` n·4e^ε/(e^ε-1)^2 + c_v at the plug-in
    c_v = clip(ĉ_v, 0, n).
    """
    eps = check_epsilon(epsilon)
    bits = _as_unary_reports(reports)
    n = bits.shape[0]
    t, d = _exp_terms(eps)
    observed = np.count_nonzero(bits, axis=0).astype(np.float64)
    # (N - nq')/(1/2 - q') with q' = t/(1+t), 1/2 - q' = (1-t)/(2(1+t)).
    counts = 2 * (observed * (1 + t) - n * t) / d
    clipped = np.clip(counts, 0, n)
    variance = oue_count_variance(n=n, epsilon=eps, count=clipped)
    return Estimate(
        value=counts,
        variance=variance,
        population_variance=variance + clipped * (1 - clipped / n),
        estimand="number of the n reporting users holding each category",
        variance_formula="n·4e^ε/(e^ε-1)^2 + c_v (exact), plug-in c_v = clip(ĉ_v, 0, n)",
    )
