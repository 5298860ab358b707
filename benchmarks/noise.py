"""Noise-layer throughput against numpy's (unsafe, non-cryptographic) Laplace in the same run.

Prints samples per second and ratios, then TARGET lines:
* exact discrete Laplace and float-safe Laplace: >= 2e6 samples/s on one core, and within 20x of numpy;
* |correlation| between the noise magnitude of a single release and the time the call took <= 0.05.
Exits 0 even when a target is missed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpsense.mechanisms.laplace import laplace
from dpsense.noise import exact

N = 1_000_000
REPEATS = 3


def rate(fn: Callable[[], object]) -> float:
    """Best-of-REPEATS samples per second for one call drawing N samples."""
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return N / best


def main() -> None:
    rng = np.random.default_rng()  # the unsafe baseline, benchmark only
    values = np.full(N, 42.0)
    results = {
        "numpy_laplace_unsafe": rate(lambda: rng.laplace(0.0, 2.0, N)),
        "discrete_laplace_exact": rate(lambda: exact.discrete_laplace(Fraction(2), N)),
        "discrete_gaussian_exact": rate(lambda: exact.discrete_gaussian(Fraction(100), N)),
        "float_safe_laplace": rate(lambda: laplace(values, sensitivity=1, epsilon=0.5)),
    }
    base = results["numpy_laplace_unsafe"]
    print(f"{'sampler':28s} {'samples/s':>14s} {'numpy/ours':>11s}")
    for name, r in results.items():
        print(f"{name:28s} {r:14,.0f} {base / r:11.2f}")

    # Timing channel: 10^4 single releases, noise magnitude vs wall time of the call.
    laplace(0.0, sensitivity=1, epsilon=0.5)  # warm the pool and imports
    mags, times = [], []
    for _ in range(10_000):
        start = time.perf_counter_ns()
        out = laplace(0.0, sensitivity=1, epsilon=0.5).value
        times.append(time.perf_counter_ns() - start)
        mags.append(abs(out))
    corr = float(np.corrcoef(mags, times)[0, 1])
    print(f"single releases: median {np.median(times) / 1e3:.1f} us, corr(|noise|, time) = {corr:+.4f}")

    for name in ("discrete_laplace_exact", "float_safe_laplace"):
        print(f"TARGET {name}_samples_per_s {results[name]:.0f} >= 2000000")
        print(f"TARGET {name}_slowdown_vs_numpy {base / results[name]:.2f} <= 20")
    print(f"TARGET release_time_noise_abs_correlation {abs(corr):.4f} <= 0.05")


if __name__ == "__main__":
    main()
