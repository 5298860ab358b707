"""Local-DP collection, server side: summaries of device reports, frequency estimates, heavy hitters, simulation.

The devices randomize with ``dpsense.device`` (RAPPOR, count-mean sketch, Hadamard count-mean
sketch, k-RR, OUE, prefix scheme); everything here is post-processing of their reports (Dwork-Roth
Prop. 2.1), so the privacy guarantee is the scheme's local one (``scheme.guarantee()``): ε per report,
and for RAPPOR ε∞ over all reports about one value, under the adjacency "replace one user's input"
(any two inputs of one user). Theorems: RAPPOR, Erlingsson-Pihur-Korolova, CCS 2014; CMS/HCMS, Apple
Differential Privacy Team, "Learning with Privacy at Scale", 2017; k-RR/OUE, Wang-Blocki-Li-Jha,
USENIX Security 2017; prefix extension, Wang-Li-Jha PEM, IEEE TDSC 2019. Math: docs/math/local-collection.md.

Pipeline: ``summarize(scheme, reports)`` per batch -> ``Summary.merge`` / ``to_json`` / ``from_json``
-> ``estimate(scheme, summary, candidates)`` or ``heavy_hitters(scheme, summary, top)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpsense.core.errors import UsageError
from dpsense.device.schemes import KrrScheme, OueScheme, PrefixScheme, RapporScheme, Scheme
from dpsense.mechanisms.local_collection._decode import (
    F64,
    FrequencyTable,
    bonferroni,
    check_alpha,
    collision_term,
    dictionary_variance,
    estimate_dictionary,
    estimate_prefix,
    estimate_sketch,
    padded,
    prefix_variance,
    sketch_variance,
)
from dpsense.mechanisms.local_collection._heavy_hitters import heavy_hitters
from dpsense.mechanisms.local_collection._rappor import estimate_rappor, rappor_variance
from dpsense.mechanisms.local_collection._simulate import (
    simulate_reports,
    simulate_summaries,
    simulate_summary,
    zipf_population,
)
from dpsense.mechanisms.local_collection._summary import MAX_REPORTS, Summary, layout, summarize

__all__ = [
    "MAX_REPORTS",
    "FrequencyTable",
    "Summary",
    "estimate",
    "heavy_hitters",
    "layout",
    "simulate_reports",
    "simulate_summaries",
    "simulate_summary",
    "summarize",
    "theoretical_variance",
    "zipf_population",
]


def _check_summary(scheme: Scheme, summary: Summary) -> None:
    if not isinstance(summary, Summary) or (summary.kind, summary.fingerprint) != (scheme.kind, scheme.fingerprint()):
        raise UsageError(
            "the summary was not built with this scheme", getattr(summary, "kind", None), "pass its scheme"
        )


def estimate(
    scheme: Scheme,
    summary: Summary,
    candidates: Sequence[str] | None = None,
    *,
    alpha: float = 0.05,
    select: bool = True,
) -> FrequencyTable:
    """Unbiased count estimates of known candidate values, with standard errors and Bonferroni significance.

    Guarantee: post-processing of the reports (Dwork-Roth Prop. 2.1), so the scheme's local
    guarantee holds unchanged (``scheme.guarantee()``: ε per report; RAPPOR ε∞ over one value's
    lifetime, Erlingsson et al. CCS 2014 §3), adjacency "replace one user's input".
    Estimators: k-RR/OUE (Wang et al. 2017; candidates default to the dictionary), CMS/HCMS
    (Apple 2017), prefix scheme (last level, scaled), RAPPOR (regression on the candidates' Bloom
    bits: non-negative Lasso selection when ``select``, least squares, significance at α/M;
    docs/math/local-collection.md §13.8). ``significant`` flags estimates above the one-sided
    Bonferroni threshold at family-wise level ``alpha`` over the candidates.
    """
    _check_summary(scheme, summary)
    alpha = check_alpha(alpha)
    if isinstance(scheme, KrrScheme | OueScheme):
        table = estimate_dictionary(scheme, summary, candidates)
    else:
        if candidates is None or isinstance(candidates, str) or not all(isinstance(c, str) for c in candidates):
            raise UsageError(
                f"a {scheme.kind} estimate needs a list of candidate strings", None, "pass candidates=[...]"
            )
        if not candidates:
            raise UsageError("candidates must not be empty", 0, "pass at least one candidate")
        if isinstance(scheme, RapporScheme):
            return estimate_rappor(scheme, summary, candidates, alpha=alpha, select=select)
        table = (
            estimate_prefix(scheme, summary, candidates)
            if isinstance(scheme, PrefixScheme)
            else estimate_sketch(scheme, summary, candidates)
        )
    flags, details = bonferroni(table.estimate, table.std_error, alpha)
    return FrequencyTable(
        table.candidates, table.estimate, table.std_error, flags, table.method, {**table.details, **details}
    )


def theoretical_variance(
    scheme: Scheme,
    *,
    n: int,
    true_count: Any,
    candidate: str | None = None,
    population: Mapping[str, int] | None = None,
    candidates: Sequence[str] | None = None,
    cohort_sizes: Sequence[int] | None = None,
    level_size: int | None = None,
) -> F64:
    """The variance of ``estimate``'s count for a value held by ``true_count`` of n users (inputs fixed).

    A function of public parameters and of the stated population (no data, no privacy cost); it
    describes the estimators of the ε-LDP schemes (guarantee: ``scheme.guarantee()``, adjacency
    "replace one user's input"). The variance over the randomizers' coins with the users' values
    (and, for RAPPOR and the prefix scheme, their cohorts and levels) held fixed
    (docs/math/local-collection.md §13.4-§13.9):

    * k-RR / OUE: the exact formulas of docs/math/local-dp.md (``true_count`` may be an array).
    * CMS / HCMS: (m/(m-1))^2 [n(c^2-1)/4 + Σ P_u(1-P_u)] resp. (m/(m-1))^2 [n c^2 - f - Σ P_u^2]
      over the users of other values; exact for fixed hash functions when ``candidate`` and
      ``population`` (value -> count) are given, else averaged over random hash functions.
    * prefix: the last level's CMS variance scaled by (n/n_T)^2, n_T = ``level_size`` (default n/T),
      each value's level count taken as its share n_T/n of its count (exact collisions as for CMS).
    * RAPPOR: N^2 σ^2 [G^-1]_vv of least squares on all ``candidates`` (no selection), G the
      cohort-weighted Gram matrix of their Bloom bits; needs ``candidates``, ``candidate`` and
      ``cohort_sizes``; ``true_count`` does not enter (the symmetric channel's noise is data-free).
    """
    if isinstance(scheme, KrrScheme | OueScheme):
        return dictionary_variance(scheme, n=n, true_count=true_count)
    if isinstance(scheme, RapporScheme):
        if candidates is None or candidate is None or cohort_sizes is None:
            raise UsageError("RAPPOR's variance needs candidates, candidate and cohort_sizes", None, "pass all three")
        return np.asarray(rappor_variance(scheme, candidates, cohort_sizes)[list(candidates).index(candidate)])
    if isinstance(scheme, PrefixScheme):
        size = int(level_size if level_size is not None else n / scheme.levels)
        exact = None
        if candidate is not None and population is not None:  # the level's share of each value, padded
            last = scheme.levels - 1
            level_population = {padded(scheme, v, last): c * size / n for v, c in population.items()}
            exact = collision_term(scheme, padded(scheme, candidate, last), level_population)
        return prefix_variance(scheme, n=n, true_count=true_count, level_size=size, collision=exact)
    exact = None if candidate is None or population is None else collision_term(scheme, candidate, population)
    return sketch_variance(scheme, n=n, true_count=true_count, collision=exact)
