"""Heavy reads: the routes that fold or re-decide a whole room, a few at once, each off the gateway's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from almanac.services.bootstrap import Runtime
from almanac.services.gateway.errors import overloaded
from almanac.storage.loader import RoomLoader

T = TypeVar("T")
# Answers kept by their memo key, the oldest forgotten first: a /series of 20,000 versions is about a megabyte.
MEMO_SIZE = 16
SWITCH_INTERVAL_S = 0.001  # how long a thread may hold the GIL while another waits, once heavy reads ran here


class HeavyReads:
    """At most ``limit`` heavy reads at once in this process; past it 503 ``overloaded`` with Retry-After at once
    (never queued). Each runs on one worker thread's own event loop with its own Redis client, store and room
    loader (one: ``work`` is handed it, and reads the log through ``loader.store``).

    A heavy read (``/series``, ``/verification``, explain, bisect, audit views, dispute bundles, bundle checks)
    costs CPU in proportion to the room's length: ~0.8 s for 3,000 versions, and a room may hold 20,000. On the
    gateway's loop one such call held every other client for as long (issue 28: a public ``/series`` put
    ``/health`` past 5 s). On the worker's loop the fold takes turns with the gateway's loop at each GIL switch
    (``SWITCH_INTERVAL_S``), so the gateway keeps answering; the limit bounds the CPU and memory those reads can take.
    The worker loop needs its own client (``open_runtime``, opened there): a redis-py asyncio connection belongs
    to the loop that opened it.
    """

    def __init__(self, limit: int, open_runtime: Callable[[], Runtime]) -> None:
        self.limit = limit
        self.running = 0
        self._open_runtime = open_runtime
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runtime: Runtime | None = None
        self._loader: RoomLoader | None = None
        self._memo: OrderedDict[Hashable, Any] = OrderedDict()

    def _worker_loader(self) -> RoomLoader:
        """The worker loop's one room loader, on its runtime opened there on first use. It caches nothing: heavy
        reads load exact versions, and each folds a room once."""
        if self._loader is None:
            self._runtime = self._open_runtime()
            self._loader = self._runtime.loader(0)
        return self._loader

    def _worker_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            # The fold holds the GIL for a whole switch interval each time the gateway's loop gives it up (at
            # every socket call): at Python's default 5 ms, /health under 16 heavy reads answered in p50 417 ms,
            # max 735 ms; at 1 ms, p50 73 ms, max 208 ms, with as many heavy reads served (issue 28).
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="gateway-heavy-reads", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    async def run(self, work: Callable[[RoomLoader], Awaitable[T]], memo: Hashable | None = None) -> T:
        """``work(loader)`` on the worker loop, its answer (or its exception) here; 503 at once past the limit.
        ``memo``: a key that names the answer exactly (e.g. room, version and who reads): the answer is kept
        (the last ``MEMO_SIZE``) and given again without a slot; its caller must not change it.

        The slot is held until the work has ended there, also when the request is cancelled (its client went
        away): a fold does not stop at a cancellation, so a client that asked and hung up in a loop would
        otherwise start unbounded work on the worker."""
        if memo is not None and memo in self._memo:
            self._memo.move_to_end(memo)
            return self._memo[memo]
        if self.running >= self.limit:
            raise overloaded(f"{self.limit} whole-room reads at once in this process")
        here = asyncio.get_running_loop()
        self.running += 1
        try:
            loop = self._worker_loop()

            async def on_worker() -> T:
                return await work(self._worker_loader())

            future = asyncio.run_coroutine_threadsafe(on_worker(), loop)
        except BaseException:
            self.running -= 1
            raise
        future.add_done_callback(lambda _: self._release_on(here))
        answer = await asyncio.shield(asyncio.wrap_future(future))
        if memo is not None:
            self._memo[memo] = answer
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return answer

    def _release_on(self, here: asyncio.AbstractEventLoop) -> None:
        """Free the slot on the gateway's loop (called on the worker's thread); nothing once that loop is closed."""
        with contextlib.suppress(RuntimeError):
            here.call_soon_threadsafe(self._release)

    def _release(self) -> None:
        self.running -= 1

    async def close(self) -> None:
        """Close the worker's client and stop its loop (the gateway's shutdown)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._runtime is not None:
            runtime = self._runtime
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(runtime.aclose(), loop))
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)
        if not loop.is_running():
            loop.close()
