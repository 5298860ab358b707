"""Exact sampling of an index with probability proportional to ``m_i * exp(-a * e_i)``.

The sampler behind the exponential mechanism (``dpsense.mechanisms.exponential``) and the EM
quantile (``dpsense.mechanisms.quantile``). Inputs: base measures ``m_i >= 0`` (float64, taken as the
exact dyadic rationals they are), integer exponents ``e_i >= 0`` and an exact ``Fraction`` rate
``a >= 0``. Guarantee: index ``i`` is returned with probability *exactly* ``w_i / sum_j w_j``, so the
mechanism's ε-DP (McSherry-Talwar) holds for the sampled law itself (Ilvento, CCS 2020, shows why
float EM samplers are unsafe). Method: one uniform inverted against a float table with a certified
error bound and exact int64 prefix sums, and a directed-rounding ``decimal`` fallback when the
uniform falls near a boundary; floating point decides only how often the fallback runs
(docs/math/floating-point.md §9.3). Timing depends on the data only through m, except for the
fallback, which runs with probability at most ``2 (m + 1) margin`` per draw.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpsense.core.errors import UsageError
from dpsense.noise import entropy

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
BOOL = NDArray[np.bool_]

#: Relative-error budget per float64 operation in the error bound (IEEE gives 2^-53; 2^-46 is 128x that).
ULP_BUDGET = 2.0**-46
#: Absolute slack for evaluating the decision test itself in float64 (its error is below 2^-47).
EVAL_SLACK = 2.0**-46
#: Decimal digits of the first exact-fallback round, and the increase per further round.
FIRST_PRECISION = 40
PRECISION_STEP = 20
#: Largest number of categories accepted (memory, and the limb sizes in ``_FloatTable``).
MAX_CATEGORIES = 1 << 40
#: Terms whose float exponent a*k exceeds this are treated as 0 with a tiny certified error.
_NEGLIGIBLE_EXPONENT = 2.0**40
_LN2 = math.log(2.0)


def _validate(base_measure: ArrayLike, exponents: ArrayLike, rate: Fraction) -> tuple[F64, I64, Fraction]:
    base = np.ascontiguousarray(base_measure, dtype=np.float64).ravel()
    exps = np.asarray(exponents)
    if exps.dtype.kind not in "iu":
        raise UsageError("categorical exponents must be integers", str(exps.dtype), "pass an int64 array")
    exps = np.ascontiguousarray(exps, dtype=np.int64).ravel()
    rate = Fraction(rate)
    if base.size == 0 or base.size != exps.size or base.size > MAX_CATEGORIES:
        raise UsageError(
            "categorical sampling needs 1 to 2^40 categories with one exponent each",
            (base.size, exps.size),
            "pass equally long, non-empty arrays",
        )
    if not bool(np.all(np.isfinite(base))) or bool(np.any(base < 0)) or not bool(np.any(base > 0)):
        raise UsageError(
            "base measures must be finite, >= 0 and not all 0", "non-conforming base measure", "fix the weights"
        )
    if bool(np.any(exps < 0)) or rate < 0:
        raise UsageError("exponents and the rate must be >= 0", str(rate), "shift exponents so their minimum is 0")
    return base, exps, rate


@dataclass
class CategoricalSampler:
    """A reusable exact sampler for P(i) proportional to ``base_measure[i] * exp(-rate * exponents[i])``.

    Build it once, then ``draw(size)`` any number of independent indices. See docs/math/floating-point.md
    §9.3 for the argument that the distribution is exact.
    """

    base: F64
    shifts: I64  # k_i = e_i - min e over positive-measure i (0 where the measure is 0)
    rate: Fraction
    cumulative: F64 = field(init=False)
    margin: float = field(init=False)
    _exact: _ExactTables | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.cumulative, self.margin, _ = _float_table(self.base, self.shifts, self.rate)

    @classmethod
    def build(cls, base_measure: ArrayLike, exponents: ArrayLike, rate: Fraction) -> CategoricalSampler:
        """Validate the inputs and precompute the float table (O(m))."""
        base, exps, rate = _validate(base_measure, exponents, rate)
        positive = base > 0
        e0 = int(exps[positive].min())
        shifts = np.where(positive, exps - e0, 0).astype(np.int64)
        return cls(base, shifts, rate)

    def draw(self, size: int = 1) -> I64:
        """``size`` independent exact draws of the index."""
        words = entropy.words(size)
        idx, decided = _float_draw(self.cumulative, self.margin, words)
        for lane in np.flatnonzero(~decided):
            idx[lane] = self._exact_draw(int(words[lane]))
        return idx

    def _exact_draw(self, word: int) -> int:
        if self._exact is None:
            self._exact = _ExactTables(self.base, self.shifts, self.rate)
        uniform, bits, precision = word, 64, FIRST_PRECISION
        while True:
            choice = self._exact.decide(uniform, bits, precision)
            if choice is not None:
                return choice
            uniform = (uniform << 64) | int(entropy.words(1)[0])
            bits += 64
            precision += PRECISION_STEP


#: Largest certified weight a window may leave outside (relative to its largest weight, 1). It joins the
#: margin's error term: at most 2 x 2^-56 = 2^-55 more, under 2^-9 of the margin's constant EVAL_SLACK (2^-46),
#: so the fallback's bound 2 (m + 1) margin grows by under 0.2 % (docs/math/floating-point.md §9.3, "Windows").
OUTSIDE_LIMIT = 2.0**-56


@dataclass(frozen=True)
class Outside:
    """What bounds the categories a window leaves out: their base measures' sum, and their exponents."""

    measure: float  # >= the sum of the base measures outside (0: nothing is left out)
    exponent: int  # <= every exponent outside


