"""The ledger's local-DP collections: registration, per-client report budgets, idempotent batches,
zero-cost estimates, and ``verify`` over the new tables (both backends).

The summaries here are plain counters (the ledger stores whatever additive JSON the caller computes
from the accepted reports); the device schemes and their decoding are tested in tests/unit/device and
tests/unit/mechanisms.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from dpsense.core.errors import RequestIdConflict, UnknownDataset, UsageError
from dpsense.core.privacy_loss import PureDP
from dpsense.ledger import CLIENT_BUDGET, Ledger, ReleaseRecord
from tests.system.ledger.test_tamper import tamper

SCHEME = {"scheme": "krr", "k": 3, "epsilon": "1"}
RECORD = ReleaseRecord(
    {"columns": ["value"], "rows": [["a"]]},
    "local-krr-decoding",
    "1",
    {"analyst": "alice"},
    "client",
    "replace",
    "0.1.0",
)


def _count(accepted: Sequence[int]) -> dict[str, Any]:
    return {"n": len(accepted)}


def _ledger(url: str, *, cap: int = 3) -> Ledger:
    ledger = Ledger.open(url)
    ledger.add_analyst("alice")
    ledger.register_collection("pages", scheme=SCHEME, dictionary=["a", "b", "c"], max_reports_per_client=cap)
    return ledger


def test_registration_is_idempotent_and_a_taken_name_is_refused(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        ledger.register_collection("pages", scheme=SCHEME, dictionary=["a", "b", "c"], max_reports_per_client=3)
        with pytest.raises(UsageError, match="another declaration"):
            ledger.register_collection("pages", scheme=SCHEME, dictionary=None, max_reports_per_client=3)
        ledger.register_dataset("events", budget=PureDP(1))
        with pytest.raises(UsageError, match="taken by a dataset"):
            ledger.register_collection("events", scheme=SCHEME, dictionary=None, max_reports_per_client=3)
        for bad in (0, -1, True, 1.5, 10**7):
            with pytest.raises(UsageError, match="max_reports_per_client"):
                ledger.register_collection("x", scheme=SCHEME, dictionary=None, max_reports_per_client=bad)  # type: ignore[arg-type]
        assert ledger.collection_names() == ["pages"]
        assert ledger.dataset_names() == ["events"]  # collections are not datasets in listings
        info = ledger.collection("pages")
        assert (info.scheme, info.dictionary, info.max_reports_per_client) == (SCHEME, ["a", "b", "c"], 3)
        with pytest.raises(UnknownDataset):
            ledger.collection("nope")
        assert ledger.verify().ok


def test_a_client_past_its_report_budget_is_refused_and_others_are_not(ledger_url: str) -> None:
    with _ledger(ledger_url, cap=3) as ledger:
        first = ledger.ingest(
            "pages", submitter="relay", batch_id="b1", body_sha256="1", clients=["u1", "u1", "u2"], summarize=_count
        )
        assert (first.accepted, first.refused, first.replayed) == (3, (), False)
        # u1 has 2 of 3: two more pass the budget (refused together), one more for u2 and a new u3 pass
        second = ledger.ingest(
            "pages",
            submitter="relay",
            batch_id="b2",
            body_sha256="2",
            clients=["u1", "u2", "u1", "u3"],
            summarize=_count,
        )
        assert second.accepted == 2
        assert second.refused == ((0, CLIENT_BUDGET), (2, CLIENT_BUDGET))
        third = ledger.ingest(
            "pages", submitter="relay", batch_id="b3", body_sha256="3", clients=["u1"], summarize=_count
        )
        assert third.accepted == 1  # u1 at 3 of 3 now
        over = ledger.ingest(
            "pages", submitter="relay", batch_id="b4", body_sha256="4", clients=["u1"], summarize=_count
        )
        assert (over.accepted, over.refused) == (0, ((0, CLIENT_BUDGET),))
        # a client with more reports in one batch than its whole budget is refused without a row
        big = ledger.ingest(
            "pages", submitter="relay", batch_id="b5", body_sha256="5", clients=["u9"] * 4, summarize=_count
        )
        assert big.accepted == 0
        info = ledger.collection("pages")
        assert (info.reports, info.clients, info.batches) == (3 + 2 + 1, 3, 5)
        state, summaries = ledger.collection_summaries("pages")
        assert state == (5, max(o.batch for o in (first, second, third, over, big)))
        assert [s["n"] for s in summaries] == [3, 2, 1, 0, 0]
        assert ledger.verify().ok


def test_a_batch_is_idempotent_per_submitter_and_batch_id(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        calls: list[int] = []

        def summarize(accepted: Sequence[int]) -> dict[str, Any]:
            calls.append(len(accepted))
            return {"n": len(accepted)}

        done = ledger.ingest(
            "pages", submitter="relay", batch_id="b1", body_sha256="x", clients=["u1"], summarize=summarize
        )
        again = ledger.ingest(
            "pages", submitter="relay", batch_id="b1", body_sha256="x", clients=["u1"], summarize=summarize
        )
        assert again.replayed and (again.batch, again.accepted) == (done.batch, done.accepted)
        assert calls == [1]  # the retry computed and stored nothing
        with pytest.raises(RequestIdConflict, match="batch id is reused"):
            ledger.ingest(
                "pages", submitter="relay", batch_id="b1", body_sha256="y", clients=["u1"], summarize=summarize
            )
        other = ledger.ingest(
            "pages", submitter="relay2", batch_id="b1", body_sha256="x", clients=["u1"], summarize=summarize
        )
        assert not other.replayed  # batch ids are scoped to their submitter
        assert ledger.collection("pages").reports == 2
        with pytest.raises(UnknownDataset):
            ledger.ingest("nope", submitter="r", batch_id="b", body_sha256="x", clients=["u"], summarize=summarize)


def test_concurrent_batches_never_take_a_client_past_its_budget(ledger_url: str) -> None:
    cap, threads, per_thread = 5, 6, 4
    with _ledger(ledger_url, cap=cap):
        pass
    accepted: list[int] = []
    errors: list[BaseException] = []

    def run(t: int) -> None:
        try:
            with Ledger.open(ledger_url) as own:
                for b in range(per_thread):
                    out = own.ingest(
                        "pages",
                        submitter=f"relay{t}",
                        batch_id=f"b{b}",
                        body_sha256="x",
                        clients=["shared", f"own{t}"],
                        summarize=_count,
                    )
                    accepted.append(out.accepted)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    with Ledger.open(ledger_url) as ledger:
        info = ledger.collection("pages")
        # "shared" got exactly its budget; each own client got all of its reports
        assert info.reports == cap + threads * per_thread == sum(accepted)
        assert ledger.verify().ok


def test_an_estimate_is_a_zero_cost_release_stored_once_per_key(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        entries = ledger.verify().entries
        assert ledger.store_estimate("pages", analyst="alice", request_id="r0", cache_key="k1", record=None) is None
        assert ledger.verify().entries == entries  # asking without a record wrote nothing
        stored, new = ledger.store_estimate("pages", analyst="alice", request_id="r1", cache_key="k1", record=RECORD)
        assert new and stored.dataset == "pages" and stored.value == RECORD.value
        asked = ledger.store_estimate("pages", analyst="alice", request_id="r3", cache_key="k1", record=None)
        assert asked is not None and asked[0].release_id == stored.release_id and not asked[1]
        hit, new_hit = ledger.store_estimate("pages", analyst="alice", request_id="r2", cache_key="k1", record=RECORD)
        assert not new_hit and hit.release_id == stored.release_id
        replay, new_replay = ledger.store_estimate(
            "pages", analyst="alice", request_id="r1", cache_key="k1", record=RECORD
        )
        assert not new_replay and replay.release_id == stored.release_id
        with pytest.raises(RequestIdConflict):
            ledger.store_estimate("pages", analyst="alice", request_id="r1", cache_key="k2", record=RECORD)
        charges = ledger.charges("pages")
        assert [c.loss for c in charges] == [PureDP(0)]
        assert [r.release_id for r in ledger.releases("pages")] == [stored.release_id]
        assert ledger.cache_hits() == {stored.release_id: 2}
        assert ledger.verify().ok


TAMPERS = {
    "a client's count lowered": "UPDATE collection_clients SET reports = reports - 1 WHERE client_id = 'u1'",
    "a client's row deleted": "DELETE FROM collection_clients WHERE client_id = 'u2'",
    "a summary edited": "UPDATE collection_batches SET summary = '{\"n\":99}'",
    "an outcome edited": 'UPDATE collection_batches SET outcome = \'{"clients":{},"refused":[]}\'',
    "a batch deleted": "DELETE FROM collection_batches WHERE batch_id = 'b2'",
    "a budget raised": "UPDATE collections SET max_reports_per_client = 1000",
    "a scheme edited": 'UPDATE collections SET scheme = \'{"scheme":"krr","k":3,"epsilon":"9"}\'',
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_verify_catches_every_edit_of_the_collection_tables(ledger_url: str, case: str) -> None:
    with _ledger(ledger_url) as ledger:
        ledger.ingest(
            "pages", submitter="relay", batch_id="b1", body_sha256="1", clients=["u1", "u2"], summarize=_count
        )
        ledger.ingest("pages", submitter="relay", batch_id="b2", body_sha256="2", clients=["u1"], summarize=_count)
        assert ledger.verify().ok
    tamper(ledger_url, TAMPERS[case])
    with Ledger.open(ledger_url) as ledger:
        report = ledger.verify()
        assert not report.ok, case
