"""Idle services wait instead of polling, and what they wait for ends the wait: a feed moving or a deadline due (the
clock), a seat handed (the bots), a delivery due (the notifier). Each waits up to a minute here, so a story that
passes was woken, not polled."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
import redis.asyncio as aioredis
from bot_gateway import NO_GATEWAY, bots_for
from waiting import wait_for

from almanac.events import codec
from almanac.services.bots import add_bot
from almanac.services.clock import Clock, _Pending
from almanac.services.notifier import Notifier, Subscription
from almanac.services.settings import Settings
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

KEYS = Keys(16)
LONG_WAIT_S = 60.0  # what each service would wait with nothing to wake it: far past every wait_for below
ROOM = "idle-room"
SHARD = KEYS.shard(ROOM)


@contextlib.asynccontextmanager
async def running(loop: Callable[[asyncio.Event], Awaitable[None]]) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(loop(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def idle_clock(client: aioredis.Redis) -> Clock:
    clock = Clock(client, KEYS, RedisEventStore(client, shard_count=16))
    clock.idle_wait_s = LONG_WAIT_S
    return clock


async def waiting_between_ticks(clock: Clock) -> None:
    """Until the clock knows its shard's cursor (it then blocks between ticks)."""
    await wait_for(lambda: asyncio.sleep(0, SHARD in clock._cursors), what="the clock's cursor known")


async def test_an_idle_clock_tracks_a_room_as_soon_as_its_shard_feed_moves(redis_client: aioredis.Redis) -> None:
    # Given a clock over one shard with nothing to do
    clock = idle_clock(redis_client)
    async with running(lambda stop: clock.run(lambda: [SHARD], stop)):
        await waiting_between_ticks(clock)
        # When a room of the shard moves
        await redis_client.xadd(KEYS.feed(SHARD), {"r": ROOM, "v": 1, "l": 1})
        # Then the clock looks at it (tracked), long before its longest wait
        await wait_for(lambda: asyncio.sleep(0, clock.tracked >= 1), what="the room tracked")


async def test_an_idle_clock_sends_a_deadline_when_it_falls_due(redis_client: aioredis.Redis) -> None:
    # Given a clock over one shard, waiting, and a deadline recorded due in 300 ms
    clock = idle_clock(redis_client)
    async with running(lambda stop: clock.run(lambda: [SHARD], stop)):
        await waiting_between_ticks(clock)
        due_ms = clock.now_ms() + 300
        pending = codec.encode(_Pending("season:0", due_ms, "alice", {"kind": "end_season"}))
        await redis_client.hset(KEYS.deadline_commands(SHARD), ROOM, pending)
        await redis_client.zadd(KEYS.deadlines(SHARD), {ROOM: due_ms})
        # and the feed moves (as it does when the clock's tracker records a deadline): the wait reads the new due time
        await redis_client.xadd(KEYS.feed(SHARD), {"r": "another-room", "v": 1, "l": 1})
        # Then its command is sent once due, long before the clock's longest wait
        await wait_for(lambda: redis_client.xlen(KEYS.command_stream(SHARD)), what="the deadline's command sent")
        assert clock.fired == 1


async def test_a_bots_process_with_no_seat_reads_a_seat_as_soon_as_it_is_handed(redis_client: aioredis.Redis) -> None:
    # Given a bots process with no seat to play, waiting
    bots = bots_for(NO_GATEWAY, redis_client, RedisEventStore(redis_client, shard_count=16), KEYS, key=b"idle bots",
                    rate=0)
    bots.idle_wait_s = LONG_WAIT_S
    async with running(bots.run):
        await wait_for(lambda: asyncio.sleep(0, bots.woken_from is not None), what="the bots waiting")
        # When a seat is handed to a bot
        await add_bot(redis_client, KEYS, ROOM, "bob", 1_000)
        # Then the next round reads it, long before the process's longest wait
        await wait_for(lambda: asyncio.sleep(0, bots.read == 1), what="the seat read")


async def test_an_idle_notifier_attempts_a_delivery_when_it_falls_due(redis_client: aioredis.Redis) -> None:
    # Given a notifier with nothing to deliver, and a delivery whose retry falls due in 300 ms (to nowhere: refused)
    notifier = Notifier(redis_client, RedisEventStore(redis_client, shard_count=16),
                        Settings(webhook_max_attempts=5), keys=KEYS)
    notifier.deliver_idle_s = LONG_WAIT_S
    record = {"id": "d_1", "subscription": "wh_1", "url": "http://127.0.0.1:9/", "secret": "s", "attempts": 0,
              "payload": {"kind": "room_ended"}, "appended_ms": 0, "enqueued_ms": 0, "last_error": ""}
    await redis_client.hset(KEYS.webhook_deliveries(), "d_1", json.dumps(record))
    await redis_client.zadd(KEYS.webhook_outbox(), {"d_1": notifier.now_ms() + 300})
    try:
        async with running(notifier._deliver_loop):
            # Then it is attempted once due (a failed attempt counted), long before the notifier's longest wait
            await wait_for(lambda: redis_client.hget(KEYS.webhook_stats(), "failed_attempts"), what="an attempt")
    finally:
        await notifier.aclose()


async def test_an_idle_notifier_delivers_what_it_enqueues_at_once(redis_client: aioredis.Redis) -> None:
    from test_cli_operator import EXAMPLES, play  # noqa: PLC0415 - the scenario player of the CLI stories

    # Given a notifier with nothing to deliver, waiting (its longest wait: a minute), and a deployment-wide
    # subscription (to nowhere: every attempt is refused and counted)
    store = RedisEventStore(redis_client, shard_count=16)
    notifier = Notifier(redis_client, store, Settings(webhook_max_attempts=5), keys=KEYS)
    notifier.deliver_idle_s = LONG_WAIT_S
    subscription = Subscription(id="wh_1", url="http://127.0.0.1:9/", secret="s", scope="deployment")
    await redis_client.hset(KEYS.webhook_subscriptions(), "wh_1", msgspec.json.encode(subscription))
    try:
        async with running(notifier._deliver_loop):
            await asyncio.sleep(0.2)  # (the loop has claimed nothing and waits; were it not waiting yet, it would
            # claim the delivery at its first look, and the story would pass without showing the wake-up)
            # When a room ends and the notifier reads the feed, enqueuing the room_ended notice
            await play(store, EXAMPLES / "realm.jsonl")
            assert await notifier.notice_once() >= 1
            # Then the delivery is attempted at once, not after the minute's wait
            await wait_for(lambda: redis_client.hget(KEYS.webhook_stats(), "failed_attempts"), what="an attempt")
    finally:
        await notifier.aclose()
