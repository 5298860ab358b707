"""Private partition selection: release the group keys of a table whose keys are not public.

Guarantee: (ε, δ)-DP, for every ε and δ in (0, 1], under add/remove or replace of one privacy unit,
when each unit contributes to at most k partitions (the caller bounds groups per unit before
counting). Mechanism (Korolova-Kenthapadi-Mishra-Ntoulas 2009; Wilson et al. 2020, section 3): each
present key's distinct-unit count gets discrete Laplace noise of scale Δ/ε (Δ = k add/remove, 2k
replace) and is released iff it reaches the public integer threshold τ = 1 + ceil(ln(k / (δ (1 + a)))
/ (ε / Δ)), a = exp(-ε / Δ). Proof, both directions: docs/math/global-sensitivity.md §1.7. The
threshold uses public values only; the noisy counts are never returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidPrivacyParameter, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import ApproxDP, check_delta, check_epsilon
from dpsense.mechanisms.discrete import geometric
from dpsense.noise import exact

__all__ = ["PartitionSelection", "check_selection_parameters", "partition_threshold", "select_partitions"]


@dataclass(frozen=True)
class PartitionSelection:
    """Which candidate keys are released, the public threshold and the privacy loss."""

    keep: NDArray[np.bool_]
    threshold: int
    loss: ApproxDP
    guarantee: str


def partition_threshold(*, sensitivity: int, max_partitions_per_unit: int, epsilon: Fraction, delta: Fraction) -> int:
    """The integer threshold τ = 1 + ceil(ln(k / (δ (1 + a))) / (ε / Δ)), a = exp(-ε / Δ).

    Derivation: docs/math/global-sensitivity.md §1.7. Computed in floating point and then checked: the
    returned τ satisfies k a^(τ-1) / (1 + a) <= δ (raised by one while the check fails), so rounding can
    only make the selection more conservative.
    """
    k, rate = max_partitions_per_unit, float(epsilon) / sensitivity
    a = math.exp(-rate)
    m = max(0, math.ceil(math.log(k / (float(delta) * (1 + a))) / rate))
    while k * math.exp(-rate * m) / (1 + a) > float(delta):
        m += 1
    return 1 + m


def check_selection_parameters(*, max_partitions_per_unit: int, replace: bool, epsilon: NumberLike) -> None:
    """Refuse a selection whose discrete Laplace scale Δ/ε the exact sampler cannot serve, from public values.

    The one home of the selection's limit: the release system's admission step applies it before any
    charge, and ``select_partitions`` before it reads its counts (``exact.geometric_scale_ok``).

    Raises:
        InvalidPrivacyParameter: Δ/ε has a numerator of 2^52 or more (ε too small, or a long fraction)
            or a denominator of 2^62 or more (ε too large).

    """
    eps = check_epsilon(epsilon)
    sensitivity = 2 * max_partitions_per_unit if replace else max_partitions_per_unit
    if not exact.geometric_scale_ok(sensitivity, eps):
        raise InvalidPrivacyParameter(
            "the partition selection's discrete Laplace scale (groups per unit / ε) is beyond the exact sampler's"
            " limits at this ε",
            {"epsilon": float(eps), "max_groups_per_unit": max_partitions_per_unit},
            "ask for an epsilon between about 1e-12 and 1e12 (a decimal with few digits), declare the group keys"
            " at registration, or lower max_groups_per_unit",
        )


def select_partitions(
    unit_counts: ArrayLike,
    *,
    max_partitions_per_unit: int,
    replace: bool,
    epsilon: NumberLike,
    delta: NumberLike,
) -> PartitionSelection:
    """Keep each candidate key whose unit count plus discrete Laplace noise reaches the threshold.

    Args:
        unit_counts: distinct privacy units per candidate key (every key present in the data, after
            bounding each unit to ``max_partitions_per_unit`` keys).
        max_partitions_per_unit: k, the public bound on keys per unit.
        replace: True under replace adjacency (Δ = 2k), False under add/remove (Δ = k).
        epsilon: the step's ε.
        delta: the step's δ (> 0: a key seen with one unit only is released with probability <= δ / k).

    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if dlt == 0:
        raise UsageError(
            "partition selection needs delta > 0 (a key seen only with one unit is released with some chance)",
            0,
            "pass delta > 0 to the release, or declare the group keys at registration",
        )
    k = max_partitions_per_unit
    if not integer_in(k, 1):
        raise UsageError("max_partitions_per_unit must be an integer >= 1", k, "declare max_groups_per_unit")
    counts = np.asarray(unit_counts, dtype=np.int64).reshape(-1)
    if counts.size and counts.min() < 1:
        raise UsageError("candidate keys have at least one unit", int(counts.min()), "pass only keys present")
    check_selection_parameters(max_partitions_per_unit=k, replace=replace, epsilon=eps)
    sensitivity = 2 * k if replace else k
    threshold = partition_threshold(sensitivity=sensitivity, max_partitions_per_unit=k, epsilon=eps, delta=dlt)
    if counts.size == 0:
        keep = np.zeros(0, dtype=np.bool_)
    else:
        noisy = np.atleast_1d(np.asarray(geometric(counts, sensitivity=sensitivity, epsilon=eps).value))
        keep = noisy >= threshold
    guarantee = (
        f"({float(eps):g}, {float(dlt):g})-DP partition selection: discrete Laplace of scale {sensitivity}/ε on "
        f"distinct-unit counts, threshold {threshold} (Korolova et al. 2009; Wilson et al. 2020)"
    )
    return PartitionSelection(keep=keep, threshold=threshold, loss=ApproxDP(eps, dlt), guarantee=guarantee)
