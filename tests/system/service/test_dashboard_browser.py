"""The steward's dashboard in headless Chromium (Debian's chromium, driven by Playwright).

A seeded service (sub-budgets for an analyst and a period, releases by two analysts, one of them
answered from the store, a SQL release, a request refused for its analyst's budget) is shown: the
sign-in form takes the steward token, then the page shows the audit status, every budget scope, the
budget plot, the release list (time, analyst, the question as one line, ε and δ, answers from the
store) and the failures. The page is loaded at 1280x800 and 420x900: it may never scroll sideways.
Full-page screenshots are saved in the test's folder; with DPSENSE_WRITE_SCREENSHOTS=1 they are also
copied to docs/images/dashboard-1280.png and docs/images/dashboard-420.png (shown in docs/service.md).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.system.service.support import Service, leaked, new_key, spec

ROOT = Path(__file__).resolve().parents[3]
AGE_30 = {"column": "age", "op": ">=", "value": 30}
SQL = "SELECT region, AVG(hours) AS h FROM events GROUP BY region"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """Debian's chromium; installed with apt-get when missing (skipped only where apt cannot run)."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("Debian's chromium is not installed and apt-get cannot install it here (needs root and apt)")
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, env=env, timeout=600)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "chromium"], check=True, capture_output=True, env=env, timeout=900
    )
    found = shutil.which("chromium")
    assert found, "apt-get installed chromium but it is not on PATH"
    return found


@dataclass
class Seeded:
    """The service and what the seeding got back: each fresh release's response, by name."""

    service: Service
    releases: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def seeded(make_service: Callable[..., Service]) -> Seeded:
    service = make_service(min_latency=0.02, quantum=0.02)
    steward, alice, bob, dave = (service.api(who) for who in ("steward", "alice", "bob", "dave"))
    now = int(time.time())
    for body in (
        {"dataset": "events", "scope": "analyst", "value": "alice", "epsilon": 5},
        {"dataset": "events", "scope": "analyst", "value": "dave", "epsilon": 1},
        {
            "dataset": "events",
            "scope": "period",
            "start": now - 60,
            "end": now + 86_400,
            "epsilon": 30,
            "delta": "1e-8",
        },
    ):
        assert steward.request("PUT", "/v1/steward/budgets", json=body).status_code == 200
    grouped, filtered = alice.release(spec(0.5)), alice.release(spec(1.0, filters=[AGE_30]))
    assert grouped.status_code == 200 and filtered.status_code == 200, grouped.text + filtered.text
    assert bob.release(spec(0.5)).json()["cached"] is True  # the stored release, at no cost
    sql = bob.post("/v1/sql", {"sql": SQL, "epsilon": 0.8}, key=new_key())
    later = bob.release(spec(1.5, filters=[{"column": "age", "op": "<", "value": 50}]))
    assert sql.status_code == 200 and later.status_code == 200, sql.text + later.text
    refused = dave.release(spec(2.0))  # beyond dave's sub-budget of 1: refused before any charge
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "budget_exhausted", refused.text
    docs = {"grouped": grouped.json(), "filtered": filtered.json(), "sql": sql.json(), "later": later.json()}
    return Seeded(service, docs)


