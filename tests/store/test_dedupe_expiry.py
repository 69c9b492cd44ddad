"""Dedupe records that expire (ALMANAC_DEDUPE_RETAIN) in a room still being played: given a command acknowledged
and its record gone from Redis, an attacker who resends it, by every write path the engine has and by the gateway's
lookup, gets its first outcome back and never a second decision; what stays in Redis per accepted command is a
small entry of the room's id index (a refusal keeps its record), and it travels with the room to the archive and
back."""

from __future__ import annotations

from archive_support import archiving_store, expired, file_archive_url
from forensics_support import RealmTable

from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.archive import archive_room
from almanac.storage.base import AppendRequest, Counted
from almanac.storage.redis_store import REFUSAL_ONLY_MS, RedisEventStore

RETAIN_MS = 200


async def played_room(store, name: str) -> tuple[RealmTable, CommandRecord, CommandRecord]:
    """A realm room with one acknowledged mining try of alice (its record expired) and one refused command of bob."""
    table = RealmTable(store, name)
    await table.create("realm@1")
    mine = CommandRecord(command_id=f"{name}-mine", room=name, player="alice", server_time_ms=90_000,
                         body={"kind": "mine", "ore": "gold"})
    refused = CommandRecord(command_id=f"{name}-diamonds", room=name, player="bob", server_time_ms=91_000,
                            body={"kind": "mine", "ore": "diamonds"})
    assert (await table.service.handle(mine)).accepted
    assert not (await table.service.handle(refused)).accepted
    await expired(store.client, store.keys.command_outcome(name, mine.command_id))
    return table, mine, refused


async def test_an_old_acknowledged_command_resent_after_its_record_expired_is_never_decided_twice(redis_client
                                                                                                  ) -> None:
    store = RedisEventStore(redis_client, dedupe_retain_ms=RETAIN_MS)
    table, mine, refused = await played_room(store, "expiry-resend")
    room = table.room
    version = await store.latest_version(room)
    refusals = len(await store.rejections(room))
    first = await store.outcome(room, mine.command_id)  # the gateway's lookup of a resend: still answered
    assert first is not None and first.accepted and first.last_version <= version

    # When the attacker resends both, through a fresh engine (nothing cached), alone and in a batch
    fresh = RoomService(RedisEventStore(redis_client, dedupe_retain_ms=RETAIN_MS))
    alone = await fresh.handle(mine)
    batched = await RoomService(RedisEventStore(redis_client, dedupe_retain_ms=RETAIN_MS)).handle_many([mine, refused])
    # and straight at the store's other write (several appends of a shard in one call)
    (again,), _ = await store.write_many([AppendRequest(room=room, expected_version=version, command_id=mine.command_id,
                                                        envelopes=[])], [])

    # Then each answer is the first outcome, marked a duplicate, and the room did not move
    assert alone.duplicate and (alone.first_version, alone.last_version) == (first.first_version, first.last_version)
    assert [outcome is None or outcome.duplicate for outcome in batched] == [True, True]
    assert again.duplicate and again.outcome == first
    resent_refusal = await fresh.handle(refused)
    assert resent_refusal.duplicate and resent_refusal.error == (await store.outcome(room, refused.command_id)).error
    assert await store.latest_version(room) == version
    assert len(await store.rejections(room)) == refusals
    assert [e.command_id for e in await store.read(room)].count(mine.command_id) == first.last_version - \
        first.first_version + 1


async def test_an_index_entry_written_by_either_kind_of_script_answers_a_resend_through_the_other(redis_client
                                                                                                    ) -> None:
    # The ordered write (the engine's batches) gets each command's index field from the engine (ids_field); the other
    # write scripts compute it in Lua: the same 16 bytes, or an entry already in Redis would not answer a resend.
    store = RedisEventStore(redis_client, dedupe_retain_ms=RETAIN_MS)
    # Given alice's try, appended by the single-append script (its field made in Lua), and its record expired
    table, mine, _ = await played_room(store, "expiry-both-ways")
    room = table.room
    version = await store.latest_version(room)
    first = await store.outcome(room, mine.command_id)
    counter = store.keys.seat_rate(room, "alice")

    # When it is resent straight at the ordered write, counted against a limit of one command
    (again,) = await store.write_ordered([AppendRequest(room=room, expected_version=version,
                                                        command_id=mine.command_id, envelopes=[],
                                                        counted=Counted(counter, 1, 60_000))])
    # Then its first outcome answers, the room did not move, and the resend used none of the limit
    assert again.duplicate and again.outcome == first
    assert await store.latest_version(room) == version
    assert await redis_client.get(counter) is None

    # Given a new try of alice written by the ordered write (the engine's batch), its record expired
    later = CommandRecord(command_id=f"{room}-later", room=room, player="alice", server_time_ms=95_000,
                          body={"kind": "mine", "ore": "gold"})
    (written,) = await RoomService(store).handle_many([later])
    assert written.accepted and written.last_version > version
    await expired(redis_client, store.keys.command_outcome(room, later.command_id))
    # When it is resent at the single-append and batch-append scripts (their fields made in Lua)
    resent = await store.append(room, written.last_version, later.command_id, [])
    (batched,), _ = await store.write_many([AppendRequest(room=room, expected_version=written.last_version,
                                                          command_id=later.command_id, envelopes=[])], [])
    # Then each is answered its first outcome, and nothing was appended
    assert resent.duplicate and (resent.outcome.first_version, resent.outcome.last_version) == \
        (written.first_version, written.last_version)
    assert batched.duplicate and batched.outcome == resent.outcome
    assert await store.latest_version(room) == written.last_version


