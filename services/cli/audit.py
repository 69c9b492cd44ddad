"""`almanac audit ...`: the whole story of one thing from the log (realm: one trade, with refusals in between)."""

from __future__ import annotations

import json

import typer

from almanac.events import codec
from almanac.events.envelope import Envelope
from almanac.events.step import CommandRecord, decode_record
from almanac.services.cli import app
from almanac.services.cli.common import OperatorError, console, room_envelopes, utc_time, with_store
from almanac.storage.base import EventStore

audit_app = typer.Typer(help="Audits: the whole story of one thing from the log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("trade")
def audit_trade_command(
    room: str = typer.Argument(..., help="Room id (a realm room)."),
    trade: str = typer.Argument(..., help="Trade id (see `almanac log ROOM --type realm.merchant_sent`)."),
) -> None:
    """Every step of one realm trade: dice, stars, phantom amounts, transfers, holdings; refusals in between."""

    async def work(store: EventStore) -> tuple[list[tuple[Envelope, dict]], list[tuple[CommandRecord, dict]]]:
        envelopes = await room_envelopes(store, room)
        if envelopes[0].ruleset != "realm":
            raise OperatorError(f"room {room!r} is a {envelopes[0].ruleset} room; trades exist in realm rooms")
        from almanac.events.realm import audit  # noqa: PLC0415

        pairs = [(e, codec.decode_event(e)) for e in envelopes]
        steps = [(e, ev) for e, ev in pairs if isinstance(ev, audit.TRADE_EVENTS) and ev.trade_id == trade]
        if not steps:
            known = audit.trade_ids(ev for _, ev in pairs)
            raise OperatorError(f"room {room!r} has no trade {trade!r}; its trades: {', '.join(known) or 'none'}")
        story = audit.trade_story([ev for _, ev in steps], trade)
        first_ms, last_ms = steps[0][0].server_time_ms, steps[-1][0].server_time_ms
        refused = []
        for data in await store.rejections(room):
            record = decode_record(data)
            mentions_trade = trade in json.dumps(record.body)
            if mentions_trade or first_ms <= record.server_time_ms <= last_ms:
                outcome = await store.outcome(room, record.command_id)
                refused.append((record, (outcome.error if outcome else None) or {}))
        return [(e, step) for (e, _), step in zip(steps, story, strict=True)], refused

    steps, refused = with_store(work)
    console.print(f"[bold]trade {trade}[/] in room {room}: {len(steps)} step(s)")
    timeline: list[tuple[int, int, str]] = []
    for envelope, step in steps:
        details = {k: v for k, v in step.items() if k not in ("type", "step", "text", "trade_id")}
        text = (f"[bold]step {step['step']}[/] v{envelope.version} {utc_time(envelope.server_time_ms)} "
                f"{step['type']} (by {envelope.player})\n  {step['text']}\n  {json.dumps(details, default=str)}")
        timeline.append((envelope.server_time_ms, 0, text))
    for record, error in refused:
        text = (f"[red]refused[/] {utc_time(record.server_time_ms)} {record.player}: {json.dumps(record.body)}\n"
                f"  {error.get('code', '?')}: {error.get('message', '')}")
        timeline.append((record.server_time_ms, 1, text))
    for _, _, text in sorted(timeline, key=lambda item: (item[0], item[1])):
        console.print(text, highlight=False)
