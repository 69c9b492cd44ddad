"""The projector as a FastStream app: the broker holds the connection lifecycle, the lifespan runs the feed loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import structlog
from faststream import FastStream
from faststream.redis import RedisBroker

from almanac.projections.worker import Projector
from almanac.storage.redis_store import RedisEventStore


def projector_app(
    redis_url: str,
    shard_count: int,
    shards: list[int] | None = None,
    *,
    batch_size: int = 500,
    name: str = "projector",
    feed_retain_ms: int = 300_000,
    gather_ms: int = 100,
    open_store: Callable[[], RedisEventStore],
    on_ready: Callable[[], None] | None = None,
) -> FastStream:
    """A FastStream app running one Projector until the app stops (SIGINT/SIGTERM); the batch in hand finishes.

    ``open_store`` makes the projector's store on its own asyncio client (the CLI passes the bootstrap's,
    ``services.bootstrap.Role.PROJECTOR``: projections may not import services). ``on_ready`` is
    called once the projector is built, before its first batch (the CLI freezes the start-up heap).

    The feed loop is plain redis-py rather than a FastStream subscriber: FastStream's stream groups
    start at ``$``, never redeliver and cannot tie the ack to our own transaction, while the
    checkpoint written with the models is exactly the resume point we need.
    """
    broker = RedisBroker(redis_url, logger=structlog.get_logger("almanac.broker"))

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        store = open_store()
        client = store.client
        projector = Projector(client, shard_count, shards, batch_size=batch_size, name=name,
                              feed_retain_ms=feed_retain_ms, gather_ms=gather_ms, store=store)
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
