"""The archiver: moves ended rooms out of Redis into the archive tier (storage.archive), as its own process
(`almanac archiver`) or as part of `almanac up` (ALMANAC_ARCHIVER, on by default).

Its work list is the read models' zset of ended rooms (``Keys.ended_rooms``, written by the projector when it
projects a room's end), so a room is archived only once the projector has applied all of it, and only
ALMANAC_DEDUPE_RETAIN seconds after its end: until then its dedupe records answer resends from Redis; after it the
archived room's own command records answer them (``ArchivingStore.outcome``). Each pass takes up to ``batch``
rooms per shard; several archivers may run at once (each move is safe against another: storage.archive).

Its figures (rooms, bytes, commands archived, errors, the pass's rooms/s, the lag: ended rooms past their window
not yet archived and the age of the oldest) are kept in Redis (``archiver_stats_key``) with a heartbeat; the
gateway's /metrics shows them, as it shows the engine's and the projector's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from almanac.services import bootstrap
from almanac.services.settings import Settings
from almanac.storage.archive import ArchiveResult, ArchivingStore, archive_room
from almanac.storage.keys import archiver_heartbeat_key, archiver_stats_key, archivers_key

log = structlog.get_logger("almanac.archiver")
HEARTBEAT_TTL_S = 15


class Archiver:
    def __init__(self, store: ArchivingStore, retain_s: float = 60.0, batch: int = 256, concurrency: int = 8,
                 name: str = "archiver") -> None:
        self.store = store
        self.retain_s = retain_s
        self.batch = batch
        self.concurrency = concurrency
        self.name = name
        self.totals = {"rooms": 0, "bytes": 0, "commands": 0, "errors": 0, "passes": 0}

    async def due(self, now_ms: int | None = None) -> list[str]:
        """Ended rooms whose dedupe window is over, up to ``batch`` per shard, oldest first."""
        cut = (now_ms if now_ms is not None else int(time.time() * 1000)) - int(self.retain_s * 1000)
        keys = self.store.keys
        async with self.store.client.pipeline(transaction=False) as pipe:
            for shard in range(self.store.shard_count):
                pipe.zrangebyscore(keys.ended_rooms(shard), "-inf", cut, start=0, num=self.batch)
            found = await pipe.execute()
        return [room.decode() if isinstance(room, bytes) else room for rooms in found for room in rooms]

    async def lag(self, now_ms: int | None = None) -> tuple[int, float]:
        """(ended rooms past their window, not archived yet; seconds the oldest of them has waited)."""
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        cut = now_ms - int(self.retain_s * 1000)
        keys = self.store.keys
        async with self.store.client.pipeline(transaction=False) as pipe:
            for shard in range(self.store.shard_count):
                pipe.zcount(keys.ended_rooms(shard), "-inf", cut)
                pipe.zrange(keys.ended_rooms(shard), 0, 0, withscores=True)
            replies = await pipe.execute()
        waiting = sum(int(count) for count in replies[0::2])
        oldest = [float(first[0][1]) for first in replies[1::2] if first]
        age = max(0.0, (cut - min(oldest)) / 1000) if oldest and waiting else 0.0
        return waiting, age

    async def run_once(self) -> list[ArchiveResult]:
        rooms = await self.due()
        started = time.perf_counter()
        gate = asyncio.Semaphore(self.concurrency)

        async def one(room: str) -> ArchiveResult | None:
            async with gate:
                try:
                    return await archive_room(self.store, room)
                except Exception:  # noqa: BLE001 - one room's failure is counted and logged; the others go on
                    self.totals["errors"] += 1
                    log.warning("archiver.room_failed", room=room, exc_info=True)
                    return None

        results = [r for r in await asyncio.gather(*(one(room) for room in rooms)) if r is not None]
        archived = [r for r in results if r.status == "archived"]
        self.totals["rooms"] += len(archived)
        self.totals["bytes"] += sum(r.size for r in archived)
        self.totals["commands"] += sum(r.commands for r in archived)
        self.totals["passes"] += 1
        elapsed = time.perf_counter() - started
        await self.report(len(archived) / elapsed if archived and elapsed > 0 else 0.0)
        return results

    async def report(self, rooms_per_s: float) -> None:
        waiting, age = await self.lag()
        prefix = self.store.keys.prefix
        stats = {**self.totals, "rooms_per_s": round(rooms_per_s, 3), "lag_rooms": waiting, "lag_s": round(age, 3)}
        async with self.store.client.pipeline(transaction=False) as pipe:
            pipe.hset(archiver_stats_key(self.name, prefix), mapping=stats)
            pipe.set(archiver_heartbeat_key(self.name, prefix), int(time.time() * 1000), ex=HEARTBEAT_TTL_S)
            pipe.sadd(archivers_key(prefix), self.name)
            await pipe.execute()

    async def run(self, stop: asyncio.Event, interval_s: float = 2.0) -> None:
        while not stop.is_set():
            results = await self.run_once()
            if len(results) < self.batch:  # caught up: wait for more rooms to end
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval_s)


async def run(settings: Settings, redis_url: str, *, name: str = "archiver",
              on_ready: Callable[[], None] | None = None) -> None:
    """Archive ended rooms until SIGINT/SIGTERM (the pass in hand finishes) or the loop fails."""
    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL, redis_url)
    archiver = Archiver(runtime.store, retain_s=settings.dedupe_retain_s, name=name)
    try:
        await bootstrap.run_until_stopped(lambda stop: archiver.run(stop, settings.archiver_interval_s), "archiver",
                                          on_ready)
    finally:
        await runtime.aclose()
