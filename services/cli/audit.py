"""`almanac audit ROOM VIEW ID`: one thing's whole story from the log, told by the rule-set's audit view."""

from __future__ import annotations

import json

import typer

from almanac.events import codec, registry
from almanac.events.envelope import Envelope
from almanac.events.step import CommandRecord, decode_record
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, room_envelopes, utc_time, with_store
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
        manifest = registry.stored(envelopes[0].ruleset)  # the room's own version
        offered = manifest.audit_view(view)
        if offered is None:
            views = ", ".join(v.name for v in manifest.audit_views) or "none"
            raise OperatorError(f"room {room!r} is a {manifest.name} room; its audit views: {views}")
        pairs = [(e, codec.decode_event(e)) for e in envelopes]
        story = offered.steps(pairs, item)
        if not story:
            known = offered.ids(pairs)
            raise OperatorError(f"room {room!r} has no {view} {item!r}; its {view}s: {', '.join(known) or 'none'}")
        by_version = {e.version: e for e in envelopes}
        steps = [(by_version[step["version"]], step) for step in story]
        first_ms, last_ms = steps[0][0].server_time_ms, steps[-1][0].server_time_ms
        refused = []
        for data in await store.rejections(room):
            record = decode_record(data)
            mentions = item in json.dumps(record.body)
            if mentions or first_ms <= record.server_time_ms <= last_ms:
                outcome = await store.outcome(room, record.command_id)
                refused.append((record, (outcome.error if outcome else None) or {}))
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
