"""Operator commands: run the engine; simulate, inspect, time-travel, verify, audit, export and import rooms."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import redis
import typer
import uvloop
from rich.table import Table

from almanac.events import codec, registry, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError, RuleError
from almanac.events.hashing import state_hash
from almanac.services.cli import app
from almanac.services.cli.common import console, error_console, fail, redis_url_for, settings_or_exit
from almanac.services.logging import configure_logging
from almanac.services.rooms import CommandRecord, Outcome, RoomService, decode_record
from almanac.services.store.base import EventStore, StoredOutcome
from almanac.services.store.memory_store import MemoryEventStore
from almanac.services.verify import VerifyReport, verify_room

T = TypeVar("T")
EXPORT_FORMAT = "almanac-room-export"


class OperatorError(Exception):
    """Bad input or a missing room: shown as one line, exit code 1."""


# --- plumbing ---------------------------------------------------------------------------------


def _with_store(work: Callable[[EventStore], Awaitable[T]]) -> T:
    """Run ``work`` against the Redis store of the settings; every failure becomes one clear line."""
    from almanac.services.redis_client import connect  # noqa: PLC0415
    from almanac.services.store.redis_store import RedisEventStore  # noqa: PLC0415

    settings = settings_or_exit()

    async def run(url: str) -> T:
        client = connect(url, cluster=settings.redis_cluster)
        try:
            return await work(RedisEventStore(client, settings.shard_count))
        finally:
            await client.aclose()

    with redis_url_for(settings) as url:
        return _guarded(lambda: asyncio.run(run(url)), f"Redis at {url}")


def _guarded(call: Callable[[], T], where: str = "") -> T:
    try:
        return call()
    except OperatorError as error:
        raise fail(str(error)) from None
    except CorruptEventError as error:
        raise fail(f"corrupt log: {error}") from None
    except redis.RedisError as error:
        raise fail(f"cannot use {where or 'Redis'}: {error}") from None


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _summary(ruleset: str, event: Any) -> str:
    return room_rules.summarize_event(ruleset, event)


async def _envelopes(store: EventStore, room: str) -> list[Envelope]:
    envelopes = await store.read(room)
    if not envelopes:
        raise OperatorError(f"room {room!r} not found (it has no events)")
    return envelopes


def _fold(envelopes: list[Envelope]) -> room_rules.RoomState:
    state = None
    for envelope in envelopes:
        state = room_rules.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
    assert state is not None
    return state


def _state_document(state: room_rules.RoomState) -> dict[str, Any]:
    decider = registry.get(state.ruleset)
    return {
        "room": state.room,
        "ruleset": state.ruleset,
        "version": state.version,
        "players": list(state.players),
        "ended": state.ended,
        "scores": decider.scores(state.game),
        "state_hash": state_hash(state),
        "state": codec.to_builtins(state),
    }


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")


def _check_version(version: int, latest: int, option: str) -> None:
    if not 1 <= version <= latest:
        raise OperatorError(f"{option} {version} is out of range: the room has versions 1 to {latest}")


# --- engine -----------------------------------------------------------------------------------


@app.command("engine")
def engine_command(
    shards: str = typer.Option(None, help='Shards to own: "all", "0,3,5", or "index/count" of a worker group.'),
    name: str = typer.Option(None, help="Stable engine name (consumer name, metrics key); default host:shards."),
) -> None:
    """Run one engine: own shards by lease and turn their commands into events until stopped."""
    from almanac.services.engine.app import run  # noqa: PLC0415 - keep the CLI start fast

    settings = settings_or_exit(engine_shards=shards, engine_name=name)
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings) as url:
        try:
            redis.Redis.from_url(url, socket_connect_timeout=2).ping()
        except redis.RedisError as error:
            raise fail(f"cannot reach Redis at {url}: {error}") from None
        uvloop.run(run(settings, url))  # uvloop: less CPU per command on a 2-core machine


# --- sim --------------------------------------------------------------------------------------


class ScenarioHeader(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ruleset: str
    options: dict[str, Any] = {}
    seed: str = ""
    challenge: str | None = None
    room: str = "sim"
    player: str = "player"
    time_ms: int = 0


class ScenarioMove(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    player: str
    time_ms: int
    command: dict[str, Any]


def load_scenario(path: Path) -> tuple[ScenarioHeader, list[tuple[int, ScenarioMove]]]:
    """A scenario file: the header line, then (line number, move) for each command line."""
    try:
        text = path.read_text()
    except OSError as error:
        raise OperatorError(f"cannot read {path}: {error.strerror}") from None
    header: ScenarioHeader | None = None
    moves: list[tuple[int, ScenarioMove]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            if header is None:
                header = msgspec.json.decode(line, type=ScenarioHeader)
            else:
                moves.append((number, msgspec.json.decode(line, type=ScenarioMove)))
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            kind = "header" if header is None else "command"
            raise OperatorError(f"{path}:{number}: not a valid scenario {kind} line: {error}") from None
    if header is None:
        raise OperatorError(f"{path}: no header line (the first line names the rule-set and setup)")
    return header, moves


async def run_scenario(header: ScenarioHeader, moves: list[tuple[int, ScenarioMove]],
                       at: int | None = None) -> tuple[list[tuple[int, str, str, Outcome]], room_rules.RoomState]:
    """Play a scenario in memory; returns (line, player, kind, outcome) per command and the state."""
    store = MemoryEventStore()
    if header.seed:
        await store.save_seed(header.room, hashlib.sha256(header.seed.encode()).digest())
    service = RoomService(store)
    create = CommandRecord(command_id="line-header", room=header.room, player=header.player,
                           server_time_ms=header.time_ms,
                           body={"kind": "create_room", "ruleset": header.ruleset, "options": header.options,
                                 "challenge": header.challenge})
    created = await service.handle(create)
    if not created.accepted:
        raise OperatorError(f"the header cannot create the room: {created.error['message']}")  # type: ignore[index]
    played = [(0, header.player, "create_room", created)]
    for number, move in moves:
        record = CommandRecord(command_id=f"line-{number}", room=header.room, player=move.player,
                               server_time_ms=move.time_ms, body=move.command)
        played.append((number, move.player, str(move.command.get("kind", "?")), await service.handle(record)))
    latest = await store.latest_version(header.room)
    if at is not None:
        _check_version(at, latest, "--at")
    state, _ = await service.load(header.room, at)
    assert state is not None
    return played, state


@app.command("sim")
def sim_command(
    file: Annotated[Path, typer.Argument(help="Scenario file (JSON lines; see docs/architecture.md).")],
    at: int = typer.Option(None, "--at", help="Show the state at this version instead of the last."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """Run a scenario file in memory (no Redis): each command's result, then state, scores and hash."""

    def run() -> tuple[list[tuple[int, str, str, Outcome]], room_rules.RoomState]:
        header, moves = load_scenario(file)
        return asyncio.run(run_scenario(header, moves, at))

    try:
        played, state = _guarded(run)
    except RuleError as error:
        raise fail(f"{file}: {error.message}") from None
    document = _state_document(state)
    if as_json:
        document["commands"] = [
            {"line": line, "player": player, "kind": kind, "accepted": o.accepted,
             "versions": [o.first_version, o.last_version] if o.accepted else None, "error": o.error}
            for line, player, kind, o in played
        ]
        _print_json(document)
        return
    table = Table(title=f"{file} ({state.ruleset})")
    for column in ("line", "player", "command", "result"):
        table.add_column(column)
    for line, player, kind, outcome in played:
        result = (f"v{outcome.first_version}-{outcome.last_version}" if outcome.accepted
                  else f"[red]refused[/] {outcome.error['code']}: {outcome.error['message']}")  # type: ignore[index]
        table.add_row(str(line) if line else "header", player, kind, result)
    console.print(table)
    _print_state(document)


