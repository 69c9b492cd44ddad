"""RoomService.handle_many (the engine's batch path) decides exactly what one-by-one handling decides."""

from __future__ import annotations

from counter_ruleset import CounterDecider

from almanac.events import codec
from almanac.events.errors import CorruptEventError
from almanac.services.room_service import CommandRecord, Outcome, RoomService
from almanac.storage.memory_store import MemoryEventStore

SEED = b"k" * 32


def cmd(room: str, index: int, body: dict, command_id: str | None = None, player: str = "ann") -> CommandRecord:
    return CommandRecord(command_id=command_id or f"{room}-{index}", room=room, player=player,
                         server_time_ms=1_000 + index, body=body)


def script() -> list[CommandRecord]:
    records = []
    for room in ("r1", "r2", "r3"):
        records += [cmd(room, 0, {"kind": "create_room", "ruleset": "counter"}), cmd(room, 1, {"kind": "join_room"})]
    for index in range(2, 12):
        for room in ("r1", "r2", "r3"):
            body = {"kind": "roll", "dice": 2} if index % 3 == 0 else {"kind": "add", "amount": index % 4}
            records.append(cmd(room, index, body))  # amount 0 every fourth command: refused
    records.append(cmd("nowhere", 0, {"kind": "join_room"}))  # refused: no such room
    records.insert(10, records[8])  # the same command id twice in one batch
    return records


async def seeded_store() -> MemoryEventStore:
    store = MemoryEventStore()
    for room in ("r1", "r2", "r3"):
        await store.save_seed(room, SEED)
    return store


async def handled_one_by_one() -> MemoryEventStore:
    """The script handled one command at a time: what every batched way of handling it must equal."""
    store = await seeded_store()
    service = RoomService(store, snapshot_every=5)
    for record in script():
        await service.handle(record)
    return store


async def assert_same_rooms(store: MemoryEventStore, expected: MemoryEventStore) -> None:
    for room in ("r1", "r2", "r3"):
        assert await store.read_raw(room) == await expected.read_raw(room)
        assert await store.commands(room) == await expected.commands(room)
        assert await store.rejections(room) == await expected.rejections(room)
        # The same snapshots (a batch saves its rooms' together, after its writes).
        assert [await store.latest_snapshot(room, v) for v in range(1, 40)] == \
            [await expected.latest_snapshot(room, v) for v in range(1, 40)]
        assert await store.latest_snapshot(room) is not None


async def test_a_batch_decides_byte_for_byte_what_one_by_one_handling_decides() -> None:
    one_by_one_store, batch_store = await handled_one_by_one(), await seeded_store()
    service = RoomService(batch_store, snapshot_every=5)
    records = script()
    results = await service.handle_many(records[:20]) + await service.handle_many(records[20:])
    deferred = [record for record, result in zip(records, results, strict=True) if result is None]
    assert [r.command_id for r in deferred] == [records[10].command_id]
    replay = await service.handle(deferred[0])
    assert replay.duplicate
    assert all(isinstance(r, Outcome) for r in results if r is not None)
    await assert_same_rooms(batch_store, one_by_one_store)
    refused = [r.error["code"] for r in results if isinstance(r, Outcome) and not r.accepted]
    assert refused.count("counter.amount_not_positive") == 6 and "room_not_found" in refused


async def test_a_conflict_in_a_batch_is_caught_up_and_decided_again_alone() -> None:
    store = await seeded_store()
    engine, intruder = RoomService(store), RoomService(store)
    await engine.handle_many([cmd("r1", 0, {"kind": "create_room", "ruleset": "counter"}),
                              cmd("r1", 1, {"kind": "join_room"})])
    await intruder.handle(cmd("r1", 2, {"kind": "add", "amount": 5}, command_id="intruder"))
    results = await engine.handle_many([cmd("r1", 3, {"kind": "add", "amount": 1}),
                                        cmd("r1", 4, {"kind": "add", "amount": 2})])
    assert results == [None, None] and engine.conflicts == 1
    outcomes = [await engine.handle(cmd("r1", i, {"kind": "add", "amount": i - 2})) for i in (3, 4)]
    assert [(o.first_version, o.accepted) for o in outcomes] == [(4, True), (5, True)]
    state, _ = await RoomService(store).load("r1")
    assert state.game.total == 8


