"""A room's bot move delay: its bots send nothing until the delay has passed since the room moved to them, and their
commands are recorded within the delay plus the stated margin (services/bots.py DELAY_MARGIN_MS), through a real engine."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from engine_test_support import KEYS, EngineProcess, send
from waiting import wait_for

from almanac.services.bots import DELAY_MARGIN_MS, MAX_DELAY_MS, add_bot, set_delay
from almanac.storage.keys import engine_heartbeat_key
from almanac.storage.redis_store import RedisEventStore

DELAY_MS = 600
MOVES = 4  # the bot's moves watched


async def test_a_rooms_bots_move_no_sooner_than_its_delay_and_within_the_margin_after(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    engine = EngineProcess(redis_url, "delay-engine", tmp_path)
    stop = asyncio.Event()
    playing: asyncio.Task | None = None
    async with served_gateway(redis_url) as gateway:  # the bots play through it, as `almanac bots` does
        try:
            await wait_for(lambda: redis_client.exists(engine_heartbeat_key("delay-engine")), timeout_s=20)
            # Given a board room whose seat is handed to a bot, the room's bots set to wait 600 ms after each move
            assert (await send(redis_client, "slow-map", "alice", {"kind": "create_room", "ruleset": "board",
                                                                    "options": {"player": "robo"}}, "sm-create")).accepted
            await set_delay(redis_client, KEYS, "slow-map", DELAY_MS)
            assert await add_bot(redis_client, KEYS, "slow-map", "robo", int(time.time() * 1000))
            # When a bots process plays it, while the room's version is watched (every 10 ms) for when each move lands
            bots = bots_for(gateway, redis_client, store, KEYS, key=b"test bots", rate=0)
            playing = asyncio.create_task(bots.run(stop))
            landed: list[tuple[int, float]] = [(1, time.time() * 1000)]  # (version, when seen: the host's wall clock, ms)
            deadline = time.monotonic() + 60
            while len(landed) < MOVES + 2 and time.monotonic() < deadline:  # the join, then MOVES moves
                version = int(await redis_client.get(KEYS.version("slow-map")) or 0)
                if version != landed[-1][0]:
                    landed.append((version, time.time() * 1000))
                await asyncio.sleep(0.01)
        finally:
            stop.set()
            if playing is not None:
                await playing
            engine.kill()
    assert len(landed) >= MOVES + 2, f"the bot moved {len(landed) - 1} times in 60 s"
    # Then in the log each of the bot's commands came no sooner than the delay after the room's event before it
    envelopes = await store.read("slow-map", 1, landed[-1][0])
    firsts = [index for index, e in enumerate(envelopes) if index and e.command_id != envelopes[index - 1].command_id]
    gaps = [envelopes[index].server_time_ms - envelopes[index - 1].server_time_ms for index in firsts]
    assert all(envelopes[index].player == "robo" for index in firsts)
    assert len(gaps) >= MOVES + 1 and min(gaps) >= DELAY_MS, gaps

    # and each was recorded within the delay plus the stated margin after the room moved to the bot: seen landed
    # (later than recorded) at most that long after the stamp of the room's event before it (earlier than recorded)

    def seen(version: int) -> float:  # when the watcher first saw the room at or past ``version``
        return next(when for (at, when) in landed if at >= version)

    late = [round(seen(envelopes[first].version) - envelopes[first - 1].server_time_ms - DELAY_MS)
            for first in firsts if envelopes[first].version <= landed[-1][0]]
    assert all(0 <= ms <= DELAY_MARGIN_MS for ms in late), late
    print("late past the delay (ms):", late)


async def test_a_delay_is_bounded_and_zero_clears_it(redis_client: aioredis.Redis) -> None:
    # Given a room's bot delay set, when it is set past the bound, then it is refused and the delay stands
    await set_delay(redis_client, KEYS, "bounded-room", 1_000)
    with pytest.raises(ValueError, match="bot delay"):
        await set_delay(redis_client, KEYS, "bounded-room", MAX_DELAY_MS + 1)
    key = KEYS.bot_delays(KEYS.shard("bounded-room"))
    assert int(await redis_client.hget(key, "bounded-room")) == 1_000
    # and 0 clears it (no key kept for a room with no delay)
    await set_delay(redis_client, KEYS, "bounded-room", 0)
    assert await redis_client.hget(key, "bounded-room") is None
