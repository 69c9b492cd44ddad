"""`python -m almanac.services.engine`: run one engine with settings from the environment."""

import asyncio

from almanac.services.embedded_redis import running_server_url
from almanac.services.engine.process import run
from almanac.services.heap import collect_less_often, freeze_startup_heap
from almanac.services.logging import configure_logging
from almanac.services.settings import load_settings

if __name__ == "__main__":
    collect_less_often()  # as `almanac engine` (every almanac process)
    settings = load_settings()
    configure_logging(settings.log_format, settings.log_level)
    url = settings.redis_url or running_server_url(settings.data_dir)
    if not url:
        raise SystemExit("error: set REDIS_URL (or run `almanac engine`, which starts a local Redis)")
    asyncio.run(run(settings, url, on_ready=freeze_startup_heap))
