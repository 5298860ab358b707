"""Exact Bernoulli(c / (e^epsilon + c)) by lazy comparison of a uniform real with the probability's binary expansion.

Every report probability of k-ary randomized response and unary encoding has the form
``P_c = c/(e^ε+c)`` for a positive integer c, irrational because e^ε is transcendental. A
Bernoulli(P_c) is drawn by comparing a uniform real ``V = 0.U1 U2 U3 ...`` (32-bit blocks ``U_j`` from
``dpsense.noise.entropy``) with the binary expansion ``0.D1 D2 ...`` of ``P_c``: output ``U_j < D_j`` at
the first block where ``U_j != D_j``. This returns ``[V < P_c]``, whose probability is exactly ``P_c``;
a block ties with probability 2^-32. The blocks ``floor(P_c · 2^m)`` are computed exactly from rigorous
decimal bounds on ``e^-ε`` (``Decimal.exp`` is correctly rounded; widened by two ulps, every later
step rounded outward), refining the precision until the floor is certain. The number of words drawn
depends on the uniforms only.
"""

from __future__ import annotations

import math
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpsense.core.errors import InternalError
from dpsense.noise import entropy

BOOL = NDArray[np.bool_]
_BLOCK_BITS = 32
#: Precision cap for the binary expansion; reaching it means a broken invariant, not bad luck.
_MAX_DIGITS = 1 << 16


def _context(digits: int, rounding: str) -> Context:
    return Context(
        prec=digits,
        rounding=rounding,
        Emax=MAX_EMAX,
        Emin=MIN_EMIN,
        traps=[InvalidOperation, DivisionByZero, Overflow],
    )


class RationalOddsProbability:
    """The irrational probability ``c/(e^ε + c)``, with its binary expansion computed on demand."""

    def __init__(self, c: int, epsilon: Fraction) -> None:
        if c < 1 or epsilon <= 0:
            raise InternalError("lazy probability needs c >= 1 and epsilon > 0")
        self._c = c
        self._epsilon = epsilon
        self._floors: dict[int, int] = {0: 0}
        # Decimal digits lost to the magnitude of ε when e^-ε is evaluated at an inexact ε.
        self._extra_digits = len(str(math.ceil(epsilon)))

    def floor_scaled(self, m: int) -> int:
        """``floor(P · 2^m)``, exactly."""
        if m not in self._floors:
            digits = (m * 31) // 100 + 24 + self._extra_digits
            while (found := self._try_floor(m, digits)) is None:
                digits *= 2
                if digits > _MAX_DIGITS:
                    raise InternalError(f"binary expansion of c/(e^ε+c) did not settle at m={m}")
            self._floors[m] = found
        return self._floors[m]

    def block(self, j: int, bits: int) -> int:
        """The j-th ``bits``-bit block (j >= 1) of the binary expansion of P."""
        return self.floor_scaled(j * bits) - (self.floor_scaled((j - 1) * bits) << bits)

    def _try_floor(self, m: int, digits: int) -> int | None:
        """``floor(P · 2^m)`` if ``digits`` decimal digits settle it, else None (P in [lo, hi])."""
        down, up, near = (_context(digits, r) for r in (ROUND_FLOOR, ROUND_CEILING, ROUND_HALF_EVEN))
        neg_eps = (Decimal(-self._epsilon.numerator), Decimal(self._epsilon.denominator))
        # exp is monotone and correctly rounded (Python decimal docs); two ulps outward are a margin.
        q_hi = near.next_plus(near.next_plus(near.exp(up.divide(*neg_eps))))
        q_lo = max(near.next_minus(near.next_minus(near.exp(down.divide(*neg_eps)))), Decimal(0))
        scale = Decimal(1 << m)
        # P = r/(1+r) with r = c·e^-ε is increasing in r, and 0 < P < r.
        r_hi = up.multiply(Decimal(self._c), q_hi)
        if up.multiply(r_hi, scale) <= 1:
            return 0
        r_lo = down.multiply(Decimal(self._c), q_lo)
        p_lo = down.divide(r_lo, up.add(1, r_lo))
        p_hi = up.divide(r_hi, down.add(1, r_hi))
        f_lo = int(down.multiply(p_lo, scale).to_integral_value(rounding=ROUND_FLOOR))
        f_hi = int(up.multiply(p_hi, scale).to_integral_value(rounding=ROUND_FLOOR))
        return f_lo if f_lo == f_hi else None


def bernoulli_lazy(prob: RationalOddsProbability, n: int, block_bits: int = _BLOCK_BITS) -> BOOL:
    """``n`` independent draws of Bernoulli(P), exactly, by lazy comparison of a uniform with P.

    Lane i draws blocks ``U_1, U_2, ...`` until the first ``U_j != D_j`` and returns ``U_j < D_j``,
    i.e. ``[V < P]`` for the uniform real ``V = sum_j U_j 2^(-j·block_bits)``.
    """
    mask = np.uint32((1 << block_bits) - 1)
    out = np.empty(n, dtype=np.bool_)
    pending = np.arange(n)
    level = 1
    while pending.size:
        digit = np.uint32(prob.block(level, block_bits))
        u = entropy.words32(pending.size)
        if block_bits < _BLOCK_BITS:
            u = u & mask
        if level == 1:
            out[:] = u < digit
            pending = np.flatnonzero(u == digit)
        else:
            out[pending] = u < digit
            pending = pending[u == digit]
        level += 1
    return out