async def test_a_failing_command_holds_back_its_room_only(monkeypatch) -> None:
    store = await seeded_store()
    service = RoomService(store)
    await service.handle_many([cmd(r, 0, {"kind": "create_room", "ruleset": "counter"}) for r in ("r1", "r2")]
                              + [cmd(r, 1, {"kind": "join_room"}) for r in ("r1", "r2")])
    original = CounterDecider.decide

    def fragile(self, state, command, ctx):
        if getattr(command, "amount", None) == 13:
            raise ZeroDivisionError("thirteen")
        return original(self, state, command, ctx)

    monkeypatch.setattr(CounterDecider, "decide", fragile)
    results = await service.handle_many([
        cmd("r1", 2, {"kind": "add", "amount": 13}), cmd("r2", 2, {"kind": "add", "amount": 1}),
        cmd("r1", 3, {"kind": "add", "amount": 1}), cmd("r2", 3, {"kind": "add", "amount": 1}),
    ])
    assert isinstance(results[0], ZeroDivisionError) and results[2] is None
    assert isinstance(results[1], Outcome) and isinstance(results[3], Outcome) and results[3].last_version == 4
    assert codec.decode_event((await store.read("r2"))[-1]).amount == 1


async def test_a_room_that_cannot_be_loaded_holds_back_its_commands_only(monkeypatch) -> None:
    """A room whose log cannot be loaded (a corrupt entry) fails its first command (the engine's attempts
    and dead letters take it from there) and defers the rest of the room; other rooms are decided."""
    store = await seeded_store()
    service = RoomService(store)
    await service.handle_many([cmd(r, 0, {"kind": "create_room", "ruleset": "counter"}) for r in ("r1", "r2")])
    load = service.load

    async def broken(room, at_version=None, **options):
        if room == "r1":
            raise CorruptEventError(room, 1, "damaged")
        return await load(room, at_version, **options)

    monkeypatch.setattr(service, "load", broken)
    results = await service.handle_many([cmd("r1", 1, {"kind": "join_room"}), cmd("r2", 1, {"kind": "join_room"}),
                                         cmd("r1", 2, {"kind": "add", "amount": 1})])
    assert isinstance(results[0], CorruptEventError) and results[2] is None
    assert isinstance(results[1], Outcome) and results[1].accepted


async def test_when_deciding_fails_the_writes_already_sent_are_awaited_and_their_rooms_move_on(monkeypatch) -> None:
    """Given a batch long enough that its first shards' writes are sent while the rest is decided, when a
    later command's decision fails on the store (Redis, looking up an earlier outcome), then the error goes
    up, and the writes already sent took effect and were recorded: their rooms decide on without conflict."""
    from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: PLC0415

    from almanac.services.room_service import EARLY_WRITE  # noqa: PLC0415
    from almanac.storage.keys import shard_of  # noqa: PLC0415

    store = MemoryEventStore(shard_count=4_096)
    service = RoomService(store)
    rooms = []
    for number in range(10_000):  # rooms on shards of their own, the failing one last
        room = f"e{number}"
        if shard_of(room, 4_096) not in {shard_of(r, 4_096) for r in rooms}:
            rooms.append(room)
        if len(rooms) == EARLY_WRITE + 5:
            break
    for room in rooms:
        await store.save_seed(room, SEED)
    await service.handle_many([cmd(r, 0, {"kind": "create_room", "ruleset": "counter"}) for r in rooms])
    failing = rooms[-1]

    async def unreachable(room, command_id):
        raise RedisConnectionError("the store went away")

    monkeypatch.setattr(store, "outcome", unreachable)
    batch = [cmd(r, 1, {"kind": "join_room"}) for r in rooms[:-1]]
    batch.append(cmd(failing, 1, {"kind": "add", "amount": "lots"}))  # invalid: its id's outcome is looked up
    try:
        await service.handle_many(batch)
    except RedisConnectionError:
        pass
    else:
        raise AssertionError("the store's failure did not go up")
    monkeypatch.undo()
    joined = [r for r in rooms[:-1] if len(await store.read(r)) == 2]
    assert len(joined) >= EARLY_WRITE  # the early send took effect
    followed = await service.handle_many([cmd(r, 2, {"kind": "add", "amount": 1}) for r in joined])
    assert all(isinstance(o, Outcome) and o.accepted for o in followed), followed
    assert service.conflicts == 0  # the cached states had moved on with the early writes


