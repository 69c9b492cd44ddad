"""`almanac bench clock`: deadline lateness and the clock's CPU per fired deadline, with 100,000 pending.

The shards' deadline sets are filled directly (as the clock's tracker leaves them): ``pending`` rooms each
with one deadline, ``due`` of them falling due at an even pace over ``seconds``, the rest hours away. One
``Clock`` (as an engine holding every shard runs it) ticks every 100 ms. Lateness of a deadline: the Redis
time of the command stream entry the clock appended (its id) minus the due time. CPU: this process's CPU
time over the run, per deadline sent; the baseline, measured in the same run, is plain pipelined XADD of
the same records (what sending them costs at the least).
"""

from __future__ import annotations

import asyncio
import statistics
import time

import redis.asyncio as aioredis
from rich.table import Table

from almanac.bench.common import output_console
from almanac.events import codec
from almanac.events.step import CommandRecord, decode_record
from almanac.services import bootstrap
from almanac.services.clock import Clock, _Pending
from almanac.storage.keys import Keys

SHARDS = 16
FILL_BATCH = 5_000


async def _fill(client: aioredis.Redis, keys: Keys, rooms: range, due: int, seconds: float, start_ms: int) -> None:
    """Deadlines of ``rooms``: those numbered below ``due`` at an even pace from ``start_ms``, the rest in an hour."""
    command = {"kind": "end_season"}
    pipe = client.pipeline(transaction=False)
    for index in rooms:
        room = f"bench-clock-{index}"
        shard = keys.shard(room)
        due_ms = (start_ms + int(index * seconds * 1000 / due)) if index < due else start_ms + 3_600_000 + index
        pipe.hset(keys.deadline_commands(shard), room, codec.encode(_Pending("season:0", due_ms, "alice", command)))
        pipe.zadd(keys.deadlines(shard), {room: due_ms})
        if index % FILL_BATCH == FILL_BATCH - 1:
            await pipe.execute()
    await pipe.execute()
    # The tracker's cursors at the feeds' end (no room moved: this measures firing)
    for shard in range(SHARDS):
        await client.set(keys.clock_cursor(shard), "0-0")


async def _lateness(client: aioredis.Redis, keys: Keys) -> list[int]:
    late = []
    for shard in range(SHARDS):
        for entry_id, fields in await client.xrange(keys.command_stream(shard)):
            record = decode_record(fields[b"__data__"])
            due_ms = int(await client.zscore(f"bench:due:{shard}", record.room) or 0)
            late.append(int(entry_id.split(b"-")[0]) - due_ms)
    return late


async def _run(url: str, pending: int, due: int, seconds: float) -> None:
    client = bootstrap.tool_client(url)
    store = bootstrap.tool_store(client, SHARDS, "benchclock")
    keys = store.keys
    await client.flushdb()
    # The far deadlines first (filling 100,000 takes seconds), then the ones due, starting a second from now
    await _fill(client, keys, range(due, pending), due, seconds, int(time.time() * 1000))
    start_ms = int(time.time() * 1000) + 3_000
    await _fill(client, keys, range(due), due, seconds, start_ms)
    # Remember the due times apart (the clock removes what it sends)
    for shard in range(SHARDS):
        await client.zunionstore(f"bench:due:{shard}", [keys.deadlines(shard)])
    clock = Clock(client, keys, store)
    # Idle: ticking every shard with nothing due (what the clock costs an engine that has nothing to send)
    stopping = asyncio.Event()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    idle_task = asyncio.create_task(clock.run(lambda: list(range(SHARDS)), stopping, interval_s=0.1))
    await asyncio.sleep(max(0.5, (start_ms - time.time() * 1000) / 1000 - 0.3))
    stopping.set()
    await idle_task
    idle_s, idle_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    stopping = asyncio.Event()
    cpu0 = time.process_time()
    runner = asyncio.create_task(clock.run(lambda: list(range(SHARDS)), stopping, interval_s=0.1))
    await asyncio.sleep((start_ms - time.time() * 1000) / 1000 + seconds + 1.0)
    stopping.set()
    await runner
    cpu = time.process_time() - cpu0
    late = sorted(await _lateness(client, keys))
    left = sum([await client.zcard(keys.deadlines(shard)) for shard in range(SHARDS)])
    # Baseline: the same number of records appended with plain pipelined XADD, nothing else
    records = [codec.encode(CommandRecord(command_id=f"b{i}", room=f"bench-clock-{i}", player="alice",
                                          server_time_ms=start_ms, body={"kind": "end_season"})) for i in range(len(late))]
    cpu0 = time.process_time()
    pipe = client.pipeline(transaction=False)
    for index, data in enumerate(records):
        pipe.xadd(f"bench:baseline:{index % SHARDS}", {"__data__": data})
        if index % 1000 == 999:
            await pipe.execute()
    await pipe.execute()
    baseline = time.process_time() - cpu0
    await client.flushdb()
    await client.aclose()

    fired = len(late)
    table = Table(title=f"clock: {pending:,} pending deadlines, {due:,} due over {seconds:g} s, {SHARDS} shards")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("deadlines sent", f"{fired:,} (of {due:,} due; {left:,} still pending)")
    if late:
        table.add_row("lateness p50", f"{statistics.median(late):,.0f} ms")
        table.add_row("lateness p99", f"{late[int(0.99 * (fired - 1))]:,} ms")
        table.add_row("lateness max", f"{late[-1]:,} ms")
        table.add_row("clock CPU per deadline sent", f"{cpu / fired * 1e6:,.0f} µs (whole run, idle ticks included)")
        table.add_row("clock CPU idle (nothing due)", f"{idle_cpu * 1000:,.0f} ms in {idle_s:.1f} s of ticks")
        table.add_row("baseline: pipelined XADD per record", f"{baseline / fired * 1e6:,.0f} µs")
        table.add_row("ratio", f"{cpu / max(baseline, 1e-9):.1f}x")
    output_console().print(table)


def main(url: str, pending: int = 100_000, due: int = 5_000, seconds: float = 10.0) -> None:
    asyncio.run(_run(url, pending, due, seconds))
