"""One Cluster node refusing writes fails its shards only: the engine's other shards are answered meanwhile.

Found by a branch-coverage run over the engine's tests (issue 29, item 7): the engine's per-shard isolation on a
Cluster (a read or a takeover failing alone, ``ClusterStreams.isolates``) was run only inside the failover
stories' timing, never by a story of its own. Here one node refuses every write (NOREPLICAS: it asks for a
replica it does not have), which fails the reads and takeovers of its shards and nothing else.
"""

from __future__ import annotations

import time
from typing import Any

from cluster_support import at_once, lease_margin, ready_engine, taken_over
from shard_rooms import room_on
from structlog.testing import capture_logs
from waiting import wait_for

from almanac.services import bus
from almanac.services.engine.shard_engine import Engine, EngineConfig
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16
KEYS = Keys(SHARDS)


def _record(room: str, command_id: str) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player="p", server_time_ms=int(time.time() * 1000),
                         body={"kind": "join_room"})


async def test_a_node_refusing_writes_holds_back_its_shards_only_and_their_commands_are_decided_once_it_mends(
        cluster) -> None:
    """Given an engine holding two shards on different nodes (a long lease: it stays safely held while the
    refusing node takes no renewal), when one node refuses every write, then that shard's reads and takeovers
    fail alone while the other shard's commands are answered; once the node takes writes again, a command on
    the held-back shard is decided, exactly once."""
    engine, refusing, healthy, node = _engine_on_two_nodes(cluster, "isolating")
    store = RedisEventStore(cluster, SHARDS)
    held_back, answered = room_on(KEYS, refusing, "held-back"), room_on(KEYS, healthy, "answered")
    with capture_logs() as logs:
        async with ready_engine(engine):
            await cluster.config_set("min-replicas-to-write", 1, target_nodes=node)
            try:
                await wait_for(lambda: _logged(logs, "shard.read_failed", refusing),
                               what="the refusing node's shard failing its read")
                await wait_for(lambda: _logged(logs, "shard.takeover_failed", refusing),
                               what="the refusing node's shard failing its takeover")
                await bus.submit(cluster, KEYS, _record(answered, "other-1"))
                other = await wait_for(lambda: store.outcome(answered, "other-1"), what="the other shard answered")
                assert not other.accepted  # no such room: refused, decided all the same
                assert refusing in engine._needs_takeover
            finally:
                await cluster.config_set("min-replicas-to-write", 0, target_nodes=node)
            await bus.submit(cluster, KEYS, _record(held_back, "mended-1"))
            decided = await wait_for(lambda: store.outcome(held_back, "mended-1"), timeout_s=30,
                                     what="the held-back shard's command decided")
            assert not decided.accepted
            await wait_for(lambda: taken_over(engine, refusing, healthy), what="the shard taken over again")
            assert engine.metrics.totals["commands"] == 2 and engine.metrics.totals["dead_letters"] == 0
            assert engine.metrics.totals.get("stepped_aside", 0) == 0


def _engine_on_two_nodes(cluster, name: str) -> tuple[Engine, int, int, Any]:  # noqa: ANN001 - the cluster client
    """An engine (not started) holding two shards on different nodes, with a long lease (safely held while one
    node takes no renewal): (engine, the shard to break, the other shard, the node of the first)."""
    first_shard_of_node: dict[str, int] = {}
    for shard in range(SHARDS):
        first_shard_of_node.setdefault(cluster.get_node_from_key(KEYS.command_stream(shard)).name, shard)
    broken, healthy = list(first_shard_of_node.values())[:2]
    engine = Engine(cluster, EngineConfig(name=name, shards=[broken, healthy], shard_count=SHARDS, lease_ms=60_000,
                                          block_ms=200))
    return engine, broken, healthy, cluster.get_node_from_key(KEYS.command_stream(broken))


async def _logged(logs: list[dict], event: str, shard: int) -> bool:
    return any(line["event"] == event and line.get("shard") == shard for line in logs)


async def test_a_write_refused_by_a_full_node_leaves_its_command_pending_until_the_node_takes_writes_again(
        cluster) -> None:
    """Given a command waiting in a shard's stream, and that shard's node full (maxmemory: it still serves the
    engine's read, but refuses the decision's write, OOM), when the engine reads and decides it, then the write's
    refusal fails that shard alone (no attempt counted, nothing set aside), the other shard's commands are
    answered, and once the node takes writes again the command is decided, exactly once."""
    engine, full, healthy, node = _engine_on_two_nodes(cluster, "full-node")
    store = RedisEventStore(cluster, SHARDS)
    waiting, answered = room_on(KEYS, full, "waiting"), room_on(KEYS, healthy, "answered")
    with capture_logs() as logs:
        async with ready_engine(engine):
            lease_margin(engine, full, 0)  # the shard not read for now: the command waits
            await wait_for(lambda: at_once(full not in engine.streams._reads._reads), what="the shard's read over")
            await bus.submit(cluster, KEYS, _record(waiting, "full-1"))
            await cluster.config_set("maxmemory", 1, target_nodes=node)
            try:
                lease_margin(engine, full, 60)  # read again: decided, its write refused
                await wait_for(lambda: _logged(logs, "shard.write_failed", full), what="the full node's write refused")
                await bus.submit(cluster, KEYS, _record(answered, "other-1"))
                assert await wait_for(lambda: store.outcome(answered, "other-1"), what="the other shard answered")
                assert await store.outcome(waiting, "full-1") is None
            finally:
                await cluster.config_set("maxmemory", 0, target_nodes=node)
            decided = await wait_for(lambda: store.outcome(waiting, "full-1"), timeout_s=30,
                                     what="the waiting command decided once the node takes writes")
            assert not decided.accepted  # no such room: refused, decided all the same
            await wait_for(lambda: taken_over(engine, full, healthy), what="the shard taken over again")
            assert engine.metrics.totals["commands"] == 2
            assert engine.metrics.totals.get("failures", 0) == 0 and engine.metrics.totals.get("dead_letters", 0) == 0
