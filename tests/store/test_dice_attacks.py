"""The operator attacks the dice of a new room (scheme 3, docs/dice.md) and fails: reorder, forged reveal, refusal, grinding.

Each story is the attack of an operator who holds Redis (the seed, every nonce) and mints tokens. Given a new
room (the engine picks its scheme), when the operator reorders commands, delays or refuses one and lets it
be resent, grinds seeds or its own seat's nonce, or acts for a player who signs, then no roll moves and a
forged command fails `verify`. Scheme 2 (keyed by room and version, before this) lost each of these.
"""

from __future__ import annotations

import hashlib

import msgspec
from counter_ruleset import Rolled
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signed_rooms import ANN_NONCE, ROOM, Room, signed
from store_forgery import operator_appends

from almanac.events import codec, room as room_rules
from almanac.events.step import CommandRecord
from almanac.services.forensics.verify import verify_room
from almanac.storage.memory_store import MemoryEventStore


async def test_reordering_two_players_commands_changes_no_roll():
    honest = await Room(MemoryEventStore()).open()
    first = {"a1": await honest.roll("a1", "ann"), "b1": await honest.roll("b1", "bob")}

    # The operator puts bob's command first (both were pending at once): every command keeps its roll.
    reordered = await Room(MemoryEventStore()).open()
    second = {"b1": await reordered.roll("b1", "bob"), "a1": await reordered.roll("a1", "ann")}

    assert first == second


async def test_a_refused_command_resent_with_the_same_id_later_gets_the_same_roll():
    honest = await Room(MemoryEventStore()).open()
    wanted = await honest.roll("a1", "ann")

    # The operator decides ann's a1, dislikes the roll, and refuses it (drops it); bob plays in between; ann's
    # client resends a1 (same id, same content). Refusing bought no re-roll.
    refusing = await Room(MemoryEventStore()).open()
    await refusing.roll("b1", "bob")
    await refusing.roll("b2", "bob")
    assert await refusing.roll("a1", "ann") == wanted


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


async def test_grinding_seeds_before_ann_commits_cannot_aim_at_her_roll():
    # The operator grinds 64 seeds for three sixes on ann's first roll, before ann joins: it must guess her
    # nonce (here: every guess it could make is as good as zeros). The best seed it finds for its guess...
    target = (6, 6, 6)
    best = None
    for attempt in range(64):
        seed = hashlib.sha256(b"seed %d" % attempt).digest()
        room = await Room(MemoryEventStore()).open(seed=seed, ann_nonce=bytes(32))
        faces = await room.roll("a1", "ann", dice=3)
        if best is None or sum(faces) > sum(best[1]):
            best = (seed, faces)
    assert best is not None and sum(best[1]) >= 16  # the grind works against a nonce it knows

    # ...does nothing once ann commits to her own nonce: her roll is a fresh draw (here 3 of 18).
    room = await Room(MemoryEventStore()).open(seed=best[0])
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
