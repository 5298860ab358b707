"""Verify a ledger: the audit chain, an outside anchor, and every table recomputed from the chain.

The audit chain (``_audit``) is the ledger's history; every table that matters is a function of it.
``verify`` walks the chain, checks it against an *anchor* kept outside the database (a head the
steward recorded earlier: ``Anchor``), then replays the chain's entries into the state they imply
and compares that state with the tables, row by row:

* ``datasets`` (name, fingerprint), ``analysts``, ``secrets`` (names only), ``partitions``
  (declarations), ``dataset_profiles`` (snapshot, profile digest, fingerprint digest);
* ``budgets``: every scope's mode and cap, and its spend *recomputed* from the charges the chain
  records, with the ledger's own composition rules (exact sums, partition groups, PLD);
* ``charges``: every charge's dataset, analyst, request id, loss, family, event, partition, cache
  key, debit time and state (the state machine replayed from ``reserve``, ``commit``, ``fail`` and
  ``abandon`` entries);
* ``releases``: every stored release's charge, value digest and row digest (cache key, value,
  mechanism, versions, parameters, privacy unit, adjacency);
* ``api_tokens``: analyst, role, expiry, revocation and a digest of the stored credential.

A row missing from either side, an extra row, or any differing field is a *problem*; the report lists
them (at most ``MAX_PROBLEMS``). What the chain cannot prove by itself is that it was not rewritten
whole together with the tables: the anchor catches that, since the entry at the anchor's sequence
number must still carry the anchor's hash. Without an anchor, a rewritten history whose tables were
rewritten consistently is not detected (docs/ledger.md, "Verifying a ledger").

Entries written before these checks existed carry fewer fields (no cache key, debit time, row
digest, credential digest or scope fields): the checks that need a missing field are skipped for
that entry, and the rest still apply.
"""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import os
import re
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from dpsense.core.errors import DPSenseError, LedgerUnreadable, UsageError
from dpsense.ledger import _audit
from dpsense.ledger._amounts import Mode, Pair, canonical_json, in_mode, loss_from_json, parse_frac
from dpsense.ledger._audit import AuditReport
from dpsense.ledger._backends import Backend, Row, Tx, open_backend, sqlite_path
from dpsense.ledger._collections import compare_collections
from dpsense.ledger._events import composed_epsilon
from dpsense.ledger._partitions import composed
from dpsense.ledger._rows import release_row_digest
from dpsense.ledger._service import credential_digest
from dpsense.ledger._states import SPENT_STATES, ChargeState
from dpsense.ledger._types import Scope

#: The report lists at most this many table problems (the count of all of them is in the reason).
MAX_PROBLEMS = 50
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Anchor:
    """A chain head recorded outside the ledger: the entry ``seq`` must carry hash ``head``.

    ``seq`` None means "some entry carries ``head``" (a bare hash, as ``AuditReport.head_hash``).
    """

    head: str
    seq: int | None = None

    @classmethod
    def parse(cls, text: str) -> Anchor:
        """``SEQ:HASH`` or ``HASH`` (64 lowercase hex digits), as ``dpsense verify-log --expected-head``."""
        seq_text, sep, head = text.strip().rpartition(":")
        if not _HEX64.fullmatch(head) or (sep and not seq_text.isdigit()):
            raise UsageError(
                "an expected head is SEQ:HASH or HASH (64 lowercase hex digits)",
                text[:80],
                "pass the head a checkpoint recorded, e.g. 42:3fa9... (dpsense checkpoint prints it)",
            )
        return cls(head, int(seq_text) if sep else None)

    def __str__(self) -> str:
        return self.head if self.seq is None else f"{self.seq}:{self.head}"


def verify(tx: Tx, *, anchor: Anchor | None = None) -> AuditReport:
    """Walk the chain, check ``anchor``, then compare every table with the state the chain implies."""
    if tx.dialect == "postgresql":  # one snapshot for the chain and every table
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    report, entries = _audit.walk(tx)
    if not report.ok:
        return report
    if anchor is not None:
        problem = _anchor_problem(entries, anchor)
        if problem:
            return AuditReport(False, report.entries, report.head_hash, anchor.seq, problem)
    state = _State()
    for seq, at, event, payload, _ in entries:
        state.apply(seq, at, event, json.loads(payload))
    problems = state.problems + _compare(tx, state)
    if problems:
        reason = f"{len(problems)} table row(s) differ from the audit chain; first: {problems[0]}"
        return AuditReport(False, report.entries, report.head_hash, None, reason, tuple(problems[:MAX_PROBLEMS]))
    return AuditReport(True, report.entries, report.head_hash, tables_checked=True)


