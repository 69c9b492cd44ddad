"""Dice nobody can bias (docs/dice.md): scheme-2 rooms draw from the server seed and every player's nonce.

Given a room whose seed commitment was public before anyone joined, when players join committing to
secret nonces, play, and the room ends, then the end reveals the seed and every nonce, verify re-derives
every die from them, a forged reveal is caught naming its player, and a player who never reveals
changes nothing but a line in the audit. Rooms of scheme 1 (every room stored before schemes) are untouched.
"""

from __future__ import annotations

import hashlib

import msgspec
from store_forgery import rewrite_in_memory, with_event

from almanac.events import codec
from almanac.events.dice import (
    NONCE_SCHEMES,
    PLAYER_ENTROPY,
    SERVER_SEED_ONLY,
    Dice,
    dice_key,
    nonce_commitment,
    server_nonce,
)
from almanac.events.step import decode_record, replay, step
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.memory_store import MemoryEventStore

ANN_NONCE = hashlib.sha256(b"ann's secret nonce").digest()


def record(command_id: str, player: str, body: dict, room: str, now_ms: int) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def play(store, room: str = "dice", *, scheme: int = PLAYER_ENTROPY, ann_reveals: bool = True,
               end: bool = True) -> RoomService:
    """A counter room of ``scheme`` (2 unless named; new rooms default to 3, tests/store/test_dice_attacks.py):
    ann joins with her own nonce, bob sends none; rolls; ann reveals; the room ends."""
    service = RoomService(store)
    create = {"kind": "create_room", "ruleset": "counter"}
    create["dice_scheme"] = scheme
    bodies: list[tuple[str, dict]] = [("ann", create)]
    if scheme in NONCE_SCHEMES:
        ann_join = {"kind": "join_room", "nonce_commitment": await store.save_nonce(room, ANN_NONCE)}
    else:
        ann_join = {"kind": "join_room"}
    bodies += [("ann", ann_join), ("bob", {"kind": "join_room"})]
    bodies += [("ann", {"kind": "roll", "dice": 3}), ("bob", {"kind": "roll", "dice": 3}),
               ("ann", {"kind": "add", "amount": 2})]
    if ann_reveals and scheme in NONCE_SCHEMES:
        bodies.append(("ann", {"kind": "reveal_nonce", "nonce": ANN_NONCE.hex()}))
    if end:
        bodies.append(("ann", {"kind": "end_room"}))
    for index, (player, body) in enumerate(bodies):
        outcome = await service.handle(record(f"{room}-{index}", player, body, room, 1_000 * (index + 1)))
        assert outcome.accepted, (body, outcome.error)
    return service


async def events_of(store, room: str) -> list:
    return [codec.decode_event(e) for e in await store.read(room)]


async def test_a_new_room_draws_with_player_nonces_and_verifies_from_the_revealed_seed_and_nonces(store):
    await play(store)

    events = await events_of(store, "dice")
    created, ann_joined, bob_joined, ended = events[0], events[1], events[2], events[-1]
    assert created.dice_scheme == PLAYER_ENTROPY
    assert (ann_joined.nonce_commitment, ann_joined.nonce_by_server) == (nonce_commitment(ANN_NONCE), False)
    seed = bytes.fromhex(ended.revealed_seed)
    # bob sent no nonce: the server's, derived from its seed (fixed before anyone joined), stands in
    assert bob_joined.nonce_by_server and bob_joined.nonce_commitment == nonce_commitment(server_nonce(seed, "bob"))
    assert ended.revealed_nonces == {"ann": ANN_NONCE.hex(), "bob": server_nonce(seed, "bob").hex()}

    report = await verify_room(store, "dice")
    assert report.ok, report.divergence
    assert (report.dice_scheme, report.nonces, report.seed) == (PLAYER_ENTROPY, "revealed", "revealed")
    assert report.commands_redecided == len(await store.commands("dice"))
    assert report.nonces_revealed_by_player == ["ann"] and report.nonces_by_server == ["bob"]


