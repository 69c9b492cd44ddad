"""Idle rooms: archived after ALMANAC_ARCHIVE_IDLE_AFTER without an event, back only for a command the rules accept."""

# Given a realm room still being played with no event for the window, the archiver moves it to the archive; a
# command the rules refuse is recorded against the archived state (the room stays there, nothing of it is written
# into Redis first); one they accept (from any engine, racing or not, even mid-move) brings it back into Redis
# exactly once and is decided again there; nothing acknowledged is lost, and its clock deadline survives the trip.

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from archive_support import archiving_store, file_archive_url, whole_record
from forensics_support import RealmTable

from almanac.events import codec
from almanac.events.step import decode_record
from almanac.projections.projector import Projector
from almanac.projections.read_model_queries import ReadModels
from almanac.services.archiver import Archiver
from almanac.services.clock import Clock, deadline_command_id
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.archive import STEPS, archive_room
from almanac.storage.base import RoomArchived
from almanac.storage.restore import restore_room

HOUR_MS = 3_600_000


async def playing_room(store, name: str, refused: bool = True) -> RealmTable:
    """A realm room of alice and bob, some mining played, one refusal (none without ``refused``); not ended. Its
    commands carry server times of a few seconds after the epoch: long idle for any clock of today."""
    table = RealmTable(store, name)
    await table.create("realm@1")
    await table.play_mining(2)
    if refused:
        refusal = await table.send("bob", {"kind": "mine", "ore": "diamonds"})
        assert not refusal.accepted
    return table



async def room_keys(client, room: str) -> list[bytes]:
    return sorted(k for k in await client.keys(f"*room:{room}:*") if not k.endswith(b":archived"))


async def test_an_idle_room_is_archived_and_its_next_command_brings_it_back_first(redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "idle-back")
    before = await whole_record(store, table.room)
    await Projector(redis_client, store.shard_count, store=store).drain()
    models = ReadModels(redis_client, store.shard_count, store=store)
    summary = await models.room(table.room)
    assert summary is not None
    last_touch = max(e.server_time_ms for e in await store.read(table.room))
    archiver = Archiver(store, idle_after_s=3600)

    # Given the window: not idle one second before it is over, idle once it is
    assert await archiver.idle(now_ms=last_touch + HOUR_MS - 1000) == []
    assert await Archiver(store, idle_after_s=3600).idle(now_ms=last_touch + HOUR_MS + 10**6) == [table.room]
    assert await Archiver(store, idle_after_s=0).idle(now_ms=10**13) == []  # off: never

    # When the archiver's pass moves it (the wall clock is far past the window)
    results = await archiver.run_once()
    assert [(r.room, r.status) for r in results] == [(table.room, "archived")]
    pointer = await store.pointer(table.room)
    assert pointer is not None and pointer.reason == "idle"
    assert await room_keys(redis_client, table.room) == []  # events, records, version: all gone from Redis
    assert await whole_record(archiving_store(redis_client, url), table.room) == before  # read from the archive

    assert await models.room(table.room) == summary  # the room's page reads the same

    # Then a command the rules refuse is recorded against the archived room, which stays there (brought back for a
    # refusal, its trip and its next idle move showed in the public /metrics: issue 28), its record read after the
    # archived ones
    refused = await table.send("bob", {"kind": "mine", "ore": "diamonds"})
    assert not refused.accepted and (await store.pointer(table.room)).digest == pointer.digest
    assert await room_keys(redis_client, table.room) != []  # the refusal's record, in Redis after the pointer
    refused_record = (await store.rejections(table.room))[-1]
    assert decode_record(refused_record).command_id == refused.command_id
    assert await models.room(table.room) == summary  # nothing to project yet: its row was never gone
    # and its next command, which the rules accept, is decided on the room brought back
    mined = await table.mine("alice")
    assert mined.accepted and mined.first_version == before["version"] + 1
    assert await store.pointer(table.room) is None
    assert not await redis_client.hexists(store.keys.pointer_bucket(table.room), table.room)
    after = await whole_record(archiving_store(redis_client, url), table.room)
    assert after["events"][:before["version"]] == before["events"]  # the chain byte for byte, then the new one
    assert after["commands"][:len(before["commands"])] == before["commands"]
    assert after["rejections"] == before["rejections"] + [refused_record] and after["seed"] == before["seed"]
    # and it came back under its own commitment scheme: the heads its players' checkpoints sign are unchanged
    assert after["commit_scheme"] == before["commit_scheme"] == "almanac-commit-v2"
    assert (await verify_room(archiving_store(redis_client, url), table.room)).ok
    # and a resend of a command decided before the trip is its first outcome, never a second application
    (_, first_record), *_ = before["commands"]
    resent = await RoomService(archiving_store(redis_client, url)).handle(decode_record(first_record))
    assert resent.duplicate and await store.latest_version(table.room) == after["version"]


