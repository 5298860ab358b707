"""Fixes in the words of the interface the user is in (issue 17, item 8).

The library states each refusal's fix in Python (``Query(...).max_groups_per_unit(k)``,
``register_dataset(..., snapshot=...)``): the words of the Python API, where most refusals are
raised. A CLI user has flags and a release spec, an HTTP analyst has JSON fields and a steward to
ask. ``for_interface`` rewrites the Python phrases of a message for ``"cli"`` or ``"http"``; each
phrase has one entry here, so a new Python phrase in a fix needs its two translations in one place
(``tests/unit/interface/test_wording.py`` checks every phrase the package raises is covered).
"""

from __future__ import annotations

import re
from typing import Literal

Interface = Literal["cli", "http"]

#: (Python phrase as a regular expression, its CLI wording, its HTTP wording); ``\\1`` refers to groups.
PHRASES: tuple[tuple[str, str, str], ...] = (
    (
        r"declare it with Query\(\.\.\.\)\.max_groups_per_unit\(k\), or register the dataset with "
        r"max_groups_per_unit=\{column: k\}",
        "declare it in the release spec (max_groups_per_unit: K), or have the steward declare it for the "
        "column (dpsense dataset amend NAME --max-groups COLUMN=K)",
        'declare it in the request ("max_groups_per_unit": K), or ask the data steward to declare it for the column',
    ),
    (
        r"register_dataset\(\.\.\., snapshot='<new name>'\)",
        "dpsense dataset add NAME ... --snapshot NEW",
        "ask the data steward to register it as a new snapshot",
    ),
    (
        r"register it with register_dataset",
        "register it with dpsense dataset add (steward)",
        "ask the data steward to register it",
    ),
    (
        r"\(Session\.amend_dataset; in the CLI: dpsense dataset amend\)",
        "(dpsense dataset amend)",
        "(POST /v1/steward/amendments)",
    ),
    (r"with set_budget", "with dpsense set-budget", "with PUT /v1/steward/budgets"),
    (r"policies=\{'?([^':{}]{0,200})'?: '?(\w{1,20}|\.\.\.)'?\}", r"--policy \1=\2", r'"policies": {"\1": "\2"}'),
    (
        r"pass Query\('([^']{0,200})'\)",
        r"name the dataset in the spec (dataset: \1)",
        r'name the dataset ("dataset": "\1")',
    ),
    (r"snapshot='([^']{1,200})'", r"--snapshot \1", r'"snapshot": "\1"'),
    (r"pass source= \(the same data\) to amend_dataset", "pass --source PATH", 'pass "source"'),
    (r"pass policy=PrivacyPolicy\(\.\.\.\)", "pass --privacy-policy FILE.yaml", 'pass "policy"'),
)
_COMPILED = tuple((re.compile(python), cli, http) for python, cli, http in PHRASES)


def for_interface(text: str, interface: Interface) -> str:
    """``text`` with every Python phrase of ``PHRASES`` in the words of ``interface``.

    Every pattern is bounded (no unbounded repetition next to another), so the cost is linear in
    the text even for an analyst's hostile literal quoted in a message.
    """
    for pattern, cli, http in _COMPILED:
        text = pattern.sub(cli if interface == "cli" else http, text)
    return text
