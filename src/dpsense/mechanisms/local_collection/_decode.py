"""Frequency estimation from summaries: k-RR, OUE, count-mean sketch (CMS), Hadamard CMS, the prefix levels.

Every estimate is post-processing of ε-LDP reports (Dwork-Roth Prop. 2.1), so it carries the
scheme's local guarantee (``scheme.guarantee()``) under the adjacency "replace one user's input".
Estimators and their fixed-input variances: docs/math/local-collection.md §13.3 (GRR/OUE: Wang-Blocki-
Li-Jha, USENIX Security 2017; CMS/HCMS: Apple Differential Privacy Team, "Learning with Privacy at
Scale", 2017, with the variance derived in §13.5 and §13.6 for fixed inputs and fixed hash functions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dpsense.core.errors import UsageError
from dpsense.device.hashing import sketch_bucket
from dpsense.device.schemes import PAD, CmsScheme, HcmsScheme, KrrScheme, OueScheme, PrefixScheme
from dpsense.mechanisms.local_collection._summary import I64, Summary
from dpsense.mechanisms.local_estimators import grr_count_variance, oue_count_variance

F64 = NDArray[np.float64]
#: The most (hash function, candidate) pairs one sketch estimate hashes (SHA-256 each).
MAX_HASHED_PAIRS = 1 << 24


@dataclass(frozen=True, eq=False)
class FrequencyTable:
    """Estimated counts of candidate values, with standard errors and a significance flag.

    Attributes:
        candidates: the values estimated.
        estimate: unbiased count estimates (floats, unclipped: clipping would bias them).
        std_error: the standard error of each estimate (plug-in of the fixed-input variance).
        significant: whether each estimate is significantly above 0 at family-wise level ``alpha``
            (Bonferroni over the candidates), or None where not computed.
        method: the estimator's name.
        details: public facts of the estimate (n, thresholds, selected counts).

    """

    candidates: list[str]
    estimate: F64
    std_error: F64
    significant: NDArray[np.bool_] | None
    method: str
    details: dict[str, Any] = field(default_factory=dict)


def check_alpha(alpha: float) -> float:
    """A family-wise significance level in (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise UsageError("alpha, the family-wise significance level, must lie in (0, 1)", alpha, "pass e.g. alpha=0.05")
    return float(alpha)


def bonferroni(estimate: F64, std_error: F64, alpha: float) -> tuple[NDArray[np.bool_], dict[str, Any]]:
    """Flags of estimate/std_error above the one-sided Bonferroni z-threshold over all candidates."""
    m = max(1, estimate.size)
    z = float(stats.norm.isf(alpha / m))
    with np.errstate(divide="ignore", invalid="ignore"):
        flags = np.nan_to_num(estimate / std_error, nan=-np.inf) > z
    return flags, {"alpha": alpha, "bonferroni_level": alpha / m, "z_threshold": z, "significant": int(flags.sum())}


def _dictionary_codes(scheme: KrrScheme | OueScheme, candidates: Sequence[str] | None) -> tuple[list[str], I64]:
    if candidates is None:
        return list(scheme.dictionary), np.arange(len(scheme.dictionary))
    index = {v: i for i, v in enumerate(scheme.dictionary)}
    missing = [c for c in candidates if c not in index]
    if missing:
        raise UsageError(
            "candidates must be entries of the scheme's dictionary", f"{len(missing)} unknown", "omit them"
        )
    return list(candidates), np.array([index[c] for c in candidates], dtype=np.int64)


def _exp_terms(epsilon: float) -> tuple[float, float]:
    return math.exp(-epsilon), -math.expm1(-epsilon)


def estimate_dictionary(
    scheme: KrrScheme | OueScheme, summary: Summary, candidates: Sequence[str] | None
) -> FrequencyTable:
    """k-RR: ĉ = (N(1+(K-1)t) - nt)/(1-t); OUE: ĉ = 2(N(1+t) - nt)/(1-t), t = e^-ε (docs/math/local-dp.md)."""
    names, codes = _dictionary_codes(scheme, candidates)
    n, eps = summary.n, float(scheme.epsilon)
    t, d = _exp_terms(eps)
    if isinstance(scheme, KrrScheme):
        k = len(scheme.dictionary)
        counts = (summary.counts["counts"][codes] * (1 + (k - 1) * t) - n * t) / d
        method = "k-ary randomized response (GRR), unbiased count"
    else:
        counts = 2 * (summary.counts["ones"][codes] * (1 + t) - n * t) / d
        method = "optimized unary encoding, unbiased count"
    variance = dictionary_variance(scheme, n=n, true_count=np.clip(counts, 0, n)) if n else np.full(codes.size, np.nan)
    return FrequencyTable(names, counts.astype(np.float64), np.sqrt(variance), None, method, {"n": n})


def dictionary_variance(scheme: KrrScheme | OueScheme, *, n: int, true_count: Any) -> F64:
    """Exact fixed-input variance of the k-RR or OUE count (``local_estimators``' formulas)."""
    if isinstance(scheme, KrrScheme):
        return grr_count_variance(n=n, k=len(scheme.dictionary), epsilon=scheme.epsilon, count=true_count)
    return oue_count_variance(n=n, epsilon=scheme.epsilon, count=true_count)


# -----------------------------------------------------------------------------------------------
# Count-mean sketches
# -----------------------------------------------------------------------------------------------


def bucket_matrix(values: Sequence[str], num_hashes: int, num_buckets: int) -> I64:
    """(num_hashes, len(values)) buckets h_j(value) of the shared sketch hashes."""
    if num_hashes * len(values) > MAX_HASHED_PAIRS:
        raise UsageError(
            f"a sketch estimate hashes at most {MAX_HASHED_PAIRS} (hash function, candidate) pairs",
            num_hashes * len(values),
            "pass fewer candidates",
        )
    return np.array(
        [[sketch_bucket(v, hash_index=j, num_buckets=num_buckets) for v in values] for j in range(num_hashes)],
        dtype=np.int64,
    ).reshape(num_hashes, len(values))


def _walsh_hadamard(rows: I64) -> I64:
    """Each row times the Sylvester-Hadamard matrix (fast transform, exact in int64)."""
    x = rows.copy()
    k, m = x.shape
    h = 1
    while h < m:
        y = x.reshape(k, m // (2 * h), 2, h)
        x = np.concatenate([y[:, :, 0, :] + y[:, :, 1, :], y[:, :, 0, :] - y[:, :, 1, :]], axis=2).reshape(k, m)
        h *= 2
    return x


def sketch_counts(
    scheme: CmsScheme | HcmsScheme | PrefixScheme, counts: Mapping[str, I64], n: int, buckets: I64
) -> F64:
    """Apple's debiased sketch estimate f̂(d) = m/(m-1)·(mean over j of M[j, h_j(d)] - n/m) per candidate column."""
    k, m = scheme.num_hashes, scheme.num_buckets
    rows = np.arange(k)[:, None]
    if isinstance(scheme, HcmsScheme):
        t, d = _exp_terms(float(scheme.epsilon))
        c = (1 + t) / d
        total = c * _walsh_hadamard(counts["sums"])[rows, buckets].sum(axis=0).astype(np.float64)
    else:
        t, d = _exp_terms(float(scheme.epsilon) / 2)
        c = (1 + t) / d
        hash_n = counts["hash_n"].astype(np.float64)
        picked = counts["ones"][rows, buckets].astype(np.float64)
        total = (c * (picked - hash_n[:, None] / 2) + hash_n[:, None] / 2).sum(axis=0)
    return np.asarray(m / (m - 1) * (total - n / m), dtype=np.float64)


def sketch_variance(
    scheme: CmsScheme | HcmsScheme | PrefixScheme,
    *,
    n: int,
    true_count: Any,
    collision: Any = None,
) -> F64:
    """Fixed-input variance of the sketch estimate (docs/math/local-collection.md §13.5, §13.6).

    ``collision`` is Σ over the n - f users holding another value of P_u(1-P_u) (CMS) or P_u^2 (HCMS),
    P_u the fraction of hash functions under which that value collides with the candidate; None uses
    its average over random hash functions, (n-f)(1/m)(1-1/m)(1-1/k) resp. (n-f)(1/m^2 + (1/m)(1-1/m)/k).
    """
    k, m = scheme.num_hashes, scheme.num_buckets
    f = np.asarray(true_count, dtype=np.float64)
    scale = (m / (m - 1)) ** 2
    if isinstance(scheme, HcmsScheme):
        t, d = _exp_terms(float(scheme.epsilon))
        c2 = ((1 + t) / d) ** 2
        avg = (n - f) * (1 / m**2 + (1 / m) * (1 - 1 / m) / k)
        coll = avg if collision is None else np.asarray(collision, dtype=np.float64)
        return np.asarray(scale * (n * c2 - f - coll), dtype=np.float64)
    t, d = _exp_terms(float(scheme.epsilon) / 2)
    c2 = ((1 + t) / d) ** 2
    avg = (n - f) * (1 / m) * (1 - 1 / m) * (1 - 1 / k)
    coll = avg if collision is None else np.asarray(collision, dtype=np.float64)
    return np.asarray(scale * (n * (c2 - 1) / 4 + coll), dtype=np.float64)


def collision_term(
    scheme: CmsScheme | HcmsScheme | PrefixScheme, candidate: str, population: Mapping[str, float]
) -> float:
    """The exact ``collision`` of ``sketch_variance`` for fixed hash functions and a known population."""
    others = [v for v in population if v != candidate]
    buckets = bucket_matrix([candidate, *others], scheme.num_hashes, scheme.num_buckets)
    p = (buckets[:, 1:] == buckets[:, :1]).mean(axis=0)
    weights = np.array([population[v] for v in others], dtype=np.float64)
    per_user = p**2 if isinstance(scheme, HcmsScheme) else p * (1 - p)
    return float((weights * per_user).sum())


def estimate_sketch(scheme: CmsScheme | HcmsScheme, summary: Summary, candidates: Sequence[str]) -> FrequencyTable:
    """CMS / HCMS count estimates of the candidates, with plug-in standard errors (hash-averaged collisions)."""
    names = list(candidates)
    counts = sketch_counts(
        scheme, summary.counts, summary.n, bucket_matrix(names, scheme.num_hashes, scheme.num_buckets)
    )
    n = summary.n
    variance = sketch_variance(scheme, n=n, true_count=np.clip(counts, 0, n))
    kind = "Hadamard count mean sketch" if isinstance(scheme, HcmsScheme) else "count mean sketch"
    return FrequencyTable(names, counts, np.sqrt(variance), None, f"{kind} (Apple 2017), debiased count", {"n": n})


# -----------------------------------------------------------------------------------------------
# Prefix levels: a count-mean sketch per level, scaled from the level's clients to all clients
# -----------------------------------------------------------------------------------------------


def padded(scheme: PrefixScheme, value: str, level: int) -> str:
    """The level's prefix of ``value`` padded with NUL, as the device hashes it."""
    return (value + PAD * scheme.max_length)[: scheme.prefix_length(level)]


def level_estimate(scheme: PrefixScheme, summary: Summary, level: int, prefixes: Sequence[str]) -> tuple[F64, F64]:
    """Estimated counts among all n clients of padded ``prefixes`` at ``level``, and their standard errors."""
    c = summary.counts
    n_level = int(c["level_n"][level])
    if n_level == 0:
        return np.zeros(len(prefixes)), np.full(len(prefixes), np.inf)
    per_level = {"hash_n": c["hash_n"][level], "ones": c["ones"][level]}
    buckets = bucket_matrix(prefixes, scheme.num_hashes, scheme.num_buckets)
    scale = summary.n / n_level
    counts = sketch_counts(scheme, per_level, n_level, buckets)
    variance = sketch_variance(scheme, n=n_level, true_count=np.clip(counts, 0, n_level))
    return scale * counts, scale * np.sqrt(variance)


def prefix_variance(scheme: PrefixScheme, *, n: int, true_count: Any, level_size: int, collision: Any = None) -> F64:
    """Variance of the last-level estimate scaled to n clients: (n/n_T)^2 Var_CMS(n_T, f n_T/n), groups fixed.

    ``collision`` is the last level's ``sketch_variance`` collision term (None: hash-averaged).
    """
    f = np.asarray(true_count, dtype=np.float64)
    inner = sketch_variance(scheme, n=level_size, true_count=f * level_size / n, collision=collision)
    return np.asarray((n / level_size) ** 2 * inner, dtype=np.float64)


def estimate_prefix(scheme: PrefixScheme, summary: Summary, candidates: Sequence[str]) -> FrequencyTable:
    """Counts of full values from the last level's sketch, scaled to all clients.

    See docs/math/local-collection.md §13.9.
    """
    names = list(candidates)
    last = scheme.levels - 1
    counts, se = level_estimate(scheme, summary, last, [padded(scheme, v, last) for v in names])
    details = {"n": summary.n, "level_n": int(summary.counts["level_n"][last])}
    return FrequencyTable(names, counts, se, None, "prefix scheme, last-level count mean sketch scaled to n", details)
