"""A slow webhook receiver delays only its own deliveries: two real receivers, one notifier, one real Redis."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from suite_settings import suite_settings
from webhook_receiver import Receiver  # noqa: E402

from almanac.events import codec  # noqa: E402
from almanac.events.testing import RoomDriver  # noqa: E402
from almanac.services.notifier import Notice, Notifier, Subscription  # noqa: E402
from almanac.storage.keys import Keys  # noqa: E402
from almanac.storage.redis_store import RedisEventStore  # noqa: E402

SLOW_S = 2.0
ROOMS = 12


def ended(index: int) -> tuple:
    room = RoomDriver(f"hook-iso-{index}")
    room.apply("ann", {"kind": "create_room", "ruleset": "board"})
    room.apply("ann", {"kind": "join_room"})
    [envelope] = room.send("ann", {"kind": "end_room", "reason": "over"})
    return envelope, codec.decode_event(envelope)


@contextlib.asynccontextmanager
async def slow_and_healthy(redis_url: str, tmp_path: Path, prefix: str) -> AsyncIterator[tuple]:
    """A notifier with 16 deliveries in flight at most, on keys of its own (no other notifier takes them), and two
    receivers: one that answers each POST after ``SLOW_S``, one that answers at once. Yields (client, notifier,
    keys, slow, healthy); the receivers are stopped and the keys deleted after."""
    client = aioredis.Redis.from_url(redis_url)
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path)).model_copy(
        update={"webhook_concurrency": 16})
    slow, healthy = Receiver().start(), Receiver().start()
    slow.delay_s = SLOW_S
    keys = Keys(settings.shard_count, prefix)
    notifier = Notifier(client, RedisEventStore(client, settings.shard_count, keys.prefix, keys=keys), settings,
                        keys=keys)
    try:
        yield client, notifier, keys, slow, healthy
    finally:
        slow.stop()
        healthy.stop()
        await client.delete(keys.webhook_outbox(), keys.webhook_deliveries(), keys.webhook_stats())
        await notifier.aclose()
        await client.aclose()


async def test_a_receiver_that_answers_slowly_does_not_delay_a_healthy_ones_notices(redis_url: str,
                                                                                  tmp_path: Path) -> None:
    # Given a notifier with 16 deliveries in flight at most, and two deployment subscriptions: one to a receiver
    # that answers each POST after 2 s, one to a receiver that answers at once
    async with slow_and_healthy(redis_url, tmp_path, "alm-isolation-test") as (client, notifier, keys, slow, healthy):
        subscriptions = [Subscription(id=f"wh_000000000000{name}", url=receiver.url + "/hook", secret="s" * 32,
                                      scope="deployment") for name, receiver in (("51", slow), ("a1", healthy))]
        stop = asyncio.Event()
        running = asyncio.create_task(notifier.run(stop))
        try:
            # When 12 rooms end, each room's notice enqueued for both (24 deliveries, more than the 16 in flight)
            enqueued_at: dict[str, float] = {}
            for index in range(ROOMS):
                envelope, event = ended(index)
                notice = Notice(kind="room_ended", room=envelope.room, version=envelope.version, player=None)
                for subscription in subscriptions:
                    assert await notifier._enqueue(subscription, notice, envelope, event) == 1  # noqa: SLF001
                enqueued_at[envelope.room] = time.time()
            # Then the healthy receiver has each notice well within the slow one's delay of its enqueue (the old batches
            # held the healthy one's next notices until the slow one's in the batch answered, 2 s later)
            got = await asyncio.to_thread(healthy.wait_for, lambda got: len(got) >= ROOMS, 2 * SLOW_S)
            assert max(item["at"] - enqueued_at[item["json"]["room"]] for item in got) < 0.75 * SLOW_S
            # And the slow one still gets every notice, each once, and nothing is retried or set aside
            heard = await asyncio.to_thread(slow.wait_for, lambda got: len(got) >= ROOMS, 20 * SLOW_S)
            await asyncio.sleep(0.5)
            for receiver in (slow, healthy):
                ids = Counter(item["json"]["delivery_id"] for item in receiver.received)
                assert len(ids) == ROOMS and set(ids.values()) == {1}
            assert {item["json"]["room"] for item in heard} == {f"hook-iso-{index}" for index in range(ROOMS)}
            counters = await client.hgetall(keys.webhook_stats())
            assert int(counters[b"delivered"]) == 2 * ROOMS and b"failed_attempts" not in counters
            assert await client.zcard(keys.webhook_outbox()) == 0
        finally:
            stop.set()
            await asyncio.wait_for(running, 4 * SLOW_S)


async def test_a_slow_receivers_backlog_at_the_head_of_the_outbox_hides_nothing_behind_it(redis_url: str,
                                                                                          tmp_path: Path) -> None:
    # Given a notifier with 16 deliveries in flight at most, 100 notices due to a receiver that answers after 2 s
    # (at the outbox's head: more than a claim looks at), and after them one notice to a healthy receiver
    async with slow_and_healthy(redis_url, tmp_path, "alm-isolation-head-test") as (client, notifier, keys, slow,
                                                                                    healthy):
        to_slow, to_healthy = (Subscription(id=f"wh_000000000000{name}", url=receiver.url, secret="s" * 32,
                                            scope="deployment") for name, receiver in (("52", slow), ("a2", healthy)))
        for index in range(101):
            envelope, event = ended(index)
            notice = Notice(kind="room_ended", room=envelope.room, version=envelope.version, player=None)
            assert await notifier._enqueue(to_slow if index < 100 else to_healthy, notice, envelope, event) == 1  # noqa: SLF001
        stop = asyncio.Event()
        started = time.time()
        running = asyncio.create_task(notifier.run(stop))
        try:
            # When the notifier runs, then the healthy receiver has its notice well within the slow one's first answer
            # (the old batches of 16 held it for six of them, 12 s)
            [got] = await asyncio.to_thread(healthy.wait_for, lambda got: len(got) >= 1, 4 * SLOW_S)
            assert got["at"] - started < 0.75 * SLOW_S
        finally:
            stop.set()
            await asyncio.wait_for(running, 4 * SLOW_S)
