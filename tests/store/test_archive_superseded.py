"""Objects left behind by a trip back: given an idle room archived, brought back by a command and played on, when
it is archived again its old object is removed (not before: until then it is the only copy outside Redis), even
when the move is cut short after its commit point, and an engine still holding the old pointer is not stranded."""

from __future__ import annotations

import pytest
from archive_support import archiving_store, file_archive_url, whole_record
from test_archive_idle import playing_room

from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.archive import ArchiveStore, ArchivingStore, archive_room, remove_superseded
from almanac.storage.restore import restore_room


async def objects(store, room: str) -> set[str]:
    return {path for path in await store.archive.paths() if path.startswith("rooms/") and room in path}


async def test_the_old_object_of_a_room_brought_back_is_removed_once_the_room_is_archived_again(redis_client,
                                                                                               tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "superseded")
    room, keys = table.room, store.keys
    first = await archive_room(store, room, reason="idle")
    assert first.status == "archived" and await objects(store, room) == {first.path}

    # Given a command that brings the room back: the old object stays while the room lives in Redis
    mined = await table.mine("alice")
    assert mined.accepted and await store.pointer(room) is None
    assert await objects(store, room) == {first.path}
    assert await redis_client.hexists(keys.superseded(keys.shard(room)), room)
    played = await whole_record(store, room)

    # When the next move stops dead right after its commit point (as a kill -9 there): the room reads whole from
    # its new object, and the old one is still there (nothing removed it yet)
    assert (await archive_room(store, room, reason="idle", crash_after="pointed")).status == "crashed"
    second = await store.pointer(room)
    assert second is not None and second.path != first.path
    assert await objects(store, room) == {first.path, second.path}
    assert await whole_record(archiving_store(redis_client, url), room) == played

    # Then the next pass finishes the move and removes the old object, and forgets it
    assert (await archive_room(archiving_store(redis_client, url), room, reason="idle")).status == "already"
    assert await objects(store, room) == {second.path}
    assert not await redis_client.hexists(keys.superseded(keys.shard(room)), room)
    reader = archiving_store(redis_client, url)
    assert await whole_record(reader, room) == played
    assert (await verify_room(reader, room)).ok


@pytest.mark.parametrize("kind", ["directory", "object store"])
async def test_bringing_back_from_a_removed_objects_pointer_answers_gone_and_the_room_loads_from_where_it_is(
        redis_client, tmp_path, kind: str) -> None:
    # (an object store answers a missing object in its own words, not a directory's: memory:// as S3 or GCS do;
    # one ArchiveStore shared by every "process" below, as one bucket is)
    shared = ArchiveStore(file_archive_url(tmp_path) if kind == "directory" else "memory:///")

    def process() -> ArchivingStore:  # one engine's or archiver's store, over the shared bucket
        return ArchivingStore(redis_client, shared, 16)

    store = process()
    table = await playing_room(store, "superseded-stale")
    room = table.room
    first = await archive_room(store, room, reason="idle")
    old_pointer = await process().pointer(room)  # a slow engine read this pointer
    assert old_pointer is not None and old_pointer.path == first.path

    # Given another engine brought the room back, it was played, and archived again (the first object removed)
    assert (await table.mine("alice")).accepted
    version = await store.latest_version(room)
    second = await archive_room(store, room, reason="idle")
    assert second.status == "archived" and await objects(store, room) == {second.path}

    # When the slow engine brings the room back from the pointer it read: "gone" (not an error), nothing changed
    slow = process()
    assert await restore_room(slow, old_pointer) == "gone"
    assert (await slow.pointer(room)) == await store.pointer(room)
    # and a command through it is decided once, on the room's whole history, right after its head
    outcome = await RoomService(slow).handle(CommandRecord(command_id=f"{room}-slow", room=room, player="bob",
                                                           server_time_ms=95_000, body={"kind": "end_turn"}))
    assert outcome.accepted, outcome.error
    assert outcome.first_version == version + 1
    assert (await verify_room(process(), room)).ok


async def test_a_mover_stalled_past_the_rooms_next_trip_never_removes_the_object_the_newer_pointer_names(
        redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "superseded-stalled")
    room, keys = table.room, store.keys
    # Given a mover that committed the room's first pointer and stalled before removing what it left behind
    await archive_room(store, room, reason="idle")
    stalled = await store.pointer(room)
    assert stalled is not None
    # and meanwhile the room came back, was played, and was moved again: its object is the newer pointer's
    assert (await table.mine("alice")).accepted
    newer = await archive_room(store, room, reason="idle")
    current = await archiving_store(redis_client, url).pointer(room)
    assert newer.status == "archived" and current is not None and current.digest != stalled.digest
    # and the room came back once more, unplayed, so the newer object is noted as left behind (the window before
    # the room's next move, unchanged, writes that same object again and forgets the note)
    await redis_client.hset(keys.superseded(keys.shard(room)), room, current.digest)
    # When the stalled mover resumes its removal with the pointer it holds
    assert await remove_superseded(store, stalled) == 0
    # Then the object the room's pointer names is still there, and the room reads whole from it
    assert await objects(store, room) == {current.path}
    assert (await verify_room(archiving_store(redis_client, url), room)).ok
