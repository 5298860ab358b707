"""Smooth upper bounds on local sensitivity through the monotone-family lemma.

Provides ``smooth_upper_bound`` and the PTR distance gamma(x) = min{k : U_k(x) > b} for a monotone
family U_k ((i) U_0 >= LS_f; (ii) U_k(x) <= U_{k+1}(x') for adjacent x, x'), and ``PersonLevel`` for
units owning up to C records. Guarantee: S(x) = sup_k e^{-k beta} U_k(x) is a beta-smooth upper bound
on LS_f, and gamma is a valid PTR distance, under the adjacency the family is monotone for (NRS07,
STOC 2007; docs/math/smooth-sensitivity.md §3.2, docs/math/ptr.md §5.3). A truncated loop must add
the tail term e^{-K beta} G: dropping it is a privacy bug. ``PersonLevel`` applies the generic
factor C unless the statistic proves it unnecessary (``direct=True``: order statistics, closest
pair; never triangle counts). Nothing computed here may leave the process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from dpsense.core.errors import InvalidPrivacyParameter, UsageError


class MonotoneFamily(Protocol):
    """A monotone family U_k of upper bounds (conditions (i) and (ii) above) for one dataset."""

    @property
    def cap(self) -> float:
        """A public G >= the global sensitivity (the family is capped at G)."""
        ...

    def upper(self, k: int) -> float:
        """U_k(x) for this dataset (may be ``math.inf``; the caller caps it at ``cap``)."""
        ...


def _check_beta(beta: float) -> float:
    if isinstance(beta, bool) or not isinstance(beta, (int, float, Fraction)):
        raise InvalidPrivacyParameter(
            "the smoothing parameter beta must be a number", repr(beta), "pass beta as a float derived from epsilon"
        )
    b = float(beta)
    if not (b > 0 and math.isfinite(b)):
        raise InvalidPrivacyParameter(
            "the smoothing parameter beta must be finite and > 0",
            beta,
            "derive beta from (epsilon, delta) with dpsense.mechanisms.smooth_noise, never from the data",
        )
    return b


#: The most terms ``smooth_upper_bound`` evaluates without ``constant_work``: a public bound on its work
#: (each U_k costs up to O(k)), whatever the data and however small beta is. Truncating there and adding
#: the tail term e^{-K beta} G keeps S beta-smooth (the truncated family, docs/math/smooth-sensitivity.md
#: §3.2); the tail only matters when beta < ln(2^52) / 2^13, about 4.4e-3, where S is close to G anyway.
MAX_SMOOTH_TERMS = 1 << 13


def smooth_upper_bound(family: MonotoneFamily, *, beta: float, constant_work: int | None = None) -> float:
    """S(x) = max(max_{k<K} e^{-k beta} min(G, U_k(x)), e^{-K beta} G): a beta-smooth upper bound on LS.

    Without ``constant_work`` the loop stops at the first K with e^{-K beta} G <= the running maximum
    (then S equals the untruncated value), or at K = ``MAX_SMOOTH_TERMS`` with the tail term added
    (a tiny beta on ties would otherwise loop for up to n terms of O(n) each after the data was read).
    With ``constant_work=K`` it evaluates exactly K terms, a public amount of work whatever the data,
    and adds the tail term e^{-K beta} G.
    """
    b = _check_beta(beta)
    G = float(family.cap)
    if constant_work is not None and constant_work < 1:
        raise UsageError("constant_work must be >= 1", constant_work, "pass a public number of steps, e.g. 64")
    best = 0.0
    k = 0
    while True:
        tail = math.exp(-k * b) * G
        if constant_work is None and tail <= best:
            return best
        if k == (MAX_SMOOTH_TERMS if constant_work is None else constant_work):
            return max(best, tail)
        best = max(best, math.exp(-k * b) * min(G, family.upper(k)))
        k += 1


def distance_to_instability(family: MonotoneFamily, *, bound: float, cap: int) -> int:
    """gamma_L(x) = min{k >= 0 : min(G, U_k(x)) > bound}, capped at ``cap`` (docs/math/ptr.md).

    1-Lipschitz, non-negative, and gamma_L(x) >= 1 implies LS(x) <= bound. The scan always runs to
    the first k that exceeds the bound or to ``cap``, so its work is at most ``cap`` steps.
    """
    if cap < 1:
        raise UsageError("the PTR distance cap must be >= 1", cap, "use cap ~ ln(1/(2 delta))/epsilon + 20/epsilon")
    G = float(family.cap)
    for k in range(cap):
        if min(G, family.upper(k)) > bound:
            return k
    return cap


@dataclass(frozen=True)
class PersonLevel:
    """The family for units that own up to C records each (docs/math/smooth-sensitivity.md §3.2, person level).

    ``U'_k = C * U_{C(k+1)-1}`` capped at ``C * G`` (valid for every statistic); with ``direct=True``,
    ``U'_k = U_{C(k+1)-1}`` capped at ``G``, which the statistic's module must justify.
    """

    family: MonotoneFamily
    max_records_per_unit: int
    direct: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.max_records_per_unit, bool) or self.max_records_per_unit < 1:
            raise UsageError(
                "max records per unit must be an integer >= 1",
                self.max_records_per_unit,
                "declare the contribution bound C",
            )

    @property
    def _factor(self) -> int:
        return 1 if self.direct else self.max_records_per_unit

    @property
    def cap(self) -> float:
        """The unit-level cap: G for direct bounds, C G otherwise."""
        return self._factor * float(self.family.cap)

    def upper(self, k: int) -> float:
        """U'_k from the record-level family."""
        return self._factor * self.family.upper(self.max_records_per_unit * (k + 1) - 1)
