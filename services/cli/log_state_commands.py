"""`almanac log ROOM` and `almanac state ROOM`: a room's history as events, and its state at any version or time."""

from __future__ import annotations

import typer
from rich.table import Table

from almanac.events import codec, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.forensics.state_paths import ROOM_FIELDS, state_tree
from almanac.events.forensics.tree_diff import change_rows, tree_diff
from almanac.events.step import replay
from almanac.services.bootstrap import Runtime
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    check_version,
    console,
    error_console,
    fail,
    print_changes,
    print_json,
    print_state,
    room_envelopes,
    state_document,
    utc_time,
    with_runtime,
    with_store,
)
from almanac.storage.base import EventStore


def _fold(envelopes: list[Envelope], base: room_rules.RoomState | None = None) -> room_rules.RoomState:
    state = replay(envelopes, base)
    assert state is not None
    return state


@app.command("log")
def log_command(
    room: str = typer.Argument(..., help="Room id."),
    event_type: str = typer.Option(None, "--type", help="Only events of this type (or type prefix, e.g. realm.)."),
    player: str = typer.Option(None, "--player", help="Only events caused by this player."),
    from_version: int = typer.Option(None, "--from", help="First version to show."),
    to_version: int = typer.Option(None, "--to", help="Last version to show."),
) -> None:
    """The room's events as a table: version, time, player, type, summary."""

    async def work(store: EventStore) -> list[tuple[Envelope, str]]:
        envelopes = await room_envelopes(store, room)
        latest = envelopes[-1].version
        for value, option in ((from_version, "--from"), (to_version, "--to")):
            if value is not None:
                check_version(value, latest, option)
        rows = []
        for envelope in envelopes:
            if from_version is not None and envelope.version < from_version:
                continue
            if to_version is not None and envelope.version > to_version:
                continue
            if event_type and not (envelope.type == event_type or envelope.type.startswith(event_type)):
                continue
            if player and envelope.player != player:
                continue
            rows.append((envelope, room_rules.summarize_recorded(envelope.ruleset, codec.decode_event(envelope),
                                                                   envelope.command_id)))
        return rows

    rows = with_store(work)
    table = Table(title=f"room {room}")
    for column in ("version", "time (UTC)", "player", "type", "summary"):
        table.add_column(column, overflow="fold")
    for envelope, summary in rows:
        table.add_row(str(envelope.version), utc_time(envelope.server_time_ms), envelope.player, envelope.type, summary)
    console.print(table)
    if not rows:
        error_console.print("no events match the filters")


@app.command("state")
def state_command(
    room: str = typer.Argument(..., help="Room id."),
    at: int = typer.Option(None, "--at", help="The state as it was at this version (default: the latest)."),
    at_time: int = typer.Option(None, "--at-time", help="The state as it was at this server time (ms)."),
    diff: int = typer.Option(None, "--diff",
                             help="Show what changed between this version and the shown one, the older first."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Time travel: the room's state at a version or a time, and what changed since another version."""
    if at is not None and at_time is not None:
        raise fail("give --at or --at-time, not both")

    async def work(runtime: Runtime) -> tuple[room_rules.RoomState, room_rules.RoomState | None]:
        envelopes = await room_envelopes(runtime.store, room)
        latest = envelopes[-1].version
        version = latest if at is None else at
        if at_time is not None:
            before = [e.version for e in envelopes if e.server_time_ms <= at_time]
            if not before:
                raise OperatorError(f"the room did not exist at {at_time} ms (created at "
                                    f"{envelopes[0].server_time_ms} ms)")
            version = before[-1]
        check_version(version, latest, "--at")
        base = await runtime.loader(0).base_of(envelopes[0])  # a fork folds onto its parent
        if diff is None:
            return _fold(envelopes[:version], base), None
        check_version(diff, latest, "--diff")
        # Older first whichever option names it, as a change reads (and `almanac diff` of a room and its fork)
        older, newer = sorted((version, diff))
        return _fold(envelopes[:newer], base), _fold(envelopes[:older], base)

    later, earlier = with_runtime(work)
    shown = state_document(later)
    if earlier is not None:
        # Under the path roots (room., scores., state.), as `almanac diff` prints: each path is one explain reads.
        changes = tree_diff(state_tree(earlier, ROOM_FIELDS), state_tree(later, ROOM_FIELDS))
        if as_json:
            print_json({"from": earlier.version, "to": later.version,
                        "changes": change_rows(state_tree(earlier, ROOM_FIELDS), state_tree(later, ROOM_FIELDS))})
            return
        print_changes(f"room {room}: version {earlier.version} -> {later.version}",
                      (f"at v{earlier.version}", f"at v{later.version}"), changes)
        console.print(f"{len(changes)} change(s)")
        return
    if as_json:
        print_json(shown)
    else:
        print_state(shown)
