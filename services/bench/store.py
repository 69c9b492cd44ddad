"""`almanac bench store`: event-store rates against raw pipelined XADD measured in the same run."""

from __future__ import annotations

import asyncio
import statistics
import time

import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

from almanac.events import codec
from almanac.events.step import replay
from almanac.services.bench.common import trivial_log
from almanac.services.redis_client import connect
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

BATCH = 100
ROUNDS = 3


async def _measure(url: str, events: int) -> list[tuple[str, float]]:
    client = connect(url)  # our client: hiredis command packing
    prefix = f"bench{int(time.time())}"
    store = RedisEventStore(client, shard_count=16, prefix=prefix)
    envelopes = trivial_log(events, "bench-room")
    encoded = [codec.encode_envelope(e) for e in envelopes]
    results: list[tuple[str, float]] = []
    try:
        # Baseline and ours alternate over a few rounds and report medians: a 2-core shared machine
        # drifts by 2x within a minute, and alternating keeps that drift out of the ratio.
        plain = aioredis.Redis.from_url(url)  # redis-py exactly as it comes: the baseline
        baseline_rates, packed_rates, batched_rates = [], [], []

        async def raw_xadd(raw_client: aioredis.Redis, key: str) -> float:
            start = time.perf_counter()
            for offset in range(0, events, BATCH):
                async with raw_client.pipeline(transaction=False) as pipe:
                    for data in encoded[offset : offset + BATCH]:
                        pipe.xadd(key, {"e": data})
                    await pipe.execute()
            rate = events / (time.perf_counter() - start)
            await raw_client.delete(key)
            return rate

        for round_number in range(ROUNDS):
            baseline_rates.append(await raw_xadd(plain, f"{prefix}:raw:{round_number}"))
            packed_rates.append(await raw_xadd(client, f"{prefix}:packed:{round_number}"))
            room = "bench-room" if round_number == 0 else f"bench-room-{round_number}"
            room_envelopes = envelopes if round_number == 0 else trivial_log(events, room)
            start = time.perf_counter()
            for offset in range(0, events, BATCH):
                await store.append(room, offset, f"batch-{offset}", room_envelopes[offset : offset + BATCH])
            batched_rates.append(events / (time.perf_counter() - start))
        await plain.aclose()
        results.append((f"raw redis-py pipelined XADD, {BATCH} per pipeline (baseline)",
                        statistics.median(baseline_rates)))
        results.append(("  the same with our hiredis command packing", statistics.median(packed_rates)))
        results.append((f"our append, {BATCH} events per call", statistics.median(batched_rates)))

        singles = min(events, 5_000)
        single_envelopes = trivial_log(singles, "bench-single")
        start = time.perf_counter()
        for index, envelope in enumerate(single_envelopes):
            await store.append("bench-single", index, f"single-{index}", [envelope])
        results.append(("our append, 1 event per call", singles / (time.perf_counter() - start)))

        start = time.perf_counter()
        raw = await store.read_raw("bench-room")
        results.append(("read (XRANGE pages of 1000)", len(raw) / (time.perf_counter() - start)))


        replay_rates = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            state, _ = await RoomLoader(store, cache_size=0).load("bench-room")
            replay_rates.append(events / (time.perf_counter() - start))
            assert state is not None and state.version == events
        results.append(("replay (read + decode + fold), no snapshot", statistics.median(replay_rates)))

        start = time.perf_counter()
        state = replay(envelopes)
        results.append(("decode + fold only, in memory", events / (time.perf_counter() - start)))
    finally:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    return results


def main(url: str, events: int = 100_000) -> None:
    console = Console()
    console.print(f"[bold]bench store[/]: {events:,} events on {url}")
    results = asyncio.run(_measure(url, events))
    baseline = results[0][1]
    table = Table("path", "events/s", "x baseline")
    for name, rate in results:
        table.add_row(name, f"{rate:,.0f}", f"{rate / baseline:.2f}")
    console.print(table)
