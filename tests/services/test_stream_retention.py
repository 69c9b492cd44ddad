"""Trimming the shard command streams and feeds (storage.retention) on a real Redis: only what was consumed goes.

Stories: given a stream and its consumers' positions, when the trim runs, then every entry a consumer still
needs is there, and the consumed ones older than the retention are gone. Trimming is approximate (whole
stream nodes of 100 entries), so the checks allow one node of consumed entries to stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_process_helper import register_test_rulesets
from engine_test_support import KEYS, EngineProcess, held_shards, send, wait_for
from projection_games import dump_models

from almanac.projections.rebuild import rebuild
from almanac.projections.worker import Projector
from almanac.services.engine.worker import GROUP
from almanac.storage.retention import StreamTrimmer, feed_was_trimmed

register_test_rulesets()
NODE = 100  # stream-node-max-entries: the most an approximate trim leaves behind its bound
STREAM = "alm:{s00}:commands"


async def given_entries(client, count: int, stream: str = STREAM) -> list[bytes]:
    return [await client.xadd(stream, {"__data__": f"c{index}"}) for index in range(count)]


async def delivered(client, count: int, group: str = "g") -> list[bytes]:
    reply = await client.xreadgroup(group, "consumer", {STREAM: ">"}, count=count)
    return [entry_id for entry_id, _ in reply[0][1]]


async def ids(client, stream: str = STREAM) -> list[bytes]:
    return [entry_id for entry_id, _ in await client.xrange(stream)]


async def test_acknowledged_commands_go_and_the_oldest_pending_one_bounds_the_trim(redis_client):
    entries = await given_entries(redis_client, 600)
    await redis_client.xgroup_create(STREAM, "g", id="0")
    read = await delivered(redis_client, 500)  # 100 never delivered
    await redis_client.xack(STREAM, "g", *read[:300], *read[301:])  # entry 300 stays pending

    removed = await StreamTrimmer(redis_client, retain_ms=0).trim_commands(STREAM)

    left = await ids(redis_client)
    assert removed == 600 - len(left) and 300 - NODE <= removed <= 300
    assert left == entries[600 - len(left):]  # a suffix: nothing after the bound is touched
    assert entries[300] in left and all(entry in left for entry in entries[500:])
    pending = await redis_client.xpending(STREAM, "g")
    assert pending["pending"] == 1 and pending["min"] == entries[300]


async def test_nothing_undelivered_is_trimmed_and_the_slowest_group_decides(redis_client):
    entries = await given_entries(redis_client, 400)
    await redis_client.xgroup_create(STREAM, "g", id="0")
    await redis_client.xgroup_create(STREAM, "slow", id="0")
    await redis_client.xack(STREAM, "g", *await delivered(redis_client, 400))
    trimmer = StreamTrimmer(redis_client, retain_ms=0)

    assert await trimmer.trim_commands(STREAM) == 0  # "slow" has read nothing yet

    await redis_client.xack(STREAM, "slow", *await delivered(redis_client, 250, group="slow"))
    removed = await trimmer.trim_commands(STREAM)
    assert 249 - NODE <= removed <= 249 and entries[249] in await ids(redis_client)


async def test_a_stream_without_a_group_and_recent_commands_are_kept(redis_client):
    await given_entries(redis_client, 300)
    assert await StreamTrimmer(redis_client, retain_ms=0).trim_commands(STREAM) == 0  # no engine has read it
    assert await StreamTrimmer(redis_client, retain_ms=0).trim_commands("alm:{s00}:absent") == 0

    await redis_client.xgroup_create(STREAM, "g", id="0")
    await redis_client.xack(STREAM, "g", *await delivered(redis_client, 300))
    assert await StreamTrimmer(redis_client, retain_ms=3_600_000).trim_commands(STREAM) == 0  # all younger than 1 h
    assert await redis_client.xlen(STREAM) == 300


async def test_a_feed_is_trimmed_up_to_its_checkpoint_and_not_without_one(redis_client):
    feed, checkpoint = "alm:{s00}:feed", "alm:{s00}:rm:checkpoint"
    entries = await given_entries(redis_client, 500, feed)
    trimmer = StreamTrimmer(redis_client, retain_ms=0)
    assert await trimmer.trim_feed(feed, checkpoint) == 0 and not await feed_was_trimmed(redis_client, feed)

    await redis_client.set(checkpoint, entries[349])
    removed = await trimmer.trim_feed(feed, checkpoint)

    assert 349 - NODE <= removed <= 349 and await ids(redis_client, feed) == entries[500 - (500 - removed):]
    assert await feed_was_trimmed(redis_client, feed)
    assert not await feed_was_trimmed(redis_client, "alm:{s00}:no-such-feed")


async def test_a_running_stack_trims_what_it_consumed_and_read_models_still_equal_a_rebuild(
        redis_client, redis_url: str, tmp_path: Path):
    engine = EngineProcess(redis_url, "trimmer", tmp_path, ALMANAC_STREAM_RETAIN_S="0")
    try:
        await wait_for(lambda: held_shards(redis_client, "trimmer"), what="the engine's leases")
        # Four rooms on one shard, so that its command stream and feed outgrow a stream node several times.
        rooms = [room for room in (f"t{index}" for index in range(200)) if KEYS.shard(room) == 3][:4]
        for room in rooms:
            await send(redis_client, room, "ann", {"kind": "create_room", "ruleset": "counter"}, f"create-{room}")
            await send(redis_client, room, "ann", {"kind": "join_room"}, f"join-{room}")
        for move in range(320):
            room = rooms[move % len(rooms)]
            assert (await send(redis_client, room, "ann", {"kind": "add", "amount": 1 + move % 3},
                               f"add-{room}-{move}")).accepted
        stream = KEYS.shard_commands(3)

        async def commands_trimmed() -> bool:
            info = await redis_client.xinfo_stream(stream)
            return info["entries-added"] == 328 and info["length"] <= NODE

        # The engine's lease loop trims every 5 s: within two rounds the stream is down to its last node.
        await wait_for(commands_trimmed, timeout_s=15, what="the command stream trimmed")
        pending = await redis_client.xpending(stream, GROUP)
        assert pending["pending"] == 0  # only acknowledged entries were trimmed
    finally:
        engine.terminate()

    projector = Projector(redis_client, 16, block_ms=20, feed_retain_ms=0)
    await projector.drain()
    live = await dump_models(redis_client)
    assert await projector.trim_feeds() >= 300 - NODE
    feed = await redis_client.xrange(KEYS.feed(3))
    checkpoint = await redis_client.get(KEYS.checkpoint(3))
    assert 1 <= len(feed) <= NODE and feed[-1][0] == checkpoint  # the projector resumes from what is left

    # A projector started without checkpoints on trimmed feeds rebuilds those shards from the room streams.
    for shard in range(16):
        await redis_client.delete(KEYS.checkpoint(shard))
    fresh = Projector(redis_client, 16, block_ms=20)
    await fresh.load_checkpoints()
    assert await dump_models(redis_client) == live
    assert await rebuild(redis_client, 16) == len(rooms)
    assert await dump_models(redis_client) == live


@pytest.mark.parametrize("retain", ["-1", "soon"])
def test_the_retention_setting_is_checked(retain: str, monkeypatch):
    from almanac.services.settings import SettingsError, load_settings

    monkeypatch.setenv("ALMANAC_STREAM_RETAIN_S", retain)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "ALMANAC_STREAM_RETAIN_S" in str(refused.value)
