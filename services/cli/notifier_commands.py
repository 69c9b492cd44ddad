"""`almanac notifier`: deliver webhooks (services/notifier.py) until stopped."""

from __future__ import annotations

import uvloop

from almanac.services import bootstrap, notifier
from almanac.services.cli import app
from almanac.services.cli.common import bootstrapped, redis_url_for, settings_or_exit
from almanac.services.heap import freeze_startup_heap
from almanac.services.logging import configure_logging


@app.command("notifier")
def run_notifier() -> None:
    """Run the notifier: turn room events into webhook deliveries, with retries, until stopped (Ctrl+C / SIGTERM)."""
    settings = settings_or_exit()
    configure_logging(settings.log_format, settings.log_level)
    with redis_url_for(settings, create=True) as url:
        bootstrapped(lambda: bootstrap.check_reachable(settings, url, bootstrap.Role.TOOL))
        freeze_startup_heap()
        uvloop.run(notifier.run(settings, url))
