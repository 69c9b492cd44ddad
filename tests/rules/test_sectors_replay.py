"""Storing and replaying a colony: codec round trips, snapshots, hash stability across processes, the example scenario."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from game_modules import game_module, game_names
from sectors_sandbox import Sandbox
from test_sectors_support import stored as stored_log

from almanac.events import codec, room
from almanac.events.decider import Context
from almanac.events.dice import Dice, seed_commitment
from almanac.events.envelope import GENESIS_HASH
from almanac.events.errors import RuleError
from almanac.events.hashing import first_broken_link, state_hash

DECIDER = game_module("sectors@1", "game").DECIDER
(Build, Demolish, EndSeason, Explore, MovePeople) = game_names(
    "sectors@1", "commands", "Build", "Demolish", "EndSeason", "Explore", "MovePeople")

ROOT = Path(__file__).resolve().parents[2]


def played_colony() -> Sandbox:
    """A colony that has used every command, so its log holds every event type."""
    game = Sandbox(
        {
            "setup": {
                "rows": 3,
                "columns": 3,
                "stock": {"food": 500, "wood": 300, "gold": 60, "lumber": 30, "coins": 8},
                "sectors": [
                    {
                        "row": 1,
                        "column": 1,
                        "type": "prairie",
                        "population": 220,
                        "buildings": ["kitchen", "factory"],
                    },
                    {"row": 1, "column": 2, "type": "mountain", "population": 40, "buildings": ["mine"]},
                ],
            }
        },
        secret_seed=b"replay",
    )
    game.play(Explore(row=0, column=1))
    game.play(MovePeople(from_row=1, from_column=1, to_row=0, to_column=1, count=9))
    game.play(Build(row=1, column=1, building="farm"))
    game.play(Build(row=1, column=2, building="mint"))
    for _ in range(5):
        game.play(EndSeason())
    game.play(Demolish(row=1, column=1, position=0, building="kitchen"))
    game.play(EndSeason())
    return game


def test_every_event_round_trips_through_the_codec_as_a_stored_envelope():
    game = played_colony()
    stored = stored_log(game)
    assert {envelope.type for envelope in stored} >= {
        event_type.__struct_config__.tag for event_type in DECIDER.event_types
    }
    assert first_broken_link(stored, GENESIS_HASH) is None
    for (_, event), envelope in zip(game.log, stored, strict=True):
        decoded_envelope = codec.decode_envelope(
            codec.encode_envelope(envelope), game.room_id, envelope.version
        )
        assert codec.decode_event(decoded_envelope) == event


def test_folding_the_decoded_log_from_the_start_gives_the_played_state():
    game = played_colony()
    state = None
    for envelope in stored_log(game):
        state = room.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
    assert state == game.state
    assert state_hash(state) == state_hash(game.state)


def test_a_snapshot_decodes_to_the_same_state_and_folding_on_from_it_agrees():
    game = played_colony()
    stored = stored_log(game)
    middle = len(stored) // 2
    state = None
    for envelope in stored[:middle]:
        state = room.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)
    restored, last_hash = codec.decode_snapshot(codec.encode_snapshot(state, stored[middle - 1].hash))
    assert restored == state and last_hash == stored[middle - 1].hash
    for envelope in stored[middle:]:
        restored = room.evolve(restored, codec.decode_event(envelope), envelope.room, envelope.version)
    assert restored == game.state


def test_commands_decode_from_json_bodies_and_a_mistyped_field_is_refused_by_name():
    assert codec.decode_command("sectors", {"kind": "explore", "row": 1, "column": 2}) == Explore(
        row=1, column=2
    )
    assert codec.decode_command("sectors", {"kind": "end_season"}) == EndSeason()
    with pytest.raises(RuleError) as caught:
        codec.decode_command("sectors", {"kind": "build", "row": "one", "column": 2, "building": "farm"})
    assert (caught.value.code, caught.value.field) == ("invalid_command", "row")
    with pytest.raises(RuleError) as caught:
        codec.decode_command("sectors", {"kind": "conquer"})
    assert caught.value.code == "unknown_command"
    assert {"explore", "move_people", "build", "demolish", "end_season"} <= set(caught.value.allowed)


def test_the_state_hash_is_the_same_in_a_process_with_another_hash_seed():
    game = played_colony()
    stored = [codec.encode_envelope(envelope) for envelope in stored_log(game)]
    script = (
        "import sys, msgspec\n"
        "from almanac.events import codec, room\n"
        "from almanac.events.hashing import state_hash\n"
        "state = None\n"
        "for version, data in enumerate(msgspec.msgpack.decode(sys.stdin.buffer.read()), start=1):\n"
        "    envelope = codec.decode_envelope(data, 'sandbox', version)\n"
        "    state = room.evolve(state, codec.decode_event(envelope), envelope.room, envelope.version)\n"
        "print(state_hash(state))\n"
    )
    hashes = set()
    for hash_seed in ("1", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", script],
            input=msgspec.msgpack.encode(stored),
            capture_output=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)},
            check=True,
            timeout=60,
        )
        hashes.add(result.stdout.decode().strip())
    assert hashes == {state_hash(game.state)}


def test_the_example_scenario_plays_with_exactly_the_refusals_it_announces():
    lines = [
        json.loads(line)
        for line in (ROOT / "examples" / "sectors.jsonl").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    head, commands = lines[0], lines[1:]
    assert 15 <= len(commands) <= 30
    secret = hashlib.sha256(head["seed"].encode()).digest()
    state: room.RoomState | None = None
    refused: list[str] = []

    def context(player: str, now_ms: int) -> Context:
        version = state.version + 1 if state is not None else 1
        return Context(
            room=head["room"],
            player=player,
            now_ms=now_ms,
            version=version,
            dice=Dice(secret, head["room"], version),
            seed_commitment=seed_commitment(secret),
            secret_seed_hex=secret.hex(),
        )

    def apply(events: list[Any]) -> None:
        nonlocal state
        for event in events:
            state = room.evolve(state, event, head["room"], state.version + 1 if state is not None else 1)

    create = room.CreateRoom(ruleset=head["ruleset"], options=head["options"], challenge=head["challenge"])
    apply(room.decide(None, create, context(head["player"], head["time_ms"])))
    for line in commands:
        command = codec.decode_command("sectors", line["command"])
        try:
            apply(room.decide(state, command, context(line["player"], line["time_ms"])))
        except RuleError as error:
            refused.append(error.code)
    assert refused == ["sectors.not_adjacent", "sectors.insufficient_stock", "sectors.not_enough_people"]
    assert state is not None and (state.game.season, state.game.year) == ("fall", 2)
