"""Connecting to Redis: a single server, or a Redis Cluster (every key of a room shares one slot).

Commands are packed by hiredis (C) instead of redis-py's Python packer: packing arguments was the
largest single cost of a pipelined command on these machines (about 40 us of 60 us), and
hiredis.pack_command produces the same bytes about five times faster.
"""

from __future__ import annotations

import hiredis
import redis.asyncio as aioredis
from redis import exceptions
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff


class HiredisPackConnection(Connection):
    def pack_command(self, *args):  # noqa: ANN002, ANN201 - same signature as redis-py's
        # redis-py accepts a first argument like "CLIENT SETNAME" and splits it; keep that behaviour.
        if args and isinstance(args[0], str) and " " in args[0]:
            args = (*args[0].split(), *args[1:])
        return [hiredis.pack_command(args)]


def reconnecting(retries: int = 4, base_s: float = 0.05, cap_s: float = 1.0) -> dict[str, object]:
    """Options for ``connect``: a command whose connection failed reconnects and is sent again, up to
    ``retries`` times with exponential backoff (redis-py's Retry), before the error reaches the caller.

    Only for callers whose commands are safe to send twice: reads, and writes guarded by an id or a
    compare-and-set (the projector's commit script). Not for the engine: a lost XREADGROUP answer must
    reach it, so it takes its shards over again and re-reads what was delivered but not seen.
    """
    # OSError too: a refused connect surfaces as the socket's own error, and redis-py 5 takes a pooled
    # connection (and reconnects it) before its command retry starts; the connect has its own retry.
    return {"retry": Retry(ExponentialBackoff(cap=cap_s, base=base_s), retries),
            "retry_on_error": [exceptions.ConnectionError, exceptions.TimeoutError, OSError]}


def connect(url: str, cluster: bool = False, **options: object) -> aioredis.Redis:
    """An asyncio client for ``url``; ``cluster`` uses the Cluster client, which routes by hash tag.

    ``options`` go to the client as they are (e.g. socket_timeout, socket_connect_timeout, or
    ``**reconnecting()``).
    """
    if cluster:
        return RedisCluster.from_url(url, **options)  # type: ignore[return-value]
    if url.startswith("redis://"):
        return aioredis.Redis.from_url(url, connection_class=HiredisPackConnection, **options)
    return aioredis.Redis.from_url(url, **options)
