"""`almanac bench engine`: commands/s through one engine process against raw pipelined XADD in the same run."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import time
from collections.abc import Callable

import redis.asyncio as aioredis
import uvloop
from rich.table import Table

from almanac.bench.common import output_console
from almanac.bench.e2e import cpu_seconds
from almanac.events import codec
from almanac.services import bootstrap
from almanac.services.bus import COMMAND_FIELD
from almanac.services.room_service import CommandRecord
from almanac.services.settings import Settings
from almanac.storage.keys import (
    Keys,
    engine_heartbeat_key,
    engine_stats_key,
    outcome_channel,
    projector_stats_key,
)

PIPELINE = 100
SHARDS = 16
ENGINE_NAME = "bench-engine"
PROJECTOR_NAME = "bench-projector"


def _settings() -> Settings:
    """The settings the engine and projector under test run with: the environment's, on SHARDS shards and with no
    replica to wait for (the benchmark's own Redis has none)."""
    return bootstrap.settings(shard_count=SHARDS, durability="aof")


def _engine_process(url: str, prefix: str, batch_size: int) -> None:
    """The engine under test, in its own process, on the trivial rule-set and a private key prefix."""
    from almanac.bench.trivial import TRIVIAL  # noqa: PLC0415
    from almanac.events import registry  # noqa: PLC0415
    from almanac.services.engine.shard_engine import Engine, EngineConfig  # noqa: PLC0415
    from almanac.services.heap import collect_less_often, freeze_startup_heap  # noqa: PLC0415
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    registry.register(TRIVIAL)
    configure_logging("json", "warning")

    async def serve() -> None:
        runtime = bootstrap.runtime(_settings(), bootstrap.Role.ENGINE, url, prefix)
        engine = Engine(runtime.client, EngineConfig(name=ENGINE_NAME, shards=list(range(SHARDS)), shard_count=SHARDS,
                                                     batch_size=batch_size, prefix=prefix, lease_ms=5_000),
                        runtime.store)
        freeze_startup_heap()  # as `almanac engine` does, before it takes its leases
        await engine.start()
        await engine.wait_stopped()

    collect_less_often()  # as every `almanac` process does (this one does not start through the CLI)
    try:
        uvloop.run(serve())  # as `almanac engine` runs it (services/cli/engine_commands.py)
    except KeyboardInterrupt:
        pass


def _projector_process(url: str, prefix: str) -> None:
    """The projector, if the projections package has one, following the engine's feeds."""
    from almanac.bench.trivial import TRIVIAL  # noqa: PLC0415
    from almanac.events import registry  # noqa: PLC0415
    from almanac.projections.projector import Projector  # noqa: PLC0415
    from almanac.services.heap import collect_less_often, freeze_startup_heap  # noqa: PLC0415
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    registry.register(TRIVIAL)
    configure_logging("json", "warning")
    collect_less_often()  # as every `almanac` process does (this one does not start through the CLI)

    async def serve() -> None:
        runtime = bootstrap.runtime(_settings(), bootstrap.Role.PROJECTOR, url, prefix)
        projector = Projector(runtime.client, SHARDS, name=PROJECTOR_NAME, prefix=prefix, heartbeat_ttl_ms=500,
                              store=runtime.store)
        freeze_startup_heap()  # as `almanac projector` does once built
        await projector.run(asyncio.Event())

    try:
        uvloop.run(serve())  # as `almanac projector` runs it
    except KeyboardInterrupt:
        pass


def _commands(rooms: int, commands: int, now_ms: int, name: str = "room") -> list[CommandRecord]:
    """Per room: create, join, then additions; interleaved across rooms like many players at once."""
    records = []
    for room in range(rooms):
        records.append(CommandRecord(command_id=f"create-{room}", room=f"{name}-{room}", player="p",
                                     server_time_ms=now_ms, body={"kind": "create_room", "ruleset": "trivial"}))
        records.append(CommandRecord(command_id=f"join-{room}", room=f"{name}-{room}", player="p",
                                     server_time_ms=now_ms, body={"kind": "join_room"}))
    index = 0
    while len(records) < commands:
        room = index % rooms
        records.append(CommandRecord(command_id=f"add-{index}", room=f"{name}-{room}", player="p",
                                     server_time_ms=now_ms, body={"kind": "add", "amount": 1}))
        index += 1
    return records[:commands]


async def _xadd_all(client: aioredis.Redis, entries: list[tuple[str, bytes]]) -> None:
    """Pipelined XADD of ``entries``."""
    for offset in range(0, len(entries), PIPELINE):
        async with client.pipeline(transaction=False) as pipe:
            chunk = entries[offset : offset + PIPELINE]
            for stream, data in chunk:
                pipe.xadd(stream, {COMMAND_FIELD: data})
            await pipe.execute()


def _percentile(samples: list[float], fraction: float) -> str:
    """A percentile of per-command latencies (seconds), in ms: exact, not a histogram bucket's bound."""
    if not samples:
        return "n/a"
    ordered = sorted(samples)
    return f"{ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000:.2f} ms"


class _Outcomes:
    """Receive time of every command's outcome (one pattern subscription), for per-command latencies."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.pubsub = client.pubsub()
        self.received: dict[bytes, float] = {}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.pubsub.psubscribe(outcome_channel("*"))
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        prefix = len(outcome_channel(""))
        while True:
            message = await self.pubsub.get_message(timeout=1.0)
            if message is not None and message["type"] == "pmessage":
                self.received.setdefault(message["channel"][prefix:], time.perf_counter())

    async def wait_for(self, ids: list[bytes], deadline: float) -> int:
        """Wait until every id has its outcome (or the deadline); how many did."""
        while time.monotonic() < deadline:
            if all(command_id in self.received for command_id in ids[-50:]):
                count = sum(1 for command_id in ids if command_id in self.received)
                if count == len(ids):
                    return count
            await asyncio.sleep(0.005)
        return sum(1 for command_id in ids if command_id in self.received)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self.pubsub.aclose()


async def _paced(client: aioredis.Redis, keys: Keys, outcomes: _Outcomes, rooms: int, rate: int,
                 seconds: float, engine_pid: int) -> dict[str, str | float]:
    """Commands one at a time at ``rate``/s (well below capacity): submit -> outcome latency of each, the
    engine's CPU per command when every batch holds one or two commands, and the same-run floor, an
    XADD's own round trip (what a client pays to submit at all)."""
    count = int(rate * seconds)
    cpu_before = cpu_seconds(engine_pid)
    sent: dict[bytes, float] = {}
    xadd_times: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    for index in range(count):
        delay = start + index / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        record = CommandRecord(command_id=f"paced-{index}", room=f"room-{index % rooms}", player="p",
                               server_time_ms=int(time.time() * 1000), body={"kind": "add", "amount": 1})
        stream = keys.command_stream(keys.shard(record.room))
        before = time.perf_counter()
        sent[record.command_id.encode()] = before
        await client.xadd(stream, {COMMAND_FIELD: codec.encode(record)})
        xadd_times.append(time.perf_counter() - before)
    await outcomes.wait_for(list(sent), time.monotonic() + 10)
    engine_cpu = cpu_seconds(engine_pid) - cpu_before
    latencies = [outcomes.received[command_id] - at for command_id, at in sent.items()
                 if command_id in outcomes.received]
    return {"paced_rate": f"{rate:,}/s for {seconds:g} s ({len(latencies):,} of {count:,} answered)",
            "paced_p50": _percentile(latencies, 0.5), "paced_p99": _percentile(latencies, 0.99),
            "paced_max": _percentile(latencies, 1.0), "xadd_p50": _percentile(xadd_times, 0.5),
            "paced_cpu_ms": engine_cpu / count * 1000}


async def _before_engine(url: str, rooms: int, commands: int, prefix: str) -> float:
    """With no engine running: the baseline (raw pipelined XADD of the same entries into scratch streams),
    then a backlog of as many commands for other rooms, waiting in the shard streams; the baseline's rate."""
    client = bootstrap.tool_client(url)
    keys = bootstrap.process_keys(SHARDS, prefix)
    try:
        entries = [(keys.command_stream(keys.shard(r.room)), codec.encode(r))
                   for r in _commands(rooms, commands, int(time.time() * 1000))]
        start = time.perf_counter()
        await _xadd_all(client, [(f"{prefix}:raw:{stream}", data) for stream, data in entries])
        baseline = len(entries) / (time.perf_counter() - start)
        await _xadd_all(client, [(keys.command_stream(keys.shard(r.room)), codec.encode(r))
                                 for r in _commands(rooms, commands, int(time.time() * 1000), name="backlog")])
        return baseline
    finally:
        await client.aclose()


async def _appended(client: aioredis.Redis, keys: Keys) -> int:
    """Events appended so far over every shard feed (the trivial rule-set: one per accepted command)."""
    async with client.pipeline(transaction=False) as pipe:
        for shard in range(SHARDS):
            pipe.xlen(keys.feed(shard))
        return sum(await pipe.execute())


async def _drain(client: aioredis.Redis, keys: Keys, backlog: int, engine_pid: int) -> dict[str, float]:
    """The backlog drained by the engine alone (no submitter on the cores): timed from its first append."""
    deadline = time.monotonic() + max(60.0, backlog / 500)
    while not await _appended(client, keys):
        if time.monotonic() > deadline:
            raise RuntimeError("the engine appended nothing within the deadline")
        await asyncio.sleep(0.001)
    redis_pid = int((await client.info("server")).get("process_id", 0))
    start, cpu_before = time.perf_counter(), (cpu_seconds(engine_pid), cpu_seconds(redis_pid))
    first = done = await _appended(client, keys)
    while done < backlog and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
        done = await _appended(client, keys)
    elapsed = time.perf_counter() - start
    engine_cpu, redis_cpu = cpu_seconds(engine_pid) - cpu_before[0], cpu_seconds(redis_pid) - cpu_before[1]
    # At least one command and a microsecond: a tiny backlog may be drained between the two first polls.
    drained, elapsed = max(done - first, 1), max(elapsed, 1e-6)
    return {"drain": drained / elapsed, "drain_cpu_ms": engine_cpu / drained * 1000,
            "drain_cpu_share": engine_cpu / elapsed, "drain_redis_share": redis_cpu / elapsed}


async def _measure(url: str, rooms: int, commands: int, prefix: str,
                   start_projector: Callable[[], None] | None, paced_rate: int = 500,
                   paced_seconds: float = 4.0, engine_pid: int = 0, baseline: float = 0.0,
                   backlog: int = 0) -> dict[str, float | str]:
    client = bootstrap.tool_client(url)
    metrics: dict[str, int] = {}
    keys = bootstrap.process_keys(SHARDS, prefix)
    try:
        drained = await _drain(client, keys, backlog, engine_pid) if backlog else {}
        records = _commands(rooms, commands, int(time.time() * 1000))
        entries = [(keys.command_stream(keys.shard(r.room)), codec.encode(r)) for r in records]

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            beat = await client.get(engine_heartbeat_key(ENGINE_NAME, prefix))
            if beat and b'"shards_held": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]' in beat:
                break
            await asyncio.sleep(0.05)
        else:
            raise RuntimeError("the engine did not take its shards within 30 s")
        await asyncio.sleep(0.3)  # let the takeover (group creation) finish

        redis_pid = int((await client.info("server")).get("process_id", 0))
        cpu_before = cpu_seconds(engine_pid), cpu_seconds(redis_pid)
        start = time.perf_counter()
        await _xadd_all(client, entries)
        submitted = time.perf_counter() - start
        deadline = time.monotonic() + max(60.0, commands / 500)
        # Timed by the shard feeds (one entry per append; every command of the trivial rule-set appends),
        # polled every 2 ms: not by the engine's counters, which reach Redis only every METRICS_FLUSH_S,
        # nor by this process's own subscriber, which lags behind under load.
        done = 0
        while time.monotonic() < deadline:
            done = await _appended(client, keys) - backlog
            if done >= commands:
                break
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - start
        engine_cpu, redis_cpu = cpu_seconds(engine_pid) - cpu_before[0], cpu_seconds(redis_pid) - cpu_before[1]
        # No subscriber in this process meanwhile: on 2 cores its parsing of 20,000 messages took CPU from the
        # engine and Redis (and with every command submitted at once, its latencies were only queueing).
        outcomes = _Outcomes(client)
        await outcomes.start()
        paced = (await _paced(client, keys, outcomes, rooms, paced_rate, paced_seconds, engine_pid)
                 if paced_rate else {})
        await outcomes.stop()
        total = backlog + commands + int(paced_rate * paced_seconds)
        while time.monotonic() < deadline:  # the counters, for the accepted / rejected figures
            metrics = {k.decode(): int(v) for k, v in (await client.hgetall(engine_stats_key(ENGINE_NAME, prefix))).items()}
            if metrics.get("commands", 0) >= total:
                break
            await asyncio.sleep(0.05)
        projected_rate = catch_up_rate = None
        if start_projector is not None:
            # Started only now, so engine and projector are each measured without the other on the 2 cores.
            projector_start = time.perf_counter()
            start_projector()
            stats_key = projector_stats_key(PROJECTOR_NAME, prefix)
            while time.monotonic() < deadline:
                applied = int(await client.hget(stats_key, "events_applied") or 0)
                if applied >= metrics.get("accepted", 0):  # the trivial rule-set: one event per accepted command
                    catch_up = time.perf_counter() - projector_start
                    catch_up_rate = applied / catch_up
                    projected_rate = done / (elapsed + catch_up * done / max(applied, 1))
                    break
                await asyncio.sleep(0.02)
        return {
            "baseline": baseline,
            **drained,
            "engine": done / elapsed if elapsed > 0 else 0.0,
            "projected": projected_rate or 0.0,
            "projector": catch_up_rate or 0.0,
            "submit": len(entries) / submitted,
            "done": done,
            "accepted": metrics.get("accepted", 0),
            "rejected": metrics.get("rejected", 0),
            "conflicts": metrics.get("conflicts", 0),
            "batches": metrics.get("batches", 0),
            "batches_ahead": metrics.get("batches_ahead", 0),
            "rooms_redecided": metrics.get("rooms_redecided", 0),
            "engine_cpu_ms": engine_cpu / done * 1000 if done else 0.0,
            "engine_cpu_share": engine_cpu / elapsed if elapsed > 0 else 0.0,
            "redis_cpu_ms": redis_cpu / done * 1000 if done else 0.0,
            "redis_cpu_share": redis_cpu / elapsed if elapsed > 0 else 0.0,
            **paced,
        }
    finally:
        await client.aclose()


async def _drop_keys(url: str, prefix: str) -> None:
    """Leave the server as we found it: drop the benchmark's private keys."""
    client = bootstrap.tool_client(url)
    try:
        cursor = 0
        while True:
            cursor, found = await client.scan(cursor, match=f"{prefix}:*", count=1000)
            if found:
                await client.delete(*found)
            if cursor == 0:
                break
    finally:
        await client.aclose()


def run(url: str, rooms: int, commands: int, batch_size: int = 100, paced_rate: int = 500,
        paced_seconds: float = 4.0) -> dict[str, float | str]:
    prefix = f"bench{int(time.time() * 1000)}"
    baseline = asyncio.run(_before_engine(url, rooms, commands, prefix))
    engine = multiprocessing.get_context("spawn").Process(
        target=_engine_process, args=(url, prefix, batch_size), daemon=True
    )
    engine.start()
    workers = [engine]

    def start_projector() -> None:
        workers.append(multiprocessing.get_context("spawn").Process(
            target=_projector_process, args=(url, prefix), daemon=True))
        workers[-1].start()

    try:
        return asyncio.run(_measure(url, rooms, commands, prefix, start_projector, paced_rate, paced_seconds,
                                    engine.pid or 0, baseline, backlog=commands))
    finally:
        # The workers stop first: deleting the keys under a running projector made it read a feed entry
        # whose room stream was gone (CorruptEventError in its log).
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.join(10)
        asyncio.run(_drop_keys(url, prefix))


def main(url: str, rooms: int = 200, commands: int = 20_000) -> None:
    figures = run(url, rooms, commands)
    console = output_console()
    table = Table(title=f"engine: {commands:,} commands over {rooms:,} rooms, one engine process, {SHARDS} shards"
                        + (", then one projector process" if figures["projected"] else ""))
    table.add_column("path")
    table.add_column("commands/s", justify="right")
    table.add_row("raw pipelined XADD of the same entries (baseline)", f"{figures['baseline']:,.0f}")
    table.add_row(f"draining a backlog of {commands:,} commands already waiting (engine and Redis alone)",
                  f"{figures['drain']:,.0f}")
    table.add_row("submitting them while the engine runs (pipelined XADD, this process)", f"{figures['submit']:,.0f}")
    table.add_row("through the engine (submit -> decide -> append -> outcome -> ack)", f"{figures['engine']:,.0f}")
    if figures["projected"]:
        table.add_row("projector catching up on those events (started after the engine)",
                      f"{figures['projector']:,.0f}")
        table.add_row("engine then projector (every command in the read models)", f"{figures['projected']:,.0f}")
    console.print(table)
    console.print(
        f"ratio engine/baseline: {figures['engine'] / figures['baseline']:.2f}"  # type: ignore[operator]
        + (f", engine+projector/baseline: {figures['projected'] / figures['baseline']:.2f}"  # type: ignore[operator]
           if figures["projected"] else "")
        + "  "
        f"(processed {figures['done']:,} after the backlog; the engine's counters over all: accepted {figures['accepted']:,}, rejected {figures['rejected']:,}, "
        f"conflicts {figures['conflicts']:,}, batches {figures['batches']:,} of which "
        f"{figures['batches_ahead']:,} decided while the one before was written, "
        f"rooms decided again {figures['rooms_redecided']:,})"
    )
    console.print(
        f"draining the backlog: engine {figures['drain_cpu_ms']:.3f} ms of CPU per command "
        f"({figures['drain_cpu_share']:.0%} of a core), Redis {figures['drain_redis_share']:.0%} of a core; "
        f"ratio drain/baseline: {figures['drain'] / figures['baseline']:.2f}"  # type: ignore[operator]
    )
    console.print(
        f"engine CPU over the {commands:,} commands: {figures['engine_cpu_ms']:.3f} ms per command "
        f"({figures['engine_cpu_share']:.0%} of a core), Redis {figures['redis_cpu_ms']:.3f} ms "
        f"({figures['redis_cpu_share']:.0%})"
    )
    if figures.get("paced_p50"):
        console.print(
            f"submit -> outcome, one command at a time at {figures['paced_rate']}: p50 {figures['paced_p50']}, "
            f"p99 {figures['paced_p99']}, max {figures['paced_max']} (floor: the XADD round trip alone, "
            f"p50 {figures['xadd_p50']}); engine CPU {figures['paced_cpu_ms']:.3f} ms per command"
        )