def _anchor_problem(entries: list[tuple[int, str, str, str, str]], anchor: Anchor) -> str:
    hashes = [e[4] for e in entries]
    if anchor.seq is None:
        return "" if anchor.head in hashes else "no entry of the chain carries the expected head"
    if anchor.seq == 0:
        return "" if anchor.head == _audit.GENESIS else "the expected head of entry 0 is not the genesis hash"
    if anchor.seq > len(hashes):
        return f"the chain has {len(hashes)} entries, fewer than the expected head's {anchor.seq}: history was cut"
    if hashes[anchor.seq - 1] != anchor.head:
        return f"entry {anchor.seq} does not carry the expected head: history was rewritten"
    return ""


@dataclass
class _Charge:
    dataset: str
    analyst: str
    request_id: str
    loss: dict[str, str]
    family: str | None
    event: object
    partition: dict[str, Any] | None
    cache_key: object  # str | None, or _UNKNOWN for entries without it
    charged_at: float
    exact_time: bool
    state: ChargeState = ChargeState.RESERVED


@dataclass
class _Budget:
    mode: Mode
    cap: Pair


_UNKNOWN = object()


@dataclass
class _State:
    """The ledger state the audit chain implies (``apply`` one entry at a time, oldest first)."""

    analysts: set[str] = field(default_factory=set)
    datasets: dict[str, object] = field(default_factory=dict)  # name -> fingerprint
    secret_names: set[str] = field(default_factory=set)
    budgets: dict[tuple[str, str, str], _Budget] = field(default_factory=dict)
    charges: dict[int, _Charge] = field(default_factory=dict)
    releases: dict[int, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # id -> (charge, commit payload)
    commit_seqs: dict[int, int] = field(default_factory=dict)  # release id -> seq of its commit entry
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    profiles: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    partitions: dict[tuple[str, str], str] = field(default_factory=dict)  # (dataset, rule) -> declaration
    collections: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> register_collection payload
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)  # batch row id -> ingest payload
    problems: list[str] = field(default_factory=list)
    seq: int = 0  # the entry being applied

    def apply(self, seq: int, at: str, event: str, p: dict[str, Any]) -> None:
        try:
            handler = _HANDLERS.get(event)
            if handler is None:
                self.problems.append(f"audit entry {seq}: unknown event {event!r}")
                return
            self.seq = seq
            handler(self, at, p)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, DPSenseError) as exc:
            self.problems.append(f"audit entry {seq} ({event}): its payload cannot be replayed ({exc!r})")

    def _register(self, at: str, p: dict[str, Any]) -> None:
        self.datasets[p["dataset"]] = p["fingerprint"]
        loss = loss_from_json(p["budget"])
        self.budgets[(p["dataset"], "total", "")] = _Budget(p["mode"], _cap(loss, p["mode"]))

    def _set_budget(self, at: str, p: dict[str, Any]) -> None:
        kind, value = (p["scope_kind"], p["scope_value"]) if "scope_kind" in p else _scope_from_text(p["scope"])
        self.budgets[(p["dataset"], kind, value)] = _Budget(p["mode"], _cap(loss_from_json(p["cap"]), p["mode"]))

    def _reserve(self, at: str, p: dict[str, Any]) -> None:
        exact = "charged_at" in p
        when = float(p["charged_at"]) if exact else datetime.fromisoformat(at).timestamp()
        partition = p.get("partition")
        if partition is not None:
            declaration = canonical_json(
                {k: partition[k] for k in ("rule", "parts", "max_parts_per_unit", "adjacency")}
            )
            self.partitions.setdefault((p["dataset"], partition["rule"]), declaration)
        self.charges[int(p["charge"])] = _Charge(
            p["dataset"],
            p["analyst"],
            p["request_id"],
            p["loss"],
            p["family"],
            p.get("event"),
            partition,
            p.get("cache_key", _UNKNOWN),
            when,
            exact,
        )

    def _commit(self, at: str, p: dict[str, Any]) -> None:
        self.charges[int(p["charge"])].state = ChargeState.COMMITTED
        self.releases[int(p["release"])] = (int(p["charge"]), p)
        self.commit_seqs[int(p["release"])] = self.seq

    def _fail(self, at: str, p: dict[str, Any]) -> None:
        refunded = bool(p["refunded"])
        self.charges[int(p["charge"])].state = ChargeState.REFUNDED if refunded else ChargeState.FAILED

    def _abandon(self, at: str, p: dict[str, Any]) -> None:
        self.charges[int(p["charge"])].state = ChargeState.ABANDONED

    def _create_token(self, at: str, p: dict[str, Any]) -> None:
        self.tokens[p["token_id"]] = dict(p) | {"revoked": False}

    def _revoke_token(self, at: str, p: dict[str, Any]) -> None:
        self.tokens[p["token_id"]]["revoked"] = True

    def _register_collection(self, at: str, p: dict[str, Any]) -> None:
        self.datasets[p["collection"]] = None
        self.collections[p["collection"]] = p

    def _profile(self, at: str, p: dict[str, Any]) -> None:
        self.profiles[(p["dataset"], p["snapshot"])] = p

    def spent(self, dataset: str, kind: str, value: str, budget: _Budget) -> Pair:
        """A scope's spend recomputed from the chain's charges, with the ledger's composition rules."""
        scope = _scope(kind, value)
        counted = [
            (cid, c)
            for cid, c in sorted(self.charges.items())
            if c.dataset == dataset and c.state in SPENT_STATES and _in_scope(c, scope)
        ]
        if budget.mode == "pld":
            rows: list[Row] = [(cid, None if c.event is None else canonical_json(c.event)) for cid, c in counted]
            eps = composed_epsilon(str(scope), rows, budget.cap[1])
            return (eps, budget.cap[1]) if eps > 0 else (Fraction(0), Fraction(0))
        spans: dict[int, int] = {}
        listed: list[tuple[Pair, int | None, str | None]] = []
        rules = sorted({c.partition["rule"] for _, c in counted if c.partition is not None})
        for _, c in counted:
            amount = in_mode(loss_from_json(c.loss), budget.mode)
            if c.partition is None:
                listed.append((amount, None, None))
                continue
            group = rules.index(c.partition["rule"])
            spans[group] = _span(c.partition)
            listed.append((amount, group, str(c.partition["part"])))
        return composed(listed, spans)


