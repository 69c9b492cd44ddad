"""`almanac keys` (the deployment's checkpoint key set) and `almanac checkpoints ROOM` (a player's, exported)."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from almanac.services.checkpoints import Checkpointer, key_ring, new_signing_seed, player_checkpoints
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    console,
    deployment_settings,
    guarded,
    with_store,
)
from almanac.storage.base import EventStore


@app.command("keys")
def keys_command(
    new: bool = typer.Option(False, "--new", help="Print a fresh signing key seed for rotation instead."),
) -> None:
    """Print the key set that checks checkpoint signatures (as GET /.well-known/almanac-keys.json serves it)."""
    if new:
        console.print("# put it first in ALMANAC_SIGNING_KEYS (comma-separated, the first signs), keep the old "
                      "ones after it; docs/forensics.md", highlight=False)
        sys.stdout.write(new_signing_seed() + "\n")
        return
    ring = guarded(lambda: key_ring(deployment_settings("signing_keys")))
    sys.stdout.write(json.dumps(ring.document, indent=1) + "\n")


@app.command("checkpoints")
def checkpoints_command(
    room: str = typer.Argument(..., help="Room id."),
    player: str = typer.Option(None, "--player", help="Whose commands (default: every command)."),
) -> None:
    """Write a checkpoint file (JSON, stdout): the signed head after each of the player's commands and at the
    room's head, with the key set; `verify-bundle --checkpoints FILE` checks a bundle against it."""
    checkpointer = guarded(lambda: Checkpointer.from_settings(deployment_settings("signing_keys", "commit_secret")))

    async def work(store: EventStore) -> dict[str, Any]:
        try:
            return await player_checkpoints(checkpointer, store, room, player)
        except LookupError as error:
            raise OperatorError(str(error)) from None

    sys.stdout.write(json.dumps(with_store(work), indent=1) + "\n")