async def test_a_fresh_engine_brings_an_idle_room_back_and_a_second_trip_works_too(redis_client, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "idle-twice")
    for trip, player in enumerate(("bob", "alice")):
        version = await store.latest_version(table.room)
        assert (await archive_room(store, table.room, reason="idle")).status == "archived"
        engine = RoomService(archiving_store(redis_client, url))  # an engine that never saw the room
        outcome = await engine.handle(CommandRecord(command_id=f"idle-twice-{trip}", room=table.room, player=player,
                                                    server_time_ms=50_000 + trip, body={"kind": "end_turn"}))
        assert outcome.accepted, outcome.error
        assert outcome.first_version == version + 1
    assert len(await store.read(table.room)) == await store.latest_version(table.room)
    assert (await verify_room(store, table.room)).ok


async def test_two_engines_racing_on_an_idle_room_bring_it_back_once_and_lose_nothing(redis_url, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(3)]
    try:
        store = archiving_store(clients[0], url)
        table = await playing_room(store, "idle-race")
        version = await store.latest_version(table.room)
        await archive_room(store, table.room, reason="idle")
        engines = [RoomService(archiving_store(client, url)) for client in clients[1:]]
        # two engines (a lapsed lease and its next holder) each get a command for the room at the same moment
        commands = [CommandRecord(command_id=f"idle-race-{player}", room=table.room, player=player,
                                  server_time_ms=60_000, body={"kind": "end_turn"}) for player in ("alice", "bob")]
        outcomes = await asyncio.gather(*(engine.handle(c) for engine, c in zip(engines, commands, strict=True)))
        assert all(o.accepted for o in outcomes), [o.error for o in outcomes]
        # both applied, one after the other, on one copy of the room: the log holds each once
        first, second = sorted(outcomes, key=lambda o: o.first_version)
        assert first.first_version == version + 1 and second.first_version == first.last_version + 1
        events = await store.read(table.room)
        assert [e.version for e in events] == list(range(1, second.last_version + 1))
        assert {e.command_id for e in events[version:]} == {c.command_id for c in commands}
        assert await store.pointer(table.room) is None and (await verify_room(store, table.room)).ok
        # a third, late restorer with the stale pointer finds it gone and changes nothing
        assert await restore_room(store, (await _stale_pointer(store, table.room, url))) == "gone"
        assert len(await store.read(table.room)) == second.last_version
    finally:
        for client in clients:
            await client.aclose()


async def _stale_pointer(store, room: str, url: str):
    """The pointer of an idle move of ``room`` as it is now, recorded and then undone (the object stays)."""
    other = archiving_store(store.client, url)
    await archive_room(other, room, reason="idle")
    pointer = await other.pointer(room)
    assert await restore_room(other, pointer) == "ok"
    return pointer