@dataclass
class WindowedSampler:
    """Exact draws of the index of a categorical law whose weight outside a window of categories is negligible.

    The float table holds the window's categories alone; the ones outside count as weight 0 with their
    certified weight (``Outside``, at most ``OUTSIDE_LIMIT``) added to the table's error bound, so the
    margin still certifies every decision against the whole law (docs/math/floating-point.md §9.3, "Windows").
    An undecided draw goes to the whole law's exact fallback with the same word.
    """

    cumulative: F64
    margin: float
    whole: Callable[[], CategoricalSampler]

    @classmethod
    def build(
        cls,
        base_measure: ArrayLike,
        exponents: ArrayLike,
        rate: Fraction,
        *,
        outside: Outside,
        whole: Callable[[], CategoricalSampler],
    ) -> WindowedSampler | None:
        """The window's float table, or ``None`` when the weight outside is not certified below ``OUTSIDE_LIMIT``.

        ``whole`` builds the whole law's sampler (called on the first undecided draw only).
        """
        size = np.asarray(base_measure).size
        starts = np.array([0, size], dtype=np.int64)
        return cls.build_many(base_measure, exponents, rate, starts, outside=[outside], whole=[whole])[0]

    @classmethod
    def build_many(
        cls,
        base_measure: ArrayLike,
        exponents: ArrayLike,
        rate: Fraction,
        starts: I64,
        *,
        outside: Sequence[Outside],
        whole: Sequence[Callable[[], CategoricalSampler]],
    ) -> list[WindowedSampler | None]:
        """``build`` for consecutive windows at once: window g holds the categories ``starts[g]:starts[g + 1]``.

        Each sampler is the one ``build`` returns for its window (its own margin, ``None`` under the same
        conditions, or when the window has no positive measure); the float tables are computed together
        (``_float_tables``). ``outside[g]`` and ``whole[g]`` belong to window g.
        """
        base, exps, rate = _validate(base_measure, exponents, rate)
        starts = np.asarray(starts, dtype=np.int64)
        sizes = np.diff(starts)
        if starts[0] != 0 or starts[-1] != base.size or bool(np.any(sizes < 1)):
            raise UsageError("windows must split the categories into non-empty runs", starts, "pass increasing starts")
        if len(outside) != sizes.size or len(whole) != sizes.size:
            raise UsageError("one outside bound and one whole law per window", len(outside), "pass one each")
        first = starts[:-1]
        positive = base > 0
        e0 = np.minimum.reduceat(np.where(positive, exps, np.iinfo(np.int64).max), first)
        usable = np.add.reduceat(positive, first) > 0
        measures = np.array([o.measure for o in outside], dtype=np.float64)
        beyond = np.array([o.exponent for o in outside], dtype=np.int64)
        usable &= measures >= 0  # also refuses NaN
        usable &= (measures == 0) | (beyond > e0)
        shifts = np.where(positive, exps - e0[np.repeat(np.arange(sizes.size), sizes)], 0).astype(np.int64)
        bounds = (np.where(usable, measures, 0.0), np.where(usable & (measures > 0), beyond - e0, 0))
        cumulative, margins, weights = _float_tables(base, shifts, rate, starts, outside=bounds)
        usable &= weights <= OUTSIDE_LIMIT
        out: list[WindowedSampler | None] = []
        for g, (lo, hi) in enumerate(
            zip((first + np.arange(sizes.size)).tolist(), (starts[1:] + np.arange(sizes.size)).tolist(), strict=True)
        ):
            out.append(cls(cumulative[lo : hi + 1], float(margins[g]), whole[g]) if usable[g] else None)
        return out

    def draw(self, size: int = 1) -> tuple[I64, BOOL]:
        """``size`` independent exact draws: (index, in the window); a window row, or else the whole law's index."""
        words = entropy.words(size)
        idx, decided = _float_draw(self.cumulative, self.margin, words)
        if not bool(decided.all()):
            whole = self.whole()
            for lane in np.flatnonzero(~decided):
                idx[lane] = whole._exact_draw(int(words[lane]))
        return idx, decided


