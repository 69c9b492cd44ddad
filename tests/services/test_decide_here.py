"""An engine that decides its own process's commands (Engine.decide_here): the same log as the stream path, no stream hop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from engine_process_helper import register_test_rulesets
from engine_test_support import KEYS, record, send, wait_for
from log_checks import assert_log_verifies
from redis.exceptions import ConnectionError as RedisConnectionError
from shard_rooms import room_on

from almanac.events import codec
from almanac.services import room_service
from almanac.services.bus import COMMAND_FIELD, RateLimit
from almanac.services.engine.shard_engine import GROUP, Engine, EngineConfig, NotDecidedHere
from almanac.services.gateway.pipelined_connection import PipelinedConnection
from almanac.services.room_service import RoomService
from almanac.storage.base import CommandLimited
from almanac.storage.redis_store import WRITE_ORDERED_SCRIPT, RedisEventStore

register_test_rulesets()
ALL_SHARDS = list(range(16))
CREATE = {"kind": "create_room", "ruleset": "counter"}


async def started(client: aioredis.Redis, name: str, line: PipelinedConnection | None = None,
                  lease_ms: int = 800) -> Engine:
    engine = Engine(client, EngineConfig(name=name, shards=ALL_SHARDS, lease_ms=lease_ms),
                    write_call=line.call if line is not None else None,
                    call_many=line.call_many if line is not None else None)
    await engine.start()
    return engine


@pytest.fixture
async def here(redis_client: aioredis.Redis) -> AsyncIterator[tuple[Engine, PipelinedConnection]]:
    """An engine serving its process's commands, holding every shard, writing on a pipelined connection."""
    line = PipelinedConnection(redis_client, 5.0)
    # A lease of 5 s: its margin (a quarter) is what a renewal may be late by before a shard stops being safely
    # held and decide_here hands its command to the stream (None). With 800 ms, a suite run on a loaded host had a
    # 0.2 s margin run out mid-story (one of these stories got None); none of them is about a lease lapsing.
    engine = await started(redis_client, "here", line, lease_ms=5_000)
    await wait_for(lambda: _holds_all(engine), what="every lease")
    yield engine, line
    await engine.stop()
    await line.close()


async def _holds_all(engine: Engine) -> bool:
    """Every shard safely held and taken over: ready to decide here."""
    rooms = [next(f"r{n}" for n in range(10_000) if KEYS.shard(f"r{n}") == shard) for shard in ALL_SHARDS]
    return all(engine.decides_here(room) for room in rooms)


async def stream_entries(client: aioredis.Redis) -> int:
    return sum([await client.xlen(KEYS.command_stream(shard)) for shard in ALL_SHARDS])


async def assert_log_consistent(client: aioredis.Redis, room: str) -> int:
    return len(await assert_log_verifies(RedisEventStore(client, 16), room))


async def test_a_game_decided_here_never_touches_the_command_stream_and_its_log_verifies(redis_client, here) -> None:
    engine, _ = here
    created = await engine.decide_here(record("h1", "ann", CREATE, "c1"))
    joined = await engine.decide_here(record("h1", "ann", {"kind": "join_room"}, "c2"))
    added = [await engine.decide_here(record("h1", "ann", {"kind": "add", "amount": n}, f"a{n}")) for n in (1, 2, 3)]
    assert created.accepted and joined.accepted and all(outcome.accepted for outcome in added)
    assert [outcome.last_version for outcome in added] == [3, 4, 5]
    assert await stream_entries(redis_client) == 0  # no submit, no read, no publish: decided in process
    assert await assert_log_consistent(redis_client, "h1") == 5
    assert engine.metrics.totals["accepted"] == 5


async def test_a_refusal_decided_here_is_recorded_and_the_same_id_again_answers_the_first_outcome(redis_client,
                                                                                                  here) -> None:
    engine, _ = here
    await engine.decide_here(record("h2", "ann", CREATE, "c1"))
    await engine.decide_here(record("h2", "ann", {"kind": "join_room"}, "c2"))
    refused = await engine.decide_here(record("h2", "ann", {"kind": "add", "amount": 0}, "zero"))
    assert not refused.accepted and refused.error["code"]
    store = RedisEventStore(redis_client, 16)
    assert len(await store.rejections("h2")) == 1
    first = await engine.decide_here(record("h2", "ann", {"kind": "add", "amount": 5}, "five"))
    again = await engine.decide_here(record("h2", "ann", {"kind": "add", "amount": 5}, "five"))
    assert first.accepted and not first.duplicate
    assert again.duplicate and (again.first_version, again.last_version) == (first.first_version, first.last_version)
    assert await assert_log_consistent(redis_client, "h2") == 3  # created, joined, added once