async def test_batches_each_decided_while_the_one_before_is_written_decide_what_one_by_one_handling_decides() -> None:
    """Given the script cut into batches, when each batch is decided while the one before is being written
    (as the engine does at a high rate: inside that batch's last write, once it is revalidated), the one
    before's deferred commands then handled alone, and the batch written: then the logs, command records
    and refusals are byte for byte those of one-by-one handling."""
    one_by_one_store, ahead_store = await handled_one_by_one(), await seeded_store()
    service = RoomService(ahead_store, snapshot_every=5)
    records = script()
    cuts = [records[0:6], records[6:20], records[20:31], records[31:]]
    plan = await service.decide_many(cuts[0])
    for following in [*cuts[1:], None]:
        decided_ahead = []

        async def last_write(groups, following=following, plan=plan, decided_ahead=decided_ahead):
            if following is not None:
                decided_ahead.append(await service.decide_many(following, after=plan))
            return await ahead_store.write_ordered_shards(groups)

        results = await service.write(plan, last_write)
        for record, result in zip(plan.records, results, strict=True):
            if result is None:
                assert (await service.handle(record)).duplicate  # the id seen twice in one batch
        plan = decided_ahead[0] if decided_ahead else None
    await assert_same_rooms(ahead_store, one_by_one_store)


async def test_an_invalid_command_decided_ahead_is_answered_with_its_ids_first_outcome_written_meanwhile() -> None:
    """Given a command decided and sent, and a malformed command with the same id decided ahead of its write
    (the id's outcome not yet stored: "invalid"), when the first is written, then the second is decided again
    and answered with the id's first outcome, as one-by-one handling answers it."""
    store = await seeded_store()
    service = RoomService(store)
    await service.handle_many([cmd("r1", 0, {"kind": "create_room", "ruleset": "counter"}),
                               cmd("r1", 1, {"kind": "join_room"})])
    first = await service.decide_many([cmd("r1", 2, {"kind": "add", "amount": 2}, command_id="twice")])
    ahead = await service.decide_many([cmd("r1", 3, {"kind": "add", "amount": "two"}, command_id="twice")],
                                      after=first)
    (written,) = await service.write(first)
    (again,) = await service.write(ahead)
    assert again.duplicate and again.accepted and (again.first_version, again.last_version) == (3, 3)
    assert [e.hash for e in again.envelopes] == [e.hash for e in written.envelopes]


async def test_a_refusal_decided_ahead_on_a_write_that_did_not_hold_is_decided_again_against_the_log() -> None:
    """Given bob's join decided and sent, and his second join decided ahead of its write (refused: already
    joined), when the first join's write conflicts (another writer ended the room meanwhile) and goes alone
    (refused: the room ended), then the second join is decided again before it is written: its recorded
    refusal gives the reason the log supports, never one from a state that was never written."""
    store = await seeded_store()
    service, intruder = RoomService(store), RoomService(store)
    await service.handle_many([cmd("r1", 0, {"kind": "create_room", "ruleset": "counter"}),
                               cmd("r1", 1, {"kind": "join_room"})])
    first = await service.decide_many([cmd("r1", 2, {"kind": "join_room"}, command_id="bob-1", player="bob")])
    ahead = await service.decide_many([cmd("r1", 3, {"kind": "join_room"}, command_id="bob-2", player="bob")],
                                      after=first)
    await intruder.handle(cmd("r1", 4, {"kind": "end_room"}, command_id="the-end"))

    assert await service.write(first) == [None]  # the conflict: alone, after the batch
    alone = await service.handle(first.records[0])
    assert alone.error["code"] == "room_ended"
    (second,) = await service.write(ahead)
    assert second.error["code"] == "room_ended" and service.redecided == 1
    for command_id in ("bob-1", "bob-2"):  # what a retry of either id is answered with, for ever
        assert (await store.outcome("r1", command_id)).error["code"] == "room_ended"


async def test_snapshots_that_cannot_be_saved_leave_the_batchs_writes_and_answers_standing(monkeypatch) -> None:
    """Given a batch whose appends cross a snapshot boundary, when saving its snapshots fails (Redis went
    away just then), then the batch's answers stand (its writes took effect), the failure is counted, and a
    later load replays the log instead."""
    from redis.exceptions import ConnectionError as RedisConnectionError  # noqa: PLC0415

    store = await seeded_store()
    service = RoomService(store, snapshot_every=2)

    async def unreachable(snapshots):
        raise RedisConnectionError("the store went away")

    monkeypatch.setattr(store, "save_snapshots", unreachable)
    results = await service.handle_many([cmd("r1", 0, {"kind": "create_room", "ruleset": "counter"}),
                                         cmd("r1", 1, {"kind": "join_room"}), cmd("r1", 2, {"kind": "add", "amount": 3})])
    assert all(isinstance(r, Outcome) and r.accepted for r in results) and service.snapshot_failures == 1
    assert await store.latest_snapshot("r1") is None
    state, _ = await RoomService(store).load("r1")
    assert state.version == 3 and state.game.total == 3
