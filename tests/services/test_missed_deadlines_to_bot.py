"""A seat that misses the room's count of deadlines in a row is handed to a bot, as an event the room decides."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from engine_test_support import KEYS
from test_board_turn_limit import START_MS, At, clock_commands, record, tick

from almanac.events import codec
from almanac.events.signing import join_bytes
from almanac.events.step import decode_record, replay
from almanac.services import bus
from almanac.services.bots import (
    SeatRefused,
    add_bot,
    admit_seat,
    bot_seats,
    decide_for,
    remove_bot,
    took_seat,
)
from almanac.services.clock import Clock
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore

LIMIT_S = 60
ROOM_EVENTS = ("room.bot_policy", "room.deadline_missed", "room.seat_active", "room.seat_to_bot")


async def folded(store: RedisEventStore, room: str):
    return replay(await store.read(room))


async def seat_events(store: RedisEventStore, room: str) -> list[tuple[str, dict]]:
    return [(e.type, {k: v for k, v in codec.to_builtins(codec.decode_event(e)).items() if k != "type"})
            for e in await store.read(room) if e.type in ROOM_EVENTS]


async def time_out_turn(clock: Clock, now: At, service: RoomService, redis_client: aioredis.Redis,
                        room: str) -> None:
    """Let the current turn's limit pass; the clock sends its time_out, which the room decides."""
    now.ms += LIMIT_S * 1000
    await tick([clock], room)
    sent = (await clock_commands(redis_client, room))[-1]
    outcome = await service.handle(sent)
    assert outcome.accepted, outcome.error


