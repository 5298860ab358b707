"""Local-DP collection: variances with power, same-law simulators, RAPPOR recall, the memoization audit.

* Variance: for each scheme, R = 4000 simulated collections (vectorised simulator, same law as the
  device clients) of a fixed population; the sample variance of one count estimate must lie within
  ±10 % of ``theoretical_variance`` and pass the two-sided chi-square test at P_THRESHOLD = 1e-10,
  while the same test rejects the formula scaled by 0.7 and 1.3 (power; the estimates are affine in
  sums of >= 100 independent bounded terms, so normal to a good approximation).
* Law equality: the vectorised summaries and the real device reports have the same law (chi-square
  homogeneity on one client's summary), and a simulator at ε x 1.3 or 0.7 is told apart.
* RAPPOR decoding on 10^5 Zipf(1.1) clients over 1 000 candidates at ε∞ = ln 3 (1.0986): recall of
  the true top 10 and false discoveries among 100 decoys nobody holds (figures in the test and
  docs/math/local-collection.md §13.10).
* Memoization audit: a real client reports one value 1 000 times; an attacker majority-votes each bit
  and guesses the value. Its likelihood ratio stays within e^ε∞ for the memoizing client, and goes far
  beyond it for a broken client that redraws its permanent response per report.

Every draw comes from seeded test sources (``dpsense.noise.testing`` and ``dpsense.device.testing``):
the tests are deterministic in CI, and the thresholds are tiny anyway.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsense.device import (
    CmsScheme,
    HcmsScheme,
    KrrScheme,
    OueScheme,
    PrefixScheme,
    RapporClient,
    RapporScheme,
    Scheme,
    bloom_indices,
)
from dpsense.device.testing import deterministic_entropy as device_entropy
from dpsense.mechanisms.local_collection import (
    estimate,
    simulate_reports,
    simulate_summaries,
    simulate_summary,
    summarize,
    theoretical_variance,
    zipf_population,
)
from dpsense.noise.testing import deterministic_entropy
from tests.statistical.gof import P_THRESHOLD
from tests.statistical.power import assert_calibrated

pytestmark = pytest.mark.statistical

RUNS = 4000
LN3 = Fraction("1.0986")  # <= ln 3 = 1.098612...: the guarantee holds at ln 3


def _population(counts: dict[str, int]) -> list[str]:
    return [v for v, c in counts.items() for _ in range(c)]


def _even_split(counts: dict[str, int]) -> list[str]:
    """Values interleaved so that client i mod 2 (a prefix level) gets exactly half of each value."""
    return [v for v, c in counts.items() for _ in range(c // 2) for _ in (0, 1)]


# Each case: a scheme, a fixed population, the candidate whose count is tested, its true count.
POP = {"apple": 500, "pear": 300, "plum": 150, "fig": 50}
CASES: list[tuple[str, Scheme, dict[str, int]]] = [
    ("krr", KrrScheme(dictionary=("apple", "pear", "plum", "fig", "kiwi"), epsilon=Fraction(1)), POP),
    ("oue", OueScheme(dictionary=("apple", "pear", "plum", "fig", "kiwi", "lime"), epsilon=Fraction(3)), POP),
    ("cms", CmsScheme(num_hashes=8, num_buckets=32, epsilon=Fraction(3)), POP),
    ("hcms", HcmsScheme(num_hashes=8, num_buckets=32, epsilon=Fraction(3)), POP),
    (
        "rappor",
        RapporScheme(num_bits=16, num_hashes=2, num_cohorts=2, epsilon_lifetime=LN3, epsilon_irr=Fraction(4)),
        {"apple": 200, "pear": 120, "plum": 60, "fig": 20},
    ),
    (
        "prefix",
        PrefixScheme(alphabet="ab", max_length=2, segment_length=1, num_hashes=4, num_buckets=16, epsilon=Fraction(3)),
        {"ab": 400, "ba": 300, "a": 200, "bb": 100},
    ),
]


def _variance_pvalue(estimates: np.ndarray, variance: float) -> float:
    """Two-sided chi-square p-value of the sample variance of ``estimates`` against ``variance``."""
    r = estimates.size
    statistic = (r - 1) * float(estimates.var(ddof=1)) / variance
    return float(2 * min(stats.chi2.cdf(statistic, r - 1), stats.chi2.sf(statistic, r - 1)))


@pytest.mark.parametrize(("kind", "scheme", "counts"), CASES, ids=[c[0] for c in CASES])
def test_empirical_variance_matches_the_theory_within_10_percent_with_power(
    kind: str, scheme: Scheme, counts: dict[str, int]
) -> None:
    values = _even_split(counts) if kind == "prefix" else _population(counts)
    n = len(values)
    target, truth = next(iter(counts.items()))
    candidates = list(counts)
    with deterministic_entropy(1900 + len(kind)):
        summaries = simulate_summaries(scheme, values, RUNS)
    single = [target] if kind != "rappor" else candidates
    estimates = np.array([estimate(scheme, s, single, select=False).estimate[0] for s in summaries])
    cohort_sizes = list(summaries[0].counts["cohort_n"]) if kind == "rappor" else None
    theory = float(
        theoretical_variance(
            scheme,
            n=n,
            true_count=truth,
            candidate=target,
            population=counts,
            candidates=candidates,
            cohort_sizes=cohort_sizes,
            level_size=n // 2,
        )
    )
    ratio = float(estimates.var(ddof=1)) / theory
    print(f"{kind}: empirical/theoretical variance = {ratio:.4f} over {RUNS} runs")  # the figure in the docs
    assert abs(ratio - 1) <= 0.10, ratio
    assert_calibrated(lambda f: _variance_pvalue(estimates, theory * f), what="variance")
    # Unbiased up to the hash-collision bias (sketches, fixed hashes) or exactly (k-RR, OUE, RAPPOR).
    bias_room = 6 * math.sqrt(theory / RUNS) + (0.1 * truth if kind in ("cms", "hcms", "prefix") else 0)
    assert abs(float(estimates.mean()) - truth) <= bias_room


# ---------------------------------------------------------------------------------------------
# The vectorised simulator and the device clients draw from the same law
# ---------------------------------------------------------------------------------------------

LAW_CASES: list[tuple[str, Scheme]] = [
    ("krr", KrrScheme(dictionary=("a", "b", "c", "d"), epsilon=Fraction(1))),
    ("oue", OueScheme(dictionary=("a", "b", "c"), epsilon=Fraction(1))),
    ("cms", CmsScheme(num_hashes=2, num_buckets=3, epsilon=Fraction(2))),
    ("hcms", HcmsScheme(num_hashes=2, num_buckets=4, epsilon=Fraction(1))),
    (
        "rappor",
        RapporScheme(num_bits=4, num_hashes=1, num_cohorts=1, epsilon_lifetime=Fraction(2), epsilon_irr=Fraction(3)),
    ),
    (
        "prefix",
        PrefixScheme(alphabet="ab", max_length=2, segment_length=1, num_hashes=1, num_buckets=4, epsilon=Fraction(2)),
    ),
]
LAW_DRAWS = 20_000


def _outcomes(summaries: Sequence[object]) -> Counter[tuple[int, ...]]:
    return Counter(tuple(int(x) for a in s.counts.values() for x in a.ravel()) for s in summaries)  # type: ignore[attr-defined]


def _homogeneity_pvalue(a: Counter[tuple[int, ...]], b: Counter[tuple[int, ...]]) -> float:
    keys = sorted(set(a) | set(b))
    table = np.array([[a[k] for k in keys], [b[k] for k in keys]], dtype=float)
    return float(stats.chi2_contingency(table).pvalue) if len(keys) > 1 else 1.0


def _with_epsilon(scheme: Scheme, factor: Fraction) -> Scheme:
    obj = scheme.to_json()
    for name in ("epsilon", "epsilon_lifetime", "epsilon_irr"):
        if name in obj:
            obj[name] = Fraction(obj[name]) * factor
    return type(scheme)(**{k: v for k, v in obj.items() if k not in ("scheme", "version")})


@pytest.mark.parametrize(("kind", "scheme"), LAW_CASES, ids=[c[0] for c in LAW_CASES])
def test_vectorised_simulator_has_the_device_law(kind: str, scheme: Scheme) -> None:
    value = "a"
    with device_entropy(7):
        device = _outcomes([summarize(scheme, simulate_reports(scheme, [value])) for _ in range(LAW_DRAWS)])

    def pvalue(f: float) -> float:
        with deterministic_entropy(8):
            simulated = simulate_summaries(_with_epsilon(scheme, Fraction(str(f))), [value], LAW_DRAWS)
        return _homogeneity_pvalue(device, _outcomes(simulated))

    assert_calibrated(pvalue, what="ε")


# ---------------------------------------------------------------------------------------------
# RAPPOR decoding: the top 10 of Zipf(1.1) over 1 000 candidates, 10^5 clients, ε∞ = ln 3
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon_lifetime", "num_hashes", "min_recall"),
    [(LN3, 1, 6), (4 * LN3, 2, 10)],  # ln 3, and RAPPOR's own f = 1/2, h = 2 setting (ε∞ = 4 ln 3)
    ids=["ln3", "4ln3"],
)
def test_rappor_recovers_the_zipf_head(epsilon_lifetime: Fraction, num_hashes: int, min_recall: int) -> None:
    scheme = RapporScheme(
        num_bits=128, num_hashes=num_hashes, num_cohorts=64, epsilon_lifetime=epsilon_lifetime, epsilon_irr=Fraction(8)
    )
    values, ranked = zipf_population(1000, 100_000, 1.1)
    decoys = [f"decoy-{i}" for i in range(100)]  # candidates nobody holds: every flag on one is a false discovery
    with deterministic_entropy(2014):
        summary = simulate_summary(scheme, values)
    table = estimate(scheme, summary, ranked + decoys, alpha=0.05)
    assert table.significant is not None
    flagged = {c for c, s in zip(table.candidates, table.significant, strict=True) if s}
    top10 = set(ranked[:10])
    by_estimate = {table.candidates[i] for i in np.argsort(-table.estimate)[:10]}
    recall = len(flagged & top10)
    false_discoveries = len(flagged & set(decoys))
    print(
        f"RAPPOR eps_lifetime={float(epsilon_lifetime):.4f} h={num_hashes}: flagged {len(flagged)}, "
        f"top-10 recall {recall}/10, "
        f"top-10 by estimate {len(by_estimate & top10)}/10, false discoveries {false_discoveries}/100 decoys, "
        f"selected {table.details['selected']}, eps_per_report {scheme.guarantee()['epsilon_per_report']}"
    )
    # The figures stated in docs/math/local-collection.md §13.10 (deterministic seed). At ε∞ = ln 3 any
    # ε-LDP frequency oracle has a standard error near 550 counts here, and rank 10 holds 1 426 users
    # (z ≈ 2.6 against a Bonferroni threshold of 3.3): ranks 7-10 are out of reach at this budget.
    assert false_discoveries == 0
    assert recall >= min_recall and set(ranked[:min_recall]) <= flagged
    assert flagged <= set(ranked)  # every discovery is a value someone holds


# ---------------------------------------------------------------------------------------------
# Memoization audit: 1 000 reports of one value leak at most ε∞
# ---------------------------------------------------------------------------------------------

AUDIT = RapporScheme(num_bits=8, num_hashes=1, num_cohorts=1, epsilon_lifetime=LN3, epsilon_irr=2 * LN3)
TRIALS, REPORTS = 150, 1000


def _two_values() -> tuple[str, str, int, int]:
    """Two values whose single Bloom bits differ (cohort 0)."""
    seen: dict[int, str] = {}
    for i in range(100):
        (bit,) = bloom_indices(f"value-{i}", cohort=0, num_bits=8, num_hashes=1)
        seen.setdefault(bit, f"value-{i}")
        if len(seen) == 2:
            break
    (b0, v0), (b1, v1) = seen.items()
    return v0, v1, b0, b1


def _attacker_says_v1(client: RapporClient, value: str, b0: int, b1: int, *, broken: bool) -> bool:
    """Majority vote of each bit over REPORTS reports; guess v1 iff bit b1 is set and bit b0 is not."""
    ones = np.zeros(8, dtype=np.int64)
    for _ in range(REPORTS):
        if broken:
            client.memo.clear()  # the bug under audit: a new permanent response for every report
        raw = bytes.fromhex(client.report(value)["bits"])
        ones += np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
    vote = ones > REPORTS // 2
    return bool(vote[b1] and not vote[b0])


def _ratio_bounds(hits1: int, hits0: int) -> tuple[float, float]:
    """(point estimate, lower confidence bound) of P[guess v1 | v1] / P[guess v1 | v0], level P_THRESHOLD."""
    lo1 = stats.binomtest(hits1, TRIALS).proportion_ci(1 - P_THRESHOLD / 2, method="exact").low
    hi0 = stats.binomtest(hits0, TRIALS).proportion_ci(1 - P_THRESHOLD / 2, method="exact").high
    return hits1 / max(hits0, 0.5), lo1 / hi0


@pytest.mark.parametrize("broken", [False, True], ids=["memoized", "broken-control"])
def test_memoized_rappor_leaks_at_most_epsilon_lifetime_over_1000_reports(broken: bool) -> None:
    v0, v1, b0, b1 = _two_values()
    hits = {}
    with device_entropy(31 + broken):
        for value in (v0, v1):
            hits[value] = sum(
                _attacker_says_v1(RapporClient(AUDIT, f"user-{t}", {}, cohort=0), value, b0, b1, broken=broken)
                for t in range(TRIALS)
            )
    point, lower = _ratio_bounds(hits[v1], hits[v0])
    bound = math.exp(float(AUDIT.epsilon_lifetime))
    print(
        f"audit broken={broken}: P[v1|v1]={hits[v1]}/{TRIALS}, P[v1|v0]={hits[v0]}/{TRIALS}, ratio {point:.2f}, "
        f"lower bound {lower:.2f}, e^eps_lifetime = {bound:.3f}"
    )
    if broken:
        assert lower > bound  # caught: the attacker provably exceeds e^ε∞
    else:
        assert lower <= bound  # no evidence of a leak beyond e^ε∞ (the optimal attacker reaches it exactly)
