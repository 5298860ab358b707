"""The steward's dashboard: per dataset its budgets, spend over time, releases and failed charges.

Server-rendered HTML with no scripts and no external resources (the service runs without network).
Every dashboard response carries ``SECURITY_HEADERS``: a Content-Security-Policy that allows only the
page's own inline style sheets (by SHA-256 hash) and forms posting to itself, with
``frame-ancestors 'none'``, plus ``X-Frame-Options: DENY`` and ``X-Content-Type-Options: nosniff``.
Every text taken from the ledger is HTML-escaped. What it shows is what the steward may see anyway:
budgets, charges, released (noisy) values and explain reports; nothing unnoised is stored to show.

Below the audit chain's status, each dataset has four parts:

* **Budgets**: the total and every sub-budget (analyst, query family, period) with its cap, spent,
  remaining and a ``<meter>`` of the share used (amounts to 6 significant digits; the ledger's are
  exact).
* **Spend over time**: per dataset the cumulative ε charged (ρ for a zCDP budget) as an inline SVG:
  one step line per analyst, one for all analysts together, and the cap as a dashed line. Charges on
  parts of a declared partition compose in parallel, so there the "all analysts" line is the plain
  sum of charges, an upper bound on what the ledger counts as spent (the budget table shows the
  exact spend). Then the ε each analyst was charged.
* **Releases**: commit time (UTC), analyst, the question as one line (``documents.question_text``,
  for SQL releases too; the SQL text only where no query is stored; never the canonical JSON), the
  ε and δ (or ρ) its charge cost, how often the stored release was answered again at no cost (the
  audit chain's ``cache_hit`` entries), the mechanism, and on demand its noisy values and explain
  report.
* **Failures**: charges without a release: failed (data read, stays spent), abandoned, still
  reserved (each with its debit time, analyst and cost) and refunded ones (no time: the ledger's
  reads keep none for them). A request refused before any charge (budget exhausted, bad input) is
  not written to the ledger at all (it audits no refusal), so no page can list it.

After the datasets, each local-DP collection shows its public declaration (scheme, per-client report
budget, dictionary size), its tallies (reports, clients, batches) and its estimates, which are releases
at no central cost (post-processing of randomized reports).

``Ledger.budget_scopes`` lists a dataset's scopes and ``Ledger.cache_hits`` counts the ``cache_hit``
entries of the audit chain per release; the amounts come from ``Ledger.budget``.

Layout: one column of at most 1200 px; every table sits in a box of its own with ``overflow-x: auto``
and below 640 px each of its rows becomes a card of labelled fields (``data-label``); the plot
scales down with the page. So the page never scrolls sideways (the browser test checks it at 420 px
and 1280 px).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpsense.core.privacy_loss import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.interface.documents import question_text
from dpsense.ledger import BudgetStatus, ChargeRecord, ChargeState, Ledger, Scope, SpendPoint, StoredRelease

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 20, 40

_STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;padding:.8em 1em 2em;max-width:1200px;color:#222;line-height:1.35}
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.25em;margin:2em 0 .3em;border-bottom:1px solid #ccc}
h3{font-size:1.05em;margin:1.4em 0 .3em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;
vertical-align:top}th{background:#f2f2f2}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.time,td.state{white-space:nowrap}td.question{min-width:14em}
.ok{color:#186a1e;font-weight:bold}.broken{color:#b00020;font-weight:bold}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em;background:#fafafa;padding:.5em;margin:.3em 0;
max-width:70ch}code{overflow-wrap:anywhere}
svg.budget-plot{display:block;width:100%;max-width:720px;height:auto}
meter{width:5em;vertical-align:middle}
.muted{color:#666}
@media (max-width:640px){
body{padding:.5em .6em 1.5em}h1{font-size:1.3em}
table.stack,table.stack>tbody,table.stack>tbody>tr,table.stack>tbody>tr>td,table.stack>tbody>tr>th{display:block;
width:100%}
table.stack>thead{display:none}table.stack>tbody>tr{border:1px solid #ccc;margin:0 0 .7em}
table.stack>tbody>tr>td,table.stack>tbody>tr>th{border:0;border-top:1px solid #eee;text-align:left;white-space:normal;
min-width:0}
table.stack>tbody>tr>td::before{content:attr(data-label);display:inline-block;min-width:7.5em;
margin-right:.5em;font-weight:bold;color:#555}
}
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

#: What each state of a charge without a release means to the steward.
_STATE_TEXT = {
    ChargeState.RESERVED: "reserved: no release yet (running, or stale)",
    ChargeState.FAILED: "failed after reading data: stays spent",
    ChargeState.ABANDONED: "abandoned (stale reservation): stays spent",
    ChargeState.REFUNDED: "refunded before reading data: nothing spent",
}
_SCOPE_ORDER = {"total": 0, "analyst": 1, "family": 2, "period": 3}


@dataclass(frozen=True)
class _Extras:
    """What the ledger holds but has no public read for: budget scopes per dataset, cache hits per release."""

    scopes: dict[str, list[Scope]]
    cache_hits: dict[int, int]


def render_dashboard(ledger: Ledger) -> str:
    """The whole page for the ledger's current state."""
    report = ledger.verify()
    status = (
        f'<span class="ok">intact</span>: {report.entries} entries, head <code>{report.head_hash[:16]}…</code>'
        if report.ok
        else f'<span class="broken">BROKEN</span> at entry {report.first_broken_seq}: {_e(report.reason)}'
    )
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>dpsense — steward dashboard</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>dpsense steward dashboard</h1>",
        f'<p id="audit-status">Audit chain: {status}</p>',
        "<form method='post' action='/dashboard/logout'><button type='submit'>Sign out</button></form>",
    ]
    names = ledger.dataset_names()
    if not names:
        parts.append("<p class='muted'>No dataset is registered yet.</p>")
    extras = _ledger_extras(ledger, names)
    for name in names:
        parts.append(_dataset_section(ledger, name, extras))
    for name in ledger.collection_names():
        parts.append(_collection_section(ledger, name, extras))
    parts.append("</body></html>")
    return "".join(parts)


