"""Shared data for the release-system tests: a planted dataset with distinctive true values."""

from __future__ import annotations

import numpy as np
import pandas as pd

import dpsense as dp
from tests import factories

REGIONS = ["north", "south", "east", "west"]


def policy(**changes: object) -> dp.PrivacyPolicy:
    """A complete privacy policy for tests (population 10^6, per-release ε cap 2): ``tests.factories.policy``."""
    return factories.policy(**changes)


def fresh(query: dp.Query, column: str, run: int) -> dp.Query:
    """``query`` filtered on ``column >= -1 - run``, true of every row of a column bounded below by 0.

    The Session answers a repeated question with its stored release, whatever the output names; a
    statistical test that needs ``run`` independent draws asks ``run`` different questions this way
    (each charged, each with its own noise), and the filter keeps every row, so each draw has the law of
    the unfiltered release.
    """
    return query.filter(column, ">=", -1 - run)


def planted(persons: int = 600, rows_per_person: int = 3) -> pd.DataFrame:
    """A deterministic dataset: persons in 4 regions, ``rows_per_person`` events each, hours and age."""
    person = np.repeat(np.arange(persons), rows_per_person)
    region = np.array(REGIONS)[person % 4]
    hours = 1.0 + (np.arange(person.size) % 17) * 0.731
    age = 20 + (person * 7) % 61
    return pd.DataFrame(
        {
            "person_id": [f"p{p}" for p in person],
            "region": region,
            "hours": hours,
            "age": age.astype(np.int64),
        }
    )


def register(session: dp.Session, frame: pd.DataFrame, name: str = "events", **kw: object) -> dp.Dataset:
    """Register ``frame`` with the usual declarations (overridable)."""
    args: dict[str, object] = {
        "source": frame,
        "privacy_unit": "person_id",
        "bounds": {"hours": (0, 24), "age": (0, 120)},
        "keys": {"region": REGIONS},
        "max_rows_per_unit": 5,
        "budget": dp.Budget(epsilon=10, delta=1e-8),
        "policy": policy(),
    }
    args.update(kw)
    return session.register_dataset(name, **args)  # type: ignore[arg-type]
