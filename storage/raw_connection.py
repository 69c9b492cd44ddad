"""One Redis connection written and read raw (hiredis): the engine's batch connection, the gateway's pipelined connection.

The engine's batch connection: at a few commands per batch the engine's largest cost was the socket writes
themselves (about 30% of its CPU at 500 commands/s: every batch sent a read, then a write). Here a batch's
last write and the next XREADGROUP go out together; the write's reply is read at once (its outcomes were
published by the script), the read's reply when the next batch is wanted. Any error leaves the
connection's state unknown (a reply may be unread), so ``reset`` drops it; what the read delivered stays
pending and is taken over.

Only redis-py's public interface: each line's connections come from a pool of its own (``raw_pool``, the client's
options without a socket timeout), written with ``send_packed_command`` and read with ``read_response``. Reading the
connection's stream directly, as the first version did, saved about 2 µs a round trip (docs/capacity.md, stop 44).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis import exceptions
from redis.asyncio.connection import Connection, ConnectionPool


def raw_pool(client: aioredis.Redis) -> ConnectionPool:
    """A pool for a raw line's connections: the client's connection class and options (host or socket path, TLS,
    credentials, database), with no socket timeout. A raw line's caller bounds its own waits (the gateway's line
    its watchdog, the engine its batches), and a read with a timeout would give up on a line that is merely quiet."""
    pool = client.connection_pool
    return ConnectionPool(connection_class=pool.connection_class, **{**pool.connection_kwargs, "socket_timeout": None})


class RawReplies:
    """Replies read off one connection taken from a ``raw_pool`` for good (the engine's batch connection, the gateway's
    pipelined connection), through redis-py's public ``read_response``: hiredis parses them, undecoded.

    An error reply is returned, not raised: the exception redis-py raises for it (``NoScriptError``,
    ``ReadOnlyError``, ...); a closed or failed socket raises ``redis.exceptions.ConnectionError``. No timeout (the
    pool's connections have none): the caller bounds its wait where it needs one.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def next(self) -> Any:
        try:
            return await self._connection.read_response(disable_decoding=True)
        except exceptions.ResponseError as error:
            return error


async def write_packed(connection: Connection, packed: Sequence[bytes]) -> None:
    """Write commands packed with ``hiredis.pack_command`` on the connection in one write (redis-py's public
    ``send_packed_command``: a writelines, and a drain that returns at once unless the socket's buffer is full).
    Never reconnects: a line whose connection closed fails, and its caller takes a fresh one (a reconnect here would
    leave the replies of what was sent before unread). What a caller may have unanswered is bounded elsewhere (the
    engine reads each batch's replies before its next send; the gateway's submits by its in-flight limit and the
    line's timeout)."""
    if not connection.is_connected:
        raise exceptions.ConnectionError("the connection to Redis is closed")
    await connection.send_packed_command(list(packed), check_health=False)


async def send_raw(connection: Connection, commands: Iterable[tuple]) -> None:
    """Write ``commands`` on the connection in one write (``write_packed``)."""
    await write_packed(connection, [hiredis.pack_command(command) for command in commands])


class BatchConnection:
    def __init__(self, client: aioredis.Redis) -> None:
        self._pool = raw_pool(client)
        self._connection: Connection | None = None
        self._replies: RawReplies | None = None
        # The shards of the read in flight (its reply not yet read), or None.
        self.reading: tuple[int, ...] | None = None

    async def send(self, *commands: tuple) -> None:
        if self._connection is None:
            self._connection = await self._pool.get_connection()
            self._replies = RawReplies(self._connection)
        await send_raw(self._connection, commands)

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
                await self._pool.release(connection)


def stream_reply(raw: list | None) -> list:
    """An XREADGROUP reply as redis-py parses it: [(stream, [(entry id, {field: value}), ...]), ...]."""
    if not raw:
        return []
    return [(stream, [(entry_id, dict(zip(fields[::2], fields[1::2], strict=True)) if fields else {})
                      for entry_id, fields in entries])
            for stream, entries in raw]
