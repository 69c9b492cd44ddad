"""The write path on every store: snapshots + tail equal the plain fold; a replayed command id changes nothing."""

from __future__ import annotations

from game_driver import fold_envelopes

from almanac.events.envelope import GENESIS_HASH
from almanac.events.hashing import first_broken_link
from almanac.services.room_service import CommandRecord, RoomService


def record(command_id: str, player: str, body: dict, room: str = "r1", now_ms: int = 1_000) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def play_counter(service: RoomService, commands: int, room: str = "r1") -> None:
    await service.handle(record("create", "alice", {"kind": "create_room", "ruleset": "counter"}, room))
    await service.handle(record("join", "alice", {"kind": "join_room"}, room))
    for index in range(commands):
        body = {"kind": "add", "amount": 1} if index % 4 else {"kind": "roll", "dice": 3}
        outcome = await service.handle(record(f"c{index}", "alice", body, room, now_ms=2_000 + index))
        assert outcome.accepted, outcome.error


async def test_state_at_any_version_from_snapshot_and_tail_equals_the_plain_fold(store):
    service = RoomService(store, snapshot_every=10)
    await play_counter(service, 45)
    envelopes = await store.read("r1")
    assert (await store.latest_snapshot("r1"))[0] >= 40

    for version in (1, 2, 9, 10, 11, 19, 20, 21, 29, 30, 31, 40, 41, len(envelopes)):
        fresh = RoomService(store, snapshot_every=10)  # no cache: snapshot + tail only
        state, last_hash = await fresh.load("r1", at_version=version)
        assert state == fold_envelopes(envelopes[:version]), version
        assert last_hash == envelopes[version - 1].hash


async def test_a_command_replayed_after_a_crash_before_acknowledgement_appends_nothing_new(store):
    service = RoomService(store)
    await play_counter(service, 3)
    first = await service.handle(record("roll-1", "alice", {"kind": "roll", "dice": 4}))
    before = await store.read("r1")

    # The engine crashed after the append and before acking: a new engine (no cache) gets it again.
    replayed = await RoomService(store).handle(record("roll-1", "alice", {"kind": "roll", "dice": 4}))

    assert replayed.duplicate and replayed.accepted
    assert (replayed.first_version, replayed.last_version) == (first.first_version, first.last_version)
    assert replayed.envelopes == first.envelopes
    assert await store.read("r1") == before


async def test_a_refused_command_is_recorded_with_its_reason_and_changes_no_state(store):
    service = RoomService(store)
    await play_counter(service, 2)
    version = await store.latest_version("r1")

    outcome = await service.handle(record("bad", "alice", {"kind": "add", "amount": 0}))

    assert not outcome.accepted
    assert outcome.error["code"] == "counter.amount_not_positive"
    assert await store.latest_version("r1") == version
    assert len(await store.rejections("r1")) == 1
    again = await service.handle(record("bad", "alice", {"kind": "add", "amount": 0}))
    assert again.duplicate and again.error == outcome.error


async def test_a_writer_with_a_stale_cache_catches_up_and_decides_again(store):
    first_writer, second_writer = RoomService(store), RoomService(store)
    await play_counter(first_writer, 2)
    await second_writer.load("r1")  # caches the room at this version
    await first_writer.handle(record("a", "alice", {"kind": "add", "amount": 5}))

    outcome = await second_writer.handle(record("b", "alice", {"kind": "add", "amount": 7}))

    assert outcome.accepted and second_writer.conflicts == 1
    envelopes = await store.read("r1")
    assert first_broken_link(envelopes, GENESIS_HASH) is None
    assert fold_envelopes(envelopes).game.total == 1 + 5 + 7


async def test_a_command_for_a_room_that_does_not_exist_is_refused_without_leaving_a_seed(store):
    outcome = await RoomService(store).handle(record("x", "alice", {"kind": "join_room"}, room="ghost"))
    assert outcome.error["code"] == "room_not_found"
    assert await store.load_seed("ghost") is None


async def test_a_snapshot_of_an_outdated_state_format_is_ignored_and_the_log_folded(store):
    service = RoomService(store, snapshot_every=10)
    await play_counter(service, 25)
    envelopes = await store.read("r1")
    version, _ = await store.latest_snapshot("r1")
    # A state format that changed since: the stored bytes no longer decode into today's state Struct.
    await store.save_snapshot("r1", version, b"\x92\xc4\x03old\xa4hash")

    state, last_hash = await RoomService(store, snapshot_every=10).load("r1")

    assert state == fold_envelopes(envelopes) and last_hash == envelopes[-1].hash
