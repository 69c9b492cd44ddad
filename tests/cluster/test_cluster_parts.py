"""Each moving part on a real three-node Redis Cluster: batched writes, leases, outcomes, the projector."""

from __future__ import annotations

import asyncio
import time

import pytest
from projection_games import dump_models, open_room, options_for, play, players_for
from redis import exceptions

from almanac.events.envelope import GENESIS_HASH
from almanac.projections.projector import CheckpointMoved, Projector
from almanac.projections.read_model_queries import ReadModels
from almanac.projections.rebuild import rebuild
from almanac.services import bus
from almanac.services.engine.lease import ShardLeases
from almanac.services.gateway.outcomes import OutcomeWaiter
from almanac.services.room_service import CommandRecord, Outcome, RoomService
from almanac.storage.base import AppendRequest, RejectRequest, VersionConflict
from almanac.storage.keys import Keys, outcome_channel
from almanac.storage.redis_store import RedisEventStore

SHARDS = 16


def envelopes_for(room: str, first: int, count: int):
    from store.test_store_contract import make_envelopes  # noqa: PLC0415 - the store contract's helper

    return make_envelopes(room, first, count, GENESIS_HASH)


async def test_a_batch_of_appends_and_refusals_lands_on_every_node_as_on_one_server(cluster):
    store = RedisEventStore(cluster, SHARDS)
    rooms = [f"batch-{index}" for index in range(24)]
    appends = [AppendRequest(room=room, expected_version=0, command_id=f"c-{room}",
                             envelopes=envelopes_for(room, 1, 2)) for room in rooms]
    rejections = [RejectRequest(room=room, command_id=f"r-{room}", error={"code": "x", "message": "no"},
                                record=b"rec") for room in rooms[:5]]
    appended, refused = await store.write_many(appends, rejections)
    assert all(not isinstance(result, Exception) and result.outcome.last_version == 2 for result in appended)
    assert all(not isinstance(result, Exception) and not result.duplicate for result in refused)

    # The scripts vanish from every node (a restart without persistence): the batch loads them again.
    await cluster.script_flush()
    again = [AppendRequest(room=room, expected_version=0, command_id=f"late-{room}",
                           envelopes=envelopes_for(room, 1, 1)) for room in rooms[:3]]
    replay = [AppendRequest(room=rooms[3], expected_version=2, command_id=f"c-{rooms[3]}",
                            envelopes=envelopes_for(rooms[3], 3, 1))]
    appended, _ = await store.write_many(again + replay, [])
    assert all(isinstance(result, VersionConflict) and result.current == 2 for result in appended[:3])
    assert appended[3].duplicate and appended[3].outcome.last_version == 2
    assert await store.rooms() == sorted(rooms)
    nodes = {cluster.get_node_from_key(Keys(SHARDS).events(room)).name for room in rooms}
    assert len(nodes) == 3


async def test_leases_are_taken_renewed_and_released_on_a_cluster(cluster):
    leases = ShardLeases(cluster, list(range(SHARDS)), "e1", lease_ms=5_000)
    acquired, lost = await leases.tick()
    assert acquired == list(range(SHARDS)) and not lost
    other = ShardLeases(cluster, list(range(SHARDS)), "e2", lease_ms=5_000)
    assert await other.tick() == ([], [])
    assert await leases.tick() == ([], [])  # renewed, none lost
    assert leases.held == list(range(SHARDS))
    await leases.release_all()
    acquired, _ = await other.tick()
    assert acquired == list(range(SHARDS))


async def test_outcomes_published_on_any_node_reach_the_waiter(cluster):
    waiter = OutcomeWaiter(cluster, Keys(SHARDS))
    await waiter.start()
    try:
        records = [CommandRecord(command_id=f"cmd-{index}", room=f"room-{index}", player="p", server_time_ms=1,
                                 body={"kind": "roll"}) for index in range(12)]

        async def engine() -> None:
            # The stand-in engine answers each command from the shard stream it was put on.
            keys = Keys(SHARDS)
            answered = 0
            while answered < len(records):
                for record in records:
                    stream = keys.command_stream(keys.shard(record.room))
                    if await cluster.xlen(stream) and not await cluster.exists(f"done:{{{record.command_id}}}"):
                        await cluster.set(f"done:{{{record.command_id}}}", 1)
                        outcome = Outcome(command_id=record.command_id, room=record.room, accepted=True)
                        await cluster.execute_command("PUBLISH", outcome_channel(record.command_id),
                                                  bus.encode_outcome(outcome))
                        answered += 1
                await asyncio.sleep(0.005)

        answering = asyncio.create_task(engine())
        outcomes = await asyncio.gather(*(waiter.submit_and_wait(record, 5) for record in records))
        await answering
    finally:
        await waiter.stop()
    assert [o.command_id for o in outcomes] == [r.command_id for r in records]
    channels = {cluster.get_node_from_key(outcome_channel(r.command_id)).name for r in records}
    assert len(channels) > 1  # published on several nodes, all received on one


