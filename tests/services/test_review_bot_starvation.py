"""Adversarial review: a player who creates rooms whose bot seats sort first must not starve every other bot seat.

``Bots.tick`` plays at most ``max_rooms`` seats, and on main it always took the first ``max_rooms`` in sorted
order: rooms that never move (a bot waiting for a turn that never comes, or a seat whose join is refused) kept
that window for ever, and every other room's bot never acted again. Creating rooms with bot seats is open to
any player (the create request's ``bots``, up to 16 per room), so a handful of stuck rooms named ``0…`` was a
denial of service against every bot seat of the deployment.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from bot_gateway import bots_for, served_gateway
from engine_test_support import KEYS

from almanac.services.bots import ATTEMPTS, RETRY_AFTER_MS, add_bot
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore


async def created(store: RedisEventStore, room: str) -> None:
    outcome = await RoomService(store).handle(CommandRecord(
        command_id=f"{room}-c", room=room, player="ann", server_time_ms=1_000,
        body={"kind": "create_room", "ruleset": "board", "options": {"player": "robo"}}))
    assert outcome.accepted


async def test_rooms_that_never_move_do_not_starve_a_later_rooms_bot(
        redis_client: aioredis.Redis, redis_url: str) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given mallory's two rooms, named to sort first, each with a bot seat, and carol's room with one
    for room in ("0-mallory-a", "0-mallory-b", "carols-map"):
        await created(store, room)
        await add_bot(redis_client, KEYS, room, "robo", 0)
    now = [10_000]
    # When the bots process runs for long enough that mallory's seats have used up every attempt
    # (no engine runs: nothing they send ever moves their rooms; the gateway answers each join 202)
    async with served_gateway(redis_url, ALMANAC_COMMAND_TIMEOUT_MS="50") as gateway:
        bots = bots_for(gateway, redis_client, store, KEYS, key=b"test bots", max_rooms=2, rate=0,
                        now_ms=lambda: now[0])
        for _ in range(3 * ATTEMPTS):
            await bots.tick()
            now[0] += RETRY_AFTER_MS
    # Then carol's seat was played too: the window over the seats moves on
    carol = bots.seats.get(("carols-map", "robo"))
    assert carol is not None and carol.sent_ms > 0, "carol's bot never acted: mallory's rooms held the window"
