"""board@2's turn time limit: the clock times a turn out once when its limit passes; without the option, never."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from engine_test_support import KEYS

from almanac.events import codec, registry
from almanac.events.step import decode_record
from almanac.services.clock import Clock, deadline_command_id
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore

START_MS = 1_000_000
LIMIT_S = 60


def record(command_id: str, body: dict, room: str, now_ms: int = START_MS) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player="alice", server_time_ms=now_ms, body=body)


async def board_room(service: RoomService, room: str, ruleset: str = "board@2", **options: object) -> None:
    """A board room of alice's, created and joined at ``START_MS``."""
    created = await service.handle(record(f"{room}-create", {"kind": "create_room", "ruleset": ruleset,
                                                             "options": options}, room))
    assert created.accepted, created.error
    joined = await service.handle(record(f"{room}-join", {"kind": "join_room"}, room))
    assert joined.accepted, joined.error


async def clock_commands(client: aioredis.Redis, room: str) -> list[CommandRecord]:
    entries = await client.xrange(KEYS.command_stream(KEYS.shard(room)))
    sent = (decode_record(fields[b"__data__"]) for _, fields in entries)
    return [r for r in sent if r.room == room and r.command_id.startswith("clock-")]


async def event_types(store: RedisEventStore, room: str) -> list[str]:
    return [e.type for e in await store.read(room)]


class At:
    """A clock's time, set by the test."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


async def tick(clocks: list[Clock], room: str, times: int = 3) -> None:
    for _ in range(times):
        await asyncio.gather(*(clock.tick([KEYS.shard(room)]) for clock in clocks))


async def test_a_turn_whose_limit_passes_is_timed_out_once_and_the_game_goes_on(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given a board@2 room with a turn limit of a minute, and two racing clocks
    await board_room(service, "limit", turn_limit_s=LIMIT_S)
    now = At(START_MS + LIMIT_S * 1000 - 1)
    clocks = [Clock(redis_client, KEYS, store, now_ms=now) for _ in range(2)]
    # When the clocks tick a millisecond before the limit, nothing is sent
    await tick(clocks, "limit")
    assert await clock_commands(redis_client, "limit") == []
    # When the limit passes and both clocks tick, over and over
    now.ms += 1
    await tick(clocks, "limit")
    # Then one time_out for turn 0 went out as alice, under the deadline's own id
    sent = await clock_commands(redis_client, "limit")
    assert [s.command_id for s in sent] == [deadline_command_id("limit", "turn:0", "alice")]
    assert sent[0].body == {"kind": "time_out", "turn": 0}
    # and the room decides it once: the element is skipped, the next turn begins at the command's time
    outcome = await service.handle(sent[0])
    assert outcome.accepted, outcome.error
    assert (await service.handle(sent[0])).duplicate
    types = await event_types(store, "limit")
    assert types.count("board.turn_timed_out") == 1
    assert types[-1] == "board.turn_began"
    began = codec.decode_event((await store.read("limit"))[-1])
    assert (began.turn, began.at_ms) == (1, START_MS + LIMIT_S * 1000)
    # and the game goes on: a restarted clock (a new one) sends nothing more until turn 1's limit passes
    restarted = Clock(redis_client, KEYS, store, now_ms=now)
    await tick([restarted], "limit")
    assert len(await clock_commands(redis_client, "limit")) == 1
    now.ms += LIMIT_S * 1000
    await tick([restarted, *clocks], "limit")
    sent = await clock_commands(redis_client, "limit")
    assert [s.body for s in sent] == [{"kind": "time_out", "turn": 0}, {"kind": "time_out", "turn": 1}]


async def test_a_time_out_before_the_limit_or_for_an_old_turn_is_refused(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    await board_room(service, "early", turn_limit_s=LIMIT_S)
    # Given a turn with time left, a time_out is refused
    early = await service.handle(record("early-1", {"kind": "time_out", "turn": 0}, "early", START_MS + 1000))
    assert not early.accepted and early.error["code"] == "board.turn_not_over"
    # and once the limit passed, one for a turn that is not the current one is refused too
    late_ms = START_MS + LIMIT_S * 1000
    stale = await service.handle(record("early-2", {"kind": "time_out", "turn": 3}, "early", late_ms))
    assert not stale.accepted and stale.error["code"] == "board.not_current_turn"


async def test_board_rooms_without_the_option_never_time_out(redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    service = RoomService(store)
    # Given a board@2 room without turn_limit_s and a board@1 room
    await board_room(service, "free")
    await board_room(service, "seed", ruleset="board")
    # When a clock ticks a week later
    clock = Clock(redis_client, KEYS, store, now_ms=At(START_MS + 7 * 24 * 3600 * 1000))
    await tick([clock], "free")
    await tick([clock], "seed")
    # Then nothing is sent, no turn_began is written, and time_out is refused where the rules know it
    assert await clock_commands(redis_client, "free") == []
    assert await clock_commands(redis_client, "seed") == []
    later = START_MS + 7 * 24 * 3600 * 1000
    free = await service.handle(record("free-1", {"kind": "time_out", "turn": 0}, "free", later))
    assert not free.accepted and free.error["code"] == "board.no_turn_limit"
    seed = await service.handle(record("seed-1", {"kind": "time_out", "turn": 0}, "seed", later))
    assert not seed.accepted
    assert "board.turn_began" not in await event_types(store, "free")


def test_the_bare_name_board_still_means_board_at_1() -> None:
    assert registry.manifest("board").version == 1
    assert registry.manifest("board@2").version == 2
