"""The steward's dashboard rendered from a ledger (no server, no browser): what each part shows.

A ledger on each backend gets sub-budgets of every kind, a release answered twice more from the
store, a SQL release, a failed, a refunded and an abandoned charge, a refused request and a zCDP
dataset; the page must list each as the ledger holds it, escaped, without the canonical JSON of
a query. The browser test (test_dashboard_browser.py) checks the layout.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from dpsense.core.errors import BudgetExhausted
from dpsense.core.privacy_loss import ZCDP, ApproxDP, PureDP
from dpsense.ledger import Ledger, ReleaseRecord, Scope
from dpsense.service._dashboard import CSP, render_dashboard
from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

T0 = 1_780_000_000  # 2026-05-28 20:26:40 UTC
QUERY = {
    "aggregates": [{"name": "count()"}, {"name": "mean(hours)"}],
    "group_by": [{"column": "region"}],
    "filters": [{"column": "age", "op": ">=", "value": ["n", "30"]}],
}


class Clock:
    def __init__(self) -> None:
        self.now = float(T0)

    def __call__(self) -> float:
        return self.now


class Rows(HTMLParser):
    """The ``<tr>`` rows of a page: their attributes and the text of each cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], list[str]]] = []
        self._cell: list[str] | None = None
        self._depth = 0  # tables nested in a cell (the noisy values) belong to the cell

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._depth += 1
        if tag == "tr" and self._depth == 1:
            self.rows.append(({k: v or "" for k, v in attrs}, []))
        if tag in ("td", "th") and self._depth == 1:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._depth == 1 and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "table":
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rows_of(page: str, cls: str) -> list[tuple[dict[str, str], list[str]]]:
    parser = Rows()
    parser.feed(page)
    return [(attrs, cells) for attrs, cells in parser.rows if attrs.get("class") == cls]


def record(analyst: str, **params: Any) -> ReleaseRecord:
    return ReleaseRecord(
        value={"columns": ["region", "count"], "rows": [["north", 12.5]]},
        mechanism="laplace",
        mechanism_version="1",
        parameters={"analyst": analyst, "explain": "Laplace noise, scale 2", **params},
        privacy_unit="person_id",
        adjacency="add_remove",
        code_version="0.1.0",
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def open_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[Clock], Ledger]]:
    schema: tuple[str, str] | None = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        server = request.getfixturevalue("pg_server")
        name, url = fresh_pg_schema(server)
        schema = (server, name)
    opened: list[Ledger] = []

    def make(clock: Clock) -> Ledger:
        opened.append(Ledger.open(url, clock=clock))
        return opened[-1]

    yield make
    for ledger in opened:
        ledger.close()
    if schema is not None:
        drop_pg_schema(*schema)


