"""The bot-seat bound on a Redis Cluster: its one script touches one slot, and racing adds never pass it."""

from __future__ import annotations

import asyncio
from typing import Any

from almanac.services.bots import SeatRefused, add_bot, bot_seats, bound_count, remove_bot, sync_bound
from almanac.storage.keys import Keys

KEYS = Keys(16)
BOUND = 8


async def test_racing_adds_on_a_cluster_hand_exactly_the_bounds_seats(cluster: Any) -> None:
    # Given an empty Cluster deployment whose bots may hold 8 seats
    async def ask(number: int) -> bool:
        try:
            return await add_bot(cluster, KEYS, f"cluster-race-{number}", "bob", 5, max_seats=BOUND)
        except SeatRefused as refused:
            assert refused.code == "bot_seats_full"
            return False

    # When 60 adds for seats of rooms spread over every shard (so every node) race
    handed = await asyncio.gather(*(ask(n) for n in range(60)))
    # Then exactly 8 are handed, as the shards' hashes and the bound's count say
    assert sum(handed) == BOUND
    assert len(await bot_seats(cluster, KEYS, range(KEYS.shard_count))) == BOUND
    assert await bound_count(cluster, KEYS) == BOUND
    # and matching the count to the shards' seats, and removing one, work across the nodes too
    assert await sync_bound(cluster, KEYS, now_ms=10**12) == (0, 0)
    seat = (await bot_seats(cluster, KEYS, range(KEYS.shard_count)))[0]
    assert await remove_bot(cluster, KEYS, *seat)
    assert await bound_count(cluster, KEYS) == BOUND - 1
    # and the removed seat, asked for again, is handed (its removal's mark, in the bound's slot, cleared as it is
    # taken), and a sync round keeps it
    assert await add_bot(cluster, KEYS, *seat, 6, max_seats=BOUND)
    assert await sync_bound(cluster, KEYS, now_ms=10**12 + 1) == (0, 0)
    assert await bound_count(cluster, KEYS) == BOUND
