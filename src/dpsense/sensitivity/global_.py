"""Global sensitivities of counts, sums and histograms, per privacy unit, in exact arithmetic.

GS_f = max over neighbouring x, x' of ||f(x) - f(x')|| (Dwork-Roth Def. 3.1; L1 for Laplace and
geometric noise, DR Thm 3.6; L2 for Gaussian noise, DR Thm A.1 / Balle-Wang 2018). Every function
here takes the declared ``adjacency`` and the enforced ``ContributionBound`` and returns the
sensitivity *for the privacy unit* (a unit may own up to C rows), never for a single row.

Neighbour model (``dpsense.core.adjacency``):

* ADD_REMOVE: x' is x plus or minus all rows of one unit (between 1 and C rows).
* REPLACE: same, public, number of units; all rows of one unit are replaced. Unless the bound
  declares ``fixed_rows_per_unit``, the replaced and the replacing unit may own different numbers
  of rows (0 to C), which matters for sums when 0 is outside [L, U].

Results are exact ``Fraction`` values. The one irrational result, the replace-adjacency L2
sensitivity of a histogram (sqrt(2) times an integer, docs/math/global-sensitivity.md §1.3), is returned as
``Sqrt``: it keeps the exact square (what zCDP accounting needs, rho = Delta_2^2 / (2 sigma^2)) and
rounds *up* whenever a rational or a float is asked for, so a noise scale derived from it is never
too small.

Source: docs/math/global-sensitivity.md (table), with the corrections noted on ``sum_sensitivity`` and
``histogram_sensitivity``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Literal, overload

from dpsense.core.adjacency import Adjacency
from dpsense.core.checks import integer_in
from dpsense.core.errors import InvalidSensitivity, UnsupportedRequest, UsageError
from dpsense.core.numbers import ceil_fraction, dec_sqrt, decimal_of
from dpsense.sensitivity.bounds import Bounds, ContributionBound


def _isqrt_exact(value: int) -> int | None:
    root = math.isqrt(value)
    return root if root * root == value else None


@dataclass(frozen=True, order=True)
class Sqrt:
    """The exact non-negative number sqrt(``squared``), for sensitivities that are not rational.

    Ordered by value. ``float(s)`` is the smallest double >= the true value and ``upper()`` a rational
    upper bound, so a noise scale computed from either is never understated.

    Attributes:
        squared: the exact square of the value (>= 0).

    """

    squared: Fraction

    def __post_init__(self) -> None:
        if isinstance(self.squared, int) and not isinstance(self.squared, bool):
            object.__setattr__(self, "squared", Fraction(self.squared))
        if not isinstance(self.squared, Fraction) or self.squared < 0:
            raise InvalidSensitivity(
                "a squared sensitivity must be a Fraction >= 0", self.squared, "pass Fraction(n, d) with n >= 0"
            )

    @property
    def exact(self) -> Fraction | None:
        """The value as a ``Fraction`` when it is rational (e.g. sqrt(4) = 2), else ``None``."""
        num = _isqrt_exact(self.squared.numerator)
        den = _isqrt_exact(self.squared.denominator)
        return None if num is None or den is None else Fraction(num, den)

    def upper(self, digits: int = 20) -> Fraction:
        """A rational upper bound with about ``digits`` significant digits (exact when rational)."""
        exact = self.exact
        if exact is not None:
            return exact
        bound = ceil_fraction(dec_sqrt(decimal_of(self.squared)), digits)
        while bound * bound < self.squared:  # verified exactly; never taken at 40-digit working precision
            bound += Fraction(1, 10**digits) * max(bound, Fraction(1))
        return bound

    def __float__(self) -> float:
        value = float(self.upper())
        while Fraction(value) ** 2 < self.squared:
            value = math.nextafter(value, math.inf)
        return value

    def __str__(self) -> str:
        exact = self.exact
        return str(exact) if exact is not None else f"√{self.squared}"


class Norm(str, Enum):
    """The norm a vector-valued sensitivity is measured in."""

    L1 = "l1"
    L2 = "l2"
    LINF = "linf"

    @classmethod
    def parse(cls, value: Norm | str) -> Norm:
        """Accept a ``Norm`` or its name ('l1', 'l2', 'linf')."""
        if isinstance(value, Norm):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise UsageError(
                "norm must be 'l1', 'l2' or 'linf'", value, "use 'l1' for Laplace, 'l2' for Gaussian noise"
            ) from None


def count_rows_sensitivity(*, adjacency: Adjacency | str, contribution: ContributionBound) -> Fraction:
    """Sensitivity of the number of rows: C, under both adjacencies.

    ADD_REMOVE: a unit brings at most C rows (attained). REPLACE: a unit with C rows can replace one
    with 0..C rows; C is an upper bound that is attained when row counts may differ. Under REPLACE
    with ``fixed_rows_per_unit`` the row count is public (units x C) and need not be released at all.

    Source: docs/math/global-sensitivity.md table, row "count of rows"; seed lesson 14.3 section 2.
    """
    Adjacency.parse(adjacency)
    return Fraction(contribution.max_rows_per_unit)


def count_units_sensitivity(*, adjacency: Adjacency | str, contribution: ContributionBound | None = None) -> Fraction:
    """Sensitivity of the number of distinct units (e.g. ``COUNT(DISTINCT person_id)``): 1.

    ADD_REMOVE: one unit joins or leaves (attained). REPLACE: the number of units is public, so 1
    is a safe upper bound (it covers a unit that appears in the table being swapped for one with no
    rows). Independent of the row bound; ``contribution`` is accepted for uniform call sites.

    Source: seed lesson 14.3 section 2 ("distinct persons: 1").
    """
    Adjacency.parse(adjacency)
    return Fraction(1)


def sum_sensitivity(bounds: Bounds, *, adjacency: Adjacency | str, contribution: ContributionBound) -> Fraction:
    """Sensitivity of the sum of values clipped to [L, U], per unit of at most C rows.

    * ADD_REMOVE: C * max(|L|, |U|).
    * REPLACE, ``fixed_rows_per_unit``: C * (U - L).
    * REPLACE, row counts free in 0..C: C * (max(U, 0) - min(L, 0)). This equals the table's
      C * (U - L) whenever L <= 0 <= U; when 0 is outside [L, U] the table's value is too small
      (bounds [20, 50], C = 2: one row of 20 replaced by two rows of 50 moves the sum by 80 > 60).

    All values are attained. The sum must be computed exactly (``exact_clipped_sum``): a float sum can
    exceed these values (Casacuberta et al., CCS 2022).

    Source: docs/math/global-sensitivity.md table, rows "sum" (corrected as above); seed lesson 14.3.
    """
    adj = Adjacency.parse(adjacency)
    c = contribution.max_rows_per_unit
    if adj is Adjacency.ADD_REMOVE:
        return c * bounds.magnitude
    if contribution.fixed_rows_per_unit:
        return c * bounds.width
    return c * (max(bounds.upper, Fraction(0)) - min(bounds.lower, Fraction(0)))


def centered_sum_sensitivity(
    bounds: Bounds, *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Fraction:
    """Sensitivity of sum(clip(x_i) - m) with m = (L + U) / 2, per unit of at most C rows.

    ADD_REMOVE: C * (U - L) / 2. REPLACE: C * (U - L). Both attained. Centering makes every term lie
    in [-(U - L)/2, (U - L)/2], which contains 0, so the row count of the replaced unit does not matter.

    Source: docs/math/global-sensitivity.md table, row "centered sum".
    """
    adj = Adjacency.parse(adjacency)
    c = contribution.max_rows_per_unit
    if adj is Adjacency.ADD_REMOVE:
        return c * bounds.width / 2
    return c * bounds.width


def mean_sensitivity_public_n(
    bounds: Bounds, n: int, *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Fraction:
    """Sensitivity of the mean of clipped values when the number of values n is public: C (U - L) / n.

    REPLACE only: n fixed on both sides forces the replacing unit to own as many rows as the one it
    replaces (at most min(C, n)), each of which moves by at most U - L; the result is
    min(C, n) (U - L) / n, attained. Under ADD_REMOVE n is private; this
    raises and points to ``mean_private_n_plan`` (noisy centered sum and noisy count, composed).

    Source: docs/math/index.md sections 1.3 ("mean, n public") and 2.3; seed lesson 14.3 ("24/n").

    Args:
        bounds: public clipping bounds.
        n: the public number of values averaged (rows, not units), an integer >= 1.
        adjacency: must be REPLACE.
        contribution: the enforced per-unit bound; C = 1 for "one value per person".

    Raises:
        UnsupportedRequest: under ADD_REMOVE.
        UsageError: if n is not an integer >= 1.

    """
    adj = Adjacency.parse(adjacency)
    if adj is Adjacency.ADD_REMOVE:
        raise UnsupportedRequest(
            "the mean with a public n needs replace adjacency; under add/remove n is private",
            adj.value,
            "release a noisy centered sum and a noisy count and compose them (mean_private_n_plan, mean_from_noisy)",
        )
    if not integer_in(n, 1):
        raise UsageError(
            "the public n must be an integer >= 1", n, "pass the public number of values averaged, e.g. n=1000"
        )
    return min(contribution.max_rows_per_unit, n) * bounds.width / n


def _histogram_sq_l2(contribution: ContributionBound) -> int:
    """The largest ||v||_2^2 over count vectors with ||v||_1 <= C, at most C0 non-zero bins, each <= C_inf."""
    c, c0, cinf = contribution.max_rows_per_unit, contribution.groups_cap, contribution.rows_per_group_cap
    full = min(c // cinf, c0)
    rest = c - full * cinf if full < c0 else 0
    return full * cinf * cinf + rest * rest


@overload
def histogram_sensitivity(
    norm: Literal[Norm.L1, Norm.LINF, "l1", "linf"], *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Fraction: ...
@overload
def histogram_sensitivity(
    norm: Literal[Norm.L2, "l2"], *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Sqrt: ...
@overload
def histogram_sensitivity(
    norm: Norm | str, *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Fraction | Sqrt: ...
def histogram_sensitivity(
    norm: Norm | str, *, adjacency: Adjacency | str, contribution: ContributionBound
) -> Fraction | Sqrt:
    """Sensitivity of a histogram (count per bin) over a public set of disjoint bins.

    Each row falls in one bin; a unit owns at most C rows, touches at most C0 bins and puts at most
    C_inf rows in one bin (C0, C_inf effectively capped at C). Let v be one unit's count vector:

    * L1: ADD_REMOVE max ||v||_1 = min(C, C0 C_inf); REPLACE twice that.
    * L2: ADD_REMOVE sqrt(M); REPLACE sqrt(2 M), with M = max ||v||_2^2 = q C_inf^2 + r^2, where
      q = min(floor(C / C_inf), C0) full bins and r = C - q C_inf rows left over (if q < C0).
      Replace uses ||v - v'||^2 <= ||v||^2 + ||v'||^2 for non-negative v, v'.
    * L_inf: min(C, C_inf) under both.

    All values are attained when the bin set has at least 2 min(C, C0) bins. The L2 value M is
    tighter than the table's min(C, sqrt(C0) C_inf) (which it never exceeds): for C = 5, C_inf = 2,
    M = 9 (value 3), whereas the table gives sqrt(5) * 2 = 4.47.

    Data-dependent bin keys additionally need private partition selection (delta > 0); this
    sensitivity does not cover key discovery.

    Source: docs/math/global-sensitivity.md §1.3, table rows "histogram".

    Returns:
        A ``Fraction`` for L1 and L_inf; a ``Sqrt`` for L2 (use ``.squared`` for zCDP, ``float()``
        or ``.upper()`` for a noise scale, both rounded up).

    """
    kind = Norm.parse(norm)
    adj = Adjacency.parse(adjacency)
    factor = 2 if adj is Adjacency.REPLACE else 1
    if kind is Norm.L1:
        c = contribution.max_rows_per_unit
        return Fraction(factor * min(c, contribution.groups_cap * contribution.rows_per_group_cap))
    if kind is Norm.LINF:
        return Fraction(contribution.rows_per_group_cap)
    return Sqrt(Fraction(factor * _histogram_sq_l2(contribution)))
