"""No log line, error, release record, audit entry or explain report carries an unnoised value.

A planted dataset has distinctive true statistics; every artefact a release leaves behind (except the
noisy values themselves) is scanned for their spellings.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import DPSenseError
from tests.system.release.support import policy

REGIONS = ["north", "south", "east", "west"]


def leak_frame() -> pd.DataFrame:
    persons = 8000
    person = np.repeat(np.arange(persons), 5)
    region = np.array(["north", "north", "north", "south", "south", "east", "west"])[person % 7]
    hours = 0.5 + ((np.arange(person.size) * 7919) % 1000) / 83.3
    age = 18 + (person * 31) % 77
    x = (person * 0.0137) % 97.0 + (np.arange(person.size) % 5) * 0.00173
    return pd.DataFrame({"person_id": person, "region": region, "hours": hours, "age": age, "x": x})


def spellings(value: float) -> set[str]:
    out = {repr(float(value)), f"{value:.6f}", f"{value:.4f}", f"{value:.6g}"}
    if float(value).is_integer():
        out.add(str(int(value)))
    return {s for s in out if len(s.replace(".", "").replace("-", "").lstrip("0")) >= 5}


def true_values(frame: pd.DataFrame) -> set[str]:
    kept = frame  # each person has 5 rows = the contribution bound: bounding keeps every row
    out: set[str] = set()
    for _, group in kept.groupby("region"):
        hours = np.sort(group["hours"].to_numpy())
        cut = int(np.floor(0.1 * hours.size))
        trimmed = hours[cut : hours.size - cut].mean()
        for v in (len(group), hours.sum(), hours.mean(), group["age"].median(), hours.var(), trimmed):
            out |= spellings(v)
    out |= spellings(kept["hours"].sum()) | spellings(kept["hours"].mean()) | spellings(len(kept))
    xs = np.sort(kept["x"].to_numpy())
    out |= spellings(float(np.min(np.diff(xs))))
    return out


def test_no_artefact_contains_a_true_value(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    frame = leak_frame()
    secrets = true_values(frame)
    assert len(secrets) > 20
    db = tmp_path / "l.db"
    artefacts: list[str] = []
    with dp.Session.open(f"sqlite:///{db}", analyst="steward", role="steward") as session:
        events = session.register_dataset(
            "events",
            source=frame,
            privacy_unit="person_id",
            bounds={"hours": (0, 24), "age": (0, 120), "x": (0, 100)},
            keys={"region": REGIONS},
            kinds={"x": "point"},
            max_rows_per_unit=5,
            budget=dp.Budget(epsilon=20, delta=1e-8),
            policy=policy(per_release_epsilon=5),
        )
        grouped = (
            events.query()
            .group_by("region")
            .max_groups_per_unit(1)
            .agg(n=dp.count(), total=dp.sum("hours"), mean=dp.mean("hours"), median=dp.median("age"))
        )
        overall = events.query().agg(n=dp.count(), mean=dp.mean("hours"), gap=dp.min_distance(["x"]))
        beyond = (
            events.query()
            .group_by("region")
            .max_groups_per_unit(1)
            .agg(v=dp.variance("hours"), t=dp.trimmed_mean("hours", 0.1), clipped=dp.clipped_count("hours"))
        )
        ptr = events.query().agg(m=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1))
        for query, delta in ((grouped, 0.0), (overall, 0.0), (beyond, 0.0), (ptr, 1e-9)):
            release = session.release(query, epsilon=2, delta=delta)
            artefacts.append(release.explain())
            artefacts.append(json.dumps(release.record.parameters))
            artefacts.append(json.dumps(release.record.value["notes"]))
            artefacts.append(session.preview(query, epsilon=2, delta=delta).explain())
        for bad in (
            lambda: session.release(events.query().agg(m=dp.mean("weight")), epsilon=1),
            lambda: session.release(events.query().agg(n=dp.count()), epsilon=9),
        ):
            with pytest.raises(DPSenseError) as info:
                bad()
            artefacts.append(str(info.value))
    with sqlite3.connect(db) as con:
        for table in ("audit_log", "charges", "dataset_profiles", "datasets"):
            artefacts.extend(json.dumps(row, default=str) for row in con.execute(f"SELECT * FROM {table}"))
        # the stored noisy values may round to a true count by chance: scan everything else of a release
        columns = "id, charge_id, cache_key, mechanism, mechanism_version, parameters_json, code_version"
        artefacts.extend(json.dumps(row, default=str) for row in con.execute(f"SELECT {columns} FROM releases"))
    artefacts.extend(record.getMessage() for record in caplog.records)
    text = "\n".join(artefacts)
    found = sorted(s for s in secrets if s in text)
    assert found == [], f"true values found in artefacts: {found}"
    assert "smooth_sensitivity" not in text and "local_sensitivity" not in text
