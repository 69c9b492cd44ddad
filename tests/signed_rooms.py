"""A scheme-3 room played through the engine for the signing stories (tests/store, tests/gateway): ann signs with her
key, bob does not; the operator's view of it as a dispute bundle, and a refusal added as an operator would."""

from __future__ import annotations

import hashlib
import json

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from almanac.events import codec, commitments as cm
from almanac.events.signing import command_bytes, join_bytes
from almanac.events.step import CommandRecord, decode_record
from almanac.services.checkpoints import Checkpointer, KeyRing
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.forensics.player_bundle import player_bundle
from almanac.services.room_service import RoomService
from almanac.storage.memory_store import MemoryEventStore

ROOM = "duel"
SEED = hashlib.sha256(b"the operator's seed").digest()
ANN_NONCE = hashlib.sha256(b"ann's nonce").digest()
BOB_NONCE = hashlib.sha256(b"bob's nonce").digest()
ANN_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"ann's signing key").digest())


def public(key: Ed25519PrivateKey) -> str:
    """The public half of ``key`` as the hex a join registers."""
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


ANN_PUBLIC = public(ANN_KEY)
BOB_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"bob's signing key").digest())
KEYS = {"ann": ANN_KEY, "bob": BOB_KEY}  # each player's own key (another player's client signs with ann's)


def signed(record: CommandRecord, key: Ed25519PrivateKey = ANN_KEY, seen_version: int | None = None) -> CommandRecord:
    """The record as ann's client sends it: signed over events.signing.command_bytes, in the v2 form naming the
    version she saw when ``seen_version`` is given (as clients send today), else in the v1 form (older clients)."""
    message = command_bytes(record.room, record.player, record.command_id, record.body, seen_version)
    return CommandRecord(command_id=record.command_id, room=record.room, player=record.player,
                         server_time_ms=record.server_time_ms, body=record.body, signature=key.sign(message).hex(),
                         seen_version=seen_version)


class Room:
    """One room of a store, played command by command through the engine's RoomService."""

    def __init__(self, store, room: str = ROOM) -> None:
        self.store, self.room, self.service, self.clock = store, room, RoomService(store), 1_000

    async def send(self, command_id: str, player: str, body: dict, *, sign: bool = False, old_form: bool = False,
                   seen: int | None = None):
        """``sign``: signed as a client does today, over the version it saw (``seen``, default the room's latest);
        ``old_form``: signed in the v1 form, as clients did before (no version)."""
        self.clock += 1_000
        record = CommandRecord(command_id=command_id, room=self.room, player=player, server_time_ms=self.clock,
                               body=body)
        if sign:
            if seen is None and not old_form:
                seen = await self.store.latest_version(self.room)
            record = signed(record, key=KEYS.get(player, ANN_KEY), seen_version=seen)
        return await self.service.handle(record)

    async def open(self, *, seed: bytes = SEED, ann_signs: bool = False, bob_nonce: bytes = BOB_NONCE,
                   ann_nonce: bytes = ANN_NONCE, ann_signs_join: bool = False,
                   join_key: Ed25519PrivateKey = ANN_KEY, bob_signs: bool = False,
                   dice_scheme: int | None = None) -> Room:
        """Created with ``seed`` (no scheme named: the engine's default for new rooms); ann and bob join (ann's join
        registering her key when ``ann_signs``, signed by it, as the gateway requires today, with ``ann_signs_join``;
        ``join_key``: the key her join registers and is signed by, another than hers when the operator answers it;
        bob's registering his own key, his join signed by it, when ``bob_signs``; ``dice_scheme``: an older scheme
        named by the create, as a room created before scheme 3 had)."""
        await self.store.save_seed(self.room, seed)
        create = {"kind": "create_room", "ruleset": "counter"} | (
            {"dice_scheme": dice_scheme} if dice_scheme is not None else {})
        assert (await self.send("create", "ann", create)).accepted
        ann_join = {"kind": "join_room", "nonce_commitment": await self.store.save_nonce(self.room, ann_nonce)}
        registered = public(join_key)
        if ann_signs:
            ann_join["public_key"] = registered
        if ann_signs_join:
            self.clock += 1_000
            message = join_bytes(self.room, "ann", registered, ann_join["nonce_commitment"])
            joined = await self.service.handle(CommandRecord(
                command_id="ann-join", room=self.room, player="ann", server_time_ms=self.clock, body=ann_join,
                signature=join_key.sign(message).hex()))
        else:
            joined = await self.send("ann-join", "ann", ann_join)
        assert joined.accepted, joined.error
        bob_join = {"kind": "join_room", "nonce_commitment": await self.store.save_nonce(self.room, bob_nonce)}
        signature = None
        if bob_signs:
            bob_join["public_key"] = public(BOB_KEY)
            signature = BOB_KEY.sign(join_bytes(self.room, "bob", bob_join["public_key"],
                                                bob_join["nonce_commitment"])).hex()
        self.clock += 1_000
        joined = await self.service.handle(CommandRecord(command_id="bob-join", room=self.room, player="bob",
                                                         server_time_ms=self.clock, body=bob_join, signature=signature))
        assert joined.accepted, joined.error
        return self

    async def roll(self, command_id: str, player: str, dice: int = 5, **kwargs) -> tuple[int, ...]:
        outcome = await self.send(command_id, player, {"kind": "roll", "dice": dice}, **kwargs)
        assert outcome.accepted, outcome.error
        return codec.decode_event(outcome.envelopes[0]).faces


WRONG_NONCE = hashlib.sha256(b"not ann's nonce").digest().hex()


