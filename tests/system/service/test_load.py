"""The load test, bounded: benchmarks/service_load.py as a second process (8 analysts x 10 s) on loopback.

The total budget is set to bind during the run, so releases race for its last ε: afterwards no scope
may be overspent and every scope's spend must equal the exact sum of its charges.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.ledger.support import drop_pg_schema, fresh_pg_schema

ROOT = Path(__file__).resolve().parents[3]
TARGET = re.compile(r"^TARGET (\S+) (\S+) (<=|>=|<|>) (\S+)$", re.M)  # the ops DEVELOPERS.md allows


def test_bounded_load_leaves_no_overspend(pg_server: str, tmp_path: Path) -> None:
    schema, url = fresh_pg_schema(pg_server)
    figures_path = tmp_path / "figures.json"
    command = [
        sys.executable, str(ROOT / "benchmarks" / "service_load.py"), "--clients", "8", "--duration", "10",
        "--ledger", url, "--total-epsilon", "2", "--analyst-epsilon", "0.6", "--persons", "2000",
        "--json", str(figures_path),
    ]  # fmt: skip
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    finally:
        drop_pg_schema(pg_server, schema)
    assert run.returncode == 0, run.stdout + run.stderr
    figures = json.loads(figures_path.read_text())
    assert figures["overspend_epsilon"] == 0 and figures["ledger_problems"] == []
    assert figures["server_errors"] == 0 and figures["retry_mismatches"] == 0
    assert figures["releases_charged"] > 20
    assert figures["statuses"].get("409", 0) > 0  # the budget ran out while clients were still asking
    targets = {m.group(1): m.group(2) for m in TARGET.finditer(run.stdout)}
    assert {"releases_per_s", "p99_latency_ms", "overspend_epsilon", "server_errors"} <= set(targets)
    assert float(targets["overspend_epsilon"]) == 0
