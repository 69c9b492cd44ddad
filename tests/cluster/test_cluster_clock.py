"""The clock on a real Redis Cluster: each shard's deadlines live in its own slot and fire once per room."""

from __future__ import annotations

import asyncio
from typing import Any

from almanac.events.step import decode_record
from almanac.services.clock import Clock
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16
START_MS = 1_000_000
TIMEOUT_MS = 60_000


def record(command_id: str, player: str, body: dict, room: str) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=START_MS, body=body)


async def test_deadlines_of_rooms_on_every_node_fire_once_each(cluster: Any) -> None:
    keys = Keys(SHARDS)
    store = RedisEventStore(cluster, SHARDS)
    service = RoomService(store)
    rooms = [f"cl-{index}" for index in range(12)]  # spread over the shards, so over the three nodes
    options = {"players": ["alice", "bob"], "years": 1, "season_timeout_ms": TIMEOUT_MS}
    for room in rooms:
        await service.handle(record(f"{room}-c", "alice", {"kind": "create_room", "ruleset": "realm", "options": options}, room))
        await service.handle(record(f"{room}-j", "alice", {"kind": "join_room"}, room))
    # Given two clocks past every room's timeout, ticking over every shard at the same time
    clocks = [Clock(cluster, keys, store, now_ms=lambda: START_MS + TIMEOUT_MS) for _ in range(2)]
    for _ in range(3):
        await asyncio.gather(*(clock.tick(list(range(SHARDS))) for clock in clocks))
    # Then each room's season timeout went to its shard's command stream once
    sent = []
    for shard in range(SHARDS):
        sent += [decode_record(fields[b"__data__"]) for _, fields in await cluster.xrange(keys.command_stream(shard))]
    assert sorted(r.room for r in sent if r.command_id.startswith("clock-")) == sorted(rooms)