_HANDLERS: dict[str, Any] = {
    "add_analyst": lambda s, at, p: s.analysts.add(p["analyst"]),
    "register_dataset": _State._register,
    "set_budget": _State._set_budget,
    "secret_created": lambda s, at, p: s.secret_names.add(p["name"]),
    "profile": _State._profile,
    "reserve": _State._reserve,
    "commit": _State._commit,
    "fail": _State._fail,
    "abandon": _State._abandon,
    "create_token": _State._create_token,
    "revoke_token": _State._revoke_token,
    "register_collection": _State._register_collection,
    "ingest": lambda s, at, p: s.batches.__setitem__(int(p["batch"]), p),
    # answers given without a new charge change no table row
    "replay": lambda s, at, p: None,
    "resume": lambda s, at, p: None,
    "cache_hit": lambda s, at, p: None,
}


def _cap(loss: Any, mode: Mode) -> Pair:
    if mode == "pld":
        approx = loss.as_approx()
        return approx.epsilon, approx.delta
    return in_mode(loss, mode)


def _scope_from_text(text: str) -> tuple[str, str]:
    """(kind, value) of ``str(Scope)`` as entries before the scope fields recorded it."""
    if text == "dataset total":
        return "total", ""
    kind, _, quoted = text.partition(" ")
    return kind, str(ast.literal_eval(quoted))


def _scope(kind: str, value: str) -> Scope:
    if kind == "period":
        start, _, end = value.partition(":")
        return Scope("period", value, int(start), int(end))
    return Scope(kind, value)  # type: ignore[arg-type]


def _in_scope(c: _Charge, scope: Scope) -> bool:
    if scope.kind == "analyst":
        return c.analyst == scope.value
    if scope.kind == "family":
        return c.family == scope.value
    if scope.kind == "period":
        assert scope.start is not None and scope.end is not None
        return scope.start <= c.charged_at < scope.end
    return True


def _span(partition: dict[str, Any]) -> int:
    factor = 2 if partition["adjacency"] == "replace" else 1
    return min(len(partition["parts"]), factor * int(partition["max_parts_per_unit"]))


# -- comparing the tables with the replayed state ----------------------------------------------------


