"""Connecting to Redis: a single server, or a Redis Cluster (every key of a room shares one slot)."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster


def connect(url: str, cluster: bool = False) -> aioredis.Redis:
    """An asyncio client for ``url``; ``cluster`` uses the Cluster client, which routes by hash tag."""
    if cluster:
        return RedisCluster.from_url(url)  # type: ignore[return-value]
    return aioredis.Redis.from_url(url)