@pytest.mark.parametrize("crash_after", [step for step in STEPS if step != "deleted"])
async def test_a_command_arriving_mid_move_is_never_decided_against_a_half_moved_room(redis_client, tmp_path,
                                                                                      crash_after) -> None:
    """The archiver stops dead after each step (as kill -9 there), the engine (its cache still holding the room)
    decides a command, then the archiver's next pass runs: the command is in the room, once, wherever it lives."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, f"idle-mid-{crash_after}")
    before = await whole_record(store, table.room)

    assert (await archive_room(store, table.room, reason="idle", crash_after=crash_after)).status == "crashed"
    # the engine's batch path (no dedupe lookup first: the write script checks), its cache holding the room as
    # before the move began
    (mined,) = await table.service.handle_many([CommandRecord(
        command_id=f"{table.room}-late", room=table.room, player="alice", server_time_ms=90_000,
        body={"kind": "end_turn"})])
    if mined is None:  # the write met the move (a conflict): the command goes alone, as the engine sends it
        mined = await table.service.handle(CommandRecord(command_id=f"{table.room}-late", room=table.room,
                                                         player="alice", server_time_ms=90_000,
                                                         body={"kind": "end_turn"}))
    assert mined.accepted, mined.error

    again = await archive_room(archiving_store(redis_client, url), table.room, reason="idle")
    assert again.status in ("archived", "moved")
    reader = archiving_store(redis_client, url)
    now = await whole_record(reader, table.room)
    assert now["events"][:before["version"]] == before["events"]
    assert now["version"] == mined.last_version == len(now["events"])
    assert [e.command_id for e in await reader.read(table.room)].count(mined.envelopes[0].command_id) \
        == len(mined.envelopes)
    assert (await verify_room(reader, table.room)).ok


async def test_a_deadline_of_an_idle_room_survives_the_move_and_its_firing_brings_the_room_back(redis_client,
                                                                                              tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    service = RoomService(store)
    room, start, timeout = "idle-clock", 1_000_000, 6 * HOUR_MS
    options = {"players": ["alice", "bob"], "years": 1, "season_timeout_ms": timeout}
    for command_id, player, body in [("create", "alice", {"kind": "create_room", "ruleset": "realm",
                                                          "options": options}),
                                     ("join-a", "alice", {"kind": "join_room"}),
                                     ("join-b", "bob", {"kind": "join_room"})]:
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{command_id}", room=room, player=player,
                                                     server_time_ms=start, body=body))
        assert outcome.accepted, outcome.error
    shard = store.keys.shard(room)
    now = [start + HOUR_MS]
    clock = Clock(redis_client, store.keys, store, now_ms=lambda: now[0])
    await clock.tick([shard])
    due = await redis_client.zscore(store.keys.deadlines(shard), room)
    assert due is not None

    # Given the room idle for an hour (its season times out in six), the archiver moves it
    archiver = Archiver(store, idle_after_s=1800)
    assert await archiver.idle(now_ms=now[0]) == [room]
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    # Then the deadline stays with its shard, and a clock that lost its cursor still finds it (reading the archive)
    assert await redis_client.zscore(store.keys.deadlines(shard), room) == due
    await redis_client.delete(store.keys.clock_cursor(shard))
    await Clock(redis_client, store.keys, archiving_store(redis_client, url), now_ms=lambda: now[0]).tick([shard])
    assert await redis_client.zscore(store.keys.deadlines(shard), room) == due

    # When it is due, the clock sends its command and a fresh engine decides it on the room brought back
    now[0] = int(due)
    await clock.tick([shard])
    entries = await redis_client.xrange(store.keys.command_stream(shard))
    sent = [r for r in (decode_record(fields[b"__data__"]) for _, fields in entries) if r.room == room]
    assert [s.command_id for s in sent] == [deadline_command_id(room, "season:0", "alice")]
    engine = RoomService(archiving_store(redis_client, url))
    ended = await engine.handle(sent[0])
    assert ended.accepted, ended.error
    assert "realm.season_ended" in [e.type for e in ended.envelopes]
    assert await store.pointer(room) is None
    assert [codec.decode_event(e).forced_by for e in ended.envelopes if e.type == "realm.season_ended"] == ["alice"]
    assert (await verify_room(store, room)).ok


async def test_a_damaged_room_is_not_moved_and_the_idle_pass_goes_on(redis_client, tmp_path) -> None:
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    sound, damaged = await playing_room(store, "idle-sound"), await playing_room(store, "idle-damaged")
    version = await store.latest_version(damaged.room)
    await redis_client.xadd(store.keys.events(damaged.room), {"e": b"not an envelope"}, id=f"{version + 1}-0")
    archiver = Archiver(store, idle_after_s=60)
    results = await archiver.run_once()
    assert [(r.room, r.status) for r in results] == [(sound.room, "archived")]
    assert archiver.totals["errors"] == 1 and await store.pointer(damaged.room) is None


async def seated_nonce_room(store, room: str, seats: list[str]) -> None:
    """A realm room of ``seats`` that alice and bob joined without nonces: the server's are kept beside the seed."""
    service = RoomService(store)
    options = {"players": seats, "villages": 1, "years": 3}
    for command_id, player, body in [("create", "alice", {"kind": "create_room", "ruleset": "realm@1",
                                                          "options": options}),
                                     ("join-a", "alice", {"kind": "join_room"}),
                                     ("join-b", "bob", {"kind": "join_room"})]:
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{command_id}", room=room, player=player,
                                                     server_time_ms=1_000, body=body))
        assert outcome.accepted, outcome.error


