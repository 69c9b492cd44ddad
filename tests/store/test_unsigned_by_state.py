"""A realm whose seats all sign: the clock's timeout and a log-handed bot act unsigned, nothing else does (docs/dice.md).

Each story is a scheme-3 room whose players registered Ed25519 keys. The engine takes a signing seat's command
without a signature in two cases only, both read from the room's state (``events.step.unsigned_because``): the
timeout the clock derives for a deadline due at the command's time, and a game move of a seat the log handed to a
bot. An operator acting for a player otherwise (a minted token, a bot added beside the log) is refused, and a
forged command written into the log fails ``verify``.
"""

from __future__ import annotations

import hashlib

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from game_modules import game_module
from signed_rooms import public
from store_forgery import operator_appends

from almanac.events import codec, room as room_rules
from almanac.events.signing import command_bytes, join_bytes
from almanac.events.step import CommandRecord, replay
from almanac.services.bots import decide_for
from almanac.services.clock import deadline_command_id, earliest
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import RoomService
from almanac.storage.memory_store import MemoryEventStore


def realm_events(state):
    """The events module of the realm version the room was created under (the default of the day)."""
    return game_module(f"{state.ruleset}@{state.ruleset_version}", "events")

ROOM = "signed-realm"
START_MS = 1_000_000
TIMEOUT_MS = 60_000
KEYS = {name: Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"{name}'s key".encode()).digest())
        for name in ("ann", "bob")}


class SignedRealm:
    """A realm room of ann and bob, both seats signing, decided command by command through the engine's RoomService."""

    def __init__(self) -> None:
        self.store = MemoryEventStore()
        self.service = RoomService(self.store)

    async def open(self, **create: object) -> SignedRealm:
        await self.store.save_seed(ROOM, hashlib.sha256(b"the operator's seed").digest())
        created = await self.send("create", "ann", {"kind": "create_room", "ruleset": "realm", **create, "options": {
            "players": ["ann", "bob"], "years": 1, "season_timeout_ms": TIMEOUT_MS}}, at_ms=START_MS, sign=False)
        assert created.accepted, created.error
        for player, key in KEYS.items():
            commitment = await self.store.save_nonce(ROOM, hashlib.sha256(player.encode()).digest())
            body = {"kind": "join_room", "nonce_commitment": commitment, "public_key": public(key)}
            signature = key.sign(join_bytes(ROOM, player, public(key), commitment)).hex()
            joined = await self.service.handle(CommandRecord(command_id=f"{player}-join", room=ROOM, player=player,
                                                             server_time_ms=START_MS, body=body, signature=signature))
            assert joined.accepted, joined.error
        return self

    async def state(self):
        return replay(await self.store.read(ROOM))

    async def send(self, command_id: str, player: str, body: dict, *, at_ms: int, sign: bool = True):
        """The command as ``player``'s client sends it (signed over the version it saw), or unsigned, as a service
        (or an operator holding a token for the seat) sends it."""
        record = CommandRecord(command_id=command_id, room=ROOM, player=player, server_time_ms=at_ms, body=body)
        if sign:
            seen = await self.store.latest_version(ROOM)
            signature = KEYS[player].sign(command_bytes(ROOM, player, command_id, body, seen)).hex()
            record = msgspec.structs.replace(record, signature=signature, seen_version=seen)
        return await self.service.handle(record)

    async def clock_sends(self, now_ms: int):
        """What the clock sends at ``now_ms`` for the room's earliest deadline (services.clock.Clock.fire)."""
        deadline = earliest(await self.state())
        assert deadline is not None
        record = CommandRecord(command_id=deadline_command_id(ROOM, deadline.key, deadline.player), room=ROOM,
                               player=deadline.player, server_time_ms=max(now_ms, deadline.due_ms),
                               body=deadline.command)
        return await self.service.handle(record)

    async def unrecorded(self, command_id: str) -> bool:
        return await self.store.outcome(ROOM, command_id) is None and not await self.store.rejections(ROOM)


