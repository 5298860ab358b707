"""Census tables: a nation, its regions and their districts, released at every level and made consistent.

Run with ``python examples/census_tables.py`` (``make test`` runs it). A temporary SQLite ledger and the
embedded DuckDB engine; noise from the OS CSPRNG (docs/census.md explains every step).

1. The steward registers a synthetic census (8 regions x 150 districts and a region of islands: 1 201
   leaves) and declares the hierarchy with its public leaf key set:
   ``hierarchies={"geo": {"levels": [...], "keys": [...]}}``.
2. The analyst previews the plan (the split of ε over the levels), then releases
   ``dp.hierarchical_count("geo", split=[1, 1, 2])``: one release, one charge; each level noised at its
   share of ε, then weighted least squares and a controlled rounding make every parent the exact sum of
   its children, in non-negative integers.
3. The same question again is the stored table, at no cost.
4. A statistic whose global sensitivity is unbounded, per region (a median age): the planner offers
   Propose-Test-Release, which releases a region's median or refuses it explicitly, charged either way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import dpsense as dp

REGIONS, DISTRICTS = 8, 150
LEAVES = [(f"region-{r}", f"district-{r}-{d:03d}") for r in range(REGIONS) for d in range(DISTRICTS)]
LEAVES.append(("islands", "district-islands"))  # a region of one district and three persons


def census() -> pd.DataFrame:
    """Persons (1 or 2 rows: two addresses in one district) with an age; a few districts empty."""
    rng = np.random.default_rng(19)
    sizes = np.rint(rng.lognormal(np.log(25), 0.9, size=len(LEAVES))).astype(int)
    sizes[::37] = 0
    sizes[-1] = 3
    region, district, person, age = [], [], [], []
    pid = 0
    for (r, d), size in zip(LEAVES, sizes, strict=True):
        for _ in range(size):
            for _ in range(int(rng.integers(1, 3))):
                region.append(r)
                district.append(d)
                person.append(f"p{pid}")
                age.append(int(np.clip(rng.normal(40 + 3 * len(d) % 7, 18), 0, 110)))
            pid += 1
    return pd.DataFrame({"person_id": person, "region": region, "district": district, "age": age})


def policy() -> dp.PrivacyPolicy:
    return dp.PrivacyPolicy(
        protected="a person and all their rows",
        population=1_000_000,
        planned_releases=100,
        release_window="2026-12-01/2027-11-30",
        delta_rationale="δ = 1e-9 for Propose-Test-Release, far below 1/population",
        per_release_epsilon=4,
        attacker_knowledge="all but one person's rows",
        minimum_useful_accuracy="district counts within ±20",
        approved_by="example",
        approved_on="2026-12-03",
        next_review="2027-06-03",
    )


def exactly_consistent(table: pd.DataFrame) -> bool:
    """Each parent the sum of its children; every count an integer >= 0."""
    total = int(table.loc[table.level == "total", "people"].iloc[0])
    regions = table[table.level == "region"].set_index("region")["people"]
    districts = table[table.level == "district"].groupby("region")["people"].sum()
    integers = all(isinstance(v, int) and v >= 0 for v in table["people"])
    return integers and int(regions.sum()) == total and bool((districts[regions.index] == regions).all())


def main() -> None:
    frame = census()
    folder = Path(tempfile.mkdtemp(prefix="dpsense-census-"))
    with dp.Session.open(f"sqlite:///{folder / 'ledger.db'}", analyst="steward", role="steward") as steward:
        print(f"== 1. Register {len(frame):,} rows of {frame.person_id.nunique():,} persons, {len(LEAVES):,} leaves ==")
        data = steward.register_dataset(
            "census",
            source=frame,
            privacy_unit="person_id",
            bounds={"age": (0, 120)},
            keys={"region": sorted({r for r, _ in LEAVES})},
            max_rows_per_unit=2,
            hierarchies={"geo": {"levels": ["region", "district"], "keys": LEAVES}},
            budget=dp.Budget(epsilon=10, delta=1e-8),
            policy=policy(),
        )
        print(f"declared hierarchy 'geo': levels {list(data.profile.hierarchies['geo'].levels)}")

        print("\n== 2. One census table, one charge ==")
        query = data.query().agg(people=dp.hierarchical_count("geo", split=[1, 1, 2]))
        print(steward.preview(query, epsilon=1).explain())
        release = steward.release(query, epsilon=1)
        table = release.table
        print(table.head(12).to_string(index=False))
        print(f"... {len(table):,} rows: 1 total, {REGIONS + 1} regions, {len(LEAVES):,} districts")
        print(f"exactly consistent: {exactly_consistent(table)}")
        truth = frame.groupby(["region", "district"]).size()
        districts = table[table.level == "district"]
        true = np.array([truth.get((r, d), 0) for r, d in zip(districts.region, districts.district, strict=True)])
        consistent = np.abs(districts["people"].to_numpy() - true).mean()
        raw = np.abs(districts["people_noisy"].to_numpy() - true).mean()
        print(f"district MAE: consistent {consistent:.2f}, raw noisy {raw:.2f} (one draw; benchmarks/census.py)")
        print(f"charged once: ε = {release.charged.epsilon if release.charged else None}; spent now "
              f"{steward.budget('census').spent}")  # fmt: skip

        print("\n== 3. The same question again ==")
        again = steward.release(query, epsilon=1)
        print(f"cached={again.cached}, charged={again.charged}, spent {steward.budget('census').spent}")

        print("\n== 4. A median age per region: unbounded global sensitivity, so Propose-Test-Release ==")
        ptr = (
            data.query()
            .group_by("region")
            .max_groups_per_unit(1)
            .agg(age=dp.median("age", mechanism="ptr_order_statistic", proposed_bound=1, max_rows_per_unit=1))
        )
        medians = steward.release(ptr, epsilon=2, delta=1e-9)
        for region, value in zip(medians.table["region"], medians.table["age"], strict=True):
            print(f"{region}: {'refused (the stability test failed)' if pd.isna(value) else f'median {value:.1f}'}")
        print(f"charged {medians.charged} whatever the tests decided: a refusal is an answer")


if __name__ == "__main__":
    main()