async def test_commands_here_and_through_the_stream_make_one_log_in_the_order_each_was_decided(redis_client,
                                                                                              here) -> None:
    engine, _ = here
    await engine.decide_here(record("h3", "ann", CREATE, "c1"))
    await engine.decide_here(record("h3", "ann", {"kind": "join_room"}, "c2"))
    here_ones = [engine.decide_here(record("h3", "ann", {"kind": "add", "amount": 1}, f"here-{n}")) for n in range(20)]
    stream_ones = [send(redis_client, "h3", "ann", {"kind": "add", "amount": 2}, f"stream-{n}") for n in range(20)]
    outcomes = await asyncio.gather(*[one for pair in zip(here_ones, stream_ones, strict=True) for one in pair])
    assert all(outcome.accepted and not outcome.duplicate for outcome in outcomes)
    versions = sorted(outcome.last_version for outcome in outcomes)
    assert versions == list(range(3, 43))  # each command its own version, none lost, none twice
    assert await assert_log_consistent(redis_client, "h3") == 42
    state, _ = await RoomService(RedisEventStore(redis_client, 16)).load("h3")
    assert state.game.total == 20 * 1 + 20 * 2


async def test_a_room_whose_shard_another_engine_holds_goes_through_the_stream(redis_client) -> None:
    holder = await started(redis_client, "holder")
    await wait_for(lambda: _holds_all(holder), what="the holder's leases")
    line = PipelinedConnection(redis_client, 5.0)
    other = await started(redis_client, "other", line)
    try:
        assert await other.decide_here(record("h4", "ann", CREATE, "c1")) is None  # not held here
        created = await send(redis_client, "h4", "ann", CREATE, "c1")  # the holder decides it, from the stream
        assert created.accepted and await stream_entries(redis_client) == 1
    finally:
        await other.stop()
        await holder.stop()
        await line.close()


async def test_an_engine_without_a_gateways_connection_decides_handed_commands_with_the_stores_write(
        redis_client) -> None:
    """One engine, one path: given an engine built without a write connection (a shard process with no HTTP),
    a command handed in is decided by the same consume loop and written by the store's own ordered write."""
    plain = await started(redis_client, "plain")
    await wait_for(lambda: _holds_all(plain), what="the leases")
    try:
        created = await plain.decide_here(record("h5", "ann", CREATE, "c1"))
        assert created is not None and created.accepted and await stream_entries(redis_client) == 0
        assert await assert_log_consistent(redis_client, "h5") == 1
    finally:
        await plain.stop()


async def test_commands_queued_when_the_engine_stops_go_back_to_their_callers_undecided(redis_client) -> None:
    line = PipelinedConnection(redis_client, 5.0)
    serving = await started(redis_client, "serving", line)
    await wait_for(lambda: _holds_all(serving), what="the leases")
    waiting = [asyncio.ensure_future(serving.decide_here(record(f"h6-{n}", "ann", CREATE, f"c{n}")))
               for n in range(50)]
    await asyncio.sleep(0)  # every call is queued now (none decided: the consume loop has not run since)
    assert len(serving.inbox) == 50
    await serving.stop()  # what it had not decided goes back to its caller, for the stream
    answers = await asyncio.wait_for(asyncio.gather(*waiting), 5)
    assert len(answers) == 50 and all(answer is None or answer.accepted for answer in answers)
    assert any(answer is None for answer in answers)  # released undecided, not all decided before the stop
    store = RedisEventStore(redis_client, 16)
    for n, answer in enumerate(answers):  # an undecided one wrote nothing; a decided one is in the log
        assert (await store.outcome(f"h6-{n}", f"c{n}") is None) == (answer is None)
    assert await serving.decide_here(record("h7", "ann", CREATE, "c1")) is None  # stopped: never here
    await line.close()