async def test_the_clocks_timeout_for_a_signing_seat_is_taken_unsigned_only_when_due_and_exactly_the_clocks() -> None:
    # Given a realm whose two seats sign, and nobody moving
    realm = await SignedRealm().open()
    deadline = earliest(await realm.state())
    assert (deadline.player, deadline.command, deadline.due_ms) == ("ann", {"kind": "end_season"},
                                                                   START_MS + TIMEOUT_MS)
    clock_id = deadline_command_id(ROOM, deadline.key, "ann")
    # When the clock's own command comes a millisecond early, the state does not name it due: refused, unrecorded
    early = await realm.send(clock_id, "ann", {"kind": "end_season"}, at_ms=deadline.due_ms - 1, sign=False)
    assert (early.accepted, early.error["code"]) == (False, "signature_required")
    # and once due, the same command under another id (an operator's, with a minted token) is refused as well
    other = await realm.send("operator-1", "ann", {"kind": "end_season"}, at_ms=deadline.due_ms, sign=False)
    assert (other.accepted, other.error["code"]) == (False, "signature_required")
    # and so is bob's (the deadline is ann's), though any player may force a timed-out season with a signature
    bobs = await realm.send(deadline_command_id(ROOM, deadline.key, "bob"), "bob", {"kind": "end_season"},
                            at_ms=deadline.due_ms, sign=False)
    assert (bobs.accepted, bobs.error["code"]) == (False, "signature_required")
    assert await realm.unrecorded("operator-1")
    # When the clock sends the deadline's timeout once due
    ended = await realm.clock_sends(deadline.due_ms + 5)
    # Then the room takes it unsigned: the season ends, forced as ann, by the clock's id
    assert ended.accepted, ended.error
    (event,) = [codec.decode_event(e) for e in ended.envelopes if e.type == "realm.season_ended"]
    assert event.forced_by == "ann" and event.season_index == 0
    assert {e.command_id for e in ended.envelopes} == {clock_id}
    # and the next season's deadline is the clock's next one
    assert earliest(await realm.state()).key == "season:1"
    # and verify re-decides it from the log alone, naming it the clock's, never signed and never forged
    report = await verify_room(realm.store, ROOM)
    assert report.ok, report.divergence
    assert (report.commands_by_clock, report.commands_by_bot, report.commands_signed) == (1, 0, 0)
    assert report.signing_players == ["ann", "bob"]
    assert any("sent by the clock for a due deadline" in note and "as ann" in note for note in report.notes)


async def test_a_forged_unsigned_move_of_a_signing_seat_is_refused_and_fails_verify_beside_the_clocks() -> None:
    # Given a signing realm whose first season the clock ended (unsigned, and the log verifies)
    realm = await SignedRealm().open()
    assert (await realm.clock_sends(START_MS + TIMEOUT_MS)).accepted
    assert (await verify_room(realm.store, ROOM)).ok
    # When the operator sends ann's end of turn with a token it minted, unsigned
    forged = await realm.send("forged-turn", "ann", {"kind": "end_turn"}, at_ms=START_MS + TIMEOUT_MS + 10,
                              sign=False)
    # Then it is refused and nothing is recorded: it is no timeout of a due deadline, and no bot holds her seat
    assert (forged.accepted, forged.error["code"], forged.error["field"]) == (False, "signature_required",
                                                                               "signature")
    assert await realm.unrecorded("forged-turn")
    # When the operator writes it into the log itself, sealed onto the chain
    head = (await realm.store.read(ROOM))[-1]
    record = CommandRecord(command_id="forged-turn", room=ROOM, player="ann", server_time_ms=head.server_time_ms + 10,
                           body={"kind": "end_turn"})
    await operator_appends(realm.store, record, realm_events(await realm.state()).TurnEnded(player="ann"))
    # Then verify fails it at that version on ann's signature, the clock's timeout before it standing
    report = await verify_room(realm.store, ROOM)
    assert not report.ok
    assert (report.divergence.check, report.divergence.version) == ("signature", head.version + 1)
    assert "signature_required" in report.divergence.message
    # and even where no seed lets verify re-decide the room (a live room's secret away), the log alone fails it
    realm.store._seeds.clear()
    blind = await verify_room(realm.store, ROOM)
    assert (blind.seed, blind.commands_redecided) == ("unavailable", 0)
    assert (blind.ok, blind.divergence.check, blind.divergence.version) == (False, "signature", head.version + 1)
    assert "neither the clock's timeout" in blind.divergence.message


