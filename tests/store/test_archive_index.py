"""The archive's index of finished rooms: given finished realm rooms (one unranked) and a live one, when the archiver
moves the finished ones out, then the listing and the leaderboard answer exactly as before while Redis keeps only
the live rooms' listing rows and projected versions and, per player, the live entries plus one best archived entry."""

from __future__ import annotations

from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.projections.read import ReadModels
from almanac.projections.rebuild import rebuild
from almanac.services.archiver import Archiver
from almanac.services.forensics.verify import verify_room
from almanac.storage.archive import archive_room
from almanac.storage.archive_index import old_pointer_hash


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
        bucket, old = keys.pointer_bucket(name), old_pointer_hash(keys, keys.shard(name))
        await redis_client.hset(old, name, await redis_client.hget(bucket, name))
        await redis_client.hdel(bucket, name)
    fresh = archiving_store(redis_client, file_archive_url(tmp_path))
    assert await fresh.pointer(names[0]) is None  # the new layout alone does not see them

    # When an archiver makes its first pass
    await Archiver(fresh, retain_s=0).run_once()

    # Then every pointer is in its bucket, the old hashes are gone, and the rooms read whole from the archive
    reader = archiving_store(redis_client, file_archive_url(tmp_path))
    for name in names:
        assert await reader.pointer(name) is not None
        assert await redis_client.exists(old_pointer_hash(keys, keys.shard(name))) == 0
        assert (await verify_room(reader, name)).ok