def _print_state(document: dict[str, Any]) -> None:
    console.print_json(json.dumps(document["state"]["game"], default=str))
    console.print(f"room {document['room']} ({document['ruleset']}) at version {document['version']}"
                  f"{' (ended)' if document['ended'] else ''}; players: {', '.join(document['players']) or '-'}")
    console.print(f"scores: {json.dumps(document['scores'])}")
    console.print(f"state hash: {document['state_hash']}")


# --- log --------------------------------------------------------------------------------------


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
        envelopes = await _envelopes(store, room)
        latest = envelopes[-1].version
        for value, option in ((from_version, "--from"), (to_version, "--to")):
            if value is not None:
                _check_version(value, latest, option)
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
            rows.append((envelope, _summary(envelope.ruleset, codec.decode_event(envelope))))
        return rows

    rows = _with_store(work)
    table = Table(title=f"room {room}")
    for column in ("version", "time (UTC)", "player", "type", "summary"):
        table.add_column(column, overflow="fold")
    for envelope, summary in rows:
        table.add_row(str(envelope.version), _time(envelope.server_time_ms), envelope.player, envelope.type, summary)
    console.print(table)
    if not rows:
        error_console.print("no events match the filters")


# --- state ------------------------------------------------------------------------------------


def state_diff(before: Any, after: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, before, after) for every leaf that differs between two builtin documents."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes = []
        for key in list(before) + [k for k in after if k not in before]:
            child = f"{path}.{key}" if path else str(key)
            if key not in after:
                changes.append((child, before[key], "(absent)"))
            elif key not in before:
                changes.append((child, "(absent)", after[key]))
            else:
                changes.extend(state_diff(before[key], after[key], child))
        return changes
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        changes = []
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            changes.extend(state_diff(old, new, f"{path}[{index}]"))
        return changes
    return [] if before == after else [(path, before, after)]