async def test_a_command_no_batch_takes_in_time_is_withdrawn_and_never_written(redis_client) -> None:
    """Given Redis paused while a command of the room is being written, a second command handed in behind
    it waits its whole time unseen: NotDecidedHere (the gateway's 503), and nothing of it is ever written."""
    line = PipelinedConnection(redis_client, 5.0)
    engine = Engine(redis_client, EngineConfig(name="patient", shards=ALL_SHARDS, lease_ms=5_000),
                    write_call=line.call, call_many=line.call_many)
    await engine.start()
    try:
        await wait_for(lambda: _holds_all(engine), what="the leases")
        assert (await engine.decide_here(record("h10", "ann", CREATE, "c1"))).accepted
        await redis_client.execute_command("CLIENT", "PAUSE", 500, "ALL")
        writing = asyncio.ensure_future(engine.decide_here(record("h10", "ann", {"kind": "join_room"}, "c2")))
        await asyncio.sleep(0.05)  # taken by a batch, its write held by the pause
        with pytest.raises(NotDecidedHere):
            await engine.decide_here(record("h10", "ann", {"kind": "add", "amount": 1}, "c3"), timeout_s=0.1)
        assert (await writing).accepted  # the pause over, the write it had taken completes
        await asyncio.sleep(0.2)
        store = RedisEventStore(redis_client, 16)
        assert await store.outcome("h10", "c3") is None and await store.latest_version("h10") == 2
    finally:
        await engine.stop()
        await line.close()


async def test_a_write_that_took_effect_but_lost_its_reply_is_answered_as_a_duplicate_when_sent_again(
        redis_client, here) -> None:
    """Given a write whose reply is lost after it took effect (the connection dropped), the caller gets the
    Redis failure (503); the room is decided again from the store, so the same command id sent again is a
    duplicate of the first outcome and the next command takes the next version."""
    engine, line = here
    await engine.decide_here(record("h8", "ann", CREATE, "c1"))

    async def written_then_lost(commands, raise_on_error=True):
        await line.call_many(commands, raise_on_error)
        raise RedisConnectionError("the connection dropped after the write")

    engine._write_many = written_then_lost  # this one write only
    with pytest.raises(RedisConnectionError):
        await engine.decide_here(record("h8", "ann", {"kind": "join_room"}, "c2"))
    engine._write_many = line.call_many
    again = await engine.decide_here(record("h8", "ann", {"kind": "join_room"}, "c2"))
    assert again.duplicate and again.last_version == 2
    added = await engine.decide_here(record("h8", "ann", {"kind": "add", "amount": 3}, "c3"))
    assert added.accepted and added.last_version == 3
    assert await assert_log_consistent(redis_client, "h8") == 3


async def test_a_clients_limit_is_counted_by_the_commands_own_write_and_refuses_past_it(redis_client, here) -> None:
    """Every command decided here is counted, as the stream's submit counts it: by its own write when it has
    one, else on its own (an unrecorded refusal). Past the limit: CommandLimited (a 429), nothing written."""
    engine, _ = here
    limit = RateLimit(KEYS.seat_rate("h9", "token"), 3, 60_000)
    created = await engine.decide_here(record("h9", "ann", CREATE, "c1"), limit)
    unknown = await engine.decide_here(record("h9", "ann", {"kind": "no_such_command"}, "c2"), limit)
    joined = await engine.decide_here(record("h9", "ann", {"kind": "join_room"}, "c3"), limit)
    assert created.accepted and not unknown.accepted and joined.accepted
    assert int(await redis_client.get(limit.key)) == 3  # the unrecorded refusal counted too
    with pytest.raises(CommandLimited) as refused:
        await engine.decide_here(record("h9", "ann", {"kind": "add", "amount": 1}, "c4"), limit)
    assert refused.value.key == limit.key and 0 < refused.value.retry_ms <= 60_000
    assert int(await redis_client.get(limit.key)) == 4
    assert await assert_log_consistent(redis_client, "h9") == 2  # created, joined: the refused add wrote nothing
    assert await RedisEventStore(redis_client, 16).outcome("h9", "c4") is None


