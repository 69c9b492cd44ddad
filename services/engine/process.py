"""The engine as a FastStream application: the app owns the process lifecycle, the Engine does the work.

FastStream's own stream subscriber is not used for the command streams: it creates groups at ``$``,
never re-reads its pending entries, cannot follow leases, and its batch path measured half the speed
of a plain XREADGROUP (docs/measured-facts.md). The app gives signals, startup and graceful
shutdown; the broker shares the Redis URL and its logger.
"""

from __future__ import annotations

from collections.abc import Callable

from faststream import FastStream
from faststream.redis import RedisBroker

from almanac.services import bootstrap
from almanac.services.engine.worker import Engine, engine_config
from almanac.services.logging import get_logger
from almanac.services.redis_client import live_seed
from almanac.services.settings import Settings


def build_app(settings: Settings, redis_url: str, on_ready: Callable[[], None] | None = None) -> FastStream:
    """A FastStream app that runs one Engine for the settings' shards until SIGINT/SIGTERM; ``on_ready`` is
    called once it is built, before it takes its leases (the CLI freezes the start-up heap)."""
    logger = get_logger("almanac.engine.app")
    # The broker takes one URL: a node that answers now (REDIS_URL may name several Cluster nodes).
    broker = RedisBroker(live_seed(redis_url), logger=logger)
    app = FastStream(broker, logger=logger)
    running: dict[str, object] = {}

    @app.after_startup
    async def start_engine() -> None:
        runtime = bootstrap.runtime(settings, bootstrap.Role.ENGINE, redis_url)
        engine = Engine(runtime.client, engine_config(settings), runtime.store)
        running["runtime"], running["engine"] = runtime, engine
        if on_ready is not None:
            on_ready()  # built, not yet holding a lease: the freeze's own collection stalls no command
        await engine.start()

    @app.on_shutdown
    async def stop_engine() -> None:
        engine = running.get("engine")
        if isinstance(engine, Engine):
            await engine.stop()
        runtime = running.get("runtime")
        if isinstance(runtime, bootstrap.Runtime):
            await runtime.aclose()

    return app


async def run(settings: Settings, redis_url: str, on_ready: Callable[[], None] | None = None) -> None:
    await build_app(settings, redis_url, on_ready).run()
