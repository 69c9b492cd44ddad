"""`almanac dispute ROOM` and `almanac verify-bundle FILE` (a self-contained proof of part of a room, checked offline),
and a player's own: `almanac player-bundle ROOM --player P` and `almanac verify-player-bundle FILE`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from almanac.events.commitments import read_checkpoint_file, read_receipt_file
from almanac.events.forensics.bundle_check import INCOMPLETE, verify_bundle
from almanac.events.forensics.player_check import compare_player_bundles, verify_player_bundle
from almanac.services.checkpoints import Checkpointer
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    console,
    deployment_settings,
    fail,
    guarded,
    with_store,
)
from almanac.services.forensics.bundle import bundle_json, dispute_bundle
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.player_bundle import player_bundle
from almanac.storage.base import EventStore

INCOMPLETE_EXIT = 3  # not 2: click's usage errors exit 2


def parse_versions(text: str) -> tuple[int, int]:
    """``A..B`` -> (A, B); a clear operator error otherwise."""
    first, dots, last = text.partition("..")
    if not dots or not first.isdigit() or not last.isdigit() or len(first) > 9 or len(last) > 9:
        raise OperatorError(f"--versions {text!r}: write a range as A..B, e.g. 10..20")
    return int(first), int(last)


@app.command("dispute")
def dispute_command(
    room: str = typer.Argument(..., help="Room id."),
    trade: str = typer.Option(None, "--trade", help="A realm trade id (shorthand for --view trade --id ID)."),
    view: str = typer.Option(None, "--view", help="An audit view of the room's rule-set."),
    item: str = typer.Option(None, "--id", help="What the audit view follows (with --view)."),
    versions: str = typer.Option(None, "--versions", help="A version range A..B."),
) -> None:
    """Write a dispute bundle (JSON, stdout): the slice's events, commands, refusals, seed and chain proof."""
    if trade is not None:
        view, item = "trade", trade
    if sum(x is not None for x in (view, versions)) != 1 or (view is not None and item is None):
        raise fail("give exactly one of --trade ID, --view NAME --id ID or --versions A..B")
    span = guarded(lambda: parse_versions(versions)) if versions is not None else None

    checkpointer = guarded(lambda: Checkpointer.from_settings(deployment_settings("signing_keys", "commit_secret")))

    async def work(store: EventStore) -> dict[str, Any]:
        try:
            return await dispute_bundle(store, room, int(time.time() * 1000), view=view, item=item, versions=span,
                                        checkpointer=checkpointer)
        except ForensicsError as error:
            raise OperatorError(error.message) from None

    sys.stdout.write(bundle_json(with_store(work)))  # its first line says who may read it


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text())
    except OSError as error:
        raise fail(f"cannot read {file}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise fail(f"{file} is not JSON: {error}") from None
    except RecursionError:
        raise fail(f"{file} is not a bundle: its JSON nests too deeply to read") from None


def _held_checkpoints(files: list[Path] | None, key_set: Any) -> tuple[list[Any], Any]:
    """The checkpoints of ``files`` and the key set to check them with (``key_set``, else the files' own)."""
    held: list[Any] = []
    for path in files or []:
        try:
            found, their_keys = read_checkpoint_file(_read_json(path))
        except ValueError as error:
            raise fail(f"{path}: {error}") from None
        held += found
        key_set = key_set if key_set is not None else their_keys
    return held, key_set


def _held_receipts(files: list[Path] | None, key_set: Any) -> tuple[list[Any], Any]:
    """The refusal receipts of ``files`` and the key set to check them with (``key_set``, else the files' own)."""
    held: list[Any] = []
    for path in files or []:
        try:
            found, their_keys = read_receipt_file(_read_json(path))
        except ValueError as error:
            raise fail(f"{path}: {error}") from None
        held += found
        key_set = key_set if key_set is not None else their_keys
    return held, key_set


@app.command("verify-bundle")
def verify_bundle_command(
    file: Annotated[Path, typer.Argument(help="A bundle written by `almanac dispute`.")],
    expect_head: str = typer.Option(None, "--expect-head", help="The room's head hash as you know it from elsewhere: "
                                    "HASH (the head's) or VERSION:HASH (an earlier chain hash or checkpoint head: checked, but the "
                                    "versions after it are vouched by nothing, so the verdict is at best INCOMPLETE)."),
    checkpoints: Annotated[list[Path] | None, typer.Option(
        "--checkpoints", help="A file of signed checkpoints (any player's; repeat for more): the bundle's history "
                              "must pass through each.")] = None,
    keys: Annotated[Path | None, typer.Option(
        "--keys", help="The deployment's key set (/.well-known/almanac-keys.json) to check signatures with; "
                       "default: the checkpoint files' own, else the bundle's.")] = None,
    receipts: Annotated[list[Path] | None, typer.Option(
        "--receipts", help="A file of signed refusal receipts (a refusal answer's `receipt`, a list of them or an "
                           "almanac-receipts file; repeat for more): each must stand on the bundle's history and its "
                           "command, decided again there, be refused with the signed code (else: a false refusal).")] = None,
) -> None:
    """Check a dispute bundle offline (no Redis): chain, checkpoints, refusal receipts, anchor, readable events,
    rules, seed, every command of the whole chain re-decided. Exit 0 VERIFIED, 1 NOT VERIFIED, 3 INCOMPLETE (a
    check did not run: it is named)."""
    bundle = _read_json(file)
    held, key_set = _held_checkpoints(checkpoints, _read_json(keys) if keys is not None else None)
    receipted, key_set = _held_receipts(receipts, key_set)
    verdict = verify_bundle(bundle, expect_head, checkpoints=held, keys=key_set, receipts=receipted)
    console.print(verdict.text(), highlight=False, markup=False)
    if verdict.status == INCOMPLETE:
        raise typer.Exit(INCOMPLETE_EXIT)
    if not verdict.ok:
        raise typer.Exit(1)


@app.command("player-bundle")
def player_bundle_command(
    room: str = typer.Argument(..., help="Room id."),
    player: str = typer.Option(..., "--player", help="Whose bundle: their view and the public part opened."),
) -> None:
    """Write a player-safe bundle (JSON, stdout) of a room on commitment scheme v2: safe to give to that player
    during play; `almanac verify-player-bundle` checks it."""
    checkpointer = guarded(lambda: Checkpointer.from_settings(deployment_settings("signing_keys", "commit_secret")))

    async def work(store: EventStore) -> dict[str, Any]:
        try:
            return await player_bundle(store, checkpointer, room, player, int(time.time() * 1000))
        except ForensicsError as error:
            raise OperatorError(error.message) from None

    sys.stdout.write(bundle_json(with_store(work)))  # its first line says whose it is


@app.command("verify-player-bundle")
def verify_player_bundle_command(
    file: Annotated[Path, typer.Argument(help="A bundle from GET /rooms/{room}/player-bundle or `almanac player-bundle`.")],
    checkpoints: Annotated[list[Path] | None, typer.Option(
        "--checkpoints", help="Your checkpoint file (repeat for more): the bundle's history must pass through each.")] = None,
    keys: Annotated[Path | None, typer.Option(
        "--keys", help="The deployment's key set (/.well-known/almanac-keys.json); default: the checkpoint files'.")] = None,
    compare: Annotated[list[Path] | None, typer.Option(
        "--compare", help="Another player's bundle of the same room (repeat for more): the public parts must agree.")] = None,
    seat_key: Annotated[str | None, typer.Option(
        "--seat-key", help="The public key (64 hex) the player registered at join, as known apart from the operator "
        "(the player's key file, a statement published before the join): the signed join must have registered "
        "exactly it, else the step `seat key` fails naming the key it registered.")] = None,
) -> None:
    """Check a player-safe bundle offline: your views and the public parts against your signed checkpoints. It
    cannot re-decide commands (they read values hidden from you) and says so. Exit 0 VERIFIED, 1 NOT VERIFIED or a
    contradiction with a compared bundle, 3 INCOMPLETE."""
    bundle = _read_json(file)
    held, key_set = _held_checkpoints(checkpoints, _read_json(keys) if keys is not None else None)
    verdict = verify_player_bundle(bundle, held, key_set, seat_key=seat_key)
    console.print(verdict.text(), highlight=False, markup=False)
    contradictions = []
    for path in compare or []:
        other = _read_json(path)
        if not verify_player_bundle(other, [], key_set).steps[-1].status == "passed":  # (its redaction step)
            raise fail(f"{path}: not a valid player bundle (verify it on its own first)")
        contradictions += [f"{path}: {line}" for line in compare_player_bundles(bundle, other)]
    for line in contradictions:
        console.print(f"  [contradiction] {line}", highlight=False, markup=False)
    if contradictions or not verdict.ok and verdict.status != INCOMPLETE:
        raise typer.Exit(1)
    if verdict.status == INCOMPLETE:
        raise typer.Exit(INCOMPLETE_EXIT)
