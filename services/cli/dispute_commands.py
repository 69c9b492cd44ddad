"""`almanac dispute ROOM` and `almanac verify-bundle FILE`: a self-contained proof of part of a room, checked offline."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from almanac.events.forensics.bundle_check import INCOMPLETE, verify_bundle
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, fail, guarded, with_store
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

    async def work(store: EventStore) -> dict[str, Any]:
        try:
            return await dispute_bundle(store, room, int(time.time() * 1000), view=view, item=item, versions=span)
        except ForensicsError as error:
            raise OperatorError(error.message) from None

    sys.stdout.write(bundle_json(with_store(work)))  # its first line says who may read it


@app.command("verify-bundle")
def verify_bundle_command(
    file: Annotated[Path, typer.Argument(help="A bundle written by `almanac dispute`.")],
    expect_head: str = typer.Option(None, "--expect-head", help="The room's head as you know it from elsewhere: "
                                    "HASH (the head) or VERSION:HASH (an earlier version's)."),
) -> None:
    """Check a dispute bundle offline (no Redis): chain, readable events, rules, seed, every command of the whole
    chain re-decided. Exit 0 VERIFIED, 1 NOT VERIFIED, 3 INCOMPLETE (a check did not run: it is named)."""
    try:
        bundle = json.loads(file.read_text())
    except OSError as error:
        raise fail(f"cannot read {file}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise fail(f"{file} is not JSON: {error}") from None
    verdict = verify_bundle(bundle, expect_head)
    console.print(verdict.text(), highlight=False, markup=False)
    if verdict.status == INCOMPLETE:
        raise typer.Exit(INCOMPLETE_EXIT)
    if not verdict.ok:
        raise typer.Exit(1)