async def test_while_a_takeover_replays_a_backlog_commands_of_other_shards_go_to_the_stream_at_once(
        redis_client) -> None:
    """Given 3,000 commands of shard 15 left pending by a dead engine, when a serving engine takes the shards
    over (shard 0 first, shard 15 last) and a command of shard 0 comes in during shard 15's replay, then it is
    answered None at once (for the stream), not queued behind the replay."""
    stream, late = KEYS.command_stream(15), room_on(KEYS, 15, "backlog-")
    await redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    bodies = [CREATE, {"kind": "join_room"}] + [{"kind": "add", "amount": 1}] * 3_000
    async with redis_client.pipeline(transaction=False) as pipe:
        for n, body in enumerate(bodies):
            pipe.xadd(stream, {COMMAND_FIELD: codec.encode(record(late, "ann", body, f"b{n}"))})
        await pipe.execute()
    await redis_client.xreadgroup(GROUP, "dead", {stream: ">"}, count=len(bodies))  # pending under a dead engine
    line = PipelinedConnection(redis_client, 5.0)
    engine = await started(redis_client, "heir", line)
    try:
        caught = None
        for _ in range(2_000):
            pending = (await redis_client.xpending(stream, GROUP))["pending"]
            if engine.leases.holds(0) and 0 < pending < len(bodies) - 100:  # shard 15 mid-replay
                started_at = asyncio.get_running_loop().time()
                answer = await engine.decide_here(record(room_on(KEYS, 0, "other-"), "ann", CREATE, "x1"), timeout_s=10)
                caught = (answer, asyncio.get_running_loop().time() - started_at)
                break
            await asyncio.sleep(0.002)
        assert caught is not None, "the replay was over before it could be caught"
        answer, waited_s = caught
        assert answer is None and waited_s < 0.3, caught
        await wait_for(lambda: _holds_all(engine), what="the takeovers")
        state, _ = await RoomService(RedisEventStore(redis_client, 16)).load(late)
        assert state.game.total == 3_000  # the backlog replayed in order, once
    finally:
        await engine.stop()
        await line.close()


async def _append_corrupt_event(client: aioredis.Redis, room: str) -> None:
    """Another writer's next event of the room, unreadable: the room can no longer be loaded."""
    version = int(await client.get(KEYS.version(room)) or 0)
    await client.xadd(KEYS.events(room), {"e": b"\x00not an envelope"}, id=f"{version + 1}-0")
    await client.set(KEYS.version(room), version + 1)


async def test_a_command_counted_here_that_fails_here_goes_to_the_stream_counted_once(redis_client, here) -> None:
    """Given a room this engine has in memory and another writer's unreadable event after it, a counted
    command's write conflicts, it is counted on its own, and the room fails to load: NotDecidedHere saying
    the limit was counted (the gateway submits it to the stream without counting it again)."""
    engine, _ = here
    limit = RateLimit(KEYS.seat_rate("h11", "token"), 10, 60_000)
    assert (await engine.decide_here(record("h11", "ann", CREATE, "c1"))).accepted
    await _append_corrupt_event(redis_client, "h11")
    with pytest.raises(NotDecidedHere) as failed:
        await engine.decide_here(record("h11", "ann", {"kind": "join_room"}, "c2"), limit)
    assert failed.value.counted
    assert int(await redis_client.get(limit.key)) == 1


async def test_a_command_that_fails_here_before_any_count_goes_to_the_stream_uncounted(redis_client, here) -> None:
    """Given a room that cannot be loaded at all, a counted command fails before any write: NotDecidedHere
    saying nothing was counted (the stream's submit counts it)."""
    engine, _ = here
    limit = RateLimit(KEYS.seat_rate("h12", "token"), 10, 60_000)
    await _append_corrupt_event(redis_client, "h12")
    with pytest.raises(NotDecidedHere) as failed:
        await engine.decide_here(record("h12", "ann", {"kind": "join_room"}, "c1"), limit)
    assert not failed.value.counted
    assert await redis_client.get(limit.key) is None


async def test_a_batch_that_fails_before_any_write_leaves_its_commands_uncounted(redis_client, here,
                                                                              monkeypatch) -> None:
    """Given deciding itself fails (a bug, not Redis) before anything is written, the counted command goes to
    the stream as not counted: its limit is counted there, once, not skipped."""
    engine, _ = here

    async def broken(*args, **kwargs):
        raise ValueError("a bug while deciding")

    monkeypatch.setattr(engine.service, "decide_many", broken)
    limit = RateLimit(KEYS.seat_rate("h13", "token"), 10, 60_000)
    with pytest.raises(NotDecidedHere) as failed:
        await engine.decide_here(record("h13", "ann", CREATE, "c1"), limit)
    assert not failed.value.counted
    assert await redis_client.get(limit.key) is None


def _rooms_on(shard: int, count: int, tag: str) -> list[str]:
    rooms = (f"{tag}{n}" for n in range(100_000))
    return [room for room, _ in zip((r for r in rooms if KEYS.shard(r) == shard), range(count), strict=False)]


