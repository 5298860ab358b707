"""What every statistic states for the planner: its mechanisms, default, parts, contribution bound, sensitivity.

A statistic is one module of this package with one ``Statistic`` subclass; the registry
(``dpsense.statistics.STATISTICS``) lists them. The planner (``query.planner``) is generic: it is
given the registry (``query._rules.StatisticRule``) and asks the statistic of each aggregate for

* ``mechanisms`` (the ones an analyst may name, the default first where it is fixed) and ``default``
  (the choice from public facts when the analyst names none);
* ``parts``: the plan steps it is released in (a private-n mean: a centred sum and a count);
* ``rows``: the contribution bound C its steps are stated for;
* ``sensitivity``: the global sensitivity of a global step, per adjacency x grouping (docs/math/
  global-sensitivity.md), which the neighbour harness (``tests/privacy``) checks by building neighbours;
* ``data_dependent`` / ``collects``: whether its value step calibrates to the data (group privacy over
  the record cost, ``_planner_rules.unit_record_cost``) and reads the bounded rows to the driver.

Everything here is a function of public facts; nothing reads data.
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UsageError
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Family, Mechanism, mechanism_named
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice, count_sensitivity
from dpsense.query._rules import Facts as Facts
from dpsense.sensitivity import Bounds, Sqrt

M = Mechanism
#: The counting mechanisms and the additive ones (Laplace first: the default).
COUNTING = (M.LAPLACE, M.GAUSSIAN, M.GEOMETRIC)
ADDITIVE = (M.LAPLACE, M.GAUSSIAN)


class Statistic:
    """One statistic's planner rule (see the module docstring); subclasses set the class attributes."""

    kind: ClassVar[AggregateKind]
    mechanisms: ClassVar[tuple[Mechanism, ...]]
    data_dependent: ClassVar[bool] = False
    collects: ClassVar[bool] = False
    default_reason: ClassVar[str] = "pure ε-DP default for additive statistics"

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction) -> Choice:
        """The mechanism chosen from public facts when the analyst names none."""
        return Choice(self.mechanisms[0], "default", self.default_reason)

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """The plan steps the statistic is released in (one value by default)."""
        return (StepPart.VALUE,)

    def rows(self, agg: AggregateIR, *, dataset_rows: int | None, groups: int | None, grouped: bool) -> int | None:
        """C: the aggregate's ``max_rows_per_unit``, else the dataset's; refused when neither is declared."""
        rows = agg.max_rows_per_unit if agg.max_rows_per_unit is not None else dataset_rows
        if rows is None:
            raise UsageError(
                f"the contribution bound of {agg.name!r} is unknown",
                None,
                "declare max_rows_per_unit= on the aggregate, or pass the dataset's max_rows_per_unit to plan()",
            )
        return rows

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The global sensitivity of a global step; the default covers the noisy count of a private n."""
        rows = facts.bounded_rows(agg)
        if part is StepPart.COUNT:
            return count_sensitivity(
                adjacency=facts.adjacency, rows=rows, groups=facts.groups, grouped=facts.grouped, norm=facts.norm
            )
        raise InternalError(f"{self.kind.value} has no global sensitivity for its {part.value} part")

    def explain_note(self, part: StepPart, public_n: int | None) -> str:
        """Text the explain report adds after a global step's sensitivity (none by default)."""
        return ""


def bounds_of(agg: AggregateIR) -> Bounds:
    """The public clipping bounds [L, U] of a one-column numeric statistic."""
    return Bounds(*agg.bounds[0])


def needs_public_n(agg: AggregateIR) -> bool:
    """An order statistic released by smooth sensitivity or PTR runs on values resized to a noisy count."""
    named = None if agg.mechanism is None else mechanism_named(agg.mechanism)
    return named is not None and named.family in (Family.SMOOTH, Family.PTR)
