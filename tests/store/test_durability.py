"""ALMANAC_DURABILITY=replica: an append is answered only once a replica has it; without one it fails fast.

Given a primary with one replica, when the store appends with ``wait_replicas=1``, then the events are on
the replica by the time the append returns. Given a server without replicas, the same append raises
ReplicaWaitError (an infrastructure failure: no outcome is answered), and the engine refuses to start
with one clear line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from almanac.bench.common import trivial_log
from almanac.events.step import replay
from almanac.services.embedded_redis import EmbeddedRedis
from almanac.storage.redis_store import RedisEventStore, ReplicaWaitError

CHILD = "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; main()"


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory(prefix="almanac-replica-") as data_dir:
        primary = EmbeddedRedis(Path(data_dir) / "primary", persist=False).start()
        replica = EmbeddedRedis(Path(data_dir) / "replica", persist=False).start()
        try:
            follower = redis.Redis.from_url(replica.url)
            follower.config_set("masterauth", primary.password)  # each embedded server has a password of its own
            follower.execute_command("REPLICAOF", "127.0.0.1", primary.port)
            deadline = time.monotonic() + 20
            while follower.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica did not connect"
                time.sleep(0.05)
            follower.close()
            yield primary.url, replica.url, replica.process
        finally:
            replica.stop()
            primary.stop()


async def test_an_append_returns_only_once_a_replica_has_it(primary_and_replica: tuple) -> None:
    primary_url, replica_url, _ = primary_and_replica
    client = aioredis.Redis.from_url(primary_url)
    store = RedisEventStore(client, wait_replicas=1, wait_timeout_ms=5_000)
    try:
        envelopes = trivial_log(3, "durable-room")
        await store.append("durable-room", 0, "c1", envelopes)
        # Read from the replica right away: WAIT already confirmed its copy.
        replica_store = RedisEventStore(aioredis.Redis.from_url(replica_url))
        copied = await replica_store.read("durable-room")
        assert [e.version for e in copied] == [1, 2, 3]
        assert replay(copied) == replay(envelopes)
        await replica_store.client.aclose()
    finally:
        await client.aclose()


async def test_without_a_replica_an_append_is_never_confirmed(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, wait_replicas=1, wait_timeout_ms=50)
    with pytest.raises(ReplicaWaitError, match="not confirmed by 1 replica"):
        await store.append("lonely-room", 0, "c1", trivial_log(1, "lonely-room"))


def test_the_engine_refuses_to_start_without_a_replica(redis_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_DURABILITY": "replica", "ALMANAC_DATA_DIR": str(tmp_path)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CHILD, "engine"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert "ALMANAC_DURABILITY=replica needs a Redis with at least one connected replica" in done.stdout + done.stderr
    assert time.monotonic() - started < 30


async def test_a_retry_that_finds_its_append_already_written_still_waits_for_the_replica(
        primary_and_replica: tuple) -> None:
    import signal  # noqa: PLC0415

    primary_url, _, replica_process = primary_and_replica
    envelopes = trivial_log(2, "retried-room")
    first = aioredis.Redis.from_url(primary_url)
    retry = aioredis.Redis.from_url(primary_url)  # another engine's connection: it never wrote anything
    replica_process.send_signal(signal.SIGSTOP)  # connected, but acknowledging nothing
    try:
        # Given an append written on the primary whose WAIT found no replica acknowledging it
        with pytest.raises(ReplicaWaitError):
            await RedisEventStore(first, wait_replicas=1, wait_timeout_ms=200).append("retried-room", 0, "c1",
                                                                                      envelopes)
        # When the command is retried on another connection (the append finds it written: "dup")
        # Then the retry is not answered either: its WAIT covers the earlier write too
        with pytest.raises(ReplicaWaitError):
            await RedisEventStore(retry, wait_replicas=1, wait_timeout_ms=200).append("retried-room", 0, "c1",
                                                                                      envelopes)
    finally:
        replica_process.send_signal(signal.SIGCONT)
    # And once the replica acknowledges again, the retry is answered as the duplicate it is
    result = await RedisEventStore(retry, wait_replicas=1, wait_timeout_ms=5_000).append("retried-room", 0, "c1",
                                                                                         envelopes)
    assert result.duplicate
    await first.aclose()
    await retry.aclose()


async def test_a_stored_outcome_is_not_read_back_before_a_replica_confirms_it(primary_and_replica: tuple) -> None:
    """Issue 28, items 17/18: a gateway answered a resend (or GET of the outcome) from the store while the write
    that stored it had failed its WAIT; a failover then loses an outcome the client was told of."""
    import signal  # noqa: PLC0415

    from almanac.services import bootstrap  # noqa: PLC0415
    from almanac.services.settings import Settings  # noqa: PLC0415

    primary_url, _, replica_process = primary_and_replica
    engine_client = aioredis.Redis.from_url(primary_url)
    # The gateway's own store, as its bootstrap builds it under ALMANAC_DURABILITY=replica
    gateway = bootstrap.runtime(Settings(redis_url=primary_url, durability="replica"), bootstrap.Role.GATEWAY)
    gateway.store.wait_timeout_ms = 200
    replica_process.send_signal(signal.SIGSTOP)  # connected, but acknowledging nothing
    try:
        # Given an append the primary took but no replica confirmed (the engine answered nothing)
        with pytest.raises(ReplicaWaitError):
            await RedisEventStore(engine_client, wait_replicas=1, wait_timeout_ms=200).append(
                "unconfirmed-room", 0, "unconfirmed-room:c1", trivial_log(1, "unconfirmed-room"))
        # When the client resends the command, or asks for its outcome, through a gateway
        # Then the stored outcome is not answered: its write is still unconfirmed
        with pytest.raises(ReplicaWaitError):
            await gateway.store.outcome("unconfirmed-room", "unconfirmed-room:c1")
    finally:
        replica_process.send_signal(signal.SIGCONT)
    # And once the replica has it, the same read answers it
    gateway.store.wait_timeout_ms = 5_000
    stored = await gateway.store.outcome("unconfirmed-room", "unconfirmed-room:c1")
    assert stored is not None and stored.last_version == 1
    # An undecided id costs no WAIT: nothing to confirm
    assert await gateway.store.outcome("unconfirmed-room", "never-sent") is None
    await gateway.aclose()
    await engine_client.aclose()


async def test_the_projectors_read_models_are_written_without_waiting_for_a_replica(redis_client: aioredis.Redis) -> None:
    # Given a room in a Redis with no replica, and the projector on a store that waits for one (as every store does
    # under ALMANAC_DURABILITY=replica): its read models are derived from the logs, so they need no replica's copy
    from almanac.projections.projector import Projector  # noqa: PLC0415
    from almanac.projections.read_model_queries import ReadModels  # noqa: PLC0415

    await RedisEventStore(redis_client).append("projected-room", 0, "c1", trivial_log(3, "projected-room"))
    waiting = RedisEventStore(redis_client, wait_replicas=1, wait_timeout_ms=50)

    # When the projector drains the feeds, Then it commits the room's summary (no ReplicaWaitError, no stall)
    assert await Projector(redis_client, 16, store=waiting).drain() == 3
    rooms = await ReadModels(redis_client, 16).rooms()
    assert [(room["room"], room["version"]) for room in rooms] == [("projected-room", 3)]
