"""Local differential privacy: randomized response, k-ary randomized response, optimized unary encoding.

Provides the three randomizers, each user's report drawn on their side, and their unbiased
estimators. Guarantee: **ε-local DP** per user (P[y | v] <= e^ε P[y | v'] for any two inputs of one
user), hence ε-DP of the report vector under the adjacency **replace one user's input** (n public);
every estimate is post-processing (Dwork-Roth Prop. 2.1). Randomized response: Warner, JASA 1965;
GRR and OUE: Wang-Blocki-Li-Jha, USENIX Security 2017. One report costs a user ε; repeated reports
about one value compose (memoize a permanent report). Formulas, variances and the GRR/OUE choice:
docs/math/local-dp.md; the exact Bernoulli(c/(e^ε + c)) sampler: docs/math/local-dp.md §11.1.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integral_in
from dpsense.core.errors import InvalidData, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import PureDP, check_epsilon
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise.exact import uniform_below_scalar
from dpsense.noise.lazy_bernoulli import RationalOddsProbability, bernoulli_lazy

__all__ = [
    "k_ary_randomized_response",
    "optimized_unary_encoding",
    "randomized_response",
    "recommend_frequency_oracle",
]

I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]
F64 = NDArray[np.float64]
#: An estimate is one float (a proportion) or one float per category.
V = TypeVar("V", float, F64)

_ADJACENCY = "replace one user's input (n public)"
#: Cells (users x categories) sampled per pass of unary encoding; bounds temporary memory.
_CHUNK_CELLS = 1 << 22


# --------------------------------------------------------------------------------------------
# Input checks (messages name public shapes and dtypes only, never a user's value)
# --------------------------------------------------------------------------------------------


def _check_k(k: object) -> int:
    if not integral_in(k, 2, (1 << 31) - 1):
        raise UsageError(
            "k, the number of categories, must be an integer with 2 <= k < 2^31",
            k,
            "pass the size of the public category domain, e.g. k=10",
        )
    return int(k)


def _as_codes(values: ArrayLike, *, k: int, what: str) -> I64:
    """A 1-D int64 array of codes in [0, k); refuses empty, non-integer or out-of-range input."""
    arr = np.asarray(values)
    shape = f"array of dtype {arr.dtype}, shape {arr.shape}"
    if arr.ndim != 1:
        raise InvalidData(f"{what} must be a 1-D array, one entry per user", shape, "pass one value per user")
    if arr.size == 0:
        raise InvalidData(f"{what} must not be empty", shape, "pass at least one user's value")
    if arr.dtype == np.bool_ and k == 2:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise InvalidData(
            f"{what} must be integer codes in [0, {k})",
            shape,
            "map each category to an integer code 0..k-1 and pass an integer array",
        )
    if int(arr.min()) < 0 or int(arr.max()) >= k:
        raise InvalidData(
            f"{what} must lie in [0, {k})",
            f"{shape} with entries outside [0, {k})",
            f"map each category to an integer code 0..{k - 1}, or declare the right k",
        )
    return arr.astype(np.int64)


def _as_unary_reports(reports: ArrayLike) -> BOOL:
    arr = np.asarray(reports)
    shape = f"array of dtype {arr.dtype}, shape {arr.shape}"
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise InvalidData(
            "unary-encoding reports must be a non-empty (n, k) array with k >= 2",
            shape,
            "pass the .value of optimized_unary_encoding",
        )
    if arr.dtype == np.bool_:
        return arr
    if not np.issubdtype(arr.dtype, np.integer) or int(arr.min()) < 0 or int(arr.max()) > 1:
        raise InvalidData("unary-encoding reports must be 0/1 or boolean", shape, "pass the bits as reported")
    return arr.astype(np.bool_)


def _exp_terms(epsilon: Fraction) -> tuple[float, float]:
    """``(t, d) = (e^-ε, 1 - e^-ε)`` in floats, without overflow for large ε or cancellation for small ε."""
    eps = float(epsilon)
    return math.exp(-eps), -math.expm1(-eps)


# --------------------------------------------------------------------------------------------
# Randomizers
# --------------------------------------------------------------------------------------------


def _grr(codes: I64, *, k: int, epsilon: Fraction) -> I64:
    """GRR reports: keep the value unless Bernoulli((k-1)/(e^ε+k-1)) says lie; a lie is uniform on the rest."""
    lie = bernoulli_lazy(RationalOddsProbability(k - 1, epsilon), codes.size)
    out = codes.copy()
    liars = np.flatnonzero(lie)
    if k == 2:
        out[liars] = 1 - codes[liars]
    elif liars.size:
        other = uniform_below_scalar(k - 1, liars.size)
        out[liars] = other + (other >= codes[liars])  # skip the true value: uniform on the k-1 others
    return out


def _local_result(value: Any, *, epsilon: Fraction, name: str, guarantee: str, **details: Any) -> MechanismResult:
    return MechanismResult(
        value=value,
        loss=PureDP(epsilon),
        accuracy=None,
        mechanism=f"{name}/exact@1",
        guarantee=guarantee,
        details={"model": "local", "adjacency": _ADJACENCY, "epsilon_per_user": epsilon, **details},
    )


def randomized_response(bits: ArrayLike, *, epsilon: NumberLike) -> MechanismResult:
    """Warner's randomized response: each user reports their bit truthfully w.p. exactly e^ε/(e^ε+1).

    Guarantee: ε-local DP per user (Warner 1965; Dwork-Roth section 3.2), adjacency "replace one
    user's input"; P[report | bit] / P[report | bit'] <= (e^ε/(e^ε+1)) / (1/(e^ε+1)) = e^ε. This is
    k-ary randomized response with k = 2; the flip is an exact Bernoulli(1/(e^ε+1)) (docs/math/local-dp.md §11.1).

    Args:
        bits: one bit per user (1-D, bool or integers 0/1).
        epsilon: the per-user privacy parameter ε > 0, taken exactly (0.1 means 1/10).

    Returns:
        The reports in ``value`` (bool if ``bits`` was bool, else int64), the loss ``PureDP(ε)`` per
        user, and the report probabilities in ``details``. ``accuracy`` is None: use
        ``estimate_proportion_rr`` on the reports.

    Raises:
        InvalidData: empty, non-1-D, or non-0/1 input.
        InvalidPrivacyParameter: ε not a finite number > 0.

    """
    eps = check_epsilon(epsilon)
    arr = np.asarray(bits)
    codes = _as_codes(arr, k=2, what="randomized-response bits")
    reports = _grr(codes, k=2, epsilon=eps)
    t, _ = _exp_terms(eps)
    return _local_result(
        reports.astype(np.bool_) if arr.dtype == np.bool_ else reports,
        epsilon=eps,
        name="randomized_response",
        guarantee=(
            "ε-local DP per user, replace one user's bit (Warner 1965; Dwork-Roth §3.2): "
            "truthful w.p. e^ε/(e^ε+1), flipped w.p. 1/(e^ε+1), sampled exactly"
        ),
        p_truth=1 / (1 + t),
        p_flip=t / (1 + t),
    )


def k_ary_randomized_response(values: ArrayLike, *, k: int, epsilon: NumberLike) -> MechanismResult:
    """Generalized (k-ary) randomized response: report v w.p. e^ε/(e^ε+k-1), each other w.p. 1/(e^ε+k-1).

    Guarantee: ε-local DP per user (Wang-Blocki-Li-Jha, USENIX Security 2017, GRR/direct encoding),
    adjacency "replace one user's input": every report has probability p or q under any input and
    p/q = e^ε. Sampling is exact: an exact Bernoulli((k-1)/(e^ε+k-1)) decides to lie, and a lie is a
    uniform integer on the k-1 other values, so P[y = v] = p and P[y = u] = (1-p)/(k-1) = q for u != v.

    Args:
        values: one category code per user (1-D integers in [0, k)).
        k: the size of the public category domain, k >= 2.
        epsilon: the per-user privacy parameter ε > 0, taken exactly.

    Returns:
        The int64 reports in ``value``, loss ``PureDP(ε)`` per user, p and q in ``details``.

    Raises:
        UsageError: k not an integer >= 2.
        InvalidData: empty, non-1-D, non-integer or out-of-range values.
        InvalidPrivacyParameter: ε not a finite number > 0.

    """
    eps = check_epsilon(epsilon)
    k = _check_k(k)
    codes = _as_codes(values, k=k, what="category codes")
    t, _ = _exp_terms(eps)
    return _local_result(
        _grr(codes, k=k, epsilon=eps),
        epsilon=eps,
        name="k_ary_randomized_response",
        guarantee=(
            "ε-local DP per user, replace one user's value (generalized randomized response, "
            "Wang et al. USENIX Security 2017): P[true] = e^ε/(e^ε+k-1), P[each other] = 1/(e^ε+k-1), exact"
        ),
        k=k,
        p_true=1 / (1 + (k - 1) * t),
        q_other=t / (1 + (k - 1) * t),
    )


def optimized_unary_encoding(values: ArrayLike, *, k: int, epsilon: NumberLike) -> MechanismResult:
    """Optimized unary encoding (OUE): true bit 1 w.p. 1/2, every other bit 1 w.p. 1/(e^ε+1), independently.

    Guarantee: ε-local DP per user (Wang-Blocki-Li-Jha, USENIX Security 2017, OUE), adjacency
    "replace one user's input": only bits v and v' differ in law between inputs v and v', and the
    likelihood ratio is at most ((1/2)/q') · ((1-q')/(1/2)) = e^ε with q' = 1/(e^ε+1). Sampling is
    exact: the other bits are exact Bernoulli(1/(e^ε+1)) draws, the true bit a uniform random bit.

    Args:
        values: one category code per user (1-D integers in [0, k)).
        k: the size of the public category domain, k >= 2.
        epsilon: the per-user privacy parameter ε > 0, taken exactly.

    Returns:
        The reports as an (n, k) bool array in ``value``, loss ``PureDP(ε)`` per user.

    Raises:
        UsageError: k not an integer >= 2.
        InvalidData: empty, non-1-D, non-integer or out-of-range values.
        InvalidPrivacyParameter: ε not a finite number > 0.

    """
    eps = check_epsilon(epsilon)
    k = _check_k(k)
    codes = _as_codes(values, k=k, what="category codes")
    n = codes.size
    prob = RationalOddsProbability(1, eps)
    reports = np.empty((n, k), dtype=np.bool_)
    rows = max(1, _CHUNK_CELLS // k)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        reports[start:stop] = bernoulli_lazy(prob, (stop - start) * k).reshape(stop - start, k)
    reports[np.arange(n), codes] = uniform_below_scalar(2, n) == 1
    t, _ = _exp_terms(eps)
    return _local_result(
        reports,
        epsilon=eps,
        name="optimized_unary_encoding",
        guarantee=(
            "ε-local DP per user, replace one user's value (optimized unary encoding, Wang et al. "
            "USENIX Security 2017): true bit 1 w.p. 1/2, other bits 1 w.p. 1/(e^ε+1), exact"
        ),
        k=k,
        p_true_bit=0.5,
        q_other_bit=t / (1 + t),
    )


def recommend_frequency_oracle(*, k: int, epsilon: NumberLike) -> Literal["grr", "oue"]:
    """Choose GRR or OUE for a k-category frequency estimate at per-user ε (public inputs only).

    Rule (Wang et al. 2017; docs/math/local-dp.md): GRR when k < 3e^ε + 2, else OUE. It compares
    the variance floors n·e^-ε(1+(k-2)e^-ε)/(1-e^-ε)^2 (GRR) and n·4e^-ε/(1-e^-ε)^2 (OUE), which are
    the exact variances for a category no user holds; GRR's is smaller iff (k-2)e^-ε < 3.
    """
    eps = check_epsilon(epsilon)
    t, _ = _exp_terms(eps)
    return "grr" if (_check_k(k) - 2) * t < 3 else "oue"