async def test_the_dice_re_derive_from_seed_and_nonces_and_change_with_any_nonce():
    store = MemoryEventStore()
    await play(store)
    envelopes = await store.read("dice")
    ended = codec.decode_event(envelopes[-1])
    seed = bytes.fromhex(ended.revealed_seed)
    nonces = {p: bytes.fromhex(n) for p, n in ended.revealed_nonces.items()}
    # ann's roll at version 4 (after both joins): the documented key, then the documented stream
    rolled = codec.decode_event(envelopes[3])
    key = dice_key(seed, (("ann", nonces["ann"]), ("bob", nonces["bob"])))
    assert key == dice_key(seed, (("bob", nonces["bob"]), ("ann", nonces["ann"])))  # order does not matter
    assert tuple(rolled.faces) == Dice(key, "dice", 4).d6(3)
    assert key != seed  # not the scheme-1 key
    # the same command decided with another nonce for bob rolls differently: every nonce feeds the dice
    state = replay(envelopes[:3])
    roll = decode_record((await store.commands("dice"))[3][1])
    by_commitment = {nonce_commitment(n): n for n in nonces.values()}
    honest, _ = step(state, envelopes[2].hash, roll, seed, nonces=by_commitment)
    assert honest[0].payload == envelopes[3].payload
    # (three d6 agree by chance once in 216 keys, so bob's nonce is swapped for eight others: the key changes
    # with each, and at least one of the rolls must differ, else the nonce would not feed the dice)
    rolls = set()
    for other_nonce in (hashlib.sha256(b"another %d" % i).digest() for i in range(8)):
        assert dice_key(seed, (("ann", nonces["ann"]), ("bob", other_nonce))) != key
        other = {**by_commitment, nonce_commitment(nonces["bob"]): other_nonce}
        forged, _ = step(state, envelopes[2].hash, roll, seed, nonces=other)
        rolls.add(forged[0].payload)
    assert rolls - {envelopes[3].payload}


async def test_scheme_1_rooms_decide_and_store_exactly_as_before_nonces_existed(store):
    await play(store, "old", scheme=SERVER_SEED_ONLY)

    envelopes = await store.read("old")
    joined = [msgspec.msgpack.decode(e.payload) for e in envelopes if e.type == "room.player_joined"]
    ended = msgspec.msgpack.decode(envelopes[-1].payload)
    assert joined == [{"type": "room.player_joined", "player": "ann"}, {"type": "room.player_joined", "player": "bob"}]
    assert set(ended) == {"type", "reason", "revealed_seed"}
    seed = bytes.fromhex(ended["revealed_seed"])
    assert tuple(codec.decode_event(envelopes[3]).faces) == Dice(seed, "old", 4).d6(3)  # the seed is the key
    report = await verify_room(store, "old")
    assert report.ok and report.dice_scheme == SERVER_SEED_ONLY and report.nonces == ""


async def test_a_forged_reveal_at_the_end_is_caught_naming_the_player():
    store = MemoryEventStore()
    await play(store)
    last = len(await store.read("dice"))

    def forged_bob(ended: dict) -> None:
        ended["revealed_nonces"]["bob"] = "ab" * 32

    await rewrite_in_memory(store, "dice", last, lambda envelope: with_event(envelope, forged_bob), reseal=True)

    report = await verify_room(store, "dice")
    assert not report.ok and report.divergence.check == "nonce"
    assert "'bob'" in report.divergence.message and report.divergence.version == last


async def test_a_forged_player_reveal_is_caught_naming_the_player():
    store = MemoryEventStore()
    await play(store)
    version = next(e.version for e in await store.read("dice") if e.type == "room.nonce_revealed")

    await rewrite_in_memory(store, "dice", version, lambda envelope: with_event(
        envelope, lambda revealed: revealed.update(nonce="cd" * 32)), reseal=True)

    report = await verify_room(store, "dice")
    assert not report.ok and report.divergence.check == "nonce"
    assert "'ann'" in report.divergence.message and report.divergence.version == version


