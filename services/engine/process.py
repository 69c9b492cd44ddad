"""The engine process: one Engine on the bootstrap's runtime (``Role.ENGINE``) until SIGINT/SIGTERM.

The command streams are read with plain redis-py, never a messaging framework's subscriber: consumer groups
created at ``$``, no re-read of pending entries and no lease to follow would lose or reorder commands, and a
FastStream subscriber cost several times the CPU per message of the raw read (docs/design-rulings.md,
"FastStream"; docs/measured-facts.md).
"""

from __future__ import annotations

from collections.abc import Callable

from almanac.services import bootstrap
from almanac.services.engine.shard_engine import Engine, engine_config
from almanac.services.settings import Settings


async def run(settings: Settings, redis_url: str, on_ready: Callable[[], None] | None = None) -> None:
    """Run one Engine for the settings' shards until SIGINT/SIGTERM, then stop it (the commands in hand are
    finished and acknowledged, the leases given back); ``on_ready`` is called once it is built, before it takes
    its leases (the CLI freezes the start-up heap)."""
    runtime = bootstrap.runtime(settings, bootstrap.Role.ENGINE, redis_url)
    engine = Engine(runtime.client, engine_config(settings), runtime.store, loaders=runtime.loader)
    try:
        if on_ready is not None:
            on_ready()  # built, not yet holding a lease: the freeze's own collection stalls no command
        await engine.start()
        await bootstrap.until_stopped()
    finally:
        await engine.stop()
        await runtime.aclose()
