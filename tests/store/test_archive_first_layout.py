"""Rooms archived before the pointer buckets: until an archiver moves their pointers, every reader still finds them.

Given a room archived and its pointer left where the first layout kept it (one hash per shard), when a gateway
creates a room under its id before any archiver ran, then the create is refused, the room reads and is listed as
archived, and the archiver's move (following HSCAN's cursor to its end) leaves every old pointer in its bucket.
"""

from __future__ import annotations

from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.services.archiver import Archiver
from almanac.storage.archive import archive_room
from almanac.storage.archive_index import migrate_pointers


async def test_a_room_archived_under_the_first_layout_is_a_room_before_the_archivers_first_pass(
        redis_client, tmp_path) -> None:
    # Given realm room win-0, ended and archived, its pointer where the version before the buckets left it
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    table = RealmTable(store, "win-0")
    await table.create("realm@1")
    assert (await table.send("alice", {"kind": "end_room"})).accepted
    await archive_room(store, "win-0")
    bucket, old = keys.pointer_bucket("win-0"), keys.first_layout_pointers(keys.shard("win-0"))
    await redis_client.hset(old, "win-0", await redis_client.hget(bucket, "win-0"))
    await redis_client.hdel(bucket, "win-0")
    # When a newly deployed gateway creates a room under its id, before any archiver ran
    again = RealmTable(archiving_store(redis_client, file_archive_url(tmp_path)), "win-0")
    again.sent = 100
    created = await again.send("mallory", {"kind": "create_room", "ruleset": "realm@1",
                                           "options": {"players": ["mallory", "eve"], "villages": 1}})
    # Then it is refused: the id is the archived room's, which every reader still finds and lists
    assert not created.accepted, created
    reader = archiving_store(redis_client, file_archive_url(tmp_path))
    assert await reader.pointer("win-0") is not None and await reader.latest_version("win-0") > 1
    assert "win-0" in await reader.rooms()
    # and the archiver's first pass moves the pointer into its bucket, the room unchanged
    await Archiver(archiving_store(redis_client, file_archive_url(tmp_path)), retain_s=0).run_once()
    assert await redis_client.hget(bucket, "win-0") is not None and not await redis_client.exists(old)
    assert await archiving_store(redis_client, file_archive_url(tmp_path)).latest_version("win-0") == \
        await reader.latest_version("win-0")


async def test_moving_many_first_layout_pointers_follows_the_scan_to_its_end(redis_client, tmp_path) -> None:
    # Given 20,000 pointers of the first layout on one shard (a page of HSCAN may come back empty before its end)
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    rooms = [f"old-{n}" for n in range(25_000 * keys.shard_count) if keys.shard(f"old-{n}") == 0][:20_000]
    old = keys.first_layout_pointers(0)
    for start in range(0, len(rooms), 2_000):
        await redis_client.hset(old, mapping={room: b"p" for room in rooms[start:start + 2_000]})
    # When they are moved
    moved = await migrate_pointers(redis_client, keys)
    # Then every one is in its bucket and none is left behind
    assert len(rooms) == 20_000 and moved == len(rooms) and not await redis_client.exists(old)
