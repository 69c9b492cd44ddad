"""The clock sends a deadline's timeout command once: racing clocks, a lost cursor, a stale deadline, kill -9 of the engine."""

from __future__ import annotations

import asyncio
import json
import time

import redis.asyncio as aioredis
from engine_test_support import KEYS, EngineProcess, send, wait_for

from almanac.events import codec
from almanac.events.step import decode_record
from almanac.services import clock as clock_module
from almanac.services.bots import bot_seats
from almanac.services.clock import Clock, deadline_command_id
from almanac.services.gateway.pipelined_connection import PipelinedConnection
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import engine_heartbeat_key
from almanac.storage.redis_store import RedisEventStore

START_MS = 1_000_000
TIMEOUT_MS = 60_000


def record(command_id: str, player: str, body: dict, room: str, now_ms: int = START_MS) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def realm_room(service: RoomService, room: str, timeout_ms: int = TIMEOUT_MS, now_ms: int = START_MS,
                     **create: object) -> None:
    """A realm room of alice and bob, both seated, whose first season started at ``now_ms`` (``create``: more of
    its create command)."""
    options = {"players": ["alice", "bob"], "years": 1, "season_timeout_ms": timeout_ms}
    created = await service.handle(record(f"{room}-create", "alice", {"kind": "create_room", "ruleset": "realm",
                                                                      "options": options, **create}, room, now_ms))
    assert created.accepted, created.error
    for player in ("alice", "bob"):
        joined = await service.handle(record(f"{room}-join-{player}", player, {"kind": "join_room"}, room, now_ms))
        assert joined.accepted, joined.error


async def sent_commands(client: aioredis.Redis, room: str) -> list[CommandRecord]:
    entries = await client.xrange(KEYS.command_stream(KEYS.shard(room)))
    return [r for r in (decode_record(fields[b"__data__"]) for _, fields in entries) if r.room == room]


async def decide_sent(client: aioredis.Redis, service: RoomService, room: str) -> list:
    """What an engine would do with the clock's commands: decide each (dedupe by id), return the outcomes."""
    return [await service.handle(sent) for sent in await sent_commands(client, room)
            if sent.command_id.startswith("clock-")]


async def season_endings(store: RedisEventStore, room: str) -> list:
    return [codec.decode_event(e) for e in await store.read(room) if e.type == "realm.season_ended"]


