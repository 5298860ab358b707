"""Values whose error interval holds their whole public range are flagged noise-dominated (issue 17, item 4).

The flag is post-processing of a stored release (its values, error bounds and the query's public
bounds), so it is tested on stored records: exact, no noise drawn.
"""

from __future__ import annotations

from typing import Any

from dpsense.ledger import StoredRelease
from dpsense.release import Release
from dpsense.release._sql import SqlRelease

MEAN = {"name": "mean(hours)", "kind": "mean", "bounds": [["0/1", "24/1"]], "columns": ["hours"]}
VARIANCE = {"name": "variance(hours)", "kind": "variance", "bounds": [["0/1", "24/1"]], "columns": ["hours"]}
COUNT = {"name": "count()", "kind": "count", "bounds": [], "columns": []}


def _release(rows: list[list[Any]], columns: list[str], aggregates: list[dict[str, Any]], **kw: Any) -> Release:
    record = StoredRelease(
        release_id=1,
        charge_id=1,
        dataset="events",
        cache_key="k",
        value={"columns": columns, "rows": rows, "notes": {}},
        mechanism="laplace",
        mechanism_version="test",
        parameters={"query": {"aggregates": aggregates}},
        privacy_unit="person_id",
        adjacency="add_remove",
        code_version="test",
    )
    return Release(record, cached=True, charged=None, **kw)


COLUMNS = ["region", "mean(hours)", "mean(hours)_error95", "count()", "count()_error95"]


def test_a_mean_whose_interval_holds_its_bounds_is_flagged_after_its_error_column() -> None:
    rows = [
        ["north", 12.0, 12.0, 5, 900.0],  # [0, 24] exactly: says nothing
        ["south", 3.0, 21.0, 5, 900.0],  # [-18, 24]: holds [0, 24]
        ["east", 3.0, 20.9, 5, 900.0],  # [-17.9, 23.9]: does not reach 24
        ["west", 20.0, 1.0, 5, 900.0],
    ]
    release = _release(rows, COLUMNS, [MEAN, COUNT], names=(("m", "mean(hours)"), ("n", "count()")))
    columns, shown = release.rows()
    assert columns == ["region", "m", "m_error95", "m_noise_dominated", "n", "n_error95"]
    assert [row[3] for row in shown] == [True, True, False, False]
    assert list(release.table["m_noise_dominated"]) == [True, True, False, False]


def test_the_flag_column_is_there_when_no_value_is_noise_dominated_and_counts_are_never_flagged() -> None:
    """The columns of a release do not depend on what the noise drew: every release of a question has them."""
    rows = [["north", 12.0, 2.0, 5, 900.0]]
    columns, shown = _release(rows, COLUMNS, [MEAN, COUNT]).rows()
    assert columns == [*COLUMNS[:3], "mean(hours)_noise_dominated", *COLUMNS[3:]]
    assert shown == [["north", 12.0, 2.0, False, 5, 900.0]]
    flagged, _ = _release([["north", 12.0, 12.0, 5, 900.0]], COLUMNS, [MEAN, COUNT]).rows()
    assert flagged == columns  # flagged or not: the same columns


def test_a_variance_is_flagged_against_its_range_zero_to_a_quarter_width_squared() -> None:
    columns = ["variance(hours)", "variance(hours)_error95"]
    flagged = _release([[72.0, 72.0]], columns, [VARIANCE]).rows()  # [0, 144] exactly
    assert flagged[0][-1] == "variance(hours)_noise_dominated" and flagged[1] == [[72.0, 72.0, True]]
    assert _release([[72.0, 71.0]], columns, [VARIANCE]).rows()[1] == [[72.0, 71.0, False]]  # [1, 143]


def test_sql_keeps_the_flag_of_a_bare_aggregate_only() -> None:
    from dpsense.query.sql import SqlOutput

    rows = [["north", 12.0, 12.0, 5, 900.0], ["west", 20.0, 1.0, 5, 900.0]]
    base = _release(rows, COLUMNS, [MEAN, COUNT])
    outputs = (
        SqlOutput("m", ("agg", "mean(hours)")),
        SqlOutput("twice", ("mul", ("agg", "mean(hours)"), ("num", 2))),
    )
    columns, shown = SqlRelease(base, outputs).rows()
    assert columns == ["m", "m_error95", "m_noise_dominated", "twice", "twice_error95"]
    assert [row[2] for row in shown] == [True, False]
