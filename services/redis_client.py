"""Connecting to Redis: a single server, or a Redis Cluster (every key of a room shares one slot).

Commands are packed by hiredis (C) instead of redis-py's Python packer: packing arguments was the
largest single cost of a pipelined command on these machines (about 40 us of 60 us), and
hiredis.pack_command produces the same bytes about five times faster.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import hiredis
import redis.asyncio as aioredis
from redis import exceptions
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

# The errors of a Redis Cluster that is failing over or resharding (no quorum yet, a slot with no live
# primary, a slot moving, redirections that did not settle): the store is briefly unavailable, the
# command was not run (or is safe to resend by id). redis-py raises them after its own retries.
CLUSTER_ERRORS: tuple[type[Exception], ...] = (
    exceptions.ClusterError,  # ClusterDownError, MasterDownError
    exceptions.RedisClusterException,  # SlotNotCoveredError, "no targets" while the slot map is empty
    exceptions.TryAgainError,
    exceptions.AskError,  # and MovedError: a redirection loop redis-py gave up on
)


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


def seed_urls(url: str) -> list[str]:
    """The node URLs of ``url``: one, or several separated by commas (a Cluster's seed nodes)."""
    return [part.strip() for part in url.split(",") if part.strip()]


def live_seed(url: str, timeout_s: float = 2.0) -> str:
    """The first node of ``url`` that answers PING: for callers that take one URL (FastStream's broker).

    Raises the last node's error when none answers.
    """
    import redis  # noqa: PLC0415 - the synchronous client, for this one check at start

    error: Exception | None = None
    for seed in seed_urls(url):
        client = redis.Redis.from_url(seed, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
        try:
            client.ping()
            return seed
        except redis.RedisError as failed:
            error = failed
        finally:
            client.close()
    raise error or ValueError("no Redis URL given")


def connect(url: str, cluster: bool = False, **options: object) -> aioredis.Redis:
    """An asyncio client for ``url``; ``cluster`` uses the Cluster client, which routes by hash tag.

    On a Cluster ``url`` may name several nodes separated by commas (``redis://a:7000,redis://b:7001``):
    they are the client's startup nodes, so it starts (and refreshes its slot map) while any one answers.
    Options of the first URL (scheme, password, database) apply to every node.
    ``options`` go to the client as they are (e.g. socket_timeout, socket_connect_timeout, or
    ``**reconnecting()``).
    """
    if cluster:
        seeds = seed_urls(url)
        if len(seeds) == 1:
            return RedisCluster.from_url(seeds[0], **options)  # type: ignore[return-value]
        nodes = [ClusterNode(parsed.hostname or "127.0.0.1", parsed.port or 6379)
                 for parsed in map(urlsplit, seeds)]
        return RedisCluster.from_url(seeds[0], startup_nodes=nodes, **options)  # type: ignore[return-value]
    if url.startswith("redis://"):
        return aioredis.Redis.from_url(url, connection_class=HiredisPackConnection, **options)
    return aioredis.Redis.from_url(url, **options)
