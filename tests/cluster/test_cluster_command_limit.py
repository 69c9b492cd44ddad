"""A room token's command limit on a real three-node Redis Cluster: the submit script counts the token's window
and appends the command in the room's slot, whichever node holds it, and refuses (nothing appended) past it."""

from __future__ import annotations

import pytest
from suite_settings import suite_settings

from almanac.services import bus
from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys


async def test_each_rooms_seat_is_counted_with_its_command_in_its_rooms_slot(cluster_url) -> None:
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    settings = suite_settings(redis_url=cluster_url, redis_cluster=True, rate_commands="2/minute")
    keys = Keys(settings.shard_count)
    limits = RateLimits(settings, client, keys)
    rooms = [f"limit-room-{index}" for index in range(12)]  # shards (and slots) on all three nodes
    try:
        for room in rooms:
            limit = limits.seat_limit(room, "p")
            assert limit is not None and keys.command_stream(keys.shard(room)).split(":")[1] in limit.key
            for number in range(2):
                record = CommandRecord(command_id=f"{room}-{number}", room=room, player="p", server_time_ms=0,
                                       body={"kind": "pass"})
                await bus.submit(client, keys, record, limit)
            await client.script_flush()  # the script is loaded again where it is missing
            with pytest.raises(bus.RateLimited) as refused:
                await bus.submit(client, keys, CommandRecord(command_id=f"{room}-late", room=room, player="p",
                                                             server_time_ms=0, body={"kind": "pass"}), limit)
            assert 0 < refused.value.retry_ms <= 60_000
            assert limits.token_refusal(refused.value.retry_ms).headers["Retry-After"] == str(
                -(-refused.value.retry_ms // 1000))
        nodes = {client.get_node_from_key(keys.command_stream(keys.shard(room))).name for room in rooms}
        assert len(nodes) > 1
        appended = 0
        for shard in {keys.shard(room) for room in rooms}:
            appended += await client.xlen(keys.command_stream(shard))
        assert appended == 2 * len(rooms)  # the refused ones appended nothing
    finally:
        await client.aclose()
