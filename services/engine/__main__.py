"""`python -m almanac.services.engine`: run one engine with settings from the environment."""

import asyncio

from almanac.services import bootstrap
from almanac.services.engine.process import run
from almanac.services.heap import collect_less_often, freeze_startup_heap
from almanac.services.logging import configure_logging

if __name__ == "__main__":
    collect_less_often()  # as `almanac engine` (every almanac process)
    settings = bootstrap.settings()
    configure_logging(settings.log_format, settings.log_level)
    try:
        url = bootstrap.served_url(settings)
    except bootstrap.BootstrapError as error:
        raise SystemExit(f"error: {error}") from None
    asyncio.run(run(settings, url, on_ready=freeze_startup_heap))
