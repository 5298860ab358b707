"""Census tables end to end (``dp.hierarchical_count``; docs/census.md): DuckDB, a SQLite ledger, real noise.

* the hierarchy is declared at registration, stored in the profile, and refused there when wrong;
* every release is exactly consistent (children sum to their parent at every level, integers >= 0),
  one row per node, under both adjacencies and every counting mechanism, also on an empty view;
* one release, one charge of the whole ε; the split per level in ``explain()``, the plan and the record;
* the spec (YAML and JSON documents, CLI ``release``) asks the same question;
* a statistic whose global sensitivity is unbounded, over a level of the hierarchy: the planner offers
  Propose-Test-Release, which releases or refuses explicitly, charged either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import UsageError
from dpsense.interface.spec import ReleaseSpec
from tests.system.release.support import policy

REGIONS = {"north": ["n1", "n2", "n3"], "south": ["s1", "s2"], "east": ["e1"]}
LEAVES = [(r, d) for r, ds in REGIONS.items() for d in ds]
GEO = {"levels": ["region", "district"], "keys": LEAVES}


def census_frame(persons: int = 400, seed: int = 1) -> pd.DataFrame:
    """Persons in one district each (none in e1), 1 to 3 rows, an age."""
    rng = np.random.default_rng(seed)
    homes = [leaf for leaf in LEAVES if leaf[1] != "e1"]
    rows = []
    for p in range(persons):
        region, district = homes[int(rng.integers(len(homes)))]
        for _ in range(int(rng.integers(1, 4))):
            rows.append({"pid": f"p{p}", "region": region, "district": district, "age": int(rng.integers(0, 100))})
    return pd.DataFrame(rows)


def register(session: dp.Session, name: str = "census", adjacency: str = "add_remove", **kw: Any) -> dp.Dataset:
    args: dict[str, Any] = {
        "source": census_frame(),
        "privacy_unit": "pid",
        "adjacency": adjacency,
        "bounds": {"age": (0, 120)},
        "keys": {"region": list(REGIONS)},
        "max_rows_per_unit": 3,
        "hierarchies": {"geo": GEO},
        "budget": dp.Budget(epsilon=50, delta=1e-8),
        "policy": policy(per_release_epsilon=10),
    }
    args.update(kw)
    return session.register_dataset(name, **args)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as s:
        yield s


def assert_consistent(table: pd.DataFrame, name: str = "people") -> None:
    """Every parent the exact sum of its children, every count an integer >= 0, one row per node."""
    assert list(table.columns[:3]) == ["level", "region", "district"]
    assert list(table["level"]) == ["total"] + ["region"] * len(REGIONS) + ["district"] * len(LEAVES)
    counts = table[name].tolist()
    assert all(isinstance(c, int) and c >= 0 for c in counts)
    total = table[table.level == "total"][name].item()
    regions = table[table.level == "region"].set_index("region")[name]
    districts = table[table.level == "district"]
    assert regions.sum() == total
    for region, value in regions.items():
        assert districts[districts.region == region][name].sum() == value
    assert sorted(zip(districts.region, districts.district, strict=True)) == sorted(LEAVES)


def test_the_hierarchy_is_declared_at_registration_and_kept_in_the_profile(session: dp.Session, tmp_path: Path) -> None:
    ds = register(session)
    assert ds.profile.hierarchies["geo"].levels == ("region", "district")
    assert ds.profile.to_json()["hierarchies"]["geo"]["levels"] == ["region", "district"]
    with dp.Session.open(f"sqlite:///{tmp_path / 'l.db'}", analyst="steward", role="steward") as again:
        assert again.dataset("census").schema.hierarchy("geo").leaves == tuple(sorted(LEAVES))
    plain = register(session, "plain", hierarchies=None, source=census_frame(seed=2))
    assert "hierarchies" not in plain.profile.to_json()  # profiles without one read as before
    amended = session.amend_dataset("census", bounds={"age": (0, 110)}, source=census_frame())
    assert amended.profile.hierarchies == ds.profile.hierarchies  # an amendment keeps the hierarchy
    other = {"geo": {"levels": ["region"], "keys": [[r] for r in REGIONS]}}
    with pytest.raises(dp.RegistrationConflict, match=r"hierarchies: registered .*6 leaves, sha256 .*3 leaves"):
        register(session, "copy", hierarchies=other, bounds={"age": (0, 110)})  # the same data, other hierarchy


@pytest.mark.parametrize(
    ("hierarchies", "rule"),
    [
        ({"geo": {"levels": ["region", "town"], "keys": LEAVES}}, "does not declare"),
        ({"geo": {"levels": ["region", "district"], "keys": [("nroth", "n1")]}}, "not a declared key"),
        ({"geo": {"levels": ["region", "district"], "keys": [("north", "x"), ("south", "x")]}}, "two parents"),
        ({"geo": {"levels": ["region", "age"], "keys": [("north", 1)]}}, "categorical or integer"),
    ],
)
def test_a_wrong_hierarchy_is_refused_before_the_data_is_registered(
    session: dp.Session, hierarchies: dict[str, Any], rule: str
) -> None:
    with pytest.raises(UsageError, match=rule):
        register(session, hierarchies=hierarchies, kinds={"age": "numeric"})
    assert session.datasets() == []


@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@pytest.mark.parametrize(("mechanism", "delta"), [(None, 0), ("geometric", 0), ("gaussian", 1e-9)])
def test_every_release_is_exactly_consistent_and_charged_once(
    session: dp.Session, adjacency: str, mechanism: str | None, delta: float
) -> None:
    ds = register(session, adjacency=adjacency)
    query = ds.query().agg(people=dp.hierarchical_count("geo", split=[1, 1, 2], mechanism=mechanism))
    charges = len(session.ledger.charges("census"))
    release = session.release(query, epsilon=1, delta=delta)
    requested = dp.ApproxDP(1, Fraction(str(delta))) if delta else dp.PureDP(1)
    assert_consistent(release.table)
    assert len(session.ledger.charges("census")) == charges + 1
    assert session.budget("census").spent == dp.ApproxDP(1, Fraction(str(delta)))  # the one charge
    assert release.charged == requested
    noisy = release.table["people_noisy"].tolist()
    assert all(isinstance(v, int) and v >= 0 for v in noisy)
    assert release.table["people_noisy_error95"].notna().all()
    assert "people_error95" not in release.table.columns  # no public bound on the consistent counts
    explained = release.explain()
    assert "share of the step's ε: total 1/4, region 1/4, district 1/2" in explained
    assert "weighted least squares" in explained and "Charged now" in explained
    (step,) = release.record.parameters["plan"]["steps"]
    assert step["epsilon"] == "1/1" and step["statistic"] == "hierarchical_count"
    (agg,) = release.record.parameters["query"]["aggregates"]
    assert agg["split"] == ["1/4", "1/4", "1/2"]
    again = session.release(query, epsilon=1, delta=delta)  # the same question: the stored table, no charge
    assert again.cached and again.table.equals(release.table)
    assert len(session.ledger.charges("census")) == charges + 1


def test_the_consistent_table_is_near_the_truth_and_an_empty_view_is_a_table_of_zeros(session: dp.Session) -> None:
    ds = register(session)
    frame = census_frame()
    truth = frame.groupby(["region", "district"]).size()
    release = session.release(ds.query().agg(people=dp.hierarchical_count("geo")), epsilon=9)
    districts = release.table[release.table.level == "district"].set_index(["region", "district"])["people"]
    for leaf in LEAVES:
        assert abs(districts[leaf] - truth.get(leaf, 0)) <= 10  # ε = 3 per level: noise scale 1
    empty = session.release(
        ds.query().filter("age", ">", 119).agg(people=dp.hierarchical_count("geo")), epsilon=0.5
    )  # no row has it: every true count is 0, the release still has one row per node
    assert_consistent(empty.table)


def test_preview_forecast_and_the_refusals_before_the_ledger(session: dp.Session) -> None:
    ds = register(session)
    query = ds.query().agg(people=dp.hierarchical_count("geo"))
    plan = session.preview(query, epsilon=1)
    assert "total 1/3, region 1/3, district 1/3" in plan.explain() and "global L1 sensitivity 3" in plan.explain()
    forecast = session.forecast(query, epsilon=1).text()
    assert "total ±" in forecast and "district ±" in forecast
    spent = session.budget("census").spent
    for bad in (
        ds.query().agg(people=dp.hierarchical_count("geo", split=[1, 1])),
        ds.query().agg(people=dp.hierarchical_count("nation")),
        ds.query().group_by("region").agg(people=dp.hierarchical_count("geo")),
        ds.query().agg(people=dp.hierarchical_count("geo", mechanism="gaussian")),  # needs δ > 0
    ):
        with pytest.raises(UsageError):
            session.release(bad, epsilon=1)
    assert session.budget("census").spent == spent


def test_the_spec_asks_the_same_question(session: dp.Session) -> None:
    register(session)
    document = {
        "dataset": "census",
        "epsilon": 1,
        "aggregates": {"table": {"kind": "hierarchical_count", "hierarchy": "geo", "split": [1, "1", 2]}},
    }
    first = session.release(ReleaseSpec.model_validate(document).query(), epsilon=1)
    assert_consistent(first.table, "table")
    python = session.dataset("census").query().agg(people=dp.hierarchical_count("geo", split=[2, 2, 4]))
    assert session.release(python, epsilon=1).cached  # same shares, other name: the stored release
    with pytest.raises(Exception, match="split"):
        ReleaseSpec.model_validate({**document, "aggregates": {"t": {"kind": "count", "split": [1]}}})


def test_the_cli_releases_a_census_table_from_a_spec(tmp_path: Path) -> None:
    from tests.system.cli.support import Cli

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with dp.Session.open(url, analyst="steward", role="steward") as steward:
        register(steward)
        steward.add_analyst("alice")
    cli = Cli(tmp_path, url)
    spec = cli.spec(
        "census",
        {"dataset": "census", "epsilon": 1, "aggregates": {"t": {"kind": "hierarchical_count", "hierarchy": "geo"}}},
    )
    result = cli("release", spec)
    assert result.exit_code == 0, result.stderr
    assert "district" in result.stdout and "t_noisy" in result.stdout and "charged ε=1" in result.stdout


def test_a_per_region_statistic_without_bounded_sensitivity_offers_ptr_and_its_refusal(session: dp.Session) -> None:
    """A median per region (a level of the hierarchy): PTR releases or refuses each region explicitly, charged."""
    ds = register(session, adjacency="replace")
    regions = sorted(REGIONS)
    query = (
        ds.query()
        .group_by("region", keys=regions)
        .max_groups_per_unit(1)
        .agg(age=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=2, max_rows_per_unit=1))
    )
    charges = len(session.ledger.charges("census"))
    release = session.release(query, epsilon=8, delta=1e-9)
    assert len(session.ledger.charges("census")) == charges + 1  # charged, whatever the test decided
    assert release.charged == dp.ApproxDP(8, Fraction(1, 10**9))
    values = dict(zip(release.table["region"], release.table["age"], strict=True))
    assert pd.isna(values["east"])  # no one lives in e1: the test cannot pass, the region is refused
    explained = release.explain()
    assert "Propose-Test-Release refused" in explained
    released = [r for r in regions if not pd.isna(values[r])]
    assert all(0 <= values[r] <= 120 for r in released)
