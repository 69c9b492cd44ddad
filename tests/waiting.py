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