def _float_draw(cumulative: F64, margin: float, words: NDArray[np.uint64]) -> tuple[I64, BOOL]:
    """The bin of each uniform word in the float table, and whether the margin certifies it."""
    u = words.astype(np.float64) * 2.0**-64
    m = cumulative.size - 1
    idx = np.clip(np.searchsorted(cumulative, u, side="right") - 1, 0, m - 1).astype(np.int64)
    decided = ((u - cumulative[idx]) >= margin) & ((cumulative[idx + 1] - u) >= margin)
    return idx, decided


def sample_categorical(base_measure: ArrayLike, exponents: ArrayLike, rate: Fraction, size: int = 1) -> I64:
    """``size`` independent indices i drawn with probability exactly proportional to ``m_i exp(-rate e_i)``.

    Args:
        base_measure: ``m_i >= 0``, float64, finite, not all zero (exact dyadic rationals).
        exponents: ``e_i >= 0`` integers (int64).
        rate: ``a >= 0`` as an exact ``Fraction``.
        size: number of independent draws.

    Raises:
        UsageError: for empty or mismatched inputs, negative or non-finite weights, negative exponents.

    """
    return CategoricalSampler.build(base_measure, exponents, rate).draw(size)


def _float_table(base: F64, shifts: I64, rate: Fraction) -> tuple[F64, float, float]:
    """Normalised cumulative weights (length m+1, from 0 to 1), the certified decision margin, 0 (nothing outside).

    One table of ``_float_tables``.
    """
    cumulative, margins, weights = _float_tables(base, shifts, rate, np.array([0, base.size], dtype=np.int64))
    return cumulative, float(margins[0]), float(weights[0])