class At:
    """A clock's time, set by the test."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms



async def a_realm_room(client: aioredis.Redis, room: str) -> tuple[RedisEventStore, RoomService, int]:
    """Given a realm room ``room`` in a real Redis: its store, the service that decides it, and its shard."""
    store = RedisEventStore(client, shard_count=16)
    service = RoomService(store)
    await realm_room(service, room)
    return store, service, KEYS.shard(room)

async def test_racing_clocks_send_a_due_deadline_once(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    await realm_room(service, "race")
    # Given two clocks (a lease that lapsed and its next holder), both past the season's timeout
    now = At(START_MS + TIMEOUT_MS)
    clocks = [Clock(redis_client, KEYS, store, now_ms=now) for _ in range(2)]
    shard = KEYS.shard("race")
    # When both track and fire, over and over, at the same time
    for _ in range(5):
        await asyncio.gather(*(clock.tick([shard]) for clock in clocks))
    # Then one command went out, under the deadline's own id, and the room decides it once
    sent = await sent_commands(redis_client, "race")
    clock_sent = [s for s in sent if s.command_id.startswith("clock-")]
    assert [s.command_id for s in clock_sent] == [deadline_command_id("race", "season:0", "alice")]
    assert clock_sent[0].body == {"kind": "end_season"} and clock_sent[0].server_time_ms == START_MS + TIMEOUT_MS
    outcomes = await decide_sent(redis_client, service, "race")
    assert [o.accepted for o in outcomes] == [True]
    # and a resend of the same deadline (a clock that crashed before it knew) is the first outcome again
    assert (await service.handle(clock_sent[0])).duplicate
    assert [e.season_index for e in await season_endings(store, "race")] == [0]


async def test_a_deadline_sent_but_not_yet_decided_is_not_sent_again_by_a_clock_reading_the_room(
        redis_client: aioredis.Redis) -> None:
    store, service, shard = await a_realm_room(redis_client, "undecided")
    now = At(START_MS + TIMEOUT_MS)
    # Given one clock sent the season's timeout, which no engine has decided yet (the room still names it)
    assert await Clock(redis_client, KEYS, store, now_ms=now).tick([shard]) == 1
    # When a second clock starts without a cursor (a lease taken over: it reads every room of the shard) and a
    # third reads the room again from the feed, both past the timeout
    await redis_client.delete(KEYS.clock_cursor(shard))
    assert await Clock(redis_client, KEYS, store, now_ms=now).tick([shard]) == 0
    assert await Clock(redis_client, KEYS, store, now_ms=now).tick([shard]) == 0
    # Then the timeout went out once, and once decided, the next season's deadline is tracked again
    assert len([s for s in await sent_commands(redis_client, "undecided") if s.command_id.startswith("clock-")]) == 1
    assert [o.accepted for o in await decide_sent(redis_client, service, "undecided")] == [True]
    clock = Clock(redis_client, KEYS, store, now_ms=now)
    await clock.tick([shard])
    assert await redis_client.zscore(KEYS.deadlines(shard), "undecided") == START_MS + TIMEOUT_MS + TIMEOUT_MS


async def test_a_clock_lent_the_writers_states_tracks_and_sends_without_folding_the_room_again(
        redis_client: aioredis.Redis) -> None:
    store, service, shard = await a_realm_room(redis_client, "lent")
    now = At(START_MS + TIMEOUT_MS - 1)
    # Given the clock of the engine that wrote the room, lent that engine's cached states (as Housekeeping does)
    clock = Clock(redis_client, KEYS, store, now_ms=now, held=service.loader.cached)
    # When it ticks before the season's timeout, then at it
    assert await clock.tick([shard]) == 0
    assert await redis_client.zscore(KEYS.deadlines(shard), "lent") == START_MS + TIMEOUT_MS
    now.ms += 1
    assert await clock.tick([shard]) == 1
    # Then it tracked the deadline from the engine's state, folding nothing of its own, and sent the timeout once
    assert len(clock.loader) == 0
    assert [o.accepted for o in await decide_sent(redis_client, service, "lent")] == [True]
    assert [e.season_index for e in await season_endings(store, "lent")] == [0]
    # and once decided, the next season's deadline is tracked from the engine's new state alike
    await clock.tick([shard])
    assert await redis_client.zscore(KEYS.deadlines(shard), "lent") == START_MS + 2 * TIMEOUT_MS
    assert len(clock.loader) == 0


async def test_nothing_is_sent_before_the_deadline(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    await realm_room(RoomService(store), "early")
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + TIMEOUT_MS - 1))
    assert await clock.tick([KEYS.shard("early")]) == 0
    assert await redis_client.zscore(KEYS.deadlines(KEYS.shard("early")), "early") == START_MS + TIMEOUT_MS


async def test_a_season_the_players_ended_themselves_moves_the_deadline(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    await realm_room(service, "played")
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + 10))
    shard = KEYS.shard("played")
    await clock.tick([shard])
    # Given both players end their turn at +10 s: the season ends by their hand, a new one starts then
    for player in ("alice", "bob"):
        ended = await service.handle(record(f"end-{player}", player, {"kind": "end_turn"}, "played", START_MS + 10_000))
        assert ended.accepted, ended.error
    # When the first season's timeout passes
    clock.now_ms = At(START_MS + TIMEOUT_MS + 1)
    assert await clock.tick([shard]) == 0
    # Then nothing is sent: the deadline is now the second season's, counted from its own start
    assert await redis_client.zscore(KEYS.deadlines(shard), "played") == START_MS + 10_000 + TIMEOUT_MS
    clock.now_ms = At(START_MS + 10_000 + TIMEOUT_MS)
    assert await clock.tick([shard]) == 1
    await decide_sent(redis_client, service, "played")
    endings = await season_endings(store, "played")
    assert [(e.season_index, e.forced_by) for e in endings] == [(0, ""), (1, "alice")]


async def test_a_clock_that_lost_its_cursor_finds_every_pending_deadline_again(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    for room in ("lost-a", "lost-b"):
        await realm_room(service, room)
    # Given the clock's own keys are gone (a failover that lost the last writes, an operator's mistake)
    for shard in {KEYS.shard("lost-a"), KEYS.shard("lost-b")}:
        await redis_client.delete(KEYS.clock_cursor(shard), KEYS.deadlines(shard), KEYS.deadline_commands(shard))
    # When a clock starts past the timeouts
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + TIMEOUT_MS))
    sent = await clock.tick(sorted({KEYS.shard("lost-a"), KEYS.shard("lost-b")}))
    # Then it read the shards' rooms and sent both
    assert sent == 2
    for room in ("lost-a", "lost-b"):
        assert [o.accepted for o in await decide_sent(redis_client, service, room)] == [True]


async def test_kill_9_of_the_engine_at_the_due_time_fires_the_deadline_once_after_restart(
        redis_client: aioredis.Redis, redis_url: str, tmp_path) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    timeout_ms = 2_000
    engine = EngineProcess(redis_url, "clock-a", tmp_path)
    try:
        await wait_for(lambda: redis_client.exists(engine_heartbeat_key("clock-a")), timeout_s=20)
        start = int(time.time() * 1000)
        options = {"players": ["alice", "bob"], "years": 1, "season_timeout_ms": timeout_ms}
        assert (await send(redis_client, "crash", "alice", {"kind": "create_room", "ruleset": "realm",
                                                            "options": options}, "c-create", time_ms=start)).accepted
        for player in ("alice", "bob"):
            assert (await send(redis_client, "crash", player, {"kind": "join_room"}, f"c-join-{player}",
                               time_ms=start)).accepted
        # Given the engine (and its clock) killed -9 just around the season's due time
        await asyncio.sleep(max(0.0, (start + timeout_ms - 50) / 1000 - time.time()))
        engine.kill()
        # When another engine takes the shards over, after the due time
        engine = EngineProcess(redis_url, "clock-b", tmp_path)

        async def ended() -> bool:
            return len(await season_endings(store, "crash")) >= 1

        await wait_for(ended, timeout_s=30)
        await asyncio.sleep(0.5)  # time for a second sending, if there were one
    finally:
        engine.kill()
    # Then the first season ended exactly once, at or after its due time
    endings = [e for e in await season_endings(store, "crash") if e.season_index == 0]
    assert len(endings) == 1 and endings[0].at_ms >= start + timeout_ms


async def untimed_rooms(redis_client: aioredis.Redis, prefix: str,
                        shards: int) -> tuple[RoomService, dict[int, str]]:
    """Rooms of the counter rule-set (no deadlines), one in each of ``shards`` shards: their service, and each one's room."""
    from engine_process_helper import register_test_rulesets  # noqa: PLC0415 - the counter rule-set

    register_test_rulesets()
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    rooms: dict[int, str] = {}
    for n in range(200):
        rooms.setdefault(KEYS.shard(f"{prefix}-{n}"), f"{prefix}-{n}")
        if len(rooms) == shards:
            break
    for room in rooms.values():
        created = await service.handle(record(f"{room}-create", "ann", {"kind": "create_room", "ruleset": "counter",
                                                                        "options": {"seats": ["ann"]}}, room))
        assert created.accepted, created.error
    return service, rooms


