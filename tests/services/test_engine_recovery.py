"""An engine whose command stream vanishes under it (a Redis restarted without persistence, a flush) sets it up again.

Found by a branch-coverage run over the engine's tests (issue 29, item 7): the consume loop's NOGROUP branch
(``consume.group_missing``) was never taken by any test; taking it showed that a read blocked on the deleted
stream fails "UNBLOCKED the stream key no longer exists", which the engine took for an unexpected Redis error (a
traceback, a failed round towards stepping aside) instead of a vanished stream (``redis_errors.stream_vanished``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from engine_process_helper import register_test_rulesets
from engine_test_support import KEYS, record, send, wait_for
from redis.exceptions import ResponseError

from almanac.events import codec
from almanac.services.bus import COMMAND_FIELD
from almanac.services.engine.housekeeping import STUCK_AFTER_MS, STUCK_EVERY_S
from almanac.services.engine.shard_engine import GROUP, Engine, EngineConfig
from almanac.storage.redis_errors import stream_vanished
from almanac.storage.redis_store import RedisEventStore

register_test_rulesets()
ALL_SHARDS = list(range(16))


@contextlib.asynccontextmanager
async def engine_with_a_room(client: aioredis.Redis, name: str, room: str) -> AsyncIterator[tuple[Engine, str]]:
    """An engine ``name`` holding every shard, ``room`` (counter) created through it: (the engine, the room's command
    stream); the engine stopped after."""
    engine = Engine(client, EngineConfig(name=name, shards=ALL_SHARDS, lease_ms=800))
    await engine.start()
    try:
        assert (await send(client, room, "ann", {"kind": "create_room", "ruleset": "counter"}, "c1")).accepted
        yield engine, KEYS.command_stream(KEYS.shard(room))
    finally:
        await engine.stop()


async def test_a_command_stream_deleted_under_the_engine_is_set_up_again_and_its_next_command_answered(
        redis_client: aioredis.Redis) -> None:
    """Given an engine holding every shard that has answered a command, when that command's stream is deleted
    (its consumer group with it: the read blocked on it fails UNBLOCKED, every later read NOGROUP), then the engine
    creates the group again and answers the room's next command, and the room's log is whole."""
    room = "vanishing-stream"
    async with engine_with_a_room(redis_client, "recovers", room) as (_, stream):
        await redis_client.delete(stream)
        await wait_for(lambda: _group_exists(redis_client, stream), what="the engine's group created again")

        joined = await send(redis_client, room, "ann", {"kind": "join_room"}, "c2")
        assert joined.accepted and joined.last_version == 2
        assert [envelope.command_id for envelope in await RedisEventStore(redis_client).read(room)] == ["c1", "c2"]


async def _group_exists(client: aioredis.Redis, stream: str) -> bool:
    if not await client.exists(stream):
        return False
    return any(group["name"] in (GROUP, GROUP.encode()) for group in await client.xinfo_groups(stream))


async def test_a_read_of_a_deleted_stream_is_a_vanished_stream_not_an_engine_failure(redis_client: aioredis.Redis) -> None:
    """Given a read blocked on a command stream, when the stream is deleted, then its error is a vanished stream
    (the group is set up again), as a read of a stream without its group is; another error is not."""
    stream = KEYS.command_stream(0)
    await redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    reader = aioredis.Redis(connection_pool=redis_client.connection_pool)
    blocked = asyncio.ensure_future(reader.xreadgroup(GROUP, "c", {stream: ">"}, block=10_000))
    await wait_for(lambda: _blocked_clients(redis_client), what="the read blocked")
    await redis_client.delete(stream)
    with pytest.raises(ResponseError) as unblocked:
        await blocked
    with pytest.raises(ResponseError) as missing:
        await redis_client.xreadgroup(GROUP, "c", {stream: ">"})
    assert stream_vanished(unblocked.value) and stream_vanished(missing.value)
    assert not stream_vanished(ResponseError("BUSY Redis is busy running a script"))


async def _blocked_clients(client: aioredis.Redis) -> bool:
    return int((await client.info("clients"))["blocked_clients"]) > 0


async def test_an_entry_delivered_to_nobody_deciding_it_is_taken_over_and_decided(redis_client: aioredis.Redis) -> None:
    """Given an engine holding every shard, its room created, when the room's next command is delivered from the
    stream to a read nobody will answer (a read given up or cancelled after Redis ran it: the delivery stands, the
    entry pending, and a read of new entries never hands it out again), then the engine finds the entry stuck, takes
    the shard over, which replays it, and the command is decided once with nothing left pending. It stayed pending
    for good before (the Cluster failover story's "entries left pending", 1 of about 40 runs)."""
    room = "stuck-delivery"
    async with engine_with_a_room(redis_client, "unsticks", room) as (engine, stream):
        async with redis_client.pipeline(transaction=True) as pipe:  # delivered before the engine's read sees it
            pipe.xadd(stream, {COMMAND_FIELD: codec.encode(record(room, "ann", {"kind": "join_room"}, "c2"))})
            pipe.xreadgroup(GROUP, "a-read-given-up", {stream: ">"}, count=1)
            _, delivered = await pipe.execute()
        assert delivered and len(delivered[0][1]) == 1

        store = RedisEventStore(redis_client)
        await wait_for(lambda: store.outcome(room, "c2"), what="the stuck command decided", timeout_s=STUCK_AFTER_MS
                       / 1000 + 3 * STUCK_EVERY_S + 5)
        assert [envelope.command_id for envelope in await store.read(room)] == ["c1", "c2"]
        assert (await redis_client.xpending(stream, GROUP))["pending"] == 0
        assert engine.metrics.totals["pending_stuck"] >= 1