def _dataset_section(ledger: Ledger, name: str, extras: _Extras) -> str:
    total = ledger.budget(name)
    points = ledger.spend_timeline(name)
    charges = ledger.charges(name)
    scopes = extras.scopes.get(name) or [Scope.total()]
    statuses = [total if scope.kind == "total" else ledger.budget(name, scope) for scope in scopes]
    by_analyst: dict[str, float] = {}
    for p in points:
        by_analyst[p.analyst] = by_analyst.get(p.analyst, 0.0) + _amount(p.loss)
    unit = _unit(total.cap)
    spent_rows = "".join(
        f"<tr><td>{_e(a)}</td><td class='num'>{v:.6g}</td></tr>" for a, v in sorted(by_analyst.items())
    )
    return (
        f"<section class='dataset' data-dataset='{_e(name)}'><h2>Dataset {_e(name)}</h2>"
        f"<h3>Budgets</h3>{_budgets(statuses)}"
        "<h3>Spend over time</h3>"
        f"{budget_plot(name, points, cap=_amount(total.cap), unit=unit)}"
        f"<div class='scroll'><table class='by-analyst'><tr><th>analyst</th><th>{unit} charged</th></tr>"
        f"{spent_rows}</table></div>"
        f"<h3>Releases</h3>{_releases(ledger.releases(name), charges, extras.cache_hits)}"
        f"<h3>Failures</h3>{_failures(points, charges)}</section>"
    )


