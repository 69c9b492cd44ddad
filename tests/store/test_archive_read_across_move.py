"""A reader paging a long room while the archiver moves it: given a room of more than a page (1,000 events) in Redis,
when a reader is paused between two of its pages, the archiver moves the room (its delete step empties Redis) and
the reader resumes, then the reader gets the whole room, its first pages from Redis and the rest from the archive,
and the forensic check over it passes: never a room cut at a page's end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from archive_support import archiving_store, file_archive_url

from almanac.events import codec
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.archive import ArchivingStore, archive_room
from almanac.storage.loader import RoomLoader


async def long_room(store: ArchivingStore, room: str, adds: int, snapshot_every: int = 100) -> None:
    """A counter room: created, joined, ``adds`` adds, ended (``adds`` + 3 versions, each its own command)."""
    service = RoomService(store, snapshot_every=snapshot_every)
    bodies = [{"kind": "create_room", "ruleset": "counter"}, {"kind": "join_room"}]
    bodies += [{"kind": "add", "amount": 1}] * adds + [{"kind": "end_room"}]
    for index, body in enumerate(bodies):
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{index}", room=room, player="ann",
                                                     server_time_ms=1_000 * (index + 1), body=body))
        assert outcome.accepted, outcome.error


class PausedBetweenPages:
    """The reader's Redis pages (``_pages``), paused after its ``after``-th page until the test lets it go on:
    the interleaving is the test's, not the scheduler's."""

    def __init__(self, reader: ArchivingStore, after: int = 1) -> None:
        self.paused, self.resume, self.pages_read = asyncio.Event(), asyncio.Event(), 0
        original = reader._pages

        async def pages(*args: Any, **kwargs: Any):
            async for page in original(*args, **kwargs):
                self.pages_read += 1
                yield page
                if self.pages_read == after:
                    self.paused.set()
                    await self.resume.wait()
        reader._pages = pages  # type: ignore[method-assign]

    async def across_the_move(self, read: Awaitable[Any], move: Callable[[], Awaitable[None]]) -> Any:
        """Start ``read``, wait until it is paused between two pages, run ``move``, let the read go on."""
        task = asyncio.ensure_future(read)
        await asyncio.wait_for(self.paused.wait(), timeout=30)
        await move()
        self.resume.set()
        return await task


async def test_a_long_room_read_while_the_archiver_moves_it_comes_back_whole(redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    for room in ("across-raw", "across-read"):
        await long_room(store, room, 1_200)
    before = {room: await store.read_raw(room) for room in ("across-raw", "across-read")}
    assert len(before["across-raw"]) == 1_203  # two pages of Redis' 1,000

    def move(room: str) -> Callable[[], Awaitable[None]]:
        async def archived() -> None:
            result = await archive_room(archiving_store(redis_client, url), room)  # another process' archiver
            assert result.status == "archived"
            assert not await redis_client.exists(store.keys.events(room))  # its delete step has run
        return archived

    # read_raw: the first page from Redis, then the room leaves Redis, then the rest
    reader = archiving_store(redis_client, url)
    seen = await PausedBetweenPages(reader).across_the_move(reader.read_raw("across-raw"), move("across-raw"))
    assert seen == before["across-raw"]
    # the decoded read (read, iterate) the same
    reader = archiving_store(redis_client, url)
    envelopes = await PausedBetweenPages(reader).across_the_move(reader.read("across-read"), move("across-read"))
    assert [(e.version, codec.encode_envelope(e)) for e in envelopes] == before["across-read"]


async def test_verify_of_a_long_room_moved_between_its_pages_finds_it_whole(redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    await long_room(archiving_store(redis_client, url), "across-verify", 1_200)
    reader = archiving_store(redis_client, url)

    async def move() -> None:
        assert (await archive_room(archiving_store(redis_client, url), "across-verify")).status == "archived"

    report = await PausedBetweenPages(reader).across_the_move(verify_room(reader, "across-verify"), move)
    assert report.ok, report.divergence  # before: "coverage, version 1203" on a room whole in the archive


async def test_the_loaders_tail_read_across_the_move_folds_the_whole_room(redis_client, tmp_path) -> None:
    """No snapshot: the load script's first page (1..1,000), then the tail read page by page (1,001..2,000 from
    Redis), the move, and the rest (2,001..2,103) from the archive."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    await long_room(store, "across-load", 2_100, snapshot_every=0)
    whole, whole_hash = await RoomLoader(archiving_store(redis_client, url), 0).load("across-load")
    assert whole is not None and whole.version == 2_103
    reader = archiving_store(redis_client, url)

    async def move() -> None:
        assert (await archive_room(archiving_store(redis_client, url), "across-load")).status == "archived"

    state, last_hash = await PausedBetweenPages(reader).across_the_move(RoomLoader(reader, 0).load("across-load"),
                                                                         move)
    assert state == whole and last_hash == whole_hash


async def test_a_reader_paging_by_hand_goes_on_in_the_archive(redis_client, tmp_path) -> None:
    """``page`` (the live feeds' and the notifier's read) is one XRANGE: a page after the move is the archive's."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    await long_room(store, "across-page", 1_200)
    reader = archiving_store(redis_client, url)
    first = await reader.page("across-page", 1)
    assert (await archive_room(archiving_store(redis_client, url), "across-page")).status == "archived"
    rest = await reader.page("across-page", first[-1].version + 1)
    assert [e.version for e in first + rest] == list(range(1, 1_204))