async def test_a_seat_that_misses_two_turns_in_a_row_goes_to_a_bot_which_plays_it(
        redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given alice's board@2 room with a turn limit of a minute that hands a seat missing 2 deadlines to a bot
    room = "absent-alice"
    created = await service.handle(record("c", {"kind": "create_room", "ruleset": "board@2", "bot_after_missed": 2,
                                                "options": {"turn_limit_s": LIMIT_S}}, room))
    assert created.accepted, created.error
    assert (await service.handle(record("j", {"kind": "join_room"}, room))).accepted
    assert await seat_events(store, room) == [("room.bot_policy", {"after_missed": 2})]
    now = At(START_MS)
    clock = Clock(redis_client, KEYS, store, now_ms=now)
    # When alice misses turn 0, then plays turn 1 herself
    await time_out_turn(clock, now, service, redis_client, room)
    state = await folded(store, room)
    mine = decide_for(state, "alice", 0, now.ms, key=b"alice's own hand")
    played = await service.handle(record("alice-1", mine, room, now.ms + 1000))
    assert played.accepted, played.error
    # Then the missed turn counted, and her own move started the count again: no bot yet
    assert [t for t, _ in await seat_events(store, room)] == ["room.bot_policy", "room.deadline_missed",
                                                              "room.seat_active"]
    # When she misses the next two turns
    now.ms += 1000
    await time_out_turn(clock, now, service, redis_client, room)
    assert (await folded(store, room)).bot_seats == ()
    await time_out_turn(clock, now, service, redis_client, room)
    # Then the second miss in a row hands her seat to a bot: an event of the room, with the count that did it
    events = await seat_events(store, room)
    assert events[-2:] == [("room.deadline_missed", {"key": "turn:3", "players": ("alice",)}),
                           ("room.seat_to_bot", {"player": "alice", "reason": "missed", "missed": 2})]
    assert (await folded(store, room)).bot_seats == ("alice",)
    # and the clock, folding the room, writes the seat to the bot seats, where a bot acts for it by the log
    await tick([clock], room)
    assert (room, "alice") in await bot_seats(redis_client, KEYS, range(16))
    assert await took_seat(store, room, "alice")
    # When the bots service runs, a bot plays alice's seat through the gateway (a token minted for the seat the
    # log handed over): its commands are ordinary logged commands as alice
    before = (await folded(store, room)).version
    async with served_gateway(redis_url, **DECIDED_HERE) as gateway:
        bots = bots_for(gateway, redis_client, store, KEYS, key=b"test bots", rate=0, now_ms=lambda: now.ms)
        await play_until_moved(bots, service, redis_client, store, room, before)
    moved = [e for e in await store.read(room) if e.version > before]
    assert moved and moved[0].player == "alice" and moved[0].command_id.startswith(f"{room}:alice:bot-")
    # and a bot's moves never count as the seat being back: no seat_active, no second handover
    assert [t for t, _ in await seat_events(store, room)].count("room.seat_to_bot") == 1
    assert "room.seat_active" not in [t for t, _ in (await seat_events(store, room))[4:]]
    # and the whole room verifies: every handover re-decided from the log alone gives the same events
    report = await verify_room(store, room)
    assert report.ok, report


# The story decides the commands itself (no engine): the gateway waits this little for an outcome, then answers 202
DECIDED_HERE = {"ALMANAC_COMMAND_TIMEOUT_MS": "200"}


async def play_until_moved(bots, service: RoomService, redis_client: aioredis.Redis, store: RedisEventStore,
                           room: str, before: int) -> None:
    """Bots rounds, the story deciding the commands the gateway queued for them, until the room moves."""
    for _ in range(200):
        await bots.tick()
        for entry in await clock_commands_or_bots(redis_client, room):
            if await store.outcome(room, entry.command_id) is None:
                await service.handle(entry)
        if (await folded(store, room)).version > before:
            return
        await asyncio.sleep(0.02)


async def clock_commands_or_bots(redis_client: aioredis.Redis, room: str) -> list:
    """The bots' commands for ``room`` waiting in its shard's command stream (the test decides them itself): sent
    through the gateway, whose ids scope the bot's own (``room:player:bot-...``)."""
    entries = await redis_client.xrange(KEYS.command_stream(KEYS.shard(room)))
    return [r for r in (decode_record(f[b"__data__"]) for _, f in entries)
            if r.room == room and (r.command_id.startswith("bot-") or f"{room}:{r.player}:bot-" in r.command_id)]


async def test_rooms_without_the_option_record_no_misses(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given a board@2 room with a turn limit and no bot policy
    room = "present-bob"
    assert (await service.handle(record("c", {"kind": "create_room", "ruleset": "board@2",
                                              "options": {"turn_limit_s": LIMIT_S}}, room))).accepted
    assert (await service.handle(record("j", {"kind": "join_room"}, room))).accepted
    now = At(START_MS)
    clock = Clock(redis_client, KEYS, store, now_ms=now)
    # When its owner misses five turns
    for _ in range(5):
        await time_out_turn(clock, now, service, redis_client, room)
    # Then the room writes none of the seat events, and no bot takes the seat
    assert await seat_events(store, room) == []
    assert (await folded(store, room)).bot_seats == ()


async def quiet_realm(redis_client: aioredis.Redis, store: RedisEventStore, room: str) -> None:
    """A realm of alice, bob and carol handing a city that misses 1 season deadline to a bot: alice ends her
    turn, bob and carol do nothing until the clock forces the season to end, which the room decides."""
    service = RoomService(store)
    players = ("alice", "bob", "carol")

    def sent(player: str, command_id: str, body: dict, now_ms: int = START_MS) -> CommandRecord:
        return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)

    created = await service.handle(sent("alice", "c", {"kind": "create_room", "ruleset": "realm", "bot_after_missed": 1,
                                                       "options": {"players": list(players), "years": 1,
                                                                   "season_timeout_ms": 60_000}}))
    assert created.accepted, created.error
    for player in players:
        assert (await service.handle(sent(player, f"j-{player}", {"kind": "join_room"}))).accepted
    assert (await service.handle(sent("alice", "a-1", {"kind": "end_turn"}, START_MS + 1_000))).accepted
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + 60_000 + 1))
    await tick([clock], room)
    forced = (await clock_commands(redis_client, room))[-1]
    assert forced.body == {"kind": "end_season"}
    assert (await service.handle(forced)).accepted
    await tick([clock], room)  # the clock folds the room again: the handed seats go to the bot seats