async def ended_room(refusing_player: str, *, ann_signs_join: bool = True, old_form: bool = False) -> tuple[Room, dict]:
    """The room after ``refusing_player``'s reveal of a wrong nonce was refused (signed when it is ann's), ended
    by ann's signed end; with the bundle of the whole room. ann's join is signed by the key it registers unless
    ``ann_signs_join`` is False (a join as recorded before signed joins, or as an operator writes one); ann's
    client signs in the v1 form (no version) when ``old_form``."""
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=ann_signs_join)
    await room.roll("a1", "ann", sign=True, old_form=old_form)
    refused = await room.send("bad-reveal", refusing_player, {"kind": "reveal_nonce", "nonce": WRONG_NONCE},
                              sign=refusing_player == "ann", old_form=old_form)
    assert not refused.accepted and refused.error["code"] == "nonce_mismatch", refused.error
    await room.roll("b1", "bob")
    assert (await room.send("end", "ann", {"kind": "end_room"}, sign=True, old_form=old_form)).accepted
    latest = await room.store.latest_version(ROOM)
    bundle = await dispute_bundle(room.store, ROOM, 0, versions=(1, latest))
    return room, json.loads(json.dumps(bundle))


async def signing_room(*, ann_signs: bool = False, bob_signs: bool = False) -> tuple[Room, dict]:
    """A new room (scheme 3) where ann and bob each roll and ann ends it, each signing (their join too) when told;
    with the bundle of the whole room."""
    room = await Room(MemoryEventStore()).open(ann_signs=ann_signs, ann_signs_join=ann_signs, bob_signs=bob_signs)
    await room.roll("a1", "ann", sign=ann_signs)
    await room.roll("b1", "bob", sign=bob_signs)
    assert (await room.send("end", "ann", {"kind": "end_room"}, sign=ann_signs)).accepted
    latest = await room.store.latest_version(ROOM)
    return room, json.loads(json.dumps(await dispute_bundle(room.store, ROOM, 0, versions=(1, latest))))


OPERATORS_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"the operator's own key").digest())


async def anns_bundle(join_key: Ed25519PrivateKey | None = None) -> tuple[dict, list, dict]:
    """ann's player bundle of a v2 room where her join registered ``join_key`` (default: her own), with the
    checkpoints she holds (her join's answer's, and the head's, which her live feed carried) and the deployment's key
    set."""
    store = MemoryEventStore()
    await store.save_commit_scheme(ROOM, cm.SCHEME_V2)  # as the engine records it for a new room
    room = await Room(store).open(ann_signs=True, ann_signs_join=True, **({"join_key": join_key} if join_key else {}))
    deployment = Checkpointer(KeyRing([bytes(32)]), b"\x05" * 32)
    at_join = await deployment.checkpoint(store, ROOM, 2)  # ann's join answer: version 2
    await room.roll("b1", "bob")
    at_head = await deployment.checkpoint(store, ROOM, await store.latest_version(ROOM))
    bundle = await player_bundle(store, deployment, ROOM, "ann", 0)
    return bundle, [at_join, at_head], deployment.ring.document


# --- refusal receipts (docs/bundle-format.md section 8): the deployment signs each refusal it answers --------------

DEPLOYMENT = Checkpointer(KeyRing([hashlib.sha256(b"the deployment's checkpoint key").digest()]), b"\x07" * 32)


async def whole_bundle(room: Room) -> dict:
    """The auditor's bundle of the whole room (its commitments opened, its head signed by DEPLOYMENT), as JSON."""
    latest = await room.store.latest_version(room.room)
    return json.loads(json.dumps(await dispute_bundle(room.store, room.room, 0, versions=(1, latest),
                                                      checkpointer=DEPLOYMENT)))


async def bobs_receipted_refusal() -> tuple[Room, dict, CommandRecord]:
    """A room where bob's reveal of a wrong nonce is refused (honestly) and answered with its receipt (as the gateway
    answers it: ``Checkpointer.refusal_receipt`` of the outcome's record); then ann ends it. The receipt and bob's
    refusal record with it."""
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    await room.roll("a1", "ann", sign=True)
    refused = await room.send("bad-reveal", "bob", {"kind": "reveal_nonce", "nonce": WRONG_NONCE})
    assert not refused.accepted and refused.error["code"] == "nonce_mismatch" and refused.record is not None
    receipt = await DEPLOYMENT.refusal_receipt(room.store, refused.record, refused.error["code"])
    assert receipt is not None
    await room.roll("b1", "bob")
    assert (await room.send("end", "ann", {"kind": "end_room"}, sign=True)).accepted
    return room, receipt, decode_record(refused.record)


async def anns_falsely_refused_roll() -> tuple[Room, dict, CommandRecord]:
    """A room where a cheating operator answers ann's signed roll, which the rules accept at the version she saw,
    "refused" (game_over) with a receipt and records nothing; she sends it again under another id (accepted), bob
    rolls, she ends the room. The receipt and the refused record it signs."""
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    await room.roll("a1", "ann", sign=True)
    at = await room.store.latest_version(room.room)
    sent = signed(CommandRecord(command_id=f"{room.room}:ann:a2", room=room.room, player="ann", server_time_ms=9_000,
                                body={"kind": "roll", "dice": 5}), seen_version=at)
    refused = msgspec.structs.replace(sent, refused_at_version=at)
    receipt = await DEPLOYMENT.refusal_receipt(room.store, codec.encode(refused), "game_over")
    await room.roll("a2-again", "ann", sign=True)
    await room.roll("b1", "bob")
    assert (await room.send("end", "ann", {"kind": "end_room"}, sign=True)).accepted
    return room, receipt, refused
