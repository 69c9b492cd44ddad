"""`almanac audit ROOM VIEW ID`: one thing's whole story from the log, told by the rule-set's audit view."""

from __future__ import annotations

import json

import typer

from almanac.events.envelope import Envelope
from almanac.events.step import CommandRecord
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, room_envelopes, utc_time, with_store
from almanac.services.forensics.audit import refusals_around, story
from almanac.services.forensics.errors import ForensicsError
from almanac.storage.base import EventStore


@app.command("audit")
def audit_command(
    room: str = typer.Argument(..., help="Room id."),
    view: str = typer.Argument(..., help="An audit view of the room's rule-set (e.g. realm's `trade`)."),
    item: str = typer.Argument(..., help="What to follow (e.g. a trade id; see `almanac log ROOM`)."),
) -> None:
    """One thing's whole story from the log, told by the rule-set's audit view; refusals in between."""

    async def work(store: EventStore) -> tuple[list[tuple[Envelope, dict]], list[tuple[CommandRecord, dict]]]:
        envelopes = await room_envelopes(store, room)
        try:
            told = story(envelopes, room, view, item)
        except ForensicsError as error:
            raise OperatorError(error.message) from None
        by_version = {e.version: e for e in envelopes}
        steps = [(by_version[step["version"]], step) for step in told]
        refused = await refusals_around(store, room, item, steps[0][0].server_time_ms, steps[-1][0].server_time_ms)
        return steps, refused

    steps, refused = with_store(work)
    console.print(f"[bold]{view} {item}[/] in room {room}: {len(steps)} step(s)")
    timeline: list[tuple[int, int, str]] = []
    for number, (envelope, step) in enumerate(steps, start=1):
        details = {k: v for k, v in step.items() if k not in ("type", "step", "text", "version")}
        text = (f"[bold]step {step.get('step', number)}[/] v{envelope.version} {utc_time(envelope.server_time_ms)} "
                f"{envelope.type} (by {envelope.player})\n  {step.get('text', '')}\n  {json.dumps(details, default=str)}")
        timeline.append((envelope.server_time_ms, 0, text))
    for record, error in refused:
        text = (f"[red]refused[/] {utc_time(record.server_time_ms)} {record.player}: {json.dumps(record.body)}\n"
                f"  {error.get('code', '?')}: {error.get('message', '')}")
        timeline.append((record.server_time_ms, 1, text))
    for _, _, text in sorted(timeline, key=lambda item: (item[0], item[1])):
        console.print(text, highlight=False)
