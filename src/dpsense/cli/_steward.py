"""``dpsense set-budget``, ``token create|list|revoke``, ``analyst add``: the steward's budgets and people.

Registered on the application in ``_app``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dpsense.cli._common import (
    DEFAULT_LEDGER,
    AnalystOpt,
    CreateOpt,
    JsonOpt,
    LedgerOpt,
    StewardOpt,
    StoreOpt,
    _command,
    _require_steward,
    _session,
    _steward_ledger,
)
from dpsense.cli._options import (
    number_option,
)
from dpsense.core.errors import UsageError


def set_budget(
    dataset: Annotated[str, typer.Argument(help="The dataset's name.")],
    epsilon: Annotated[str, typer.Option("--epsilon", help="The scope's cap ε (a decimal).")],
    delta: Annotated[str, typer.Option("--delta", help="The scope's cap δ.")] = "0",
    for_analyst: Annotated[
        str | None, typer.Option("--for-analyst", metavar="NAME", help="A sub-budget of one analyst.")
    ] = None,
    family: Annotated[str | None, typer.Option("--family", help="A sub-budget of one query family.")] = None,
    period: Annotated[
        str | None,
        typer.Option("--period", metavar="START:END", help="A sub-budget of a time window (Unix seconds)."),
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Create or change a dataset's total budget or a sub-budget (steward); the policy's rules still hold."""
    from dpsense.cli import _output as out
    from dpsense.ledger import Scope
    from dpsense.release import Budget

    with _command() as io:
        _require_steward(steward, "set budgets")
        chosen = [flag for flag, value in (("--for-analyst", for_analyst), ("--family", family), ("--period", period))
                  if value is not None]  # fmt: skip
        if len(chosen) > 1:
            raise UsageError("a budget has one scope", chosen, "pass one of --for-analyst, --family, --period")
        scope = Scope.total()
        if for_analyst is not None:
            scope = Scope.analyst(for_analyst)
        elif family is not None:
            scope = Scope.family(family)
        elif period is not None:
            start, sep, end = period.partition(":")
            if not (sep and all(part.strip().isascii() and part.strip().isdigit() for part in (start, end))):
                raise UsageError(
                    "--period takes START:END in Unix seconds", period, "e.g. --period 1767225600:1769904000"
                )
            scope = Scope.period(int(start), int(end))
        cap = Budget(number_option("--epsilon", epsilon), number_option("--delta", delta))
        with _session(ledger, analyst, steward, store=store) as session:
            session.set_budget(dataset, scope, cap)
            status = session.budget(dataset, scope)
        io.out.print(
            f"budget of {dataset!r} ({scope}): cap {out.loss_text(status.cap)}, spent {out.loss_text(status.spent)}",
            markup=False,
        )


def token_create(
    name: Annotated[str, typer.Argument(help="The analyst the token speaks for (added if new).")],
    role: Annotated[str, typer.Option("--role", help="analyst or steward.")] = "analyst",
    expires_in: Annotated[
        float | None, typer.Option("--expires-in", metavar="SECONDS", help="Lifetime [default: never expires].")
    ] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Create an API token for the HTTP service (steward); it is printed once, only its hash is kept."""
    with _command() as io:
        if role not in ("analyst", "steward"):
            raise UsageError("--role is analyst or steward", role, "pass --role analyst")
        with _steward_ledger(ledger, steward, "create tokens") as opened:
            opened.add_analyst(name)
            token = opened.create_token(name, role=role, ttl_s=expires_in)  # type: ignore[arg-type]
        io.out.print(token, markup=False, soft_wrap=True)


def token_list(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """List the API tokens (steward): id, analyst, role, state, expiry; never a secret."""
    import time

    from dpsense.cli import _output as out

    with _command() as io:
        with _steward_ledger(ledger, steward, "list tokens") as opened:
            infos = opened.tokens()
        now = time.time()
        rows = [
            {
                "token_id": info.token_id,
                "analyst": info.analyst,
                "role": info.role,
                "state": "revoked"
                if info.revoked
                else "expired"
                if info.expires_at is not None and now >= info.expires_at
                else "active",
                "expires": "never" if info.expires_at is None else out.utc_text(info.expires_at),
            }
            for info in infos
        ]
        if as_json:
            io.document(out.dumps({"tokens": rows}))
            return
        io.out.print(out.record_table("API tokens", rows))


def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's public id (dpsense token list).")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Revoke an API token by its public id (steward)."""
    with _command() as io:
        with _steward_ledger(ledger, steward, "revoke tokens") as opened:
            if not opened.revoke_token(token_id):
                raise UsageError("no active token has that id", token_id, "see dpsense token list --steward")
        io.out.print(f"token {token_id} revoked", markup=False)


def analyst_add(
    name: Annotated[str, typer.Argument(help="The analyst's name.")],
    ledger: LedgerOpt = DEFAULT_LEDGER,
    create: CreateOpt = False,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
) -> None:
    """Allow an analyst to release from this ledger (steward); a new SQLite ledger needs --create."""
    with _command() as io:
        _require_steward(steward, "add analysts")
        with _session(ledger, analyst, steward, store=store, create=create) as session:
            session.add_analyst(name)
        io.out.print(f"analyst {name!r} added", markup=False)
