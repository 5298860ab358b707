"""SQL through the Session: rewrites hit one stored release, near misses do not, refusals cost nothing."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpsense as dp
from dpsense.core.errors import ChargedFailure, DPSenseError
from tests.system.release.support import REGIONS, planted, policy
from tests.unit.query.sql.corpus import EQUIVALENT, NEAR_MISSES, releasable
from tests.unit.query.sql.test_sql_refusals import REFUSED, _mutate

SQL_KEYS = {"region": ["n", "s", "e", "w"], "age": list(range(18, 96))}


def sql_frame(persons: int) -> pd.DataFrame:
    frame = planted(persons=persons)
    frame["region"] = frame["region"].map(dict(zip(REGIONS, SQL_KEYS["region"], strict=True)))
    frame["visits"] = (frame.index % 51).astype("int64")
    return frame


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dp.Session]:
    url = f"sqlite:///{tmp_path_factory.mktemp('sql') / 'l.db'}"
    with dp.Session.open(url, analyst="steward", role="steward") as s:
        for name, persons in (("events", 400), ("events2", 300)):
            s.register_dataset(
                name,
                source=sql_frame(persons),
                privacy_unit="person_id",
                bounds={"hours": (0, 24), "age": (0, 120), "visits": (0, 50)},
                keys=SQL_KEYS,
                max_rows_per_unit=3,
                budget=dp.Budget(epsilon=10_000),
                policy=policy(),
            )
        yield s


def charges(session: dp.Session) -> int:
    return sum(len(session.ledger.charges(name)) for name in ("events", "events2"))


@pytest.mark.parametrize(("first", "second"), [p for p in EQUIVALENT if releasable(p)])
def test_rewrites_share_one_stored_release(session: dp.Session, first: str, second: str) -> None:
    a = session.sql(first, epsilon=0.05)
    before = charges(session)
    b = session.sql(second, epsilon=0.05)
    assert b.cached and b.record.release_id == a.record.release_id
    assert charges(session) == before


@pytest.mark.parametrize(("first", "second"), [p for p in NEAR_MISSES if releasable(p)])
def test_near_misses_are_separate_releases(session: dp.Session, first: str, second: str) -> None:
    a = session.sql(first, epsilon=0.07)
    b = session.sql(second, epsilon=0.07)
    assert a.record.release_id != b.record.release_id


def rewritings() -> list[str]:
    counts = ["COUNT(*)", "count(1)", "Count( * )"]
    aliases = ["", " AS n", " total", " AS people_rows"]
    tables = ["events", "EVENTS", "events e", "events AS ev"]
    predicates = [
        "age > 30 AND region = 'n'",
        "region = 'n' AND 30 < age",
        "NOT (age <= 30) AND region IN ('n')",
        "(region = 'n') AND age > 30 AND age > 25",
        "age > 30 AND age >= 30 AND 'n' = region",
    ]
    out = [f"SELECT {c}{a} FROM {t} WHERE {p}" for c, a, t, p in itertools.product(counts, aliases, tables, predicates)]
    return out[:100]


def test_asking_one_question_in_100_rewritings_costs_one_charge(session: dp.Session) -> None:
    texts = rewritings()
    assert len(set(texts)) == 100
    before = charges(session)
    answers = [session.sql(text, epsilon=0.3).table.iloc[0, 0] for text in texts]
    assert charges(session) == before + 1
    assert len(set(answers)) == 1  # one noise draw, returned 100 times: averaging gains nothing


def test_aliases_and_arithmetic_are_free_post_processing(session: dp.Session) -> None:
    plain = session.sql("SELECT region, AVG(hours) FROM events GROUP BY region", epsilon=0.11)
    scaled = session.sql("SELECT AVG(hours) * 60 AS minutes, region AS r FROM events GROUP BY r", epsilon=0.11)
    assert scaled.cached
    assert list(scaled.table.columns) == ["minutes", "minutes_error95", "r"]
    pd.testing.assert_series_equal(scaled.table["minutes"], plain.table["AVG(hours)"] * 60, check_names=False)
    assert (scaled.table["minutes_error95"] == plain.table["AVG(hours)_error95"] * 60).all()
    assert "SQL columns" in scaled.explain()


@pytest.mark.parametrize(("sql", "error", "construct", "fix"), REFUSED)
def test_refused_sql_costs_nothing(session: dp.Session, sql: str, error: type, construct: str, fix: str) -> None:
    before = charges(session)
    with pytest.raises(error):
        session.sql(sql, epsilon=0.1)
    assert charges(session) == before


SEEDS = [q for pair in EQUIVALENT + NEAR_MISSES for q in pair if releasable(pair)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 2), st.sampled_from(list(" ()*,'-<>=019aeinorstx_"))),
        max_size=4,
    ),
)
def test_fuzzed_sql_never_charges_a_refusal(session: dp.Session, seed: str, edits: list) -> None:
    text = _mutate(seed, edits)
    before = charges(session)
    try:
        session.sql(text, epsilon=0.01)
    except ChargedFailure:  # a failure after data access would be a bug in the SQL front end
        raise
    except DPSenseError:
        assert charges(session) == before


def test_declared_groups_per_unit_apply_to_sql_and_builder_queries(tmp_path: Path) -> None:
    with dp.Session.open(f"sqlite:///{tmp_path / 'g.db'}", analyst="steward", role="steward") as s:
        events = s.register_dataset(
            "events",
            source=sql_frame(200),
            privacy_unit="person_id",
            bounds={"hours": (0, 24)},
            keys=SQL_KEYS,
            max_rows_per_unit=3,
            max_groups_per_unit={"region": 1},
            budget=dp.Budget(epsilon=10),
            policy=policy(),
        )
        answer = s.sql("SELECT region, COUNT(DISTINCT person_id) FROM events GROUP BY region", epsilon=1)
        assert "in at most 1 group(s)" in answer.explain()
        same = s.release(events.query().group_by("region").agg(count_units=dp.count_units()), epsilon=1)
        assert same.cached  # the declared bound is part of the canonical query either way
        with pytest.raises(dp.DPSenseError, match="max_groups_per_unit"):
            s.sql("SELECT age, COUNT(DISTINCT person_id) FROM events GROUP BY age", epsilon=1)
