"""RAPPOR decoding: unbiased Bloom-bit counts, a non-negative Lasso to select candidates, then weighted OLS.

Follows Erlingsson-Pihur-Korolova (CCS 2014, §13.8 "Decoding"): estimate the true number of clients of
cohort j with Bloom bit i set, t̂_ji = (c_ji - ρ n_j)/(1 - 2ρ); regress t̂ on the candidates' Bloom
bits (Lasso to select, then least squares on the selected set); keep the candidates whose
coefficients are significant at level α/M (Bonferroni over the M candidates). With the symmetric
channel the noise of t̂_ji has variance exactly n_j ρ(1-ρ)/(1-2ρ)^2 whatever the data, so the
least-squares covariance is exact for a fixed selection (docs/math/local-collection.md §13.8).
Post-processing of ε-LDP reports: the scheme's guarantee (ε∞ lifetime, ε1 per report) is unchanged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import linalg, sparse

from dpsense.core.errors import UsageError
from dpsense.device.hashing import bloom_indices
from dpsense.device.schemes import RapporScheme
from dpsense.mechanisms.local_collection._decode import F64, FrequencyTable, bonferroni
from dpsense.mechanisms.local_collection._summary import Summary

#: The most candidates one RAPPOR decode accepts (its Gram matrix is candidates^2 floats).
MAX_CANDIDATES = 4096
#: The most non-zero entries of the decoding matrix (cohorts x hashes x candidates).
MAX_DESIGN_ENTRIES = 1 << 23
_SWEEPS = 300


def _flip_probability(epsilon_over_2h: float) -> float:
    return 1 / (math.exp(epsilon_over_2h) + 1)


def composed_flip(scheme: RapporScheme) -> float:
    """ρ = P[a reported bit differs from the Bloom bit] for one report: PRR then IRR, both symmetric."""
    h2 = 2 * scheme.num_hashes
    phi = _flip_probability(float(scheme.epsilon_lifetime) / h2)
    g = _flip_probability(float(scheme.epsilon_irr) / h2)
    return phi * (1 - g) + g * (1 - phi)


def unit_noise_variance(scheme: RapporScheme) -> float:
    """σ² = ρ(1-ρ)/(1-2ρ)^2: the variance of t̂_ji per client of cohort j (exact, any data)."""
    rho = composed_flip(scheme)
    return rho * (1 - rho) / (1 - 2 * rho) ** 2


def design(scheme: RapporScheme, candidates: Sequence[str]) -> sparse.csr_matrix:
    """The (cohorts x bits, candidates) 0/1 matrix: entry (j·k + i, v) is 1 iff v sets bit i in cohort j."""
    if not 1 <= len(candidates) <= MAX_CANDIDATES:
        raise UsageError(f"RAPPOR decodes 1..{MAX_CANDIDATES} candidates", len(candidates), "pass fewer candidates")
    entries = scheme.num_cohorts * scheme.num_hashes * len(candidates)
    if entries > MAX_DESIGN_ENTRIES:
        raise UsageError(
            f"cohorts x hashes x candidates must be at most {MAX_DESIGN_ENTRIES} (the decoding matrix's size)",
            entries,
            "pass fewer candidates",
        )
    return _design(scheme, tuple(candidates))


@functools.lru_cache(maxsize=4)
def _design(scheme: RapporScheme, candidates: tuple[str, ...]) -> sparse.csr_matrix:
    """``design``, cached: repeated estimates over one dictionary hash it once (public inputs only)."""
    k, m = scheme.num_bits, scheme.num_cohorts
    rows: list[int] = []
    cols: list[int] = []
    for v, value in enumerate(candidates):
        for j in range(m):
            bits = bloom_indices(value, cohort=j, num_bits=k, num_hashes=scheme.num_hashes)
            rows.extend(j * k + i for i in bits)
            cols.extend([v] * len(bits))
    data = np.ones(len(rows))
    return sparse.csr_matrix((data, (rows, cols)), shape=(m * k, len(candidates)))


def _normal_equations(x: sparse.csr_matrix, cohort_n: NDArray[np.float64], k: int) -> NDArray[np.float64]:
    """G = Σ_j n_j X_j'X_j (the weighted Gram matrix)."""
    weights = sparse.diags(np.repeat(cohort_n, k))
    return np.asarray((x.T @ weights @ x).toarray(), dtype=np.float64)


