"""ALMANAC_MAX_BOT_SEATS holds under racing asks: a seat is counted and taken in one script, never check-then-add."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis
from engine_test_support import KEYS

from almanac.events.testing import RoomDriver
from almanac.services.bots import (
    SeatRefused,
    add_bot,
    admit_seat,
    bot_seats,
    bound_count,
    release_seats,
    remove_bot,
    reserve_seats,
    sync_bound,
)
from almanac.storage.keys import bot_seats_key

BOUND = 12
RACERS = 120
CONNECTIONS = 8


def empty_seat_room():
    """A realm room's state whose seat ``bob`` is empty (alice, its creator, is seated)."""
    driver = RoomDriver("race", b"bot seat bound race seed 32 byte", 1_000)
    driver.send("alice", {"kind": "create_room", "ruleset": "realm", "options": {"players": ["alice", "bob"]}})
    driver.send("alice", {"kind": "join_room"})
    return driver.state


async def race(redis_url: str, ask) -> tuple[int, int]:
    """``RACERS`` asks for bob's empty seat of as many rooms (spread over the shards), over ``CONNECTIONS``
    connections, each as the gateway does it: admitted (``admit_seat``), then handed (``ask(client, room)``).
    Every ask is admitted before any is handed (a barrier between the two steps): the worst interleaving a
    check-then-add can meet, made certain instead of likely. (handed, refused bot_seats_full)."""
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(CONNECTIONS)]
    state = empty_seat_room()
    admitted = asyncio.Barrier(RACERS)

    async def one(number: int) -> str:
        client, room = clients[number % CONNECTIONS], f"race-{number}"
        try:
            await admit_seat(client, KEYS, None, state, room, "bob", max_seats=BOUND)
        except SeatRefused as refused:
            assert refused.code == "bot_seats_full" and refused.status == 429
            await admitted.wait()
            return "refused"
        await admitted.wait()
        try:
            await ask(client, room)
        except SeatRefused as refused:
            assert refused.code == "bot_seats_full" and refused.status == 429
            return "refused"
        return "handed"

    try:
        answers = await asyncio.gather(*(one(n) for n in range(RACERS)))
    finally:
        for client in clients:
            await client.aclose()
    return answers.count("handed"), answers.count("refused")


async def test_racing_asks_for_bot_seats_never_pass_the_deployments_bound(redis_client: aioredis.Redis,
                                                                           redis_url: str) -> None:
    # Given a deployment whose bots already hold 2 seats of at most 12
    await add_bot(redis_client, KEYS, "elsewhere", "zed", 1, max_seats=BOUND)
    await add_bot(redis_client, KEYS, "elsewhere", "yan", 1, max_seats=BOUND)
    # When 120 asks for empty seats of 120 rooms race, each admitted then handed as the gateway does, every one of
    # them admitted (against the same 2 held) before any is handed
    handed, refused = await race(redis_url, lambda client, room: add_bot(client, KEYS, room, "bob", 5,
                                                                         max_seats=BOUND))
    # Then exactly the 10 free seats are handed and every other ask is refused bot_seats_full
    assert (handed, refused) == (BOUND - 2, RACERS - BOUND + 2)
    # and the seats the bots play, and those the bound counts, are the bound's
    assert len(await bot_seats(redis_client, KEYS, range(KEYS.shard_count))) == BOUND
    assert await bound_count(redis_client, KEYS) == BOUND


async def test_racing_creates_take_their_seats_all_or_none_within_the_bound(redis_client: aioredis.Redis,
                                                                            redis_url: str) -> None:
    # Given a deployment whose bots hold 2 seats of at most 12
    await reserve_seats(redis_client, KEYS, [("elsewhere", "zed"), ("elsewhere", "yan")], 1, max_seats=BOUND)
    clients = [aioredis.Redis.from_url(redis_url) for _ in range(CONNECTIONS)]

    async def create(number: int) -> int:  # a create handing 3 seats of its room to bots, as the gateway takes them
        room = f"create-{number}"
        try:
            seats = [(room, "b1"), (room, "b2"), (room, "b3")]
            return len(await reserve_seats(clients[number % CONNECTIONS], KEYS, seats, 5, max_seats=BOUND))
        except SeatRefused:
            return 0

    try:
        # When 120 creates race for their seats, all their scripts sent at once over 8 connections
        taken = await asyncio.gather(*(create(n) for n in range(RACERS)))
    finally:
        for client in clients:
            await client.aclose()
    # Then exactly 3 creates take their 3 seats (9 of the 10 free), the others none: no create is split
    assert sorted(taken, reverse=True)[:4] == [3, 3, 3, 0] and sum(taken) == 9
    assert await bound_count(redis_client, KEYS) == 11


async def test_the_race_is_real_a_check_then_add_passes_the_bound(redis_client: aioredis.Redis,
                                                                   redis_url: str) -> None:
    """The story above can fail: the same race, each ask checked (admit_seat) then added without the bound in the
    same step (the old check-then-add), hands every seat asked for: all were admitted against the same count."""
    handed, refused = await race(redis_url, lambda client, room: add_bot(client, KEYS, room, "bob", 5))
    assert (handed, refused) == (RACERS, 0)
    assert len(await bot_seats(redis_client, KEYS, range(KEYS.shard_count))) == RACERS


async def test_seats_taken_for_a_handover_that_never_happened_are_given_back(redis_client: aioredis.Redis) -> None:
    # Given a bound of 2, with one seat taken for a create that was refused and one for a leave never finished
    taken = await reserve_seats(redis_client, KEYS, [("refused-room", "bob")], 1_000, max_seats=2)
    assert taken == [("refused-room", "bob")]
    await reserve_seats(redis_client, KEYS, [("lost-room", "bob")], 1_000, max_seats=2)
    # When the refused create gives its seat back, then one more seat fits, and the next does not
    await release_seats(redis_client, KEYS, taken)
    assert await add_bot(redis_client, KEYS, "room-a", "bob", 2_000, max_seats=2)
    try:
        await add_bot(redis_client, KEYS, "room-b", "bob", 2_000, max_seats=2)
        raise AssertionError("a seat past the bound was handed")
    except SeatRefused as refused:
        assert refused.code == "bot_seats_full"
    # When the bots process matches the bound's count to the shards' seats long after, the lost seat is given back,
    # and a seat written to a shard's hash alone (before the bound had its own key) is counted
    await redis_client.hset(f"{KEYS.prefix}:{{s00}}:bots", "old-room\x1fbob", '{"room": "old-room", "seat": "bob"}')
    assert await sync_bound(redis_client, KEYS, now_ms=1_000 + 3_600_000) == (1, 1)
    assert sorted(await redis_client.hkeys(bot_seats_key(KEYS.prefix))) == [b"old-room\x1fbob", b"room-a\x1fbob"]
    # and removing a bot seat frees its place in the bound
    assert await remove_bot(redis_client, KEYS, "room-a", "bob")
    assert await bound_count(redis_client, KEYS) == 1
