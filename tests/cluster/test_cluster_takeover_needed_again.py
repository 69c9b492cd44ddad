"""A shard that needs a takeover again while its takeover runs is taken over again, on a Cluster and on one Redis."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from cluster_support import at_once
from shard_rooms import room_on
from waiting import wait_for

from almanac.services import bus
from almanac.services.engine.shard_engine import GROUP, Engine, EngineConfig
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys, lease_key
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16
KEYS = Keys(SHARDS)
SHARD = 3
# Long enough that no renewal fails by itself on a loaded host (a lease lost and taken back unasked would take the
# shard over again and hide the bug); its lease loop ticks every 2 s, and 0.2 s after a loss.
LEASE_MS = 6_000
OTHER = "other-engine"


@pytest.fixture(params=["redis_client", "cluster"])
def client(request: pytest.FixtureRequest) -> Any:
    """An empty one Redis (takeovers in the consume loop) or Cluster (each a task of its own: ``_take_over_apart``)."""
    return request.getfixturevalue(request.param)


async def test_a_lease_lost_and_taken_back_during_a_takeover_has_the_shard_taken_over_again(client: Any) -> None:
    """Given an engine whose takeover of a shard has claimed the shard's pending entries and not yet ended, when
    its lease goes to another engine, which reads a command of the shard and dies, and the engine takes the lease
    back, then once the first takeover ends the shard is taken over again: the other engine's command is claimed,
    decided and answered, once.

    A takeover claims the shard's pending entries, replays them, then clears the shard's need; the shard is read with
    ``>`` from then on. The engine's takeover cleared the need whatever had happened while it ran: a lease lost and
    taken back meanwhile (another engine holding it between, reading commands with ``>`` under its own name, then
    dying) recorded the need again, and the old takeover's end wiped it. Those commands stayed pending under the dead
    engine's name, unanswered until their clients sent them again. Here the first takeover is held after its claim
    (a hook on the engine's claim; Redis is real) while the lease goes to another engine and comes back."""
    engine = Engine(client, EngineConfig(name="retaking", shards=[SHARD], shard_count=SHARDS, lease_ms=LEASE_MS,
                                         block_ms=100))
    claimed, release = asyncio.Event(), asyncio.Event()
    claim = engine.streams.claim_pending

    async def claim_then_hold(shard: int) -> int:
        count = await claim(shard)
        if not claimed.is_set():  # the first takeover only: held after its claim until the story releases it
            claimed.set()
            await release.wait()
        return count

    engine.streams.claim_pending = claim_then_hold  # type: ignore[method-assign]
    store = RedisEventStore(client, SHARDS)
    room, stream = room_on(KEYS, SHARD, "retaken"), KEYS.command_stream(SHARD)
    await engine.start()
    try:
        await wait_for(lambda: at_once(claimed.is_set()), what="the first takeover's claim")

        await client.set(lease_key(SHARD), f"{OTHER}|1|x", px=60_000)  # the lease goes to another engine
        await wait_for(lambda: at_once(SHARD not in engine.leases.held), what="the engine seeing its lease lost")
        await bus.submit(client, KEYS, CommandRecord(command_id="late-1", room=room, player="p",
                                                     server_time_ms=int(time.time() * 1000),
                                                     body={"kind": "join_room"}))
        read = await client.xreadgroup(GROUP, OTHER, {stream: ">"}, count=10)  # the other engine reads it...
        assert [len(entries) for _, entries in read] == [1]
        await client.delete(lease_key(SHARD))  # ...and dies: its lease is gone
        await wait_for(lambda: at_once(SHARD in engine.leases.held), what="the engine taking its lease back")

        release.set()  # the first takeover ends (it claimed before the other engine read)
        decided = await wait_for(lambda: store.outcome(room, "late-1"), timeout_s=10,
                                 what="the other engine's command decided by a second takeover")
        assert not decided.accepted  # no such room: refused, decided all the same
        await wait_for(lambda: at_once(engine.metrics.totals["commands"] == 1), what="the command counted")
        pending = await client.xpending(stream, GROUP)
        assert pending["pending"] == 0  # answered and acknowledged: nothing left under the dead engine's name
    finally:
        release.set()
        await engine.stop()