def gram(scheme: RapporScheme, candidates: Sequence[str], cohort_sizes: Sequence[int]) -> F64:
    """The weighted Gram matrix of the candidates for the given cohort sizes."""
    return _normal_equations(design(scheme, candidates), np.asarray(cohort_sizes, dtype=np.float64), scheme.num_bits)


def rappor_variance(scheme: RapporScheme, candidates: Sequence[str], cohort_sizes: Sequence[int]) -> F64:
    """Var(N·π̂_v) of the least-squares counts on all ``candidates``: N² σ² [G^-1]_vv (exact, fixed inputs)."""
    n = float(np.sum(cohort_sizes))
    inv = linalg.inv(gram(scheme, candidates, cohort_sizes))
    return np.asarray(n**2 * unit_noise_variance(scheme) * np.diag(inv), dtype=np.float64)


def _nonnegative_lasso(g: F64, b: F64, penalty: F64) -> F64:
    """Argmin ½π'Gπ - b'π + penalty'π over π >= 0, by cyclic coordinate descent (G positive semi-definite)."""
    beta = np.zeros(b.size)
    grad = -b.copy()  # Gβ - b
    diag = np.diag(g).copy()
    active = np.flatnonzero(diag > 0)
    for _ in range(_SWEEPS):
        largest = 0.0
        for v in active:
            new = max(0.0, beta[v] - (grad[v] + penalty[v]) / diag[v])
            step = new - beta[v]
            if step:
                grad += step * g[:, v]
                beta[v] = new
                largest = max(largest, abs(step) * math.sqrt(diag[v]))
        if largest < 1e-6:
            break
    return beta


def estimate_rappor(
    scheme: RapporScheme, summary: Summary, candidates: Sequence[str], *, alpha: float, select: bool
) -> FrequencyTable:
    """RAPPOR counts of ``candidates``: Lasso selection (``select``), least squares, Bonferroni significance."""
    names = list(candidates)
    k = scheme.num_bits
    cohort_n = summary.counts["cohort_n"].astype(np.float64)
    n = float(summary.n)
    rho = composed_flip(scheme)
    sigma2 = unit_noise_variance(scheme)
    t_hat = ((summary.counts["ones"] - rho * cohort_n[:, None]) / (1 - 2 * rho)).ravel()
    x = design(scheme, names)
    g = _normal_equations(x, cohort_n, k)
    b = np.asarray(x.T @ t_hat, dtype=np.float64)
    m = len(names)
    if select:
        # Universal threshold: the noise of b_v has standard deviation σ·sqrt(G_vv).
        penalty = math.sqrt(sigma2 * 2 * math.log(max(m, 2))) * np.sqrt(np.diag(g))
        chosen = np.flatnonzero(_nonnegative_lasso(g, b, penalty) > 0)
    else:
        chosen = np.arange(m)
    estimate = np.zeros(m)
    std_error = np.full(m, np.nan)
    details: dict[str, object] = {"n": int(n), "selected": int(chosen.size), "candidates": m, "select": select}
    if chosen.size:
        g_s = g[np.ix_(chosen, chosen)]
        inv = linalg.pinvh(g_s)
        pi = inv @ b[chosen]
        fitted = np.asarray(x[:, chosen] @ pi) * np.repeat(cohort_n, k)
        weights = np.repeat(np.where(cohort_n > 0, 1 / np.maximum(cohort_n, 1), 0.0), k)
        dof = max(1, int(np.count_nonzero(weights)) - chosen.size)
        scale = float(((t_hat - fitted) ** 2 * weights).sum() / dof / sigma2)
        estimate[chosen] = n * pi
        std_error[chosen] = n * np.sqrt(sigma2 * max(1.0, scale) * np.diag(inv))
        details["residual_scale"] = scale
    flags, test = bonferroni(estimate, std_error, alpha)
    details.update(test)
    method = (
        "RAPPOR decoding (Erlingsson et al. 2014): " + ("non-negative Lasso, then " if select else "") + "least squares"
    )
    return FrequencyTable(names, estimate, std_error, flags, method, details)