def _compare(tx: Tx, state: _State) -> list[str]:
    names = {int(r[0]): str(r[1]) for r in tx.execute("SELECT id, name FROM datasets")}
    problems: list[str] = []
    problems += _compare_sets("analyst", state.analysts, {str(r[0]) for r in tx.execute("SELECT name FROM analysts")})
    problems += _compare_sets("secret", state.secret_names, {str(r[0]) for r in tx.execute("SELECT name FROM secrets")})
    problems += _compare_datasets(tx, state)
    problems += _compare_budgets(tx, state, names)
    problems += _compare_charges(tx, state, names)
    problems += _compare_releases(tx, state)
    problems += _compare_tokens(tx, state)
    problems += _compare_profiles(tx, state, names)
    problems += _compare_partitions(tx, state, names)
    problems += compare_collections(tx, state.collections, state.batches)
    return problems


def _compare_sets(what: str, chain: Iterable[object], table: Iterable[object]) -> list[str]:
    chain_set, table_set = set(chain), set(table)
    out = [f"{what} {key!r} is in the chain but not in the table" for key in sorted(chain_set - table_set, key=str)]
    return out + [
        f"{what} {key!r} is in the table but not in the chain" for key in sorted(table_set - chain_set, key=str)
    ]


def _changed(what: str, table: dict[Any, object], chain: dict[Any, object], how: str) -> list[str]:
    """``{what} {key}: {how}`` for every key on both sides whose values differ."""
    return [f"{what} {key!r}: {how}" for key in sorted(table, key=str) if key in chain and table[key] != chain[key]]


def _compare_datasets(tx: Tx, state: _State) -> list[str]:
    table = {str(r[0]): r[1] for r in tx.execute("SELECT name, fingerprint FROM datasets")}
    out = _compare_sets("dataset", state.datasets, table)
    return out + _changed("dataset", table, state.datasets, "its fingerprint differs from the chain")


def _compare_budgets(tx: Tx, state: _State, names: dict[int, str]) -> list[str]:
    rows = tx.execute(
        "SELECT dataset_id, scope_kind, scope_value, period_start, period_end, mode, cap_a, cap_b, spent_a, spent_b"
        " FROM budgets"
    )
    table = {(names.get(int(r[0]), f"#{r[0]}"), str(r[1]), str(r[2])): r for r in rows}
    out = _compare_sets("budget", state.budgets, table)
    for key, r in sorted(table.items()):
        budget = state.budgets.get(key)
        if budget is None:
            continue
        where = f"budget {key[0]!r} {key[1]}" + (f" {key[2]!r}" if key[2] else "")
        if r[5] != budget.mode or (parse_frac(r[6]), parse_frac(r[7])) != budget.cap:
            out.append(f"{where}: its cap or accounting mode differs from the chain")
        if key[1] == "period" and f"{r[3]}:{r[4]}" != key[2]:
            out.append(f"{where}: its period bounds differ from its scope")
        try:
            expected = state.spent(key[0], key[1], key[2], budget)
        except DPSenseError as exc:
            out.append(f"{where}: its spend cannot be recomputed from the chain ({exc})")
            continue
        if (parse_frac(r[8]), parse_frac(r[9])) != expected:
            out.append(f"{where}: its spend differs from the charges the chain records")
    return out


def _compare_charges(tx: Tx, state: _State, names: dict[int, str]) -> list[str]:
    rows = tx.execute(
        "SELECT c.id, c.dataset_id, c.analyst, c.request_id, c.state, c.loss, c.family, c.cache_key, c.event,"
        " p.rule, c.part, c.charged_at FROM charges c LEFT JOIN partitions p ON p.id = c.partition_id"
    )
    table = {int(r[0]): r for r in rows}
    out = _compare_sets("charge", state.charges, table)
    for cid, r in sorted(table.items()):
        c = state.charges.get(cid)
        if c is None:
            continue
        rule, part = (None, None) if c.partition is None else (c.partition["rule"], c.partition["part"])
        fields = {
            "dataset": (names.get(int(r[1])), c.dataset),
            "analyst": (r[2], c.analyst),
            "request id": (r[3], c.request_id),
            "state": (r[4], c.state.value),
            "loss": (_json_or_text(r[5]), c.loss),
            "family": (r[6], c.family),
            "event": (_json_or_text(r[8]), c.event),
            "partition": ((r[9], r[10]), (rule, part)),
        }
        if c.cache_key is not _UNKNOWN:
            fields["cache key"] = (r[7], c.cache_key)
        if c.exact_time:
            fields["debit time"] = (None if r[11] is None else float(r[11]), c.charged_at)
        out += [f"charge {cid}: its {name} differs from the chain" for name, (a, b) in fields.items() if a != b]
    return out


