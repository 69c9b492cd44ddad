"""Trimming the shard command streams and feeds (storage.retention) on a real Redis: only what was consumed goes.

Stories: given a stream and its consumers' positions, when the trim runs, then every entry a consumer still
needs is there, and the consumed ones older than the retention are gone. Trimming is approximate (whole
stream nodes, 100 entries by default); the unit stories make every entry its own node so that each trim is
exact and an entry off by one is caught.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from engine_process_helper import register_test_rulesets
from engine_test_support import KEYS, EngineProcess, held_shards, send, wait_for
from projection_games import dump_models, open_room, options_for, play, players_for
from suite_settings import suite_settings

from almanac.projections import rebuild as rebuilding
from almanac.projections.projector import Projector
from almanac.projections.rebuild import rebuild
from almanac.services.room_service import RoomService
from almanac.storage.redis_store import RedisEventStore
from almanac.storage.retention import StreamTrimmer, feed_was_trimmed

register_test_rulesets()
NODE = 100  # stream-node-max-entries by default: the most an approximate trim leaves behind its bound
STREAM = "alm:{s00}:commands"
FEED, CHECKPOINT, HOLD, NOTICED = KEYS.feed(0), KEYS.checkpoint(0), KEYS.feed_hold(0), KEYS.notifier_cursor(0)


@pytest.fixture
async def exact(redis_client) -> AsyncIterator[None]:
    """One entry per stream node: an approximate trim removes exactly the entries before its bound."""
    await redis_client.config_set("stream-node-max-entries", 1)
    try:
        yield
    finally:
        await redis_client.config_set("stream-node-max-entries", NODE)


async def given_entries(client, count: int, stream: str = STREAM) -> list[bytes]:
    return [await client.xadd(stream, {"__data__": f"c{index}"}) for index in range(count)]


async def delivered(client, count: int, group: str = "g") -> list[bytes]:
    reply = await client.xreadgroup(group, "consumer", {STREAM: ">"}, count=count)
    return [entry_id for entry_id, _ in reply[0][1]]


async def ids(client, stream: str = STREAM) -> list[bytes]:
    return [entry_id for entry_id, _ in await client.xrange(stream)]


async def test_acknowledged_commands_go_and_the_oldest_pending_one_bounds_the_trim(redis_client, exact):
    entries = await given_entries(redis_client, 60)
    await redis_client.xgroup_create(STREAM, "g", id="0")
    read = await delivered(redis_client, 50)  # 10 never delivered
    await redis_client.xack(STREAM, "g", *read[:30], *read[31:])  # entry 30 stays pending

    assert await StreamTrimmer(redis_client, retain_ms=0).trim_commands(STREAM) == (30, "g", 30)

    assert await ids(redis_client) == entries[30:]  # from the pending entry on, nothing is touched
    pending = await redis_client.xpending(STREAM, "g")
    assert pending["pending"] == 1 and pending["min"] == entries[30]


async def test_nothing_undelivered_is_trimmed_and_the_slowest_group_decides(redis_client, exact):
    entries = await given_entries(redis_client, 40)
    await redis_client.xgroup_create(STREAM, "g", id="0")
    await redis_client.xgroup_create(STREAM, "slow", id="0")
    await redis_client.xack(STREAM, "g", *await delivered(redis_client, 40))
    trimmer = StreamTrimmer(redis_client, retain_ms=0)

    # "slow" has read nothing yet: it holds every entry back (the engine logs it once the stream is long)
    assert await trimmer.trim_commands(STREAM) == (0, "slow", 40)

    await redis_client.xack(STREAM, "slow", *await delivered(redis_client, 25, group="slow"))
    assert await trimmer.trim_commands(STREAM) == (24, "slow", 16)  # up to the last one delivered, which stays
    assert await ids(redis_client) == entries[24:]


async def test_a_stream_without_a_group_and_recent_commands_are_kept(redis_client, exact):
    await given_entries(redis_client, 30)
    assert await StreamTrimmer(redis_client, retain_ms=0).trim_commands(STREAM) == (0, "", 30)  # no group
    assert await StreamTrimmer(redis_client, retain_ms=0).trim_commands("alm:{s00}:absent") == (0, "", 0)

    await redis_client.xgroup_create(STREAM, "g", id="0")
    await redis_client.xack(STREAM, "g", *await delivered(redis_client, 30))
    # All younger than 1 h: the retention holds them, no group does.
    assert await StreamTrimmer(redis_client, retain_ms=3_600_000).trim_commands(STREAM) == (0, "", 30)
    assert await redis_client.xlen(STREAM) == 30


async def test_a_feed_is_trimmed_up_to_its_checkpoint_or_its_hold_and_not_without_a_checkpoint(redis_client, exact):
    entries = await given_entries(redis_client, 50, FEED)
    trimmer = StreamTrimmer(redis_client, retain_ms=0)
    assert await trimmer.trim_feed(FEED, CHECKPOINT, HOLD, NOTICED) == 0 and not await feed_was_trimmed(redis_client, FEED)

    await redis_client.set(CHECKPOINT, entries[39])
    await redis_client.set(HOLD, entries[20])  # a full rebuild read the head at entry 20
    assert await trimmer.trim_feed(FEED, CHECKPOINT, HOLD, NOTICED) == 20
    await redis_client.delete(HOLD)  # the rebuild committed
    assert await trimmer.trim_feed(FEED, CHECKPOINT, HOLD, NOTICED) == 19
    assert await ids(redis_client, FEED) == entries[39:]  # the checkpoint entry stays: the projector resumes there
    assert await feed_was_trimmed(redis_client, FEED)
    assert not await feed_was_trimmed(redis_client, "alm:{s00}:no-such-feed")


async def test_a_feed_keeps_what_the_notifier_has_not_noticed_while_its_cursor_is_younger_than_the_hold(
        redis_client, exact):
    """Given a feed the projector applied to entry 39 and a notifier stopped at entry 10, when the projector trims,
    then the notifier's unnoticed entries stay while its cursor is younger than the hold, and go once it is older
    (a notifier gone for good holds Redis memory no longer than the hold)."""
    entries = await given_entries(redis_client, 50, FEED)
    await redis_client.set(CHECKPOINT, entries[39])
    await redis_client.set(NOTICED, entries[10])
    held = StreamTrimmer(redis_client, retain_ms=0, notifier_hold_ms=3_600_000)
    assert await held.trim_feed(FEED, CHECKPOINT, HOLD, NOTICED) == 10
    assert await ids(redis_client, FEED) == entries[10:]  # the cursor's entry stays, as the checkpoint's does

    await asyncio.sleep(0.01)
    expired = StreamTrimmer(redis_client, retain_ms=0, notifier_hold_ms=1)  # the cursor is older than the hold now
    assert await expired.trim_feed(FEED, CHECKPOINT, HOLD, NOTICED) == 29
    assert await ids(redis_client, FEED) == entries[39:]


async def test_a_notifier_whose_feed_was_trimmed_past_its_cursor_says_so_and_counts_it(redis_client, exact, tmp_path):
    """Given a notifier that noticed entry 10 and a feed trimmed to entry 39 meanwhile (stopped longer than the hold),
    when it starts reading, then it warns and counts the shard in the webhook stats; a shard trimmed only up to its
    cursor is no gap."""
    from almanac.services import notifier as notifying  # noqa: PLC0415

    entries = [await redis_client.xadd(FEED, {"r": "room", "v": 1, "l": 1}) for _ in range(50)]  # a feed's fields
    other = [await redis_client.xadd(KEYS.feed(1), {"r": "room", "v": 1, "l": 1}) for _ in range(5)]
    await redis_client.set(CHECKPOINT, entries[39])
    await redis_client.set(NOTICED, entries[10])
    await redis_client.set(KEYS.notifier_cursor(1), other[2])
    await redis_client.xtrim(KEYS.feed(1), minid=other[2])  # up to the cursor: nothing unnoticed went
    await StreamTrimmer(redis_client, retain_ms=0).trim_feed(FEED, CHECKPOINT, HOLD, NOTICED)
    settings = suite_settings(redis_url="redis://unused", data_dir=str(tmp_path), shard_count=16)
    notifier = notifying.Notifier(redis_client, RedisEventStore(redis_client, shard_count=16), settings, keys=KEYS)
    try:
        await notifier.notice_once()
    finally:
        await notifier.aclose()
    assert (await notifying.stats(redis_client, KEYS))["missed_feed_gaps"] == 1


async def test_a_full_rebuild_racing_the_live_projector_loses_nothing(redis_client, exact, monkeypatch):
    """While a full rebuild folds the shard's rooms, the rooms move on and the live projector applies and
    trims: the feed must keep what came after the head the rebuild read, where the projector resumes."""
    store = RedisEventStore(redis_client, shard_count=1)
    service = RoomService(store, snapshot_every=10)
    for room in ("a", "b"):
        await open_room(service, room, "counter", players_for("counter"), options=options_for("counter"))
    live = Projector(redis_client, 1, block_ms=20, feed_retain_ms=0)
    await live.drain()
    fold = rebuilding.fold_room

    async def fold_while_the_game_goes_on(store, room, up_to=None):
        update = await fold(store, room, up_to)
        if room == "a":
            await play(service, "a", "counter", 5, players_for("counter"), first_move=100)
            await play(service, "b", "counter", 1, players_for("counter"), first_move=200)
            await live.drain()
            await live.trim_feeds()
        return update

    monkeypatch.setattr(rebuilding, "fold_room", fold_while_the_game_goes_on)
    await rebuild(redis_client, 1)
    monkeypatch.setattr(rebuilding, "fold_room", fold)
    assert not await redis_client.exists(HOLD)  # released by the commit
    await live.drain()  # resumes from the head the rebuild read
    after_the_race = await dump_models(redis_client)
    await rebuild(redis_client, 1)
    assert after_the_race == await dump_models(redis_client)


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
        stream = KEYS.command_stream(3)

        async def commands_trimmed() -> bool:
            info = await redis_client.xinfo_stream(stream)
            return info["entries-added"] == 328 and info["length"] <= NODE

        # The engine's lease loop trims every 5 s: within two rounds the stream is down to its last node.
        await wait_for(commands_trimmed, timeout_s=15, what="the command stream trimmed")
    finally:
        engine.terminate()

    projector = Projector(redis_client, 16, block_ms=20, feed_retain_ms=0)
    await projector.drain()
    live = await dump_models(redis_client)
    assert await projector.trim_feeds() >= 300 - NODE
    feed = await redis_client.xrange(KEYS.feed(3))
    checkpoint = await redis_client.get(KEYS.checkpoint(3))
    assert 1 <= len(feed) <= NODE and feed[-1][0] == checkpoint  # the projector resumes from what is left

    # A shard's read models wiped (checkpoint and all) under a running projector whose feed holds its last
    # entry only (an exact trim): it rebuilds the shard; a replay of that feed would leave the models short.
    await redis_client.xtrim(KEYS.feed(3), minid=checkpoint, approximate=False)
    await redis_client.delete(*[key async for key in redis_client.scan_iter(match="alm:{s03}:rm:*")])
    await projector.drain()
    assert await dump_models(redis_client) == live

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
