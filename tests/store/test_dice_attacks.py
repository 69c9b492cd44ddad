"""The operator attacks the dice of a new room (scheme 3, docs/dice.md) and fails: reorder, forged reveal, refusal, grinding.

Each story is the attack of an operator who holds Redis (the seed, every nonce) and mints tokens. Given a new
room (the engine picks its scheme), when the operator reorders commands, delays or refuses one and lets it
be resent, grinds its own seat's nonce, or acts for a player who signs, then no roll moves and a forged command
fails `verify`. Scheme 2 (keyed by room and version, before this) lost each of these (the refusal story runs on
both and shows it). Grinding seeds before the players commit fails under schemes 2 and 3 alike (its story says so).
"""

from __future__ import annotations

import hashlib

import msgspec
import pytest
from counter_ruleset import Rolled
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signed_rooms import ANN_NONCE, ROOM, Room, signed
from store_forgery import operator_appends

from almanac.events import codec, room as room_rules
from almanac.events.step import CommandRecord
from almanac.services.forensics.verify import verify_room
from almanac.storage.memory_store import MemoryEventStore


@pytest.mark.parametrize("scheme", [2, 3], ids=["scheme 2: the order picks the rolls", "scheme 3: it does not"])
async def test_reordering_two_players_commands_changes_no_roll(scheme):
    honest = await Room(MemoryEventStore()).open(dice_scheme=scheme)
    first = {"a1": await honest.roll("a1", "ann"), "b1": await honest.roll("b1", "bob")}

    # The operator puts bob's command first (both were pending at once)
    reordered = await Room(MemoryEventStore()).open(dice_scheme=scheme)
    second = {"b1": await reordered.roll("b1", "bob"), "a1": await reordered.roll("a1", "ann")}

    # Then on scheme 3 every command keeps its roll; scheme 2 keys rolls by version, and the order changes them (the
    # control: the story can tell the two apart)
    assert (first == second) is (scheme == 3), (first, second)


async def decided_then_dropped(room: Room, record: CommandRecord) -> tuple[int, ...]:
    """The operator's engine decides ``record`` (RoomService.decide_many, the first half of every batch: the events it
    would write, its roll among them) and the operator drops the decision: it never writes it (``write`` is not
    called), so nothing is recorded under the command's id and the client, answered nothing or an error, resends."""
    plan = await room.service.decide_many([record])
    [[(_, decided, _, _)]] = plan.held.values()
    return codec.decode_event(decided.envelopes[0]).faces


@pytest.mark.parametrize("scheme", [2, 3], ids=["scheme 2: the drop buys a re-roll", "scheme 3: it does not"])
async def test_a_refused_command_resent_with_the_same_id_later_gets_the_same_roll(scheme):
    # Given ann's roll a1 (five dice) sent to a room where bob is seated too
    room = await Room(MemoryEventStore()).open(dice_scheme=scheme)
    room.clock += 1_000
    a1 = CommandRecord(command_id="a1", room=ROOM, player="ann", server_time_ms=room.clock,
                       body={"kind": "roll", "dice": 5})

    # When the operator's engine decides it, the operator sees the roll, dislikes it and refuses it (drops the
    # decision: nothing written), bob plays twice, and ann's client resends a1 (same id, same content)
    seen = await decided_then_dropped(room, a1)
    assert await room.store.latest_version(ROOM) == 3 and await room.store.outcome(ROOM, "a1") is None
    await room.roll("b1", "bob")
    await room.roll("b2", "bob")
    resent = await room.service.handle(a1)
    assert resent.accepted and resent.first_version == 6, resent.error
    rolled = codec.decode_event(resent.envelopes[0]).faces

    # Then in a scheme-3 room the resend rolls exactly what the refused decision rolled: refusing bought no re-roll.
    # In a scheme-2 room (keyed by version: the drop moved a1 from version 4 to 6) the operator got a fresh roll.
    if scheme == 3:
        assert rolled == seen
    else:
        assert rolled != seen
    assert (await verify_room(room.store, ROOM)).ok  # either way the log verifies: only the dice scheme stops it


