"""Run a real engine process for tests: the test rule-sets registered, settings from the environment.

Usage: ``python tests/services/engine_process_helper.py`` with REDIS_URL and ALMANAC_* set.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from counter_ruleset import COUNTER, Add, CounterDecider  # noqa: E402

from almanac.events import registry  # noqa: E402


class FragileDecider(CounterDecider):
    """The counter, except that adding 13 crashes decide (a poison command, not a rule refusal)
    and adding 99 takes a second (so a test can kill the engine while it holds a batch)."""

    name = "fragile"

    def decide(self, state: Any, command: Any, ctx: Any) -> list[Any]:
        if isinstance(command, Add) and command.amount == 13:
            raise ZeroDivisionError("thirteen is unlucky")
        if isinstance(command, Add) and command.amount == 99:
            time.sleep(1.0)
        return super().decide(state, command, ctx)


FRAGILE = FragileDecider()


def register_test_rulesets() -> None:
    registry.register(COUNTER)
    registry.register(FRAGILE)


if __name__ == "__main__":
    register_test_rulesets()
    from almanac.services.engine.process import run  # noqa: PLC0415
    from almanac.services.logging import configure_logging  # noqa: PLC0415
    from almanac.services.settings import load_settings  # noqa: PLC0415

    settings = load_settings()
    configure_logging(settings.log_format, settings.log_level)
    asyncio.run(run(settings, settings.redis_url or ""))
