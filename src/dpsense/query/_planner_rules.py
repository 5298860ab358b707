"""The planner's public rule tables: which mechanisms each statistic may use, the defaults, the theorems.

Everything here is a function of public facts only (the statistic, the declared adjacency, the schema's
bounds, the contribution bounds, the budget share); nothing reads data. Mechanisms are ``Mechanism``
members (``_mechanisms``), not imports: the planner is L3 and ``release/`` maps each member to
``dpsense.mechanisms`` when it executes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import UsageError
from dpsense.query._mechanisms import Family, Mechanism, RecordCost
from dpsense.sensitivity import (
    Bounds,
    ContributionBound,
    Norm,
    Sqrt,
    centered_sum_sensitivity,
    count_rows_sensitivity,
    count_units_sensitivity,
    histogram_sensitivity,
    mean_sensitivity_public_n,
    sum_sensitivity,
)


@dataclass(frozen=True)
class Choice:
    """A mechanism for one statistic, who chose it and why."""

    mechanism: Mechanism
    chosen_by: str
    reason: str

    @property
    def uses_delta(self) -> bool:
        """True for the (ε, δ) mechanisms (Gaussian, Propose-Test-Release); every other one is pure ε-DP."""
        return self.mechanism.uses_delta

    @property
    def is_ptr(self) -> bool:
        """True for Propose-Test-Release (it answers or refuses, and needs δ > 0)."""
        return self.mechanism.family is Family.PTR

    @property
    def noise(self) -> str | None:
        """The noise family of a smooth-sensitivity release (Cauchy: pure ε-DP), else ``None``."""
        return self.mechanism.noise


def norm_for(choice: Choice) -> Norm:
    """L2 for Gaussian noise, L1 for Laplace-type noise."""
    return Norm.L2 if choice.uses_delta else Norm.L1


def count_sensitivity(
    *, adjacency: Adjacency, rows: int, groups: int | None, grouped: bool, norm: Norm
) -> Fraction | Sqrt:
    """Rows counted (overall, or per public group, a unit touching at most ``groups`` groups)."""
    contribution = ContributionBound(max_rows_per_unit=rows, max_groups_per_unit=groups)
    if grouped:
        return histogram_sensitivity(norm, adjacency=adjacency, contribution=contribution)
    return count_rows_sensitivity(adjacency=adjacency, contribution=contribution)


def units_sensitivity(*, adjacency: Adjacency, groups: int | None, grouped: bool, norm: Norm) -> Fraction | Sqrt:
    """Distinct units (overall: 1; per group: one per group touched, at most ``groups`` groups)."""
    if not grouped:
        return count_units_sensitivity(adjacency=adjacency)
    if groups is None:  # guarded by the planner
        raise UsageError("a grouped count_units needs max_groups_per_unit", None, "declare max_groups_per_unit")
    contribution = ContributionBound(max_rows_per_unit=groups, max_rows_per_group=1)
    return histogram_sensitivity(norm, adjacency=adjacency, contribution=contribution)


def sum_sensitivity_for(bounds: Bounds, *, adjacency: Adjacency, rows: int, grouped: bool) -> Fraction:
    """A clipped sum (overall, or per public group).

    Per group the L1 and L2 sensitivities are at most the add/remove value C max(|L|, |U|) (all rows in
    one group is the worst case), and twice that under replace (remove one unit, add another, possibly
    in other groups).
    """
    contribution = ContributionBound(max_rows_per_unit=rows)
    if not grouped:
        return sum_sensitivity(bounds, adjacency=adjacency, contribution=contribution)
    factor = 2 if adjacency is Adjacency.REPLACE else 1
    return factor * sum_sensitivity(bounds, adjacency=Adjacency.ADD_REMOVE, contribution=contribution)


def centered_sensitivity_for(bounds: Bounds, *, adjacency: Adjacency, rows: int) -> Fraction:
    """The centered sum of a private-n mean: C(U-L)/2 add/remove, C(U-L) replace, also per group."""
    contribution = ContributionBound(max_rows_per_unit=rows)
    return centered_sum_sensitivity(bounds, adjacency=adjacency, contribution=contribution)


def squares_sensitivity(
    bounds: Bounds, *, adjacency: Adjacency, rows: int, grouped: bool, norm: Norm
) -> Fraction | Sqrt:
    """The sum of squared centered values (x - m)^2, m = (L + U)/2, each in [0, h^2] with h = (U - L)/2.

    Add/remove: one unit adds or removes at most C terms, each in [0, h^2]: C h^2 in every norm (all
    its rows may sit in one group). Replace, ungrouped: the unit's at most C terms are removed and at
    most C others added; both partial sums lie in [0, C h^2] and the terms are non-negative, so the
    sum moves by at most C h^2. Replace, grouped (docs/math/global-sensitivity.md §1.4, "Grouped releases under
    replace"): the replaced unit's terms can leave group a (its sum falls by up to C h^2) while the
    replacement's enter group b (its sum rises by up to C h^2): the per-group vector moves in two
    coordinates, L1 2 C h^2 and L2 sqrt(2) C h^2. (Splitting the rows over more groups only lowers the
    L2 change: for a, b >= 0 with a + b fixed, a^2 + b^2 is largest at one coordinate.)
    """
    half = (bounds.upper - bounds.lower) / 2
    one_side = rows * half * half
    if adjacency is Adjacency.ADD_REMOVE or not grouped:
        return one_side
    if norm is Norm.L2:
        return Sqrt(2 * one_side * one_side)
    return 2 * one_side


def calibrated_changes(mechanism: Mechanism, *, adjacency: Adjacency) -> int:
    """k: the record changes one call of the mechanism is calibrated for (2 only for smooth under replace)."""
    if mechanism.record_cost is RecordCost.SMOOTH and adjacency is Adjacency.REPLACE:
        return 2
    return 1


def unit_record_cost(
    mechanism: Mechanism, *, adjacency: Adjacency, rows: int, groups: int | None, grouped: bool
) -> int:
    """M: a unit's change costs at most M calls' ε over all public groups; the step runs at ε_g = ε / M.

    A unit keeps at most C rows in at most G groups (G = min(C0, C); C when no C0 is declared). Each
    public group's mechanism is ε_g-DP for k record changes of its own group (``calibrated_changes``),
    so a group that sees m changes loses ceil(m / k) ε_g (Dwork-Roth Thm 2.2) and disjoint groups add
    up (parallel composition over the partition). The worst case over neighbours:

    * add/remove: the unit's r_g removals (or additions) sum to at most C, k = 1: M = C;
    * replace, ungrouped or in one group: C removals and C additions in the same group are at most C
      changes for ``ORDER`` (replacements) and 2C resized replacements, i.e. C calls of k = 2 for
      ``SMOOTH``; ``ONE_CHANGE`` pays 2C;
    * replace, grouped (docs/math/global-sensitivity.md §1.4): the replaced unit's rows can leave groups a_1..a_G
      while its replacement's rows enter other groups b_1..b_G, so removals and additions no longer
      pair up: ``ORDER`` and ``ONE_CHANGE`` pay r + a <= 2C; ``SMOOTH`` pays
      sum_g ceil(r_g / 2) + sum_g ceil(a_g / 2) <= 2 R(C, G), where R(C, G) = (C + o) / 2 is the
      largest sum of ceil(r_g / 2) over at most G parts r_g summing to C (o, the number of odd parts,
      is the largest integer <= min(G, C) with o = C mod 2). A group that sees both removals and
      additions costs ceil((r + a) / 2) <= ceil(r / 2) + ceil(a / 2), so separate groups are the worst.
    """
    family = mechanism.record_cost
    if adjacency is Adjacency.ADD_REMOVE:
        return rows
    if family is RecordCost.ONE_CHANGE:
        return 2 * rows
    if not grouped:
        return rows
    if family is RecordCost.ORDER:
        return 2 * rows
    parts = min(groups if groups is not None else rows, rows)
    odd = parts if (parts - rows) % 2 == 0 else parts - 1
    return rows + odd


def public_n_mean_sensitivity(bounds: Bounds, *, n: int, adjacency: Adjacency, rows: int) -> Fraction:
    """The mean as sum/n with a public n (replace adjacency): min(C, n)(U-L)/n."""
    contribution = ContributionBound(max_rows_per_unit=rows)
    return mean_sensitivity_public_n(bounds, n, adjacency=adjacency, contribution=contribution)
