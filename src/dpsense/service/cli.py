"""``dpsense serve`` and the token commands (argparse: the service extra needs no CLI library).

::

    python -m dpsense.service serve --ledger postgresql://... --data-dir /srv/data [--host 127.0.0.1]
        [--port 8000] [--processes 1] [--workers 4] [--min-latency 0.25] [--latency-quantum 0.25] [--constant-work 256]
        [--resolve-stale-after 3600] [--resolve-stale-every 60] [--access-log]
    python -m dpsense.service token create NAME [--role analyst|steward|collector] [--expires-in-s SECONDS] --ledger URL
    python -m dpsense.service token revoke TOKEN_ID --ledger URL
    python -m dpsense.service token list [--analyst NAME] --ledger URL

``token create`` is how the first steward token is made: it runs on the service's host with direct
access to the ledger, adds the analyst if needed and prints the token once (only a salted hash is
stored). ``--ledger`` defaults to ``$DPSENSE_LEDGER``, ``--data-dir`` to ``$DPSENSE_DATA_DIR``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dpsense.core.checks import integer_in
from dpsense.core.errors import DPSenseError, UsageError
from dpsense.ledger import Ledger

DEFAULT_LEDGER = "sqlite:///dpsense.db"
#: The most server processes ``--processes`` starts.
MAX_PROCESSES = 64


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``serve`` or a ``token`` command; returns the exit code (2 for a refusal)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "serve":
            return _serve(args)
        return _token(args)
    except DPSenseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dpsense.service", description="The dpsense HTTP release service.")
    ledger = argparse.ArgumentParser(add_help=False)
    ledger.add_argument("--ledger", default=os.environ.get("DPSENSE_LEDGER", DEFAULT_LEDGER), help="ledger URL")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", parents=[ledger], help="run the service")
    serve.add_argument("--data-dir", default=os.environ.get("DPSENSE_DATA_DIR", "."), help="folder of sources")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (put TLS in front of it)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--processes",
        type=int,
        default=1,
        help="server processes on one port (each with its worker threads, snapshot copies and noise pools)",
    )
    serve.add_argument("--workers", type=int, default=4, help="worker threads (ledger connections) per process")
    serve.add_argument("--min-latency", type=float, default=0.25, help="seconds before any release response")
    serve.add_argument("--latency-quantum", type=float, default=0.25, help="release latencies round up to this")
    serve.add_argument(
        "--constant-work",
        type=int,
        default=256,
        help="sensitivity terms every smooth-sensitivity step evaluates (public work, not an early stop)",
    )
    serve.add_argument(
        "--resolve-stale-after",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="mark reservations untouched this long ABANDONED (they stay charged); above the slowest release",
    )
    serve.add_argument(
        "--resolve-stale-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how often to look for stale reservations (0 turns it off)",
    )
    serve.add_argument("--access-log", action="store_true", help="log each request line")
    serve.add_argument("--log-level", default="warning")
    token = commands.add_parser("token", help="create, revoke or list API tokens")
    actions = token.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", parents=[ledger], help="create a token (printed once)")
    create.add_argument("analyst")
    create.add_argument("--role", choices=["analyst", "steward", "collector"], default="analyst")
    create.add_argument(
        "--expires-in-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the token expires this many seconds from now (> 0, at most 10 years); default: never",
    )
    revoke = actions.add_parser("revoke", parents=[ledger], help="revoke a token by id")
    revoke.add_argument("token_id")
    listing = actions.add_parser("list", parents=[ledger], help="list tokens (no secrets)")
    listing.add_argument("--analyst", default=None)
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from dpsense.service._app import CONFIG_ENV, SWITCH_INTERVAL_S, create_app
    from dpsense.service._workers import ServiceConfig

    config = ServiceConfig(
        ledger_url=args.ledger,
        data_dir=Path(args.data_dir),
        workers=args.workers,
        min_latency_s=args.min_latency,
        latency_quantum_s=args.latency_quantum,
        constant_work=args.constant_work,
        resolve_stale_after_s=args.resolve_stale_after,
        resolve_stale_every_s=args.resolve_stale_every,
    )
    if not integer_in(args.processes, 1, MAX_PROCESSES):
        raise UsageError(
            f"--processes is the number of server processes, an integer from 1 to {MAX_PROCESSES}",
            args.processes,
            "pass --processes 2 on a 2-core machine (docs/performance.md, 'The service')",
        )
    Ledger.open(config.ledger_url).close()  # migrate once, and fail early on a bad URL
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "access_log": args.access_log,
        "server_header": False,
    }
    if args.processes == 1:
        # Parser and worker threads hand the GIL back to the event loop within 1 ms (Python's default
        # is 5 ms), so that /healthz and small requests stay fast while large bodies are read.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        uvicorn.run(create_app(config), **options)
        return 0
    # Each process builds its own application from the configuration (uvicorn spawns them; they share
    # the listening socket): its own worker threads, ledger connections, snapshot copies and noise
    # pools. Everything they must agree on (budgets, single flight, the stored releases) is the ledger's.
    os.environ[CONFIG_ENV] = config.to_env()
    uvicorn.run("dpsense.service._app:app_from_environment", factory=True, workers=args.processes, **options)
    return 0


def _token(args: argparse.Namespace) -> int:
    with Ledger.open(args.ledger) as ledger:
        if args.action == "create":
            ledger.add_analyst(args.analyst)
            print(ledger.create_token(args.analyst, role=args.role, ttl_s=args.expires_in_s))
        elif args.action == "revoke":
            if not ledger.revoke_token(args.token_id):
                print("error: no active token has that id", file=sys.stderr)
                return 2
        else:
            now = time.time()
            for info in ledger.tokens(args.analyst):
                expired = info.expires_at is not None and now >= info.expires_at
                state = "revoked" if info.revoked else "expired" if expired else "active"
                at = info.expires_at
                expiry = "never" if at is None else datetime.fromtimestamp(at, UTC).isoformat()
                print(f"{info.token_id}\t{info.analyst}\t{info.role}\t{state}\texpires {expiry}")
    return 0
