"""The event-store fixture: every contract test runs against each implementation (memory, real Redis, export files)."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from almanac.storage.export_store import ExportFileStore
from almanac.storage.memory_store import MemoryEventStore
from almanac.storage.redis_store import RedisEventStore


@pytest.fixture(params=["memory", "redis", "export-file"])
async def store(request, redis_url, tmp_path):
    if request.param == "memory":
        yield MemoryEventStore(shard_count=4)
        return
    if request.param == "export-file":
        yield ExportFileStore(tmp_path / "rooms", shard_count=4)
        return
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    yield RedisEventStore(client, shard_count=4)
    await client.aclose()
