"""`almanac verify ROOM | --all | --file FILE` (chain, every command re-decided, seed and nonces); `almanac nonce`."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Annotated

import typer

from almanac.events.dice import COMMAND_BOUND, NONCE_BYTES, NONCE_SCHEMES, nonce_commitment
from almanac.events.forensics.tree_diff import difference_lines
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, fail, guarded, with_store
from almanac.services.forensics.verify import VerifyReport, verify_room
from almanac.storage.base import EventStore
from almanac.storage.export_store import ExportFileStore


def print_report(report: VerifyReport) -> None:
    if report.ok:
        console.print(f"[green]ok[/] {report.room}: {report.chain_checked} events chained, "
                      f"{report.commands_redecided} commands re-decided, {report.refusals_rechecked} refusals re-checked, "
                      f"seed {report.seed}"
                      + (", matches its commitment" if report.seed_matches_commitment else "")
                      + f"; rules {report.ruleset} ({report.fingerprint_used})")
        if report.dice_scheme in NONCE_SCHEMES:
            console.print(f"  dice scheme {report.dice_scheme}: player nonces {report.nonces}, each matching its commitment; "
                          f"revealed by their players: {', '.join(report.nonces_revealed_by_player) or 'none'}; "
                          f"never revealed by their players: {', '.join(report.players_not_revealing) or 'none'}")
        if report.dice_scheme == COMMAND_BOUND:
            console.print(f"  signed by their players: {report.commands_signed} commands of "
                          f"{', '.join(report.signing_players) or 'nobody'}; not signing: "
                          f"{', '.join(report.unsigned_players) or 'nobody'}; joins signed by the key they registered: "
                          f"{', '.join(report.signed_joins) or 'none'}, unsigned: {', '.join(report.unsigned_joins) or 'none'}; "
                          f"refusals signed: {report.refusals_signed} of {report.refusals_rechecked}; unsigned, "
                          f"sent by the clock for a due deadline: {report.commands_by_clock}, played by the bot the "
                          f"log handed the seat to: {report.commands_by_bot}")
    else:
        divergence = report.divergence
        assert divergence is not None
        where = f" at version {divergence.version}" if divergence.version is not None else ""
        console.print(f"[red]FAILED[/] {report.room}: {divergence.check} check{where}: {divergence.message}")
        if divergence.recorded is not None or divergence.recomputed is not None:
            for line in difference_lines(divergence.recorded, divergence.recomputed):
                console.print(f"  {line}", highlight=False, markup=False)
    if report.code_revision:  # which code the room was played under, on success and failure alike
        console.print(f"  {report.code_revision}", highlight=False, markup=False)
    for note in report.notes:
        console.print(f"  note: {note}")


@app.command("verify")
def verify_command(
    room: str = typer.Argument(None, help="Room id."),
    all_rooms: bool = typer.Option(False, "--all", help="Verify every room."),
    file: Annotated[Path | None, typer.Option("--file", help="Verify an exported room file offline (no Redis).")] = None,
) -> None:
    """Check the hash chain, re-decide every command byte for byte, re-check the revealed seed."""
    if sum(bool(x) for x in (room, all_rooms, file)) != 1:
        raise fail("give exactly one of ROOM, --all or --file FILE")
    if file is not None:
        exported = guarded(lambda: open_export(file))
        reports = [guarded(lambda: asyncio.run(verify_room(exported, exported.room)))]
    else:
        async def work(store: EventStore) -> list[VerifyReport]:
            rooms = await store.rooms() if all_rooms else [room]
            if room and not await store.latest_version(room):
                raise OperatorError(f"room {room!r} not found (it has no events)")
            return [await verify_room(store, name) for name in rooms]

        reports = with_store(work)
    for report in reports:
        print_report(report)
    if all_rooms:
        console.print(f"{sum(r.ok for r in reports)} of {len(reports)} rooms verified")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


@app.command("nonce")
def nonce_command() -> None:
    """A fresh secret nonce for joining a room with player nonces (dice scheme 2 or 3), with its commitment (docs/dice.md)."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    print(json.dumps({"nonce": nonce.hex(), "nonce_commitment": nonce_commitment(nonce)}))


def open_export(path: Path) -> ExportFileStore:
    """The export file as a store; a missing or unreadable file is one clear line."""
    try:
        return ExportFileStore.open(path)
    except OSError as error:
        raise OperatorError(f"cannot read {path}: {error.strerror}") from None
