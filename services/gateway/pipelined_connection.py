"""One Redis connection carrying every command a gateway process submits: sent at once, answered in order.

Through redis-py each submit took a pooled connection (checking it for stale data first), a retry wrapper,
a timeout context and the reply callbacks: about a third of the gateway's Python time per command at
500/s (cProfile). Here a submit is one socket write; one reader task parses the replies (hiredis) and
hands each to the oldest waiting call, as Redis answers a connection's commands in the order they came.
Submits in flight together share the socket's writes and reads (pipelining without a pipeline object).

Failures end every call in flight, never silently: a lost or closed connection raises
``redis.exceptions.ConnectionError``, a Redis silent for ``timeout_s`` while calls wait raises
``redis.exceptions.TimeoutError`` (the connection is dropped: a late reply must not answer the wrong
call), an error reply raises the exception redis-py raises for it (``NoScriptError``, ``ReadOnlyError``,
...). A call whose reply was lost may have taken effect; submits are idempotent by command id. The next
call connects again. Replies are RESP2 as hiredis gives them (bytes, whatever the client's
``decode_responses``). Single Redis only: a Cluster routes each command by its keys (the gateway keeps
redis-py's client there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

from almanac.storage.raw_connection import RawReplies, send_raw


class PipelinedConnection:
    def __init__(self, client: aioredis.Redis, timeout_s: float) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self._connection: Any = None  # a redis-py Connection, taken from the client's pool (handshake, auth, db)
        self._reader_task: asyncio.Task | None = None
        self._connecting = asyncio.Lock()
        # (future, monotonic send time) of every call sent and not yet answered, oldest first.
        self._waiting: deque[tuple[asyncio.Future, float]] = deque()
        self._watchdog: asyncio.TimerHandle | None = None
        self._closed = False
        self._releasing: set[asyncio.Task] = set()

    async def call(self, *args: Any) -> Any:
        """Send one command; its reply (or the exception for its error reply or a failed connection)."""
        connection = self._connection
        if connection is None or self._closed:
            connection = await self._connect()
        try:
            send_raw(connection, (args,))
        except RedisConnectionError as error:
            self._drop(connection, error)
            raise
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append((future, loop.time()))
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._timeout_s, self._check_silence)
        return await future

    async def close(self) -> None:
        """Fail the calls in flight, refuse new ones, and give the connection back before the client closes."""
        self._closed = True
        reader = self._reader_task
        if self._connection is not None:
            self._drop(self._connection, RedisConnectionError("the gateway is stopping"))
        await asyncio.gather(*self._releasing, *([reader] if reader is not None else []), return_exceptions=True)

    async def _connect(self) -> Any:
        async with self._connecting:
            if self._closed:
                raise RedisConnectionError("the gateway is stopping")
            if self._connection is None:
                connection = await self._client.connection_pool.get_connection()
                if self._closed:  # closed while connecting: the connection goes back, unused
                    await self._release(connection)
                    raise RedisConnectionError("the gateway is stopping")
                self._connection = connection
                self._reader_task = asyncio.create_task(self._read(connection, self._waiting),
                                                        name="pipelined-connection-reader")
            return self._connection

    async def _read(self, connection: Any, waiting: deque[tuple[asyncio.Future, float]]) -> None:
        replies = RawReplies(connection)
        try:
            while True:
                reply = await replies.next()
                if not waiting:
                    raise RedisConnectionError("Redis answered a command that was not sent")
                future, _ = waiting.popleft()
                if not future.done():  # a caller that left (its request cancelled) still had its turn
                    if isinstance(reply, Exception):
                        future.set_exception(reply)
                    else:
                        future.set_result(reply)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - every failure ends the calls in flight, then the connection
            self._drop(connection, error if isinstance(error, RedisConnectionError)
                       else RedisConnectionError(f"the submit connection failed: {type(error).__name__}: {error}"))

    def _check_silence(self) -> None:
        """Drop the connection if the oldest call has waited ``timeout_s``; else look again when it will have."""
        self._watchdog = None
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        waited = loop.time() - self._waiting[0][1]
        if waited >= self._timeout_s:
            if self._connection is not None:
                self._drop(self._connection, RedisTimeoutError(f"Redis answered no submit for {waited:.1f} s"))
            return
        self._watchdog = loop.call_later(self._timeout_s - waited, self._check_silence)

    def _drop(self, connection: Any, error: Exception) -> None:
        """End every call in flight with ``error`` and let the next call connect again."""
        if self._connection is not connection:
            return  # already dropped
        self._connection = None
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        waiting, self._waiting = self._waiting, deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(_copy(error))  # each its own: one object would gather every caller's frames
                future.exception()  # retrieved: a caller that left need not read it
        release = asyncio.get_running_loop().create_task(self._release(connection))
        self._releasing.add(release)
        release.add_done_callback(self._releasing.discard)

    async def _release(self, connection: Any) -> None:
        with contextlib.suppress(Exception):
            await connection.disconnect()
        with contextlib.suppress(Exception):
            await self._client.connection_pool.release(connection)


def _copy(error: Exception) -> Exception:
    """A fresh exception like ``error`` (caused by it), for one waiting call."""
    try:
        copy = type(error)(*error.args)
    except Exception:  # noqa: BLE001 - an exception that cannot be rebuilt from its args: a plain one
        copy = RedisConnectionError(str(error))
    copy.__cause__ = error
    return copy
