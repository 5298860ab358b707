"""What the planner asks each statistic (the rules live in ``dpsense.statistics``, one module each).

The planner (``query.planner``) is generic: ``plan(..., rules=STATISTICS)`` receives the statistics'
rules from above (``dpsense.statistics``, which also knows how each statistic runs on an engine, so it
sits above the query layer). ``StatisticRule`` is the part the planner reads; ``choose`` is the one
place an analyst's mechanism is validated against a rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UsageError
from dpsense.query._aggregates import AggregateKind
from dpsense.query._ir import AggregateIR
from dpsense.query._mechanisms import Family, Mechanism, mechanism_named
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice
from dpsense.sensitivity import Norm, Sqrt


@dataclass(frozen=True)
class Facts:
    """The public facts a step's sensitivity depends on."""

    adjacency: Adjacency
    rows: int | None  # C, the contribution bound of the aggregate (None for count_units)
    groups: int | None  # C0, the groups one unit may touch (grouped queries)
    grouped: bool
    public_n: int | None
    norm: Norm

    def bounded_rows(self, agg: AggregateIR) -> int:
        """C, which every statistic but count_units has (``StatisticRule.rows`` refuses a missing one first)."""
        if self.rows is None:
            raise InternalError(f"no contribution bound for {agg.name!r}")
        return self.rows


class StatisticRule(Protocol):
    """One statistic's planner rule (implemented by ``dpsense.statistics._base.Statistic``)."""

    @property
    def mechanisms(self) -> tuple[Mechanism, ...]:
        """The mechanisms an analyst may name."""
        ...

    @property
    def data_dependent(self) -> bool:
        """True when its value step calibrates to the data (group privacy over the record cost)."""
        ...

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """The mechanism chosen from public facts when the analyst names none."""
        ...

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """The plan steps the statistic is released in."""
        ...

    def part_choice(self, part: StepPart, choice: Choice) -> Choice:
        """The mechanism of one part when the statistic's choice names a combination (else ``choice``)."""
        ...

    def budget_weight(self, part: StepPart) -> Fraction:
        """The step's weight in the release's ε split (each step gets ε w / Σ w; 1 everywhere is an even split)."""
        ...

    def rows(self, agg: AggregateIR, *, dataset_rows: int | None, groups: int | None, grouped: bool) -> int | None:
        """C, the contribution bound its steps are stated for."""
        ...

    def sensitivity(self, agg: AggregateIR, part: StepPart, facts: Facts) -> Fraction | Sqrt:
        """The global sensitivity of a global step."""
        ...

    def explain_note(self, agg: AggregateIR, part: StepPart, public_n: int | None) -> str:
        """Text the explain report adds after a global step's sensitivity."""
        ...


#: The rules the planner is given, by statistic kind.
Rules = Mapping[AggregateKind, StatisticRule]


def choose(
    rule: StatisticRule, agg: AggregateIR, *, mechanism_epsilon: Fraction, delta: Fraction, adjacency: Adjacency
) -> Choice:
    """The analyst's valid override, else the statistic's public default for this ε."""
    allowed = rule.mechanisms
    if agg.mechanism is None:
        return rule.default(agg, mechanism_epsilon=mechanism_epsilon, adjacency=adjacency)
    named = mechanism_named(agg.mechanism)
    if named is None or named not in allowed:
        raise UsageError(
            f"mechanism {agg.mechanism!r} is not valid for {agg.kind.value} {agg.name!r}",
            agg.mechanism,
            f"use one of: {', '.join(allowed)}, or omit mechanism= for the default",
        )
    if named is Mechanism.GAUSSIAN and delta == 0:
        raise UsageError(
            f"the Gaussian mechanism for {agg.name!r} needs delta > 0",
            agg.mechanism,
            "pass delta > 0 to the release, or use mechanism='laplace' for pure ε-DP",
        )
    if named.family is Family.PTR and delta == 0:
        raise UsageError(
            f"Propose-Test-Release for {agg.name!r} needs delta > 0 (its test fails to refuse with chance δ)",
            agg.mechanism,
            "pass delta > 0 to the release, or omit mechanism= for a pure ε-DP default",
        )
    return Choice(named, "analyst", "requested by the analyst")
