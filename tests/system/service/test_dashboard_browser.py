"""The steward's dashboard in headless Chromium (Debian's chromium, driven by Playwright).

A seeded ledger (releases by two analysts, one of them answered from the store) is shown: the
sign-in form takes the steward token, then the page shows the audit status, the budget plot (one
line per analyst and one for all) and the release list with explain reports. A screenshot is saved
in the test's folder and copied to build/dashboard.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.system.service.support import Service, leaked, spec

ROOT = Path(__file__).resolve().parents[3]
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


@pytest.fixture(scope="module")
def seeded(make_service: Callable[..., Service]) -> Service:
    service = make_service(min_latency=0.02, quantum=0.02)
    alice, bob = service.api("alice"), service.api("bob")
    assert alice.release(spec(0.5)).status_code == 200
    assert alice.release(spec(1.0, filters=[{"column": "age", "op": ">=", "value": 30}])).status_code == 200
    assert bob.release(spec(0.5)).json()["cached"] is True  # the stored release, at no cost
    sql = {"sql": "SELECT region, AVG(hours) AS h FROM events GROUP BY region", "epsilon": 0.8}
    assert bob.post("/v1/sql", sql, key="bob-sql-1").status_code == 200
    assert bob.release(spec(1.5, filters=[{"column": "age", "op": "<", "value": 50}])).status_code == 200
    return service


def test_the_dashboard_shows_the_budget_plot_and_the_release_list(seeded: Service, tmp_path: Path) -> None:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            response = page.goto(seeded.url + "/dashboard")
            assert response is not None and response.status == 401
            page.fill("input[name=token]", seeded.tokens["steward"])
            page.click("button[type=submit]")
            page.wait_for_selector("svg.budget-plot")
            assert page.url.endswith("/dashboard")
            assert "intact" in page.inner_text("#audit-status")
            plot = page.locator("svg#budget-plot-events")
            assert plot.is_visible()
            series = plot.locator("path.series")
            assert sorted(series.nth(i).get_attribute("data-series") or "" for i in range(series.count())) == [
                "alice",
                "all analysts",
                "bob",
            ]
            assert plot.locator("line.cap").count() == 1
            rows = page.locator("#releases tr.release")
            assert rows.count() == 4  # bob's identical query was answered from alice's release
            page.locator("#releases details.explain summary").first.click()
            assert "Laplace" in page.locator("#releases details.explain pre").first.inner_text()
            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot), full_page=True)
            html = page.content()
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    (ROOT / "build").mkdir(exist_ok=True)
    shutil.copyfile(shot, ROOT / "build" / "dashboard.png")
    seeded.seen.append(html)
    assert leaked(seeded) == []


def test_the_dashboard_refuses_an_analyst_token(seeded: Service) -> None:
    page = seeded.api("alice").get("/dashboard")
    assert page.status_code == 401 and "<form" in page.text and "budget-plot" not in page.text