def _float_tables(
    base: F64, shifts: I64, rate: Fraction, starts: I64, *, outside: tuple[F64, I64] | None = None
) -> tuple[F64, F64, F64]:
    """The float tables of consecutive laws at once: law g holds the categories ``starts[g]:starts[g + 1]`` (>= 1).

    Each law's table is the one docs/math/floating-point.md §9.3 describes, with its own largest weight,
    error bound and margin; the laws share only the limb width F = 61 - bitlen(m) of the whole array, so
    the exact int64 prefix sums run once over all of them (a law's are differences of those: exact).
    Returns the cumulative weights (law g's m_g + 1 boundaries, from 0 to 1, at ``starts[g] + g`` on), the
    margins and the certified weights outside. ``outside = (bounds on the sums of measures, shift bounds)``,
    one per law (a measure 0: nothing left out). ``shifts`` are per law: 0 at its largest positive term.
    """
    m = base.size
    first = starts[:-1]
    sizes = np.diff(starts)
    law = np.repeat(np.arange(sizes.size), sizes)
    positive = base > 0
    try:
        rate_f = float(rate)
    except OverflowError:
        rate_f = math.inf
    mantissa, exponent = np.frexp(base)
    exponent = exponent.astype(np.int64)
    with np.errstate(all="ignore"):
        d = np.where(shifts == 0, 0.0, rate_f * shifts.astype(np.float64))
        live = positive & (d <= _NEGLIGIBLE_EXPONENT)  # never empty in a law: a positive term has shift 0
        x_max = np.maximum.reduceat(np.where(live, exponent, -(1 << 40)), first)
        ex_rel = np.abs((exponent - x_max[law]).astype(np.float64))
        log_m = np.log(np.where(live, mantissa, 1.0)) - ex_rel * _LN2
        ell = np.where(live, log_m - d, -np.inf)
        top = np.maximum.reduceat(ell, first)
        s = np.where(live, ell - top[law], -np.inf)
        delta = np.where(live, ULP_BUDGET * (1.0 + ex_rel + np.abs(log_m) + d + np.abs(ell) + np.abs(s)), 0.0)
        w = np.where(live, np.exp(s), 0.0)
        err = np.exp(s + delta) * np.minimum(2.0, 2.0 * delta + 2.0**-47) * (1.0 + 2.0**-40) + 2.0**-1070
    err = np.where(live, err, np.where(positive, 2.0**-1000, 0.0))
    weights_outside = np.zeros(sizes.size, dtype=np.float64)
    if outside is not None:
        weights_outside = _outside_weights(outside, rate_f, x_max, top)
    # Exact prefix sums of w, cut into limbs of F bits (int64 cumsums cannot overflow: m 2^F < 2^61).
    bits = m.bit_length()
    limb_bits = 61 - bits
    limbs = -(-(60 + bits) // limb_bits)
    boundaries = np.arange(m + sizes.size) - np.repeat(np.arange(sizes.size), sizes + 1)  # law g: first[g] + 0..m_g
    origin = np.repeat(first, sizes + 1)
    last = starts[1:] + np.arange(sizes.size)  # each law's total in the cumulative layout
    remainder = w.copy()
    total = np.zeros(m + sizes.size, dtype=np.float64)
    for level in range(limbs):
        remainder = np.ldexp(remainder, limb_bits)
        digit = np.floor(remainder)
        remainder -= digit
        prefix = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(digit.astype(np.int64), out=prefix[1:])
        total += np.ldexp((prefix[boundaries] - prefix[origin]).astype(np.float64), -(level + 1) * limb_bits)
    totals = total[last]
    with np.errstate(all="ignore"):  # a law without positive measure (refused by the caller) divides 0 by 0
        cumulative = total / np.repeat(totals, sizes + 1)
        bound = 2.0 * _absolute(err, first, sizes, limbs * limb_bits, weights_outside, outside is not None)
        bound /= totals * (1.0 - 2.0**-40)
    return cumulative, bound * (1.0 + 2.0**-30) + EVAL_SLACK, weights_outside


def _absolute(err: F64, first: I64, sizes: I64, cut: int, weights_outside: F64, windowed: bool) -> F64:
    """Each law's total absolute error A (docs/math/floating-point.md §9.3): its weights' errors, the limbs' cut."""
    # |c_k - b_k| <= 2 A / T with A the total absolute error and T >= 1 the exact quantised total
    # (total[m] is within (limbs + 1) 2^-53 of it, relative); a law's m_g errors are summed in float, within
    # (m_g - 1) 2^-53 of their sum (nonnegative terms, any order).
    summed: F64 = np.add.reduceat(err, first) * (1.0 + 2.0**-30 + sizes * 2.0**-52)
    absolute = summed + sizes * 2.0**-cut
    if windowed:  # the categories left out count as 0: their whole weight is their error
        absolute = absolute * (1.0 + 2.0**-50) + weights_outside
    return absolute


def _outside_weights(outside: tuple[F64, I64], rate_f: float, x_max: I64, top: F64) -> F64:
    """Upper bounds on the normalised weights left out of windows: M 2^-x_max exp(-a k - top), one per law.

    A law's exact weights are m_i 2^-x_max exp(-a k_i - top) (``top`` = its max l, one common constant), so
    the categories outside, with sum m_i <= M and every k_i >= k, weigh at most that in all; the float
    evaluation errs by far less than the slack (within 2^-50 relative). A law with M = 0 leaves out nothing.
    """
    measure, shift = outside
    with np.errstate(all="ignore"):
        terms = (np.log(measure), x_max.astype(np.float64) * _LN2, rate_f * shift.astype(np.float64), top)
        exponent = terms[0] - terms[1] - terms[2] - terms[3]
        exponent += 2.0**-30 * (np.abs(terms[0]) + np.abs(terms[1]) + np.abs(terms[2]) + np.abs(terms[3])) + 2.0**-40
        weight = np.exp(exponent) * (1.0 + 2.0**-40) + 2.0**-1070
    weight = np.where(exponent < 700.0, weight, np.inf)  # far too heavy (or NaN): no window
    return np.where(measure == 0, 0.0, weight)


class _ExactTables:
    """Directed-rounding ``decimal`` brackets on the exact prefix sums, cached per precision."""

    def __init__(self, base: F64, shifts: I64, rate: Fraction) -> None:
        self._base = [Decimal(float(v)) for v in base]  # Decimal(float) is exact
        self._shifts = [int(k) for k in shifts]
        self._positive = [float(v) > 0 for v in base]
        self._rate = rate
        self._tables: dict[int, tuple[list[Decimal], list[Decimal], Context, Context]] = {}

    def decide(self, uniform: int, bits: int, precision: int) -> int | None:
        """The bin of ``u`` in ``[uniform/2^bits, (uniform+1)/2^bits)`` if the brackets settle it, else None."""
        lower, upper, floor_ctx, ceil_ctx = self._table(precision)
        m = len(lower) - 1
        scale = Decimal(1 << bits)
        below = floor_ctx.multiply(floor_ctx.divide(Decimal(uniform), scale), lower[m])  # <= u * W
        above = ceil_ctx.multiply(ceil_ctx.divide(Decimal(uniform + 1), scale), upper[m])  # >= u * W
        i = bisect.bisect_right(upper, below) - 1  # largest i with W_{<i} <= upper[i] <= below
        if 0 <= i < m and lower[i + 1] >= above:
            return i
        return None

    def _table(self, precision: int) -> tuple[list[Decimal], list[Decimal], Context, Context]:
        cached = self._tables.get(precision)
        if cached is not None:
            return cached
        work = precision + len(str(len(self._base))) + 3
        floor_ctx = Context(prec=work, rounding=ROUND_FLOOR, Emin=MIN_EMIN, Emax=MAX_EMAX)
        ceil_ctx = Context(prec=work, rounding=ROUND_CEILING, Emin=MIN_EMIN, Emax=MAX_EMAX)
        factors = _ExpBrackets(self._rate, work, floor_ctx, ceil_ctx)
        exp_of = factors.along(sorted({k for k, p in zip(self._shifts, self._positive, strict=True) if p}))
        zero = Decimal(0)
        lower, upper = [zero], [zero]
        low_acc = high_acc = zero
        for mass, k, positive in zip(self._base, self._shifts, self._positive, strict=True):
            if positive:
                e_low, e_high = exp_of[k]
                low_acc = floor_ctx.add(low_acc, floor_ctx.multiply(mass, e_low))
                high_acc = ceil_ctx.add(high_acc, ceil_ctx.multiply(mass, e_high))
            lower.append(low_acc)
            upper.append(high_acc)
        table = (lower, upper, floor_ctx, ceil_ctx)
        self._tables[precision] = table
        return table


class _ExpBrackets:
    """Lower/upper bounds on ``exp(-rate * k)`` at a given decimal precision."""

    def __init__(self, rate: Fraction, work: int, floor_ctx: Context, ceil_ctx: Context) -> None:
        self._num, self._den = rate.numerator, rate.denominator
        self._floor, self._ceil = floor_ctx, ceil_ctx
        self._nearest = Context(prec=work, rounding=ROUND_HALF_EVEN, Emin=MIN_EMIN, Emax=MAX_EMAX)
        widen = Decimal(f"1e{2 - work}")  # correctly rounded exp is within 10^(1-work) relative; use 10x
        self._down = floor_ctx.subtract(Decimal(1), widen)
        self._up = ceil_ctx.add(Decimal(1), widen)
        # Beyond exp(-cut) a term is far below the last digit kept; bracket it by [0, exp(-cut)].
        self._cut = Decimal(3 * (work + 800))
        self._tiny = ceil_ctx.multiply(self._nearest.exp(-self._cut), self._up)
        self._gaps: dict[int, tuple[Decimal, Decimal]] = {}

    def single(self, k: int) -> tuple[Decimal, Decimal]:
        """Bracket of ``exp(-rate * k)`` computed directly."""
        if k == 0 or self._num == 0:
            return Decimal(1), Decimal(1)
        x_low = self._floor.divide(Decimal(self._num * k), Decimal(self._den))
        if x_low > self._cut:
            return Decimal(0), self._tiny
        x_high = self._ceil.divide(Decimal(self._num * k), Decimal(self._den))
        low = self._floor.multiply(self._nearest.exp(-x_high), self._down)
        high = self._ceil.multiply(self._nearest.exp(-x_low), self._up)
        return low, high

    def along(self, ks: Sequence[int]) -> dict[int, tuple[Decimal, Decimal]]:
        """Brackets for sorted distinct ``ks`` (the first is 0), chained by gap factors (cheap)."""
        out: dict[int, tuple[Decimal, Decimal]] = {}
        low, high = Decimal(1), Decimal(1)
        previous = 0
        for k in ks:
            gap = k - previous
            if gap:
                if high <= self._tiny:  # exp(-a k) decreases in k: everything further is below `high`
                    low = Decimal(0)
                else:
                    g_low, g_high = self._gaps.get(gap) or self._gaps.setdefault(gap, self.single(gap))
                    low = self._floor.multiply(low, g_low)
                    high = self._ceil.multiply(high, g_high)
            out[k] = (low, high)
            previous = k
        return out
