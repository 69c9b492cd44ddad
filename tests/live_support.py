"""The live feeds' shared read (services/gateway/live_hub.py) driven on a real Redis or Redis Cluster."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from store.test_store_contract import make_envelopes

from almanac.events.envelope import GENESIS_HASH
from almanac.services.gateway.auth import Claims
from almanac.services.gateway.live_hub import BLOCK_MS, PENDING, Follower, LiveHub
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16
WAIT_S = 10.0


def hub_on(client: Any) -> tuple[LiveHub, RedisEventStore]:
    store = RedisEventStore(client, SHARDS)
    return LiveHub(client, store, Keys(SHARDS), max_feeds=100, max_per_seat=2, max_per_address=100), store


async def caught_up_follower(hub: LiveHub, room: str, player: str) -> Follower:
    """A follower of ``room`` whose catch-up from the store is done (what the feed does first): handed what comes."""
    follower = hub.open(room, Claims(room=room, player=player, exp=int(time.time()) + 3600), "127.0.0.1")
    await follower.started()
    follower.behind = False
    return follower


async def handed(follower: Follower, count: int) -> list[int]:
    """The versions handed to ``follower`` once it has ``count`` waiting (or WAIT_S passed)."""
    deadline = time.monotonic() + WAIT_S
    while len(follower.pending) < count and not follower.behind and time.monotonic() < deadline:
        follower.wake.clear()
        try:
            await asyncio.wait_for(follower.wake.wait(), max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            break
    return [envelope.version for envelope in follower.pending]


async def appends_reach_each_follower_of_their_room_once(client: Any, rooms: list[str]) -> None:
    """Rooms (on different shards) each followed twice: every append reaches both followers of its room, in order,
    once, and no other room's follower; the shared read stops once nobody follows."""
    hub, store = hub_on(client)
    followers = {room: [await caught_up_follower(hub, room, player) for player in ("alice", "bob")] for room in rooms}
    for room in rooms:
        await store.append(room, 0, f"first-{room}", make_envelopes(room, 1, 2, GENESIS_HASH))
    for room in rooms:
        for follower in followers[room]:
            assert await handed(follower, 2) == [1, 2]
            assert all(envelope.room == room for envelope in follower.pending)
    assert hub.open_feeds == 2 * len(rooms)
    for each in followers.values():
        for follower in each:
            hub.close(follower)
    assert hub.open_feeds == 0
    # Within a block and half a second of the last close (the bound this story always gave), no read stands:
    # polled for, not slept out (the bound is the same; a hub that keeps a read fails here as before)
    deadline = time.monotonic() + BLOCK_MS / 1000 + 0.5
    while any(group.task is not None for group in hub._groups) and time.monotonic() < deadline:  # noqa: SLF001
        await asyncio.sleep(0.02)
    assert all(group.task is None for group in hub._groups)  # noqa: SLF001 - nobody follows: no read stands
    await hub.stop()


async def a_follower_that_falls_behind_holds_nothing_and_reads_the_store(client: Any) -> None:
    """More appends than PENDING while a follower sends nothing: it holds none of them, only the mark to read the
    store (the log is the buffer), and the store has every version for it."""
    hub, store = hub_on(client)
    follower = await caught_up_follower(hub, "slow-room", "alice")
    previous, version = GENESIS_HASH, 0
    while version <= PENDING:
        envelopes = make_envelopes("slow-room", version + 1, 50, previous)
        await store.append("slow-room", version, f"c{version}", envelopes)
        previous, version = envelopes[-1].hash, envelopes[-1].version
    await handed(follower, PENDING + 1)
    assert follower.behind and follower.pending == []
    assert [envelope.version for envelope in await store.page("slow-room", 1, version)] == list(range(1, version + 1))
    hub.close(follower)
    await hub.stop()


async def a_damaged_room_leaves_the_other_rooms_followed(client: Any) -> None:
    """A feed entry naming versions its room's stream lacks (a damaged log): that room's follower is sent to the
    store (where its feed fails alone), and the shared read goes on for every other room."""
    hub, store = hub_on(client)
    damaged, healthy = await caught_up_follower(hub, "damaged", "alice"), await caught_up_follower(hub, "healthy", "bob")
    await client.xadd(hub.keys.feed(hub.keys.shard("damaged")), {"r": "damaged", "v": 1, "l": 1})
    await handed(damaged, 1)
    assert damaged.behind and damaged.failed is None
    await store.append("healthy", 0, "first", make_envelopes("healthy", 1, 2, GENESIS_HASH))
    assert await handed(healthy, 2) == [1, 2] and healthy.failed is None
    for follower in (damaged, healthy):
        hub.close(follower)
    await hub.stop()
