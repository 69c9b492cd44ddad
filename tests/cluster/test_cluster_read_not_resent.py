"""An engine's read of new commands on a Redis Cluster is sent once: an answer that comes too late is the read's
failure (its shard is taken over), never a second read that hides what the first one delivered.

XREADGROUP with ``>`` marks what it delivers pending under the engine's consumer the moment Redis runs it, and
never delivers it again. redis-py's Cluster client sends a command again after a ConnectionError or a
TimeoutError (``cluster_error_retry_attempts``): a read whose answer timed out (the gateway's engine has the
gateway's 5 s socket timeout, ``bootstrap.Role.GATEWAY_ENGINE``; a starved host's event loop can read a ready
answer late) was sent again, the second answer was returned as the read's, and the commands the first one
delivered stayed pending for good: no failure was reported, so nothing took the shard over to replay them. The
engine's contract (storage/cluster_command_reads.py): what a read delivers is returned, or the read fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import redis

from almanac.services.redis_client import connect
from almanac.storage.cluster_command_reads import StandingReads

GROUP = "engine"
CONSUMER = "c1"
SOCKET_TIMEOUT_S = 2.0  # the gateway's engine has 5 s; shorter, so the story is quick
BLOCK_MS = 1000  # shorter than the socket timeout, as the engine's 100 ms is
SHARD = 3


def stream_of(shard: int) -> str:
    return f"story:{{s{shard:02d}}}:commands"


async def test_a_read_answered_after_its_socket_timeout_fails_instead_of_being_sent_again(cluster,
                                                                                         cluster_url: str) -> None:
    stream = stream_of(SHARD)
    await cluster.xgroup_create(stream, GROUP, id="0", mkstream=True)
    engine_client = connect(cluster_url, cluster=True, socket_timeout=SOCKET_TIMEOUT_S)
    node = cluster.get_node_from_key(stream)
    direct = redis.Redis(host=node.host, port=node.port)  # synchronous: its calls do not run the event loop
    reads = StandingReads(engine_client, GROUP, CONSUMER, stream_of, count=10, block_ms=BLOCK_MS)
    try:
        await engine_client.ping()
        # The shard's read, standing: blocked in Redis, while the engine is busy elsewhere (not awaiting it).
        first = asyncio.ensure_future(reads.read([SHARD]))
        deadline = time.monotonic() + 5
        while not _blocked_reads(direct) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        read = reads._reads[SHARD]
        assert not read.done(), "the read was not blocked in Redis in time"
        # A command arrives and is delivered to the read; its answer waits in the socket while the event loop is
        # held (a starved host) past the socket timeout.
        direct.xadd(stream, {"n": "1"})
        deadline = time.monotonic() + 2
        while direct.xpending(stream, GROUP)["pending"] != 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert direct.xpending(stream, GROUP)["pending"] == 1, "the command was not delivered to the read"
        time.sleep(SOCKET_TIMEOUT_S + 0.5)  # the event loop held: nothing reads the answer
        await asyncio.wait({read}, timeout=5)

        entries = await reads.read([SHARD])
        delivered = [entry_id for _, batch in entries for entry_id, _ in batch]
        # Delivered and pending: the read returns it, or fails (the engine then takes the shard over and replays
        # its pending entries). Before: redis-py sent the read again, whose answer was empty, and no failure.
        assert delivered or SHARD in reads.failed, (delivered, reads.failed, direct.xpending(stream, GROUP))
    finally:
        await reads.close()
        direct.close()
        await engine_client.aclose()


def _blocked_reads(direct: redis.Redis) -> int:
    """How many clients of the node wait in a blocking XREADGROUP."""
    clients = direct.client_list()
    return sum(1 for client in clients if client.get("cmd") == "xreadgroup" and "b" in client.get("flags", ""))