async def test_the_projector_on_a_cluster_equals_a_rebuild(cluster):
    service = RoomService(RedisEventStore(cluster, SHARDS), snapshot_every=10)
    rooms = []
    for ruleset in ("counter", "bazaar", "board", "realm"):
        for copy in range(3):
            room = f"{ruleset}-{copy}"
            rooms.append((room, ruleset))
            await open_room(service, room, ruleset, players_for(ruleset), options=options_for(ruleset))
    projector = Projector(cluster, SHARDS, batch_size=5, block_ms=50)
    stop = asyncio.Event()
    running = asyncio.create_task(projector.run(stop))
    try:
        await asyncio.gather(*(play(service, room, ruleset, 8, players_for(ruleset)) for room, ruleset in rooms))
        models = ReadModels(cluster, SHARDS)
        for room, _ in rooms:
            assert await models.wait_for(room, (await service.load(room))[0].version, 10), room
        for _ in range(200):
            if (await models.status())["caught_up"]:
                break
            await asyncio.sleep(0.02)
        assert (await models.status())["alive"]
    finally:
        stop.set()
        await running
    live = await dump_models(cluster)
    assert len({cluster.get_node_from_key(key).name for key in live}) == 3
    assert await rebuild(cluster, SHARDS) == len(rooms)
    assert await dump_models(cluster) == live
    assert await rebuild(cluster, SHARDS, ["leaderboards"]) == len(rooms)
    assert await dump_models(cluster) == live

    # Exactly once: a checkpoint moved by someone else is a conflict, not a second apply.
    await cluster.set(Keys().checkpoint(0), "1-0")
    with pytest.raises(CheckpointMoved):
        await projector._commit(0, [], "2-0")


def test_a_cluster_without_a_node_url_is_one_clear_line(monkeypatch, tmp_path):
    from typer.testing import CliRunner  # noqa: PLC0415

    from almanac.services.cli import _load_commands, app  # noqa: PLC0415

    _load_commands()
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_CLUSTER", "true")
    monkeypatch.setenv("ALMANAC_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["projections", "show", "rooms"])
    assert result.exit_code == 1
    assert "REDIS_CLUSTER=true needs REDIS_URL" in result.output


def test_the_cli_reaches_the_cluster_through_any_live_seed_when_the_first_is_down(cluster_url, monkeypatch, tmp_path):
    """Given REDIS_URL naming a dead node first and a live one after it, the CLI still answers."""
    from typer.testing import CliRunner  # noqa: PLC0415

    from almanac.services.cli import _load_commands, app  # noqa: PLC0415
    from almanac.services.embedded_redis import free_port  # noqa: PLC0415

    _load_commands()
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0,{cluster_url}")
    monkeypatch.setenv("REDIS_CLUSTER", "true")
    monkeypatch.setenv("ALMANAC_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["projections", "show", "rooms"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("error", [exceptions.ClusterDownError, exceptions.TryAgainError, exceptions.MovedError,
                                   exceptions.AskError, exceptions.SlotNotCoveredError, exceptions.MasterDownError,
                                   exceptions.ConnectionError, ConnectionRefusedError])
def test_every_error_of_a_cluster_failing_over_is_503_store_unavailable(error):
    from almanac.services.gateway.errors import STORE_ERRORS  # noqa: PLC0415

    assert issubclass(error, STORE_ERRORS)


async def test_a_pipeline_command_for_an_unreachable_node_fails_alone(cluster):
    """One node that cannot be reached fails its own commands at once; the others' run and answer."""
    from redis.asyncio.cluster import ClusterNode  # noqa: PLC0415

    from almanac.services.embedded_redis import free_port  # noqa: PLC0415

    dead = ClusterNode("127.0.0.1", free_port())
    for _ in range(3):  # a node that keeps failing (a failover) keeps its connections in its pool
        async with cluster.pipeline(transaction=False) as pipe:
            pipe.set("alm:{s01}:probe", "1")
            pipe.execute_command("PING", target_nodes=dead)
            pipe.get("alm:{s01}:probe")
            replies = await pipe.execute(raise_on_error=False)
        assert replies[0] is True and replies[2] == b"1"
        assert isinstance(replies[1], exceptions.ConnectionError)
    assert len(dead._connections) == len(dead._free) == 1


