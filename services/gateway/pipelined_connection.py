"""One Redis connection carrying every command a gateway process submits: sent at once, answered in order.

Through redis-py each submit took a pooled connection (checking it for stale data first), a retry wrapper,
a timeout context and the reply callbacks: about a third of the gateway's Python time per command at
500/s (cProfile). Here a submit is one socket write; one reader task parses the replies (hiredis) and
hands each to the oldest waiting call, as Redis answers a connection's commands in the order they came.
Submits in flight together share the socket's writes and reads (pipelining without a pipeline object).

The calls made in one turn of the event loop go out in ONE write, at the end of the turn: a write is a
syscall that wakes Redis, the submit's largest cost (py-spy at 500/s: about a fifth of the gateway's time
under ``PipelinedConnection.call``, ``StreamWriter.write`` most of it), and the requests that arrive together
(one poll of their sockets) reach their submits in the same turn. Nothing is answered sooner for it: a call
still waits for its own reply, so no command is acknowledged before Redis has it.

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

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

from almanac.storage.raw_connection import RawReplies, write_raw


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
        # The commands of this loop turn not yet written (packed, in call order: their futures are the last of
        # ``_waiting``), and the end-of-turn callback that writes them.
        self._unsent: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self.writes = 0  # socket writes made (each carries every command of its loop turn)
        self._closed = False
        self._releasing: set[asyncio.Task] = set()

    async def call(self, *args: Any) -> Any:
        """Send one command; its reply (or the exception for its error reply or a failed connection)."""
        connection = self._connection
        if connection is None or self._closed:
            connection = await self._connect()
        packed = hiredis.pack_command(args)  # an argument it cannot send raises here, before anything is queued
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._unsent.append(packed)
        self._waiting.append((future, loop.time()))
        if self._flush_handle is None:
            self._flush_handle = loop.call_soon(self._flush, connection)
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._timeout_s, self._check_silence)
        return await future

    async def call_many(self, commands: list[tuple], raise_on_error: bool = True) -> list[Any]:
        """Send ``commands`` in this turn's one write; their replies in order (raw, as ``call`` gives them). With
        ``raise_on_error`` (as a redis-py pipeline's ``execute``) the first error among them is raised once every
        reply is in; without it each error (an error reply, a failed connection) stands in its command's place, as
        ``asyncio.gather(..., return_exceptions=True)`` of ``call`` gives them, without a task per command. For the
        engine's writes of a batch and the clock's look at its shards (docs/capacity.md, issue 29's seventh pass)."""
        connection = self._connection
        if connection is None or self._closed:
            connection = await self._connect()
        packed = [hiredis.pack_command(command) for command in commands]  # raises before anything is queued
        loop = asyncio.get_running_loop()
        sent = loop.time()
        futures = [loop.create_future() for _ in packed]
        self._unsent += packed
        self._waiting.extend([(future, sent) for future in futures])
        if self._flush_handle is None:
            self._flush_handle = loop.call_soon(self._flush, connection)
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._timeout_s, self._check_silence)
        replies: list[Any] = []
        try:
            for future in futures:  # replies in order: once the first is in, the rest most often are too
                try:
                    replies.append(await future)
                except Exception as error:  # noqa: BLE001 - every reply read first, so that none is left unretrieved
                    replies.append(error)
        except BaseException:  # cancelled: the replies still to come are nobody's
            for future in futures:
                future.cancel()
            raise
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    def _flush(self, connection: Any) -> None:
        """Write the turn's commands in one write (a closed socket fails every call in flight, theirs too)."""
        self._flush_handle = None
        unsent, self._unsent = self._unsent, []
        if self._connection is not connection or not unsent:
            return  # dropped meanwhile: their calls were failed with the connection
        try:
            write_raw(connection, unsent[0] if len(unsent) == 1 else b"".join(unsent))
        except RedisConnectionError as error:
            self._drop(connection, error)
            return
        self.writes += 1

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
        if self._flush_handle is not None:  # the turn's commands die with the connection, never written
            self._flush_handle.cancel()
            self._flush_handle = None
        self._unsent = []
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