async def test_what_stays_per_command_is_a_small_index_entry_not_the_record(redis_client) -> None:
    store = RedisEventStore(redis_client, dedupe_retain_ms=RETAIN_MS)
    table = RealmTable(store, "expiry-memory")
    await table.create("realm@1")
    await table.play_mining(12)
    accepted = [e.command_id for e in await store.read(table.room)]
    accepted = list(dict.fromkeys(accepted))  # each accepted command once, in order
    for command_id in accepted:
        await expired(redis_client, store.keys.command_outcome(table.room, command_id))
    refusals = len(await store.rejections(table.room))
    assert len(await redis_client.keys(f"*:cmd:{table.room}-*")) == refusals  # only the refusals keep a record
    index = store.keys.command_ids(table.room)
    assert await redis_client.hlen(index) == len(accepted)
    # (16-byte fields: a player searching offline for an id sharing a coming timeout's field needs 2^128 / targets)
    assert {len(field) for field in await redis_client.hkeys(index)} == {16}
    per_command = await redis_client.memory_usage(index) / len(accepted)
    record = await redis_client.memory_usage(store.keys.command_outcome(table.room, f"{table.room}-kept")) \
        if await store.append(table.room, await store.latest_version(table.room), f"{table.room}-kept", []) else 0
    assert per_command < 32 and record > 4 * per_command, (per_command, record)


async def test_an_archived_and_brought_back_room_still_answers_resends_whose_records_expired(redis_client,
                                                                                             tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(redis_client, url)
    store.dedupe_retain_ms = RETAIN_MS
    table, mine, refused = await played_room(store, "expiry-trip")
    room = table.room
    version = await store.latest_version(room)
    assert (await archive_room(store, room, reason="idle")).status == "archived"
    archived = await store.archived_object(room)
    assert archived is not None and {mine.command_id, refused.command_id} <= set(archived.outcomes)
    assert not await redis_client.exists(store.keys.command_ids(room))  # the index left Redis with the room

    # When the resend arrives at an engine that never saw the room: it brings the room back, then answers
    engine_store = archiving_store(redis_client, url)
    engine_store.dedupe_retain_ms = RETAIN_MS
    resent = await RoomService(engine_store).handle(mine)  # answered from the archived object, room left there
    assert resent.duplicate and await store.latest_version(room) == version
    # and once a new command brought the room back, the resend is answered from the index that came back with it
    ended = await RoomService(engine_store).handle(CommandRecord(
        command_id=f"{room}-end", room=room, player="alice", server_time_ms=92_000, body={"kind": "end_turn"}))
    assert ended.accepted and await store.pointer(room) is None
    version = ended.last_version
    assert (await RoomService(archiving_store(redis_client, url)).handle(mine)).duplicate
    assert await store.latest_version(room) == version
    assert (await RoomService(engine_store).handle(refused)).duplicate
    assert await redis_client.keys(f"*:cmd:{room}-mine") == []  # it came back as an index entry, no record
    assert await redis_client.hlen(store.keys.command_ids(room)) == version  # each accepted command (an event each)


async def test_a_create_over_a_room_leaves_an_answer_that_expires_even_when_records_are_kept_for_ever(redis_client
                                                                                                       ) -> None:
    # Given a store that keeps dedupe records for ever (ALMANAC_DEDUPE_RETAIN=0) and a realm room
    store = RedisEventStore(redis_client, dedupe_retain_ms=0)
    table = RealmTable(store, "for-ever")
    await table.create("realm@1")
    room, refusals = table.room, len(await store.rejections(table.room))
    # When an outsider sends creates naming it, alone and in a batch
    attempts = [CommandRecord(command_id=f"mal-{n}", room=room, player="mal", server_time_ms=95_000 + n,
                              body={"kind": "create_room", "ruleset": "realm"}) for n in range(3)]
    outcomes = [await table.service.handle(attempts[0]), *await table.service.handle_many(attempts[1:])]
    # Then each is refused room_exists, nothing joins the room's refusal log, and each answer expires: no record kept
    # outside the room's logs lives for ever (nothing would delete it, not even the room's archive)
    assert [outcome.error["code"] for outcome in outcomes] == ["room_exists"] * 3
    assert len(await store.rejections(room)) == refusals
    for attempt in attempts:
        assert 0 < await redis_client.pttl(store.keys.command_outcome(room, attempt.command_id)) <= REFUSAL_ONLY_MS