async def test_durability_replica_without_replicas_answers_no_write_as_confirmed(cluster):
    """WAIT per node (ALMANAC_DURABILITY=replica): primaries with no replica confirm nothing, so every call is a
    ReplicaWaitError (the engine leaves the commands pending), and the engine refuses to start on such a Cluster."""
    from almanac.services.engine.shard_engine import DurabilityError, require_replica  # noqa: PLC0415
    from almanac.storage.redis_store import ReplicaWaitError  # noqa: PLC0415

    store = RedisEventStore(cluster, SHARDS, wait_replicas=1, wait_timeout_ms=50)
    requests = [AppendRequest(room=f"durable-{n}", expected_version=0, command_id="c", envelopes=envelopes_for(
        f"durable-{n}", 1, 1), command_record=b"r") for n in range(6)]
    appended, _ = await store.write_many(requests, [])
    assert all(isinstance(result, ReplicaWaitError) for result in appended), appended
    # Once a node's WAIT failed, its next writes are refused before they are sent while it has no replica online:
    # nothing written that no replica confirmed, and no WAIT timeout sat out by every retry (issue 28, item 17).
    later = [AppendRequest(room=f"durable-later-{n}", expected_version=0, command_id="later", envelopes=envelopes_for(
        f"durable-later-{n}", 1, 1), command_record=b"r") for n in range(6)]
    appended, _ = await store.write_many(later, [])
    assert all(isinstance(result, ReplicaWaitError) for result in appended), appended
    assert not [request.room for request in later if await cluster.exists(store.keys.events(request.room))]
    with pytest.raises(DurabilityError, match="every Cluster primary"):
        await require_replica(cluster)


async def test_durability_replica_refuses_at_once_on_a_node_no_write_was_ever_confirmed_on(cluster):
    """Given ALMANAC_DURABILITY=replica and a store that never had a write confirmed on the Cluster's nodes (as a
    replica promoted in a failover is new to the engine's store) while they have no replica online (a promoted
    replica until one rejoins it), when a batch of writes for rooms on every node is sent, then it is refused at
    once with nothing written: no WAIT sits out its timeout, which the batch's commands of every other shard
    would wait for too (after a primary's kill the other shards' stall grew by that second)."""
    from almanac.storage.redis_store import ReplicaWaitError  # noqa: PLC0415

    store = RedisEventStore(cluster, SHARDS, wait_replicas=1, wait_timeout_ms=3_000)
    requests = [AppendRequest(room=f"promoted-{n}", expected_version=0, command_id="c", envelopes=envelopes_for(
        f"promoted-{n}", 1, 1), command_record=b"r") for n in range(6)]
    started = time.monotonic()
    appended, _ = await store.write_many(requests, [])
    took = time.monotonic() - started
    assert all(isinstance(result, ReplicaWaitError) for result in appended), appended
    assert not [request.room for request in requests if await cluster.exists(store.keys.events(request.room))]
    assert took < 1.5, f"the batch waited {took:.2f} s (WAIT's timeout: 3 s)"


async def test_command_streams_and_feeds_are_trimmed_on_every_node(cluster):
    from almanac.storage.retention import StreamTrimmer, feed_was_trimmed  # noqa: PLC0415

    keys = Keys(SHARDS)
    trimmer = StreamTrimmer(cluster, retain_ms=0)
    shards = range(SHARDS)
    assert len({cluster.get_node_from_key(keys.command_stream(shard)).name for shard in shards}) == 3
    for shard in shards:
        stream, feed = keys.command_stream(shard), keys.feed(shard)
        ids = [await cluster.xadd(stream, {"__data__": b"x"}) for _ in range(250)]
        feed_ids = [await cluster.xadd(feed, {"r": "room"}) for _ in range(250)]
        await cluster.xgroup_create(stream, "engine", id="0")
        read = await cluster.xreadgroup("engine", "e1", {stream: ">"}, count=250)
        await cluster.xack(stream, "engine", *[entry_id for entry_id, _ in read[0][1]][:200])
        await cluster.set(keys.checkpoint(shard), feed_ids[199])

        assert 100 <= (await trimmer.trim_commands(stream)).removed <= 200
        assert 100 <= await trimmer.trim_feed(feed, keys.checkpoint(shard), keys.feed_hold(shard),
                                                  keys.notifier_cursor(shard)) <= 199
        left = [entry_id for entry_id, _ in await cluster.xrange(stream)]
        assert ids[200] in left and ids[-1] in left  # the first pending entry and all after it stay
        assert feed_ids[199] in [entry_id for entry_id, _ in await cluster.xrange(feed)]  # the checkpoint stays
        assert await feed_was_trimmed(cluster, feed)
