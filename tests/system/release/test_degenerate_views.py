"""No statistic reaches a charged failure on a degenerate view (docs/design.md invariant 6: "never fail after").

After data access a release cannot fail: for every dataset in the declared domain each step returns an
output of the same shape (or a PTR refusal, an answer). The views: empty (a filter nothing satisfies),
one record, one unit, all ties, a NULL-only column, values at the bounds; every statistic the Session
releases, grouped (public keys, and key selection) and not, under both adjacencies, through
``Session.release`` and ``Session.sql``. An outcome is either a release of the expected shape or a
refusal raised before the ledger (a ``UsageError``, nothing charged); a ``ChargedFailure`` fails the test.

Fixed data, small views, ε = 0.5 per release: the module runs in well under two minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsense as dp
from dpsense.core.errors import ChargedFailure, UsageError
from tests.system.release.support import REGIONS, policy

ADJACENCIES = ("add_remove", "replace")
EPSILON = 0.5
DELTA = 1e-9


def _frame(person: list[str], region: list[str], hours: list[float | None], age: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "person_id": person,
            "region": region,
            "hours": pd.array(hours, dtype="Float64").astype("float64"),
            "age": np.array(age, dtype=np.int64),
            "x": pd.array(hours, dtype="Float64").astype("float64"),  # a point column with the same values
            "team": region,  # a group column without declared keys: grouped releases select them
        }
    )


def _views() -> dict[str, tuple[pd.DataFrame, bool]]:
    """name -> (frame, filtered to nothing): the degenerate views of the fuzz."""
    many = 40
    base = _frame(
        [f"p{i // 2}" for i in range(many)],
        [REGIONS[(i // 2) % 4] for i in range(many)],
        [1.0 + (i % 7) for i in range(many)],
        [20 + i for i in range(many)],
    )
    return {
        "empty": (base, True),
        "one_record": (_frame(["p0"], ["north"], [3.0], [30]), False),
        "one_unit": (_frame(["p0"] * 5, ["north"] * 5, [1.0, 2.0, 3.0, 4.0, 5.0], [30] * 5), False),
        "all_ties": (_frame([f"p{i}" for i in range(30)], ["south"] * 30, [5.0] * 30, [40] * 30), False),
        "null_column": (
            _frame([f"p{i}" for i in range(10)], REGIONS * 2 + ["north"] * 2, [None] * 10, [50] * 10),
            False,
        ),
        "at_bounds": (
            _frame([f"p{i}" for i in range(12)], REGIONS * 3, [0.0, 24.0] * 6, [0, 120] * 6),
            False,
        ),
    }


VIEWS = _views()

#: name -> (aggregate builder, ungrouped only, alone only)
STATISTICS: dict[str, tuple[Callable[[], dp.Aggregate], bool]] = {
    "count": (lambda: dp.count(), False),
    "count_units": (lambda: dp.count_units(), False),
    "sum": (lambda: dp.sum("hours"), False),
    "mean": (lambda: dp.mean("hours"), False),
    "variance": (lambda: dp.variance("hours"), False),
    "median": (lambda: dp.median("age"), False),
    "quantile": (lambda: dp.quantile("age", 0.9), False),
    "quantile_inverse_sensitivity": (
        lambda: dp.quantile("age", 0.25, mechanism="inverse_sensitivity_order_statistic"),
        False,
    ),
    "median_ptr": (lambda: dp.median("age", mechanism="ptr_order_statistic", proposed_bound=5), False),
    "median_smooth": (lambda: dp.median("age", mechanism="smooth_median"), False),
    "quantile_smooth": (lambda: dp.quantile("age", 0.75, mechanism="smooth_quantile"), False),
    "median_inverse_sensitivity": (lambda: dp.median("age", mechanism="inverse_sensitivity_median"), False),
    "count_gaussian": (lambda: dp.count(mechanism="gaussian"), False),
    "count_geometric": (lambda: dp.count(mechanism="geometric"), False),
    "trimmed_mean": (lambda: dp.trimmed_mean("hours", 0.1), False),
    "trimmed_mean_ptr": (lambda: dp.trimmed_mean("hours", 0.1, mechanism="ptr_trimmed_mean", proposed_bound=2), False),
    "trimmed_mean_inverse_sensitivity": (
        lambda: dp.trimmed_mean("hours", 0.1, mechanism="inverse_sensitivity_trimmed_mean"),
        False,
    ),
    "min_distance": (lambda: dp.min_distance(["x"]), True),
    "min_distance_inverse_sensitivity": (
        lambda: dp.min_distance(["x"], mechanism="inverse_sensitivity_min_distance"),
        True,
    ),
    "min_distance_ptr": (lambda: dp.min_distance(["x"], mechanism="ptr_min_distance", proposed_bound=1), True),
    "approx_bounds": (lambda: dp.approx_bounds("hours"), True),
    "histogram": (lambda: dp.histogram("region", keys=REGIONS), True),
    "hierarchical_count": (lambda: dp.hierarchical_count("geo"), True),  # a census table over the regions
}
GROUPINGS = ("none", "public_keys", "selected_keys")

CASES = [
    (view, stat, grouping, adjacency)
    for view in VIEWS
    for stat, (_, whole) in STATISTICS.items()
    for grouping in GROUPINGS
    for adjacency in ADJACENCIES
    if grouping == "none" or not whole
]


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dp.Session]:
    path: Path = tmp_path_factory.mktemp("degenerate") / "l.db"
    with dp.Session.open(f"sqlite:///{path}", analyst="steward", role="steward") as s:
        for view, (frame, _) in VIEWS.items():
            for adjacency in ADJACENCIES:
                s.register_dataset(
                    f"{view}_{adjacency}",
                    source=frame.assign(copy=adjacency),  # other data: not linked to the other adjacency's
                    privacy_unit="person_id",
                    adjacency=adjacency,
                    bounds={"hours": (0, 24), "age": (0, 120), "x": (0, 24)},
                    keys={"region": REGIONS},
                    kinds={"x": "point"},
                    policies={"hours": "clamp", "x": "clamp"},  # NULLs stay missing (the NULL-only columns)
                    max_rows_per_unit=3,
                    max_groups_per_unit={"region": 1, "team": 1},
                    hierarchies={"geo": {"levels": ["region"], "keys": [[r] for r in REGIONS]}},
                    budget=dp.Budget(epsilon=100_000, delta=1e-7),
                    policy=policy(population=1000, per_release_epsilon=2, delta_rationale="δ = 1e-7 < 1/10^4"),
                )
        yield s


def _query(s: dp.Session, view: str, adjacency: str, stat: str, grouping: str) -> dp.Query:
    query = s.dataset(f"{view}_{adjacency}").query()
    if VIEWS[view][1]:
        query = query.filter("age", ">", 119)  # no row has it (ages 20..59), though [0, 120] allows it: an empty view
    if grouping == "public_keys":
        query = query.group_by("region", keys=REGIONS)
    elif grouping == "selected_keys":
        query = query.group_by("team")  # no declared keys: partition selection chooses them
    return query.agg(v=STATISTICS[stat][0]())


def _expected_rows(stat: str, grouping: str) -> int | None:
    if stat == "hierarchical_count":
        return 1 + len(REGIONS)  # the total and each region
    if grouping == "public_keys" or stat == "histogram":
        return len(REGIONS)
    if grouping == "selected_keys":
        return None  # the selected keys are a release: any number from 0 to 4
    return 1


def _check(s: dp.Session, name: str, run: Callable[[], dp.Release], *, refusal: bool = False) -> dp.Release | None:
    """The release, or None for a refusal before the ledger where one is expected (``refusal``)."""
    spent, charges = s.budget(name).spent, len(s.ledger.charges(name))
    try:
        release = run()
    except ChargedFailure:
        pytest.fail("a release failed after data access (a charged failure)")
    except UsageError:
        if not refusal:
            raise
        assert s.budget(name).spent == spent and len(s.ledger.charges(name)) == charges  # nothing charged
        return None
    return release


@pytest.mark.parametrize(("view", "stat", "grouping", "adjacency"), CASES)
def test_a_degenerate_view_releases_or_refuses_before_the_ledger(
    session: dp.Session, view: str, stat: str, grouping: str, adjacency: str
) -> None:
    delta = DELTA if grouping == "selected_keys" or stat.endswith(("_ptr", "_gaussian")) else 0
    name = f"{view}_{adjacency}"
    release = _check(
        session,
        name,
        lambda: session.release(_query(session, view, adjacency, stat, grouping), epsilon=EPSILON, delta=delta),
        refusal=stat.startswith("min_distance") and adjacency == "replace",  # refused by rule, before any charge
    )
    if release is None:
        return
    rows = _expected_rows(stat, grouping)
    if rows is not None:
        assert len(release.table) == rows


SQL = {
    "count": "COUNT(*)",
    "count_units": "COUNT(DISTINCT person_id)",
    "sum": "SUM(hours)",
    "mean": "AVG(hours)",
    "variance": "VAR_POP(hours)",
    "median": "MEDIAN(age)",
    "quantile": "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age)",
}


@pytest.mark.parametrize(
    ("view", "stat", "grouped", "adjacency"),
    [(v, s, g, a) for v in VIEWS for s in SQL for g in (False, True) for a in ADJACENCIES],
)
def test_a_degenerate_view_through_sql(
    session: dp.Session, view: str, stat: str, grouped: bool, adjacency: str
) -> None:
    name = f"{view}_{adjacency}"
    where = " WHERE age > 119" if VIEWS[view][1] else ""
    text = (
        f"SELECT region, {SQL[stat]} AS v FROM {name}{where} GROUP BY region"
        if grouped
        else f"SELECT {SQL[stat]} AS v FROM {name}{where}"
    )
    release = _check(session, name, lambda: session.sql(text, epsilon=EPSILON).release)
    if release is not None:
        assert len(release.table) == (len(REGIONS) if grouped else 1)


def _graph(edges: list[tuple[int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "edge": [f"e{i}" for i in range(len(edges))],
            "src": [a for a, _ in edges],
            "dst": [b for _, b in edges],
            "w": [0] * len(edges),
        }
    )


GRAPHS = {
    "no_edges": (_graph([(0, 1), (1, 2)]), True),
    "one_edge": (_graph([(0, 1)]), False),
    "one_triangle": (_graph([(0, 1), (1, 2), (0, 2)]), False),
    "self_loops_only": (_graph([(0, 0), (1, 1)]), False),
}
TRIANGLE_MECHANISMS = ("smooth_triangle_count", "inverse_sensitivity_triangle_count", "ptr_triangle_count")


@pytest.mark.parametrize(("graph", "mechanism", "adjacency"), [
    (g, m, a) for g in GRAPHS for m in TRIANGLE_MECHANISMS for a in ADJACENCIES
])  # fmt: skip
def test_a_degenerate_graph_releases_a_triangle_count(
    tmp_path: Path, graph: str, mechanism: str, adjacency: str
) -> None:
    frame, empty = GRAPHS[graph]
    with dp.Session.open(f"sqlite:///{tmp_path / 'g.db'}", analyst="steward", role="steward") as s:
        g = s.register_dataset(
            "graph",
            source=frame,
            privacy_unit="edge",
            adjacency=adjacency,
            kinds={"src": "edge", "dst": "edge"},
            keys={"src": list(range(4)), "dst": list(range(4))},
            max_rows_per_unit=1,
            budget=dp.Budget(epsilon=10, delta=1e-7),
            policy=policy(population=1000, delta_rationale="δ = 1e-7 < 1/10^4"),
        )
        query = g.query().filter("w", ">", 5) if empty else g.query()
        agg = dp.triangle_count(
            ["src", "dst"], mechanism=mechanism, **({"proposed_bound": 1} if "ptr" in mechanism else {})
        )
        delta = DELTA if "ptr" in mechanism else 0
        release = _check(s, "graph", lambda: s.release(query.agg(t=agg), epsilon=EPSILON, delta=delta))
        if release is not None:
            assert len(release.table) == 1