def _compare_releases(tx: Tx, state: _State) -> list[str]:
    rows = tx.execute(
        "SELECT id, charge_id, cache_key, value_json, mechanism, mechanism_version, parameters_json, privacy_unit,"
        " adjacency, code_version, commit_seq FROM releases"
    )
    table = {int(r[0]): r for r in rows}
    out = _compare_sets("release", state.releases, table)
    for rid, r in sorted(table.items()):
        if rid not in state.releases:
            continue
        charge, p = state.releases[rid]
        value = hashlib.sha256(str(r[3]).encode("utf-8")).hexdigest()
        if int(r[1]) != charge:
            out.append(f"release {rid}: its charge differs from the chain")
        if value != p["value_sha256"]:
            out.append(f"release {rid}: its value differs from the digest the chain records")
        if (r[4], r[5], r[9]) != (p["mechanism"], p["mechanism_version"], p["code_version"]):
            out.append(f"release {rid}: its mechanism or versions differ from the chain")
        if r[10] is not None and int(r[10]) != state.commit_seqs[rid]:
            out.append(f"release {rid}: it points at another audit entry than its commit")
        if "row_sha256" in p and release_row_digest(r[2], tuple(r[3:10])) != p["row_sha256"]:
            out.append(f"release {rid}: its row (cache key, parameters, unit or adjacency) differs from the chain")
    return out


def _compare_tokens(tx: Tx, state: _State) -> list[str]:
    rows = tx.execute("SELECT token_id, analyst, role, salt, token_hash, revoked_at, expires_at FROM api_tokens")
    table = {str(r[0]): r for r in rows}
    out = _compare_sets("token", state.tokens, table)
    for tid, r in sorted(table.items()):
        t = state.tokens.get(tid)
        if t is None:
            continue
        expires = None if r[6] is None else float(r[6])
        if (r[1], r[2], r[5] is not None, expires) != (t["analyst"], t["role"], t["revoked"], t.get("expires_at")):
            out.append(f"token {tid}: its analyst, role, revocation or expiry differs from the chain")
        salt = bytes(r[3]) if isinstance(r[3], bytes | bytearray | memoryview) else b""
        if "credential_sha256" in t and credential_digest(salt, str(r[4])) != t["credential_sha256"]:
            out.append(f"token {tid}: its stored credential differs from the chain")
    return out


def _compare_profiles(tx: Tx, state: _State, names: dict[int, str]) -> list[str]:
    rows = tx.execute("SELECT dataset_id, snapshot, fingerprint, profile FROM dataset_profiles")
    table = {(names.get(int(r[0]), f"#{r[0]}"), str(r[1])): r for r in rows}
    out = _compare_sets("profile", state.profiles, table)
    for key, r in sorted(table.items()):
        p = state.profiles.get(key)
        if p is None:
            continue
        if _sha(str(r[3])) != p["profile_sha256"] or _sha(str(r[2])) != p.get("fingerprint_sha256", _sha(str(r[2]))):
            out.append(f"profile {key[0]!r} snapshot {key[1]!r}: it differs from the digest the chain records")
    return out


def _compare_partitions(tx: Tx, state: _State, names: dict[int, str]) -> list[str]:
    rows = tx.execute("SELECT dataset_id, rule, declaration FROM partitions")
    table = {(names.get(int(r[0]), f"#{r[0]}"), str(r[1])): str(r[2]) for r in rows}
    out = _compare_sets("partition", state.partitions, table)
    return out + _changed("partition", dict(table), dict(state.partitions), "its declaration differs from the chain")


def _json_or_text(text: object) -> object:
    if text is None:
        return None
    try:
        return json.loads(str(text))
    except ValueError:
        return text


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- opening a ledger that must already exist --------------------------------------------------------

_SQLITE_HEADER = b"SQLite format 3\x00"


