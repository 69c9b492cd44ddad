"""`almanac bench store`: event-store rates against raw pipelined XADD measured in the same run."""

from __future__ import annotations

import asyncio
import statistics
import time

import redis.asyncio as aioredis
from rich.table import Table

from almanac.bench.common import output_console, trivial_log
from almanac.events import codec
from almanac.events.step import replay
from almanac.services import bootstrap
from almanac.services.redis_client import redacted_url

BATCH = 100
ROUNDS = 3
SNAPSHOT_TAIL = 20  # events after the newest snapshot when a room is loaded (one snapshot every 100 events)
LOADS = 2_000


async def _snapshot_loads(runtime: bootstrap.Runtime, room: str, events: int) -> tuple[float, float]:
    """(one-round-trip loads/s, the former three-round-trip loads/s) of a room: snapshot + SNAPSHOT_TAIL."""
    store = runtime.store
    envelopes = trivial_log(events, room)
    for offset in range(0, events, BATCH):
        await store.append(room, offset, f"load-{offset}", envelopes[offset : offset + BATCH])
    at = events - SNAPSHOT_TAIL
    await store.save_snapshot(room, at, codec.encode_snapshot(replay(envelopes[:at]), envelopes[at - 1].hash))
    loader = runtime.loader(0)  # a tool's: caching nothing, every load a round trip
    start = time.perf_counter()
    for _ in range(LOADS):
        state, _ = await loader.load(room)
    ours = LOADS / (time.perf_counter() - start)
    assert state is not None and state.version == events
    start = time.perf_counter()
    for _ in range(LOADS):  # as the loader did before: ZREVRANGEBYSCORE, HGET, then XRANGE, in a row
        snapshot = await store.latest_snapshot(room)
        assert snapshot is not None
        state, _ = codec.decode_snapshot(snapshot[1])
        state = replay(await store.read(room, state.version + 1), state)
    three = LOADS / (time.perf_counter() - start)
    return ours, three


def _eventsourcing_snapshot_loads(events: int) -> float | str:
    """Loads/s of an eventsourcing (9.5) aggregate of ``events`` events from a snapshot + SNAPSHOT_TAIL
    events, in its in-memory store (its fastest), repository cache off; or why it could not be measured."""
    try:
        from eventsourcing.application import Application  # noqa: PLC0415 - the bench's eventsourcing extra only
        from eventsourcing.domain import Aggregate, event  # noqa: PLC0415
    except ImportError:
        return "not installed (pip install -e './bench[eventsourcing]')"

    class Counter(Aggregate):
        def __init__(self) -> None:
            self.total = 0

        @event("Added")
        def add(self, amount: int) -> None:
            self.total += amount

    class Counters(Application):
        snapshotting_intervals = {Counter: 10**9}  # snapshots only when taken below

    app = Counters(env={"IS_SNAPSHOTTING_ENABLED": "y"})
    counter = Counter()
    for _ in range(events - 1 - SNAPSHOT_TAIL):
        counter.add(1)
    app.save(counter)
    app.take_snapshot(counter.id)
    for _ in range(SNAPSHOT_TAIL):
        counter.add(1)
    app.save(counter)
    start = time.perf_counter()
    for _ in range(LOADS):
        loaded = app.repository.get(counter.id)
    rate = LOADS / (time.perf_counter() - start)
    assert loaded.total == events - 1
    return rate


async def _measure(url: str, events: int) -> list[tuple[str, float]]:
    prefix = f"bench{int(time.time())}"
    # Our client (hiredis command packing), as every almanac process has it
    runtime = bootstrap.runtime(bootstrap.settings(shard_count=16), bootstrap.Role.TOOL, url, prefix)
    client, store = runtime.client, runtime.store
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
            state, _ = await runtime.loader(0).load("bench-room")
            replay_rates.append(events / (time.perf_counter() - start))
            assert state is not None and state.version == events
        results.append(("replay (read + decode + fold), no snapshot", statistics.median(replay_rates)))

        start = time.perf_counter()
        state = replay(envelopes)
        results.append(("decode + fold only, in memory", events / (time.perf_counter() - start)))

        # Loading a room from a snapshot (loads/s, not events/s; its own baseline below).
        loads: list[tuple[str, float | str]] = []
        ours, three = await _snapshot_loads(runtime, "bench-load", 1_000)
        loads.append((f"our load: snapshot + {SNAPSHOT_TAIL} events in one round trip (script)", ours))
        loads.append(("the same in three round trips (ZREVRANGEBYSCORE, HGET, XRANGE; before)", three))
        loads.append((f"eventsourcing 9.5 Repository.get: snapshot + {SNAPSHOT_TAIL} events, in-memory store",
                      _eventsourcing_snapshot_loads(1_000)))
        results.append(("loads", loads))  # type: ignore[arg-type]
    finally:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()
    return results


def main(url: str, events: int = 100_000) -> None:
    console = output_console()
    console.print(f"[bold]bench store[/]: {events:,} events on {redacted_url(url)}")
    results = asyncio.run(_measure(url, events))
    loads = dict(results).pop("loads")
    results = [(name, rate) for name, rate in results if name != "loads"]
    baseline = results[0][1]
    table = Table("path", "events/s", "x baseline")
    for name, rate in results:
        table.add_row(name, f"{rate:,.0f}", f"{rate / baseline:.2f}")
    console.print(table)
    table = Table("loading one room of 1,000 events (no cache)", "loads/s", "ms per load", "x eventsourcing")
    peer = loads[-1][1]
    for name, rate in loads:
        if isinstance(rate, str):
            table.add_row(name, rate, "", "")
            continue
        ratio = f"{rate / peer:.2f}" if isinstance(peer, float) else "n/a"
        table.add_row(name, f"{rate:,.0f}", f"{1000 / rate:.3f}", ratio)
    console.print(table)
