"""The registry of statistics: every kind has one module that states its rule and how it runs."""

from __future__ import annotations

import pytest

from dpsense.query import AggregateKind, Family, Mechanism, StepPart
from dpsense.query._planner_rules import Choice
from dpsense.statistics import ALLOWED_MECHANISMS, STATISTICS, Statistic


def test_every_kind_has_exactly_one_statistic() -> None:
    assert set(STATISTICS) == set(AggregateKind)
    assert all(stat.kind is kind for kind, stat in STATISTICS.items())
    assert {k: s.mechanisms for k, s in STATISTICS.items()} == ALLOWED_MECHANISMS


@pytest.mark.parametrize("kind", sorted(AggregateKind, key=lambda k: k.value))
def test_each_statistic_states_its_rule_and_runs(kind: AggregateKind) -> None:
    stat = STATISTICS[kind]
    assert stat.mechanisms and len(set(stat.mechanisms)) == len(stat.mechanisms)
    assert type(stat).run is not Statistic.run, f"{kind.value} has no run"  # the base refuses with InternalError
    if stat.data_dependent:  # its value step calibrates to the data: a data-dependent mechanism, collected rows
        assert stat.collects and all(m.info.record_cost is not None for m in stat.mechanisms)
        assert type(stat).additive_specs is Statistic.additive_specs
    else:  # global: its noise is calibrated to a sensitivity the statistic states (a combined name: in every step)
        assert all(m.is_global or m.family is Family.COMBINED for m in stat.mechanisms)
        for m in (m for m in stat.mechanisms if m.family is Family.COMBINED):
            steps = [stat.part_choice(part, Choice(m, "analyst", "")).mechanism for part in StepPart]
            assert all(s.is_global for s in steps), (kind, m, steps)
        assert type(stat).sensitivity is not Statistic.sensitivity
    assert stat.__module__.startswith("dpsense.statistics."), "one module per statistic"


def test_the_module_docstrings_name_the_guarantee_source() -> None:
    import sys

    for stat in STATISTICS.values():
        doc = sys.modules[type(stat).__module__].__doc__ or ""
        assert "docs/math/" in doc or "benchmarks/estimators.py" in doc or stat.kind is AggregateKind.CLIPPED_COUNT, (
            stat.kind
        )
    assert Mechanism.LAPLACE in STATISTICS[AggregateKind.COUNT].mechanisms
