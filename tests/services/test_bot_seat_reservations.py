"""Bot seats taken against the bound are settled by what the log records, never left to a timer: a command answered
202 gives its seat back as soon as its outcome says refused, and a seat the log handed over is never dropped."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis
from bot_gateway import NO_GATEWAY, bots_for
from engine_test_support import KEYS

from almanac.events.testing import RoomDriver
from almanac.services.bots import (
    RESERVATION_GRACE_MS,
    SeatRefused,
    bot_seats,
    bound_count,
    hand_over,
    release_seats,
    remove_bot,
    reserve_seats,
    sync_bound,
)
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.room_service import CommandRecord, RoomService
from almanac.services.settings import Settings
from almanac.storage.keys import bot_pending_key, bot_seats_key
from almanac.storage.redis_store import RedisEventStore

NOW = 5_000_000


def create(room: str, player: str, client_id: str) -> CommandRecord:
    """A create of a realm room ``room`` by ``player``, as the gateway records it (its id scoped to room and player)."""
    return CommandRecord(command_id=internal_command_id(room, player, client_id), room=room, player=player,
                         server_time_ms=NOW, body={"kind": "create_room", "ruleset": "realm",
                                                   "options": {"players": [player, "bob"]}})


async def next_bots_round(client: aioredis.Redis, store: RedisEventStore, now_ms: int = NOW + 1) -> None:
    await bots_for(NO_GATEWAY, client, store, KEYS, key=b"reservation stories", rate=0, now_ms=lambda: now_ms).tick()


async def seat_fits(client: aioredis.Redis, room: str) -> bool:
    """Whether one more bot seat fits a bound of 1 (the seat taken, then given back: nothing else changes)."""
    try:
        await reserve_seats(client, KEYS, [(room, "bob")], NOW, max_seats=1)
    except SeatRefused as refused:
        assert refused.code == "bot_seats_full"
        return False
    await client.hdel(bot_seats_key(KEYS.prefix), f"{room}\x1fbob")
    return True


async def test_a_seat_taken_for_a_create_answered_202_is_given_back_as_soon_as_the_create_is_refused(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    rooms = RoomService(store)
    # Given a deployment that holds at most 1 bot seat, and the room "duel" alice created
    assert (await rooms.handle(create("duel", "alice", "first"))).accepted
    # When mallory's create of "duel" with a bot for bob is answered 202: the seat taken for that command, undecided
    late = create("duel", "mallory", "late")
    assert await reserve_seats(redis_client, KEYS, [("duel", "bob")], NOW, max_seats=1,
                               command=late.command_id) == [("duel", "bob")]
    assert not await seat_fits(redis_client, "elsewhere")
    await next_bots_round(redis_client, store)
    assert await bound_count(redis_client, KEYS) == 1  # undecided: kept
    # and the engine then refuses the create
    refused = await rooms.handle(late)
    assert (refused.error or {}).get("code") == "room_exists"
    # Then the bots' next round gives the seat back at once (not after the 10-minute grace), and another fits
    await next_bots_round(redis_client, store)
    assert await bound_count(redis_client, KEYS) == 0
    assert await redis_client.hlen(bot_pending_key(KEYS.prefix)) == 0
    assert await seat_fits(redis_client, "elsewhere")


async def test_a_seat_taken_for_a_create_answered_202_is_played_once_the_create_is_recorded(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a create of "quiet" with a bot for bob answered 202
    later = create("quiet", "alice", "c1")
    await reserve_seats(redis_client, KEYS, [("quiet", "bob")], NOW, max_seats=1, command=later.command_id)
    # When the engine records it
    assert (await RoomService(store).handle(later)).accepted
    # Then the bots' next round hands bob's seat to a bot (written to its shard's hash), still counted once
    await next_bots_round(redis_client, store)
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("quiet", "bob")]
    assert await bound_count(redis_client, KEYS) == 1 and await redis_client.hlen(bot_pending_key(KEYS.prefix)) == 0


async def test_a_create_answered_202_sets_its_bot_delay_when_its_seats_are_played(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a create of "patient" with a bot for bob and a 700 ms move delay (bot_delay_ms), answered 202
    later = create("patient", "alice", "c1")
    await reserve_seats(redis_client, KEYS, [("patient", "bob")], NOW, max_seats=1, command=later.command_id,
                        delay_ms=700)
    undecided = KEYS.bot_delays(KEYS.shard("patient"))
    await next_bots_round(redis_client, store)
    assert await redis_client.hget(undecided, "patient") is None  # no room yet: no delay kept for it
    # When the engine records it, then the bots' next round keeps the room's delay along with bob's seat
    assert (await RoomService(store).handle(later)).accepted
    await next_bots_round(redis_client, store)
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("patient", "bob")]
    assert int(await redis_client.hget(undecided, "patient")) == 700


async def test_a_seat_taken_for_a_command_that_never_reached_a_room_is_given_back_after_the_grace(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a seat taken for a create its gateway never sent (it died after the 202, say)
    await reserve_seats(redis_client, KEYS, [("lost", "bob")], NOW, max_seats=1,
                        command=create("lost", "alice", "c1").command_id)
    # When the bots' rounds run within the grace, it is kept; past it, given back
    await next_bots_round(redis_client, store, NOW + RESERVATION_GRACE_MS - 1)
    assert await bound_count(redis_client, KEYS) == 1
    await next_bots_round(redis_client, store, NOW + RESERVATION_GRACE_MS)
    assert await bound_count(redis_client, KEYS) == 0 and await redis_client.hlen(bot_pending_key(KEYS.prefix)) == 0


async def test_a_seat_taken_for_a_command_decided_long_after_its_gateway_stopped_waiting_is_still_there(
        redis_client: aioredis.Redis) -> None:
    """Why the grace is not the gateway's wait: a command answered 202 stays in its shard's command stream until an
    engine decides it, however late (a backlog, an engine away); nothing in the deployment bounds that."""
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a create of "backlog" with a bot for bob, answered 202 when the gateway's wait ran out
    late = create("backlog", "alice", "c1")
    await reserve_seats(redis_client, KEYS, [("backlog", "bob")], NOW, max_seats=1, command=late.command_id)
    # When the bots' rounds run a hundred times that wait later (still within the grace), the engine still behind
    waited = 100 * Settings.model_fields["command_timeout_ms"].default
    assert waited < RESERVATION_GRACE_MS
    await next_bots_round(redis_client, store, NOW + waited)
    # Then the seat is still taken for the command
    assert await bound_count(redis_client, KEYS) == 1 and await redis_client.hlen(bot_pending_key(KEYS.prefix)) == 1
    # and once the engine records the create, the bots play it, counted once
    assert (await RoomService(store).handle(late)).accepted
    await next_bots_round(redis_client, store, NOW + waited + 1)
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("backlog", "bob")]
    assert await bound_count(redis_client, KEYS) == 1 and await redis_client.hlen(bot_pending_key(KEYS.prefix)) == 0


def room_whose_log_hands_bob_over(created_at_ms: int):
    driver = RoomDriver("handed", b"bot seat reservations seed 32 by", created_at_ms)
    driver.send("alice", {"kind": "create_room", "ruleset": "realm", "options": {"players": ["alice", "bob"]},
                          "seat_bots": True})
    driver.send("alice", {"kind": "join_room"})
    driver.send("bob", {"kind": "join_room"})
    driver.send("bob", {"kind": "hand_to_bot"})
    assert driver.state.bot_seats == ("bob",)
    return driver.state


@pytest.mark.parametrize("sync_after_ms", [0, 60_000, 3_600_000, 30 * 86_400_000])
async def test_a_seat_the_log_handed_over_stays_counted_however_old_its_room(redis_client: aioredis.Redis,
                                                                            sync_after_ms: int) -> None:
    # Given a room created an hour (or a month) before, whose log hands bob's seat to a bot
    state = room_whose_log_hands_bob_over(created_at_ms=NOW)
    # and the clock that took the seat in the bound for it (as hand_over does) stopped before writing its shard's hash
    assert await reserve_seats(redis_client, KEYS, [("handed", "bob")], state.created_at_ms, max_seats=None,
                               log=True) == [("handed", "bob")]
    # When the bots process matches the bound to the shards' seats, at any time after
    await sync_bound(redis_client, KEYS, now_ms=NOW + sync_after_ms)
    # Then the seat is still counted, and written to its shard's hash for a bot to play: the log decided it
    assert await bound_count(redis_client, KEYS) == 1
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("handed", "bob")]


@pytest.mark.parametrize("held_before", [False, True])
async def test_hand_over_marks_its_seats_as_the_logs(redis_client: aioredis.Redis, held_before: bool) -> None:
    # Given (or not) bob's seat already taken in the bound for his leave, answered 202
    state = room_whose_log_hands_bob_over(created_at_ms=NOW)
    if held_before:
        leave = internal_command_id("handed", "bob", "leave")
        await reserve_seats(redis_client, KEYS, [("handed", "bob")], NOW, max_seats=1, command=leave)
    # When the clock hands over the seat the room's log gave a bot
    await hand_over(redis_client, KEYS, state, set())
    # Then its place in the bound says the log handed it (so neither sync_bound nor a settled command gives it back)
    entry = json.loads(await redis_client.hget(bot_seats_key(KEYS.prefix), "handed\x1fbob"))
    assert entry["log"] is True
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("handed", "bob")]


async def test_a_leave_given_up_after_the_log_handed_its_seat_over_keeps_the_seat_counted(
        redis_client: aioredis.Redis) -> None:
    # Given bob's seat taken in the bound for his leave, then handed over by the room's log (the clock's hand_over)
    state = room_whose_log_hands_bob_over(created_at_ms=NOW)
    leave = internal_command_id("handed", "bob", "leave")
    taken = await reserve_seats(redis_client, KEYS, [("handed", "bob")], NOW, max_seats=1, command=leave)
    await hand_over(redis_client, KEYS, state, set())
    # When the gateway gives up on the leave (its submit failed) and releases what it took
    await release_seats(redis_client, KEYS, taken)
    # Then the seat the log handed over stays counted (a bound of 1 is still full) and stays with its bot
    assert await bound_count(redis_client, KEYS) == 1
    assert not await seat_fits(redis_client, "another")
    assert await bot_seats(redis_client, KEYS, range(KEYS.shard_count)) == [("handed", "bob")]
    # and only removing the bot itself gives the seat back
    assert await remove_bot(redis_client, KEYS, "handed", "bob")
    assert await bound_count(redis_client, KEYS) == 0
