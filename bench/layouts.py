"""`almanac bench layouts`: Redis bytes per seat and per command id of each key layout, measured in the same run.

Each layout is written into the same Redis one after the other (its keys deleted before the next), and measured by
INFO ``used_memory`` before and after (client buffers left out) and by MEMORY USAGE of its keys:

- **seat keys** (``storage.seat_keys``), two seats a room: the first layout (a hash per room, hex digests, as the
  gateway wrote it before) against the buckets the gateway writes now (``seat_keys.grant``);
- **the command id index** (``Keys.command_ids``, the dedupe's fallback once a record expires), a room of N commands:
  the store's layout (one hash per room, written as the append script writes it) against a candidate bucketed layout
  (the first 128 ids in the room's hash, the rest in 16 hashes by the field's first nibble, then 256 by its first
  byte once a nibble's is full: every hash stays a listpack). The candidate is written here only, to decide whether
  it is worth building (docs/capacity.md); the store does not use it.
"""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis
from rich.table import Table

from almanac.bench.common import output_console
from almanac.services import bootstrap
from almanac.storage import seat_keys
from almanac.storage.keys import Keys
from almanac.storage.redis_store import ids_field

LISTPACK_FIELDS = 128  # Redis' hash-max-listpack-entries default (hash-max-ziplist-entries before 7.0)


async def _used(client: aioredis.Redis) -> int:
    memory = await client.info("memory")
    return int(memory["used_memory"]) - int(memory.get("mem_clients_normal", 0)) - int(memory.get("mem_aof_buffer", 0))


async def _measured(client: aioredis.Redis, prefix: str, write) -> tuple[int, int, int]:
    """(used_memory delta, MEMORY USAGE sum, keys) of what ``write`` adds under ``prefix``; then deleted."""
    await client.memory_purge()
    before = await _used(client)
    await write()
    after = await _used(client)
    total = count = 0
    names = [key async for key in client.scan_iter(match=f"{prefix}*", count=1_000)]
    for start in range(0, len(names), 1_000):
        async with client.pipeline(transaction=False) as pipe:
            for key in names[start:start + 1_000]:
                pipe.memory_usage(key)
            total += sum(size or 0 for size in await pipe.execute())
        count += len(names[start:start + 1_000])
    for start in range(0, len(names), 1_000):
        await client.delete(*names[start:start + 1_000])
    return after - before, total, count


async def _seat_layouts(client: aioredis.Redis, rooms: int, table: Table) -> None:
    players = ("alice", "bob")

    def first_layout(prefix: str):
        keys = bootstrap.process_keys(16, prefix)

        async def write() -> None:
            for start in range(0, rooms, 500):
                async with client.pipeline(transaction=False) as pipe:
                    for n in range(start, min(rooms, start + 500)):
                        room = f"room-{n:06d}"
                        for player in players:  # as the gateway wrote them before the buckets
                            pipe.hset(keys.first_layout_seat_keys(room), player,
                                      seat_keys.digest_of(f"{room}{player}").hex())
                    await pipe.execute()
        return write

    def buckets(prefix: str):
        keys = bootstrap.process_keys(16, prefix)

        async def write() -> None:
            for start in range(0, rooms, 500):
                await asyncio.gather(*(seat_keys.grant(client, keys, f"room-{n:06d}", player)
                                       for n in range(start, min(rooms, start + 500)) for player in players))
        return write

    for label, layout in (("a hash per room (first layout)", first_layout), ("buckets (now)", buckets)):
        prefix = f"layouts{time.time_ns()}"
        delta, usage, count = await _measured(client, prefix, layout(prefix))
        table.add_row(f"seat keys, {rooms:,} rooms of 2 seats", label, f"{count:,}",
                      f"{delta / rooms:,.0f} B", f"{usage / rooms:,.0f} B", "per room")


def _candidate_key(index: str, field: bytes, level: int) -> str:
    return index if level == 0 else f"{index}:{field[0] >> 4:x}" if level == 1 else f"{index}:{field[0]:02x}"


async def _store_layout(client: aioredis.Redis, index: str, fields: list[bytes]) -> None:
    """As the append script writes the index (storage.redis_store._DEDUPE_LUA's remember): one HSET a command."""
    for start in range(0, len(fields), 500):
        async with client.pipeline(transaction=False) as pipe:
            for n in range(start, min(len(fields), start + 500)):
                pipe.hset(index, fields[n], f"{n + 1}:{n + 1}")
            await pipe.execute()


async def _candidate_layout(client: aioredis.Redis, index: str, fields: list[bytes]) -> None:
    """The candidate: each id in the first of its three hashes (room's, nibble's, byte's) with room left."""
    sizes: dict[str, int] = {}
    for n, field in enumerate(fields):
        for level in range(3):
            key = _candidate_key(index, field, level)
            if sizes.get(key, 0) < LISTPACK_FIELDS or level == 2:
                sizes[key] = sizes.get(key, 0) + 1
                await client.hset(key, field, f"{n + 1}:{n + 1}")
                break


async def _id_layouts(client: aioredis.Redis, counts: list[int], table: Table) -> None:
    for commands in counts:
        rooms = max(1, 10_000 // commands)  # ~10,000 ids a row: enough bytes that INFO's delta is not noise
        for label, layout in (("one hash per room (the store's)", _store_layout),
                              ("candidate: 1 + 16 + 256 listpack buckets", _candidate_layout)):
            prefix = f"layouts{time.time_ns()}"
            keys = bootstrap.process_keys(16, prefix)

            async def write(keys: Keys = keys, layout=layout, rooms: int = rooms, commands: int = commands) -> None:
                for n in range(rooms):
                    room = f"long-room-{n}"
                    fields = [ids_field(keys.command_outcome(room, f"cmd-{c:06d}")) for c in range(commands)]
                    await layout(client, keys.command_ids(room), fields)

            delta, usage, count = await _measured(client, prefix, write)
            table.add_row(f"command id index, {rooms:,} room(s) of {commands:,} commands", label, f"{count:,}",
                          f"{delta / (rooms * commands):,.0f} B", f"{usage / (rooms * commands):,.0f} B",
                          "per command")


async def _run(url: str, rooms: int, counts: list[int]) -> None:
    client = bootstrap.tool_client(url)
    config = await client.config_get("hash-max-*")
    table = Table(title=f"Redis bytes per seat-key room and per command id, each layout in the same run ({config})")
    for column in ("what", "layout", "keys", "used_memory delta", "MEMORY USAGE", "per"):
        table.add_column(column, justify="left" if column in ("what", "layout") else "right")
    await _seat_layouts(client, rooms, table)
    await _id_layouts(client, counts, table)
    output_console().print(table)
    await client.aclose()


def main(url: str, rooms: int = 20_000, counts: tuple[int, ...] = (15, 128, 1_000, 10_000)) -> None:
    asyncio.run(_run(url, rooms, list(counts)))
