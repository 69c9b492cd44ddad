"""The engine's standing reads on a real Redis Cluster: an entry delivered while its shard's lease was not
safely held is decided once the lease is (the shard is taken over, which replays its pending entries).

In the failover test (tests/cluster/test_cluster_failover.py) a promotion left the engine's lease unrenewed
for a moment right after it had taken its shards over: reads then in flight delivered commands the engine did
not process, a ``>`` read never delivers them again, and the lease was renewed, not lost, so nothing claimed
them: they sat pending until their clients resent them after the outcome wait. Here the lease's margin is
made to run out by hand (the engine's own bookkeeping, as a late renewal leaves it), on real Redis.
"""

from __future__ import annotations

import time

from cluster_support import at_once, lease_margin, ready_engine
from shard_rooms import room_on
from waiting import wait_for

from almanac.services import bus
from almanac.services.engine.shard_engine import GROUP, Engine, EngineConfig
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16
KEYS = Keys(SHARDS)


async def test_a_command_read_while_its_lease_was_not_safely_held_is_decided_once_it_is(cluster) -> None:
    watched, other = 3, 9
    room, wake = room_on(KEYS, watched, "orphan"), room_on(KEYS, other, "wake")
    # Reads that block for seconds, so the watched shard's read is in flight when its lease margin runs out; a
    # long lease, so no renewal restores the margin before the test does.
    engine = Engine(cluster, EngineConfig(name="orphan-test", shards=[watched, other], shard_count=SHARDS,
                                          lease_ms=60_000, block_ms=2_000))
    # (holding and having taken over both shards, its readiness beat published: the beat's renewal must come
    # before the test ages the lease below, not after it)
    async with ready_engine(engine):
        reads = engine.streams._reads  # the ClusterStreams' standing reads
        # A read of the watched shard just sent: it blocks for seconds more, time enough for the steps below.
        await wait_for(lambda: at_once(watched in reads._reads and time.monotonic() - reads._started[watched] < 0.3),
                       what="a fresh read of the watched shard")

        lease_margin(engine, watched, 0)  # as a renewal late in a failover leaves it
        store = RedisEventStore(cluster, SHARDS)
        # A command on the other shard ends the engine's round in hand: its next rounds leave the watched
        # shard out (not safely held), while that shard's read stays in flight.
        woken = CommandRecord(command_id=f"{wake}:p:w1", room=wake, player="p",
                              server_time_ms=int(time.time() * 1000), body={"kind": "join_room"})
        await bus.submit(cluster, KEYS, woken)
        await wait_for(lambda: store.outcome(wake, woken.command_id), what="the other shard's command decided")

        record = CommandRecord(command_id=f"{room}:p:c1", room=room, player="p",
                               server_time_ms=int(time.time() * 1000), body={"kind": "join_room"})
        await bus.submit(cluster, KEYS, record)
        stream = KEYS.command_stream(watched)
        await wait_for(lambda: _pending(cluster, stream), what="the command delivered to the read in flight")
        await wait_for(lambda: at_once(watched not in reads._reads),
                       what="a round of the engine past the watched shard's answered read")

        lease_margin(engine, watched, 60)  # the lease renewed: safely held again
        stored = await wait_for(lambda: store.outcome(room, record.command_id), what="the command's outcome")
        assert not stored.accepted  # refused (no such room): decided all the same
        # The outcome is written before the entry is acknowledged: the acknowledgement follows within the round.
        await wait_for(lambda: _none_pending(cluster, stream), what="the delivered command acknowledged")


async def _pending(client, stream: str) -> int:  # noqa: ANN001 - the cluster client
    return (await client.xpending(stream, GROUP))["pending"]


async def _none_pending(client, stream: str) -> bool:  # noqa: ANN001 - the cluster client
    return await _pending(client, stream) == 0



