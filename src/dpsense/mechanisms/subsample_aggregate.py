"""Subsample-and-aggregate: any statistic, made private by a robust private aggregate of block answers.

Provides ``subsample_and_aggregate``: units are split into k public-count blocks by a secret-salted
keyed hash, the user's ``statistic`` runs on each block (non-finite or raising blocks get the public
``fallback``), answers are clipped to the public [L, U], and a private median of the k answers is
released (inverse-sensitivity median by default, or ``em_median_aggregator``). Guarantee: epsilon-DP
for one privacy unit under add/remove, and under replace that keeps the unit's identifier; one
change alters one block answer (Nissim-Raskhodnikova-Smith, STOC 2007, section 4; Dwork-Roth
Thm 3.10 for the aggregators). A replacement with a new identifier costs 2 epsilon. No bound on rows
per unit is needed. Proof, ties, the salt and utility: docs/math/local-sensitivity.md §2.4; a worked
example (largest k-means cluster diameter) is in ``tests/unit/mechanisms/test_subsample_aggregate.py``.
The statistic's running time is data-dependent and not covered by the guarantee.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidData, UsageError
from dpsense.core.numbers import NumberLike
from dpsense.core.privacy_loss import check_epsilon
from dpsense.mechanisms._validate import check_bounds_pair
from dpsense.mechanisms.inverse_sensitivity import inverse_sensitivity_median
from dpsense.mechanisms.quantile import em_quantile
from dpsense.mechanisms.result import MechanismResult
from dpsense.noise.entropy import random_bytes

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

MECHANISM = "subsample_aggregate/median@1"
#: Bytes of the secret partition salt (BLAKE2b keys take up to 64).
SALT_BYTES = 32
#: Default number of public output cells of the aggregator. The median's rank error grows like
#: (2/epsilon) ln(cells) block answers (DR Thm 3.11), and there are only k answers: 2^10 cells keep
#: it near 14/epsilon answers at a granularity of 0.1% of [L, U].
DEFAULT_RESOLUTION = 1 << 10
#: Upper limit on the number of blocks (the aggregator's candidate count is the public resolution).
MAX_BLOCKS = 1 << 20


class MedianAggregator(Protocol):
    """A private aggregate of k answers in [L, U]: must be epsilon-DP when one answer changes (k public)."""

    def __call__(
        self, answers: F64, *, bounds: tuple[float, float], epsilon: Fraction, resolution: int
    ) -> MechanismResult:
        """Release the aggregate of ``answers`` (already clipped to ``bounds``)."""
        ...


def em_median_aggregator(
    answers: F64, *, bounds: tuple[float, float], epsilon: Fraction, resolution: int
) -> MechanismResult:
    """The exponential-mechanism median (``em_quantile``, q = 1/2): epsilon-DP for one changed answer."""
    return em_quantile(answers, q=Fraction(1, 2), bounds=bounds, epsilon=epsilon, resolution=resolution)


def inverse_sensitivity_median_aggregator(
    answers: F64, *, bounds: tuple[float, float], epsilon: Fraction, resolution: int
) -> MechanismResult:
    """The inverse-sensitivity lower median: epsilon-DP for one changed answer, and exact on ties."""
    return inverse_sensitivity_median(answers, bounds=bounds, epsilon=epsilon, resolution=resolution)


def _check_blocks(blocks: int) -> int:
    if not integer_in(blocks, 1, MAX_BLOCKS):
        raise UsageError(
            "blocks must be an integer in [1, 2^20], chosen without looking at the data",
            blocks,
            "pass e.g. blocks=50 (more blocks: a sharper median, but each block sees fewer units)",
        )
    return blocks


def _encode(unit: object) -> bytes:
    """A type-tagged byte encoding of one identifier (ints, strings and bytes only)."""
    if isinstance(unit, (bool, np.bool_)):
        return b"i" + str(int(unit)).encode()
    if isinstance(unit, (int, np.integer)):
        return b"i" + str(int(unit)).encode()
    if isinstance(unit, str):
        return b"s" + unit.encode("utf-8")
    if isinstance(unit, (bytes, np.bytes_)):
        return b"b" + bytes(unit)
    raise InvalidData(
        "privacy-unit identifiers must be integers, strings or bytes",
        type(unit).__name__,
        "map identifiers to ints or strings at registration; rows without a unit cannot be protected",
    )


def _assign_blocks(unit_ids: ArrayLike, *, blocks: int, salt: bytes) -> I64:
    """The block of every row: ``BLAKE2b(key=salt, id) mod blocks`` of its unit's identifier.

    Rows of one unit always share a block; a unit's block depends only on its identifier and the
    salt. ``subsample_and_aggregate`` calls it with a fresh secret salt; a caller passing its own
    salt must keep it secret (the partition is part of the privacy argument's randomness only through
    the identifiers, but a known partition lets an adversary crowd a block).
    """
    k = _check_blocks(blocks)
    if not 16 <= len(salt) <= 64:
        raise UsageError("the salt must be 16 to 64 bytes", f"{len(salt)} bytes", "draw it with random_bytes(32)")
    ids = np.asarray(unit_ids)
    if ids.ndim != 1:
        raise InvalidData("unit_ids must be 1-D, one identifier per row", f"{ids.ndim} dimensions", "flatten it")
    if ids.dtype.kind not in "iubUSO":
        raise InvalidData(
            "privacy-unit identifiers must be integers, strings or bytes",
            str(ids.dtype),
            "map identifiers to ints or strings at registration",
        )
    if ids.size == 0:
        return np.empty(0, dtype=np.int64)
    try:
        uniques, inverse = np.unique(ids, return_inverse=True)
    except TypeError:
        raise InvalidData(
            "privacy-unit identifiers must share one type (all ints, all strings or all bytes)",
            "mixed types",
            "map identifiers to one type at registration",
        ) from None
    unit_block = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(_encode(u), key=salt, digest_size=8).digest(), "little") % k
            for u in uniques.tolist()
        ),
        dtype=np.int64,
        count=uniques.size,
    )
    return unit_block[inverse.ravel()]


def _answer(statistic: Callable[[NDArray[Any]], Any], rows: NDArray[Any], fallback: float) -> float:
    """The block's answer, or the public fallback when the statistic fails on it (still a function of the block)."""
    try:
        answer = float(statistic(rows))
    except Exception:  # any failure is data-dependent: it must not escape as an error
        return fallback
    return answer if math.isfinite(answer) else fallback


