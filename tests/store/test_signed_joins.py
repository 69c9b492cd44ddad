"""A join that registers a key carries that key's signature (docs/dice.md, events.signing.join_bytes).

Given a scheme-3 room, when cleo joins with a key and signs (room, player, key, nonce commitment) with it, the
engine takes it and verify names her join signed; a join signed over another commitment, or by another key, is
refused ``signature_invalid`` and changes nothing; one the operator writes into the log with a substituted key
fails verify with check ``signature``; and a join recorded before signed joins (a key, no signature) still
verifies, named unsigned.
"""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from signed_rooms import ROOM, Room
from store_forgery import operator_appends

from almanac.events import room as room_rules
from almanac.events.signing import join_bytes
from almanac.events.step import CommandRecord
from almanac.services.forensics.verify import verify_room
from almanac.storage.memory_store import MemoryEventStore

CLEO_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"cleo's signing key").digest())
MALLORY_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"the operator's key").digest())
CLEO_NONCE = hashlib.sha256(b"cleo's nonce").digest()


def public(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


async def cleo_joins(room: Room, *, key: Ed25519PrivateKey = CLEO_KEY, signer: Ed25519PrivateKey = CLEO_KEY,
                     signed_commitment: str | None = None):
    commitment = await room.store.save_nonce(ROOM, CLEO_NONCE)
    body = {"kind": "join_room", "nonce_commitment": commitment, "public_key": public(key)}
    signature = signer.sign(join_bytes(ROOM, "cleo", public(key), signed_commitment or commitment)).hex()
    room.clock += 1_000
    return await room.service.handle(CommandRecord(command_id=f"{ROOM}:cleo:join", room=ROOM, player="cleo",
                                                   server_time_ms=room.clock, body=body, signature=signature))


async def test_a_join_signed_by_the_key_it_registers_is_taken_and_verify_names_it_signed():
    room = await Room(MemoryEventStore()).open()
    joined = await cleo_joins(room)
    assert joined.accepted, joined.error
    report = await verify_room(room.store, ROOM)
    assert report.ok, report.divergence
    assert (report.signing_players, report.signed_joins, report.unsigned_joins) == (["cleo"], ["cleo"], [])


async def test_a_join_signed_over_another_commitment_or_by_another_key_is_refused():
    room = await Room(MemoryEventStore()).open()
    other_commitment = await cleo_joins(room, signed_commitment=hashlib.sha256(b"another nonce").hexdigest())
    other_key = await cleo_joins(room, signer=MALLORY_KEY)
    for refused in (other_commitment, other_key):
        assert not refused.accepted and refused.error["code"] == "signature_invalid", refused.error
        assert refused.error["field"] == "signature"
    assert "cleo" not in [e.player for e in await room.store.read(ROOM)]


async def test_a_join_the_operator_writes_with_a_substituted_key_fails_verify():
    room = await Room(MemoryEventStore()).open()
    store = room.store
    # The operator registers its own key for cleo, keeping cleo's signature (made for her key) in the record.
    head = (await store.read(ROOM))[-1]
    commitment = await store.save_nonce(ROOM, CLEO_NONCE)
    body = {"kind": "join_room", "nonce_commitment": commitment, "public_key": public(MALLORY_KEY)}
    record = CommandRecord(command_id=f"{ROOM}:cleo:join", room=ROOM, player="cleo",
                           server_time_ms=head.server_time_ms + 1, body=body,
                           signature=CLEO_KEY.sign(join_bytes(ROOM, "cleo", public(CLEO_KEY), commitment)).hex())
    await operator_appends(store, record, room_rules.PlayerJoined(player="cleo", nonce_commitment=commitment,
                                                                  public_key=public(MALLORY_KEY)))

    report = await verify_room(store, ROOM)
    assert not report.ok
    assert (report.divergence.check, report.divergence.version) == ("signature", head.version + 1)


async def test_a_join_recorded_before_signed_joins_still_verifies_and_is_named_unsigned():
    # ann's join registers her key with no signature, as every join did before signed joins
    room = await Room(MemoryEventStore()).open(ann_signs=True)
    await room.roll("a1", "ann", sign=True)
    report = await verify_room(room.store, ROOM)
    assert report.ok, report.divergence
    assert (report.signed_joins, report.unsigned_joins) == ([], ["ann"])
    assert any("registered a key unsigned (ann)" in note for note in report.notes), report.notes
