"""The single-Redis engine's own connection: a batch's last write and the next read leave in ONE send.

At a few commands per batch the engine's largest cost was the socket writes themselves (about 30% of its
CPU at 500 commands/s: every batch sent a read, then a write). Here the write and the next XREADGROUP
go out together; the write's reply is read at once (its outcomes were published by the script), the
read's reply when the next batch is wanted. Any error leaves the connection's state unknown (a reply
may be unread), so ``reset`` drops it; what the read delivered stays pending and is taken over.
"""

from __future__ import annotations

import contextlib

import redis.asyncio as aioredis

from almanac.services.redis_client import RawReplies, send_raw


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