async def test_a_tick_over_shards_whose_rooms_name_no_deadlines_looks_once_and_writes_their_cursors_together(
        redis_client: aioredis.Redis) -> None:
    """Given rooms of a rule-set without deadlines in three shards, tracked by a clock, when each room moves and the
    clock ticks, then the tick made its one pipelined look at each shard (a feed read and a due-deadline look) and
    nothing more per shard: no further look at due deadlines (none is due) and no script call to move a cursor (the
    three cursors are written together); the cursors are where the feeds end."""
    service, rooms = await untimed_rooms(redis_client, "untimed", shards=3)
    store = service.store
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS))
    shards = sorted(rooms)
    for _ in range(2):  # the first reads every room of the shards, the second takes up the cursors it wrote
        await clock.tick(shards)
    for room in rooms.values():
        assert (await service.handle(record(f"{room}-join", "ann", {"kind": "join_room"}, room))).accepted
    before = await redis_client.info("commandstats")
    await clock.tick(shards)
    after = await redis_client.info("commandstats")

    def calls(name: str) -> int:
        return after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)

    assert calls("zrangebyscore") == len(shards)
    assert calls("evalsha") == 0 and calls("eval") == 0
    for shard in shards:
        last = (await redis_client.xrevrange(KEYS.feed(shard), count=1))[0][0]
        assert await redis_client.get(KEYS.clock_cursor(shard)) == last


