"""Throwaway Redis Clusters on loopback for the Cluster tests, and the engine steps their stories share.

The nodes and the replicated Cluster are the benchmarks' (almanac.bench.redis_cluster, `almanac bench failover`
starts the same Cluster), re-exported here for the stories."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import redis
from waiting import wait_for

from almanac.bench import redis_cluster
from almanac.bench.redis_cluster import SLOTS, start_node
from almanac.services.embedded_redis import find_redis_server
from almanac.storage.keys import engine_heartbeat_key

__all__ = ["ReplicatedCluster", "at_once", "lease_margin", "local_cluster", "readiness_published", "ready_engine",
           "taken_over"]


class ReplicatedCluster(redis_cluster.ReplicatedCluster):
    """The benchmarks' replicated Cluster, its primaries syncing their replica at once (``sync_delay_s`` 0).

    Redis's 5 s ``repl-diskless-sync-delay`` waits for more replicas to share one transfer; each primary here has
    one, so the delay only postponed each sync: 4-5 s of every Cluster's start (7.3-8.4 s against 3.4-3.7 s) and
    of a killed node's rejoining as a replica (4.9-5.5 s against 0.07 s), seconds in which a story waited on
    nothing it checks. The failover and promotion themselves are the same."""

    def __init__(self, data_dir: Path, primaries: int = 3, node_timeout_ms: int = 2000) -> None:
        super().__init__(data_dir, primaries, node_timeout_ms, sync_delay_s=0)


@contextlib.contextmanager
def local_cluster(data_dir: Path, nodes: int = 3) -> Iterator[str]:
    """Start ``nodes`` masters, meet them, spread the slots, wait for ``cluster_state:ok``; yield a URL."""
    binary = find_redis_server()
    ports: list[int] = []
    bus_ports: dict[int, str] = {}
    processes: list[subprocess.Popen] = []
    try:
        for index in range(nodes):
            port, process, command = start_node(binary, data_dir / f"node-{index}", "--appendonly", "no")
            bus_ports[port] = command[command.index("--cluster-port") + 1]
            ports.append(port)
            processes.append(process)
        clients = [redis.Redis(host="127.0.0.1", port=port) for port in ports]
        per_node = SLOTS // nodes
        for index, client in enumerate(clients):
            first = index * per_node
            last = SLOTS - 1 if index == nodes - 1 else first + per_node - 1
            client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        for port in ports[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port, bus_ports[port])
        deadline = time.monotonic() + 20
        while not all(c.execute_command("CLUSTER INFO").get("cluster_state") == "ok" for c in clients):
            if time.monotonic() > deadline:
                raise RuntimeError("the local Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        for client in clients:
            client.close()
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for process in processes:
            process.kill()
            process.wait()


async def readiness_published(client, name: str) -> bool:  # noqa: ANN001 - any redis-py async client
    """Whether engine ``name``'s heartbeat says it is ready (the beat loop beats at once when the engine first
    becomes ready)."""
    beat = await client.get(engine_heartbeat_key(name))
    return bool(beat) and json.loads(beat)["consumed_ms"] > 0


async def taken_over(engine, *shards: int) -> bool:  # noqa: ANN001 - a shard engine
    """Whether ``engine`` holds each of ``shards`` and has taken each over (its pending entries replayed)."""
    return all(engine.leases.holds(shard) for shard in shards) and not engine._needs_takeover.intersection(shards)


@contextlib.asynccontextmanager
async def ready_engine(engine) -> AsyncIterator[None]:  # noqa: ANN001 - a shard engine, not started
    """``engine`` started and ready for a story to break one of its shards: it holds and has taken over every shard
    of its config, and its readiness beat is published (the beat loop beats at once when the engine first becomes
    ready; the leases are renewed a third of a lease after the last renewal, not then); stopped when the block
    leaves."""
    await engine.start()
    try:
        shards = engine.config.shards
        await wait_for(lambda: taken_over(engine, *shards), what=f"the engine holding and taking over shards {shards}")
        await wait_for(lambda: readiness_published(engine.client, engine.config.name), what="the readiness beat")
        yield
    finally:
        await engine.stop()


def lease_margin(engine, shard: int, seconds: float) -> None:  # noqa: ANN001 - a shard engine
    """Set by hand what ``engine`` believes of its lease on ``shard``: safely held for ``seconds`` more (0: not
    safely held, as a renewal late in a failover leaves it: the shard is left out of its reads meanwhile)."""
    engine.leases._valid_until[shard] = time.monotonic() + seconds
    engine.leases.changed()


async def at_once(value: object) -> object:
    """``value`` as ``wait_for`` polls it: for a condition the test reads off an object in this process."""
    return value