def test_the_dashboard_shows_budgets_releases_and_fits_1280_and_420_px(seeded: Seeded, tmp_path: Path) -> None:
    service = seeded.service
    listed = service.api("steward").get("/v1/releases", params={"dataset": "events"}).json()["releases"]
    question = {r["release_id"]: r["question"] for r in listed}
    executable = chromium()
    from playwright.sync_api import sync_playwright

    shots: dict[int, Path] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            response = page.goto(service.url + "/dashboard")
            assert response is not None and response.status == 401
            page.fill("input[name=token]", service.tokens["steward"])
            page.click("button[type=submit]")
            page.wait_for_selector("svg.budget-plot")
            assert page.url.endswith("/dashboard")
            assert "intact" in page.inner_text("#audit-status")

            scopes = page.locator("table.budgets tr.budget-row")
            labels = [scopes.nth(i).locator("th").inner_text() for i in range(scopes.count())]
            assert labels[:3] == ["dataset total", "analyst alice", "analyst dave"]
            assert len(labels) == 4 and labels[3].startswith("period ")
            alice_row = scopes.nth(1).locator("td")
            assert alice_row.nth(0).inner_text() == "ε=5, δ=0" and alice_row.nth(1).inner_text() == "ε=1.5, δ=0"
            assert scopes.nth(2).locator("td").nth(1).inner_text() == "ε=0, δ=0"  # dave's refusal cost nothing

            plot = page.locator("svg#budget-plot-events")
            assert plot.is_visible()
            series = plot.locator("path.series")
            assert sorted(series.nth(i).get_attribute("data-series") or "" for i in range(series.count())) == [
                "alice",
                "all analysts",
                "bob",
            ]
            assert plot.locator("line.cap").count() == 1

            rows = page.locator("table.releases tr.release")
            assert rows.count() == 4  # bob's identical query was answered from alice's release
            for name, doc in seeded.releases.items():
                row = page.locator(f"table.releases tr.release[data-release-id='{doc['release_id']}']")
                epsilon, delta = doc["charged"]["approx"]
                assert row.locator("td.epsilon").inner_text() == f"{epsilon:.6g}", name
                assert row.locator("td.delta").inner_text() == f"{delta:.6g}", name
                assert row.locator("td.question").inner_text() == question[doc["release_id"]], name
                assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row.locator("td.time").inner_text()), name
            grouped = page.locator(f"tr.release[data-release-id='{seeded.releases['grouped']['release_id']}']")
            assert grouped.locator("td.question").inner_text().endswith(" by region")
            assert grouped.locator("td.cached").inner_text() == "1×"
            filtered = page.locator(f"tr.release[data-release-id='{seeded.releases['filtered']['release_id']}']")
            assert filtered.locator("td.question").inner_text().endswith(" by region where age >= 30")
            sql = page.locator(f"tr.release[data-release-id='{seeded.releases['sql']['release_id']}']")
            assert sql.locator("td.question").inner_text() == "mean(hours) by region"  # the SQL's canonical query
            page.locator("table.releases details.explain summary").first.click()
            assert "Laplace" in page.locator("table.releases details.explain pre").first.inner_text()
            assert page.locator(".no-failures").is_visible() and page.locator(".refusals").is_visible()

            text = page.inner_text("body")
            assert '{"aggregates' not in text and "aggregates" not in page.content()
            for width, height in ((1280, 800), (420, 900)):
                page.set_viewport_size({"width": width, "height": height})
                page.reload()
                page.wait_for_selector("svg.budget-plot")
                scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert scroll <= inner, (width, scroll, inner)
                box = page.locator("svg#budget-plot-events").bounding_box()
                assert box is not None and box["x"] + box["width"] <= width
                shots[width] = tmp_path / f"dashboard-{width}.png"
                page.screenshot(path=str(shots[width]), full_page=True)
            html = page.content()
        finally:
            browser.close()
    for width, shot in shots.items():
        assert shot.stat().st_size > 10_000
        if os.environ.get("DPSENSE_WRITE_SCREENSHOTS"):  # refresh docs/images only when asked (like the golden corpus)
            (ROOT / "docs" / "images").mkdir(exist_ok=True)
            shutil.copyfile(shot, ROOT / "docs" / "images" / f"dashboard-{width}.png")
    service.seen.append(html)
    assert leaked(service) == []


def test_the_dashboard_refuses_an_analyst_token(seeded: Seeded) -> None:
    page = seeded.service.api("alice").get("/dashboard")
    assert page.status_code == 401 and "<form" in page.text and "budget-plot" not in page.text