async def test_a_refused_join_leaves_an_idle_room_in_the_archive(redis_client, tmp_path) -> None:
    """Given an idle realm room of alice and bob in the archive (its dice committed per command: a join that sends no
    nonce gets the server's), when carol, who has no seat, joins without a nonce through an engine that never saw the
    room, alone or in a batch, then her join is refused (``no_seat``) against the archived state: the pointer stays,
    no trip back is counted and no nonce of hers reached Redis (the server's nonce used to be saved first, which hid
    the archived nonces, and the room came back before the rules refused: issue 28); and a join the rules accept, of
    a seat not yet taken, still brings the room back with its server nonce."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "idle-join"
    await seated_nonce_room(store, room, ["alice", "bob", "dave", "erin"])
    nonces = await store.load_nonces(room)
    assert len(nonces) == 2  # alice's and bob's, the server's: the room draws with them
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    pointer = await store.pointer(room)

    for path in ("alone", "batch"):
        engine = RoomService(archiving_store(redis_client, url))  # an engine that never saw the room
        trips: list[float] = []
        engine.on_restore = trips.append
        record = CommandRecord(command_id=f"{room}-carol-{path}", room=room, player="carol", server_time_ms=70_000,
                               body={"kind": "join_room"})
        refused = (await engine.handle_many([record]))[0] if path == "batch" else None
        if refused is None:  # the batch hands a room read from the archive as it came back to ``handle``
            refused = await engine.handle(record)
        assert not refused.accepted and refused.error["code"] == "no_seat", refused.error
        assert trips == [], path
        assert (await store.pointer(room)).digest == pointer.digest, path
        assert not await redis_client.exists(store.keys.nonces(room), store.keys.version(room),
                                             store.keys.events(room)), path

    engine = RoomService(archiving_store(redis_client, url))
    trips = []
    engine.on_restore = trips.append
    joined = await engine.handle(CommandRecord(command_id=f"{room}-dave", room=room, player="dave",
                                               server_time_ms=80_000, body={"kind": "join_room"}))
    assert joined.accepted, joined.error
    assert len(trips) == 1 and await store.pointer(room) is None
    held = await store.load_nonces(room)
    assert set(held) > set(nonces) and len(held) == 3  # dave's server nonce is kept beside the seed

    # and so does a join with the player's own nonce, kept in Redis by the gateway before the engine decides (the
    # archived players' nonces are read beside it)
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    commitment = await store.save_nonce(room, b"erin's own nonce, 32 bytes long.")
    joined = await RoomService(archiving_store(redis_client, url)).handle(CommandRecord(
        command_id=f"{room}-erin", room=room, player="erin", server_time_ms=90_000,
        body={"kind": "join_room", "nonce_commitment": commitment}))
    assert joined.accepted, joined.error
    assert await store.pointer(room) is None and set(await store.load_nonces(room)) == {*held, commitment}
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def test_a_join_decided_on_a_room_another_engine_brought_back_keeps_its_server_nonce(redis_client,
                                                                                          tmp_path) -> None:
    """Given an engine whose last read of a room met it archived idle (it refused a command there), when another
    engine brings the room back and then the first decides, in a batch, a join without a nonce, then the join is
    applied with its server nonce kept beside the seed: the nonce chosen for a room read from the archive is not
    written, so such a join is never appended from the batch (it would land on the room back without it)."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "idle-join-back"
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    engine = RoomService(archiving_store(redis_client, url))
    refused = await engine.handle(CommandRecord(command_id=f"{room}-carol", room=room, player="carol",
                                                server_time_ms=70_000, body={"kind": "join_room"}))
    assert refused.error["code"] == "no_seat" and await store.pointer(room) is not None
    other = archiving_store(redis_client, url)
    assert await restore_room(other, await other.pointer(room)) == "ok"

    record = CommandRecord(command_id=f"{room}-dave", room=room, player="dave", server_time_ms=80_000,
                           body={"kind": "join_room"})
    (joined,) = await engine.handle_many([record])
    if joined is None:  # the batch hands the join to ``handle``
        joined = await engine.handle(record)
    assert joined.accepted, joined.error
    commitment = codec.decode_event(joined.envelopes[-1]).nonce_commitment
    assert commitment in await store.load_nonces(room)
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def test_bringing_an_idle_room_back_is_not_a_conflict(redis_client, tmp_path) -> None:
    """Given an idle room in the archive and an engine that tries no conflict again (``max_conflict_retries=0``),
    when a command the rules accept arrives, then it is applied on the room brought back: the trip back is the
    engine's own step, not a writer racing it (it used to use up the last try and answer a conflict at version -1)."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "idle-no-retry")
    version = await store.latest_version(table.room)
    assert (await archive_room(store, table.room, reason="idle")).status == "archived"
    engine = RoomService(archiving_store(redis_client, url), max_conflict_retries=0)
    outcome = await engine.handle(CommandRecord(command_id="idle-no-retry-end", room=table.room, player="alice",
                                                server_time_ms=50_000, body={"kind": "end_turn"}))
    assert outcome.accepted and outcome.first_version == version + 1, outcome.error


async def test_a_second_delete_of_a_move_keeps_the_refusals_recorded_after_the_first(redis_client, tmp_path) -> None:
    """Given an idle room in the archive (its keys deleted) and then a refusal recorded against it (kept in Redis after
    the pointer), when a second archiver that lost the race to the same pointer runs its delete step ("already"), then
    the refusal is still the room's last record, and a command the rules accept brings it back with it (the delete
    step used to remove the first refusals by position again, the archived ones being gone: this one)."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, "idle-second-delete")
    before = await whole_record(store, table.room)
    assert (await archive_room(store, table.room, reason="idle")).status == "archived"
    refused = await table.send("bob", {"kind": "mine", "ore": "diamonds"})
    assert not refused.accepted
    rejections = await store.rejections(table.room)
    assert rejections[:-1] == before["rejections"] and len(rejections) == len(before["rejections"]) + 1

    assert (await archive_room(archiving_store(redis_client, url), table.room, reason="idle")).status == "already"
    assert await archiving_store(redis_client, url).rejections(table.room) == rejections
    assert (await table.mine("alice")).accepted
    assert (await whole_record(archiving_store(redis_client, url), table.room))["rejections"] == rejections


