"""The engine as a FastStream application: the app owns the process lifecycle, the Engine does the work.

FastStream's own stream subscriber is not used for the command streams: it creates groups at ``$``,
never re-reads its pending entries, cannot follow leases, and its batch path measured half the speed
of a plain XREADGROUP (docs/measured-facts.md). The app gives signals, startup and graceful
shutdown; the broker shares the Redis URL and its logger.
"""

from __future__ import annotations

from faststream import FastStream
from faststream.redis import RedisBroker

from almanac.services.engine.worker import Engine, EngineConfig, default_engine_name
from almanac.services.logging import get_logger
from almanac.services.redis_client import connect, live_seed
from almanac.services.settings import Settings, parse_shard_selection


def engine_config(settings: Settings) -> EngineConfig:
    return EngineConfig(
        name=settings.engine_name or default_engine_name(settings.engine_shards),
        shards=parse_shard_selection(settings.engine_shards, settings.shard_count),
        shard_count=settings.shard_count,
        lease_ms=settings.lease_ms,
        batch_size=settings.batch_size,
        max_attempts=settings.max_attempts,
        snapshot_every=settings.snapshot_every,
        durability=settings.durability,
        stream_retain_ms=settings.stream_retain_s * 1000,
    )


def build_app(settings: Settings, redis_url: str) -> FastStream:
    """A FastStream app that runs one Engine for the settings' shards until SIGINT/SIGTERM."""
    logger = get_logger("almanac.engine.app")
    # The broker takes one URL: a node that answers now (REDIS_URL may name several Cluster nodes).
    broker = RedisBroker(live_seed(redis_url), logger=logger)
    app = FastStream(broker, logger=logger)
    running: dict[str, object] = {}

    @app.after_startup
    async def start_engine() -> None:
        client = connect(redis_url, cluster=settings.redis_cluster)
        engine = Engine(client, engine_config(settings))
        running["client"], running["engine"] = client, engine
        await engine.start()

    @app.on_shutdown
    async def stop_engine() -> None:
        engine = running.get("engine")
        if isinstance(engine, Engine):
            await engine.stop()
        client = running.get("client")
        if client is not None:
            await client.aclose()  # type: ignore[attr-defined]

    return app


async def run(settings: Settings, redis_url: str) -> None:
    await build_app(settings, redis_url).run()
