"""`almanac bench streams`: Redis bytes per room and the XADD/XRANGE cost at each `stream-node-max-bytes`, one run.

Redis 7 gives a stream's first node a listpack of `stream-node-max-bytes` (4,096 by default) at once, and a room
keeps three streams (events, command records, refusals). Each arm CONFIG SETs one value on the same Redis, plays
fresh rooms under a fresh key prefix through the one room step (RoomService, as the engine writes) and measures:

- **bytes**: INFO ``used_memory`` before and after (client and AOF buffers left out), less the shard feeds (the
  projector trims those), per room and per command; and MEMORY USAGE of each room stream family, per room. Three
  shapes: short rooms (realm@1, created, joined, a move and a refusal), typical rooms (realm@1 played to its end,
  as `bench lifecycle` plays them) and long rooms (the trivial rule-set, thousands of events each);
- **cost**: XADD (one entry a call, pipelined, ids as the store writes them) into fresh streams, XRANGE of ten
  entries at random positions of a long stream (a loader's tail read), and full reads in pages of 1,000: Redis'
  own CPU (INFO ``used_cpu_user`` + ``used_cpu_sys``) and the client's wall time per operation.

Arms take turns within each run (the order rotates between runs); the figures print each run's values, their spread
over the runs, and each arm's ratio to the default (4,096) measured in the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import time

import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

from almanac.bench.common import output_console
from almanac.bench.lifecycle import _play_room
from almanac.events import registry
from almanac.services import bootstrap
from almanac.services.room_service import CommandRecord, RoomService

SETTINGS = (4096, 2048, 1024, 512)
DEFAULT = 4096
SHARDS = 16
FAMILIES = (":events", ":commands", ":rejected")


async def _used(client: aioredis.Redis) -> int:
    memory = await client.info("memory")
    return int(memory["used_memory"]) - int(memory.get("mem_clients_normal", 0)) - int(memory.get("mem_aof_buffer", 0))


async def _cpu(client: aioredis.Redis) -> float:
    cpu = await client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


async def _short_room(service: RoomService, room: str) -> int:
    """Created, joined by both seats, one move, one refused move: a room a few commands old."""
    bodies = [("alice", {"kind": "create_room", "ruleset": "realm@1",
                         "options": {"players": ["alice", "bob"], "villages": 1, "years": 3}}),
              ("alice", {"kind": "join_room"}), ("bob", {"kind": "join_room"}),
              ("alice", {"kind": "mine", "ore": "gold"}), ("alice", {"kind": "join_room"})]
    for n, (player, body) in enumerate(bodies, 1):
        await service.handle(CommandRecord(command_id=f"{room}-c{n}", room=room, player=player,
                                           server_time_ms=1_700_000_000_000 + n * 1_000, body=body))
    return len(bodies)


async def _long_room(service: RoomService, room: str, commands: int) -> int:
    """The trivial rule-set: create, join, then additions, one event each."""
    bodies = [{"kind": "create_room", "ruleset": "trivial"}, {"kind": "join_room"}]
    bodies += [{"kind": "add", "amount": 1}] * (commands - 2)
    for n, body in enumerate(bodies, 1):
        await service.handle(CommandRecord(command_id=f"{room}-c{n}", room=room, player="p",
                                           server_time_ms=1_700_000_000_000 + n, body=body))
    return len(bodies)


async def _keys_bytes(client: aioredis.Redis, prefix: str) -> tuple[dict[str, int], int]:
    """MEMORY USAGE by room stream family, and the shard feeds' bytes (left out of the rooms' figure)."""
    families = dict.fromkeys(FAMILIES, 0)
    families["all"] = 0
    feeds = 0
    names = [key.decode() async for key in client.scan_iter(match=f"{prefix}*", count=1_000)]
    for start in range(0, len(names), 500):
        async with client.pipeline(transaction=False) as pipe:
            for key in names[start:start + 500]:
                pipe.memory_usage(key, samples=0)  # every node counted, not an estimate from five
            sizes = await pipe.execute()
        for key, size in zip(names[start:start + 500], sizes, strict=True):
            if key.endswith(":feed"):
                feeds += size or 0
            else:
                families["all"] += size or 0
            for family in FAMILIES:
                if key.endswith(family):
                    families[family] += size or 0
    for start in range(0, len(names), 500):
        await client.delete(*names[start:start + 500])
    return families, feeds


async def _shape(client: aioredis.Redis, setting: int, shape: str, rooms: int, long_commands: int) -> dict:
    """One arm of one shape: fresh keys, the rooms played at once, bytes measured, keys deleted."""
    prefix = f"streams{time.time_ns()}"
    store = bootstrap.tool_store(client, SHARDS, prefix)
    service = RoomService(store)
    await client.config_set("stream-node-max-bytes", setting)
    await client.memory_purge()
    before = await _used(client)
    names = [f"{prefix}-r{n}" for n in range(rooms)]
    if shape == "short":
        counts = await asyncio.gather(*(_short_room(service, room) for room in names))
    elif shape == "typical":
        counts = await asyncio.gather(*(_play_room(service, room) for room in names))
    else:
        counts = await asyncio.gather(*(_long_room(service, room, long_commands) for room in names))
    service.loader.forget_where(lambda _room: True)
    after = await _used(client)
    families, feeds = await _keys_bytes(client, prefix)
    room_bytes = after - before - feeds
    return {"per_room": room_bytes / rooms, "per_command": room_bytes / sum(counts),
            "commands": sum(counts) / rooms, "usage": families["all"] / rooms,
            **{family: families[family] / rooms for family in FAMILIES}}


async def _cost(client: aioredis.Redis, setting: int, entries: int, payload: bytes) -> dict:
    """Redis CPU and client wall time per XADD, per 10-entry XRANGE at random places, per entry of full reads."""
    await client.config_set("stream-node-max-bytes", setting)
    key = f"streams-cost{time.time_ns()}"
    streams = 10
    figures = {}
    await client.memory_purge()
    used = await _used(client)
    cpu, wall = await _cpu(client), time.perf_counter()
    for start in range(0, entries, 500):
        async with client.pipeline(transaction=False) as pipe:
            for n in range(start, min(entries, start + 500)):
                pipe.xadd(f"{key}:{n % streams}", {"e": payload}, id=f"{n // streams + 1}-0")
            await pipe.execute()
    figures["xadd"] = ((await _cpu(client) - cpu) / entries * 1e6, (time.perf_counter() - wall) / entries * 1e6)
    figures["used_per_entry"] = (await _used(client) - used) / entries
    length = entries // streams
    picks = random.Random(setting)
    reads = 5_000
    cpu, wall = await _cpu(client), time.perf_counter()
    for _batch in range(0, reads, 250):
        async with client.pipeline(transaction=False) as pipe:
            for _ in range(250):
                at = picks.randint(1, length - 10)
                pipe.xrange(f"{key}:{picks.randrange(streams)}", f"{at}-0", "+", count=10)
            await pipe.execute()
    figures["xrange10"] = ((await _cpu(client) - cpu) / reads * 1e6, (time.perf_counter() - wall) / reads * 1e6)
    cpu, wall = await _cpu(client), time.perf_counter()
    for stream in range(streams):
        low = "-"
        while True:
            page = await client.xrange(f"{key}:{stream}", low, "+", count=1_000)
            if not page:
                break
            low = "(" + page[-1][0].decode()
    figures["scan"] = ((await _cpu(client) - cpu) / entries * 1e6, (time.perf_counter() - wall) / entries * 1e6)
    nodes = (await client.xinfo_stream(f"{key}:0"))  # the radix tree's nodes: how many listpacks a stream became
    figures["bytes_per_entry"] = (await client.memory_usage(f"{key}:0", samples=0) or 0) / length
    figures["nodes"] = nodes.get("radix-tree-nodes", 0)
    await client.delete(*[f"{key}:{n}" for n in range(streams)])
    return figures


def _spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}"


async def _run(url: str, runs: int, rooms: dict[str, int], long_commands: int, entries: int,
               settings: tuple[int, ...], console: Console) -> None:
    from almanac.bench.trivial import TRIVIAL  # noqa: PLC0415

    with contextlib.suppress(Exception):  # already registered when run twice in one process
        registry.register(TRIVIAL)
    client = bootstrap.tool_client(url)
    original = (await client.config_get("stream-node-max-bytes"))["stream-node-max-bytes"]
    server = await client.info("server")
    memory = await client.info("memory")
    console.print(f"Redis {server['redis_version']} ({memory.get('mem_allocator', '?')}); stream-node-max-bytes was "
                  f"{original}, stream-node-max-entries {(await client.config_get('stream-node-max-entries'))}")
    results: dict[tuple[str, int], list[dict]] = {}
    costs: dict[int, list[dict]] = {}
    payload = bytes(random.Random(1).getrandbits(8) for _ in range(300))  # a typical sealed envelope's size
    try:
        for run in range(runs):
            order = settings[run % len(settings):] + settings[:run % len(settings)]
            for setting in order:
                for shape, count in rooms.items():
                    results.setdefault((shape, setting), []).append(
                        await _shape(client, setting, shape, count, long_commands))
                costs.setdefault(setting, []).append(await _cost(client, setting, entries, payload))
            console.print(f"run {run + 1} of {runs} done (order {order})")
    finally:
        await client.config_set("stream-node-max-bytes", original)

    table = Table(title=f"Redis bytes per room at each stream-node-max-bytes ({runs} runs; ratio: to {DEFAULT} in the "
                        "same run, mean)")
    for column in ("rooms", "setting", "commands a room", "per room (used_memory)", "ratio", "per command",
                   "per room (MEMORY USAGE, all its keys)", "ratio",
                   "events / commands / refusals streams a room (MEMORY USAGE)"):
        table.add_column(column, justify="left" if column == "rooms" else "right")
    for shape, count in rooms.items():
        for setting in settings:
            rows = results[(shape, setting)]
            base = results[(shape, DEFAULT)] if (shape, DEFAULT) in results else rows
            ratios = [row["per_room"] / max(1.0, b["per_room"]) for row, b in zip(rows, base, strict=True)]
            usage_ratios = [row["usage"] / max(1.0, b["usage"]) for row, b in zip(rows, base, strict=True)]
            label = {"short": "short", "typical": "typical (realm to its end)",
                     "long": f"long ({long_commands:,} events)"}[shape]
            table.add_row(f"{label}, {count:,} rooms", f"{setting:,}", f"{rows[0]['commands']:.0f}",
                          _spread([r["per_room"] for r in rows]) + " B", f"{statistics.mean(ratios):.2f}x",
                          _spread([r["per_command"] for r in rows]) + " B",
                          _spread([r["usage"] for r in rows]) + " B", f"{statistics.mean(usage_ratios):.2f}x",
                          " / ".join(_spread([r[f] for r in rows]) for f in FAMILIES))
    console.print(table)

    cost = Table(title=f"Stream cost at each setting ({entries:,} XADDs of {len(payload)} B over 10 streams; Redis CPU "
                       "µs / client wall µs per operation; ratio of Redis CPU to the default, mean)")
    for column in ("setting", "XADD", "ratio", "XRANGE 10 at random", "ratio", "full read, per entry", "ratio",
                   "bytes per entry (used_memory / MEMORY USAGE)", "radix nodes"):
        cost.add_column(column, justify="right")
    base = costs.get(DEFAULT)
    for setting in settings:
        rows = costs[setting]
        cells = [f"{setting:,}"]
        for op in ("xadd", "xrange10", "scan"):
            ratios = [row[op][0] / max(1e-9, b[op][0]) for row, b in zip(rows, base or rows, strict=True)]
            cells += [f"{_spread([r[op][0] for r in rows], '{:.2f}')} / {_spread([r[op][1] for r in rows], '{:.1f}')}",
                      f"{statistics.mean(ratios):.2f}x"]
        cells += [_spread([r["used_per_entry"] for r in rows], "{:.0f}") + " / "
                  + _spread([r["bytes_per_entry"] for r in rows], "{:.0f}") + " B", str(rows[0]["nodes"])]
        cost.add_row(*cells)
    console.print(cost)
    await client.aclose()


def main(url: str, runs: int = 3, short: int = 1_000, typical: int = 400, long: int = 4, long_commands: int = 2_000,
         entries: int = 20_000, settings: tuple[int, ...] = SETTINGS) -> None:
    asyncio.run(_run(url, runs, {"short": short, "typical": typical, "long": long}, long_commands, entries,
                     settings, output_console(minimum=200)))