def subsample_and_aggregate(
    data: ArrayLike,
    *,
    unit_ids: ArrayLike,
    statistic: Callable[[NDArray[Any]], Any],
    blocks: int,
    bounds: tuple[float, float],
    epsilon: NumberLike,
    fallback: float | None = None,
    resolution: int = DEFAULT_RESOLUTION,
    aggregator: MedianAggregator = inverse_sensitivity_median_aggregator,
) -> MechanismResult:
    """An epsilon-DP aggregate of ``statistic`` over k disjoint blocks of privacy units (NRS07 section 4).

    Guarantee: epsilon-DP for one privacy unit (all its rows) under add/remove adjacency and under
    replace adjacency that keeps the unit's identifier; one unit changes one block answer, and the
    aggregate is a private median of the k answers clipped to [L, U] (EM median, Smith 2011, by
    default; DR Thm 3.10). See docs/math/local-sensitivity.md §2.4 for the proof, the 2 epsilon case and ties.

    Args:
        data: the rows (first axis = rows), e.g. an (n, d) array; each block's rows are passed to ``statistic``.
        unit_ids: one privacy-unit identifier per row (ints, strings or bytes).
        statistic: any function from a block's rows (an array, possibly empty) to a number.
        blocks: the public number k of blocks (>= 1; tens to hundreds in practice).
        bounds: the public output range (L, U) the answers are clipped to.
        epsilon: privacy loss > 0.
        fallback: the public answer of a block whose statistic raises or is not finite; default (L + U)/2.
        resolution: public output cells of the aggregator (see ``em_quantile``); the rank error in
            block answers grows like (2/epsilon) ln(resolution), so keep it modest (default 2^10).
        aggregator: ``inverse_sensitivity_median_aggregator`` (default) or ``em_median_aggregator``
            (the inverse-sensitivity median is better when answers tie); any ``MedianAggregator``
            that is epsilon-DP for one changed answer.

    Returns:
        A ``MechanismResult``: ``value`` the released float in [L, U], ``loss`` the aggregator's (``PureDP(epsilon)``),
        ``accuracy = None`` and the aggregator's public rank bound in ``details``.

    Raises:
        InvalidPrivacyParameter: epsilon not > 0. InvalidBounds: bad bounds. UsageError: bad blocks,
        fallback outside [L, U], statistic not callable. InvalidData: identifiers that are not ints,
        strings or bytes, or a length mismatch between rows and identifiers.

    """
    eps = check_epsilon(epsilon)
    low, high = check_bounds_pair(bounds)
    k = _check_blocks(blocks)
    if not callable(statistic):
        raise UsageError("statistic must be callable", type(statistic).__name__, "pass a function rows -> number")
    default = low * 0.5 + high * 0.5
    fall = default if fallback is None else float(fallback)
    if not (math.isfinite(fall) and low <= fall <= high):
        raise UsageError("fallback must be a finite number in [L, U]", fallback, "pass a public value in the bounds")
    rows = np.asarray(data)
    ids = np.asarray(unit_ids)
    if rows.ndim == 0 or ids.ndim != 1 or rows.shape[0] != ids.shape[0]:
        raise InvalidData(
            "data and unit_ids must have one identifier per row",
            "lengths or shapes differ",
            "pass data with rows on the first axis and a 1-D unit_ids of the same length",
        )
    block_of_row = _assign_blocks(ids, blocks=k, salt=random_bytes(SALT_BYTES))
    order = np.argsort(block_of_row, kind="stable")
    bounds_of_block = np.searchsorted(block_of_row[order], np.arange(k + 1), side="left")
    answers = np.array(
        [_answer(statistic, rows[order[bounds_of_block[b] : bounds_of_block[b + 1]]], fall) for b in range(k)],
        dtype=np.float64,
    )
    aggregate = aggregator(np.clip(answers, low, high), bounds=(low, high), epsilon=eps, resolution=resolution)
    return MechanismResult(
        value=aggregate.value,
        loss=aggregate.loss,
        accuracy=None,
        mechanism=MECHANISM,
        guarantee=(
            f"{aggregate.loss}-DP for one privacy unit under add/remove adjacency and under replace adjacency "
            "keeping the unit's identifier: subsample-and-aggregate over a secret keyed-hash partition of the "
            "units (Nissim-Raskhodnikova-Smith 2007, section 4) aggregated by a private median of the clipped "
            f"block answers ({aggregate.mechanism}; McSherry-Talwar 2007, DR Thm 3.10)"
        ),
        details={
            "blocks": k,
            "bounds": (low, high),
            "fallback": fall,
            "partition": "BLAKE2b keyed by a fresh secret 32-byte salt, mod blocks (salt not retained)",
            "aggregator": aggregate.mechanism,
            "aggregator_details": aggregate.details,
        },
    )