async def test_a_reveal_that_does_not_match_its_commitment_is_refused_and_the_refusal_rechecked(store):
    service = await play(store, ann_reveals=False, end=False)

    wrong = await service.handle(record("wrong", "ann", {"kind": "reveal_nonce", "nonce": "00" * 32}, "dice", 9_000))
    bobs = await service.handle(record("bob-rev", "bob", {"kind": "reveal_nonce", "nonce": ANN_NONCE.hex()}, "dice",
                                       9_001))

    assert wrong.error["code"] == "nonce_mismatch" and bobs.error["code"] == "nonce_mismatch"
    await service.handle(record("end", "ann", {"kind": "end_room"}, "dice", 9_002))
    report = await verify_room(store, "dice")
    assert report.ok and report.refusals_rechecked == 2


async def test_a_player_who_never_reveals_cannot_stall_the_room_and_is_marked_in_the_audit(store):
    await play(store, ann_reveals=False)

    events = await events_of(store, "dice")
    report = await verify_room(store, "dice")

    assert events[-1].revealed_nonces["ann"] == ANN_NONCE.hex()  # the server's reveal stands for her
    assert report.ok, report.divergence
    assert report.players_not_revealing == ["ann", "bob"] and report.nonces_revealed_by_player == []
    assert any("never revealed their own nonce" in note and "ann" in note for note in report.notes)


async def test_a_nonce_commitment_made_before_the_seed_commitment_is_refused_by_verify():
    # Given a log whose join claims a server time before the room (and its seed commitment) existed
    store = MemoryEventStore()
    await play(store)
    await rewrite_in_memory(store, "dice", 2, lambda joined: joined, reseal=True)  # re-sealing alone changes nothing
    assert (await verify_room(store, "dice")).ok
    created = (await store.read("dice"))[0]
    await rewrite_in_memory(store, "dice", 2, lambda joined: msgspec.structs.replace(
        joined, server_time_ms=created.server_time_ms - 1), reseal=True)

    report = await verify_room(store, "dice")

    assert not report.ok and report.divergence.check == "order" and "'ann'" in report.divergence.message


async def test_a_live_room_verifies_with_the_stored_seed_and_nonces_and_leaks_no_nonce_before_the_end(store):
    await play(store, ann_reveals=False, end=False)

    report = await verify_room(store, "dice")
    stored = b"".join(e.payload for e in await store.read("dice"))
    records = b"".join(r for _, r in await store.commands("dice"))

    assert report.ok and (report.seed, report.nonces) == ("stored", "stored")
    assert report.commands_redecided == len(await store.commands("dice"))
    for secret in (ANN_NONCE, server_nonce(await store.load_seed("dice"), "bob")):
        assert secret not in stored and secret.hex().encode() not in stored and secret.hex().encode() not in records


async def test_joins_must_commit_to_a_nonce_the_server_holds_and_nobody_else_used(store):
    service = await play(store, end=False)
    await store.save_nonce("dice", hashlib.sha256(b"cat's").digest())

    unknown = await service.handle(record("u", "cy", {"kind": "join_room", "nonce_commitment": "12" * 32}, "dice", 9))
    reused = await service.handle(record("r", "cy", {"kind": "join_room",
                                                     "nonce_commitment": nonce_commitment(ANN_NONCE)}, "dice", 10))

    assert unknown.error["code"] == "nonce_unknown" and reused.error["code"] == "nonce_reused"


async def test_a_challenge_room_keeps_its_public_shared_dice():
    store = MemoryEventStore()
    service = RoomService(store)
    made = await service.handle(record("c", "ann", {"kind": "create_room", "ruleset": "counter", "challenge": "daily"},
                                       "ch", 1))
    refused = await service.handle(record("c2", "ann", {"kind": "create_room", "ruleset": "counter",
                                                        "challenge": "daily", "dice_scheme": 2}, "ch2", 1))

    assert made.accepted and codec.decode_event(made.envelopes[0]).dice_scheme == SERVER_SEED_ONLY
    assert refused.error["code"] == "invalid_dice_scheme"
