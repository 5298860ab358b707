"""Grouped releases under replace adjacency (issue 13 findings 2 and 3; docs/math/global-sensitivity.md §1.4).

A replaced unit can leave one public group while its replacement enters another. The record cost M of a
data-dependent step and the squared-sum sensitivity of the variance are checked here against an
independent enumeration of every way a unit's rows can move, not against the planner's own formulas.
"""

from __future__ import annotations

import itertools
import math

import pytest

from dpsense.core.adjacency import Adjacency
from dpsense.query import Mechanism, Query, Schema, StepPart
from dpsense.query import _aggregates as q
from dpsense.query._planner_rules import calibrated_changes, unit_record_cost
from dpsense.sensitivity import Sqrt
from dpsense.statistics import plan


def _compositions(total: int, parts: int, support: int) -> list[tuple[int, ...]]:
    """Every way to put at most ``total`` changes into ``parts`` ordered groups, at most ``support`` non-zero."""
    return [
        c
        for c in itertools.product(range(total + 1), repeat=parts)
        if sum(c) <= total and sum(1 for v in c if v) <= support
    ]


def _worst_cost(*, rows: int, groups: int, k: int, replace: bool, grouped: bool, in_place_is_one: bool) -> int:
    """The worst sum over groups of ceil(changes_g / k), by enumerating every neighbour's group counts.

    The unit's at most C rows lie in at most G groups; under replace its replacement's rows lie in at most
    G groups of their own, anywhere among the public groups (2G slots cover every overlap). Add/remove:
    only removals (or only additions). A group with r removals and a additions sees max(r, a) changes when
    a replacement in place counts once (the rank utility of a quantile on the private n), else r + a
    (values resized to a public n, edges).
    """
    width = (2 * groups if replace else groups) if grouped else 1
    support = groups if grouped else 1
    worst = 0
    removals = _compositions(rows, width, support)
    additions = _compositions(rows, width, support) if replace else [(0,) * width]
    for r in removals:
        for a in additions:
            changes = [max(x, y) if in_place_is_one else x + y for x, y in zip(r, a, strict=True)]
            worst = max(worst, sum(math.ceil(c / k) for c in changes))
    return worst


_FAMILIES = {
    "em_quantile": True,
    "inverse_sensitivity_order_statistic": True,
    "smooth_median": False,
    "smooth_trimmed_mean": False,
    "inverse_sensitivity_trimmed_mean": False,
    "ptr_order_statistic": False,
}


@pytest.mark.parametrize("mechanism", sorted(_FAMILIES))
@pytest.mark.parametrize("adjacency", [Adjacency.ADD_REMOVE, Adjacency.REPLACE])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize(("rows", "groups"), [(1, 1), (2, 1), (3, 1), (5, 1), (2, 2), (3, 2), (4, 2), (3, 3)])
def test_the_record_cost_is_the_worst_case_over_every_move_between_groups(
    mechanism: str, adjacency: Adjacency, grouped: bool, rows: int, groups: int
) -> None:
    k = calibrated_changes(Mechanism(mechanism), adjacency=adjacency)
    expected = _worst_cost(
        rows=rows,
        groups=groups,
        k=k,
        replace=adjacency is Adjacency.REPLACE,
        grouped=grouped,
        in_place_is_one=_FAMILIES[mechanism],
    )
    cost = unit_record_cost(Mechanism(mechanism), adjacency=adjacency, rows=rows, groups=groups, grouped=grouped)
    assert cost == expected  # sound (>=) and tight (<=): the exact worst case


def test_the_review_witness_needs_twice_the_record_cost() -> None:
    """A = {10, 10, 1000}, B = {0, 990, 990, 1000}, C = 1: unit "0" moves B -> A, both groups change."""
    assert (
        unit_record_cost(
            Mechanism.INVERSE_SENSITIVITY_MEDIAN, adjacency=Adjacency.REPLACE, rows=1, groups=1, grouped=True
        )
        == 2
    )
    assert (
        unit_record_cost(
            Mechanism.INVERSE_SENSITIVITY_MEDIAN, adjacency=Adjacency.REPLACE, rows=1, groups=1, grouped=False
        )
        == 1
    )


@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@pytest.mark.parametrize("rows", [1, 3, 4])
@pytest.mark.parametrize("mechanism", [None, "inverse_sensitivity_median", "smooth_median", "ptr_order_statistic"])
def test_a_grouped_median_runs_at_the_step_epsilon_over_its_record_cost(
    schema: Schema, adjacency: str, rows: int, mechanism: str | None
) -> None:
    ir = (
        Query("events")
        .group_by("region")
        .max_groups_per_unit(1)
        .agg(md=q.median("age", mechanism=mechanism, proposed_bound=1 if mechanism == "ptr_order_statistic" else None))
        .build(schema)
    )
    p = plan(
        ir,
        epsilon=1,
        delta="1e-9" if mechanism == "ptr_order_statistic" else 0,
        adjacency=adjacency,
        max_rows_per_unit=rows,
    )
    (step,) = [s for s in p.steps if s.part is StepPart.VALUE]
    k = step.changes_per_call
    family_in_place_once = step.mechanism in ("em_quantile", "inverse_sensitivity_median")
    worst = _worst_cost(
        rows=rows, groups=1, k=k, replace=adjacency == "replace", grouped=True, in_place_is_one=family_in_place_once
    )
    assert step.mechanism_epsilon * worst <= step.loss.epsilon
    assert step.unit_cost == worst


def _squares(values: list[float], low: float, high: float) -> float:
    m = (low + high) / 2
    return sum((v - m) ** 2 for v in values)


@pytest.mark.parametrize("rows", [1, 2, 5])
@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_the_grouped_squared_sum_sensitivity_covers_a_unit_moving_between_groups(
    schema: Schema, rows: int, adjacency: str, mechanism: str
) -> None:
    ir = Query("events").group_by("region").max_groups_per_unit(1).agg(v=q.variance("hours", mechanism=mechanism))
    built = ir.build(schema)
    p = plan(
        built, epsilon=1, delta="1e-9" if mechanism == "gaussian" else 0, adjacency=adjacency, max_rows_per_unit=rows
    )
    (step,) = [s for s in p.steps if s.part is StepPart.CENTERED_SQUARES]
    # The neighbour: every other unit is the same; under add/remove x' adds C rows at an edge of "south".
    base = {"north": [3.0, 21.0], "south": [12.0], "east": [0.0]}
    x = {g: list(v) for g, v in base.items()}
    y = {g: list(v) for g, v in base.items()}
    if adjacency == "replace":  # the unit leaves south (terms h^2) and its replacement enters north (h^2)
        x["south"] += [0.0] * rows
        y["north"] += [24.0] * rows
    else:
        y["south"] += [24.0] * rows
    change = [abs(_squares(x[g], 0, 24) - _squares(y[g], 0, 24)) for g in ("north", "south", "east")]
    sens = step.sensitivity
    assert sens is not None
    if isinstance(sens, Sqrt):
        assert math.sqrt(sum(c * c for c in change)) <= float(sens.upper()) * (1 + 1e-12)
    else:
        assert sum(change) <= float(sens)
    # and the bound is tight for this pair (no needless noise)
    measured = math.sqrt(sum(c * c for c in change)) if isinstance(sens, Sqrt) else sum(change)
    assert measured == pytest.approx(float(sens.upper() if isinstance(sens, Sqrt) else sens), rel=1e-9)
