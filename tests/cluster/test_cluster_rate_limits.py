"""The gateway's rate limits on a real three-node Redis Cluster: the limits library's asyncio RedisCluster
client (redis-py 5.3) counts every address on whatever node its key lands, and survives a script flush."""

from __future__ import annotations

import pytest

from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, Claims
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.ratelimit import RateLimits
from almanac.services.redis_client import connect
from almanac.services.settings import load_settings
from almanac.storage.keys import Keys


async def test_each_address_and_seat_is_limited_on_its_own_across_the_nodes(cluster_url) -> None:
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    settings = load_settings({}, redis_url=cluster_url, redis_cluster=True, rate_anon="3/minute",
                             rate_commands="2/minute")
    limits = RateLimits(settings, client, Keys(settings.shard_count))
    try:
        addresses = [f"10.0.0.{index}" for index in range(12)]  # keys spread over the three nodes
        for _ in range(3):
            for address in addresses:
                await limits.check_address(address)
        keys = await client.keys("alm:ratelimit:*", target_nodes=client.ALL_NODES)
        assert len(keys) == len(addresses)
        assert len({client.get_node_from_key(key).name for key in keys}) > 1
        await client.script_flush()  # every node forgets the script, as after a restart without persistence
        for address in addresses:
            with pytest.raises(ApiError) as refused:
                await limits.check_address(address)
            assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "60"}
        seat_a = Claims(room=ANY_ROOM, player="auditor-a", role=ROLE_AUDITOR, exp=0)
        await limits.check_auditor(seat_a)
        await limits.check_auditor(seat_a)
        with pytest.raises(ApiError):
            await limits.check_auditor(seat_a)
        await limits.check_auditor(Claims(room=ANY_ROOM, player="auditor-b", role=ROLE_AUDITOR, exp=0))
    finally:
        await client.aclose()
