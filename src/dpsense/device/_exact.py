"""Exact samplers in pure Python: uniform integers by rejection, Bernoulli(c/(e^a + c)) by lazy comparison.

Every randomized-response probability of the device clients has the form ``P = c/(e^a + c)`` with a
positive integer c and a positive rational a (docs/math/local-collection.md §13.2). ``P`` is irrational
(e^a is transcendental), so it has one binary expansion ``0.D1 D2 ...`` (32-bit blocks). A draw takes
uniform 32-bit words ``U1, U2, ...`` and returns ``U_j < D_j`` at the first ``j`` with ``U_j != D_j``:
that is the event ``V < P`` for the uniform real ``V = 0.U1 U2 ...``, of probability exactly ``P``.
The blocks ``floor(P 2^(32j))`` come from rigorous decimal bounds on e^-a (``Decimal.exp`` is correctly
rounded; widened by two ulps, every later step rounded outward), refined until the floor is certain.
This is the scalar, standard-library form of the method of ``docs/math/local-dp.md §11.1``.
"""

from __future__ import annotations

import functools
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

from dpsense.device import _entropy

_BLOCK = 32
#: Decimal digits beyond which an expansion that has not settled means a bug, not bad luck.
_MAX_DIGITS = 1 << 14


class OddsProbability:
    """The probability ``c/(e^a + c)``, its 32-bit blocks computed on demand and cached."""

    def __init__(self, c: int, a: Fraction) -> None:
        if c < 1 or a <= 0:
            raise ValueError("OddsProbability needs c >= 1 and a > 0 (this is a bug in the caller)")
        self.c = c
        self.a = a
        self._floors: dict[int, int] = {0: 0}
        self._extra = len(str(a.numerator // a.denominator + 1))

    def __repr__(self) -> str:
        return f"OddsProbability(c={self.c}, a={self.a})"

    def block(self, j: int) -> int:
        """The j-th 32-bit block (j >= 1) of the binary expansion."""
        return self._floor(j * _BLOCK) - (self._floor((j - 1) * _BLOCK) << _BLOCK)

    def _floor(self, bits: int) -> int:
        if bits not in self._floors:
            digits = bits * 31 // 100 + 24 + self._extra
            while (found := self._settle(bits, digits)) is None:
                digits *= 2
                if digits > _MAX_DIGITS:
                    raise ArithmeticError(f"the expansion of {self!r} did not settle (this is a bug)")
            self._floors[bits] = found
        return self._floors[bits]

    def _settle(self, bits: int, digits: int) -> int | None:
        """``floor(P 2^bits)`` if ``digits`` decimal digits decide it, else None."""
        down = Context(prec=digits, rounding=ROUND_FLOOR)
        up = Context(prec=digits, rounding=ROUND_CEILING)
        near = Context(prec=digits, rounding=ROUND_HALF_EVEN)
        num, den = Decimal(-self.a.numerator), Decimal(self.a.denominator)
        # e^-a bracketed: exp is monotone and correctly rounded; two ulps outward are the margin.
        t_hi = near.next_plus(near.next_plus(near.exp(up.divide(num, den))))
        t_lo = max(near.next_minus(near.next_minus(near.exp(down.divide(num, den)))), Decimal(0))
        # P = r/(1 + r) with r = c e^-a, increasing in r.
        r_lo, r_hi = down.multiply(self.c, t_lo), up.multiply(self.c, t_hi)
        scale = Decimal(1 << bits)
        lo = down.multiply(down.divide(r_lo, up.add(1, r_lo)), scale).to_integral_value(rounding=ROUND_FLOOR)
        hi = up.multiply(up.divide(r_hi, down.add(1, r_hi)), scale).to_integral_value(rounding=ROUND_FLOOR)
        return int(lo) if lo == hi else None


@functools.lru_cache(maxsize=64)
def odds_probability(c: int, a: Fraction) -> OddsProbability:
    """The (cached) ``OddsProbability(c, a)``: its expansion is computed once per process."""
    return OddsProbability(c, a)


def bernoulli(prob: OddsProbability, n: int) -> list[bool]:
    """``n`` independent exact Bernoulli(P) draws (one 32-bit word each, more on a tie: prob 2^-32)."""
    first = prob.block(1)
    words = struct.unpack(f"<{n}I", _entropy.read(4 * n))
    out = [u < first for u in words]
    for i, u in enumerate(words):
        if u == first:  # a tie: compare the next blocks until they differ
            level, digit, w = 2, prob.block(2), int.from_bytes(_entropy.read(4), "little")
            while w == digit:
                level, digit, w = level + 1, prob.block(level + 1), int.from_bytes(_entropy.read(4), "little")
            out[i] = w < digit
    return out


def uniform_below(m: int) -> int:
    """A uniform integer in {0, ..., m-1} (m >= 1), by rejection of the top bits: exact."""
    if m < 1:
        raise ValueError("uniform_below needs m >= 1 (this is a bug in the caller)")
    bits = (m - 1).bit_length()
    if bits == 0:
        return 0
    n_bytes = (bits + 7) // 8
    while True:
        value = int.from_bytes(_entropy.read(n_bytes), "little") >> (8 * n_bytes - bits)
        if value < m:
            return value


def fair_bit() -> bool:
    """A uniform random bit."""
    return bool(_entropy.read(1)[0] & 1)
