"""The corpus: rewrites share one canonical form, near misses never do (no data involved)."""

from __future__ import annotations

import pytest

from dpsense.core.errors import UnknownDataset
from dpsense.query import Schema
from dpsense.query.sql import parse_sql
from tests.unit.query.sql.corpus import EQUIVALENT, NEAR_MISSES, SCHEMA


def schema_for(name: str, quoted: bool) -> tuple[str, Schema]:
    known = {"events", "events2"}
    resolved = name if quoted else name.lower()
    if resolved not in known:
        raise UnknownDataset(name)
    return resolved, SCHEMA


def fingerprint(text: str) -> str:
    parsed = parse_sql(text, schema_for=schema_for)
    return parsed.query.build(SCHEMA).fingerprint()


def test_the_corpus_is_large_enough() -> None:
    assert len(EQUIVALENT) >= 40 and len(NEAR_MISSES) >= 40
    assert len(set(EQUIVALENT)) == len(EQUIVALENT) and len(set(NEAR_MISSES)) == len(NEAR_MISSES)


@pytest.mark.parametrize(("first", "second"), EQUIVALENT)
def test_rewrites_share_one_canonical_form(first: str, second: str) -> None:
    assert fingerprint(first) == fingerprint(second)


@pytest.mark.parametrize(("first", "second"), NEAR_MISSES)
def test_near_misses_differ(first: str, second: str) -> None:
    assert fingerprint(first) != fingerprint(second)


def test_no_two_near_miss_queries_collide_with_any_other_meaning() -> None:
    """Across the whole corpus, equal fingerprints happen only inside an equivalence class."""
    classes: dict[str, set[str]] = {}
    for a, b in EQUIVALENT:
        classes.setdefault(fingerprint(a), set()).update({a, b})
    for a, b in NEAR_MISSES:
        fa, fb = fingerprint(a), fingerprint(b)
        assert fa != fb
        for text, f in ((a, fa), (b, fb)):
            classes.setdefault(f, set()).add(text)
    # every class's members are pairwise equivalent by construction: no class holds both sides of a near miss
    for a, b in NEAR_MISSES:
        assert not any(a in members and b in members for members in classes.values())
