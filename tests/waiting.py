"""Waiting in tests for a condition that another process (or task) brings about: poll it, fail with its name."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_for(check: Callable[[], Awaitable[Any]], timeout_s: float = 15, what: str = "condition") -> Any:
    """The first truthy value of ``check()``, polled every 20 ms; AssertionError naming ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def wait_until(fetch: Callable[[], Any], done: Callable[[Any], Any], timeout_s: float = 15.0) -> Any:
    """``fetch()`` every 200 ms until ``done`` holds for its value or ``timeout_s`` has passed: that last value (the
    caller asserts on it, so a failure shows what was fetched). For synchronous stories (a TestClient, httpx)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fetch()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


# How late a story lets the clock end a season, or meet any deadline, after its due time (the recorded time of the
# command it sends, ``max(now, due)``, less the due time). `almanac bench clock` measured the clock's lateness at
# p50 59 ms, p99 121 ms over 5,000 deadlines on the shared 2-core machine (docs/architecture.md, "The clock"); a
# story's engine runs at the tests' nice 19 among the suite's workers, so 2 s is about 16 times that p99, and a
# clock that misses it by more is broken, not slow (its longest sleep without a deadline due is 1 s, IDLE_WAIT_S).
CLOCK_LATE_MS = 2_000
# How late a story lets a webhook arrive after the event it tells of was recorded: `almanac bench webhooks` measured
# the delivery latency at p99 202-455 ms on the same machine (docs/capacity.md), and the notifier's delivery loop
# sleeps at most 1 s when nothing wakes it; 2 s again.
DELIVERY_LATE_MS = 2_000
