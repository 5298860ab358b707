"""Hypothesis: random sequences of reserve / commit / fail / retry keep the ledger's invariants.

After every sequence: each charge is in the state a simple model predicts, spend equals the
accounting mode's exact sum over charges that count (reserved, committed, failed, abandoned),
spend never exceeds the cap, and releases correspond one-to-one to committed charges.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsense.core import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpsense.core.errors import BudgetExhausted, LedgerStateError
from dpsense.ledger import ChargeState, Ledger, ReleaseRecord, Reservation

RECORD = ReleaseRecord([1.5, 2.5], "gaussian", "1", {"sigma": "public"}, "person_id", "add_remove", "0.1.0")
_names = itertools.count()

OPS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "commit", "fail_before", "fail_after", "retry"]),
        st.integers(0, 5),
        st.sampled_from(["0.1", "0.25", "0.3", "1", "0.01"]),
    ),
    min_size=1,
    max_size=25,
)


def _loss(mode: str, amount: str, request: int) -> PrivacyLoss:
    if mode == "zcdp":
        return PureDP(amount) if request % 2 else ZCDP(amount)
    return ApproxDP(amount, Fraction(request, 10**9)) if request % 2 else PureDP(amount)


def _in_mode(loss: PrivacyLoss, mode: str) -> tuple[Fraction, Fraction]:
    if mode == "zcdp":
        z = loss.as_zcdp() if isinstance(loss, PureDP) else loss
        assert isinstance(z, ZCDP)
        return z.rho, Fraction(0)
    a = loss.as_approx()
    assert isinstance(a, ApproxDP)
    return a.epsilon, a.delta


@pytest.fixture(scope="module")
def shared_ledger(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

    backend = request.param
    if backend == "sqlite":
        url, cleanup = f"sqlite:///{tmp_path_factory.mktemp('prop') / 'ledger.db'}", None
    else:
        server = request.getfixturevalue("pg_server")
        schema, url = fresh_pg_schema(server)
        cleanup = (server, schema)
    led = Ledger.open(url)
    yield led
    led.close()
    if cleanup:
        drop_pg_schema(*cleanup)


@pytest.mark.parametrize("shared_ledger", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("mode", ["basic", "zcdp"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_lifecycles_keep_the_invariants(
    shared_ledger: Ledger, mode: str, ops: list[tuple[str, int, str]]
) -> None:
    ledger = shared_ledger
    n = next(_names)
    dataset, analyst = f"ds{n}", f"an{n}"
    cap: PrivacyLoss = ZCDP(1) if mode == "zcdp" else ApproxDP(1, Fraction(5, 10**9))
    ledger.add_analyst(analyst)
    ledger.register_dataset(dataset, budget=cap)
    model: dict[int, ChargeState] = {}
    losses: dict[int, PrivacyLoss] = {}
    held: dict[int, Reservation] = {}
    for op, req, amount in ops:
        rid = f"r{req}"
        loss = losses.setdefault(req, _loss(mode, amount, req))
        if op in ("reserve", "retry"):
            try:
                res = ledger.reserve(dataset=dataset, analyst=analyst, request_id=rid, loss=loss)
            except BudgetExhausted:
                assert model.get(req) in (None, ChargeState.REFUNDED)
                continue
            except LedgerStateError:
                assert model.get(req) == ChargeState.FAILED
                continue
            if model.get(req) == ChargeState.COMMITTED:
                assert res.is_replay
            else:
                assert not res.is_replay
                model[req] = ChargeState.RESERVED
            held[req] = res
            continue
        if req not in held:
            continue
        res = held[req]
        state = model[req]
        try:
            if op == "commit":
                ledger.commit(res, RECORD)
                model[req] = ChargeState.COMMITTED
            else:
                ledger.fail(res, data_accessed=op == "fail_after")
                model[req] = ChargeState.FAILED if op == "fail_after" else ChargeState.REFUNDED
        except LedgerStateError:
            assert state in (ChargeState.COMMITTED, ChargeState.FAILED, ChargeState.REFUNDED) or res.resumed
        else:
            assert op == "commit" or not res.is_replay
        if op == "commit" and state == ChargeState.COMMITTED:
            model[req] = state

    charges = {int(c.request_id[1:]): c for c in ledger.charges(dataset)}
    assert {k: c.state for k, c in charges.items()} == model
    counted = [c for c in charges.values() if c.state != ChargeState.REFUNDED]
    total = (
        sum((_in_mode(c.loss, mode)[0] for c in counted), Fraction(0)),
        sum((_in_mode(c.loss, mode)[1] for c in counted), Fraction(0)),
    )
    status = ledger.budget(dataset)
    assert _in_mode(status.spent, mode) == total
    assert status.spent <= status.cap
    committed = {c.charge_id for c in charges.values() if c.state == ChargeState.COMMITTED}
    assert {r.charge_id for r in ledger.releases(dataset)} == committed
