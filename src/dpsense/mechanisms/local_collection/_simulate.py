"""Simulated clients for tests and benchmarks: real device reports, or summaries drawn with the same law.

``simulate_reports`` runs the real device clients (``dpsense.device``) for each value: slow, exact,
for small n and for end-to-end tests. ``simulate_summaries`` draws the summaries of ``runs`` independent
collections directly from ``dpsense.noise`` with the same law (the same exact Bernoulli(c/(e^a + c))
and uniform draws, vectorised); a statistical test checks the two laws agree. Client i has cohort
i mod m (RAPPOR) and level i mod T (prefix) in both. ``zipf_population`` builds a deterministic
population with Zipf frequencies (no randomness at all). None of this is a release path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpsense.core.checks import integral_in
from dpsense.core.errors import UsageError
from dpsense.device import _exact as device_exact
from dpsense.device.clients import CmsClient, HcmsClient, KrrClient, OueClient, PrefixClient, RapporClient
from dpsense.device.hashing import bloom_indices
from dpsense.device.schemes import CmsScheme, HcmsScheme, KrrScheme, PrefixScheme, RapporScheme, Scheme
from dpsense.mechanisms.local_collection._decode import bucket_matrix, padded
from dpsense.mechanisms.local_collection._summary import I64, Summary, layout
from dpsense.noise.exact import uniform_below_scalar
from dpsense.noise.lazy_bernoulli import RationalOddsProbability, bernoulli_lazy

BOOL = NDArray[np.bool_]
#: Report cells (runs x clients x width) drawn per pass; bounds temporary memory.
_CHUNK_CELLS = 1 << 23


def simulate_reports(scheme: Scheme, values: Sequence[str]) -> list[dict[str, Any]]:
    """One real device report per value (client i: id "sim-i", cohort i mod m, level i mod T, a fresh memo).

    Each report is drawn by the device client, so it has the scheme's ε-LDP law and guarantee
    (``scheme.guarantee()``, adjacency "replace one user's input"); for tests and benchmarks only.
    """
    if isinstance(scheme, RapporScheme):
        return [
            RapporClient(scheme, f"sim-{i}", {}, cohort=i % scheme.num_cohorts).report(v) for i, v in enumerate(values)
        ]
    if isinstance(scheme, PrefixScheme):
        return [PrefixClient(scheme, f"sim-{i}", level=i % scheme.levels).report(v) for i, v in enumerate(values)]
    client: CmsClient | HcmsClient | KrrClient | OueClient
    if isinstance(scheme, CmsScheme):
        client = CmsClient(scheme)
    elif isinstance(scheme, HcmsScheme):
        client = HcmsClient(scheme)
    elif isinstance(scheme, KrrScheme):
        client = KrrClient(scheme)
    else:
        client = OueClient(scheme)
    return [client.report(v) for v in values]


def _bernoulli(prob: device_exact.OddsProbability, n: int) -> BOOL:
    """The device's Bernoulli(c/(e^a + c)), drawn by ``dpsense.noise``'s exact lazy sampler."""
    return bernoulli_lazy(RationalOddsProbability(prob.c, prob.a), n)


def _group_sum(keys: I64, bits: BOOL, groups: int) -> I64:
    """(groups, width): per key, the number of rows with each bit set."""
    rows, cols = np.nonzero(bits)
    width = bits.shape[1]
    return np.bincount(keys[rows] * width + cols, minlength=groups * width).reshape(groups, width)


def _codes(values: Sequence[str]) -> tuple[list[str], I64]:
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64)
    return list(index), codes


def _sketch_bits(buckets: I64, num_buckets: int, flip: device_exact.OddsProbability) -> BOOL:
    """Count-mean-sketch bit vectors: +1 (bit 1) at each row's bucket, -1 elsewhere, each entry flipped."""
    bits = _bernoulli(flip, buckets.size * num_buckets).reshape(buckets.size, num_buckets)
    rows = np.arange(buckets.size)
    bits[rows, buckets] = ~bits[rows, buckets]
    return bits


