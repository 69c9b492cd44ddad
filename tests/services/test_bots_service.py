"""`almanac bots` plays the seats handed to bots through a real engine: a kill -9 and a second racing process
change nothing of what is decided (commands are derived from the log, under derived ids), and the room verifies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from engine_test_support import KEYS, EngineProcess, send
from waiting import wait_for

from almanac.events import registry
from almanac.services.bots import Bucket, add_bot, bot_seats
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import engine_heartbeat_key
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

ALMANAC = Path(sys.executable).with_name("almanac")


class BotsProcess:
    """One `almanac bots` OS process; its log goes to a file."""

    def __init__(self, redis_url: str, gateway_url: str, log_dir: Path, *args: str) -> None:
        self.log = (log_dir / f"bots-{time.monotonic_ns()}.log").open("wb")
        env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_LOG_FORMAT": "json", "ALMANAC_LOG_LEVEL": "info",
               "ALMANAC_BOTS_GATEWAY_URL": gateway_url}
        self.process = subprocess.Popen([str(ALMANAC), "bots", *args], env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self.log.close()


async def board_over(store: RedisEventStore, room: str) -> bool:
    state, _ = await store_state(store, room)
    return state is not None and registry.decider_at(state.ruleset, state.ruleset_version).is_over(state.game)


async def store_state(store: RedisEventStore, room: str):
    return await RoomLoader(store, 0).load(room)  # a fresh loader: never a cached state


async def test_a_bot_takes_an_empty_seat_and_plays_it_through_a_kill_and_a_racing_twin(
        redis_client: aioredis.Redis, redis_url: str, tmp_path: Path) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    engine = EngineProcess(redis_url, "bots-engine", tmp_path)
    bots: list[BotsProcess] = []
    async with served_gateway(redis_url) as gateway:  # the bots processes play through it
        try:
            await wait_for(lambda: redis_client.exists(engine_heartbeat_key("bots-engine")), timeout_s=20)
            # Given a board room alice created for a seat nobody has taken, handed to a bot
            created = await send(redis_client, "robo-map", "alice", {"kind": "create_room", "ruleset": "board",
                                                                      "options": {"player": "robo"}}, "rm-create")
            assert created.accepted, created.error
            assert await add_bot(redis_client, KEYS, "robo-map", "robo", int(time.time() * 1000))
            assert not await add_bot(redis_client, KEYS, "robo-map", "robo", 0), "a seat is handed once"
            # and a room whose one seat alice took herself, handed to a bot by mistake
            assert (await send(redis_client, "alices-map", "alice", {"kind": "create_room", "ruleset": "board"},
                               "am-create")).accepted
            assert (await send(redis_client, "alices-map", "alice", {"kind": "join_room"}, "am-join")).accepted
            await add_bot(redis_client, KEYS, "alices-map", "alice", 0)
            # When a bots process plays it, is killed -9 mid-game, and two processes race for the rest
            bots.append(BotsProcess(redis_url, gateway.url, tmp_path, "--rate", "20"))

            async def moved(at_least: int) -> bool:
                return int(await redis_client.get(KEYS.version("robo-map")) or 0) >= at_least

            await wait_for(lambda: moved(8), timeout_s=60)
            bots[0].kill()
            bots += [BotsProcess(redis_url, gateway.url, tmp_path, "--rate", "20") for _ in range(2)]
            await wait_for(lambda: board_over(store, "robo-map"), timeout_s=120)
        finally:
            for process in bots:
                process.kill()
            engine.kill()
    # Then the bot took the seat (its join is the room's second command) and played the game to its end
    envelopes = await store.read("robo-map")
    assert [e.type for e in envelopes[:2]] == ["room.created", "room.player_joined"] and envelopes[1].player == "robo"
    moves = [e for e in envelopes if e.player == "robo" and e.type.startswith("board.")]
    assert len(moves) >= 20
    # every command of the seat is the bot's, each decided once (one id per decided command)
    ids = [e.command_id for e in envelopes[1:]]
    decided = list(dict.fromkeys(ids))
    assert all(command.startswith("robo-map:robo:bot-") for command in decided), decided[:3]  # through the gateway
    assert len({e.version for e in envelopes}) == len(envelopes)
    # and the room verifies: its commands re-decided from the log alone give the same events
    report = await verify_room(store, "robo-map")
    assert report.ok, report
    # while the seat alice took stayed hers: the bot never acted in her room
    assert [e.type for e in await store.read("alices-map")] == ["room.created", "room.player_joined"]


async def test_bot_seats_are_kept_per_shard_in_redis(redis_client: aioredis.Redis) -> None:
    await add_bot(redis_client, KEYS, "room-a", "alice", 1)
    await add_bot(redis_client, KEYS, "room-b", "bob", 1)
    assert await bot_seats(redis_client, KEYS, range(16)) == [("room-a", "alice"), ("room-b", "bob")]
    assert await bot_seats(redis_client, KEYS, [KEYS.shard("room-a")]) == [("room-a", "alice")] or \
        KEYS.shard("room-a") == KEYS.shard("room-b")


def test_the_command_rate_is_a_token_bucket() -> None:
    now = [100.0]
    bucket = Bucket(2.0, clock=lambda: now[0])
    assert not bucket.take()  # nothing saved up at the start
    now[0] += 1.0
    assert [bucket.take() for _ in range(3)] == [True, True, False]  # two a second, no more
    now[0] += 60.0
    assert sum(bucket.take() for _ in range(10)) == 2  # an idle minute saves up one second's worth only
    assert all(Bucket(0).take() for _ in range(100))  # 0: unbounded


async def test_a_process_plays_at_most_its_max_rooms_seats(redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    for index in range(3):
        room = f"capped-{index}"
        assert (await send_direct(store, room)).accepted
        await add_bot(redis_client, KEYS, room, "robo", 0)
    async with served_gateway(redis_url, ALMANAC_ENGINE_SHARDS="all") as gateway:  # it decides the joins
        bots = bots_for(gateway, redis_client, store, KEYS, key=b"test bots", max_rooms=2, rate=0)
        assert await bots.tick() == 2 and bots.over_limit == 1


async def send_direct(store: RedisEventStore, room: str):
    return await RoomService(store).handle(CommandRecord(
        command_id=f"{room}-c", room=room, player="ann", server_time_ms=1_000,
        body={"kind": "create_room", "ruleset": "board", "options": {"player": "robo"}}))
