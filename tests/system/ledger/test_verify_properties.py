"""Hypothesis: any lifecycle the ledger accepts verifies (no false alarm from the replay), on both backends.

Random sequences of reserves (plain, in a partition group under add/remove or replace, with a family),
commits, refunds, failures after data access, retries, stale-reservation resolution and sub-budgets
created midway (analyst, family, period) are run through the ledger's API; ``verify`` must then report
the ledger intact, and a one-row edit of any spend must be caught. This attacks the verifier's
recomputation of spends (partition groups, refunds, retries of refunded charges, late sub-budgets),
which must agree with the ledger's incremental arithmetic exactly.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsense.core import ApproxDP, PureDP
from dpsense.core.errors import BudgetExhausted, LedgerStateError
from dpsense.ledger import Ledger, PartitionSpec, ReleaseRecord, Reservation, Scope
from tests.system.ledger.test_tamper import tamper
from tests.unit.ledger.support import rows

RECORD = ReleaseRecord({"v": 1}, "laplace", "1", {}, "person_id", "add_remove", "0.1.0")
PARTS = ("a", "b", "c")
_names = itertools.count()

OPS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "reserve_part", "commit", "refund", "fail_after", "retry", "stale", "sub_budget"]),
        st.integers(0, 4),
        st.sampled_from(["0.1", "0.25", "1", "0.01"]),
        st.sampled_from(PARTS),
    ),
    min_size=1,
    max_size=20,
)


@pytest.fixture(scope="module")
def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

    if request.param == "sqlite":
        url, cleanup = f"sqlite:///{tmp_path_factory.mktemp('verify') / 'ledger.db'}", None
    else:
        server = request.getfixturevalue("pg_server")
        schema, url = fresh_pg_schema(server)
        cleanup = (server, schema)
    ledger = Ledger.open(url)
    yield ledger, url
    ledger.close()
    if cleanup:
        drop_pg_schema(*cleanup)


@pytest.mark.parametrize("shared", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("adjacency", ["add_remove", "replace"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_every_accepted_lifecycle_verifies(
    shared: tuple[Ledger, str], adjacency: str, ops: list[tuple[str, int, str, str]]
) -> None:
    ledger, url = shared
    n = next(_names)
    dataset, analyst = f"ds{n}", f"an{n}"
    ledger.add_analyst(analyst)
    ledger.register_dataset(dataset, budget=ApproxDP(3, Fraction(1, 10**6)))
    held: dict[int, Reservation] = {}
    subs = iter([Scope.analyst(analyst), Scope.family("f"), Scope.period(0, 4_000_000_000)])
    for op, req, amount, part in ops:
        rid = f"r{req}"
        partition = PartitionSpec("region", PARTS, part, adjacency) if req % 2 else None
        try:
            if op in ("reserve", "reserve_part", "retry"):
                held[req] = ledger.reserve(
                    dataset=dataset,
                    analyst=analyst,
                    request_id=rid,
                    loss=PureDP(amount) if req % 3 else ApproxDP(amount, Fraction(1, 10**8)),
                    family="f" if req % 2 == 0 else None,
                    partition=partition if op != "reserve" or req % 2 else None,
                )
            elif op == "sub_budget":
                scope = next(subs, None)
                if scope is not None:
                    ledger.set_budget(dataset, scope, ApproxDP(2, Fraction(1, 10**6)))
            elif op == "stale":
                ledger.resolve_stale(older_than_s=-1.0)
            elif req in held:
                if op == "commit":
                    ledger.commit(held[req], RECORD)
                else:
                    ledger.fail(held[req], data_accessed=op == "fail_after")
        except (BudgetExhausted, LedgerStateError):
            continue  # refused: nothing written
        except Exception as exc:  # a request id reused with another partition or loss: refused too
            assert "request id" in str(exc) or "partition" in str(exc), exc
    report = ledger.verify()
    assert report.ok, (report.reason, report.problems[:3])
    spent = ledger.budget(dataset).spent
    assert isinstance(spent, ApproxDP)
    if spent.epsilon > 0:  # a forged spend is caught (the check has power on this very ledger), then restored
        where = f"scope_kind = 'total' AND dataset_id = (SELECT id FROM datasets WHERE name = '{dataset}')"
        (original,) = rows(url, f"SELECT spent_a FROM budgets WHERE {where}")[0]
        tamper(url, f"UPDATE budgets SET spent_a = '0/1' WHERE {where}")
        assert not ledger.verify().ok
        tamper(url, f"UPDATE budgets SET spent_a = '{original}' WHERE {where}")
        assert ledger.verify().ok
