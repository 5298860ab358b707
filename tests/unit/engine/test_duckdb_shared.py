"""``DuckDBEngine(shared=True)``, ``export`` and ``adopt``: one copy of a snapshot read by engines on other cursors."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import numpy as np
import pandas as pd
import pytest

from dpsense.core.errors import UsageError
from dpsense.engine import DuckDBEngine, UnknownTable, clipped_sum, count_rows, count_units
from dpsense.noise.entropy import random_bytes


def people(n: int = 300) -> pd.DataFrame:
    person = np.repeat(np.arange(n), 4)
    return pd.DataFrame({"person": person, "region": np.where(person % 2 == 0, "a", "b"), "hours": person % 13 * 1.5})


def tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, bool]]:
    rows = con.execute("SELECT table_name, temporary FROM duckdb_tables() WHERE starts_with(table_name, '__dps_')")
    return sorted((str(r[0]), bool(r[1])) for r in rows.fetchall())


def aggregates(engine: DuckDBEngine, salt: bytes, **bound: object) -> list[object]:
    with engine.release_scope():
        view = engine.bounded_rows("people", unit_column="person", max_rows_per_unit=2, salt=salt, **bound)  # type: ignore[arg-type]
        rows = engine.group_aggregates(
            view,
            group_column="region",
            keys=["a", "b"],
            aggregates=[count_rows(), count_units(), clipped_sum("hours", low=0.0, high=10.0, grid_exponent=-4)],
        )
    return [(r.key, r.counts, r.sums) for r in rows]


@pytest.fixture
def database() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(":memory:", config={"threads": 1})
    yield con
    con.close()


def indexed_owner(database: duckdb.DuckDBPyConnection) -> DuckDBEngine:
    owner = DuckDBEngine(connection=database.cursor(), shared=True)
    owner.register("people", people())
    owner.index_units(
        "people",
        unit_column="person",
        key=random_bytes(32),
        sums=[clipped_sum("hours", low=0.0, high=10.0, grid_exponent=-4)],
    )
    return owner


def test_an_adopted_table_answers_exactly_as_its_owner_with_no_copy(database: duckdb.DuckDBPyConnection) -> None:
    owner = indexed_owner(database)
    shared = owner.export("people")
    assert shared.unit_column == "person" and shared.stored_sums  # the index and stored sums travel
    assert [t for t in tables(database) if not t[1]] == [(shared.relation.strip('"'), False)]  # one regular table
    readers = [DuckDBEngine(connection=database.cursor()) for _ in range(3)]
    for reader in readers:
        assert reader.adopt("people", shared) == owner.table_info("people")
    salt = random_bytes(32)
    expected = aggregates(owner, salt)
    for reader in readers:
        assert aggregates(reader, salt) == expected  # the indexed path on the same rows
        assert aggregates(reader, salt, where=()) == expected
        assert reader.temporary_names() == []  # the release's views are gone
    windowed = aggregates(owner, salt, group_column="region", max_groups_per_unit=1)
    assert aggregates(readers[0], salt, group_column="region", max_groups_per_unit=1) == windowed
    assert len(tables(database)) == 1  # still the one copy: readers made none
    for reader in readers:
        reader.forget("people")  # unregisters only
        reader.close()
    assert len(tables(database)) == 1
    owner.close()
    assert tables(database) == []  # the owner drops it


def test_only_a_shared_engine_exports_and_adopting_checks_the_table(database: duckdb.DuckDBPyConnection) -> None:
    private = DuckDBEngine(connection=database.cursor())
    private.register("people", people(10))
    with pytest.raises(UsageError, match="shared=True"):
        private.export("people")
    assert all(temporary for _, temporary in tables(private._con))  # its copies are the connection's own

    owner = indexed_owner(database)
    shared = owner.export("people")
    reader = DuckDBEngine(connection=database.cursor())
    reader.adopt("people", shared)
    with pytest.raises(UsageError, match="already registered"):
        reader.adopt("people", shared)
    with pytest.raises(UsageError, match="portable"):
        DuckDBEngine(connection=database.cursor(), portable=True).adopt("people", shared)
    with DuckDBEngine() as elsewhere, pytest.raises(UnknownTable, match="same one"):
        elsewhere.adopt("people", shared)  # another database has no such table
    owner.close()
    reader.close()
    private.close()


def test_shared_copies_of_engines_on_one_database_never_share_a_name(database: duckdb.DuckDBPyConnection) -> None:
    first, second = (DuckDBEngine(connection=database.cursor(), shared=True) for _ in range(2))
    first.register("people", people(5))
    second.register("people", people(6))
    assert first.export("people").relation != second.export("people").relation
    assert len(tables(database)) == 2
    first.close()
    second.close()
    assert tables(database) == []
