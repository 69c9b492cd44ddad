"""The projector as a FastStream app: the broker holds the connection lifecycle, the lifespan runs the feed loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import redis.asyncio as aioredis
import structlog
from faststream import FastStream
from faststream.redis import RedisBroker

from almanac.projections.worker import Projector


def projector_app(
    redis_url: str,
    shard_count: int,
    shards: list[int] | None = None,
    *,
    batch_size: int = 500,
    name: str = "projector",
    feed_retain_ms: int = 300_000,
    gather_ms: int = 100,
    client_factory: Callable[[], Any] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> FastStream:
    """A FastStream app running one Projector until the app stops (SIGINT/SIGTERM); the batch in hand finishes.

    ``client_factory`` makes the projector's asyncio client (the CLI passes one that builds a Redis
    Cluster client when REDIS_CLUSTER is set); by default a plain client on ``redis_url``. ``on_ready`` is
    called once the projector is built, before its first batch (the CLI freezes the start-up heap).

    The feed loop is plain redis-py rather than a FastStream subscriber: FastStream's stream groups
    start at ``$``, never redeliver and cannot tie the ack to our own transaction, while the
    checkpoint written with the models is exactly the resume point we need.
    """
    broker = RedisBroker(redis_url, logger=structlog.get_logger("almanac.broker"))

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        client = client_factory() if client_factory is not None else aioredis.Redis.from_url(redis_url)
        projector = Projector(client, shard_count, shards, batch_size=batch_size, name=name,
                              feed_retain_ms=feed_retain_ms, gather_ms=gather_ms)
        stop = asyncio.Event()
        task = asyncio.create_task(projector.run(stop))
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            stop.set()
            await task
            await client.aclose()

    return FastStream(broker, lifespan=lifespan, logger=structlog.get_logger("almanac.app"))
