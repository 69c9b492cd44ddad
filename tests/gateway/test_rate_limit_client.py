"""The gateway's rate limits count on the process's own Redis client: the `limits` library builds none of its own.

Given the client services/bootstrap.py builds for a gateway (on one server, or a FailoverCluster on a real three-node
Redis Cluster), when the gateway's RateLimits is made on it and counts client addresses until one is refused, then
the library's storage runs on that very client: no other Redis client object has come to exist in the process,
Redis holds no connection more than before, and the counters are in Redis under the gateway's rate-limit prefix.
(The limiter used to build a client of its own, a plain RedisCluster kept only to be closed, or a second Redis on the
gateway's pool.)
"""

from __future__ import annotations

import gc

import pytest
import redis
import redis.asyncio as aioredis

from almanac.services import bootstrap
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.ratelimit import RateLimits
from almanac.storage.keys import ratelimit_prefix


def redis_clients() -> int:
    """The asyncio Redis client objects alive in this process (one server's or a Cluster's)."""
    gc.collect()
    return sum(isinstance(thing, aioredis.Redis | aioredis.RedisCluster) for thing in gc.get_objects())


def node_addresses(url: str, cluster: bool) -> list[tuple[str, int, str | None]]:
    """Every server behind ``url``: the one, or each node of the Cluster (host, port, the URL's password)."""
    if not cluster:
        parsed = redis.Redis.from_url(url).connection_pool.connection_kwargs
        return [(parsed["host"], parsed["port"], parsed.get("password"))]
    with redis.RedisCluster.from_url(url) as observer:
        return [(node.host, int(node.port), None) for node in observer.get_nodes()]


def connections(nodes: list[tuple[str, int, str | None]]) -> int:
    """The client connections those servers hold now, the observer's own left out (CLIENT LIST)."""
    total = 0
    for host, port, password in nodes:
        with redis.Redis(host=host, port=port, password=password) as node:
            total += len(node.client_list()) - 1
    return total


@pytest.mark.parametrize("cluster", [False, True], ids=["one server", "cluster"])
async def test_the_limiter_counts_on_the_process_client_and_opens_no_connection_of_its_own(cluster, request):
    url = request.getfixturevalue("cluster_url" if cluster else "redis_url")
    config = bootstrap.default_settings(redis_url=url, redis_cluster=cluster, rate_anon="3/minute", rate_commands="off")
    client = bootstrap.redis_client(config, bootstrap.Role.GATEWAY)
    keys = bootstrap.process_keys(config.shard_count)
    nodes = node_addresses(url, cluster)
    try:
        await client.flushall()  # the process's client has connected (to every node, on a Cluster)
        clients_before, connections_before = redis_clients(), connections(nodes)

        limits = RateLimits(config, client, keys)
        addresses = [f"10.0.1.{index}" for index in range(8)]  # on a Cluster, keys on more than one node
        for _ in range(3):
            for address in addresses:
                await limits.check_address(address)
        with pytest.raises(ApiError) as refused:
            await limits.check_address(addresses[0])

        assert refused.value.status == 429
        assert redis_clients() == clients_before, "the limiter built a Redis client of its own"
        assert connections(nodes) == connections_before, "the limiter opened a connection of its own"
        prefix = ratelimit_prefix(keys.prefix)
        found = (await client.keys(f"{prefix}*", target_nodes=client.ALL_NODES) if cluster
                 else await client.keys(f"{prefix}*"))
        assert len(found) == len(addresses)
    finally:
        await client.aclose()