async def test_a_clock_remembers_a_bounded_number_of_handed_seats_and_forgetting_one_changes_nothing(
        redis_client: aioredis.Redis, monkeypatch) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given three realm rooms with seat bots whose bob left his seat to a bot (the log hands it over: room.seat_to_bot)
    rooms = ["handed-a", "handed-b", "handed-c"]
    for room in rooms:
        await realm_room(service, room, seat_bots=True)
        left = await service.handle(record(f"{room}-leave", "bob", {"kind": "hand_to_bot"}, room, START_MS + 1))
        assert left.accepted, left.error
    # and a clock that may remember two seats it wrote to the bot seats
    monkeypatch.setattr(clock_module, "UNTIMED_LIMIT", 2)
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + 2))
    # When it folds the rooms one after another
    for room in rooms:
        await clock.tick([KEYS.shard(room)])
        # Then it never remembers more seats than its bound
        assert len(clock._handed) <= 2, clock._handed
    # and every seat the rooms handed over is in the bot seats, for a bot to play
    assert set(await bot_seats(redis_client, KEYS, range(16))) == {(room, "bob") for room in rooms}
    # When a room it forgot moves (alice ends her turn) and the clock folds it again, it writes the seat again,
    def seats_written(entries: dict) -> dict:  # each write stamps its own token ("w": bots._write_shard_seat)
        return {member: {k: v for k, v in json.loads(value).items() if k != "w"} for member, value in entries.items()}

    written = seats_written(await redis_client.hgetall(KEYS.bots(KEYS.shard("handed-a"))))
    assert (await service.handle(record("handed-a-end", "alice", {"kind": "end_turn"}, "handed-a",
                                        START_MS + 3))).accepted
    await clock.tick([KEYS.shard("handed-a")])
    assert ("handed-a", "bob") in clock._handed
    # which changes nothing: the bot seats are as they were
    assert seats_written(await redis_client.hgetall(KEYS.bots(KEYS.shard("handed-a")))) == written
    assert set(await bot_seats(redis_client, KEYS, range(16))) == {(room, "bob") for room in rooms}


async def test_a_clock_whose_feeds_moved_ticks_again_without_a_wait_and_waits_once_they_are_still(
        redis_client: aioredis.Redis) -> None:
    """Given rooms without deadlines in two shards, tracked by a clock, when a room moves and the clock ticks, then its
    wait before the next tick makes no call to Redis (a look at the deadlines and a blocking read would return at
    once while commands come: two round trips a tick for nothing); when the next tick finds nothing new, then the
    wait looks at the deadlines again and blocks on the feeds, as an idle clock does."""
    service, rooms = await untimed_rooms(redis_client, "still", shards=2)
    store = service.store
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS))
    clock.idle_wait_s = 0.05
    shards = sorted(rooms)
    stopping = asyncio.Event()
    for _ in range(2):  # the first reads every room of the shards, the second takes up the cursors it wrote
        await clock.tick(shards)
    room = next(iter(rooms.values()))
    assert (await service.handle(record(f"{room}-join", "ann", {"kind": "join_room"}, room))).accepted
    await clock.tick(shards)

    async def calls_during_wait() -> dict[str, int]:
        before = await redis_client.info("commandstats")
        await clock._wait(shards, stopping)
        after = await redis_client.info("commandstats")
        return {name: after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)
                for name in ("zrange", "xread")}

    assert await calls_during_wait() == {"zrange": 0, "xread": 0}
    await clock.tick(shards)  # nothing moved since
    assert await calls_during_wait() == {"zrange": len(shards), "xread": 1}


