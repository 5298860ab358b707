"""API tokens: the strict format, and the same verification work for known and unknown ids.

The timing test counts work (hashes, constant-time comparisons, statements, rows read) instead of
measuring time: a count does not flake on a loaded machine and shows exactly what differs.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from dpsense.ledger import Ledger
from dpsense.ledger import _service as service
from dpsense.ledger._service import TOKEN_LENGTH, TOKEN_PATTERN


def _ledger(url: str) -> Ledger:
    ledger = Ledger.open(url)
    ledger.add_analyst("alice")
    return ledger


def _variants(token: str) -> dict[str, str]:
    """Spellings of a real token that must all be refused like an unknown token."""
    prefix, token_id, secret = token.split("_", 2)
    last = secret[-1]
    # 43 base64 characters carry 258 bits for 256: the last character's low 2 bits are padding, so a
    # neighbouring character decodes to the same 32 bytes (a second spelling of the same secret).
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) ^ 1]
    same = base64.urlsafe_b64decode(secret + "=") == base64.urlsafe_b64decode(secret[:-1] + twin + "=")
    assert same  # the old lenient decoder accepted this twin as the same token
    return {
        "padding": token + "=",
        "double padding": token + "==",
        "trailing newline": token + "\n",
        "trailing space": token + " ",
        "leading space": " " + token,
        "inner space": f"{prefix}_{token_id}_ {secret[1:]}",
        "tab": token[:-1] + "\t",
        "one short": token[:-1],
        "one long": token + "A",
        "uppercase id": f"{prefix}_{token_id.upper()}_{secret}"
        if token_id.upper() != token_id
        else f"{prefix}_{'A' * 16}_{secret}",
        "standard base64 '+'": token[:-1] + "+",
        "standard base64 '/'": token[:-1] + "/",
        "non-ascii digit": f"{prefix}_{'٣' + token_id[1:]}_{secret}",
        "non-ascii letter": token[:-1] + "é",
        "non-canonical secret": f"{prefix}_{token_id}_{secret[:-1]}{twin}",
        "other prefix": f"DPS_{token_id}_{secret}",
        "no separator": f"{prefix}{token_id}_{secret}A",
        "null byte": token[:-1] + "\x00",
    }


def test_a_created_token_has_the_exact_format(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        for _ in range(50):
            token = ledger.create_token("alice")
            assert len(token) == TOKEN_LENGTH == 64
            assert TOKEN_PATTERN.fullmatch(token) is not None
            assert ledger.verify_token(token) is not None


def test_every_other_spelling_is_refused_like_an_unknown_token(ledger_url: str) -> None:
    with _ledger(ledger_url) as ledger:
        token = ledger.create_token("alice")
        assert ledger.verify_token(token) is not None
        unknown = f"dps_{'0' * 16}_{token.split('_', 2)[2]}"
        assert ledger.verify_token(unknown) is None
        for name, bad in _variants(token).items():
            assert bad != token
            assert ledger.verify_token(bad) is None, name
        assert ledger.verify_token(token) is not None  # nothing above changed the real token


def test_a_non_string_token_is_refused() -> None:
    assert service._parse(None) is None
    assert service._parse(b"dps_" + b"0" * 60) is None
    assert service._parse("x" * 10_000_000) is None  # no pattern runs on a long input


@dataclass
class _Counts:
    digests: int = 0
    compares: int = 0
    statements: list[str] = field(default_factory=list)
    rows: int = 0


@dataclass
class _Select:
    """``Backend.select`` seen as a transaction of one statement (for ``_counting``)."""

    select: Any

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        result: list[Any] = self.select(sql, params)
        return result


@contextmanager
def _counting(monkeypatch: pytest.MonkeyPatch, ledger: Ledger) -> Iterator[_Counts]:
    counts = _Counts()
    digest, compare = service._digest, hmac.compare_digest
    backend = ledger._context.backend
    read, select = backend.read, backend.select

    def counted_digest(salt: bytes, secret: bytes) -> str:
        counts.digests += 1
        return digest(salt, secret)

    def counted_compare(a: Any, b: Any) -> bool:
        counts.compares += 1
        return compare(a, b)

    class _Tx:
        def __init__(self, tx: Any) -> None:
            self._tx = tx

        def execute(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
            counts.statements.append(sql)
            result: list[Any] = self._tx.execute(sql, params)
            counts.rows += len(result)
            return result

    @contextmanager
    def counted_read() -> Iterator[_Tx]:
        with read() as tx:
            yield _Tx(tx)

    def counted_select(sql: str, params: Sequence[object] = ()) -> list[Any]:
        return _Tx(_Select(select)).execute(sql, params)

    monkeypatch.setattr(service, "_digest", counted_digest)
    monkeypatch.setattr(hmac, "compare_digest", counted_compare)
    monkeypatch.setattr(backend, "read", counted_read)
    monkeypatch.setattr(backend, "select", counted_select)
    try:
        yield counts
    finally:
        monkeypatch.undo()


def test_known_and_unknown_ids_do_the_same_work(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _ledger(ledger_url) as ledger:
        ledger.create_token("alice")  # an older token: the row an unknown id is compared against
        token = ledger.create_token("alice")
        revoked = ledger.create_token("alice")
        ledger.revoke_token(revoked.split("_", 2)[1])
        prefix, token_id, secret = token.split("_", 2)
        flipped = ("B" if secret[0] != "B" else "C") + secret[1:]
        cases = {
            "known, right secret": (token, True),
            "known, wrong secret": (f"{prefix}_{token_id}_{flipped}", False),
            "known, revoked": (revoked, False),
            "unknown id, a real secret": (f"{prefix}_{'0' * 16}_{secret}", False),
            "unknown id, another secret": (f"{prefix}_{'f' * 16}_{flipped}", False),
        }
        seen: dict[str, tuple[int, int, tuple[str, ...], int]] = {}
        for name, (candidate, ok) in cases.items():
            with _counting(monkeypatch, ledger) as counts:
                assert (ledger.verify_token(candidate) is not None) is ok, name
            seen[name] = (counts.digests, counts.compares, tuple(counts.statements), counts.rows)
        assert len(set(seen.values())) == 1, seen
        digests, compares, statements, rows = next(iter(seen.values()))
        assert (digests, compares, len(statements), rows) == (1, 2, 1, 1)

        with _counting(monkeypatch, ledger) as counts:  # malformed: no lookup (the format is public), one hash
            assert ledger.verify_token(token + "=") is None
        assert (counts.digests, counts.compares, counts.statements) == (1, 2, [])


def test_an_unknown_id_on_an_empty_table_still_hashes_once(ledger_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _ledger(ledger_url) as ledger, _counting(monkeypatch, ledger) as counts:
        assert ledger.verify_token(f"dps_{'0' * 16}_{'A' * 43}") is None
    assert (counts.digests, counts.compares, len(counts.statements)) == (1, 2, 1)


def test_an_unknown_id_never_borrows_the_row_it_is_compared_against(ledger_url: str) -> None:
    """The oldest token's row is read for an unknown id; its secret under another id must not verify."""
    with _ledger(ledger_url) as ledger:
        oldest = ledger.create_token("alice")
        _, token_id, secret = oldest.split("_", 2)
        other_id = format(int(token_id, 16) ^ 1, "016x")
        assert ledger.verify_token(f"dps_{other_id}_{secret}") is None
        assert ledger.verify_token(oldest) is not None
