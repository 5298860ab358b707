"""The steward's dashboard: budgets spent over time (an inline SVG plot), the release history, the audit chain.

Server-rendered HTML with no scripts and no external resources (the service runs without network).
Every dashboard response carries ``SECURITY_HEADERS``: a Content-Security-Policy that allows only the
page's own inline style sheets (by SHA-256 hash) and forms posting to itself, with
``frame-ancestors 'none'``, plus ``X-Frame-Options: DENY`` and ``X-Content-Type-Options: nosniff``.
Every text taken from the ledger is HTML-escaped. What it shows is what the steward may see anyway:
budgets, charges, released (noisy) values and explain reports; nothing unnoised is stored to show.

The plot draws, per dataset, the cumulative ε charged over time (ρ for a zCDP budget): one step line
per analyst, one for all analysts together, and the dataset's cap as a dashed line. Charges on parts
of a declared partition compose in parallel, so there the "all analysts" line is the plain sum of
charges, an upper bound on what the ledger counts as spent (the budget table shows the exact spend).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
from collections.abc import Sequence
from typing import Any

from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.ledger import Ledger, SpendPoint, StoredRelease

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 20, 40

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;
vertical-align:top}th{background:#f2f2f2}.ok{color:#186a1e;font-weight:bold}.broken{color:#b00020;font-weight:bold}
pre{white-space:pre-wrap;font-size:.85em;background:#fafafa;padding:.5em;max-width:900px}
.muted{color:#666}
"""


SIGN_IN_STYLE = "body{font-family:sans-serif;max-width:32em;margin:4em auto}"