def _collection_section(ledger: Ledger, name: str, extras: _Extras) -> str:
    """A local-DP collection: its public declaration, tallies, and estimates (releases at no central cost)."""
    info = ledger.collection(name)
    facts = (
        ("scheme", json.dumps(info.scheme, sort_keys=True)),
        ("reports per client, at most", str(info.max_reports_per_client)),
        ("dictionary", "none" if info.dictionary is None else f"{len(info.dictionary)} values"),
        ("reports accepted", str(info.reports)),
        ("clients", str(info.clients)),
        ("batches", str(info.batches)),
    )
    rows = [f"<tr><th scope='row'>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts]
    return (
        f"<section class='collection' data-collection='{_e(name)}'><h2>Local-DP collection {_e(name)}</h2>"
        f"<div class='scroll'><table class='collection-facts'>{''.join(rows)}</table></div>"
        f"<h3>Estimates</h3>{_releases(ledger.releases(name), ledger.charges(name), extras.cache_hits)}</section>"
    )


def _budgets(statuses: Sequence[BudgetStatus]) -> str:
    """The total budget and every sub-budget: scope, cap, spent, remaining, share used."""
    rows = []
    for s in sorted(statuses, key=lambda s: (_SCOPE_ORDER.get(s.scope.kind, 9), s.scope.start or 0, s.scope.value)):
        cap, spent = _amount(s.cap), _amount(s.spent)
        used = spent / cap if cap > 0 else 1.0
        meter = (
            f'<meter min="0" max="{cap:.6g}" value="{min(spent, cap):.6g}" low="{cap * 0.5:.6g}" '
            f'high="{cap * 0.8:.6g}" optimum="0"></meter> {used:.0%}'
        )
        rows.append(
            f'<tr class="budget-row" data-scope="{_e(s.scope.kind)}"><th scope="row">{_e(_scope_text(s.scope))}</th>'
            + _td("cap", _e(_loss_text(s.cap)), "num")
            + _td("spent", _e(_loss_text(s.spent)), "num")
            + _td("remaining", _e(_loss_text(s.remaining)), "num")
            + _td("used", meter, "num")
            + "</tr>"
        )
    return _table("budgets", ("scope", "cap", "spent", "remaining", "used"), rows)


def _releases(releases: Sequence[StoredRelease], charges: Sequence[ChargeRecord], hits: dict[int, int]) -> str:
    """The release list: time, analyst, question, cost, answers from the store, mechanism, values, explain."""
    if not releases:
        return "<p class='muted no-releases'>No release yet.</p>"
    cost = {c.charge_id: c.loss for c in charges}
    rows = []
    for r in sorted(releases, key=lambda r: r.release_id):
        params = r.parameters
        epsilon, delta = _cost_cells(cost.get(r.charge_id))
        again = hits.get(r.release_id, 0)
        details = (
            f"<details class='values'><summary>values</summary><div class='scroll'>{_values(r.value)}</div></details>"
            f"<details class='explain'><summary>explain</summary><pre>{_e(params.get('explain', ''))}</pre></details>"
        )
        rows.append(
            f'<tr class="release" data-release-id="{r.release_id}">'
            + _td("id", str(r.release_id), "num")
            + _td("time (UTC)", _e("" if r.created_at is None else _clock(r.created_at, zone=False)), "time")
            + _td("analyst", _e(params.get("analyst", "")))
            + _td("question", _e(_question(params)), "question")
            + _td("ε", _e(epsilon), "num epsilon")
            + _td("δ", _e(delta), "num delta")
            + _td("from store", "—" if again == 0 else f"{again}×", "num cached")
            + _td("mechanism", _e(r.mechanism))
            + _td("details", details)
            + "</tr>"
        )
    head = (
        "id",
        "time (UTC)",
        "analyst",
        "question",
        "ε",
        "δ",
        "answered again from the store",
        "mechanism",
        "noisy values, explain",
    )
    return _table("releases", head, rows)


def _failures(points: Sequence[SpendPoint], charges: Sequence[ChargeRecord]) -> str:
    """Charges without a release (failed, abandoned, reserved, refunded); refusals are not recorded."""
    found = [
        (_clock(p.at, zone=False), p.analyst, p.state, p.loss) for p in points if p.state is not ChargeState.COMMITTED
    ]
    found += [("", c.analyst, c.state, c.loss) for c in charges if c.state is ChargeState.REFUNDED]
    note = (
        "<p class='muted refusals'>Requests refused before any charge (budget exhausted, bad input) are not"
        " written to the ledger, so they are not listed.</p>"
    )
    if not found:
        return f"<p class='muted no-failures'>No failed, abandoned, pending or refunded charge.</p>{note}"
    rows = []
    for at, analyst, state, loss in found:
        epsilon, delta = _cost_cells(loss)
        rows.append(
            f'<tr class="failure" data-state="{_e(state.value)}">'
            + _td("time (UTC)", _e(at), "time")
            + _td("analyst", _e(analyst))
            + _td("state", _e(_STATE_TEXT.get(state, state.value)), "state")
            + _td("ε", _e(epsilon), "num epsilon")
            + _td("δ", _e(delta), "num delta")
            + "</tr>"
        )
    return _table("failures", ("time (UTC)", "analyst", "state", "ε", "δ"), rows) + note


def _table(cls: str, head: Sequence[str], rows: Sequence[str]) -> str:
    """A table in a box of its own that scrolls sideways; stacked into one card per row on narrow screens."""
    heads = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (
        f"<div class='scroll'><table class='{cls} stack'><thead><tr>{heads}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _td(label: str, content: str, cls: str = "") -> str:
    """A cell (``content`` is HTML already) with its column's name for the stacked layout."""
    klass = f' class="{cls}"' if cls else ""
    return f'<td data-label="{_e(label)}"{klass}>{content}</td>'


def _ledger_extras(ledger: Ledger, names: Sequence[str]) -> _Extras:
    """Every dataset's budget scopes and every release's cache-hit count (``Ledger.budget_scopes``, ``cache_hits``)."""
    return _Extras({name: ledger.budget_scopes(name) for name in names}, ledger.cache_hits())


def _scope_text(scope: Scope) -> str:
    if scope.kind == "total":
        return "dataset total"
    if scope.kind == "period" and scope.start is not None and scope.end is not None:
        return f"period {_clock(scope.start, zone=False)} – {_clock(scope.end)}"
    return f"{scope.kind} {scope.value}"


def _question(params: dict[str, Any]) -> str:
    """The question as one line: the canonical query read out, else the SQL as written, never JSON."""
    text = question_text(params.get("query"))
    if text:
        return text
    sql = params.get("sql")
    return " ".join(sql.split()) if isinstance(sql, str) and sql.strip() else "(not readable)"


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


def _values(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    head = "".join(f"<th>{_e(c)}</th>" for c in value.get("columns", []))
    body = "".join("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in row) + "</tr>" for row in value.get("rows", []))
    return f"<table class='values'><tr>{head}</tr>{body}</table>"


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else ("" if value is None else str(value))


def _loss_text(loss: PrivacyLoss) -> str:
    """``ε=0.5``, ``ε=1, δ=1e-08`` or ``ρ=0.125`` (6 significant digits)."""
    if isinstance(loss, ApproxDP):
        return f"ε={_num(loss.epsilon)}, δ={_num(loss.delta)}"
    if isinstance(loss, PureDP):
        return f"ε={_num(loss.epsilon)}"
    return f"ρ={_num(loss.rho)}"


def _cost_cells(loss: PrivacyLoss | None) -> tuple[str, str]:
    """A charge's (ε, δ) cells; a zCDP charge gives ``ρ=…`` and no δ."""
    if loss is None:
        return "", ""
    if isinstance(loss, ApproxDP):
        return _num(loss.epsilon), _num(loss.delta)
    if isinstance(loss, PureDP):
        return _num(loss.epsilon), "0"
    return f"ρ={_num(loss.rho)}", "—"


def _num(value: Fraction) -> str:
    return f"{float(value):.6g}"


def _amount(loss: PrivacyLoss) -> float:
    if isinstance(loss, PureDP | ApproxDP):
        return float(loss.epsilon)
    if isinstance(loss, ZCDP):
        return float(loss.rho)
    return 0.0


def _unit(loss: PrivacyLoss) -> str:
    return "ρ" if isinstance(loss, ZCDP) else "ε"


def _clock(t: float, *, zone: bool = True) -> str:
    text = dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text} UTC" if zone else text


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)
