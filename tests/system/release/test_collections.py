"""Local-DP collections through the Session (issue 19, item 1): register, ingest, estimate, history.

Reports come from the real device clients (``dpsense.device``) under the device's test-only
deterministic source, so every run sees the same reports. What is checked: estimates land in the
history as ordinary releases at ε = 0 with an explain report; the same question on the same batches
is the stored release; a new batch makes a new one; the ledger refuses a client past its report budget
while RAPPOR's memoized permanent response keeps repeated reports of one value at the lifetime bound;
malformed batches are refused before the ledger (nothing stored); the estimates are close to truth.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dpsense as dp
from dpsense.core.errors import InvalidData, RequestIdConflict, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.device import KrrClient, KrrScheme, PrefixScheme, RapporClient, RapporScheme, scheme_from_json
from dpsense.device.testing import deterministic_entropy
from dpsense.mechanisms.local_collection import simulate_reports

PAGES = [f"page{i}" for i in range(8)]


@pytest.fixture
def steward(tmp_path: Path) -> Iterator[dp.Session]:
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="steward", role="steward") as session:
        session.add_analyst("alice")
        yield session


def krr_scheme() -> dict[str, Any]:
    return {"scheme": "krr", "version": 1, "dictionary": PAGES, "epsilon": "2"}


def true_values(n: int) -> list[str]:
    """Page i is visited by a share proportional to 8 - i."""
    weights = [8 - i for i in range(8)]
    out: list[str] = []
    for i, w in enumerate(weights):
        out += [PAGES[i]] * (n * w // sum(weights))
    return out


def krr_batch(values: list[str], *, start: int = 0) -> list[dict[str, Any]]:
    scheme = scheme_from_json(krr_scheme())
    assert isinstance(scheme, KrrScheme)
    client = KrrClient(scheme)
    return [{"client_id": f"u{start + i}", "report": client.report(v)} for i, v in enumerate(values)]


def test_estimates_are_zero_cost_releases_in_history_and_stored_once(steward: dp.Session, tmp_path: Path) -> None:
    info = steward.register_collection("pages", scheme=krr_scheme(), max_reports_per_client=2)
    assert info.max_reports_per_client == 2 and info.dictionary is None
    values = true_values(4000)
    with deterministic_entropy(7):
        reports = krr_batch(values)
    half = len(reports) // 2
    first = steward.ingest_reports("pages", reports[:half], batch_id="b1", submitter="relay")
    second = steward.ingest_reports("pages", reports[half:], batch_id="b2", submitter="relay")
    assert first.accepted + second.accepted == len(reports) and not first.refused
    with dp.Session.open(f"sqlite:///{tmp_path / 'ledger.db'}", analyst="alice") as alice:
        release = alice.estimate_frequencies("pages", candidates=PAGES)
        assert release.charged == PureDP(0) and not release.cached
        table = release.table
        assert list(table.columns[:3]) == ["value", "estimate", "std_error"]
        truth = Counter(values)
        for row in table.itertuples():
            # the std error is the scheme's own; 6 of them is a 2e-9 two-sided miss for a normal estimate
            assert abs(row.estimate - truth[row.value]) <= 6 * row.std_error, row
        text = release.explain()
        assert "no central budget" in text and "ε = 2 per report" in text and "2 report(s)" in text
        again = alice.estimate_frequencies("pages", candidates=PAGES)
        assert again.cached and again.record.release_id == release.record.release_id
        assert [r.release_id for r in alice.history("pages")] == [release.record.release_id]
        with deterministic_entropy(8):
            more = krr_batch(["page0"] * 10, start=10**6)
        steward.ingest_reports("pages", more, batch_id="b3", submitter="relay")
        newer = alice.estimate_frequencies("pages", candidates=PAGES)
        assert not newer.cached and newer.record.release_id != release.record.release_id
        assert "3 batch(es)" in newer.explain()
    assert [c.loss for c in steward.ledger.charges("pages")] == [PureDP(0), PureDP(0)]
    assert steward.verify_log().ok


def test_a_client_past_its_budget_is_refused_and_memoized_repeats_stay_at_the_lifetime_bound(
    steward: dp.Session,
) -> None:
    scheme = RapporScheme(num_bits=32, num_hashes=2, num_cohorts=4, epsilon_lifetime="1.0986", epsilon_irr="2")
    steward.register_collection("homepage", scheme=scheme.to_json(), max_reports_per_client=3)
    memo: dict[str, str] = {}
    with deterministic_entropy(3):
        client = RapporClient(scheme, "device-1", memo)
        reports = [{"client_id": "device-1", "report": client.report("example.com")} for _ in range(4)]
        permanent = client.permanent_response("example.com")
    # the permanent response is drawn once and reused: every report randomizes the same PRR bits
    assert len(memo) == 1 and client.permanent_response("example.com") == permanent
    out = steward.ingest_reports("homepage", reports[:3], batch_id="b1")
    assert out.accepted == 3
    over = steward.ingest_reports("homepage", reports[3:], batch_id="b2")
    assert (over.accepted, [reason for _, reason in over.refused]) == (0, ["client_budget"])
    guarantee = scheme.guarantee()
    assert guarantee["epsilon_lifetime"] is not None  # the bound on all reports about one value
    assert float(guarantee["epsilon_per_report"]) < float(guarantee["epsilon_lifetime"])
    assert steward.collection("homepage").reports == 3


def test_bad_batches_and_questions_are_refused_before_the_ledger(steward: dp.Session) -> None:
    steward.register_collection("pages", scheme=krr_scheme(), max_reports_per_client=5)
    with deterministic_entropy(1):
        good = krr_batch(["page1"])
    hostile: list[Any] = [
        [],
        [{"client_id": "u1"}],
        [{"client_id": "", "report": good[0]["report"]}],
        [{"client_id": "u1", "report": {"index": 8}}],
        [{"client_id": "u1", "report": {"index": True}}],
        [{"client_id": "u1", "report": {"index": 1, "extra": 1}}],
        [{"client_id": "u1", "report": "index"}],
        [good[0], {"client_id": "u2", "report": {"bits": "ff"}}],
    ]
    for batch in hostile:
        with pytest.raises(InvalidData):
            steward.ingest_reports("pages", batch, batch_id="bad")
    assert steward.collection("pages").batches == 0  # nothing stored by any refusal
    steward.ingest_reports("pages", good, batch_id="b1")
    with pytest.raises(RequestIdConflict):
        steward.ingest_reports("pages", [{"client_id": "u1", "report": {"index": 2}}], batch_id="b1")
    for bad_scheme in (
        {"scheme": "krr"},
        {"scheme": "nope"},
        {**krr_scheme(), "epsilon": "-1"},
        {**krr_scheme(), "k": 3},
    ):
        with pytest.raises(UsageError):
            steward.register_collection("other", scheme=bad_scheme, max_reports_per_client=1)
    with pytest.raises(UsageError, match="candidates or top"):
        steward.estimate_frequencies("pages", candidates=PAGES, top=3)
    with pytest.raises(UsageError, match="distinct"):
        steward.estimate_frequencies("pages", candidates=["page1", "page1"])
    scheme = RapporScheme(num_bits=16, num_hashes=2, num_cohorts=2, epsilon_lifetime="2", epsilon_irr="2")
    steward.register_collection("sites", scheme=scheme.to_json(), max_reports_per_client=5)
    with pytest.raises(UsageError, match="no dictionary"):
        steward.estimate_frequencies("sites")
    with pytest.raises(dp.UsageError, match="only a steward"), dp.Session(steward.ledger, analyst="alice") as alice:
        alice.register_collection("x", scheme=krr_scheme(), max_reports_per_client=1)


def test_heavy_hitters_over_an_unknown_domain_through_the_session(steward: dp.Session) -> None:
    scheme = PrefixScheme(
        alphabet="abcdefghijklmnopqrstuvwxyz",
        max_length=6,
        segment_length=2,
        num_hashes=16,
        num_buckets=256,
        epsilon="4",
    )
    steward.register_collection("words", scheme=scheme.to_json(), max_reports_per_client=1)
    tail = ["grape", "hazel", "kiwi", "lemon", "mango", "nectar", "olive", "peach", "quince", "rasp"] * 40
    words = ["apple"] * 3000 + ["banana"] * 2000 + ["cherry"] * 1500 + ["damson"] * 300 + ["fig"] * 100 + tail
    with deterministic_entropy(2):
        reports = [{"client_id": f"d{i}", "report": r} for i, r in enumerate(simulate_reports(scheme, words))]
    for start in range(0, len(reports), 2000):
        steward.ingest_reports("words", reports[start : start + 2000], batch_id=f"b{start}")
    release = steward.estimate_frequencies("words", top=3)
    assert release.values["value"] == ["apple", "banana", "cherry"]
    assert all(release.values["significant"])
    for value, estimate, error in zip(
        release.values["value"], release.values["estimate"], release.values["std_error"], strict=True
    ):
        assert abs(estimate - words.count(value)) <= 6 * error
    with pytest.raises(UsageError, match="prefix scheme"):
        steward.register_collection("pages", scheme=krr_scheme(), max_reports_per_client=1)
        steward.estimate_frequencies("pages", top=3)
