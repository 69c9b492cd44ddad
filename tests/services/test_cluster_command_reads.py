"""StandingReads (the engine's per-shard reads on a Cluster), on a real Redis: a read that answers while its
shard is not asked for is reported ``orphaned``, so the engine takes the shard over before reading it again.

A ``>`` read never delivers an entry twice: an entry delivered to a read whose answer was not processed (its
shard's lease was not safely held at that moment, e.g. renewed late during a failover) stays pending under
the engine's consumer. Seen in the Cluster failover test: such commands sat unanswered until their client
resent them, about one outcome wait (5 s) after the promotion.
"""

from __future__ import annotations

import asyncio

from almanac.storage.cluster_command_reads import StandingReads

GROUP = "engine"
CONSUMER = "c1"


def stream_of(shard: int) -> str:
    return f"test:{{s{shard:02d}}}:commands"


async def _groups(client, shards: list[int]) -> None:  # noqa: ANN001 - a redis client
    for shard in shards:
        await client.xgroup_create(stream_of(shard), GROUP, id="0", mkstream=True)


async def test_a_read_that_delivers_while_its_shard_is_not_asked_for_is_reported_orphaned(redis_client) -> None:
    await _groups(redis_client, [0, 1])
    # A long BLOCK: shard 0's read stays in flight until an entry arrives (nothing here waits it out).
    reads = StandingReads(redis_client, GROUP, CONSUMER, stream_of, count=10, block_ms=30_000)
    try:
        await redis_client.xadd(stream_of(1), {"n": "1"})
        first = await reads.read([0, 1])  # shard 1 answers; shard 0's read stays in flight
        assert [stream for stream, _ in first] == [stream_of(1).encode()]
        assert reads.orphaned == set()

        entry = await redis_client.xadd(stream_of(0), {"n": "0"})
        await asyncio.wait({reads._reads[0]})  # shard 0's read has delivered the entry
        # Shard 0 is not asked for now (its lease not safely held): the entry is not returned...
        assert await reads.read([]) == []
        # ...but it was delivered, it is pending under this consumer, and no ">" read hands it out again.
        assert reads.orphaned == {0}
        pending = await redis_client.xpending_range(stream_of(0), GROUP, "-", "+", 10)
        assert [item["message_id"] for item in pending] == [entry]
        assert reads.failed == {}
    finally:
        await reads.close()

