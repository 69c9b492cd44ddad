"""The kernel: room lifecycle, rule errors, the hash chain, canonical state hashes across processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from game_driver import PureRoom, fold_envelopes

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH
from almanac.events.errors import RuleError
from almanac.events.hashing import first_broken_link, state_hash

ROOT = Path(__file__).resolve().parents[2]


def counter_game(commands: int = 20) -> PureRoom:
    game = PureRoom()
    game.send("alice", {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["alice", "bob"]}})
    game.send("alice", {"kind": "join_room"})
    game.send("bob", {"kind": "join_room"})
    for index in range(commands):
        player = "alice" if index % 2 else "bob"
        body = {"kind": "add", "amount": index + 1} if index % 3 else {"kind": "roll", "dice": 2}
        game.send(player, body, now_ms=2_000 + index)
    return game


def test_a_created_room_records_the_seed_commitment_not_the_seed():
    game = PureRoom(seed=b"k" * 32)
    [created] = game.send("alice", {"kind": "create_room", "ruleset": "counter"})
    assert created.type == "room.created"
    event = codec.decode_event(created)
    import hashlib

    assert event.seed_commitment == hashlib.sha256(b"k" * 32).hexdigest()
    assert (b"k" * 32).hex().encode() not in created.payload


def test_ending_a_room_reveals_the_seed_that_matches_the_commitment():
    game = counter_game(3)
    [ended] = game.send("alice", {"kind": "end_room"})
    event = codec.decode_event(ended)
    import hashlib

    assert hashlib.sha256(bytes.fromhex(event.revealed_seed)).hexdigest() == game.state.seed_commitment
    with pytest.raises(RuleError) as refused:
        game.send("alice", {"kind": "add", "amount": 1})
    assert refused.value.code == "room_ended"


def test_a_command_from_a_player_who_has_not_joined_is_refused_and_changes_nothing():
    game = PureRoom()
    game.send("alice", {"kind": "create_room", "ruleset": "counter"})
    before = game.state
    with pytest.raises(RuleError) as refused:
        game.send("mallory", {"kind": "add", "amount": 1})
    assert refused.value.code == "not_joined" and refused.value.field == "player"
    assert game.state == before


def test_a_player_without_a_seat_cannot_join():
    game = PureRoom()
    game.send("alice", {"kind": "create_room", "ruleset": "counter", "options": {"seats": ["alice"]}})
    with pytest.raises(RuleError) as refused:
        game.send("bob", {"kind": "join_room"})
    assert refused.value.code == "no_seat" and refused.value.allowed == ["alice"]


def test_bad_commands_name_the_field_and_what_is_allowed():
    game = counter_game(0)
    with pytest.raises(RuleError) as wrong_type:
        game.send("alice", {"kind": "add", "amount": "ten"})
    assert wrong_type.value.code == "invalid_command" and wrong_type.value.field == "amount"
    assert "int" in wrong_type.value.message
    with pytest.raises(RuleError) as unknown:
        game.send("alice", {"kind": "fly"})
    assert unknown.value.code == "unknown_command" and "add" in unknown.value.allowed
    with pytest.raises(RuleError) as unknown_ruleset:
        PureRoom().send("alice", {"kind": "create_room", "ruleset": "chess"})
    assert unknown_ruleset.value.code == "unknown_ruleset" and "counter" in unknown_ruleset.value.allowed
    with pytest.raises(RuleError) as bad_option:
        PureRoom().send("alice", {"kind": "create_room", "ruleset": "counter", "options": {"limit": "x"}})
    assert bad_option.value.field == "options.limit"


def test_a_game_that_ends_reveals_its_seed_in_the_same_command():
    game = PureRoom()
    game.send("alice", {"kind": "create_room", "ruleset": "counter", "options": {"limit": 5}})
    game.send("alice", {"kind": "join_room"})
    envelopes = game.send("alice", {"kind": "add", "amount": 5})
    assert [e.type for e in envelopes] == ["counter.added", "room.ended"]
    assert game.state.ended


def test_the_hash_chain_holds_and_one_changed_byte_names_the_first_bad_version():
    game = counter_game(10)
    assert first_broken_link(game.envelopes, GENESIS_HASH) is None
    tampered = list(game.envelopes)
    victim = tampered[6]
    payload = bytearray(victim.payload)
    payload[-1] ^= 0x01
    tampered[6] = msgspec.structs.replace(victim, payload=bytes(payload))
    assert first_broken_link(tampered, GENESIS_HASH) == (7, "stored hash does not match the event's content")


def test_a_dropped_event_breaks_the_chain_at_its_place():
    game = counter_game(6)
    broken = game.envelopes[:3] + game.envelopes[4:]
    version, reason = first_broken_link(broken, GENESIS_HASH)
    assert version == 5 and "expected version 4" in reason


def test_folding_the_stored_log_equals_the_live_state():
    game = counter_game(30)
    assert fold_envelopes(game.envelopes) == game.state


def test_a_log_folded_in_another_process_with_another_hash_seed_gives_the_same_state_hash(tmp_path):
    game = counter_game(40)
    log = tmp_path / "log.msgpack"
    log.write_bytes(msgspec.msgpack.encode(game.envelopes))
    script = (
        "import sys, msgspec\n"
        f"sys.path[:0] = [{str(ROOT / 'tests')!r}]\n"
        "import conftest\n"
        "from almanac.events.envelope import Envelope\n"
        "from almanac.events.hashing import state_hash\n"
        "from game_driver import fold_envelopes\n"
        "envelopes = msgspec.msgpack.decode(open(sys.argv[1], 'rb').read(), type=list[Envelope])\n"
        "print(state_hash(fold_envelopes(envelopes)))\n"
    )
    hashes = set()
    for hash_seed in ("1", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", script, str(log)], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed}, cwd=ROOT,
        )
        hashes.add(result.stdout.strip())
    assert hashes == {state_hash(game.state)}


def test_the_state_hash_does_not_depend_on_dict_insertion_order():
    from counter_ruleset import CounterState

    one = CounterState(total=1, limit=2, seats=(), lucky_number=3, by_player={"a": 1, "b": 2})
    two = CounterState(total=1, limit=2, seats=(), lucky_number=3, by_player={"b": 2, "a": 1})
    assert state_hash(one) == state_hash(two)


def test_a_snapshot_round_trips_to_an_equal_state():
    game = counter_game(12)
    state, last_hash = codec.decode_snapshot(codec.encode_snapshot(game.state, game.envelopes[-1].hash))
    assert state == game.state and last_hash == game.envelopes[-1].hash


def test_a_missing_required_field_is_named():
    game = counter_game(0)
    with pytest.raises(RuleError) as missing:
        game.send("alice", {"kind": "add"})
    assert missing.value.code == "invalid_command" and missing.value.field == "amount"
    assert "'amount' is required" in missing.value.message