async def test_a_large_batch_whose_deciding_fails_has_written_and_counted_nothing(redis_client, here,
                                                                               monkeypatch) -> None:
    """Given more counted commands at once than a batch sends ahead of the rest (RoomService's EARLY_WRITE)
    and deciding that fails on the batch's last shard, then nothing was written early, and each command
    goes to the stream as not counted (counted once there, not twice)."""
    engine, _ = here
    rooms = _rooms_on(3, room_service.EARLY_WRITE, "early") + _rooms_on(5, 1, "later") + _rooms_on(7, 1, "bad")
    decide_room = room_service.RoomService._decide_room

    async def failing_on_the_last(self, plan, room, decided):
        if room == rooms[-1]:
            raise ValueError("a bug while deciding")
        return await decide_room(self, plan, room, decided)

    monkeypatch.setattr(room_service.RoomService, "_decide_room", failing_on_the_last)
    limits = [RateLimit(KEYS.seat_rate(room, "token"), 10, 60_000) for room in rooms]
    results = await asyncio.gather(*(engine.decide_here(record(room, "ann", CREATE, "c1"), limit)
                                     for room, limit in zip(rooms, limits, strict=True)), return_exceptions=True)
    assert all(isinstance(result, NotDecidedHere) and not result.counted for result in results), results
    assert [await redis_client.get(KEYS.version(room)) for room in rooms] == [None] * len(rooms)
    assert [await redis_client.get(limit.key) for limit in limits] == [None] * len(rooms)


async def test_the_writes_of_a_batch_decided_here_go_together_each_answering_its_own_commands(redis_client) -> None:
    """Given an engine deciding its process's commands on a pipelined connection, when commands of three rooms of
    three shards are handed in together, then their three writes (one script call per shard) go as one
    ``call_many``, not a task per write, and each command is answered its own outcome, as the log says."""
    register_test_rulesets()
    rooms = [room_on(KEYS, shard, "together-") for shard in (1, 2, 3)]
    line = PipelinedConnection(redis_client, 5.0)
    sent: list[int] = []

    async def counted(commands, raise_on_error=True):
        if commands and commands[0][0] == "EVALSHA":  # the writes (the clock's looks go the same way)
            sent.append(len(commands))
        return await line.call_many(commands, raise_on_error)

    engine = Engine(redis_client, EngineConfig(name="together", shards=ALL_SHARDS, lease_ms=5_000),
                    write_call=line.call, call_many=counted)
    await engine.start()
    try:
        await wait_for(lambda: _holds_all(engine), what="the leases")
        outcomes = await asyncio.gather(*(engine.decide_here(record(room, "ann", CREATE, "c1")) for room in rooms))
    finally:
        await engine.stop()
        await line.close()
    assert [(o.room, o.accepted, o.last_version) for o in outcomes] == [(room, True, 1) for room in rooms]
    assert sent == [3]
    for room in rooms:
        assert await assert_log_consistent(redis_client, room) == 1


async def test_after_redis_forgets_its_scripts_the_next_commands_are_still_accepted_and_answered(redis_client,
                                                                                                 here) -> None:
    """Given an engine deciding its process's commands on the gateway's pipelined connection, a room under way, when
    Redis forgets every script (SCRIPT FLUSH, as a restart without persistence does), then the next command decided
    here and the next one through the command stream are still accepted and answered (each write refused NOSCRIPT,
    which did nothing, is sent again with its script), and the room's log verifies."""
    engine, _ = here
    await redis_client.script_load(WRITE_ORDERED_SCRIPT)  # known before: only the flush makes Redis forget it
    limit = RateLimit(KEYS.seat_rate("h-forgot", "token"), 10, 60_000)
    assert (await engine.decide_here(record("h-forgot", "ann", CREATE, "c1"), limit)).accepted
    # When Redis forgets every script, then the next command decided here is still accepted and answered
    await redis_client.script_flush()
    joined = await engine.decide_here(record("h-forgot", "ann", {"kind": "join_room"}, "c2"), limit)
    assert joined.accepted and joined.last_version == 2
    # And when it forgets them again, so is the next command through the command stream
    await redis_client.script_flush()
    added = await send(redis_client, "h-forgot", "ann", {"kind": "add", "amount": 1}, "c3")
    assert added.accepted and added.last_version == 3
    assert int(await redis_client.get(limit.key)) == 2  # each command decided here counted once
    assert await assert_log_consistent(redis_client, "h-forgot") == 3
