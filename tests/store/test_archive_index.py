"""The archive's index of finished rooms: given finished realm rooms (one unranked) and a live one, when the archiver
moves the finished ones out, then the listing and the leaderboard answer exactly as before while Redis keeps only
the live rooms' listing rows and projected versions and, per player, the live entries plus one best archived entry."""

from __future__ import annotations

import msgspec
import pytest
import zstandard
from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.projections.read_model_queries import BadCursor, ReadModels
from almanac.projections.rebuild import rebuild
from almanac.services.archiver import Archiver
from almanac.services.forensics.verify import verify_room
from almanac.storage import archive_index
from almanac.storage.archive import archive_room


async def finished_room(store, name: str, rounds: int) -> str:
    table = RealmTable(store, name)
    await table.create("realm@1")
    await table.play_mining(rounds)
    assert (await table.send("alice", {"kind": "end_room"})).accepted
    return name


async def answers(models: ReadModels) -> tuple:
    return (await models.rooms(), await models.rooms("realm"), await models.leaderboard("realm", 20),
            await models.leaderboard("realm", 1))


async def test_listings_and_leaderboards_answer_the_same_after_the_finished_rooms_are_compacted(
        redis_client, tmp_path) -> None:
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    # Every room on one shard, so that one listing hash and one leaderboard hold them all.
    names = [f"ix-{n}" for n in range(400)]
    shard = keys.shard(names[0])
    finished = [name for name in names if keys.shard(name) == shard][:6]
    for rounds, name in enumerate(finished[:5], start=1):
        await finished_room(store, name, rounds)
    unranked = await finished_room(store, finished[5], 6)  # as `almanac import` marks a copy: it never ranks
    await redis_client.sadd(keys.unranked(shard), unranked)
    live = RealmTable(store, next(n for n in names if keys.shard(n) == shard and n not in finished))
    await live.create("realm@1")
    await live.play_mining(2)
    await Projector(redis_client, store.shard_count, store=store).drain()
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models)
    assert len(before[0]) == 7 and before[2]
    projected = {name: await models.projected_version(name) for name in finished}

    results = await Archiver(store, retain_s=0).run_once()

    assert sorted(r.room for r in results if r.status == "archived") == sorted(finished)
    assert await answers(models) == before
    assert await redis_client.hkeys(keys.listings(shard)) == [live.room.encode()]
    assert await redis_client.hkeys(keys.versions(shard)) == [live.room.encode()]
    # read-your-writes waits still see each archived room projected to its end (its pointer's version)
    assert {name: await models.projected_version(name) for name in finished} == projected
    board = await redis_client.zrange(keys.leaderboard(shard, "realm"), 0, -1)
    # alice and bob: their live room's entry and their best finished one; the unranked room's entries are gone
    assert len(board) <= 4 and not any(unranked.encode() in member for member in board)

    # A second pass over the same rooms (a rebuild puts them back on the archiver's list) changes nothing.
    await Archiver(store, retain_s=0).run_once()
    assert await answers(models) == before

    # Rebuilding the leaderboards folds every room again, archived ones from the archive: the same answers,
    # and the archiver's next pass compacts them again.
    await rebuild(redis_client, store.shard_count, ["leaderboards"], store=store)
    assert await answers(models) == before
    await redis_client.zadd(keys.ended_rooms(shard), {name: 0 for name in finished})
    await Archiver(store, retain_s=0).run_once()
    assert await answers(models) == before
    assert len(await redis_client.zrange(keys.leaderboard(shard, "realm"), 0, -1)) <= 4


async def test_a_finished_archived_room_leaves_its_room_set_and_its_pointer_sits_in_a_compact_bucket(
        redis_client, tmp_path) -> None:
    # Given finished rooms and a live one on one shard, all projected
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    names = [f"rs-{n}" for n in range(400)]
    shard = keys.shard(names[0])
    finished = [name for name in names if keys.shard(name) == shard][:4]
    for rounds, name in enumerate(finished, start=1):
        await finished_room(store, name, rounds)
    live = RealmTable(store, next(n for n in names if keys.shard(n) == shard and n not in finished))
    await live.create("realm@1")
    await Projector(redis_client, store.shard_count, store=store).drain()
    models = ReadModels(redis_client, store.shard_count, store=store)
    before, every_room = await answers(models), await store.rooms()

    # When the archiver moves the finished ones out
    await Archiver(store, retain_s=0).run_once()

    # Then the shard's room set keeps the live room only; each pointer is a field of a small listpack-encoded hash
    assert await redis_client.smembers(keys.rooms(shard)) == {live.room.encode()}
    for name in finished:
        bucket = keys.pointer_bucket(name)
        assert bucket.startswith(f"{keys.prefix}:{{s{shard:02d}}}:") and await redis_client.hexists(bucket, name)
        assert await redis_client.object("encoding", bucket) in (b"listpack", b"ziplist")
    # and every room is still a room: the store lists them (verify --all), and a full rebuild folds them again
    assert await store.rooms() == every_room == sorted([*finished, live.room])
    assert await rebuild(redis_client, store.shard_count, store=store) == len(every_room)
    assert await answers(models) == before