def _style_hash(style: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii") + "'"


#: The dashboard's Content-Security-Policy: nothing but its own two inline style sheets (by hash), forms
#: posting to itself, no scripts, no plugins, no framing (the page has no script and loads nothing).
CSP = (
    "default-src 'none'; "
    f"style-src {_style_hash(_STYLE)} {_style_hash(SIGN_IN_STYLE)}; "
    "img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
#: Headers every dashboard response carries (CSP, anti-framing, no MIME sniffing, no referrer).
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def render_dashboard(ledger: Ledger) -> str:
    """The whole page for the ledger's current state."""
    report = ledger.verify()
    status = (
        f'<span class="ok">intact</span>: {report.entries} entries, head <code>{report.head_hash[:16]}…</code>'
        if report.ok
        else f'<span class="broken">BROKEN</span> at entry {report.first_broken_seq}: {_e(report.reason)}'
    )
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>dpsense — steward dashboard</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>dpsense steward dashboard</h1>",
        f'<p id="audit-status">Audit chain: {status}</p>',
        "<form method='post' action='/dashboard/logout'><button type='submit'>Sign out</button></form>",
    ]
    history: list[StoredRelease] = []
    names = ledger.dataset_names()
    if not names:
        parts.append("<p class='muted'>No dataset is registered yet.</p>")
    for name in names:
        parts.append(_dataset_section(ledger, name))
        history.extend(ledger.releases(name))
    parts.append(_history(history))
    parts.append("</body></html>")
    return "".join(parts)


def _dataset_section(ledger: Ledger, name: str) -> str:
    total = ledger.budget(name)
    points = ledger.spend_timeline(name)
    rows = [
        f"<tr><th>cap</th><td>{_e(total.cap)}</td></tr>",
        f"<tr><th>spent</th><td>{_e(total.spent)}</td></tr>",
        f"<tr><th>remaining</th><td>{_e(total.remaining)}</td></tr>",
    ]
    by_analyst: dict[str, float] = {}
    for p in points:
        by_analyst[p.analyst] = by_analyst.get(p.analyst, 0.0) + _amount(p.loss)
    spent_rows = "".join(f"<tr><td>{_e(a)}</td><td>{v:.6g}</td></tr>" for a, v in sorted(by_analyst.items()))
    return (
        f"<h2>Dataset {_e(name)}</h2><table class='budget'>{''.join(rows)}</table>"
        f"{budget_plot(name, points, cap=_amount(total.cap), unit=_unit(total.cap))}"
        f"<table class='by-analyst'><tr><th>analyst</th><th>{_unit(total.cap)} charged</th></tr>{spent_rows}</table>"
    )


def budget_plot(name: str, points: Sequence[SpendPoint], *, cap: float, unit: str) -> str:
    """An SVG step plot of cumulative spend over time, per analyst and for all, with the cap."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    times = [p.at for p in points]
    t0 = min(times) if times else 0.0
    t1 = max(times) if times else 1.0
    t1 = t1 if t1 > t0 else t0 + 1.0
    series: dict[str, list[tuple[float, float]]] = {"all analysts": []}
    running: dict[str, float] = {}
    total = 0.0
    for p in points:
        amount = _amount(p.loss)
        total += amount
        running[p.analyst] = running.get(p.analyst, 0.0) + amount
        series["all analysts"].append((p.at, total))
        series.setdefault(p.analyst, []).append((p.at, running[p.analyst]))
    top = max([cap, total, 1e-9]) * 1.05

    def x(t: float) -> float:
        return LEFT + (t - t0) / (t1 - t0) * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - v / top * plot_h

    out = [
        f'<svg class="budget-plot" id="budget-plot-{_e(name)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{_e(unit)} spent over time for {_e(name)}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>',
    ]
    for i in range(6):
        value = top * i / 5
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" font-size="11" text-anchor="end">{value:.3g}</text>'
        )
    out.append(
        f'<text x="{LEFT}" y="{HEIGHT - 8}" font-size="11">{_e(_clock(t0))}</text>'
        f'<text x="{LEFT + plot_w}" y="{HEIGHT - 8}" font-size="11" text-anchor="end">{_e(_clock(t1))}</text>'
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" font-size="11" transform="rotate(-90 14 {TOP + plot_h / 2:.1f})" '
        f'text-anchor="middle">{_e(unit)} charged</text>'
    )
    out.append(
        f'<line class="cap" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(cap):.1f}" y2="{y(cap):.1f}" '
        'stroke="#b00020" stroke-dasharray="6 4"/>'
    )
    legend = [("cap", "#b00020", True)]
    for i, (label, pts) in enumerate(series.items()):
        color = "#222" if label == "all analysts" else PALETTE[(i - 1) % len(PALETTE)]
        if pts:
            path = _steps([(x(t), y(v)) for t, v in pts], end_x=x(t1), start_y=y(0))
            width = 2.5 if label == "all analysts" else 1.6
            out.append(
                f'<path class="series" data-series="{_e(label)}" d="{path}" fill="none" stroke="{color}" '
                f'stroke-width="{width}"/>'
            )
        legend.append((label, color, False))
    for i, (label, color, dashed) in enumerate(legend):
        ly = TOP + 12 + 16 * i
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 34}" y1="{ly}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"{dash}/><text x="{WIDTH - RIGHT + 40}" y="{ly + 4}" font-size="11">{_e(label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _steps(points: list[tuple[float, float]], *, end_x: float, start_y: float) -> str:
    first_x = points[0][0]
    d = [f"M{first_x:.1f},{start_y:.1f}"]
    for px, py in points:
        d.append(f"H{px:.1f}V{py:.1f}")
    d.append(f"H{end_x:.1f}")
    return "".join(d)


def _history(releases: list[StoredRelease]) -> str:
    if not releases:
        return "<h2>Release history</h2><p class='muted' id='no-releases'>No release yet.</p>"
    rows = []
    for r in sorted(releases, key=lambda r: r.release_id):
        params = r.parameters
        query = params.get("query")
        rows.append(
            f'<tr class="release" data-release-id="{r.release_id}"><td>{r.release_id}</td><td>{_e(r.dataset)}</td>'
            f"<td>{_e(params.get('analyst', ''))}</td><td>{_e(r.mechanism)}</td>"
            f"<td><details><summary>query and values</summary><pre>{_e(json.dumps(query, indent=1))}</pre>"
            f"{_values(r.value)}</details></td>"
            f"<td><details class='explain'><summary>explain</summary><pre>{_e(params.get('explain', ''))}</pre>"
            "</details></td></tr>"
        )
    head = "<tr><th>id</th><th>dataset</th><th>analyst</th><th>mechanism</th><th>query</th><th>explain</th></tr>"
    return f"<h2>Release history</h2><table id='releases'>{head}{''.join(rows)}</table>"


def _values(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    head = "".join(f"<th>{_e(c)}</th>" for c in value.get("columns", []))
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in row) + "</tr>" for row in value.get("rows", []))
    return f"<table class='values'><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else ("" if value is None else str(value))


def _amount(loss: PrivacyLoss) -> float:
    if isinstance(loss, PureDP | ApproxDP):
        return float(loss.epsilon)
    if isinstance(loss, ZCDP):
        return float(loss.rho)
    return 0.0


def _unit(loss: PrivacyLoss) -> str:
    return "ρ" if isinstance(loss, ZCDP) else "ε"


def _clock(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
