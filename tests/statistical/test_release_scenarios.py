"""Empirical audits of the issue-13 pairs: groups under replace, empty views, long-denominator q.

Every scenario of ``dpsense.audit.release_scenarios`` runs at the CLI's default 200 000 samples per
side: the correct release stays under its claim (the bound holds with probability 1 - 1e-9) and every
control (the calibrations and refusals main had before issue 13) is caught. The cross-group scenario's
per-group ε is the one the planner gives a grouped inverse-sensitivity median under replace.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpsense.audit import release_scenarios as rs
from dpsense.audit.registry import all_scenarios
from dpsense.audit.scenarios import Scenario, run_audit
from dpsense.query import Query, Schema, StepPart
from dpsense.query import _aggregates as q
from dpsense.statistics import plan

pytestmark = pytest.mark.statistical

SAMPLES = 200_000


@pytest.mark.parametrize("scenario", rs.release_scenarios(), ids=lambda s: s.name)
def test_the_release_pairs_stay_under_their_claim_and_the_controls_are_caught(scenario: Scenario) -> None:
    row = run_audit(scenario, samples=SAMPLES)
    if scenario.control:
        assert row.flagged, (scenario.name, row.result)
    else:
        assert not row.flagged, (scenario.name, row.result)
        assert row.result.epsilon_lower_bound > 0.1  # the pair is hard: the audit sees a real loss


def test_the_cross_group_scenario_runs_at_the_planners_per_group_epsilon() -> None:
    schema = Schema(
        {"person_id": "unit", "v": "numeric", "g": "categorical"}, bounds={"v": (0, 8)}, keys={"g": ["a", "b"]}
    )
    ir = Query("t").group_by("g").max_groups_per_unit(1).agg(m=q.median("v", mechanism="inverse_sensitivity_median"))
    p = plan(ir.build(schema), epsilon=1, adjacency="replace", max_rows_per_unit=1)
    (step,) = [s for s in p.steps if s.part is StepPart.VALUE]
    assert step.mechanism_epsilon == Fraction(1, 2)  # the scenario's ε_g (and the control's is 1)


def test_the_release_scenarios_are_registered_for_the_cli() -> None:
    names = {s.name for s in all_scenarios()}
    assert {s.name for s in rs.release_scenarios()} <= names
