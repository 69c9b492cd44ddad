"""The archive tier: given an ended realm room in Redis, when it is archived (to a directory, or to an S3 server
process), then it leaves Redis, reads back byte for byte from the archive, and no crash point loses or splits it."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url, s3_server, whole_record
from forensics_support import RealmTable

from almanac.events.step import decode_record
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.archive import STEPS, ArchiveError, archive_room, decode_object
from almanac.storage.redis_store import RedisEventStore


@pytest.fixture(scope="module")
def s3_url():
    with s3_server() as url:
        yield url


@pytest.fixture(params=["file", "s3"])
def archive_url(request, tmp_path):
    if request.param == "file":
        return file_archive_url(tmp_path / "archive")
    return request.getfixturevalue("s3_url") + f"/{request.node.name[-20:]}"


async def ended_room(store, name: str) -> RealmTable:
    table = RealmTable(store, name)
    await table.create("realm@1")
    await table.play_mining(3)
    refused = await table.send("bob", {"kind": "mine", "ore": "diamonds"})  # a refusal, archived with the room
    assert not refused.accepted
    ended = await table.send("alice", {"kind": "end_room"})
    assert ended.accepted, ended.error
    return table


async def redis_keys_of(client, room: str) -> list[bytes]:
    return sorted(k for k in await client.keys(f"*room:{room}:*") if not k.endswith((b":version", b":archived")))


async def test_an_archived_room_leaves_redis_and_reads_back_byte_for_byte(redis_client, archive_url) -> None:
    store = archiving_store(redis_client, archive_url)
    table = await ended_room(store, "ar-moved")
    before = await whole_record(store, table.room)
    assert before["rejections"] and before["seed"] and before["commit_scheme"] == "almanac-commit-v2"

    result = await archive_room(store, table.room)

    assert result.status == "archived" and result.version == before["version"]
    assert await redis_keys_of(redis_client, table.room) == []  # events, records, snapshots, seed: gone
    fresh = archiving_store(redis_client, archive_url)  # another process: no cache of this one
    assert await whole_record(fresh, table.room) == before  # the chain byte for byte, with every record
    report = await verify_room(fresh, table.room)
    assert report.ok, report.divergence
    # the object is content-addressed, its digest recorded in the pointer
    data = await fresh.archive.get(result.path)
    assert result.path.endswith(hashlib.sha256(data).hexdigest() + ".zst")
    assert decode_object(data).events == [raw for _, raw in before["events"]]


async def test_a_command_for_an_archived_room_is_refused_and_a_resend_is_never_applied_twice(redis_client,
                                                                                               tmp_path) -> None:
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    table = await ended_room(store, "ar-resend")
    (first_version, first_record), *_ = await store.commands(table.room)
    await archive_room(store, table.room)
    version = await store.latest_version(table.room)

    service = RoomService(store)
    late = await service.handle(CommandRecord(command_id="ar-late", room=table.room, player="bob",
                                              server_time_ms=99_000, body={"kind": "mine", "ore": "gold"}))
    assert not late.accepted and late.error["code"] == "room_ended"
    # the first command sent again, long after its dedupe record left Redis with the room
    resent = await service.handle(decode_record(first_record))
    assert resent.accepted and resent.envelopes == [] or resent.duplicate
    assert await store.latest_version(table.room) == version
    assert len(await store.read(table.room)) == version


@pytest.mark.parametrize("path", ["single", "batch"])
async def test_refusals_for_an_archived_room_bring_nothing_of_it_back_into_redis(redis_client, tmp_path,
                                                                                 path) -> None:
    # Given a finished room moved to the archive, with a dedupe window of 300 ms
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    store.dedupe_retain_ms = 300
    table = await ended_room(store, f"ar-refused-{path}")
    await archive_room(store, table.room)
    archived = await store.rejections(table.room)
    service = RoomService(store)
    late = CommandRecord(command_id=f"ar-refused-{path}-late", room=table.room, player="bob", server_time_ms=99_000,
                         body={"kind": "mine", "ore": "gold"})

    async def send() -> object:
        return await service.handle(late) if path == "single" else (await service.handle_many([late]))[0]

    # When commands keep coming for it (one through the single write, one through the engine's ordered batch)
    first = await send()
    again = await send()

    # Then each is refused, the resend with the first answer, and no key of the room is back in Redis: the refusal's
    # outcome alone is kept, for the window
    assert first.error["code"] == "room_ended" and again.error == first.error
    assert await redis_keys_of(redis_client, table.room) == []
    ttl = await redis_client.pttl(store.keys.command_outcome(table.room, late.command_id))
    assert 0 < ttl <= 300
    assert await store.rejections(table.room) == archived  # what verify and bundles read: the archived record
    assert (await verify_room(store, table.room)).ok
    # and after the window the same command is refused the same again (an ended room never accepts)
    await asyncio.sleep(0.4)
    assert await redis_client.exists(store.keys.command_outcome(table.room, late.command_id)) == 0
    after = await send()
    assert not after.accepted and after.error["code"] == "room_ended"
    assert await redis_keys_of(redis_client, table.room) == []


@pytest.mark.parametrize("crash_after", [step for step in STEPS if step != "deleted"])
async def test_a_crash_at_any_step_leaves_the_room_whole_in_one_place_and_a_rerun_finishes(
        redis_client, tmp_path, crash_after) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await ended_room(store, f"ar-crash-{crash_after}")
    before = await whole_record(store, table.room)

    crashed = await archive_room(store, table.room, crash_after=crash_after)

    assert crashed.status == "crashed"
    after_crash = archiving_store(redis_client, url)  # the next process reads the room whole
    assert await whole_record(after_crash, table.room) == before
    pointed = await after_crash.pointer(table.room) is not None
    assert pointed == (crash_after == "pointed")  # before the pointer: Redis; from it on: the archive
    assert (await verify_room(after_crash, table.room)).ok

    finished = await archive_room(after_crash, table.room)
    assert finished.status == ("already" if pointed else "archived")
    assert await redis_keys_of(redis_client, table.room) == []
    assert await whole_record(archiving_store(redis_client, url), table.room) == before


async def test_two_archivers_racing_on_one_room_archive_it_once(redis_url, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(2)]
    try:
        stores = [archiving_store(client, url) for client in clients]
        table = await ended_room(stores[0], "ar-race")
        before = await whole_record(stores[0], table.room)
        results = await asyncio.gather(*(archive_room(store, table.room) for store in stores))
        assert sorted(r.status for r in results) == ["already", "archived"]
        assert await whole_record(archiving_store(clients[0], url), table.room) == before
        assert len(await stores[0].archive.paths()) == 1  # the same bytes: one object
    finally:
        for client in clients:
            await client.aclose()


async def test_a_room_that_moves_while_it_is_archived_is_left_in_redis(redis_client, tmp_path) -> None:
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    table = await ended_room(store, "ar-moving")
    await archive_room(store, table.room, crash_after="checked")  # the object is written and checked ...
    late = await table.send("bob", {"kind": "mine", "ore": "gold"})  # ... and a refusal lands meanwhile
    assert not late.accepted
    result = await archive_room(store, table.room)  # a new object (with the refusal) is written: consistent
    assert result.status == "archived"
    assert len(await store.rejections(table.room)) == 2


async def test_an_object_that_does_not_match_its_pointer_is_refused_not_read(redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await ended_room(store, "ar-tampered")
    result = await archive_room(store, table.room)
    # an operator with write access to the bucket swaps the object
    path = tmp_path / result.path
    path.write_bytes(path.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ArchiveError, match="digest"):
        await archiving_store(redis_client, url).read(table.room)


async def test_a_plain_redis_store_reads_nothing_of_an_archived_room(redis_client, tmp_path) -> None:
    """Why the bootstrap builds the archiving store: the Redis copy is really gone."""
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    table = await ended_room(store, "ar-gone")
    await archive_room(store, table.room)
    assert await RedisEventStore(redis_client).read(table.room) == []


async def test_the_archiver_takes_a_room_only_once_projected_and_its_dedupe_window_is_over(redis_client,
                                                                                          tmp_path) -> None:
    from almanac.projections.projector import Projector  # noqa: PLC0415
    from almanac.services.archiver import Archiver  # noqa: PLC0415

    store = archiving_store(redis_client, file_archive_url(tmp_path))
    table = await ended_room(store, "ar-window")
    archiver = Archiver(store, retain_s=60)
    assert await archiver.due(now_ms=10**13) == []  # not projected yet: not on the list
    await Projector(redis_client, store.shard_count, store=store).drain()
    ended_at = await redis_client.zscore(store.keys.ended_rooms(store.keys.shard(table.room)), table.room)

    assert await archiver.due(now_ms=int(ended_at) + 59_000) == []  # its dedupe records still answer resends
    assert await archiver.due(now_ms=int(ended_at) + 60_000) == [table.room]
    (result,) = await Archiver(store, retain_s=0).run_once()
    assert result.status == "archived" and await archiver.due(now_ms=10**13) == []



async def test_kill_9_of_a_real_archiver_process_at_any_moment_leaves_every_room_whole(redis_client, redis_url,
                                                                                      tmp_path) -> None:
    """`almanac archive --finished` killed with SIGKILL at moments spread over its work, then run again: after
    every kill each room reads back whole (from Redis or from the archive, never half of each)."""
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from almanac.projections.projector import Projector  # noqa: PLC0415

    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    rooms = [f"ar-kill-{index}" for index in range(24)]
    for room in rooms:
        await ended_room(store, room)
    await Projector(redis_client, store.shard_count, store=store).drain()
    before = {room: await whole_record(store, room) for room in rooms}
    env = {**os.environ, "REDIS_URL": redis_url, "ALMANAC_ARCHIVE_URL": url, "ALMANAC_LOG_LEVEL": "warning"}
    command = [sys.executable, "-c", "import sys; sys.argv[0] = 'almanac'; from almanac.services.cli import main; "
               "main()", "archive", "--finished"]

    async def archived() -> int:
        return sum([await redis_client.hexists(store.keys.pointer_bucket(room), room) for room in rooms])

    kills = 0
    while kills < 6 and await archived() < len(rooms):
        # kill it the moment it has moved one more room: mid-pass, with other moves in flight (8 at once)
        seen = await archived()
        archiver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while archiver.poll() is None and await archived() == seen:
            await asyncio.sleep(0.002)
        archiver.send_signal(signal.SIGKILL)
        archiver.wait()
        kills += 1
        reader = archiving_store(redis_client, url)  # a new process's view
        for room in rooms:
            assert await whole_record(reader, room) == before[room], (kills, room)
    assert kills >= 2

    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    reader = archiving_store(redis_client, url)
    for room in rooms:
        assert await reader.pointer(room) is not None and await redis_keys_of(redis_client, room) == []
        assert await whole_record(reader, room) == before[room]
        assert (await verify_room(reader, room)).ok