async def test_a_refusal_does_not_put_off_a_rooms_idle_move(redis_client, tmp_path) -> None:
    """Given a room whose last command, decided after its last event, was refused, when the window has passed since
    that event but not since the refusal, then the room is idle: its move comes when a quiet room's would (a refusal
    used to count as a touch and put the move off, which the archiver's public rooms count showed: issue 28)."""
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    table = await playing_room(store, "idle-refused-last")
    last_event = max(e.server_time_ms for e in await store.read(table.room))
    assert decode_record((await store.rejections(table.room))[-1]).server_time_ms > last_event
    assert await Archiver(store, idle_after_s=3600).idle(now_ms=last_event + HOUR_MS - 1) == []
    assert await Archiver(store, idle_after_s=3600).idle(now_ms=last_event + HOUR_MS) == [table.room]


async def test_a_resend_of_an_accepted_command_to_an_idle_room_through_the_batch_keeps_its_first_outcome(
        redis_client, tmp_path) -> None:
    """Given alice's join accepted and the room then archived idle (its outcome records and id index leave Redis with
    it), when the engine's batch path gets the join again (a client's resend), then the answer is the join's first
    outcome (accepted, a duplicate) and the stored outcome stays that one: the batch used to decide it again against
    the archived state, the rules now refusing it (``already_joined``), and its write, checking for duplicates in
    Redis only, recorded that refusal, which every later answer then gave."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "idle-resend"
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    first = await store.outcome(room, f"{room}-join-a")
    assert first is not None and first.accepted
    assert (await archive_room(store, room, reason="idle")).status == "archived"

    engine = RoomService(archiving_store(redis_client, url))  # an engine that never saw the room
    record = CommandRecord(command_id=f"{room}-join-a", room=room, player="alice", server_time_ms=1_000,
                           body={"kind": "join_room"})
    (resent,) = await engine.handle_many([record])
    if resent is None:  # the batch hands a room read from the archive to ``handle``
        resent = await engine.handle(record)
    assert resent.accepted and resent.duplicate, resent.error
    assert (resent.first_version, resent.last_version) == (first.first_version, first.last_version)
    assert await archiving_store(redis_client, url).outcome(room, f"{room}-join-a") == first
    assert await engine.handle(record) == resent


@pytest.mark.parametrize("refused_before", [True, False], ids=["a refusal archived", "none archived"])
async def test_a_refusal_recorded_during_an_idle_move_does_not_put_the_move_off_and_survives_the_trip(
        redis_client, tmp_path, refused_before: bool) -> None:
    """Given an idle room being moved, when a refusal is recorded after the move read the room and before its pointer
    (while the object is written), then the move still records its pointer, and the refusal is read after the
    archived ones and comes back with the room: its commit step used to answer "moved" on any change in the refusal
    count, so a refusal put the move off (the archiver's public rooms count showed it: issue 28), and refusals
    faster than a move put it off for ever. With no refusal archived, the delete step's trim of the archived ones
    (XRANGE's COUNT 0 answers nil) used to fail the step, the move left half done."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    table = await playing_room(store, f"idle-refused-mid-move-{refused_before}", refused=refused_before)
    before = await whole_record(store, table.room)
    refusals: list = []
    put_new = store.archive.put_new

    async def put_new_with_a_refusal(path: str, data: bytes) -> bool:
        refusals.append(await table.send("bob", {"kind": "mine", "ore": "diamonds"}))
        return await put_new(path, data)

    store.archive.put_new = put_new_with_a_refusal
    result = await archive_room(store, table.room, reason="idle")
    store.archive.put_new = put_new
    assert [r.accepted for r in refusals] == [False]
    assert result.status == "archived"
    assert (await store.pointer(table.room)).rejections == len(before["rejections"])
    rejections = await archiving_store(redis_client, url).rejections(table.room)
    assert rejections[:-1] == before["rejections"] and len(rejections) == len(before["rejections"]) + 1
    assert decode_record(rejections[-1]).command_id == refusals[0].command_id
    assert (await archiving_store(redis_client, url).outcome(table.room, refusals[0].command_id)).error \
        == refusals[0].error

    assert (await table.mine("alice")).accepted  # brought back
    assert await store.pointer(table.room) is None
    assert (await whole_record(archiving_store(redis_client, url), table.room))["rejections"] == rejections


async def test_a_nonce_saved_for_a_join_while_an_idle_room_is_moved_is_kept_for_the_join(redis_client,
                                                                                        tmp_path) -> None:
    """Given an idle move stopped dead after its pointer, when the gateway saves erin's own nonce for her join (it
    does before the engine decides) and the move's delete step then runs, then her nonce is still in Redis and her
    join is accepted on the room brought back: the delete step used to remove the room's whole nonce hash, this
    nonce with the archived ones, and the join was refused ``nonce_unknown`` for ever."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "idle-nonce-mid-move"
    await seated_nonce_room(store, room, ["alice", "bob", "erin"])
    archived_nonces = await store.load_nonces(room)
    assert (await archive_room(store, room, reason="idle", crash_after="pointed")).status == "crashed"
    commitment = await store.save_nonce(room, b"erin's own nonce, 32 bytes long.")

    assert (await archive_room(archiving_store(redis_client, url), room, reason="idle")).status == "already"
    assert await redis_client.hkeys(store.keys.nonces(room)) == [commitment.encode()]  # the archived ones left
    assert (await archive_room(archiving_store(redis_client, url), room, reason="idle")).status == "already"
    assert await redis_client.hexists(store.keys.nonces(room), commitment)  # a second delete keeps it too

    joined = await RoomService(archiving_store(redis_client, url)).handle(CommandRecord(
        command_id=f"{room}-erin", room=room, player="erin", server_time_ms=90_000,
        body={"kind": "join_room", "nonce_commitment": commitment}))
    assert joined.accepted, joined.error
    assert await store.pointer(room) is None
    assert set(await store.load_nonces(room)) == {*archived_nonces, commitment}
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def test_a_room_moved_again_as_it_comes_back_is_brought_back_again_before_a_join_is_appended(
        redis_client, tmp_path) -> None:
    """Given an idle room whose next command, dave's join without a nonce, the rules accept, when the archiver moves
    the room again right after the engine brought it back (before its reload), and another engine brings it back
    once more while the join is decided, then the join is appended only on the room in Redis with its server nonce
    kept beside the seed: the bring-back pass used to decide on the state read from the archive again (the
    server's nonce not written) and append it, to a room another engine had brought back meanwhile."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "idle-moved-again"
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    other = archiving_store(redis_client, url)
    engine_store = archiving_store(redis_client, url)
    restore_idle, load_nonces = engine_store.restore_idle, engine_store.load_nonces
    moved_again: list = []

    async def restore_then_move_again(name: str) -> bool:
        restored = await restore_idle(name)
        if not moved_again:  # the archiver's next pass, between the trip back and the engine's reload
            moved_again.append((await archive_room(other, name, reason="idle")).status)
        return restored

    async def load_nonces_as_another_engine_brings_it_back(name: str) -> dict:
        if moved_again and (pointer := await other.pointer(name)) is not None:
            await restore_room(other, pointer)
        return await load_nonces(name)

    engine_store.restore_idle = restore_then_move_again
    engine_store.load_nonces = load_nonces_as_another_engine_brings_it_back
    joined = await RoomService(engine_store).handle(CommandRecord(command_id=f"{room}-dave", room=room,
                                                                  player="dave", server_time_ms=80_000,
                                                                  body={"kind": "join_room"}))
    assert moved_again == ["archived"]
    assert joined.accepted, joined.error
    commitment = codec.decode_event(joined.envelopes[-1]).nonce_commitment
    assert commitment in await archiving_store(redis_client, url).load_nonces(room)
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def cached_room_archived_since(redis_client, url: str, room: str) -> tuple[RoomService, object]:
    """A realm room (seats for alice, bob and dave; alice and bob joined) that an engine holds in its cache, then
    moved to the archive idle by the archiver: the engine's next load answers its cached state without a read, so
    the batch learns the room is archived only mid-decision, when a read of its seed falls back to the archive.
    The engine and the room's pointer."""
    store = archiving_store(redis_client, url)
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    engine = RoomService(archiving_store(redis_client, url))
    await engine.load(room)  # as after the engine's last command of the room
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    return engine, await store.pointer(room)


def batch_of(room: str, *commands: tuple[str, str, dict]) -> list[CommandRecord]:
    return [CommandRecord(command_id=f"{room}-{name}", room=room, player=player, server_time_ms=70_000, body=body)
            for name, player, body in commands]


REFUSED_MINE = ("mine", "bob", {"kind": "mine", "ore": "diamonds"})

async def decided(engine: RoomService, records: list[CommandRecord]) -> list:
    """The outcomes of ``records`` decided as one batch, those the batch hands back decided by ``handle``."""
    results = await engine.handle_many(records)
    return [result if result is not None else await engine.handle(record)
            for result, record in zip(results, records, strict=True)]


async def still_archived_with_nothing_in_redis(redis_client, url: str, room: str, pointer) -> bool:
    """The room's pointer is the one it was archived with, and Redis holds none of its nonces, version or events."""
    store = archiving_store(redis_client, url)
    return ((await store.pointer(room)).digest == pointer.digest
            and not await redis_client.exists(store.keys.nonces(room), store.keys.version(room), store.keys.events(room)))  # refused; its decision reads the room's seed first


async def test_a_refused_join_decided_after_a_batch_met_its_cached_room_archived_writes_no_nonce(redis_client,
                                                                                                tmp_path) -> None:
    """Given a room the engine holds in its cache and that the archiver has since moved idle, when a batch decides a
    refused command of the room and then carol's join without a nonce (she has no seat), then the first decision's
    read meets the archive, carol's join is refused against the archived state with the server's nonce for it left
    unwritten, and the room stays archived with nothing of it in Redis (were the nonce saved, a refused join would
    write into an archived room, which a refusal must not: ``test_a_refused_join_leaves_an_idle_room_in_the_archive``)."""
    url = file_archive_url(tmp_path)
    room = "idle-cached-refused-join"
    engine, pointer = await cached_room_archived_since(redis_client, url, room)
    trips: list[float] = []
    engine.on_restore = trips.append
    records = batch_of(room, REFUSED_MINE, ("join-c", "carol", {"kind": "join_room"}))
    results = await decided(engine, records)
    assert [result.accepted for result in results] == [False, False]
    assert results[1].error["code"] == "no_seat", results[1].error
    assert trips == []
    assert await still_archived_with_nothing_in_redis(redis_client, url, room, pointer)


async def test_a_refused_join_whose_own_seed_read_met_its_cached_room_archived_writes_no_nonce(redis_client,
                                                                                             tmp_path) -> None:
    """Given a room the engine holds in its cache and that the archiver has since moved idle, when a batch's first
    command of the room is carol's join without a nonce (she has no seat), then the read of the seed for her server
    nonce is the one that meets the archive: the nonce is left unwritten, her join is refused against the archived
    state, and nothing of the room is in Redis (the batch decided whether to save the nonce before that read, and
    saved it into an archived room)."""
    url = file_archive_url(tmp_path)
    room = "idle-cached-refused-first-join"
    engine, pointer = await cached_room_archived_since(redis_client, url, room)
    trips: list[float] = []
    engine.on_restore = trips.append
    records = batch_of(room, ("join-c", "carol", {"kind": "join_room"}))
    results = await decided(engine, records)
    assert [result.accepted for result in results] == [False]
    assert results[0].error["code"] == "no_seat", results[0].error
    assert trips == []
    assert await still_archived_with_nothing_in_redis(redis_client, url, room, pointer)


async def test_a_refused_join_of_a_cached_room_whose_seed_is_cached_too_writes_no_nonce(redis_client,
                                                                                       tmp_path) -> None:
    """Given a room the engine holds in its cache with its seed (it decided a command that read the seed), and that
    the archiver has since moved idle, when a batch's first command of the room is carol's join without a nonce (she
    has no seat), then no read of the engine's caches meets the archive, but the join's own read of the store's seed
    does: the nonce is left unwritten, her join is refused against the archived state, and nothing of the room is
    in Redis."""
    url = file_archive_url(tmp_path)
    room = "idle-cached-seed-refused-join"
    store = archiving_store(redis_client, url)
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    engine = RoomService(archiving_store(redis_client, url))
    refused = await engine.handle(batch_of(room, REFUSED_MINE)[0])  # reads the seed: cached from here on
    assert not refused.accepted
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    pointer = await store.pointer(room)
    records = batch_of(room, ("join-c", "carol", {"kind": "join_room"}))
    results = await decided(engine, records)
    assert [result.accepted for result in results] == [False]
    assert results[0].error["code"] == "no_seat", results[0].error
    assert await still_archived_with_nothing_in_redis(redis_client, url, room, pointer)


async def test_a_join_whose_seed_read_meets_the_room_archived_since_its_load_brings_it_back_first(redis_client,
                                                                                                  tmp_path) -> None:
    """Given a room in Redis, when dave's join without a nonce (his seat is open) is handled and the archiver moves
    the room idle between the engine's load of it and its read of the seed for his server nonce, then that read meets
    the archive, the nonce is not written into the archived room, and the room is brought back before the join is
    appended, with his nonce kept beside the seed: no append tried on the archived room (a version conflict, before)."""
    url = file_archive_url(tmp_path)
    room = "idle-join-seed-read"
    store = archiving_store(redis_client, url)
    await seated_nonce_room(store, room, ["alice", "bob", "dave"])
    engine_store = archiving_store(redis_client, url)
    load_seed = engine_store.load_seed
    archived: list[str] = []

    async def load_seed_after_the_archiver_moved_it(name: str) -> bytes | None:
        if not archived:  # the archiver's pass, between the engine's load and this read
            archived.append((await archive_room(store, name, reason="idle")).status)
        return await load_seed(name)

    engine_store.load_seed = load_seed_after_the_archiver_moved_it
    engine = RoomService(engine_store)
    trips: list[float] = []
    engine.on_restore = trips.append
    joined = await engine.handle(batch_of(room, ("join-d", "dave", {"kind": "join_room"}))[0])
    assert archived == ["archived"]
    assert joined.accepted, joined.error
    assert len(trips) == 1 and engine.conflicts == 0
    commitment = codec.decode_event(joined.envelopes[-1]).nonce_commitment
    assert commitment in await archiving_store(redis_client, url).load_nonces(room)
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def test_a_join_decided_after_a_batch_met_its_cached_room_archived_waits_for_the_room_back(redis_client,
                                                                                                tmp_path) -> None:
    """Given a room the engine holds in its cache and that the archiver has since moved idle, when a batch decides a
    refused command of the room and then dave's join without a nonce (his seat is open), and another engine brings
    the room back before the batch is written, then dave's join is not written from the batch (the server's nonce it
    was decided with, the room read from the archive, is unwritten: appended to the room back in Redis, the join
    would land without it) but goes through ``handle``, which appends it with its nonce kept beside the seed."""
    url = file_archive_url(tmp_path)
    room = "idle-cached-join"
    engine, pointer = await cached_room_archived_since(redis_client, url, room)
    records = batch_of(room, REFUSED_MINE, ("join-d", "dave", {"kind": "join_room"}))
    plan = await engine.decide_many(records)
    other = archiving_store(redis_client, url)
    assert await restore_room(other, pointer) == "ok"  # another engine's command brought the room back
    results = await engine.write(plan)
    joined = results[1] if results[1] is not None else await engine.handle(records[1])
    assert joined.accepted, joined.error
    commitment = codec.decode_event(joined.envelopes[-1]).nonce_commitment
    assert commitment in await archiving_store(redis_client, url).load_nonces(room)
    assert (await verify_room(archiving_store(redis_client, url), room)).ok
    assert results[1] is None  # the batch handed it to ``handle``


async def test_a_command_whose_batch_read_its_cached_room_from_the_archive_as_it_came_back_is_not_refused(
        redis_client, tmp_path) -> None:
    """Given a room the engine holds in its cache and that the archiver has since moved idle, when a batch decides
    alice's end of turn and another engine brings the room back between the decision's two reads of the room's
    nonces (Redis, which had none, then the archive, which no longer has the room), then the command is not
    answered ``nonce_missing`` (neither place had the nonces at its read) but goes through ``handle``, which
    decides it on the room in Redis: accepted."""
    url = file_archive_url(tmp_path)
    room = "idle-cached-nonces-back"
    store = archiving_store(redis_client, url)
    await seated_nonce_room(store, room, ["alice", "bob"])
    engine_store = archiving_store(redis_client, url)
    engine = RoomService(engine_store)
    await engine.load(room)  # as after the engine's last command of the room
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    other = archiving_store(redis_client, url)
    archived_object, reads = engine_store.archived_object, []

    async def nonces_read_as_another_engine_brings_it_back(name: str) -> object:
        reads.append(name)
        if len(reads) == 2 and (pointer := await other.pointer(name)) is not None:  # the seed's read, then the nonces'
            assert await restore_room(other, pointer) == "ok"
        return await archived_object(name)

    engine_store.archived_object = nonces_read_as_another_engine_brings_it_back
    (record,) = batch_of(room, ("end", "alice", {"kind": "end_turn"}))
    (result,) = await engine.handle_many([record])
    assert len(reads) >= 2 and await store.pointer(room) is None  # the story's premise: the room came back mid-read
    ended = result if result is not None else await engine.handle(record)
    assert ended.accepted, ended.error
    assert (await verify_room(archiving_store(redis_client, url), room)).ok


async def test_a_nonce_is_kept_only_while_its_room_is_in_redis_or_beside_an_idle_archive(redis_client,
                                                                                      tmp_path) -> None:
    """Given a room the archiver moved after a caller read it, when the caller keeps a nonce for it, then the store
    checks the pointer in the same step as the write: beside an idle room's archive the nonce is kept (a player's own,
    for the join that brings the room back), unless the caller asked for a room in Redis only (the engine's server
    nonce: RoomArchived, nothing written); for a finished room nothing is ever written (RoomArchived). The check
    used to be a read before the write, which a move in between slipped through."""
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    room = "nonce-after-move"
    await seated_nonce_room(store, room, ["alice", "bob", "carol"])
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    mover_blind = archiving_store(redis_client, url)  # a process that read the room before the move

    with pytest.raises(RoomArchived) as refused:
        await mover_blind.save_nonce(room, b"the server's nonce for carol....", beside_idle=False)
    assert refused.value.idle and not await redis_client.exists(store.keys.nonces(room))
    assert mover_blind.met_idle(room)  # its engine brings the room back if the rules accept the join

    commitment = await mover_blind.save_nonce(room, b"carol's own nonce, 32 bytes long")
    assert await redis_client.hkeys(store.keys.nonces(room)) == [commitment.encode()]
    assert commitment in await store.load_nonces(room) and len(await store.load_nonces(room)) == 3

    await redis_client.delete(store.keys.nonces(room))
    assert await restore_room(store, await store.pointer(room)) == "ok"
    ended = await RoomService(store).handle(CommandRecord(command_id=f"{room}-end", room=room, player="alice",
                                                          server_time_ms=90_000, body={"kind": "end_room"}))
    assert ended.accepted, ended.error
    assert (await archive_room(store, room)).status == "archived"
    for beside_idle in (True, False):
        with pytest.raises(RoomArchived) as refused:
            await archiving_store(redis_client, url).save_nonce(room, b"dave's own nonce, 32 bytes long.",
                                                                beside_idle=beside_idle)
        assert not refused.value.idle and not await redis_client.exists(store.keys.nonces(room))