async def _without_pipeline(client: aioredis.Redis, tick) -> int:  # noqa: ANN001 - a clock's tick, awaited
    """``tick`` awaited while ``client``'s pipeline refuses to be made: the clock sends nothing through it."""
    def refused(*_: object, **__: object) -> None:
        raise AssertionError("the clock made a redis-py pipeline")

    client.pipeline = refused  # type: ignore[method-assign]
    try:
        return await tick
    finally:
        del client.pipeline


async def test_a_clock_on_the_pipelined_connection_tracks_and_sends_a_deadline_as_through_a_pipeline(
        redis_client: aioredis.Redis) -> None:
    """Given a realm room and the clock of the gateway's engine, which looks at its shards on the gateway's
    pipelined connection (``call_many``), when it ticks before the season's timeout, at it, and after the timeout is
    decided, then it tracks the deadline, sends the timeout once and tracks the next season's, as a clock sending its
    looks through redis-py's pipeline does; and it made no pipeline."""
    store, service, shard = await a_realm_room(redis_client, "on-line")
    line = PipelinedConnection(redis_client, timeout_s=5)
    now = At(START_MS + TIMEOUT_MS - 1)
    clock = Clock(redis_client, KEYS, store, now_ms=now, call_many=line.call_many)
    try:
        assert await _without_pipeline(redis_client, clock.tick([shard])) == 0
        assert await redis_client.zscore(KEYS.deadlines(shard), "on-line") == START_MS + TIMEOUT_MS
        now.ms += 1
        assert await _without_pipeline(redis_client, clock.tick([shard])) == 1
        assert [o.accepted for o in await decide_sent(redis_client, service, "on-line")] == [True]
        assert await _without_pipeline(redis_client, clock.tick([shard])) == 0
        assert await redis_client.zscore(KEYS.deadlines(shard), "on-line") == START_MS + 2 * TIMEOUT_MS
    finally:
        await line.close()
    assert [e.season_index for e in await season_endings(store, "on-line")] == [0]


async def test_a_tick_on_the_pipelined_connection_looks_in_one_write_and_writes_its_cursors_in_one_more(
        redis_client: aioredis.Redis) -> None:
    """Given rooms without deadlines in three shards, tracked by a clock on the gateway's pipelined connection, when
    each room moves and the clock ticks, then its look at the three shards (a feed read and a due-deadline look each)
    went in one socket write and the three cursors in one more, and the cursors are where the feeds end."""
    service, rooms = await untimed_rooms(redis_client, "untimed-line", shards=3)
    line = PipelinedConnection(redis_client, timeout_s=5)
    clock = Clock(redis_client, KEYS, service.store, now_ms=At(START_MS), call_many=line.call_many)
    shards = sorted(rooms)
    try:
        for _ in range(2):  # the first reads every room of the shards, the second takes up the cursors it wrote
            await clock.tick(shards)
        for room in rooms.values():
            assert (await service.handle(record(f"{room}-join", "ann", {"kind": "join_room"}, room))).accepted
        before, writes = await redis_client.info("commandstats"), line.writes
        await _without_pipeline(redis_client, clock.tick(shards))
        after = await redis_client.info("commandstats")
    finally:
        await line.close()

    def calls(name: str) -> int:
        return after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)

    assert line.writes - writes == 2
    assert (calls("xread"), calls("zrangebyscore"), calls("set")) == (3, 3, 3)
    assert calls("evalsha") == 0 and calls("eval") == 0
    for shard in shards:
        last = (await redis_client.xrevrange(KEYS.feed(shard), count=1))[0][0]
        assert await redis_client.get(KEYS.clock_cursor(shard)) == last
