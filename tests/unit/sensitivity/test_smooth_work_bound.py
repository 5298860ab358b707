"""``smooth_upper_bound`` does a public, bounded amount of work whatever the data and beta.

On ties (U_k = 0 until k reaches n) with a tiny beta the loop used to run n terms of O(k) each after
the data was read; it now stops at ``MAX_SMOOTH_TERMS`` and adds the tail e^{-K beta} G, which keeps the
bound beta-smooth (truncation of a monotone family).
"""

from __future__ import annotations

import math

from dpsense.sensitivity.smooth import MAX_SMOOTH_TERMS, smooth_upper_bound


class _Ties:
    """U_k = 0 for k < n, G beyond (an order statistic on n equal values, no pads)."""

    def __init__(self, n: int, cap: float) -> None:
        self.n, self._cap, self.calls = n, cap, 0

    @property
    def cap(self) -> float:
        return self._cap

    def upper(self, k: int) -> float:
        self.calls += 1
        return 0.0 if k < self.n else self._cap


def test_a_tiny_beta_on_ties_stops_at_the_public_bound_with_the_tail() -> None:
    family = _Ties(n=10**9, cap=100.0)
    beta = 1e-10
    bound = smooth_upper_bound(family, beta=beta)
    assert family.calls == MAX_SMOOTH_TERMS
    assert bound == math.exp(-MAX_SMOOTH_TERMS * beta) * 100.0  # the tail term: S >= the true sup (here G e^-n beta)


def test_a_moderate_beta_is_unchanged_by_the_bound() -> None:
    family = _Ties(n=50, cap=100.0)
    bound = smooth_upper_bound(family, beta=0.5)
    assert bound == math.exp(-50 * 0.5) * 100.0  # the exact sup: the loop stopped by itself
    assert family.calls == 51
