"""Through the gateway: a create with bots, or a leave, answered 202 keeps its bot seat only until its outcome is
recorded; refused, the seat is given back by the bots' next round, not by the 10-minute cleanup."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import redis.asyncio as aioredis
from bot_gateway import NO_GATEWAY, bots_for
from engine_test_support import KEYS
from fastapi.testclient import TestClient
from suite_settings import suite_settings

from almanac.services.bots import bound_count
from almanac.services.bus import COMMAND_FIELD
from almanac.services.gateway import create_app
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore


async def decide_the_stream(redis_url: str) -> list:
    """Play the engine's part once: decide every command waiting in the shards' streams, in order (no engine runs)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        service = RoomService(RedisEventStore(client, shard_count=KEYS.shard_count))
        outcomes = []
        for shard in range(KEYS.shard_count):
            for _, fields in await client.xrange(KEYS.command_stream(shard)):
                record = msgspec.msgpack.decode(fields[COMMAND_FIELD.encode()], type=CommandRecord)
                outcomes.append(await service.handle(record))
        return outcomes
    finally:
        await client.aclose()


async def bots_round_then_count(redis_url: str) -> int:
    client = aioredis.Redis.from_url(redis_url)
    try:
        store = RedisEventStore(client, shard_count=KEYS.shard_count)
        await bots_for(NO_GATEWAY, client, store, KEYS, key=b"answered 202", rate=0).tick()
        return await bound_count(client, KEYS)
    finally:
        await client.aclose()


async def decide_directly(redis_url: str, room: str, *commands: tuple[str, dict]) -> None:
    """Commands decided as the engine decides them, each accepted (``(player, body)``), before the gateway's."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        service = RoomService(RedisEventStore(client, shard_count=KEYS.shard_count))
        for number, (player, body) in enumerate(commands):
            record = CommandRecord(command_id=f"direct-{body['kind']}-{player}-{number}", room=room, player=player,
                                   server_time_ms=1_000 + number, body=body)
            outcome = await service.handle(record)
            assert outcome.accepted, outcome.error
    finally:
        await client.aclose()


def no_engine(redis_url: str, tmp_path: Path):
    """A deployment of at most 1 bot seat whose engine is not running: every command is answered 202."""
    return suite_settings(redis_url=redis_url, data_dir=str(tmp_path)).model_copy(
        update={"command_timeout_ms": 50, "engine_shards": "none", "max_bot_seats": 1})


def create(room: str, player: str, **extra) -> tuple[str, dict]:
    return player, {"kind": "create_room", "ruleset": "realm", "options": {"players": [player, "bob"]}, **extra}


def test_a_create_answered_202_then_refused_gives_its_bot_seat_back_at_the_bots_next_round(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    # Given a deployment of at most 1 bot seat whose engine is not running (every command is answered 202), and the
    # room "duel" alice created
    asyncio.run(decide_directly(redis_url, "duel", create("duel", "alice")))
    with TestClient(create_app(no_engine(redis_url, tmp_path))) as api:
        # When mallory creates "duel" too, with a bot for bob: answered 202, the seat taken for it
        body = {"ruleset": "realm", "player": "mallory", "room": "duel", "bots": ["bob"],
                "options": {"players": ["mallory", "bob"]}}
        pending = api.post("/rooms", json=body)
        assert pending.status_code == 202 and pending.json()["code"] == "outcome_pending", pending.text
        # so another room's bot does not fit while the create is undecided
        other = {**body, "room": "other", "player": "carol", "options": {"players": ["carol", "bob"]}}
        assert api.post("/rooms", json=other).json()["code"] == "bot_seats_full"
        # When the engine then decides it: refused, the room exists
        (refused,) = asyncio.run(decide_the_stream(redis_url))
        assert (refused.error or {}).get("code") == "room_exists"
        # Then the bots' next round gives the seat back, and the other room's bot fits
        assert asyncio.run(bots_round_then_count(redis_url)) == 0
        assert api.post("/rooms", json=other).status_code == 202


def test_a_leave_answered_202_then_refused_gives_its_bot_seat_back_at_the_bots_next_round(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    # Given the same deployment, and a realm room with seat bots where alice and bob are seated
    asyncio.run(decide_directly(redis_url, "hall", create("hall", "alice", seat_bots=True),
                                ("alice", {"kind": "join_room"}), ("bob", {"kind": "join_room"})))
    with TestClient(create_app(no_engine(redis_url, tmp_path))) as api:
        bob = api.app.state.signer.issue("hall", "bob")
        # When bob leaves his seat to a bot: answered 202, the seat taken for his leave
        pending = api.post("/rooms/hall/bots", json={"seat": "bob"}, headers={"Authorization": f"Bearer {bob}"})
        assert pending.status_code == 202, pending.text
        # and alice ends the room before the engine decides the leave, which it then refuses
        asyncio.run(decide_directly(redis_url, "hall", ("alice", {"kind": "end_room"})))
        (refused,) = asyncio.run(decide_the_stream(redis_url))
        assert (refused.error or {}).get("code") == "room_ended"
    # Then the bots' next round gives the seat back
    assert asyncio.run(bots_round_then_count(redis_url)) == 0
