"""`almanac sim FILE`: play a scenario file in memory (no Redis) through the engine's own room service."""

from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.table import Table

from almanac.events import codec, room as room_rules
from almanac.events.dice import NONCE_SCHEMES
from almanac.events.errors import InvalidCommand, RuleError
from almanac.events.schema import Milliseconds, Name, RulesetRef
from almanac.events.step import CommandRecord
from almanac.services.cli import app
from almanac.services.cli.common import (
    OperatorError,
    check_version,
    console,
    fail,
    guarded,
    print_json,
    print_state,
    state_document,
)
from almanac.services.room_service import Outcome, RoomService
from almanac.storage.memory_store import MemoryEventStore


class ScenarioHeader(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ruleset: RulesetRef  # "realm" (its default version) or "realm@2", as POST /rooms takes it
    options: dict[str, Any] = {}
    seed: Annotated[str, msgspec.Meta(max_length=1_000)] = ""
    challenge: str | None = None
    room: Name = "sim"
    player: Name = "player"
    time_ms: Milliseconds = 0
    # The room's bot policy, as POST /rooms takes it (room.bot_policy): checked against the rule-set the same way.
    seat_bots: bool = False
    bot_after_missed: room_rules.MissedDeadlines | None = None

    def create_body(self) -> dict[str, Any]:
        body = {"kind": "create_room", "ruleset": self.ruleset, "options": self.options, "challenge": self.challenge}
        if self.bot_after_missed is not None:
            body["bot_after_missed"] = self.bot_after_missed
        elif self.seat_bots:
            body["seat_bots"] = True
        return body


class ScenarioMove(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    player: Name
    time_ms: Milliseconds
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
        # The strict boundary, as the gateway applies it: a command that does not fit its schema is
        # refused here, with its line, before anything is played.
        try:
            if not moves:
                codec.decode_command(None, header.create_body())
                # the gateway's own check (POST /rooms answers it 422): a policy the rules cannot play is no room
                room_rules.check_bot_policy(header.ruleset, seat_bots=header.seat_bots,
                                            bot_after_missed=header.bot_after_missed)
            else:
                command = moves[-1][1].command
                if command.get("kind") == "join_room" and "nonce" in command:
                    # A player's own nonce (docs/dice.md): 32 bytes hex, kept aside; the join commits to it.
                    if not (isinstance(command["nonce"], str) and re.fullmatch(r"[0-9a-f]{64}", command["nonce"])):
                        raise InvalidCommand("invalid_command", "nonce: 32 bytes as 64 lowercase hex digits",
                                             field="nonce")
                    command = {k: v for k, v in command.items() if k != "nonce"}
                codec.decode_command(header.ruleset, command)
        except InvalidCommand as error:
            raise OperatorError(f"{path}:{number}: invalid command: {error.message}") from None
        except RuleError as error:
            if error.code in ("no_seat_bot", "no_deadlines"):
                raise OperatorError(f"{path}:{number}: {error.field}: {error.code}: {error.message}") from None
            # any other rule refusal (an unknown rule-set): the play shows it
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
                           body=header.create_body())
    created = await service.handle(create)
    if not created.accepted:
        raise OperatorError(f"the header cannot create the room: {created.error['message']}")  # type: ignore[index]
    played = [(0, header.player, "create_room", created)]
    for number, move in moves:
        body = move.command
        if body.get("kind") == "join_room" and isinstance(body.get("nonce"), str):
            # A player's own nonce, as a client sends it to the gateway: kept beside the seed, committed.
            nonce = bytes.fromhex(body["nonce"])  # checked by load_scenario
            body = {k: v for k, v in body.items() if k != "nonce"}
            body["nonce_commitment"] = await store.save_nonce(header.room, nonce)
        if header.seed and body.get("kind") == "join_room" and "nonce_commitment" not in body \
                and (await service.load(header.room))[0].dice_scheme in NONCE_SCHEMES:
            # The scenario's seed stands for the players' nonces too, so a scenario replays exactly.
            nonce = hashlib.sha256(f"almanac-sim-nonce|{header.seed}|{move.player}".encode()).digest()
            body = {**body, "nonce_commitment": await store.save_nonce(header.room, nonce)}
        record = CommandRecord(command_id=f"line-{number}", room=header.room, player=move.player,
                               server_time_ms=move.time_ms, body=body)
        played.append((number, move.player, str(move.command.get("kind", "?")), await service.handle(record)))
    latest = await store.latest_version(header.room)
    if at is not None:
        check_version(at, latest, "--at")
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
        played, state = guarded(run)
    except RuleError as error:
        raise fail(f"{file}: {error.message}") from None
    document = state_document(state)
    if as_json:
        document["commands"] = [
            {"line": line, "player": player, "kind": kind, "accepted": o.accepted,
             "versions": [o.first_version, o.last_version] if o.accepted else None, "error": o.error}
            for line, player, kind, o in played
        ]
        print_json(document)
        return
    table = Table(title=f"{file} ({state.ruleset})")
    for column in ("line", "player", "command", "result"):
        table.add_column(column)
    for line, player, kind, outcome in played:
        result = (f"v{outcome.first_version}-{outcome.last_version}" if outcome.accepted
                  else f"[red]refused[/] {outcome.error['code']}: {outcome.error['message']}")  # type: ignore[index]
        table.add_row(str(line) if line else "header", player, kind, result)
    console.print(table)
    print_state(document)