def open_existing_backend(url: str) -> Backend:
    """The backend of a ledger that must exist already: never creates or migrates an empty one.

    Raises:
        LedgerUnreadable: a missing, empty, truncated or non-SQLite file, a database without a
            ledger, or a server that cannot be reached.

    """
    fix = "pass the URL of an existing ledger (sqlite:///path/to/ledger.db or postgresql://...)"
    if url.startswith(("postgresql://", "postgres://")):
        return _existing_postgres(url, fix)
    path = sqlite_path(url)
    if not os.path.isfile(path):
        raise LedgerUnreadable("the ledger file does not exist", path, fix)
    if os.path.getsize(path) == 0:
        raise LedgerUnreadable("the ledger file is empty: it holds no ledger", path, fix)
    with open(path, "rb") as handle:
        if handle.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
            raise LedgerUnreadable("the file is not a SQLite ledger (its header is wrong)", path, fix)
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as probe:
            _require_ledger_tables(probe.execute(_TABLES_SQL).fetchall(), path, fix)
        return open_backend(url)
    except sqlite3.DatabaseError as exc:
        raise LedgerUnreadable(f"the ledger file cannot be read ({exc})", path, fix) from None


_TABLES_SQL = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('audit_log', 'audit_head', 'schema_version')"
)


def _require_ledger_tables(rows: list[Row], where: str, fix: str) -> None:
    if len(rows) != 3:
        raise LedgerUnreadable("the database holds no dpsense ledger (audit tables missing)", where, fix)


def _existing_postgres(url: str, fix: str) -> Backend:
    import psycopg

    where = url.split("@")[-1]
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as probe:
            rows = probe.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relname IN ('audit_log', 'audit_head', 'schema_version')"
                " AND c.relnamespace = to_regnamespace(current_schema())::oid"
            ).fetchall()
        _require_ledger_tables([tuple(r) for r in rows], where, fix)
        return open_backend(url)
    except psycopg.Error as exc:
        raise LedgerUnreadable(f"the PostgreSQL ledger cannot be read ({type(exc).__name__})", where, fix) from None


def read_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a backend raises when its database cannot be read (corrupt pages, dropped tables)."""
    errors: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - depends on the installed extras
        return errors
    return (*errors, psycopg.Error)


# -- checkpoint files: an anchor a steward keeps outside the ledger -----------------------------------

CHECKPOINT_FORMAT = "dpsense-audit-checkpoint/1"
#: A MAC key file must hold at least this many bytes (e.g. ``head -c 32 /dev/urandom > key``).
MIN_KEY_BYTES = 16


def checkpoint_document(anchor: Anchor, *, at: str, key: bytes | None = None) -> dict[str, object]:
    """The JSON document of a checkpoint; with ``key``, an HMAC-SHA256 over its fields (``mac``).

    The MAC lets the steward keep the checkpoint somewhere a ledger writer can also write (next to
    backups, say) while the key stays elsewhere: a forged checkpoint then fails its MAC.
    """
    doc: dict[str, object] = {"format": CHECKPOINT_FORMAT, "seq": anchor.seq, "head": anchor.head, "at": at}
    if key is not None:
        doc["mac"] = _mac(_check_key(key), doc)
    return doc


def read_checkpoint(text: str, *, key: bytes | None = None) -> Anchor:
    """The anchor of a checkpoint document; checks its MAC when it has one (``key`` is then needed).

    Raises:
        UsageError: not a checkpoint document, a MAC without a key, a key without a MAC, a wrong MAC.

    """
    fix = "pass the file `dpsense checkpoint --out FILE` wrote (and its --key-file if it has a mac)"
    try:
        doc = json.loads(text)
    except ValueError:
        raise UsageError("the checkpoint is not JSON", text[:60], fix) from None
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise UsageError(f"the checkpoint's format is not {CHECKPOINT_FORMAT}", str(doc)[:60], fix)
    seq, head = doc.get("seq"), doc.get("head")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0 or not isinstance(head, str):
        raise UsageError("a checkpoint needs an integer seq >= 0 and a head", (seq, head), fix)
    mac = doc.get("mac")
    if key is None and mac is not None:
        raise UsageError("the checkpoint carries a MAC: its key is needed to trust it", "mac", "pass --key-file")
    if key is not None:
        fields = {k: v for k, v in doc.items() if k != "mac"}
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(_check_key(key), fields)):
            raise UsageError("the checkpoint's MAC does not match: it was changed or the key differs", "mac", fix)
    return Anchor.parse(f"{seq}:{head}")


def _check_key(key: bytes) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(
            f"a checkpoint key must hold at least {MIN_KEY_BYTES} bytes", len(key), "head -c 32 /dev/urandom > KEYFILE"
        )
    return key


def _mac(key: bytes, fields: dict[str, object]) -> str:
    return hmac.new(key, canonical_json(fields).encode("utf-8"), hashlib.sha256).hexdigest()
