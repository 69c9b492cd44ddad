"""kill -9 of a real projector process mid-batch, then restart: nothing applied twice, nothing missed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from projection_games import dump_models, open_room, options_for, play

from almanac.projections.read_model_queries import ReadModels
from almanac.projections.rebuild import rebuild
from almanac.services.room_service import RoomService
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

SHARDS = 4
PROCESS = Path(__file__).with_name("projector_with_test_rulesets.py")

pytestmark = pytest.mark.slow


def start_projector(redis_url: str) -> subprocess.Popen:
    env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_SHARDS": str(SHARDS), "ALMANAC_LOG_FORMAT": "json",
           "ALMANAC_LOG_LEVEL": "warning"}
    return subprocess.Popen([sys.executable, str(PROCESS), "--batch-size", "4"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def projected_events(client) -> int:
    keys = Keys()
    total = 0
    for shard in range(SHARDS):
        total += sum(int(v) for v in (await client.hgetall(keys.versions(shard))).values())
    return total


async def assert_models_match_their_checkpoints(client) -> None:
    """The versions the models hold are exactly those of the feed entries up to each shard's checkpoint."""
    keys = store_keys = Keys(SHARDS)
    for shard in range(SHARDS):
        checkpoint = await client.get(keys.checkpoint(shard))
        expected: dict[bytes, bytes] = {}
        if checkpoint is not None:
            for _, fields in await client.xrange(store_keys.feed(shard), "-", checkpoint):
                expected[fields[b"r"]] = fields[b"l"]
        assert await client.hgetall(keys.versions(shard)) == expected


async def write_games(service: RoomService, rooms: list[tuple[str, str]], moves: int, first_move: int) -> None:
    await asyncio.gather(*(
        play(service, room, ruleset, moves, ["alice", "bob"], first_move=first_move) for room, ruleset in rooms
    ))


async def test_a_projector_killed_mid_batch_resumes_without_applying_anything_twice(redis_url, redis_client):
    service = RoomService(RedisEventStore(redis_client, shard_count=SHARDS))
    rooms = [(f"{ruleset}-{i}", ruleset) for i in range(8) for ruleset in ("counter", "bazaar")]
    for room, ruleset in rooms:
        await open_room(service, room, ruleset, ["alice", "bob"], options=options_for(ruleset))
    await write_games(service, rooms, 40, 0)
    total = await projected_total(service, rooms)

    for round_, kill_at in enumerate((0.2, 0.6)):
        process = start_projector(redis_url)
        try:
            deadline = time.monotonic() + 20
            while await projected_events(redis_client) < kill_at * total:
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "the projector made no progress"
                await asyncio.sleep(0.005)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            process.wait(10)
        assert process.returncode == -signal.SIGKILL
        assert 0 < await projected_events(redis_client) < total
        await assert_models_match_their_checkpoints(redis_client)
        # While no projector runs, the games go on: the next one must pick these up too.
        await write_games(service, rooms[:4], 5, 40 + 5 * round_)
        total = await projected_total(service, rooms)

    process = start_projector(redis_url)
    try:
        models = ReadModels(redis_client, SHARDS)
        for room, _ in rooms:
            version = (await service.load(room))[0].version
            assert await models.wait_for(room, version, timeout_s=20), room
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0, process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    live = await dump_models(redis_client)
    await rebuild(redis_client, SHARDS)
    assert await dump_models(redis_client) == live


async def projected_total(service: RoomService, rooms: list[tuple[str, str]]) -> int:
    return sum([(await service.load(room))[0].version for room, _ in rooms])