def _chunk(scheme: Scheme, values: Sequence[str], runs: int) -> dict[str, I64]:
    """The counters of ``runs`` independent collections, each array with a leading runs axis."""
    n = len(values)
    index = np.arange(n)
    run = np.repeat(np.arange(runs), n)
    if isinstance(scheme, RapporScheme):
        k, m = scheme.num_bits, scheme.num_cohorts
        cohort = index % m
        bloom = np.zeros((n, k), dtype=np.bool_)
        for i, v in enumerate(values):
            bloom[i, list(bloom_indices(v, cohort=int(cohort[i]), num_bits=k, num_hashes=scheme.num_hashes))] = True
        cells = runs * n * k
        noise = (_bernoulli(scheme.prr_flip, cells) ^ _bernoulli(scheme.irr_flip, cells)).reshape(runs * n, k)
        ones = _group_sum(run * m + np.tile(cohort, runs), noise ^ np.tile(bloom, (runs, 1)), runs * m)
        return {"cohort_n": np.tile(np.bincount(cohort, minlength=m), (runs, 1)), "ones": ones.reshape(runs, m, k)}
    if isinstance(scheme, CmsScheme | PrefixScheme):
        kh, m = scheme.num_hashes, scheme.num_buckets
        levels = scheme.levels if isinstance(scheme, PrefixScheme) else 1
        level = index % levels
        hashed = list(values)
        if isinstance(scheme, PrefixScheme):
            hashed = [padded(scheme, v, int(t)) for v, t in zip(values, level, strict=True)]
        distinct, codes = _codes(hashed)
        table = bucket_matrix(distinct, kh, m)
        j = uniform_below_scalar(kh, runs * n)
        bits = _sketch_bits(table[j, np.tile(codes, runs)], m, scheme.flip)
        key = (run * levels + np.tile(level, runs)) * kh + j
        hash_n = np.bincount(key, minlength=runs * levels * kh).reshape(runs, levels, kh)
        ones = _group_sum(key, bits, runs * levels * kh).reshape(runs, levels, kh, m)
        if isinstance(scheme, CmsScheme):
            return {"hash_n": hash_n[:, 0], "ones": ones[:, 0]}
        return {"level_n": np.tile(np.bincount(level, minlength=levels), (runs, 1)), "hash_n": hash_n, "ones": ones}
    if isinstance(scheme, HcmsScheme):
        kh, m = scheme.num_hashes, scheme.num_buckets
        distinct, codes = _codes(values)
        table = bucket_matrix(distinct, kh, m)
        j = uniform_below_scalar(kh, runs * n)
        col = uniform_below_scalar(m, runs * n)
        positive = np.bitwise_count(col & table[j, np.tile(codes, runs)]) % 2 == 0
        bit = positive ^ _bernoulli(scheme.flip, runs * n)
        sums = np.bincount((run * kh + j) * m + col, weights=2.0 * bit - 1, minlength=runs * kh * m)
        return {"sums": np.rint(sums).astype(np.int64).reshape(runs, kh, m)}
    index_of = {v: i for i, v in enumerate(scheme.dictionary)}
    if any(v not in index_of for v in values):
        raise UsageError("simulated values must be dictionary entries", "a value outside it", "map values first")
    d = len(scheme.dictionary)
    true = np.tile(np.array([index_of[v] for v in values], dtype=np.int64), runs)
    if isinstance(scheme, KrrScheme):
        report = true.copy()
        liars = np.flatnonzero(_bernoulli(scheme.lie, runs * n))
        other = uniform_below_scalar(d - 1, liars.size)
        report[liars] = other + (other >= true[liars])
        return {"counts": np.bincount(run * d + report, minlength=runs * d).reshape(runs, d)}
    bits = _bernoulli(scheme.other_one, runs * n * d).reshape(runs * n, d)
    bits[np.arange(runs * n), true] = uniform_below_scalar(2, runs * n) == 1
    return {"ones": _group_sum(run, bits, runs)}


def simulate_summaries(scheme: Scheme, values: Sequence[str], runs: int) -> list[Summary]:
    """The summaries of ``runs`` independent collections of one report per value, drawn vectorised.

    Same law as ``summarize(scheme, simulate_reports(scheme, values))`` (every draw exact, from
    ``dpsense.noise``), hence the same local guarantee (``scheme.guarantee()``, adjacency "replace
    one user's input", docs/math/local-collection.md §13.2); client i has cohort i mod m and level
    i mod T. For tests and benchmarks only.
    """
    if not integral_in(runs, 1) or not values:
        raise UsageError("simulate needs runs >= 1 and at least one value", runs, "pass runs=1 and a non-empty list")
    width = max(int(np.prod(shape)) for shape in layout(scheme).values())
    per_chunk = max(1, _CHUNK_CELLS // max(1, len(values) * width))
    fingerprint = scheme.fingerprint()
    out: list[Summary] = []
    for start in range(0, int(runs), per_chunk):
        block = _chunk(scheme, values, min(per_chunk, int(runs) - start))
        for r in range(next(iter(block.values())).shape[0]):
            counts = {name: block[name][r].astype(np.int64) for name in layout(scheme)}
            out.append(Summary(scheme.kind, fingerprint, len(values), counts))
    return out


def simulate_summary(scheme: Scheme, values: Sequence[str]) -> Summary:
    """The summary of one simulated collection (one report per value); see ``simulate_summaries``."""
    return simulate_summaries(scheme, values, 1)[0]


def zipf_population(num_candidates: int, n: int, exponent: float) -> tuple[list[str], list[str]]:
    """A deterministic population of n values with Zipf(exponent) frequencies over ``num_candidates``.

    Candidate r (0-based rank) is named "v{r:05d}" and held by round(n·p_r) users (largest remainders,
    so the counts sum to n), p_r ∝ (r+1)^-exponent. Returns (values, candidates in rank order); values
    are grouped by rank, so client i mod m spreads each value evenly over cohorts. Test data: no
    randomness and no privacy claim.
    """
    if not integral_in(num_candidates, 1, 1 << 20) or not integral_in(n, 1, 1 << 30):
        raise UsageError("zipf_population needs 1 <= num_candidates <= 2^20 and 1 <= n <= 2^30", n, "use smaller sizes")
    weights = np.arange(1, int(num_candidates) + 1, dtype=np.float64) ** -float(exponent)
    exact = n * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    counts[np.argsort(-(exact - counts), kind="stable")[: n - int(counts.sum())]] += 1
    names = [f"v{r:05d}" for r in range(num_candidates)]
    return [name for name, c in zip(names, counts, strict=True) for _ in range(int(c))], names
