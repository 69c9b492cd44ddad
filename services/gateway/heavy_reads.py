"""Heavy reads: the routes that fold or re-decide a whole room, a few at once, each off the gateway's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from contextvars import ContextVar
from typing import Any, TypeVar

from almanac.services.bootstrap import Runtime
from almanac.services.gateway.errors import ApiError, overloaded
from almanac.storage.loader import RoomLoader

T = TypeVar("T")
# Answers kept by their memo key, the oldest forgotten first: a /series of 20,000 versions is about a megabyte.
MEMO_SIZE = 16
SWITCH_INTERVAL_S = 0.001  # how long a thread may hold the GIL while another waits, once heavy reads ran here
# The ASGI ``receive`` of the HTTP request being answered, set for every request of the FastAPI stack
# (``http_app.MetricsTiming``): a heavy read listens on it for its client's ``http.disconnect``.
CLIENT_RECEIVE: ContextVar[Callable[[], Awaitable[dict]] | None] = ContextVar("heavy_read_client", default=None)


# The status of a heavy read abandoned by its client (nginx's "client closed request"): no one reads it, the
# request metrics and the access log count it apart from answers.
CLIENT_GONE = 499


async def client_gone(receive: Callable[[], Awaitable[dict]]) -> None:
    """Return once the ASGI server says the client went away (its request's body, if any, was read before); never,
    when it cannot be listened to (the read then runs to its answer, as before)."""
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - not listenable: the work is not cancelled for it
        await asyncio.Event().wait()


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
        # Every heavy read asked of this process (answered from the memo, refused, run, abandoned): /metrics counts it,
        # so that which routes read a whole room is seen from outside (tests/gateway/test_gateway_heavy_reads.py).
        self.asked = 0
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

        When the client goes away before the answer (its ``http.disconnect``, ``CLIENT_RECEIVE``) or the request
        is cancelled, the work is cancelled on the worker, and 499 ``client_gone`` (or the cancellation) is raised here:
        a client that asked and hung up kept a slot busy for the whole fold, and a few such clients kept every
        other client's heavy read refused (issue 28). The slot is still held until the work has ended there: a
        cancellation takes effect at the work's next ``await`` (a long fold awaits now and then:
        ``api_console._series``, and services.forensics' folds through its ``pauses``), so a client that asks and
        hangs up in a loop starts no unbounded work."""
        self.asked += 1
        if memo is not None and memo in self._memo:
            self._memo.move_to_end(memo)
            return self._memo[memo]
        if self.running >= self.limit:
            raise overloaded(f"{self.limit} whole-room reads at once in this process")
        here = asyncio.get_running_loop()
        self.running += 1
        abandoned = threading.Event()
        started: list[asyncio.Task] = []
        try:
            loop = self._worker_loop()

            async def on_worker() -> T:
                # Never cancelled before it starts (the future below is never cancelled), so the slot is always freed.
                try:
                    if abandoned.is_set():
                        raise asyncio.CancelledError  # its client left before its turn came
                    started.append(asyncio.current_task())  # type: ignore[arg-type]
                    return await work(self._worker_loader())
                finally:
                    self._release_on(here)

            future = asyncio.run_coroutine_threadsafe(on_worker(), loop)
        except BaseException:
            self.running -= 1
            raise

        def abandon() -> None:
            abandoned.set()
            with contextlib.suppress(RuntimeError):  # the worker's loop closed (shutdown): nothing runs there
                loop.call_soon_threadsafe(lambda: [task.cancel() for task in started])

        answered = asyncio.wrap_future(future)
        answered.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved, also if left
        receive = CLIENT_RECEIVE.get()
        gone = asyncio.ensure_future(client_gone(receive)) if receive is not None else None
        try:
            await asyncio.wait([answered] if gone is None else [answered, gone], return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            abandon()  # the request was cancelled: its work is not wanted either
            raise
        finally:
            if gone is not None:
                gone.cancel()
        if not answered.done():
            abandon()
            raise ApiError(CLIENT_GONE, "client_gone", "the client went away before the answer: its read was cancelled")
        answer = answered.result()
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
