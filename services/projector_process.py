"""The projector process: one Projector on the bootstrap's runtime (``Role.PROJECTOR``) until SIGINT/SIGTERM.

The feed is read with plain redis-py, never a messaging framework's subscriber: the projector's cursor is the
checkpoint it commits with the read models (exactly once), which no consumer group can give, and a FastStream
stream subscriber cost several times the CPU per entry of the raw XREAD (docs/design-rulings.md, "FastStream").
"""

from __future__ import annotations

from collections.abc import Callable

from almanac.projections.projector import Projector
from almanac.services import bootstrap
from almanac.services.settings import Settings


async def run(settings: Settings, redis_url: str, shards: list[int] | None = None, *, batch_size: int = 500,
              name: str = "projector", on_ready: Callable[[], None] | None = None) -> None:
    """Apply the shard feeds to the read models until SIGINT/SIGTERM (the batch in hand finishes), or until the
    projector's loop fails (the process then exits with its error); ``on_ready`` is called once the projector
    is built, before its first batch (the CLI freezes the start-up heap)."""
    runtime = bootstrap.runtime(settings, bootstrap.Role.PROJECTOR, redis_url)
    projector = Projector(runtime.client, settings.shard_count, shards, batch_size=batch_size, name=name,
                          feed_retain_ms=settings.stream_retain_s * 1000, gather_ms=settings.projector_gather_ms,
                          notifier_hold_ms=settings.notifier_hold_s * 1000,
                          store=runtime.store, loader=runtime.loader())
    try:
        await bootstrap.run_until_stopped(projector.run, "projector", on_ready)
    finally:
        await runtime.aclose()
