"""Redis Cluster failover keeps pending deadlines: a room's deadline tracked on a shard whose primary is killed -9
before it is due fires once after the replica's promotion, as one recorded timeout command, and the room verifies."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest
import redis
from cluster_support import ReplicatedCluster

from almanac.events.step import decode_record
from almanac.services.clock import Clock
from almanac.services.forensics.verify import verify_room
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("clusters"),  # after the other Clusters, never beside them (tests/conftest.py)
    pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                       reason="the six-node cluster needs redis-server and redis-cli on PATH"),
]

SHARDS = 16
START_MS = 1_000_000
TIMEOUT_MS = 60_000
ROOM = "long-season"


def record(command_id: str, player: str, body: dict) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=ROOM, player=player, server_time_ms=START_MS, body=body)


def replica_caught_up(primary: int) -> bool:
    """Whether ``primary``'s replica has acknowledged everything the primary wrote (its offset reached the
    primary's): what it holds once promoted is then all of it."""
    client = redis.Redis(host="127.0.0.1", port=primary, socket_timeout=1)
    try:
        info = client.info("replication")
    finally:
        client.close()
    replicas = [value for key, value in info.items() if key.startswith("slave") and isinstance(value, dict)]
    return bool(replicas) and all(int(one["offset"]) >= int(info["master_repl_offset"]) for one in replicas)


async def until(what: str, check, timeout_s: float = 30.0):  # noqa: ANN001, ANN202 - an async check, its value
    """``check()``'s first truthy answer, retried while the Cluster client finds the new primary (a connection
    to the dead node fails until its slot map is refreshed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answer = await check()
            if answer:
                return answer
        except (redis.RedisError, OSError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.1)


async def sent_timeouts(client, keys: Keys, shard: int) -> list[CommandRecord]:  # noqa: ANN001 - Cluster client
    """The clock's commands for the room in its shard's command stream."""
    entries = await client.xrange(keys.command_stream(shard))
    records = [decode_record(fields[b"__data__"]) for _, fields in entries]
    return [one for one in records if one.room == ROOM and one.command_id.startswith("clock-")]


def test_a_deadline_pending_on_a_killed_primary_fires_once_after_the_promotion(tmp_path: Path) -> None:
    started = time.monotonic()
    nodes = ReplicatedCluster(tmp_path)
    nodes.start()
    try:
        asyncio.run(_story(nodes))
    finally:
        nodes.stop()
    print(f"cluster deadline failover story: {time.monotonic() - started:.1f} s")


async def _story(nodes: ReplicatedCluster) -> None:
    keys = Keys(SHARDS)
    client = connect(nodes.url, cluster=True)
    try:
        store = RedisEventStore(client, SHARDS)
        rooms = RoomService(store)
        shard = keys.shard(ROOM)
        now = {"ms": START_MS}
        # Given a realm room whose season times out 60 s after it began, tracked by the clock of its shard
        options = {"players": ["alice", "bob"], "years": 1, "season_timeout_ms": TIMEOUT_MS}
        assert (await rooms.handle(record("c", "alice", {"kind": "create_room", "ruleset": "realm",
                                                         "options": options}))).accepted
        assert (await rooms.handle(record("j", "alice", {"kind": "join_room"}))).accepted
        clock = Clock(client, keys, store, now_ms=lambda: now["ms"])
        await clock.tick([shard])
        due = await client.zscore(keys.deadlines(shard), ROOM)
        assert due is not None and due > now["ms"], due
        assert await sent_timeouts(client, keys, shard) == []  # not due yet: nothing sent
        # and the primary holding the shard's slot has a replica that acknowledged all of it
        primary = client.get_node_from_key(keys.deadlines(shard)).port
        replica = next(port for port, of in nodes.roles()["slave"].items() if of == primary)
        deadline = time.monotonic() + 30
        while not replica_caught_up(primary):
            assert time.monotonic() < deadline, "the replica did not catch up"
            await asyncio.sleep(0.05)
        # When that primary is killed -9 before the deadline is due, and its replica is promoted
        nodes.kill(primary)
        promoted_s = nodes.wait_promoted(replica)
        # (the promoted replica holds the pending deadline as the clock tracked it: nothing re-derived it yet)
        assert await until("the shard's deadlines on the promoted primary",
                           lambda: client.zscore(keys.deadlines(shard), ROOM)) == due
        # and, the deadline now past, the clock and a second one (a lease that lapsed meanwhile) tick at once
        now["ms"] = int(due) + 1
        rival = Clock(client, keys, store, now_ms=lambda: now["ms"])

        async def fired() -> list[CommandRecord]:
            await asyncio.gather(clock.tick([shard]), rival.tick([shard]))
            return await sent_timeouts(client, keys, shard)

        sent = await until("the deadline's timeout in the shard's command stream", fired)
        for _ in range(3):  # more rounds, after the race: nothing more is sent
            await asyncio.gather(clock.tick([shard]), rival.tick([shard]))
        # Then its timeout went to the command stream once, and the engine's decision of it is recorded once
        assert len(sent) == 1, sent
        assert (await rooms.handle(sent[0])).accepted
        await asyncio.gather(clock.tick([shard]), rival.tick([shard]))  # the next season's deadline: not due
        assert len(await sent_timeouts(client, keys, shard)) == 1
        envelopes = await store.read(ROOM)
        assert len({e.command_id for e in envelopes if e.command_id.startswith("clock-")}) == 1
        # and the room verifies: the timeout re-decided from the log alone gives the same events
        report = await verify_room(store, ROOM)
        assert report.ok, report
        print(f"replica promoted {promoted_s:.1f} s after the kill")
    finally:
        await client.aclose()