def test_the_dashboard_shows_sub_budgets_releases_failures_and_no_query_json(
    open_ledger: Callable[[Clock], Ledger],
) -> None:
    clock = Clock()
    ledger = open_ledger(clock)
    for name in ("alice", "bob", "carol", "eve<i>"):
        ledger.add_analyst(name)
    ledger.register_dataset("events", budget=ApproxDP(10, "1e-6"))
    ledger.set_budget("events", Scope.analyst("alice"), PureDP(3))
    ledger.set_budget("events", Scope.analyst("eve<i>"), PureDP(1))
    ledger.set_budget("events", Scope.family("counts"), PureDP(2))
    ledger.set_budget("events", Scope.period(T0, T0 + 86_400), ApproxDP(5, "1e-6"))

    first = ledger.reserve(dataset="events", analyst="alice", request_id="a1", loss=PureDP("0.5"), family="counts",
                           cache_key="k1")  # fmt: skip
    ledger.commit(first, record("alice", query=QUERY))
    clock.now += 60
    for request_id in ("b1", "b2"):  # answered from the store at no cost
        assert ledger.reserve(dataset="events", analyst="bob", request_id=request_id, loss=PureDP("0.5"),
                              cache_key="k1").stored is not None  # fmt: skip
    sql = ledger.reserve(dataset="events", analyst="bob", request_id="b3", loss=ApproxDP("0.8", "1e-8"))
    ledger.commit(sql, record("bob", sql="SELECT region, COUNT(*)\n  FROM events GROUP BY region"))
    clock.now += 60
    failed = ledger.reserve(dataset="events", analyst="bob", request_id="b4", loss=PureDP("0.25"))
    ledger.fail(failed, data_accessed=True)
    refunded = ledger.reserve(dataset="events", analyst="carol", request_id="c1", loss=PureDP("0.125"))
    ledger.fail(refunded, data_accessed=False)
    ledger.reserve(dataset="events", analyst="carol", request_id="c2", loss=PureDP("0.375"))
    clock.now += 7200
    assert ledger.resolve_stale(older_than_s=3600) == 1
    with pytest.raises(BudgetExhausted):  # alice has 2.5 left of her 3: refused, nothing written
        ledger.reserve(dataset="events", analyst="alice", request_id="a2", loss=PureDP("2.75"))
    ledger.register_dataset("zc", budget=ZCDP(1))
    z = ledger.reserve(dataset="zc", analyst="alice", request_id="z1", loss=ZCDP("0.125"))
    ledger.commit(z, record("alice", query={"aggregates": [{"name": "count()"}]}))

    page = render_dashboard(ledger)

    budgets = [(attrs["data-scope"], cells[:4]) for attrs, cells in rows_of(page, "budget-row")]
    assert budgets[:5] == [
        ("total", ["dataset total", "ε=10, δ=1e-06", "ε=1.925, δ=1e-08", "ε=8.075, δ=9.9e-07"]),
        ("analyst", ["analyst alice", "ε=3, δ=0", "ε=0.5, δ=0", "ε=2.5, δ=0"]),
        ("analyst", ["analyst eve<i>", "ε=1, δ=0", "ε=0, δ=0", "ε=1, δ=0"]),
        ("family", ["family counts", "ε=2, δ=0", "ε=0.5, δ=0", "ε=1.5, δ=0"]),
        (
            "period",
            [
                "period 2026-05-28 20:26:40 – 2026-05-29 20:26:40 UTC",
                "ε=5, δ=1e-06",
                "ε=1.925, δ=1e-08",
                "ε=3.075, δ=9.9e-07",
            ],
        ),
    ]
    assert budgets[5] == ("total", ["dataset total", "ρ=1", "ρ=0.125", "ρ=0.875"])
    assert [cells[4] for _, cells in rows_of(page, "budget-row")][:2] == ["19%", "17%"]

    releases = [cells[1:8] for _, cells in rows_of(page, "release")]
    assert releases == [
        ["2026-05-28 20:26:40", "alice", "count(), mean(hours) by region where age >= 30", "0.5", "0", "2×", "laplace"],
        ["2026-05-28 20:27:40", "bob", "SELECT region, COUNT(*) FROM events GROUP BY region", "0.8", "1e-08", "—",
         "laplace"],
        ["2026-05-28 22:28:40", "alice", "count()", "ρ=0.125", "—", "—", "laplace"],
    ]  # fmt: skip
    failures = sorted((attrs["data-state"], cells[0], cells[1], cells[3]) for attrs, cells in rows_of(page, "failure"))
    assert failures == [
        ("abandoned", "2026-05-28 20:28:40", "carol", "0.375"),
        ("failed", "2026-05-28 20:28:40", "bob", "0.25"),
        ("refunded", "", "carol", "0.125"),
    ]
    assert page.count("are not written to the ledger") == 2  # the refusal of 2.75 is nowhere
    assert "2.75" not in page and "aggregates" not in page and "group_by" not in page
    assert "eve&lt;i&gt;" in page and "<i>" not in page and "<script" not in page and " style=" not in page
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None
    digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CSP


def test_an_empty_ledger_says_so(open_ledger: Callable[[Clock], Ledger]) -> None:
    page = render_dashboard(open_ledger(Clock()))
    assert "No dataset is registered yet." in page and "intact" in page