async def test_a_seat_the_log_hands_to_a_bot_is_played_unsigned_but_an_operators_bot_on_a_signing_seat_is_not() -> None:
    # Given a signing realm with seat bots, where ann left her seat to a bot (her signed hand_to_bot: in the log)
    realm = await SignedRealm().open(seat_bots=True)
    left = await realm.send("ann-leaves", "ann", {"kind": "hand_to_bot"}, at_ms=START_MS + 1)
    assert left.accepted, left.error
    state = await realm.state()
    assert state.bot_seats == ("ann",)
    # When the bot plays her seat, unsigned, as the bots service sends it
    played = None
    for attempt in range(8):
        body = decide_for(state, "ann", attempt, START_MS + 2, key=b"the deployment's bot key")
        if body is None:
            continue
        played = await realm.send(f"bot-ann-{attempt}", "ann", body, at_ms=START_MS + 2, sign=False)
        if played.accepted:
            break
    # Then the room takes it: the log handed the seat over
    assert played is not None and played.accepted, played and played.error
    # but a room command unsigned from her bot's seat is refused: the bot plays the game, nothing more
    ended = await realm.send("bot-ends-room", "ann", {"kind": "end_room"}, at_ms=START_MS + 3, sign=False)
    assert (ended.accepted, ended.error["code"]) == (False, "signature_required")
    # When the operator puts a bot on bob's seat beside the log (`almanac bots add`: bob never left it)
    state = await realm.state()
    refusals = []
    for attempt in range(8):
        body = decide_for(state, "bob", attempt, START_MS + 4, key=b"the deployment's bot key")
        if body is not None:
            refusals.append(await realm.send(f"bot-bob-{attempt}", "bob", body, at_ms=START_MS + 4, sign=False))
    # Then every move it sends is refused unrecorded: that bot is the operator acting for bob
    assert refusals and {(r.accepted, r.error["code"]) for r in refusals} == {(False, "signature_required")}
    assert [await realm.store.outcome(ROOM, f"bot-bob-{a}") for a in range(8)] == [None] * 8
    # and verify names the bot's move for what it is
    report = await verify_room(realm.store, ROOM)
    assert report.ok, report.divergence
    assert (report.commands_by_bot, report.commands_by_clock, report.commands_signed) == (1, 0, 1)
    assert any("played by the bot the log handed the seat to" in note and "of ann" in note for note in report.notes)


async def test_the_clocks_timeout_is_named_from_the_state_alone() -> None:
    from almanac.events.room import clock_timeout  # noqa: PLC0415 - the kernel's own test of it

    # Given a signing realm at its first deadline
    realm = await SignedRealm().open()
    state = await realm.state()
    deadline = earliest(state)
    command = codec.decode_command(room_rules.stored_ref(state), deadline.command)
    clock_id = deadline_command_id(ROOM, deadline.key, deadline.player)
    # Then the kernel names the clock's command exactly: its seat, its id, due by the command's own time
    assert clock_timeout(state, ROOM, "ann", clock_id, deadline.due_ms, command) == deadline
    assert clock_timeout(state, ROOM, "ann", clock_id, deadline.due_ms - 1, command) is None
    assert clock_timeout(state, ROOM, "bob", clock_id, deadline.due_ms, command) is None
    assert clock_timeout(state, ROOM, "ann", "clock-another", deadline.due_ms, command) is None
    assert clock_timeout(state, ROOM, "ann", clock_id, deadline.due_ms,
                         codec.decode_command(room_rules.stored_ref(state), {"kind": "end_turn"})) is None
