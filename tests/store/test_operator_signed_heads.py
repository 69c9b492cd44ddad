"""The bundle's own checkpoint is the operator's word: a history rewritten after the last checkpoint a player holds,
its head signed by the deployment that exported it, is never VERIFIED (an issue-30 red team's attacks, dispute and
player-safe bundles alike).

Given ann's room (ann signs; bob does not), ann holding the checkpoint of her own roll's answer only, when the
operator replays the room from the same seed with bob's later roll changed and signs the new head itself, then the
forged bundle is INCOMPLETE (anchor), as an invented room with its own signed head is; the honest one is VERIFIED only
once a player's checkpoint reaches its head.
"""

from __future__ import annotations

import json

from signed_rooms import DEPLOYMENT, ROOM, Room, whole_bundle

from almanac.events import commitments as cm
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.forensics.player_check import verify_player_bundle
from almanac.services.checkpoints import Checkpointer, KeyRing
from almanac.services.forensics.player_bundle import player_bundle
from almanac.storage.memory_store import MemoryEventStore

KEYS = DEPLOYMENT.ring.document


def _json(value):
    return json.loads(json.dumps(value))


async def played(bob_dice: int) -> tuple[Room, dict]:
    """ann rolls (signed) and holds her answer's checkpoint; then bob rolls ``bob_dice`` dice and ends the room."""
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    await room.roll("a1", "ann", sign=True)
    held = await DEPLOYMENT.checkpoint(room.store, ROOM, await room.store.latest_version(ROOM))
    await room.roll("b1", "bob", dice=bob_dice)
    ended = await room.send("end", "bob", {"kind": "end_room"})
    assert ended.accepted, ended.error
    return room, _json(held)


async def test_a_history_rewritten_after_the_players_last_checkpoint_with_its_head_signed_by_the_operator():
    honest_room, anns = await played(5)
    forged_room, _ = await played(3)  # the operator's rewrite: the same prefix, bob's roll another
    forged = await whole_bundle(forged_room)
    assert forged["head"]["hash"] != (await whole_bundle(honest_room))["head"]["hash"]
    # When it is checked against ann's checkpoint: it passes through it, and the bundle's own signed head vouches
    # for nothing after it
    verdict = verify_bundle(forged, checkpoints=[anns], keys=KEYS)
    assert verdict.status == "INCOMPLETE" and "anchor" in verdict.unchecked, verdict.text()
    # and an invented room with its own signed head, checked with the published key set alone, is not VERIFIED
    alone = verify_bundle(forged, keys=KEYS)
    assert alone.status == "INCOMPLETE" and "anchor" in alone.unchecked, alone.text()
    # while the honest room is VERIFIED once a player holds its head (the checkpoint of a read at its end)
    honest = await whole_bundle(honest_room)
    assert verify_bundle(honest, checkpoints=[anns, honest["checkpoint"]], keys=KEYS).status == "VERIFIED"


async def test_a_player_bundle_rewritten_after_her_last_checkpoint_is_not_verified():
    deployment = Checkpointer(KeyRing([bytes(32)]), b"\x05" * 32)

    async def ann_sees(bob_dice: int) -> tuple[dict, dict, dict]:
        store = MemoryEventStore()
        await store.save_commit_scheme(ROOM, cm.SCHEME_V2)
        room = await Room(store).open(ann_signs=True, ann_signs_join=True)
        at_join = await deployment.checkpoint(store, ROOM, 2)
        await room.roll("b1", "bob", dice=bob_dice)
        await room.roll("b2", "bob", dice=2)
        head = await deployment.checkpoint(store, ROOM, await store.latest_version(ROOM))
        return _json(await player_bundle(store, deployment, ROOM, "ann", 0)), _json(at_join), _json(head)

    keys = deployment.ring.document
    honest, at_join, head = await ann_sees(5)
    forged, _, _ = await ann_sees(3)  # bob's roll rewritten after ann's join; the operator signs the new head
    # ann holding only her join's checkpoint: neither is VERIFIED (what follows rests on the operator's signature)
    assert verify_player_bundle(forged, [at_join], keys).status == "INCOMPLETE"
    assert verify_player_bundle(honest, [at_join], keys).status == "INCOMPLETE"
    # holding the head her feed carried, the honest one is VERIFIED and the forged one fails at her checkpoint
    assert verify_player_bundle(honest, [at_join, head], keys).status == "VERIFIED"
    assert verify_player_bundle(forged, [at_join, head], keys).status == "NOT VERIFIED"