async def test_pointers_of_the_first_layout_move_into_their_buckets_on_the_archivers_first_pass(
        redis_client, tmp_path) -> None:
    # Given rooms archived by a version that kept pointers in one hash per shard
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    names = [await finished_room(store, f"mp-{n}", 1) for n in range(3)]
    for name in names:
        await archive_room(store, name)
        bucket, old = keys.pointer_bucket(name), keys.first_layout_pointers(keys.shard(name))
        await redis_client.hset(old, name, await redis_client.hget(bucket, name))
        await redis_client.hdel(bucket, name)
    fresh = archiving_store(redis_client, file_archive_url(tmp_path))
    assert await redis_client.hget(keys.pointer_bucket(names[0]), names[0]) is None  # not in the buckets yet
    assert await fresh.pointer(names[0]) is not None  # and read all the same (tests/store/test_archive_first_layout)

    # When an archiver makes its first pass
    await Archiver(fresh, retain_s=0).run_once()

    # Then every pointer is in its bucket, the old hashes are gone, and the rooms read whole from the archive
    reader = archiving_store(redis_client, file_archive_url(tmp_path))
    for name in names:
        assert await reader.pointer(name) is not None
        assert await redis_client.exists(keys.first_layout_pointers(keys.shard(name))) == 0
        assert (await verify_room(reader, name)).ok


async def test_pages_of_the_listing_show_each_room_once_and_decode_each_archived_block_once(
        redis_client, tmp_path) -> None:
    # Given finished rooms the archiver compacted into a block and two live rooms, all projected
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    finished = [await finished_room(store, f"pg-{n}", 1) for n in range(5)]
    for name in ("pg-live-a", "pg-live-b"):
        await RealmTable(store, name).create("realm@1")
    await Projector(redis_client, store.shard_count, store=store).drain()
    await Archiver(store, retain_s=0).run_once()
    models = ReadModels(redis_client, store.shard_count, store=store)
    every = sorted(row["room"] for row in await models.rooms())
    assert every == sorted([*finished, "pg-live-a", "pg-live-b"])
    archive_index.CACHE.clear()

    async def paged(limit: int) -> list[str]:
        seen, cursor = [], None
        while True:
            rows, cursor = await models.rooms_page(None, limit, cursor)
            assert len(rows) <= limit
            seen += [row["room"] for row in rows]
            if cursor is None:
                return seen

    # When a client pages the listing, a room or two at a time
    first = await paged(2)
    decoded = archive_index.CACHE.decoded
    # Then it sees every room once, the live ones first, newest first
    assert sorted(first) == every and len(first) == len(set(first)) and first[:2] == ["pg-live-b", "pg-live-a"]
    assert 1 <= decoded <= store.shard_count
    # and paging again (the console's poll) decodes no block: they never change, the process keeps them decoded
    assert await paged(1) == first and await paged(50) == first
    assert archive_index.CACHE.decoded == decoded and archive_index.CACHE.bytes > 0
    # A rule-set's filter pages the same rows; a cursor it did not hand out is refused
    assert sorted(row["room"] for row in (await models.rooms_page("realm", 50))[0]) == every
    for forged in ("e30", "WyJhIiw5OTksIngiLCJ5Il0", "!!", ""):
        with pytest.raises(BadCursor):
            await models.rooms_page(None, 2, forged)


def test_the_block_cache_keeps_its_bound_dropping_the_least_recently_used_block() -> None:
    # Given a cache that holds about two small blocks
    blocks = {name: zstandard.ZstdCompressor().compress(msgspec.msgpack.encode({f"{name}-{n}": b"x" * 40
                                                                               for n in range(3)}))
              for name in ("b1", "b2", "b3")}
    cache = archive_index.BlockCache(max_bytes=2 * 3 * (5 + 40 + archive_index._ENTRY_COST))
    cache.decode("b1", blocks["b1"])
    cache.decode("b2", blocks["b2"])
    assert cache.get("b1") is not None  # b1 used last: b2 is the least recently used
    # When a third is decoded
    cache.decode("b3", blocks["b3"])
    # Then the cache stays within its bound, b2 left
    assert cache.bytes <= cache.max_bytes and cache.get("b2") is None and cache.get("b1") and cache.get("b3")
