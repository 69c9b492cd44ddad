"""The bots process plays every bot seat through the gateway's public API: with no gateway answering, a bot seat is not
played and nothing of it reaches the rooms' command streams; with one, the seat's join, view reads and moves arrive
at it as HTTP requests of that seat (counted by route, their ids scoped by the gateway as any client's), and the
seat's token shows that seat's view only."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from bot_gateway import NO_GATEWAY, bots_for, served_gateway
from engine_test_support import KEYS, EngineProcess, send
from waiting import wait_for

from almanac.services.bots import add_bot, bot_join_client_id, dice_key
from almanac.services.bus import internal_command_id
from almanac.services.checkpoints import commit_secret
from almanac.storage.keys import engine_heartbeat_key
from almanac.storage.redis_store import RedisEventStore

ROOM = "http-map"


def requests_of(gateway, method: str, route: str, status: str = "200") -> float:
    """The gateway's count of ``method route`` answered ``status`` (its almanac_http_requests_total)."""
    registry = gateway.app.state.gateway.metrics.registry
    return registry.get_sample_value("almanac_http_requests_total",
                                     {"method": method, "route": route, "status": status}) or 0.0


async def test_a_bot_seat_is_played_only_through_the_gateway(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    stream = KEYS.command_stream(KEYS.shard(ROOM))
    engine = EngineProcess(redis_url, "http-bots-engine", tmp_path)
    try:
        await wait_for(lambda: redis_client.exists(engine_heartbeat_key("http-bots-engine")), timeout_s=20)
        # Given alice's board room whose one seat, robo, nobody has taken, handed to a bot
        assert (await send(redis_client, ROOM, "alice", {"kind": "create_room", "ruleset": "board",
                                                          "options": {"player": "robo"}}, "hm-create")).accepted
        assert await add_bot(redis_client, KEYS, ROOM, "robo", int(time.time() * 1000))
        queued = await redis_client.xlen(stream)
        # When a bots process runs rounds while its gateway is down (nothing answers at its URL)
        down = bots_for(NO_GATEWAY, redis_client, store, KEYS, key=b"any key", rate=0)
        for _ in range(5):
            assert await down.tick() == 0
            await asyncio.sleep(0.05)
        # Then the seat is not played: no join in the room's log, nothing more in its shard's command stream
        assert await store.latest_version(ROOM) == 1 and await redis_client.xlen(stream) == queued
        assert down.failed == 1  # the round said the gateway failed it
        # When the gateway is up and the bots play through it
        async with served_gateway(redis_url) as gateway:
            bots = bots_for(gateway, redis_client, store, KEYS, rate=0)
            for _ in range(300):
                await bots.tick()
                if await store.latest_version(ROOM) >= 4:
                    break
                await asyncio.sleep(0.05)
            # Then the seat's join, its view reads and its moves reached the gateway as HTTP requests
            assert requests_of(gateway, "POST", "/rooms/{room}/join") >= 1
            assert requests_of(gateway, "GET", "/rooms/{room}/view") >= 2
            assert requests_of(gateway, "POST", "/rooms/{room}/commands", "200") >= 2
            # and the seat's token, the one the bot holds, shows robo's view only: never another seat's
            token = bots.tokens[(ROOM, "robo")]
            async with httpx.AsyncClient(base_url=gateway.url) as http:
                mine = await http.get(f"/rooms/{ROOM}/view", headers={"Authorization": f"Bearer {token}"})
                other = await http.get(f"/rooms/{ROOM}/view", params={"player": "alice"},
                                       headers={"Authorization": f"Bearer {token}"})
            assert mine.status_code == 200 and mine.json()["player"] == "robo"
            assert (other.status_code, other.json()["code"]) == (403, "other_seat")
            key = dice_key(commit_secret(gateway.settings))
    finally:
        engine.kill()
    # and the log holds them under the ids the gateway gives a client's: the bot's join id, then its move ids
    envelopes = await store.read(ROOM)
    assert envelopes[1].type == "room.player_joined" and envelopes[1].player == "robo"
    assert envelopes[1].command_id == internal_command_id(ROOM, "robo", bot_join_client_id(key, ROOM, "robo"))
    moves = [e for e in envelopes[2:] if e.player == "robo"]
    assert len(moves) >= 2 and all(e.command_id.startswith(f"{ROOM}:robo:bot-") for e in moves)
