"""Estimation time for 10^6 local-DP reports per scheme: summarize (validate + count), then estimate.

For each scheme, 10^4 reports are made by the real device clients (``simulate_reports``) and repeated
100 times to 10^6 report dicts (validation and counting cost the same whatever the bits are). Timed:
``summarize`` over the 10^6 reports (strict validation of every report, then the additive counters)
and ``estimate`` (or ``heavy_hitters`` for the prefix scheme) on the summary with the stated
candidates. Parameters: k-RR and OUE over 100 values (ε = 2); CMS and HCMS with 256 hashes into
1 024 buckets (ε = 4), 1 000 candidates; RAPPOR with 128 bits, 2 hashes, 64 cohorts (ε∞ = ln 3,
ε_irr = 8), 1 000 candidates, Lasso selection; prefix over 26 letters, 8 symbols, 64 hashes into
1 024 buckets (ε = 4), top 10 with a beam of 40. Prints the load average before and after, and ends
with ``TARGET <name> <measured> <op> <goal>`` lines (seconds). Exits 0 even when a target is missed.

    python benchmarks/local_estimation.py            # all schemes
    python benchmarks/local_estimation.py cms rappor # some
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpsense.device import CmsScheme, HcmsScheme, KrrScheme, OueScheme, PrefixScheme, RapporScheme, Scheme
from dpsense.mechanisms.local_collection import (
    estimate,
    heavy_hitters,
    simulate_reports,
    summarize,
    zipf_population,
)

REPORTS = 1_000_000
DISTINCT_REPORTS = 10_000
#: Goals in seconds for 10^6 reports: summarize (validation + counting) and the estimate.
SUMMARIZE_GOAL = 5.0
ESTIMATE_GOAL = 5.0

LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORDS = [f"{a}{b}{c}" for a, b, c in zip(LETTERS, reversed(LETTERS), LETTERS[3:] + LETTERS[:3], strict=True)]


def _top10(scheme: Scheme, summary: Any) -> object:
    assert isinstance(scheme, PrefixScheme)
    return heavy_hitters(scheme, summary, 10, beam=40)


def _setups() -> dict[str, tuple[Scheme, list[str], Callable[[Scheme, Any], object]]]:
    dictionary = tuple(f"v{r:05d}" for r in range(100))
    values100, _ = zipf_population(100, DISTINCT_REPORTS, 1.1)
    values1000, ranked = zipf_population(1000, DISTINCT_REPORTS, 1.1)
    words = [WORDS[i % len(WORDS)] * (1 + i % 2) for i in range(DISTINCT_REPORTS)]
    return {
        "krr": (KrrScheme(dictionary=dictionary, epsilon=Fraction(2)), values100, lambda s, x: estimate(s, x)),
        "oue": (OueScheme(dictionary=dictionary, epsilon=Fraction(2)), values100, lambda s, x: estimate(s, x)),
        "cms": (
            CmsScheme(num_hashes=256, num_buckets=1024, epsilon=Fraction(4)),
            values1000,
            lambda s, x: estimate(s, x, ranked),
        ),
        "hcms": (
            HcmsScheme(num_hashes=256, num_buckets=1024, epsilon=Fraction(4)),
            values1000,
            lambda s, x: estimate(s, x, ranked),
        ),
        "rappor": (
            RapporScheme(
                num_bits=128, num_hashes=2, num_cohorts=64, epsilon_lifetime=Fraction("1.0986"), epsilon_irr=Fraction(8)
            ),
            values1000,
            lambda s, x: estimate(s, x, ranked),
        ),
        "prefix": (
            PrefixScheme(
                alphabet=LETTERS, max_length=8, segment_length=1, num_hashes=64, num_buckets=1024, epsilon=Fraction(4)
            ),
            words,
            _top10,
        ),
    }


def main(argv: list[str]) -> int:
    """Time every chosen scheme and print the TARGET lines."""
    setups = _setups()
    chosen = argv or list(setups)
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    targets = []
    for name in chosen:
        scheme, values, run_estimate = setups[name]
        reports = simulate_reports(scheme, values) * (REPORTS // DISTINCT_REPORTS)
        start = time.perf_counter()
        summary = summarize(scheme, reports)
        summarize_s = time.perf_counter() - start
        start = time.perf_counter()
        run_estimate(scheme, summary)
        estimate_s = time.perf_counter() - start
        print(f"{name}: summarize {summarize_s:.2f} s, estimate {estimate_s:.2f} s for {summary.n} reports")
        targets.append(f"TARGET local_summarize_{name}_1e6_s {summarize_s:.3f} <= {SUMMARIZE_GOAL}")
        targets.append(f"TARGET local_estimate_{name}_1e6_s {estimate_s:.3f} <= {ESTIMATE_GOAL}")
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
