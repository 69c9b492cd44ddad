"""`almanac dispute ROOM` and `almanac verify-bundle FILE`: a self-contained proof of part of a room, checked offline."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from almanac.events.commitments import read_checkpoint_file
from almanac.events.forensics.bundle_check import INCOMPLETE, verify_bundle
from almanac.services.checkpoints import Checkpointer
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, fail, guarded, settings_or_exit, with_store
from almanac.services.forensics.bundle import bundle_json, dispute_bundle
from almanac.services.forensics.errors import ForensicsError
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

    checkpointer = guarded(lambda: Checkpointer.from_settings(settings_or_exit()))

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
) -> None:
    """Check a dispute bundle offline (no Redis): chain, checkpoints, anchor, readable events, rules, seed, every
    command of the whole chain re-decided. Exit 0 VERIFIED, 1 NOT VERIFIED, 3 INCOMPLETE (a check did not run: it
    is named)."""
    bundle = _read_json(file)
    held: list[Any] = []
    key_set = _read_json(keys) if keys is not None else None
    for path in checkpoints or []:
        try:
            found, their_keys = read_checkpoint_file(_read_json(path))
        except ValueError as error:
            raise fail(f"{path}: {error}") from None
        held += found
        key_set = key_set if key_set is not None else their_keys
    verdict = verify_bundle(bundle, expect_head, checkpoints=held, keys=key_set)
    console.print(verdict.text(), highlight=False, markup=False)
    if verdict.status == INCOMPLETE:
        raise typer.Exit(INCOMPLETE_EXIT)
    if not verdict.ok:
        raise typer.Exit(1)
