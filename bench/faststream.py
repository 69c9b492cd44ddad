"""`almanac bench faststream`: a FastStream subscriber's CPU per message against the raw redis-py reads the services use.

The two places FastStream could carry Almanac's traffic, each measured both ways in the same run, alternated:

- the outcome channels (pub/sub): the gateway's one subscription (``services/gateway/outcomes.py``: redis-py's
  ``PubSub.get_message``) against ``@broker.subscriber(channel)``; messages published from another process at
  about 10,000/s, 20 at a time, as an engine publishes a batch's outcomes;
- a shard feed (a stream): the projector's ``XREAD`` of up to 500 entries from a cursor against
  ``@broker.subscriber(stream=StreamSub(..., last_id="0"))``, one message per call and ``batch=True``.

The figure is the consuming process's CPU (user + system) per message, from its first message to its last; the
publisher runs in a process of its own. Design ruling: docs/design-rulings.md, "FastStream".
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable

import redis
import redis.asyncio as aioredis
from rich.table import Table

from almanac.bench.common import output_console

# Its clients are redis-py's own, built here and not by services.bootstrap, on purpose: FastStream's broker builds a
# plain redis-py client of its own, so the baseline it is measured against is redis-py as it comes (what the
# gateway's and the projector's reads cost without any of our client's options); the fills and the publisher are
# a plain client too, off the measured path (tests/kernel/test_composition_root.py names this module).

PAYLOAD = os.urandom(160)  # about an Outcome's msgpack size
FEED_BATCH = 500  # the projector's default --batch-size
PUBLISH_GROUP = 20


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _publish_soon(url: str, channel: str, count: int) -> subprocess.Popen:
    """Another process that publishes ``count`` messages on ``channel``, PUBLISH_GROUP at a time, ~10,000/s."""
    code = f"""
import time, redis
client = redis.Redis.from_url({url!r})
time.sleep(0.3)
for _ in range(0, {count}, {PUBLISH_GROUP}):
    pipe = client.pipeline(transaction=False)
    for _ in range({PUBLISH_GROUP}):
        pipe.publish({channel!r}, {PAYLOAD!r})
    pipe.execute()
    time.sleep(0.002)
"""
    return subprocess.Popen([sys.executable, "-c", code])


async def raw_channel(url: str, count: int) -> float:
    """CPU per message of redis-py's PubSub read, as the gateway's outcome waiter reads its channels."""
    client = aioredis.Redis.from_url(url)
    pubsub = client.pubsub()
    await pubsub.subscribe("bench-fs:raw")
    while await pubsub.get_message(timeout=1.0) is None:  # the subscription's confirmation
        pass
    publisher = _publish_soon(url, "bench-fs:raw", count)
    seen, started = 0, 0.0
    try:
        while seen < count:
            message = await pubsub.get_message(timeout=1.0)
            if message is not None and message["type"] == "message":
                if seen == 0:
                    started = _cpu_s()
                seen += 1
        return (_cpu_s() - started) / (count - 1)
    finally:
        publisher.wait()
        await pubsub.aclose()
        await client.aclose()


async def faststream_channel(url: str, count: int) -> float:
    """CPU per message of a FastStream subscriber on a channel."""
    from faststream.redis import RedisBroker  # noqa: PLC0415 - the benchmark's dependency only

    broker = RedisBroker(url, logger=None)  # no log line per message: the cheapest it gets
    state = {"seen": 0, "started": 0.0}
    done = asyncio.Event()

    @broker.subscriber("bench-fs:broker")
    async def handle(body: bytes) -> None:
        if state["seen"] == 0:
            state["started"] = _cpu_s()
        state["seen"] += 1
        if state["seen"] >= count:
            done.set()

    await broker.start()
    await asyncio.sleep(0.2)
    publisher = _publish_soon(url, "bench-fs:broker", count)
    try:
        await done.wait()
        return (_cpu_s() - state["started"]) / (count - 1)
    finally:
        publisher.wait()
        await broker.stop()


def _fill(url: str, stream: str, count: int) -> None:
    """``count`` feed entries (room, first and last version) in ``stream``."""
    with redis.Redis.from_url(url) as client:
        client.delete(stream)
        for start in range(0, count, 1_000):
            with client.pipeline(transaction=False) as pipe:
                for index in range(start, min(start + 1_000, count)):
                    pipe.xadd(stream, {"r": f"room-{index % 500}", "v": str(index), "l": str(index)})
                pipe.execute()


async def raw_feed(url: str, count: int) -> float:
    """CPU per entry of the projector's read: XREAD of up to FEED_BATCH entries from its cursor."""
    _fill(url, "bench-fs:feed-raw", count)
    client = aioredis.Redis.from_url(url)
    seen, cursor, started = 0, "0", _cpu_s()
    try:
        while seen < count:
            for _stream, entries in await client.xread({"bench-fs:feed-raw": cursor}, count=FEED_BATCH, block=1000):
                for entry_id, _fields in entries:
                    cursor = entry_id
                    seen += 1
        return (_cpu_s() - started) / count
    finally:
        await client.delete("bench-fs:feed-raw")
        await client.aclose()


async def faststream_feed(url: str, count: int, batch: bool) -> float:
    """CPU per entry of a FastStream stream subscriber from the stream's start (``batch``: a list per call)."""
    from faststream.redis import RedisBroker, StreamSub  # noqa: PLC0415

    stream = f"bench-fs:feed-broker-{int(batch)}"
    _fill(url, stream, count)
    broker = RedisBroker(url, logger=None)
    state = {"seen": 0}
    done = asyncio.Event()

    @broker.subscriber(stream=StreamSub(stream, last_id="0", batch=batch, max_records=FEED_BATCH))
    async def handle(body: object) -> None:
        state["seen"] += len(body) if batch else 1  # type: ignore[arg-type]
        if state["seen"] >= count:
            done.set()

    started = _cpu_s()
    await broker.start()
    try:
        await done.wait()
        return (_cpu_s() - started) / count
    finally:
        await broker.stop()
        with redis.Redis.from_url(url) as client:
            client.delete(stream)


def run(url: str, count: int, rounds: int) -> dict[str, list[float]]:
    """Every path ``rounds`` times, alternated; CPU microseconds per message of each run, by path."""
    paths: dict[str, Callable[[], Awaitable[float]]] = {
        "outcome channel: redis-py PubSub (the gateway's)": lambda: raw_channel(url, count),
        "outcome channel: FastStream subscriber": lambda: faststream_channel(url, count),
        "shard feed: redis-py XREAD (the projector's)": lambda: raw_feed(url, count),
        "shard feed: FastStream stream subscriber": lambda: faststream_feed(url, count, batch=False),
        "shard feed: FastStream stream subscriber, batch=True": lambda: faststream_feed(url, count, batch=True),
    }
    figures: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, measure in paths.items():
            figures[name].append(asyncio.run(measure()) * 1e6)
    return figures


def main(url: str, count: int = 20_000, rounds: int = 3) -> dict[str, list[float]]:
    figures = run(url, count, rounds)
    table = Table("path", "CPU us per message (each run)", "median", "x the raw read", title=(
        f"{count:,} messages per run, {rounds} runs alternated; the consuming process's CPU"))
    for name, runs in figures.items():
        raw = next(v for k, v in figures.items() if k.split(":")[0] == name.split(":")[0] and "redis-py" in k)
        ratio = statistics.median(runs) / statistics.median(raw)
        table.add_row(name, ", ".join(f"{v:.1f}" for v in runs), f"{statistics.median(runs):.1f}", f"{ratio:.1f}")
    output_console().print(table)
    return figures
