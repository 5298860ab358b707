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

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, ClassVar, Protocol

from dpsense.core.adjacency import Adjacency
from dpsense.core.errors import InternalError, UsageError
from dpsense.core.privacy_loss import PrivacyLoss
from dpsense.engine import GroupColumns, GroupRow
from dpsense.query._aggregates import Aggregate, AggregateKind
from dpsense.query._ir import AggregateIR, QueryIR
from dpsense.query._mechanisms import Family, Mechanism, mechanism_named
from dpsense.query._parts import StepPart
from dpsense.query._planner_rules import Choice, count_sensitivity
from dpsense.query._rules import Facts as Facts
from dpsense.query.planner import Plan, PlanStep
from dpsense.sensitivity import Bounds, Sqrt
from dpsense.statistics._steps import Output

M = Mechanism
#: What one statistic's run produces: its output columns and the realised loss of each of its steps.
Produced = tuple[list[Output], list[PrivacyLoss]]


class Runner(Protocol):
    """What a statistic's run code asks of the release's runner (``release._executor._Runner``).

    The runner owns the release's bounded views (one per contribution bound, under the release's
    secret salt), the prefetched group aggregates and the data-dependent machinery shared by several
    statistics (``release._data_dependent``); a statistic states which aggregates it needs
    (``additive_specs``) and turns them into released values (``run``).
    """

    plan: Plan
    group_column: GroupColumns | None

    def fetched(self, agg: AggregateIR, steps: list[PlanStep]) -> list[GroupRow]:
        """The group aggregates ``additive_specs`` asked for, one row per public group."""
        ...

    def step_rows(self, step: PlanStep) -> int:
        """C of a step (its bounded view)."""
        ...

    def group_rows(self, step: PlanStep, aggregates: list[Any]) -> list[GroupRow]:
        """Group aggregates on the step's bounded view, asked after an earlier step of the same statistic."""
        ...

    def present_values(self, agg: AggregateIR, step: PlanStep) -> list[Any]:
        """The present (non-missing) values of the aggregate's column per group."""
        ...

    def order_statistic(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        """A quantile per group (EM, inverse sensitivity, or resized to a noisy n: smooth, PTR)."""
        ...

    def joint_quantiles(self, agg: AggregateIR, step: PlanStep) -> tuple[list[Output], list[PrivacyLoss]]:
        """Several quantiles per group by recursive splitting, one output per quantile."""
        ...

    def trimmed_mean(self, agg: AggregateIR, steps: list[PlanStep]) -> tuple[Output, list[PrivacyLoss]]:
        """A trimmed mean per group on values resized to a noisy n."""
        ...

    def min_distance(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        """The closest pair's distance over the whole view."""
        ...

    def triangle_count(self, agg: AggregateIR, step: PlanStep) -> tuple[Output, list[PrivacyLoss]]:
        """Triangles of the bounded edges on the public vertex set."""
        ...


#: The counting mechanisms and the additive ones (Laplace first: the default).
COUNTING = (M.LAPLACE, M.GAUSSIAN, M.GEOMETRIC)
ADDITIVE = (M.LAPLACE, M.GAUSSIAN)


#: The declarative fields (a YAML spec's and an HTTP body's aggregate) every statistic takes.
SHARED_FIELDS = frozenset({"kind", "max_rows_per_unit", "mechanism"})
#: ... a statistic of one bounded numeric column, and the proposed bound of the PTR mechanisms.
NUMERIC_FIELDS = SHARED_FIELDS | {"column", "bounds"}
PTR_FIELDS = frozenset({"proposed_bound"})
#: (fields a statistic accepts, fields it requires) in its declarative spelling.
Fields = tuple[frozenset[str], frozenset[str]]


def common_fields(f: Mapping[str, Any]) -> dict[str, Any]:
    """The contribution bound and the named mechanism of a declarative aggregate."""
    return {"max_rows_per_unit": f.get("max_rows_per_unit"), "mechanism": f.get("mechanism")}


def bounds_field(f: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The ``bounds`` pair of a declarative aggregate, if given."""
    bounds = f.get("bounds")
    return None if bounds is None else (bounds[0], bounds[1])


#: The value step of a statistic released on a noisy public n (smooth sensitivity, PTR, inverse sensitivity
#: on the resized values) weighs 9 against the count's 1: 90 % of its ε. The count only sets how many
#: values are padded or trimmed (about 1/(2 ε_count) ranks at the median), while the value step's noise
#: falls faster than 1/ε (the smoothing parameter β grows with ε). Measured on the Session's smooth median
#: (add/remove, 100 releases, median |error|, w = 1 / 3 / 9 / 19): ages ε = 1: 2.47 / 1.71 / 1.45 / 1.19;
#: incomes ε = 1: 886 / 496 / 427 / 392; small ε = 0.1: 74.9 / 45.1 / 45.1 / 49.2 (docs/planner.md).
PUBLIC_N_VALUE_WEIGHT = Fraction(9)


def public_n_weight(part: StepPart) -> Fraction:
    """``PUBLIC_N_VALUE_WEIGHT`` for the value step of a count-then-value statistic, 1 for its count."""
    return PUBLIC_N_VALUE_WEIGHT if part is StepPart.VALUE else Fraction(1)


class Statistic:
    """One statistic's planner rule (see the module docstring); subclasses set the class attributes.

    ``fields`` and ``from_fields`` are its declarative spelling (``dpsense release SPEC.yaml``, the
    service's JSON body): the fields it accepts and requires, and the aggregate they describe (the
    front ends check the names against ``fields``, the constructor checks the values).
    """

    kind: ClassVar[AggregateKind]
    mechanisms: ClassVar[tuple[Mechanism, ...]]
    fields: ClassVar[Fields] = (NUMERIC_FIELDS, frozenset({"column"}))
    #: The constructor of a one-column numeric statistic: its spelling ``{kind, column, bounds?, ...}``.
    constructor: ClassVar[Callable[..., Aggregate] | None] = None
    data_dependent: ClassVar[bool] = False
    collects: ClassVar[bool] = False
    default_reason: ClassVar[str] = "pure ε-DP default for additive statistics"

    def default(self, agg: AggregateIR, *, mechanism_epsilon: Fraction, adjacency: Adjacency) -> Choice:
        """The mechanism chosen from public facts when the analyst names none."""
        return Choice(self.mechanisms[0], "default", self.default_reason)

    def from_fields(self, f: Mapping[str, Any]) -> Aggregate:
        """The aggregate of its declarative spelling (absent fields left out); by default ``constructor``'s."""
        build = type(self).constructor
        if build is None:
            raise InternalError(f"{self.kind.value} has no declarative spelling")
        return build(f["column"], bounds=bounds_field(f), **common_fields(f))

    def parts(
        self, agg: AggregateIR, *, adjacency: Adjacency, public_n: int | None, grouped: bool
    ) -> tuple[StepPart, ...]:
        """The plan steps the statistic is released in (one value by default)."""
        return (StepPart.VALUE,)

    def part_choice(self, part: StepPart, choice: Choice) -> Choice:
        """The mechanism of one part: the statistic's choice, unless it names a combination of mechanisms."""
        return choice

    def budget_weight(self, part: StepPart) -> Fraction:
        """The step's weight in the statistic's share of ε: 1 (an even split) unless a statistic states why not."""
        return Fraction(1)

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

    def explain_note(self, agg: AggregateIR, part: StepPart, public_n: int | None) -> str:
        """Text the explain report adds after a global step's sensitivity (none by default)."""
        return ""

    def noise_steps(self, agg: AggregateIR, step: PlanStep) -> list[PlanStep]:
        """The mechanism runs of a global step (itself; a hierarchical count runs one per level at its share)."""
        return [step]

    def released_groups(self, ir: QueryIR, agg: AggregateIR) -> tuple[GroupColumns, list[Any]] | None:
        """The released table's key columns and keys when they are not the query's grouping (None: they are)."""
        return None

    # -- how it runs on the engine seam --------------------------------------------------------------

    def check_executable(self, ir: QueryIR, agg: AggregateIR, plan: Plan) -> None:
        """Refuse, before any charge, a request this statistic cannot run (the error names the alternative)."""

    def additive_specs(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> tuple[int, list[Any]] | None:
        """(C, engine aggregate specs) a global statistic needs from one bounded view; None when it has none.

        The runner fetches every statistic's specs of one view in one ``group_aggregates`` scan.
        """
        return None

    def run(self, runner: Runner, agg: AggregateIR, steps: list[PlanStep]) -> Produced:
        """Release the statistic's steps on the runner's bounded views (inside the release scope)."""
        raise InternalError(f"no executor for {self.kind.value}")  # check_executable refuses these first


def bounds_of(agg: AggregateIR) -> Bounds:
    """The public clipping bounds [L, U] of a one-column numeric statistic."""
    return Bounds(*agg.bounds[0])


def needs_public_n(agg: AggregateIR) -> bool:
    """An order statistic released by smooth sensitivity or PTR runs on values resized to a noisy count."""
    named = None if agg.mechanism is None else mechanism_named(agg.mechanism)
    return named is not None and named.family in (Family.SMOOTH, Family.PTR)