async def test_a_realm_season_forced_to_end_counts_a_miss_only_for_the_cities_it_waited_for(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    room = "quiet-realm"
    # Given a realm of three cities with a season timeout of a minute, handing a city that misses 1 to a bot
    # When alice ends her turn, and bob and carol do nothing until the clock forces the season to end
    await quiet_realm(redis_client, store, room)
    # Then the season's deadline was missed by bob and carol only, and both cities go to bots, alice's stays hers
    events = await seat_events(store, room)
    assert events[1] == ("room.deadline_missed", {"key": "season:0", "players": ("bob", "carol")})
    assert [e for t, e in events if t == "room.seat_to_bot"] == [{"player": "bob", "reason": "missed", "missed": 1},
                                                                 {"player": "carol", "reason": "missed", "missed": 1}]
    assert (await folded(store, room)).bot_seats == ("bob", "carol")
    assert (await verify_room(store, room)).ok


async def test_seats_the_room_hands_over_are_never_refused_by_the_bound_but_count_against_it(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a deployment whose bots hold one seat, and a bound of one: a caller may hand over no more
    await add_bot(redis_client, KEYS, "elsewhere", "zed", 1)
    bound = 1
    # When a realm's season is forced to end and the room hands bob's and carol's cities to bots
    await quiet_realm(redis_client, store, "over-bound")
    # Then the clock writes both to the bot seats all the same: a seat the room handed over must be played
    assert await bot_seats(redis_client, KEYS, range(16)) == [("elsewhere", "zed"), ("over-bound", "bob"),
                                                             ("over-bound", "carol")]
    # and asking for a handed seat again is no new seat, so the bound does not refuse it either
    state = await folded(store, "over-bound")
    assert await admit_seat(redis_client, KEYS, store, state, "over-bound", "bob", max_seats=bound) == "already"
    # but they count: in a room whose bob has not joined, a caller's ask for his empty seat is refused at a bound
    # of 3 (zed, and the two handed seats), and granted at 4
    service = RoomService(store)
    for index, (player, body) in enumerate([("alice", {"kind": "create_room", "ruleset": "realm", "options": {
            "players": ["alice", "bob", "carol"], "years": 1}}), ("alice", {"kind": "join_room"})]):
        assert (await service.handle(CommandRecord(command_id=f"n-{index}", room="next-realm", player=player,
                                                   server_time_ms=START_MS, body=body))).accepted
    state = await folded(store, "next-realm")
    with pytest.raises(SeatRefused) as refused:
        await admit_seat(redis_client, KEYS, store, state, "next-realm", "bob", max_seats=3)
    assert (refused.value.status, refused.value.code) == (429, "bot_seats_full")
    assert await admit_seat(redis_client, KEYS, store, state, "next-realm", "bob", max_seats=4) == "empty"


async def test_a_signing_seat_that_misses_its_deadlines_goes_to_a_bot_whose_moves_are_taken(
        redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given alice's board@2 room with a turn limit of a minute that hands a seat missing 2 deadlines to a bot, her
    # seat signing her commands (her join registered her key, signed by it, as the console joins by default)
    room = "signing-alice"
    key = Ed25519PrivateKey.generate()
    public_key = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    created = await service.handle(record("c", {"kind": "create_room", "ruleset": "board@2", "bot_after_missed": 2,
                                                "options": {"turn_limit_s": LIMIT_S}}, room))
    assert created.accepted, created.error
    joined = await service.handle(msgspec.structs.replace(
        record("j", {"kind": "join_room", "public_key": public_key}, room),
        signature=key.sign(join_bytes(room, "alice", public_key, None)).hex()))
    assert joined.accepted, joined.error
    assert (await folded(store, room)).player_keys == (("alice", public_key),)
    now = At(START_MS)
    # When the operator puts a bot on her seat beside the log (`almanac bots add`) and sends what it would play
    await add_bot(redis_client, KEYS, room, "alice", START_MS)
    body = decide_for(await folded(store, room), "alice", 0, now.ms, key=b"the deployment's bot key")
    operators = CommandRecord(command_id="bot-operator", room=room, player="alice", server_time_ms=now.ms, body=body)
    await bus.submit(redis_client, KEYS, operators)
    refused = await service.handle((await clock_commands_or_bots(redis_client, room))[-1])
    # Then the room refuses it unrecorded: that bot is the operator acting for a player who signs
    assert (refused.accepted, refused.error["code"]) == (False, "signature_required")
    assert await store.outcome(room, "bot-operator") is None and await store.rejections(room) == []
    await remove_bot(redis_client, KEYS, room, "alice")
    # When she misses two turns in a row: the clock's time_outs, unsigned, are taken once each turn's limit passed
    clock = Clock(redis_client, KEYS, store, now_ms=now)
    await time_out_turn(clock, now, service, redis_client, room)
    await time_out_turn(clock, now, service, redis_client, room)
    # Then the room hands her seat to a bot, by the log
    assert (await seat_events(store, room))[-1] == ("room.seat_to_bot",
                                                    {"player": "alice", "reason": "missed", "missed": 2})
    await tick([clock], room)
    assert (room, "alice") in await bot_seats(redis_client, KEYS, range(16))
    # When the bots service plays her seat through the gateway, unsigned as always
    before = (await folded(store, room)).version
    await redis_client.delete(KEYS.command_stream(KEYS.shard(room)))  # the operator's refused command: gone
    async with served_gateway(redis_url, **DECIDED_HERE) as gateway:
        bots = bots_for(gateway, redis_client, store, KEYS, key=b"test bots", rate=0, now_ms=lambda: now.ms)
        await play_until_moved(bots, service, redis_client, store, room, before)
    # Then its move is taken: the log handed the seat over
    moved = [e for e in await store.read(room) if e.version > before]
    assert moved and moved[0].player == "alice" and moved[0].command_id.startswith(f"{room}:alice:bot-"), moved
    # and verify re-decides the room from the log, naming the clock's and the bot's commands, none forged
    report = await verify_room(store, room)
    assert report.ok, report.divergence
    assert report.signing_players == ["alice"] and report.commands_signed == 0
    assert report.commands_by_clock == 2 and report.commands_by_bot >= 1, report
