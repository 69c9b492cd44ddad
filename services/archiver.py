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

With ``idle_after_s`` (ALMANAC_ARCHIVE_IDLE_AFTER, off by default) each pass also walks part of every shard's room
set (SSCAN, ``batch`` rooms per shard, going on where the last pass stopped) and moves a room still in Redis whose
last event is older than that to the archive, with reason "idle" (refusals do not count): a command the rules accept
brings it back before it is applied, one they refuse leaves it there (storage.restore). A room's clock deadline (services.clock) is not in the room's keys but in its shard's
deadline set, which the move leaves alone: it fires when due and its command brings the room back like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable

import structlog
from redis.exceptions import RedisClusterException, RedisError

from almanac.events import codec
from almanac.services import bootstrap
from almanac.services.settings import Settings
from almanac.storage import archive_index
from almanac.storage.archive import ArchiveResult, ArchivingStore, archive_room
from almanac.storage.keys import archiver_heartbeat_key, archiver_stats_key, archivers_key
from almanac.storage.process_registry import forget, queue_beat_fields
from almanac.storage.redis_store import _envelope_field

log = structlog.get_logger("almanac.archiver")
HEARTBEAT_TTL_S = 15
# The archiver is background work beside the command path: a pass that moved a wave of ended rooms took 0.41 of a core
# for a whole 2 s window of `bench e2e --overload 3` (2026-12-05), and that window's goodput fell to 0.45 of the
# capacity. Its process runs this much below the default CPU priority, so that where it shares CPUs with the
# gateways, the projector and Redis (`almanac up`, one host under systemd) it takes only the CPU they leave: at 10 the
# scheduler weighs it about a tenth of a default process. In its own container (compose, k8s) it competes with other
# containers by their CPU shares, not by this.
BACKGROUND_NICENESS = 10
AUTOGROUP_TRIES = 10
RETRY_S = (0.5, 5.0)  # a pass Redis failed: the next one after the first, doubling up to the second


