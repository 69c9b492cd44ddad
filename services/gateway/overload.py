"""How late this gateway's event loop runs: the wait a new request sees before its handler can start."""

from __future__ import annotations

import asyncio
import contextlib

INTERVAL_S = 0.005


class LoopLag:
    """A timer that measures its own lateness every few ms; ``lag_ms`` is the latest, decaying slowly.

    The in-flight limit counts the commands a gateway has started; past capacity the requests it has not
    yet looked at queue in the event loop instead, where no counter sees them. The timer's lateness is that
    queue's wait, measured for a few microseconds of CPU per tick.
    """

    def __init__(self) -> None:
        self.lag_ms = 0.0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="gateway-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + INTERVAL_S
            await asyncio.sleep(INTERVAL_S)
            late_ms = (loop.time() - due) * 1000
            # A spike counts at once; calm returns over a few ticks (one quick tick is no proof of calm).
            self.lag_ms = max(late_ms, self.lag_ms * 0.7)
