"""Redis itself killed (SIGKILL) in the middle of archiving: given ended rooms being moved, when the redis-server
dies at a point of one room's move (the others in flight) and restarts from its AOF, then every room reads back whole
from exactly one place, and the archiver's next pass completes every move."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url, whole_record
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.services.archiver import Archiver
from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.forensics.verify import verify_room
from almanac.storage.archive import archive_room, decode_object

ROOMS = 10



async def ended_room(store, name: str) -> None:
    table = RealmTable(store, name)
    await table.create("realm@1")
    await table.play_mining(2)
    assert not (await table.send("bob", {"kind": "mine", "ore": "diamonds"})).accepted
    assert (await table.send("alice", {"kind": "end_room"})).accepted


async def where_it_lives(client, store, room: str) -> str:
    """"redis" (no pointer: Redis holds the whole room) or "archive" (the pointer names an object that holds it;
    Redis may still hold the checked copy the next pass deletes)."""
    pointer = await store.pointer(room)
    if pointer is None:
        assert await client.xlen(store.keys.events(room)) > 0
        return "redis"
    assert decode_object(await store.archive.get(pointer.path)).version == pointer.version
    return "archive"


def kill_redis(server: EmbeddedRedis) -> None:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()


def kill_at(store, server: EmbeddedRedis, room: str, point: str) -> None:
    """Make ``room``'s move SIGKILL the redis-server at ``point``: "written" (the object is in the store, nothing
    recorded), "read back" (the object read back, before it is checked and the pointer recorded), "pointed" (the
    commit point recorded, the room's keys not yet deleted). The other moves of the pass are in flight."""
    archive, objects = store.archive, store.objects
    put_new, get, get_object = archive.put_new, archive.get, objects.get

    async def put_then_kill(path: str, data: bytes) -> bool:
        written = await put_new(path, data)
        if point == "written" and f"/{room}/" in path:
            kill_redis(server)
        return written

    async def get_then_kill(path: str) -> bytes:
        data = await get(path)
        if point == "read back" and f"/{room}/" in path:
            kill_redis(server)
        return data

    async def object_then_kill(pointer):
        found = await get_object(pointer)
        if point == "pointed" and pointer.room == room:
            kill_redis(server)
        return found

    archive.put_new, archive.get, objects.get = put_then_kill, get_then_kill, object_then_kill


@pytest.mark.parametrize("point", ["written", "read back", "pointed"])
async def test_kill_9_of_redis_mid_move_leaves_each_room_in_one_place_and_the_next_pass_finishes(
        tmp_path: Path, point: str) -> None:
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    try:
        client = aioredis.Redis.from_url(server.url)
        await client.config_set("appendfsync", "always")  # what Redis acknowledged is on disk
        url = file_archive_url(tmp_path / "archive")
        store = archiving_store(client, url)
        rooms = [f"kr-{index}" for index in range(ROOMS)]
        for room in rooms:
            await ended_room(store, room)
        await Projector(client, store.shard_count, store=store).drain()
        before = {room: await whole_record(store, room) for room in rooms}
        victim = rooms[ROOMS // 2]

        # When the moves run (all at once, as the archiver's pass runs them) and Redis dies at the victim's point
        mover = archiving_store(client, url)
        kill_at(mover, server, victim, point)
        results = await asyncio.gather(*(archive_room(mover, room) for room in rooms), return_exceptions=True)
        assert server.process is None or server.process.poll() is not None, "the kill point was never reached"
        assert any(isinstance(result, Exception) for result in results)
        await client.aclose()

        # Then, Redis back from its AOF on the same port, every room reads whole from one place
        server = EmbeddedRedis(tmp_path / "redis", port=server.port, persist=True).start()
        client = aioredis.Redis.from_url(server.url)
        reader = archiving_store(client, url)  # a new process: no cache
        for room in rooms:
            assert await whole_record(reader, room) == before[room], room
        place = await where_it_lives(client, reader, victim)
        assert place == ("archive" if point == "pointed" else "redis")
        if point == "pointed":  # the checked copy is still in Redis: readers read the archive, the next pass deletes
            assert await client.exists(store.keys.events(victim))

        # When the archiver's next pass runs, every move completes
        await Archiver(archiving_store(client, url), retain_s=0, batch=1000).run_once()
        reader = archiving_store(client, url)
        for room in rooms:
            assert await reader.pointer(room) is not None
            assert await client.keys(f"*room:{room}:*") == []
            assert await whole_record(reader, room) == before[room]
            assert (await verify_room(reader, room)).ok
        assert len({path.name for path in (tmp_path / "archive").rglob("*.zst")}) == ROOMS  # no room written twice
        await client.aclose()
    finally:
        server.stop()


async def test_kill_9_of_redis_while_a_room_brought_back_has_its_old_object_removed(tmp_path: Path) -> None:
    """Rooms archived idle, brought back by a command and ended; Redis dies right after one room's old object is
    removed from the store (the hash still noting it): every room reads whole, and the next pass forgets it."""
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    try:
        client = aioredis.Redis.from_url(server.url)
        await client.config_set("appendfsync", "always")
        url = file_archive_url(tmp_path / "archive")
        store = archiving_store(client, url)
        rooms = [f"kb-{index}" for index in range(4)]
        for room in rooms:
            table = RealmTable(store, room)
            await table.create("realm@1")
            assert (await archive_room(store, room, reason="idle")).status == "archived"
            await table.play_mining(1)  # brings it back
            assert (await table.send("alice", {"kind": "end_room"})).accepted
        await Projector(client, store.shard_count, store=store).drain()
        before = {room: await whole_record(store, room) for room in rooms}
        victim = rooms[2]

        # When the moves run and Redis dies right after the victim's old object left the store
        mover = archiving_store(client, url)
        delete = mover.archive.delete

        async def delete_then_kill(path: str) -> None:
            await delete(path)
            if f"/{victim}/" in path:
                kill_redis(server)

        mover.archive.delete = delete_then_kill
        await asyncio.gather(*(archive_room(mover, room) for room in rooms), return_exceptions=True)
        assert server.process is None or server.process.poll() is not None, "the kill point was never reached"
        await client.aclose()

        # Then, Redis back from its AOF, every room reads whole, and the next pass completes every move
        server = EmbeddedRedis(tmp_path / "redis", port=server.port, persist=True).start()
        client = aioredis.Redis.from_url(server.url)
        for room in rooms:
            assert await whole_record(archiving_store(client, url), room) == before[room], room
        await Archiver(archiving_store(client, url), retain_s=0, batch=1000).run_once()
        reader = archiving_store(client, url)
        for room in rooms:
            assert await reader.pointer(room) is not None and await whole_record(reader, room) == before[room]
            assert (await verify_room(reader, room)).ok
        assert [await client.hexists(store.keys.superseded(store.keys.shard(r)), r) for r in rooms] == [0] * len(rooms)
        assert len(list((tmp_path / "archive").rglob("*.zst"))) == len(rooms)  # one object per room left
        await client.aclose()
    finally:
        server.stop()


async def test_the_archiver_rides_out_a_redis_killed_and_restarted_and_archives_what_ends_after(tmp_path: Path) -> None:
    """Given the archiver's loop running its passes, when its Redis is killed (-9) and started again from its AOF a
    second later (as a Cluster node failing over looks to it: a connection closed), then the loop is still running
    (it used to exit with the ConnectionError, and the archiver process with it: seen on every primary kill of
    `almanac bench failover`), and a room that ends after Redis is back is archived by its next passes."""
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    stop = asyncio.Event()
    try:
        client = aioredis.Redis.from_url(server.url)
        await client.config_set("appendfsync", "always")
        url = file_archive_url(tmp_path / "archive")
        store = archiving_store(client, url)
        loop = asyncio.create_task(Archiver(archiving_store(client, url), retain_s=0, batch=1000).run(stop, 0.05))
        await asyncio.sleep(0.3)  # a few passes with nothing to do

        # When Redis dies and comes back on the same port a second later
        kill_redis(server)
        await asyncio.sleep(1.0)
        assert not loop.done(), loop.exception()
        server = EmbeddedRedis(tmp_path / "redis", port=server.port, persist=True).start()

        # Then the loop still runs, and archives a room that ends now
        await ended_room(store, "after")
        await Projector(client, store.shard_count, store=store).drain()
        for _ in range(200):
            if loop.done() or await store.pointer("after") is not None:
                break
            await asyncio.sleep(0.05)
        assert not loop.done(), loop.exception()
        assert await store.pointer("after") is not None
        stop.set()
        await loop
        await client.aclose()
    finally:
        stop.set()
        server.stop()