@app.command("state")
def state_command(
    room: str = typer.Argument(..., help="Room id."),
    at: int = typer.Option(None, "--at", help="The state as it was at this version (default: the latest)."),
    at_time: int = typer.Option(None, "--at-time", help="The state as it was at this server time (ms)."),
    diff: int = typer.Option(None, "--diff", help="Show what changed between this version and the shown one."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Time travel: the room's state at a version or a time, and what changed since another version."""
    if at is not None and at_time is not None:
        raise fail("give --at or --at-time, not both")

    async def work(store: EventStore) -> tuple[dict[str, Any], dict[str, Any] | None]:
        envelopes = await _envelopes(store, room)
        latest = envelopes[-1].version
        version = latest if at is None else at
        if at_time is not None:
            before = [e.version for e in envelopes if e.server_time_ms <= at_time]
            if not before:
                raise OperatorError(f"the room did not exist at {at_time} ms (created at "
                                    f"{envelopes[0].server_time_ms} ms)")
            version = before[-1]
        _check_version(version, latest, "--at")
        shown = _state_document(_fold(envelopes[:version]))
        earlier = None
        if diff is not None:
            _check_version(diff, latest, "--diff")
            earlier = _state_document(_fold(envelopes[:diff]))
        return shown, earlier

    shown, earlier = _with_store(work)
    if earlier is not None:
        changes = state_diff(earlier["state"], shown["state"])
        if as_json:
            _print_json({"from": earlier["version"], "to": shown["version"],
                         "changes": [{"path": p, "before": b, "after": a} for p, b, a in changes]})
            return
        table = Table(title=f"room {room}: version {earlier['version']} -> {shown['version']}")
        for column in ("path", f"at v{earlier['version']}", f"at v{shown['version']}"):
            table.add_column(column, overflow="fold")
        for path, before, after in changes:
            table.add_row(path, json.dumps(before, default=str), json.dumps(after, default=str))
        console.print(table)
        console.print(f"{len(changes)} change(s)")
        return
    if as_json:
        _print_json(shown)
    else:
        _print_state(shown)


# --- verify -----------------------------------------------------------------------------------


def _print_report(report: VerifyReport) -> None:
    if report.ok:
        console.print(f"[green]ok[/] {report.room}: {report.chain_checked} events chained, "
                      f"{report.commands_redecided} commands re-decided, {report.refusals_rechecked} refusals re-checked, "
                      f"seed {report.seed}"
                      + (", matches its commitment" if report.seed_matches_commitment else ""))
    else:
        divergence = report.divergence
        assert divergence is not None
        where = f" at version {divergence.version}" if divergence.version is not None else ""
        console.print(f"[red]FAILED[/] {report.room}: {divergence.check} check{where}: {divergence.message}")
        if divergence.recorded is not None or divergence.recomputed is not None:
            console.print("recorded:")
            console.print_json(json.dumps(divergence.recorded, default=str))
            console.print("recomputed:")
            console.print_json(json.dumps(divergence.recomputed, default=str))
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
        exported = _guarded(lambda: read_export(file))
        reports = [_guarded(lambda: asyncio.run(verify_room(exported, exported.room)))]  # type: ignore[arg-type]
    else:
        async def work(store: EventStore) -> list[VerifyReport]:
            rooms = await store.rooms() if all_rooms else [room]
            if room and not await store.latest_version(room):
                raise OperatorError(f"room {room!r} not found (it has no events)")
            return [await verify_room(store, name) for name in rooms]

        reports = _with_store(work)
    for report in reports:
        _print_report(report)
    if all_rooms:
        console.print(f"{sum(r.ok for r in reports)} of {len(reports)} rooms verified")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


# --- audit ------------------------------------------------------------------------------------

@app.command("audit")
def audit_command(
    room: str = typer.Argument(..., help="Room id."),
    view: str = typer.Argument(..., help="An audit view of the room's rule-set (e.g. realm's `trade`)."),
    item: str = typer.Argument(..., help="What to follow (e.g. a trade id; see `almanac log ROOM`)."),
) -> None:
    """One thing's whole story from the log, told by the rule-set's audit view; refusals in between."""

    async def work(store: EventStore) -> tuple[list[tuple[Envelope, dict]], list[tuple[CommandRecord, dict]]]:
        envelopes = await _envelopes(store, room)
        manifest = registry.manifest(envelopes[0].ruleset)
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

    steps, refused = _with_store(work)
    console.print(f"[bold]{view} {item}[/] in room {room}: {len(steps)} step(s)")
    timeline: list[tuple[int, int, str]] = []
    for number, (envelope, step) in enumerate(steps, start=1):
        details = {k: v for k, v in step.items() if k not in ("type", "step", "text", "version")}
        text = (f"[bold]step {step.get('step', number)}[/] v{envelope.version} {_time(envelope.server_time_ms)} "
                f"{envelope.type} (by {envelope.player})\n  {step.get('text', '')}\n  {json.dumps(details, default=str)}")
        timeline.append((envelope.server_time_ms, 0, text))
    for record, error in refused:
        text = (f"[red]refused[/] {_time(record.server_time_ms)} {record.player}: {json.dumps(record.body)}\n"
                f"  {error.get('code', '?')}: {error.get('message', '')}")
        timeline.append((record.server_time_ms, 1, text))
    for _, _, text in sorted(timeline, key=lambda item: (item[0], item[1])):
        console.print(text, highlight=False)


# --- export / import --------------------------------------------------------------------------


class ExportedRoom:
    """An exported room file, readable by ``verify_room`` like a store (offline verification)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.room: str = document["room"]
        self.envelopes: list[bytes] = [base64.b64decode(e) for e in document["envelopes"]]
        self.command_list: list[tuple[int, bytes]] = [(int(v), base64.b64decode(c)) for v, c in document["commands"]]
        self.rejection_list: list[tuple[bytes, dict]] = [
            (base64.b64decode(r["record"]), r.get("error") or {}) for r in document["rejections"]
        ]
        self.seed: bytes | None = bytes.fromhex(document["seed"]) if document.get("seed") else None

    async def read_raw(self, room: str, start: int = 1, end: int | None = None) -> list[tuple[int, bytes]]:
        return list(enumerate(self.envelopes, start=1))

    async def read(self, room: str, start: int = 1, end: int | None = None) -> list[Envelope]:
        return [codec.decode_envelope(data, room, version) for version, data in await self.read_raw(room)]

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        return list(self.command_list)

    async def load_seed(self, room: str) -> bytes | None:
        return self.seed

    async def rejections(self, room: str) -> list[bytes]:
        return [record for record, _ in self.rejection_list]

    async def outcome(self, room: str, command_id: str) -> StoredOutcome | None:
        for record, error in self.rejection_list:
            if decode_record(record).command_id == command_id:
                return StoredOutcome(room=room, error=error)
        return None


def read_export(path: Path) -> ExportedRoom:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise OperatorError(f"cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise OperatorError(f"{path} is not an exported room (not JSON: {error})") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise OperatorError(f"{path} is not an exported room (format is not {EXPORT_FORMAT!r})")
    try:
        return ExportedRoom(document)
    except (KeyError, TypeError, ValueError) as error:
        raise OperatorError(f"{path} is a damaged export: {error}") from None


@app.command("export")
def export_command(room: str = typer.Argument(..., help="Room id.")) -> None:
    """Write the room's full log (events, commands, refusals, the seed once revealed) as JSON to stdout."""

    async def work(store: EventStore) -> dict[str, Any]:
        envelopes = await _envelopes(store, room)
        raw = await store.read_raw(room)  # type: ignore[attr-defined]
        rejections = []
        for data in await store.rejections(room):
            outcome = await store.outcome(room, decode_record(data).command_id)
            rejections.append({"record": base64.b64encode(data).decode(), "error": outcome.error if outcome else None})
        ended = [codec.decode_event(e) for e in envelopes if e.type == "room.ended"]
        return {
            "format": EXPORT_FORMAT,
            "format_version": 1,
            "room": room,
            "ruleset": envelopes[0].ruleset,
            "exported_at_ms": int(time.time() * 1000),
            # Only a revealed seed leaves the server: a live room's secret stays secret.
            "seed": ended[-1].revealed_seed if ended else None,
            "envelopes": [base64.b64encode(data).decode() for _, data in raw],
            "commands": [[version, base64.b64encode(data).decode()] for version, data in await store.commands(room)],
            "rejections": rejections,
        }

    sys.stdout.write(json.dumps(_with_store(work)) + "\n")


@app.command("import")
def import_command(file: Annotated[Path, typer.Argument(help="A file written by `almanac export`.")]) -> None:
    """Load an exported room into Redis, after verifying it; refuses a room id that already exists."""
    exported = _guarded(lambda: read_export(file))
    report = _guarded(lambda: asyncio.run(verify_room(exported, exported.room)))  # type: ignore[arg-type]
    if not report.ok:
        _print_report(report)
        raise fail(f"{file} does not verify; nothing imported")

    async def work(store: EventStore) -> int:
        room = exported.room
        if await store.latest_version(room):
            raise OperatorError(f"room {room!r} already exists; nothing imported")
        envelopes = await exported.read(room)
        spans = exported.command_list
        for index, (first_version, record_bytes) in enumerate(spans):
            last_version = spans[index + 1][0] - 1 if index + 1 < len(spans) else len(envelopes)
            record = decode_record(record_bytes)
            await store.append(room, first_version - 1, record.command_id, envelopes[first_version - 1:last_version],
                               record_bytes)
        for record_bytes, error in exported.rejection_list:
            await store.record_rejection(room, decode_record(record_bytes).command_id, error, record_bytes)
        if exported.seed is not None:
            await store.save_seed(room, exported.seed)
        return len(envelopes)

    count = _with_store(work)
    console.print(f"imported room {exported.room}: {count} events, {len(exported.command_list)} commands, "
                  f"{len(exported.rejection_list)} refusals")