async def test_a_signed_command_refused_by_the_engine_and_resent_keeps_its_roll():
    # Given ann signs her commands (scheme 3) and her client signs a1 over the version it saw
    honest = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    wanted = await honest.roll("a1", "ann", sign=True)
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    a1 = signed(CommandRecord(command_id="a1", room=ROOM, player="ann", server_time_ms=room.clock + 1_000,
                              body={"kind": "roll", "dice": 5}), seen_version=3)

    # When the operator forwards it with its body bent (six dice for five) and the engine refuses it, unrecorded,
    # then decides the real one and drops that decision, and bob plays in between
    bent = msgspec.structs.replace(a1, body={"kind": "roll", "dice": 6})
    refused = await room.service.handle(bent)
    assert not refused.accepted and refused.error["code"] == "signature_invalid", refused.error
    assert await room.store.outcome(ROOM, "a1") is None  # the id is not spent: her command can still be decided
    seen = await decided_then_dropped(room, a1)
    await room.roll("b1", "bob")

    # Then ann's client's resend (the same signed bytes, now behind the room's version) rolls what it would have
    resent = await room.service.handle(a1)
    assert resent.accepted and resent.first_version == 5, resent.error
    assert codec.decode_event(resent.envelopes[0]).faces == seen == wanted
    assert (await verify_room(room.store, ROOM)).ok


async def test_the_operator_cannot_send_a_reveal_or_a_roll_for_a_signing_player():
    room = await Room(MemoryEventStore()).open(ann_signs=True)
    # With a token it minted, the operator acts for ann: unsigned, or signed with its own key.
    unsigned = await room.send("r1", "ann", {"kind": "reveal_nonce", "nonce": ANN_NONCE.hex()})
    mallory = Ed25519PrivateKey.from_private_bytes(bytes(32))
    forged = await room.service.handle(signed(CommandRecord(
        command_id="r2", room=ROOM, player="ann", server_time_ms=99_000,
        body={"kind": "roll", "dice": 3}), key=mallory))
    assert (unsigned.error["code"], forged.error["code"]) == ("signature_required", "signature_invalid")
    assert unsigned.error["field"] == "signature"

    # Ann's own signed commands are accepted; bob, who registered no key, plays as before.
    assert (await room.send("r3", "ann", {"kind": "reveal_nonce", "nonce": ANN_NONCE.hex()}, sign=True)).accepted
    await room.roll("a1", "ann", sign=True)
    await room.roll("b1", "bob")
    report = await verify_room(room.store, ROOM)
    assert report.ok, report.divergence
    assert (report.dice_scheme, report.signing_players, report.unsigned_players) == (3, ["ann"], ["bob"])
    assert report.commands_signed == 2  # r3 and a1 (ann's join registered the key)


async def test_a_reveal_the_operator_writes_into_the_log_for_a_signing_player_fails_verify(store):
    room = await Room(store).open(ann_signs=True)
    await room.roll("a1", "ann", sign=True)

    # The operator, holding Redis, appends ann's reveal itself: sealed onto the chain, with a command record.
    head = (await store.read(ROOM))[-1]
    record = CommandRecord(command_id=f"{ROOM}:ann:forged", room=ROOM, player="ann", server_time_ms=head.server_time_ms,
                           body={"kind": "reveal_nonce", "nonce": ANN_NONCE.hex()})
    await operator_appends(store, record, room_rules.NonceRevealed(player="ann", nonce=ANN_NONCE.hex()))

    report = await verify_room(store, ROOM)
    assert not report.ok
    assert (report.divergence.check, report.divergence.version) == ("signature", head.version + 1)
    assert "signature_required" in report.divergence.message


