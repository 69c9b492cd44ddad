"""A player who comes back with their seat key takes their seat back from the bot the room handed it to."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from engine_test_support import KEYS, EngineProcess
from test_board_turn_limit import START_MS, At, record
from test_missed_deadlines_to_bot import LIMIT_S, time_out_turn
from waiting import wait_for

from almanac.events.signing import join_bytes
from almanac.events.step import replay
from almanac.services.bots import ATTEMPTS, add_bot, bot_command_id, bot_seats
from almanac.services.bus import internal_command_id
from almanac.services.clock import Clock
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import RoomService
from almanac.storage.keys import engine_heartbeat_key
from almanac.storage.redis_store import RedisEventStore

DELAY_MS = 300  # the room's bot delay: the seat handed later waits it too


def bot_moves(envelopes: list, room: str, seat: str, after: int = 0) -> list:
    """The commands a bot sent as ``seat`` (through the gateway: ids ``room:seat:bot-...``) recorded after ``after``."""
    return [e for e in envelopes if e.version > after and e.player == seat
            and e.command_id.startswith(f"{room}:{seat}:bot-")]


async def keep_ticking(clock: Clock, room: str, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await clock.tick([KEYS.shard(room)])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


async def test_a_seat_handed_to_a_bot_for_a_missed_deadline_comes_back_with_its_seat_key(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # the engine decides; the story's own clock sends the deadlines' timeouts, until it stops
    engine = EngineProcess(redis_url, "reclaim-engine", tmp_path, ALMANAC_CLOCK="false")
    stop_clock, stop_bots = asyncio.Event(), asyncio.Event()
    try:
        async with served_gateway(redis_url) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
            await wait_for(lambda: redis_client.exists(engine_heartbeat_key("reclaim-engine")), timeout_s=20)
            # Given alice's realm room whose seasons end after 1.5 s, handing a seat that misses one to a bot,
            # with bob's seat played by a bot from the start
            created = await http.post("/rooms", json={
                "ruleset": "realm", "player": "alice", "room": "reclaimed-realm", "bots": ["bob"],
                "options": {"players": ["alice", "bob"], "season_timeout_ms": 1500, "years": 50},
                "bot_after_missed": 1, "bot_delay_ms": DELAY_MS})
            assert created.status_code == 201, created.text
            room, seat_key = "reclaimed-realm", created.json()["seat_key"]
            clock = Clock(redis_client, KEYS, store)
            bots = bots_for(gateway, redis_client, store, KEYS, rate=0)
            ticking = asyncio.create_task(keep_ticking(clock, room, stop_clock))
            playing = asyncio.create_task(bots.run(stop_bots, 0.05))
            # When alice misses the season's end: the room hands her seat to a bot, which plays it
            await wait_for(lambda: _has(store, room, "room.seat_to_bot"), timeout_s=30)
            await wait_for(lambda: _bot_moved(store, room, "alice"), timeout_s=30)
            stop_clock.set()  # no deadline passes from here: her seat is never handed over again
            await ticking
            # and she comes back with her seat key
            back = await http.post(f"/rooms/{room}/seat", json={"player": "alice", "seat_key": seat_key})
            assert back.status_code == 200, back.text
            # Then the room took her seat back from the bot, as an event every player sees
            assert back.json()["reclaimed"] is True and back.json()["token"]
            reclaimed_at = back.json()["version"]
            envelopes = await store.read(room)
            assert envelopes[reclaimed_at - 1].type == "room.seat_reclaimed"
            # and the registry no longer holds her seat (its place in the bound freed)
            assert (room, "alice") not in await bot_seats(redis_client, KEYS, range(16))
            # When a bots process that read the seat before the reclaim writes it back to the registry
            await add_bot(redis_client, KEYS, room, "alice", int(time.time() * 1000))
            # Then its next rounds read the reclaim in the log before sending, and drop the seat
            await wait_for(lambda: _gone(redis_client, room, "alice"), timeout_s=10)
            await asyncio.sleep(1.0)  # rounds enough for a bot that still played her seat to send again
            stop_bots.set()
            await playing
    finally:
        stop_clock.set()
        stop_bots.set()
        engine.kill()
    # and from the reclaim on, no bot sent anything as alice: only she plays her seat
    envelopes = await store.read(room)
    assert bot_moves(envelopes, room, "alice", reclaimed_at) == []
    # and the bot that played her seat meanwhile waited the room's delay before each of its moves
    gaps = [e.server_time_ms - _seen(envelopes, room, e).server_time_ms for e in bot_moves(envelopes, room, "alice")]
    assert gaps and min(gaps) >= DELAY_MS, gaps
    assert (room, "alice") not in await bot_seats(redis_client, KEYS, range(16))
    # and the room verifies: the reclaim re-decided from the log alone gives the same event
    report = await verify_room(store, room)
    assert report.ok, report


def _seen(envelopes: list, room: str, move: Any) -> Any:
    """The event a bot's command was decided after: its id names the version it saw (services/bots.py
    ``bot_command_id``, scoped by the gateway)."""
    return next(before for before in envelopes for attempt in range(ATTEMPTS)
                if move.command_id == internal_command_id(room, move.player,
                                                          bot_command_id(room, move.player, before.version, attempt)))


async def _has(store: RedisEventStore, room: str, kind: str) -> bool:
    return any(e.type == kind for e in await store.read(room))


async def _bot_moved(store: RedisEventStore, room: str, seat: str) -> bool:
    return bool(bot_moves(await store.read(room), room, seat))


async def _gone(client: aioredis.Redis, room: str, seat: str) -> bool:
    return (room, seat) not in await bot_seats(client, KEYS, range(16))


async def test_a_signing_seat_taken_back_from_its_bot_needs_no_signature_and_verifies(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given alice's board@2 room whose seat signs, handed to a bot after one missed turn
    room = "signing-reclaimed"
    key = Ed25519PrivateKey.generate()
    public_key = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    assert (await service.handle(record("c", {"kind": "create_room", "ruleset": "board@2", "bot_after_missed": 1,
                                              "options": {"turn_limit_s": LIMIT_S}}, room))).accepted
    joined = await service.handle(msgspec.structs.replace(
        record("j", {"kind": "join_room", "public_key": public_key}, room),
        signature=key.sign(join_bytes(room, "alice", public_key, None)).hex()))
    assert joined.accepted, joined.error
    now = At(START_MS)
    await time_out_turn(Clock(redis_client, KEYS, store, now_ms=now), now, service, redis_client, room)
    assert replay(await store.read(room)).bot_seats == ("alice",)
    # When the gateway sends her reclaim_seat (her seat key opened it: no signature of hers), twice
    first = await service.handle(record("reclaim-1", {"kind": "reclaim_seat"}, room, now.ms))
    again = await service.handle(record("reclaim-2", {"kind": "reclaim_seat"}, room, now.ms))
    # Then the first is taken unsigned and gives the seat back; the second, her seat no bot's now, is a signing
    # seat's unsigned command like any other: refused unrecorded
    assert first.accepted, first.error
    assert [e.type for e in first.envelopes] == ["room.seat_reclaimed"]
    assert replay(await store.read(room)).bot_seats == ()
    assert (again.accepted, again.error["code"]) == (False, "signature_required")
    assert await store.outcome(room, "reclaim-2") is None
    # and verify re-decides the room from the log: the reclaim is named, nothing forged
    report = await verify_room(store, room)
    assert report.ok, report.divergence
    assert any("taken back from their bots" in note for note in report.notes), report.notes
