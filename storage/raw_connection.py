"""One Redis connection written and read raw (hiredis): the engine's batch connection, the gateway's pipelined connection.

The engine's batch connection: at a few commands per batch the engine's largest cost was the socket writes
themselves (about 30% of its CPU at 500 commands/s: every batch sent a read, then a write). Here a batch's
last write and the next XREADGROUP go out together; the write's reply is read at once (its outcomes were
published by the script), the read's reply when the next batch is wanted. Any error leaves the
connection's state unknown (a reply may be unread), so ``reset`` drops it; what the read delivered stays
pending and is taken over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis import exceptions
from redis._parsers.base import BaseParser
from redis.asyncio.connection import Connection

RAW_READ_SIZE = 65_536
_INCOMPLETE = object()


class RawReplies:
    """Replies read straight off one pooled connection's socket with hiredis, for a connection taken out of
    its pool for good (the engine's batch connection, the gateway's pipelined connection): redis-py never reads it again.

    redis-py's own read (timeout context, parser layers, one coroutine per level) cost about as much as the
    socket read itself at one command a batch. An error reply is returned, not raised: the exception
    redis-py raises for it (``NoScriptError``, ``ReadOnlyError``, ...); a closed or failed socket raises
    ``redis.exceptions.ConnectionError``. No timeout: the caller bounds its wait where it needs one.
    """

    def __init__(self, connection: Connection) -> None:
        self._stream = connection._reader  # noqa: SLF001 - the connection's own stream, read by nobody else
        # Its own "more data needed" marker (hiredis's default, False, is also a RESP3 reply); error replies,
        # nested ones too, built as redis-py builds them.
        self._parser = hiredis.Reader(notEnoughData=_INCOMPLETE, replyError=BaseParser.parse_error)

    async def next(self) -> Any:
        reply = self._parser.gets()
        while reply is _INCOMPLETE:
            try:
                data = await self._stream.read(RAW_READ_SIZE)
            except OSError as error:
                raise exceptions.ConnectionError(f"the connection to Redis failed: {error}") from error
            if not data:
                raise exceptions.ConnectionError("Redis closed the connection")
            self._parser.feed(data)
            reply = self._parser.gets()
        return reply


def send_raw(connection: Connection, commands: Iterable[tuple]) -> None:
    """Write ``commands`` on the connection's socket in one write. No drain: what a caller may have unanswered
    is bounded elsewhere (the engine reads each batch's replies before its next send; the gateway's
    submits by its in-flight limit and the line's timeout)."""
    write_raw(connection, b"".join([hiredis.pack_command(command) for command in commands]))


def write_raw(connection: Connection, data: bytes) -> None:
    """Write ``data`` (commands packed with ``hiredis.pack_command``) on the connection's socket in one write."""
    writer = connection._writer  # noqa: SLF001
    if writer is None or writer.transport.is_closing():
        raise exceptions.ConnectionError("the connection to Redis is closed")
    writer.write(data)


class BatchConnection:
    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._connection = None
        self._replies: RawReplies | None = None
        # The shards of the read in flight (its reply not yet read), or None.
        self.reading: tuple[int, ...] | None = None

    async def send(self, *commands: tuple) -> None:
        if self._connection is None:
            self._connection = await self._client.connection_pool.get_connection()
            self._replies = RawReplies(self._connection)
        send_raw(self._connection, commands)

    async def reply(self):  # noqa: ANN201 - whatever Redis answered (raises its error reply)
        if self._replies is None:
            raise ConnectionError("the engine's batch connection was reset before its reply")
        reply = await self._replies.next()
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def reset(self) -> None:
        self.reading = None
        connection, self._connection, self._replies = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.disconnect()
            with contextlib.suppress(Exception):
                await self._client.connection_pool.release(connection)


def stream_reply(raw: list | None) -> list:
    """An XREADGROUP reply as redis-py parses it: [(stream, [(entry id, {field: value}), ...]), ...]."""
    if not raw:
        return []
    return [(stream, [(entry_id, dict(zip(fields[::2], fields[1::2], strict=True)) if fields else {})
                      for entry_id, fields in entries])
            for stream, entries in raw]
