"""The decoded archived rooms a process keeps: given more archived rooms than the cache may hold (by count or by
bytes), when they are all read, then each reads back whole and the cache stays within its bounds."""

from __future__ import annotations

from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.storage.archive import ArchivedRooms, archive_room


async def test_the_decoded_rooms_cache_stays_within_its_count_and_its_bytes(redis_client, tmp_path) -> None:
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    rooms = []
    for number in range(5):
        table = RealmTable(store, f"cache-{number}")
        await table.create("realm@1")
        await table.play_mining(2)
        assert (await table.send("alice", {"kind": "end_room"})).accepted
        assert (await archive_room(store, table.room)).status == "archived"
        rooms.append(table.room)
    pointers = [await store.pointer(room) for room in rooms]
    one = await ArchivedRooms(store.archive).get(pointers[0])
    weight = sum(map(len, one.events))

    by_count = ArchivedRooms(store.archive, size=2)
    by_bytes = ArchivedRooms(store.archive, max_bytes=2 * weight)
    for pointer in pointers * 2:
        for cache in (by_count, by_bytes):
            found = await cache.get(pointer)
            assert found.room == pointer.room and len(found.events) == pointer.version

    assert len(by_count._cache) == 2
    assert by_bytes.bytes <= 2 * weight and 1 <= len(by_bytes._cache) < 5
