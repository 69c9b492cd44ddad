"""The one room step and its public test driver: given these commands, when this one, then these events or this error."""

from __future__ import annotations

import pytest
from counter_ruleset import Added, Rolled

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH
from almanac.events.errors import InvalidCommand, RuleError
from almanac.events.room import PlayerJoined, RoomCreated
from almanac.events.step import CommandRecord, decode_record, refusal_record, replay, step
from almanac.events.testing import RoomDriver, given_events, scripted

SEED = b"k" * 32
CREATE = {"kind": "create_room", "ruleset": "counter"}


def counter_room() -> RoomDriver:
    return RoomDriver("counter-1", SEED).given(("ann", CREATE), ("ann", {"kind": "join_room"}))


def test_given_a_room_when_a_player_adds_then_the_counter_has_grown():
    room = counter_room()

    then = room.when("ann", {"kind": "add", "amount": 3})

    assert then.accepted(Added) == [Added(amount=3)]
    assert room.game.total == 3


def test_a_refused_command_is_answered_with_its_rule_error_and_changes_nothing():
    room = counter_room()
    before = room.state

    error = room.when("ann", {"kind": "add", "amount": 0}).refused("counter.amount_not_positive")

    assert error.field == "amount"
    assert room.state is before and room.version == 2


def test_scripted_dice_decide_the_roll_and_must_all_be_drawn():
    room = counter_room()

    assert room.when("ann", {"kind": "roll", "dice": 2}, dice=[5, 0]).accepted(Rolled) == [Rolled(faces=(6, 1))]
    with pytest.raises(AssertionError, match="not drawn"):
        room.send("ann", {"kind": "roll", "dice": 1}, dice=scripted(1, 2))


def test_the_driver_log_is_a_sealed_chain_that_replays_to_the_live_state():
    room = counter_room().given(("ann", {"kind": "add", "amount": 2}), ("ann", {"kind": "roll", "dice": 3}))

    assert [e.version for e in room.envelopes] == [1, 2, 3, 4]
    assert room.envelopes[0].previous_hash == GENESIS_HASH
    assert all(b.previous_hash == a.hash for a, b in zip(room.envelopes, room.envelopes[1:], strict=False))
    assert room.replayed() == room.state
    assert isinstance(room.events[0], RoomCreated) and isinstance(room.events[1], PlayerJoined)


def test_the_step_is_pure_the_same_inputs_give_the_same_bytes():
    room = counter_room()
    record = CommandRecord(command_id="c9", room="counter-1", player="ann", server_time_ms=5, body={"kind": "roll", "dice": 4})

    first, state_one = step(room.state, room.last_hash, record, SEED)
    second, state_two = step(room.state, room.last_hash, record, SEED)

    assert [codec.encode_envelope(e) for e in first] == [codec.encode_envelope(e) for e in second]
    assert state_one == state_two == replay(first, room.state)


def test_a_room_without_its_secret_seed_cannot_decide_dice():
    room = counter_room()
    record = CommandRecord(command_id="c9", room="counter-1", player="ann", server_time_ms=5, body={"kind": "roll"})

    with pytest.raises(RuleError) as refused:
        step(room.state, room.last_hash, record, None)

    assert refused.value.code == "seed_missing"
    assert isinstance(refused.value, InvalidCommand)  # never recorded: the log alone could not decide it again


def test_a_refusal_record_carries_the_version_it_was_refused_at():
    room = counter_room()
    record = CommandRecord(command_id="c9", room="counter-1", player="ann", server_time_ms=5, body={"kind": "add"})

    assert decode_record(refusal_record(record, room.state)).refused_at_version == 2


def test_given_events_seal_a_log_that_replays():
    room = counter_room().given(("ann", {"kind": "add", "amount": 4}))

    resealed = given_events("counter-1", "counter", room.events)

    assert replay(resealed) == room.state


def test_a_state_hash_leaves_out_player_keys_only_while_no_seat_signs():
    # Why: player_keys came after the golden corpus hashed its states (tests/golden keeps them unchanged); an
    # empty one must not move those hashes, and a set one must be covered exactly as the Struct encodes it.
    import hashlib  # noqa: PLC0415

    import msgspec  # noqa: PLC0415

    from almanac.events.hashing import canonical_bytes, state_hash  # noqa: PLC0415
    from almanac.events.room import RoomState  # noqa: PLC0415

    signing = RoomState(room="r", ruleset="counter", version=2, seed_commitment="c", challenge=None, created_by="ann",
                        created_at_ms=1, players=("ann",), player_keys=(("ann", "ab" * 32),))
    plain = msgspec.structs.replace(signing, player_keys=())
    # The seat handover's fields came later still: empty, they are left out of a signing room's hash as well.
    handover = ("bot_after_missed", "missed", "bot_seats", "seat_bots_only")
    signed = msgspec.msgpack.decode(canonical_bytes(signing))
    for name in handover:
        del signed[name]
    assert state_hash(signing) == hashlib.sha256(msgspec.msgpack.encode(signed)).hexdigest()
    # A room whose policy hands missed seats over hashes as it did before seat_bots_only existed (False: left out)
    handed = msgspec.structs.replace(signing, bot_after_missed=2, missed=(("ann", 1),), bot_seats=("bob",))
    before = msgspec.msgpack.decode(canonical_bytes(handed))
    del before["seat_bots_only"]
    assert state_hash(handed) == hashlib.sha256(msgspec.msgpack.encode(before)).hexdigest()
    every = msgspec.structs.replace(handed, seat_bots_only=True)  # (not a state the room folds: every field set)
    assert state_hash(every) == hashlib.sha256(canonical_bytes(every)).hexdigest()

    whole = msgspec.msgpack.decode(canonical_bytes(plain))
    for name in ("player_keys", *handover):
        del whole[name]
    # The map the hash covers is the state's own encoding minus the empty field, in the same order (the decoded
    # maps keep their encoded order; an encoder that keeps it re-encodes the same bytes).
    expected = msgspec.msgpack.encode(whole)
    assert list(msgspec.msgpack.decode(expected)) == [f for f in plain.__struct_fields__
                                                      if f not in ("player_keys", *handover)]
    assert state_hash(plain) == hashlib.sha256(expected).hexdigest()
