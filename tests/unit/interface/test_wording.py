"""Fixes in the words of the interface (issue 17, item 8): no Python spelling reaches a CLI or HTTP user.

A user's report: "Fixes written for Python in CLI and HTTP errors (`Query(...).max_groups_per_unit(k)`
where the CLI flag is `--max-groups`; 'register it with register_dataset' to an HTTP analyst)".
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dpsense.core.errors import RegistrationConflict, UnknownDataset
from dpsense.interface.wording import PHRASES, for_interface

SRC = Path(__file__).resolve().parents[3] / "src" / "dpsense"
#: Python spellings a fix may contain; each must be rewritten by a PHRASES entry for both interfaces.
PYTHON_SPELLINGS = re.compile(
    r"Query\(|register_dataset|amend_dataset|set_budget|policies=\{|snapshot='|PrivacyPolicy\("
)


def _fix_texts() -> list[str]:
    """The fix (third argument) of every ``raise SomeError(rule, value, fix)`` in the package, as written.

    Adjacent literals are one constant in the syntax tree; an f-string keeps its literal parts.
    """
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and len(node.exc.args) >= 3):
                continue
            fix = node.exc.args[2]
            if isinstance(fix, ast.Constant) and isinstance(fix.value, str):
                found.append(fix.value)
            elif isinstance(fix, ast.JoinedStr):
                found.append("".join(v.value for v in fix.values if isinstance(v, ast.Constant)))
    return found


@pytest.mark.parametrize("interface", ["cli", "http"])
def test_the_known_refusals_read_in_the_interfaces_words(interface: str) -> None:
    grouped = (
        "declare it with Query(...).max_groups_per_unit(k), or register the dataset with "
        "max_groups_per_unit={column: k}"
    )
    out = for_interface(grouped, interface)  # type: ignore[arg-type]
    assert "Query(" not in out and ("--max-groups" in out if interface == "cli" else '"max_groups_per_unit"' in out)
    unknown = for_interface(str(UnknownDataset("events")), interface)  # type: ignore[arg-type]
    assert "register_dataset" not in unknown
    conflict = for_interface(str(RegistrationConflict("events", "v1", ["x"])), interface)  # type: ignore[arg-type]
    assert "Session.amend_dataset" not in conflict
    assert ("dpsense dataset amend" in conflict) == (interface == "cli")
    policy = for_interface("declare policies={'age': 'drop'} to drop those rows", interface)  # type: ignore[arg-type]
    assert policy == (
        "declare --policy age=drop to drop those rows" if interface == "cli"
        else 'declare "policies": {"age": "drop"} to drop those rows'
    )  # fmt: skip


def test_every_python_spelling_in_a_fix_has_its_interface_wording() -> None:
    """A new fix that spells a Python API fails here until PHRASES words it for the CLI and HTTP."""
    texts = _fix_texts()
    assert texts, "the scan found no fix texts: the pattern is broken"
    for interface in ("cli", "http"):
        left = [t for t in texts if PYTHON_SPELLINGS.search(for_interface(t, interface))]  # type: ignore[arg-type]
        assert left == [], (interface, left)
    assert len({python for python, _, _ in PHRASES}) == len(PHRASES)


def test_a_hostile_literal_quoted_in_a_message_costs_linear_time() -> None:
    """A review's finding: an unbounded pattern took seconds on an analyst's 20 KB literal (measured in ops)."""
    import re as _re

    for python, _, _ in PHRASES:
        # no pattern may hold an unbounded repetition (*, + or {n,}) of a character class: bounded runs only
        assert not _re.search(r"\][*+]|\]\{\d+,\}", python), python
    hostile = "WHERE region = '" + "policies={" * 2_000 + "'"
    assert for_interface(hostile, "http") == hostile  # nothing to rewrite, and it returns
