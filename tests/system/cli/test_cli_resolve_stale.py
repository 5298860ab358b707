"""``dpsense resolve-stale``: the CLI resolves reservations left by crashed processes (issue 14, Build 5).

A reservation untouched for ``--older-than`` seconds becomes ABANDONED and stays charged; the command is
steward-only and refuses a non-positive or non-finite ``--older-than`` as a clean error.
"""

from __future__ import annotations

import json
import time

from dpsense.core.privacy_loss import PureDP
from dpsense.ledger import Ledger
from tests.system.cli.support import Cli


def _crash_left_reservation(cli: Cli) -> None:
    """A reservation whose process died before commit or fail (reserved, never touched again)."""
    with Ledger.open(cli.ledger) as ledger:
        ledger.reserve(dataset="events", analyst="alice", request_id="crashed-1", loss=PureDP(1))


def test_a_stale_reservation_is_marked_abandoned_and_stays_charged(registered: Cli) -> None:
    _crash_left_reservation(registered)
    spent = registered.budget()
    fresh = registered.steward("resolve-stale", "--older-than", "3600", "--json")
    assert fresh.exit_code == 0, fresh.stderr
    assert json.loads(fresh.stdout)["abandoned"] == 0  # younger than an hour: left alone
    time.sleep(0.05)
    result = registered.steward("resolve-stale", "--older-than", "0.01")
    assert result.exit_code == 0, result.stderr
    assert "1 stale reservation(s) marked abandoned" in result.stdout
    with Ledger.open(registered.ledger) as ledger:
        (charge,) = ledger.charges("events")
        assert charge.state.value == "abandoned"
        assert ledger.verify().ok
    assert registered.budget() == spent  # never refunded: the process may have read data


def test_only_the_steward_resolves_and_bad_durations_are_clean_errors(registered: Cli) -> None:
    refused = registered("resolve-stale")
    assert refused.exit_code != 0 and "--steward" in refused.stderr and "Traceback" not in refused.stderr
    for bad in ("0", "-5", "nan", "inf"):
        result = registered.steward("resolve-stale", "--older-than", bad)
        assert result.exit_code != 0, bad
        assert "--older-than" in result.stderr and "Traceback" not in result.stderr