async def test_grinding_its_own_seats_nonce_after_ann_joined_moves_none_of_anns_rolls():
    # The operator seats bob after ann and knows ann's nonce: it tries 64 nonces for bob (a bounded grind)
    # looking for a better roll of ann's next command. Every one gives ann the same roll: nothing to choose.
    rolls = set()
    for attempt in range(64):
        room = await Room(MemoryEventStore()).open(bob_nonce=hashlib.sha256(b"grind %d" % attempt).digest())
        rolls.add(await room.roll("a1", "ann", dice=3))
    assert len(rolls) == 1


@pytest.mark.parametrize("scheme", [2, 3])
async def test_a_seed_ground_before_ann_commits_misses_her_roll_in_schemes_2_and_3_alike(scheme):
    # Not scheme 3's work, and not the seed grinding of issue 30: this passes under scheme 2 too (what stops it is the
    # order of commitments, seed before nonce, which scheme 2 introduced). Issue 30's grinding is an invented room
    # with a seed of the forger's choosing; a head or checkpoint from outside the bundle stops that:
    # tests/services/test_bundle_attacks.py::test_a_whole_invented_room_is_not_verified_without_a_head_from_elsewhere
    # and tests/services/test_checkpoints.py::test_an_invented_room_fails_at_the_first_checkpoint.
    #
    # Given an operator grinding 64 seeds for three sixes on ann's first roll before ann joins: it must guess her
    # nonce (every guess it could make is as good as zeros). The best seed it finds for its guess...
    target = (6, 6, 6)
    best = None
    for attempt in range(64):
        seed = hashlib.sha256(b"seed %d" % attempt).digest()
        room = await Room(MemoryEventStore()).open(seed=seed, ann_nonce=bytes(32), dice_scheme=scheme)
        faces = await room.roll("a1", "ann", dice=3)
        if best is None or sum(faces) > sum(best[1]):
            best = (seed, faces)
    assert best is not None and sum(best[1]) >= 16  # the grind works against a nonce it knows

    # ...does nothing once ann commits to her own nonce: her roll is a fresh draw
    room = await Room(MemoryEventStore()).open(seed=best[0], dice_scheme=scheme)
    real = await room.roll("a1", "ann", dice=3)
    assert real != best[1] and real != target


async def test_anns_signed_roll_replayed_in_another_room_of_her_key_is_refused_and_fails_verify(store):
    # Given ann's one key (a key file she reuses) registered by signed joins in two rooms of the operator's store,
    # and her signed roll accepted in the first
    first = await Room(store).open(ann_signs=True, ann_signs_join=True)
    rematch = await Room(store, room="rematch").open(ann_signs=True, ann_signs_join=True)
    sent = signed(CommandRecord(command_id="a1", room=ROOM, player="ann", server_time_ms=first.clock + 1_000,
                                body={"kind": "roll", "dice": 5}), seen_version=await store.latest_version(ROOM))
    accepted = await first.service.handle(sent)
    assert accepted.accepted, accepted.error

    # When the operator (it mints ann's token) sends it to the other room with her signature unchanged, at the
    # version she signed and re-stamped with the other room's: the room is in the signed bytes
    for seen in (sent.seen_version, await store.latest_version("rematch")):
        replayed = msgspec.structs.replace(sent, room="rematch", seen_version=seen)
        outcome = await rematch.service.handle(replayed)
        assert not outcome.accepted and outcome.error["code"] == "signature_invalid", outcome.error
    assert await store.latest_version("rematch") == 3  # nothing written: create and the two joins

    # and when, holding Redis, it writes the replayed roll into the other room's log itself, chain re-sealed
    faces = codec.decode_event(accepted.envelopes[0]).faces
    forged = await operator_appends(store, replayed, Rolled(faces=faces))

    # Then verify fails at that version on ann's signature
    report = await verify_room(store, "rematch")
    assert not report.ok
    assert (report.divergence.check, report.divergence.version) == ("signature", forged.version), report.divergence
    assert (await verify_room(store, ROOM)).ok  # the room she played it in still verifies
