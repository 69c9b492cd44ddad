"""`almanac export ROOM` and `almanac import FILE`: a room's full log to and from the export file format."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from almanac.events import codec, registry
from almanac.events.errors import RuleError
from almanac.events.room import BotPolicy, check_bot_policy
from almanac.events.schema import NAME_PATTERN
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, fail, guarded, room_envelopes, with_store
from almanac.services.cli.verify_commands import open_export, print_report
from almanac.services.forensics.verify import verify_room
from almanac.storage.base import EventStore
from almanac.storage.export_store import export_document, import_room


@app.command("export")
def export_command(room: str = typer.Argument(..., help="Room id.")) -> None:
    """Write the room's full log (events, commands, refusals, the seed once revealed) as JSON to stdout."""

    async def work(store: EventStore) -> dict[str, Any]:
        await room_envelopes(store, room)  # a missing room is one clear line
        return await export_document(store, room, int(time.time() * 1000))

    sys.stdout.write(json.dumps(with_store(work), indent=1) + "\n")  # one field a line: read it, diff it


async def _check_bot_policy(exported: Any) -> None:
    """A room whose log records a bot policy (``room.bot_policy``) its rules cannot play is refused, by the check
    POST /rooms makes (``events.room.check_bot_policy``, 422 there): OperatorError, nothing imported."""
    for envelope in await exported.read(exported.room, 1, 2):  # the policy follows room.created, if any
        if envelope.type != "room.bot_policy":
            continue
        policy = codec.decode_event(envelope)
        assert isinstance(policy, BotPolicy)
        name, version = registry.parse(envelope.ruleset)
        try:  # a stored bare name is version 1 (registry.stored)
            check_bot_policy(f"{name}@{version or 1}", seat_bots=True, bot_after_missed=policy.after_missed or None)
        except RuleError as error:
            raise OperatorError(f"{exported.room}: {error.field}: {error.code}: {error.message}; nothing imported") \
                from None


async def _same_as_stored_origin(store: EventStore, exported: Any) -> None:
    """A copy's origin held in this store is the authority: the file's history must be exactly its own up to the
    file's head (a forged export verifies against its own head only). OperatorError otherwise."""
    envelopes = await exported.read(exported.room)
    origin = await exported.load_origin(exported.room)
    # A copy of a copy names the first room: compare with that room's stored history at the recorded version.
    room, version, head = ((str(found["room"]), int(found["version"]), str(found["hash"]))
                           if (found := json.loads(origin) if origin else None)
                           else (exported.room, len(envelopes), envelopes[-1].hash if envelopes else ""))
    stored = await store.read(room, version, version)
    if stored and stored[0].hash != head:
        raise OperatorError(f"room {room!r} in this store has another history at version {version} than the file "
                            f"(stored {stored[0].hash[:16]}…, file {head[:16]}…): nothing imported")


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="A file written by `almanac export` (format_version 1 or 2).")],
    as_room: Annotated[str | None, typer.Option("--as", help="Load a copy under this room id, beside the original: "
                                                "re-sealed under the new id, recording its origin (room, version, "
                                                "head hash); `verify` proves it is the origin's history.")] = None,
) -> None:
    """Load an exported room into Redis, after verifying it; refuses a room id that already exists."""
    if as_room is not None and not re.match(NAME_PATTERN, as_room):
        raise fail(f"--as {as_room!r}: a room id is 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit")
    exported = guarded(lambda: open_export(file))
    report = guarded(lambda: asyncio.run(verify_room(exported, exported.room)))
    if not report.ok:
        print_report(report)
        raise fail(f"{file} does not verify; nothing imported")

    target = as_room or exported.room

    async def work(store: EventStore) -> tuple[int, int, int]:
        room = exported.room
        await _check_bot_policy(exported)
        if await store.latest_version(target):
            raise OperatorError(f"room {target!r} already exists; nothing imported")
        if as_room is not None:
            await _same_as_stored_origin(store, exported)
        count = await import_room(exported, store, room, as_room)
        if as_room is not None and not (await verify_room(store, as_room)).ok:
            raise OperatorError(f"the copy {as_room!r} does not verify")  # cannot happen for a verified file
        return count, len(await exported.commands(room)), len(await exported.rejections(room))

    count, commands, refusals = with_store(work, create=True)  # importing may start a data directory
    copy = f" as a copy of {exported.room} (re-sealed under the new id; origin recorded)" if as_room else ""
    console.print(f"imported room {target}{copy}: {count} events, {commands} commands, {refusals} refusals")