class Archiver:
    def __init__(self, store: ArchivingStore, retain_s: float = 60.0, batch: int = 256, concurrency: int = 8,
                 name: str = "archiver", idle_after_s: float = 0, heartbeat_ttl_ms: int = HEARTBEAT_TTL_S * 1000) -> None:
        self.store = store
        self.retain_s = retain_s
        self.idle_after_s = idle_after_s
        self._cursors: dict[int, int] = {}  # shard -> where the idle walk of its room set goes on
        self.batch = batch
        self.concurrency = concurrency
        self.name = name
        self.heartbeat_ttl_ms = heartbeat_ttl_ms
        self.totals = {"rooms": 0, "bytes": 0, "commands": 0, "errors": 0, "passes": 0}
        self._pointers_migrated = False

    async def due(self, now_ms: int | None = None) -> list[str]:
        """Ended rooms whose dedupe window is over, up to ``batch`` per shard, oldest first."""
        cut = (now_ms if now_ms is not None else int(time.time() * 1000)) - int(self.retain_s * 1000)
        keys = self.store.keys
        async with self.store.client.pipeline(transaction=False) as pipe:
            for shard in range(self.store.shard_count):
                pipe.zrangebyscore(keys.ended_rooms(shard), "-inf", cut, start=0, num=self.batch)
            found = await pipe.execute()
        return [room.decode() if isinstance(room, bytes) else room for rooms in found for room in rooms]

    async def idle(self, now_ms: int | None = None) -> list[str]:
        """Rooms still in Redis, not ended, with no event for ``idle_after_s``: up to ``batch``
        rooms of each shard's room set looked at per call, the walk going on where the last call stopped."""
        if self.idle_after_s <= 0:
            return []
        cut = (now_ms if now_ms is not None else int(time.time() * 1000)) - int(self.idle_after_s * 1000)
        keys, client = self.store.keys, self.store.client
        candidates: list[str] = []
        for shard in range(self.store.shard_count):
            cursor, found = await client.sscan(keys.rooms(shard), self._cursors.get(shard, 0), count=self.batch)
            self._cursors[shard] = int(cursor)
            candidates += [room.decode() if isinstance(room, bytes) else room for room in found]
        if not candidates:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for room in candidates:
                pipe.xrevrange(keys.events(room), count=1)
                pipe.zscore(keys.ended_rooms(keys.shard(room)), room)
            replies = await pipe.execute()
        due = []
        for index, room in enumerate(candidates):
            last_event, ended = replies[2 * index: 2 * index + 2]
            if not last_event or ended is not None:  # archived already (or empty), or ended: the ended list's work
                continue
            entry_id, fields = last_event[0]
            # Its last event, not its last refusal: a refusal putting off the room's move would show in the public
            # /metrics (the archiver's rooms), so a rival could tell it from a quiet room (issue 28). A refused command
            # to the archived room is decided there and leaves it there (services.room_service).
            try:
                touched = codec.decode_envelope(_envelope_field(fields) or b"", room,
                                                int(entry_id.split(b"-", 1)[0])).server_time_ms
            except Exception:  # noqa: BLE001 - a damaged room is not moved (verify tells its story); the rest go on
                self.totals["errors"] += 1
                log.warning("archiver.idle_unreadable", room=room, exc_info=True)
                continue
            if touched <= cut:
                due.append(room)
        return due

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
        if not self._pointers_migrated:  # pointers an earlier version kept in one hash per shard, once per process
            moved = await archive_index.migrate_pointers(self.store.client, self.store.keys)
            if moved:
                log.info("archiver.pointers_migrated", pointers=moved)
            self._pointers_migrated = True
        rooms = [(room, "finished") for room in await self.due()]
        rooms += [(room, "idle") for room in await self.idle()]
        started = time.perf_counter()
        gate = asyncio.Semaphore(self.concurrency)

        async def one(room: str, reason: str) -> ArchiveResult | None:
            async with gate:
                try:
                    return await archive_room(self.store, room, reason)
                except Exception:  # noqa: BLE001 - one room's failure is counted and logged; the others go on
                    self.totals["errors"] += 1
                    log.warning("archiver.room_failed", room=room, exc_info=True)
                    return None

        results = [r for r in await asyncio.gather(*(one(room, reason) for room, reason in rooms)) if r is not None]
        # what Redis still holds of the finished ones for listings and leaderboards, compacted (one script a shard;
        # idle rooms keep theirs: archive_index takes finished ones only)
        try:
            await archive_index.compact(self.store, [r.room for r in results if r.status in ("archived", "already")])
        except Exception:  # noqa: BLE001 - the moves stand; the rows stay in Redis (same answers), counted, logged
            self.totals["errors"] += 1
            log.warning("archiver.compact_failed", exc_info=True)
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
        now_ms = int(time.time() * 1000)
        stats = {**self.totals, "rooms_per_s": round(rooms_per_s, 3), "lag_rooms": waiting, "lag_s": round(age, 3)}
        async with self.store.client.pipeline(transaction=False) as pipe:
            pipe.hset(archiver_stats_key(self.name, prefix), mapping=stats)
            # Its stats before its name: a member without stats was forgotten (storage.process_registry; not in order
            # on a Redis Cluster: such a member is taken out and back at its next beat).
            queue_beat_fields(pipe, archiver_stats_key(self.name, prefix), self.heartbeat_ttl_ms)
            pipe.set(archiver_heartbeat_key(self.name, prefix), now_ms, px=self.heartbeat_ttl_ms)
            pipe.sadd(archivers_key(prefix), self.name)
            await pipe.execute()

    async def run(self, stop: asyncio.Event, interval_s: float = 2.0) -> None:
        """Passes until ``stop``, then leaves the archivers' registry (``leave``). A pass Redis fails (restarting, or a
        Cluster node failing over: a connection closed, CLUSTERDOWN, a slot moving) is tried again after a pause, as
        the projector and the notifier do: every move is safe to redo (storage.archive). The process used to exit on
        it, at every failover."""
        retry_s = RETRY_S[0]
        while not stop.is_set():
            try:
                results = await self.run_once()
            except (RedisError, RedisClusterException) as error:
                self.totals["errors"] += 1
                log.warning("archiver.pass_failed", error=f"{type(error).__name__}: {error}"[:300], retry_in_s=retry_s)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), retry_s)
                retry_s = min(2 * retry_s, RETRY_S[1])
                continue
            retry_s = RETRY_S[0]
            if len(results) < self.batch:  # caught up: wait for more rooms to end
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval_s)
        await self.leave()

    async def leave(self) -> None:
        """Take this archiver out of its registry (a clean stop: scaled down, restarted, renamed): its heartbeat, its
        name in the set and its figures, which /metrics would show until it forgot a gone archiver
        (storage.process_registry), half an hour later. A restart writes them again at its first pass."""
        prefix = self.store.keys.prefix
        with contextlib.suppress(RedisError, RedisClusterException):
            async with self.store.client.pipeline(transaction=False) as pipe:
                pipe.delete(archiver_heartbeat_key(self.name, prefix))
                forget(pipe, archivers_key(prefix), self.name, archiver_stats_key(self.name, prefix))
                await pipe.execute()


def below_the_command_path() -> None:
    """Lower this process's CPU priority by ``BACKGROUND_NICENESS`` (the archiver process, at its start).

    Under Linux's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on here) the scheduler first
    shares the CPU between sessions, each weighed by its session's niceness, then within one by the processes' own:
    a child started in a session of its own (as `almanac up` and the benchmark start theirs) lowered only its own
    niceness and still took 0.31 of the core beside the gateway. A session leader sets its session's too (the session
    is then its own); a process run in someone else's session (a shell's) leaves theirs alone."""
    os.nice(BACKGROUND_NICENESS)
    if os.getsid(0) != os.getpid():
        return
    # The kernel takes one such write a tenth of a second from an unprivileged process, machine-wide (EAGAIN before
    # then): another archiver starting at the same moment is waited for, a few times.
    for _ in range(AUTOGROUP_TRIES):
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(BACKGROUND_NICENESS))
            return
        except BlockingIOError:
            time.sleep(0.11)
        except OSError:
            return  # no autogroups in this kernel, or not writable here: its own niceness only
    log.warning("archiver.session_priority_unchanged", tries=AUTOGROUP_TRIES)


async def run(settings: Settings, redis_url: str, *, name: str = "archiver",
              on_ready: Callable[[], None] | None = None) -> None:
    """Archive ended rooms until SIGINT/SIGTERM (the pass in hand finishes) or the loop fails."""
    runtime = bootstrap.runtime(settings, bootstrap.Role.TOOL, redis_url)
    archiver = Archiver(runtime.store, retain_s=settings.dedupe_retain_s, name=name,
                        idle_after_s=settings.archive_idle_after_s)
    try:
        await bootstrap.run_until_stopped(lambda stop: archiver.run(stop, settings.archiver_interval_s), "archiver",
                                          on_ready)
    finally:
        await runtime.aclose()
