"""`almanac engine`: the shard engine without HTTP (every gateway runs the same one; this is a shard holder that
takes no traffic, e.g. behind gateways that hold no shard: ALMANAC_ENGINE_SHARDS=none)."""

from __future__ import annotations

import typer
import uvloop

from almanac.services import bootstrap
from almanac.services.cli import app
from almanac.services.cli.common import bootstrapped, fail, redis_url_for, settings_or_exit
from almanac.services.heap import freeze_startup_heap
from almanac.services.logging import configure_logging
from almanac.services.settings import parse_shard_selection


@app.command("engine")
def engine_command(
    shards: str = typer.Option(None, help='Shards to own: "all", "0,3,5", or "index/count" of a worker group '
                                          '(ALMANAC_ENGINE_SHARDS).'),
    name: str = typer.Option(None, help="Stable engine name (consumer name, metrics key); default host:shards."),
) -> None:
    """Run the shard engine without HTTP (gateways run it too): own shards by lease, decide their commands."""
    from almanac.services.engine.process import run  # noqa: PLC0415 - keep the CLI start fast

    settings = settings_or_exit(engine_shards=shards, engine_name=name)
    if not parse_shard_selection(settings.engine_shards, settings.shard_count):
        # "none" is for a gateway in front of engine processes; an engine process holding nothing would idle unseen.
        raise fail(f"ALMANAC_ENGINE_SHARDS={settings.engine_shards!r} holds no shard: `almanac engine` would do "
                   "nothing (none is for gateways in front of engine processes); use all, 0,3,5 or index/count")
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        bootstrapped(lambda: bootstrap.check_reachable(settings, url, bootstrap.Role.ENGINE))
        # uvloop: less CPU per command on a 2-core machine; ready, the start-up heap leaves the collections.
        uvloop.run(run(settings, url, on_ready=freeze_startup_heap))
