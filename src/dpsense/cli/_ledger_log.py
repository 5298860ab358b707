"""``dpsense verify-log``, ``checkpoint`` and ``resolve-stale``: the ledger's audit chain and its repairs.

Registered on the application in ``_app``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dpsense.cli._common import (
    DEFAULT_LEDGER,
    AnalystOpt,
    JsonOpt,
    LedgerOpt,
    StewardOpt,
    StoreOpt,
    _command,
    _require_steward,
    _session,
)
from dpsense.cli._errors import EXIT_TAMPERED, print_error
from dpsense.core.errors import UsageError

if TYPE_CHECKING:  # imported by the commands that use them, when they run
    from dpsense.ledger import Anchor

ExpectedHeadOpt = Annotated[
    str | None,
    typer.Option("--expected-head", metavar="SEQ:HASH", help="A head recorded earlier: the chain must still carry it."),
]
CheckpointOpt = Annotated[
    Path | None,
    typer.Option("--checkpoint", dir_okay=False, help="A checkpoint file written by `dpsense checkpoint`."),
]
KeyFileOpt = Annotated[
    Path | None,
    typer.Option("--key-file", dir_okay=False, help="The MAC key of the checkpoint (kept outside the ledger)."),
]


def verify_log(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
    expected_head: ExpectedHeadOpt = None,
    checkpoint_file: CheckpointOpt = None,
    key_file: KeyFileOpt = None,
) -> None:
    """Verify the ledger: its audit chain, every table against the chain, and an anchor kept outside it.

    Exit codes: 0 intact; 1 tampered (a broken link, a table row the chain does not imply, or the anchor
    missing: history cut or rewritten); 5 the ledger cannot be read (missing, empty, truncated or corrupt;
    nothing is created); 2 bad options. Without --expected-head or --checkpoint a history rewritten whole,
    tables included, is not detected: keep checkpoints (`dpsense checkpoint`).
    """
    from dpsense.cli import _output as out
    from dpsense.ledger import Ledger

    del analyst, steward  # verifying reads no data and changes nothing: any role may
    with _command() as io:
        anchor = _anchor(expected_head, checkpoint_file, key_file)
        with Ledger.open_existing(ledger) as opened:
            report = opened.verify(expected_head=anchor)
        if as_json:
            io.document(out.dumps(out.audit_document(report)))
        elif report.ok:
            against = f", carries {anchor}" if anchor is not None else ""
            line = (
                f"ledger ok: {report.entries} entries, every table matches the chain{against}, head {report.head_hash}"
            )
            io.out.print(line, markup=False, soft_wrap=True)
        else:
            where = f" at entry {report.first_broken_seq}" if report.first_broken_seq is not None else ""
            print_error(io.err, f"ledger tampered{where}: {report.reason}")
            for problem in report.problems[1:]:
                print_error(io.err, problem)
        if not report.ok:
            raise typer.Exit(EXIT_TAMPERED)


def checkpoint(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    out_file: Annotated[
        Path | None, typer.Option("--out", dir_okay=False, help="Write the checkpoint here [default: stdout].")
    ] = None,
    key_file: KeyFileOpt = None,
) -> None:
    """Record the verified audit head to keep outside the ledger (with --key-file, MAC-signed).

    Later, `dpsense verify-log --checkpoint FILE` proves the history up to this head was neither cut nor
    rewritten. The ledger is verified first: a tampered ledger gets no checkpoint (exit 1).
    """
    from dpsense.cli import _output as out
    from dpsense.ledger import Anchor, Ledger, checkpoint_document

    with _command() as io:
        key = _read_key(key_file)
        with Ledger.open_existing(ledger) as opened:
            report = opened.verify()
        if not report.ok:
            print_error(io.err, f"ledger tampered: {report.reason}; no checkpoint written")
            raise typer.Exit(EXIT_TAMPERED)
        anchor = Anchor(report.head_hash, report.entries)
        text = out.dumps(checkpoint_document(anchor, at=datetime.now(UTC).isoformat(), key=key))
        if out_file is None:
            io.document(text)
            return
        try:
            out_file.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                "--out cannot be written", str(out_file), f"pick a writable path ({exc.strerror})"
            ) from None
        io.err.print(f"checkpoint {anchor} written to {out_file}", markup=False, highlight=False)


def _anchor(expected_head: str | None, checkpoint_file: Path | None, key_file: Path | None) -> Anchor | None:
    """The anchor of verify-log's options (at most one of --expected-head and --checkpoint)."""
    from dpsense.ledger import Anchor, read_checkpoint

    if expected_head is not None and checkpoint_file is not None:
        raise UsageError("--expected-head and --checkpoint name one anchor each", "both", "pass one of them")
    if key_file is not None and checkpoint_file is None:
        raise UsageError("--key-file checks a checkpoint's MAC", str(key_file), "pass --checkpoint FILE with it")
    if expected_head is not None:
        return Anchor.parse(expected_head)
    if checkpoint_file is None:
        return None
    try:
        text = checkpoint_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            "--checkpoint cannot be read", str(checkpoint_file), f"pass a checkpoint file ({exc})"
        ) from None
    return read_checkpoint(text, key=_read_key(key_file))


def _read_key(key_file: Path | None) -> bytes | None:
    if key_file is None:
        return None
    try:
        return key_file.read_bytes()
    except OSError as exc:
        raise UsageError("--key-file cannot be read", str(key_file), f"pass the key's file ({exc.strerror})") from None


def resolve_stale(
    older_than: Annotated[
        float, typer.Option("--older-than", help="Seconds a reservation must have been untouched (default one hour).")
    ] = 3600.0,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    store: StoreOpt = None,
    analyst: AnalystOpt = None,
    steward: StewardOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Mark reservations left by crashed processes ABANDONED (steward); they stay charged.

    The rule (docs/ledger.md): a reservation untouched for --older-than seconds is marked ABANDONED, never
    refunded (the crashed process may have read data); a retry with the same request id may still complete
    it, and an identical request supersedes it at once instead of waiting out the lease. Pick --older-than
    above the slowest release: a live release marked ABANDONED and then superseded ends in ChargedFailure.
    """
    from dpsense.cli import _output as out

    with _command() as io:
        _require_steward(steward, "resolve stale reservations")
        if not (math.isfinite(older_than) and older_than > 0):
            raise UsageError(
                "--older-than must be a finite number of seconds > 0", older_than, "pass e.g. --older-than 3600"
            )
        with _session(ledger, analyst, steward, store=store) as session:
            marked = session.ledger.resolve_stale(older_than_s=older_than)
        if as_json:
            io.document(out.dumps({"abandoned": marked, "older_than_s": older_than}))
        else:
            io.out.print(f"{marked} stale reservation(s) marked abandoned (they stay charged)", markup=False)
