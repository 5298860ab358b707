"""The main demo: a synthetic health-events dataset released through a Session on DuckDB + SQLite.

Persons live in regions and log many events (hours of activity per day, their age). A steward
registers the data with a budget and a written privacy policy in a local SQLite ledger; the analyst
"alice" releases distinct persons per region, events per region with at most C rows per person, mean
hours clipped to [0, 24], the median age and the 90th percentile of age. Running the demo again
returns the stored release (same data snapshot, same canonical query) and the budget does not move.

The synthetic data is demo *input*, not privacy randomness: it is generated deterministically from a
seed by a counter-based mixer (splitmix64 in numpy uint64 arithmetic), so the same seed always gives
the same file and the second run links to the first run's budget. Every release still draws its noise
from the OS CSPRNG through ``dpsense.noise``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]  # pandas ships no stubs here
from numpy.typing import NDArray
from rich.console import Console

from dpsense.cli._output import budget_line, release_table
from dpsense.cli._progress import progress_bar
from dpsense.core.checks import integer_in
from dpsense.ledger import BudgetStatus
from dpsense.query import Query, count, count_units, mean, median, quantile
from dpsense.release import Budget, PrivacyPolicy, Release, Session

REGIONS = ("north", "south", "east", "west")
REGION_SHARES = (0.4, 0.3, 0.2, 0.1)
EVENTS_PER_PERSON = 30  # C: at most this many events of one person count
MAX_EVENTS = 400  # the heavy tail is cut here: nobody logs more
DATASET = "health_events"
ANALYST = "alice"
DEFAULT_SEED = 20261129

POLICY = PrivacyPolicy(
    protected="a person: every event they logged",
    population=1_000_000,
    planned_releases=12,
    release_window="2026-12-01/2027-11-30",
    delta_rationale="pure ε-DP releases: δ = 0",
    per_release_epsilon=1.0,
    attacker_knowledge="everything except one person's events (the DP worst case)",
    minimum_useful_accuracy="counts within ±50 per region, mean hours within ±0.5",
    approved_by="data steward (demo)",
    approved_on="2026-11-29",
    next_review="2027-05-29",
)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_STREAM_STRIDE = np.uint64(1 << 40)


def _splitmix64(counters: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The splitmix64 finaliser (Steele, Lea, Flood 2014) applied to each counter (wrapping uint64)."""
    z = counters * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def _uniform(seed: int, stream: int, size: int) -> NDArray[np.float64]:
    """``size`` deterministic numbers in (0, 1], independent across ``stream`` numbers (demo input only)."""
    key = _splitmix64(np.array([seed % (1 << 64)], dtype=np.uint64))[0]
    counters = np.arange(size, dtype=np.uint64) + np.uint64(stream) * _STREAM_STRIDE
    bits = _splitmix64(counters ^ key) >> np.uint64(11)  # 53 bits
    return (bits.astype(np.float64) + 1.0) * 2.0**-53


def synthetic_health_events(persons: int, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Persons in 4 regions, a heavy-tailed number of events each, hours per day and ages (deterministic).

    Regions have uneven sizes (40/30/20/10 %); events per person follow a Pareto tail (index 1.2,
    at least 1, cut at 400); hours per day are Gamma(2, 2.5) (a sum of two exponentials) kept within
    [0, 24], with about 0.1 % entry errors of 30 hours and 0.05 % corrupt +inf readings, which the
    dataset's declared ``clamp`` policy handles; ages are integers 18-95. The same ``(persons, seed)``
    always gives the same frame.
    """
    if not integer_in(persons, 1):
        raise ValueError(f"persons must be an integer >= 1, got {persons!r}")
    shares = np.cumsum(REGION_SHARES)
    region = np.minimum(np.searchsorted(shares, _uniform(seed, 0, persons), side="right"), len(REGIONS) - 1)
    age = 18 + np.minimum(np.floor(_uniform(seed, 1, persons) * 78), 77).astype(np.int64)
    pareto = _uniform(seed, 2, persons) ** (-1 / 1.2)  # P(X > x) = x^-1.2 for x >= 1
    n_events = np.clip(np.floor(2.0 * pareto) - 1, 1, MAX_EVENTS).astype(np.int64)
    person = np.repeat(np.arange(persons), n_events)
    rows = person.size
    hours = -2.5 * (np.log(_uniform(seed, 3, rows)) + np.log(_uniform(seed, 4, rows)))
    hours = np.minimum(hours, 24.0).round(2)
    faults = _uniform(seed, 5, rows)
    hours[faults <= 0.001] = 30.0  # entry errors above the public bound
    hours[faults <= 0.0005] = np.inf  # corrupt readings (both clamped by the declared policy)
    return pd.DataFrame(
        {
            "person_id": np.char.mod("p%06d", person).astype(object),
            "region": np.asarray(REGIONS, dtype=object)[region[person]],
            "age": age[person],
            "hours": hours,
        }
    )


@dataclass(frozen=True)
class DemoResult:
    """What one demo run did: whether registration linked to an earlier one, the release, the budget."""

    linked: bool
    release: Release
    budget: BudgetStatus


def demo_query(dataset: str = DATASET) -> Query:
    """The demo's release: persons, events, mean hours, median and 90th-percentile age per region."""
    return (
        Query(dataset)
        .group_by("region")
        .max_groups_per_unit(1)  # a person lives in one region
        .agg(
            people=count_units(),
            events=count(max_rows_per_unit=EVENTS_PER_PERSON),
            mean_hours=mean("hours"),
            # age is a property of the person: one row per person is enough, so the per-record ε is ε/6
            # rather than ε/(6 C) (group privacy over C rows)
            median_age=median("age", max_rows_per_unit=1),
            p90_age=quantile("age", 0.9, max_rows_per_unit=1),
        )
    )


def run_demo(
    directory: Path, persons: int, console: Console, *, progress: Console | None = None, seed: int = DEFAULT_SEED
) -> DemoResult:
    """Write the synthetic data (once), register it as the steward, release as "alice", print the result.

    ``console`` gets the results; ``progress`` (default: stderr) the transient progress bars. The data file
    is written on the first run only, so a second run finds the same snapshot and the stored release.
    """
    spinner = progress if progress is not None else Console(stderr=True)
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "events.parquet"
    if not source.exists():
        synthetic_health_events(persons, seed).to_parquet(source, index=False)
    ledger = f"sqlite:///{directory / 'ledger.db'}"

    with Session.open(ledger, analyst="steward", role="steward") as steward:
        with progress_bar(spinner, "registering the dataset") as registering:
            events = steward.register_dataset(
                DATASET,
                source=source,
                privacy_unit="person_id",
                adjacency="add_remove",
                bounds={"hours": (0, 24), "age": (0, 120)},
                keys={"region": list(REGIONS)},
                policies={"hours": "clamp"},
                max_rows_per_unit=EVENTS_PER_PERSON,
                budget=Budget(epsilon=4),
                policy=POLICY,
                progress=registering,
            )
        how = "same data as before: linked to its existing budget" if events.linked else "registered"
        console.print(f"dataset {events.name!r} snapshot {events.snapshot!r} ({how})", markup=False)
        steward.add_analyst(ANALYST)

    with Session.open(ledger, analyst=ANALYST) as session:
        with progress_bar(spinner, "releasing") as releasing:
            release = session.release(demo_query(), epsilon=1.0, progress=releasing)
        status = session.budget(DATASET)
    console.print(release_table(release))
    console.print(release.explain(), markup=False, highlight=False)
    console.print()
    console.print(budget_line(release, status), markup=False, highlight=False)
    return DemoResult(events.linked, release, status)
