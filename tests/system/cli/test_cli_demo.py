"""``dpsense demo`` and its deterministic synthetic data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from dpsense.cli._app import app
from dpsense.cli.demo import MAX_EVENTS, REGIONS, synthetic_health_events


def test_the_demo_runs_twice_and_the_second_run_is_cached(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["demo", "--dir", str(tmp_path), "--persons", "300"], env={"COLUMNS": "200"})
    assert first.exit_code == 0, first.stderr
    assert "(registered)" in first.stdout and "charged ε=1, δ=0" in first.stdout
    assert "budget spent ε=1, δ=0, remaining ε=3, δ=0 of ε=4, δ=0" in first.stdout
    for word in ("people", "events", "mean_hours", "median_age", "p90_age", *REGIONS):
        assert word in first.stdout
    assert "Dwork-Roth" in first.stdout  # the explain report

    second = runner.invoke(app, ["demo", "--dir", str(tmp_path), "--persons", "300"], env={"COLUMNS": "200"})
    assert second.exit_code == 0, second.stderr
    assert "linked to its existing budget" in second.stdout
    assert "cached: no new charge" in second.stdout
    assert "budget spent ε=1, δ=0, remaining ε=3, δ=0" in second.stdout


def test_the_synthetic_data_is_deterministic_and_keeps_its_story() -> None:
    frame = synthetic_health_events(2000, seed=7)
    assert frame.equals(synthetic_health_events(2000, seed=7))
    assert not frame.equals(synthetic_health_events(2000, seed=8))
    persons = frame.drop_duplicates("person_id")
    assert len(persons) == 2000
    shares = persons["region"].value_counts(normalize=True)
    assert set(shares.index) == set(REGIONS)
    assert shares["north"] > shares["south"] > shares["east"] > shares["west"]  # uneven region sizes
    per_person = frame.groupby("person_id").size()
    assert per_person.min() >= 1 and per_person.max() <= MAX_EVENTS
    assert per_person.max() > 20 * per_person.median()  # a heavy tail
    assert frame["age"].between(18, 95).all() and frame["age"].dtype == np.int64
    hours = frame["hours"].to_numpy()
    assert np.isposinf(hours).any() and (hours[np.isfinite(hours)] > 24).any()  # faults for the clamp policy
    assert ((hours >= 0) & (hours <= 24)).mean() > 0.99
