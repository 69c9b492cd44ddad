"""`almanac bench lifecycle`: rooms played to their end with the archiver on; Redis memory stays bounded.

Rooms are played in waves through the one room step (RoomService, as the engine writes), as a deployment's are: a
realm@1 room of three cities whose seats the rule-set's seat bot plays (``services.bots.decide_for``, the bots
process's own choice from each seat's view, retried with the next attempt when refused, as that process does:
merchants, trades offered, countered, agreed and declined, raids, refusals recorded) until the game is over, each
seat with its seat key (``storage.seat_keys.grant``, as the gateway's join gives one) and one seat handed to a bot
(``services.bots.add_bot``, given back as the bots process gives back the seat of an ended room); and one room in
``CLAIM_EVERY`` a claim room (create, join, end: a row of claim's registry model). The projector applies each wave
(its read models are the archiver's work list), then the archiver moves the ended rooms out
(ALMANAC_DEDUPE_RETAIN=0 here). The last wave stays live, the baseline of the reads. It prints Redis memory after
each wave and pass (``used_memory`` less the buffers of client connections and of the AOF: those are the bench's
own connections and the disk's pace, not rooms; they are printed beside it), bytes per command in Redis (a live
room) and in the archive, the archiver's rooms/s, the state-at-a-version read of an archived room against the same
read of a live room (p50/p99, same run), and ``verify --all`` (every room, archived and live, as the command does).
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import tempfile
import time
from pathlib import Path

import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

from almanac.bench.common import output_console
from almanac.projections.projector import Projector
from almanac.services import bootstrap, bots
from almanac.services.archiver import Archiver
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage import seat_keys
from almanac.storage.archive import ArchiveStore, ArchivingStore
from almanac.storage.loader import RoomLoader

SHARDS = 16
MINING_ROUNDS = 4  # each: a mining try by each player (and the seasons' end_turns when actions run out)
READS = 2_000
FAMILIES = 24  # key families shown, largest first: the archived rooms' own are past the live ones'
DEDUPE_RETAIN_MS = 60_000  # services/settings.py's default


SEATS = ("alice", "bob", "carol")
BOT_SEAT = "carol"  # handed to a bot at creation, as a create request's ``bots`` does
CLAIM_EVERY = 5  # one room in five is a claim room (registry rows), the others realm rooms (trades ledgers)
MAX_COMMANDS = 400  # a realm room that is not over by then is ended by its owner (none was in trials: ~95 commands)
BOT_KEY = b"almanac bench lifecycle bots"


async def _play_room(service: RoomService, client: aioredis.Redis, room: str, number: int) -> int:
    """One room from creation to its end (a claim room, or a realm room played by the seat bots); commands sent."""
    keys = service.store.keys
    sent = 0
    clock = 1_700_000_000_000

    async def send(player: str, body: dict) -> bool:
        nonlocal sent, clock
        sent += 1
        clock += 60_000
        outcome = await service.handle(CommandRecord(command_id=f"{room}-c{sent}", room=room, player=player,
                                                     server_time_ms=clock, body=body))
        if outcome.accepted and body["kind"] == "join_room":  # the gateway's join answers with a seat key
            await seat_keys.grant(client, keys, room, player)
        return outcome.accepted

    if number % CLAIM_EVERY == CLAIM_EVERY - 1:
        await send("alice", {"kind": "create_room", "ruleset": "claim", "options": {"block": f"lot {number}"}})
        await send("alice", {"kind": "join_room"})
        await send("alice", {"kind": "end_room"})
        return sent
    await send("alice", {"kind": "create_room", "ruleset": "realm@1",
                         "options": {"players": list(SEATS), "villages": 1, "years": 2}})
    await bots.add_bot(client, keys, room, BOT_SEAT, clock)
    for seat in SEATS:
        await send(seat, {"kind": "join_room"})
    while sent < MAX_COMMANDS:
        state, _ = await service.loader.load(room)
        if state is None or state.ended:
            return sent
        acted = False
        for seat in SEATS:
            for attempt in range(bots.ATTEMPTS):  # a refused command: the next attempt's choice, as the bots do
                state, _ = await service.loader.load(room)
                if state is None or state.ended:
                    return sent
                body = bots.decide_for(state, seat, attempt, clock, key=BOT_KEY)
                if body is None:
                    break
                if await send(seat, body):
                    acted = True
                    break
        if not acted:  # every city waits on the season: end it, as the clock's timeout would
            await send("alice", {"kind": "end_season"})
    await send("alice", {"kind": "end_room"})
    return sent


async def _give_back_bot_seats(client: aioredis.Redis, store: ArchivingStore) -> None:
    """Every bot seat of the ended rooms given back as the bots process gives back the seat of a room it finds
    ended (``bots.give_back``): the seats' fields leave Redis as in a deployment. (The bots process itself plays
    through a gateway, which this bench of the store does not run.)"""
    for room, seat in await bots.bot_seats(client, store.keys, range(store.shard_count)):
        await bots.give_back(client, store.keys, room, seat)


def _family(key: str, prefix: str) -> str:
    """A key's family: its shard tag, room id, bucket and bot seat made generic."""
    name = re.sub(r"\{s\d+\}", "{sNN}", key)
    name = re.sub(re.escape(prefix) + r"-r\d+(-c\d+)?", "ROOM", name)
    name = re.sub(r"archive:pointers:\d+$", "archive:pointers:BUCKET", name)
    name = re.sub(r"seatkeys:\d+$", "seatkeys:BUCKET", name)
    return name


async def _memory_by_family(client: aioredis.Redis, prefix: str, samples: int | None = None
                            ) -> list[tuple[str, int, int]]:
    """(key family, keys, MEMORY USAGE bytes) of the run's keys, largest first: where Redis memory goes.
    ``samples=0`` counts every element (exact, slower): the per-archived-room table uses it."""
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    async for key in client.scan_iter(match=f"{prefix}*", count=1_000):
        name = _family(key.decode(), prefix)
        sizes[name] = sizes.get(name, 0) + (await client.memory_usage(key, samples=samples) or 0)
        counts[name] = counts.get(name, 0) + 1
    return sorted(((name, counts[name], size) for name, size in sizes.items()), key=lambda item: -item[2])


def _left_per_room(first: list[tuple[str, int, int]], last: list[tuple[str, int, int]], rooms: int
                   ) -> list[tuple[str, int, int, float]]:
    """(key family, keys added, bytes added, bytes per room) between two measures with no live room: what each room
    archived between them left in Redis, by key family, largest first."""
    before = {name: (count, size) for name, count, size in first}
    rows = []
    for name, count, size in last:
        old_count, old_size = before.pop(name, (0, 0))
        rows.append((name, count - old_count, size - old_size, (size - old_size) / max(1, rooms)))
    rows += [(name, -count, -size, -size / max(1, rooms)) for name, (count, size) in before.items()]
    return sorted(rows, key=lambda row: -abs(row[2]))


async def _id_index_bytes(client: aioredis.Redis, store: ArchivingStore, rooms: list[str]) -> tuple[int, int]:
    """(MEMORY USAGE of the rooms' command-id indexes, the ids they hold): what dedupe keeps per command for good,
    while the room lives (its expiring records, ``cmd:``, are in the key families' table)."""
    async with client.pipeline(transaction=False) as pipe:
        for room in rooms:
            pipe.memory_usage(store.keys.command_ids(room))
            pipe.hlen(store.keys.command_ids(room))
        replies = await pipe.execute()
    return sum(int(size or 0) for size in replies[0::2]), sum(int(count) for count in replies[1::2])


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _read_latencies(store: ArchivingStore, rooms: list[tuple[str, int]], reads: int) -> list[float]:
    """ms of one state-at-a-version read (a loader without a cache, as a tool's), random rooms and versions."""
    loader = RoomLoader(store, cache_size=0)
    picks = random.Random(7)
    times = []
    for _ in range(reads):
        room, version = picks.choice(rooms)
        at = picks.randint(1, version)
        started = time.perf_counter()
        state, _ = await loader.load(room, at)
        times.append((time.perf_counter() - started) * 1000)
        assert state is not None and state.version == at
    return times


async def _run(url: str, rooms: int, wave: int, console: Console, max_connections: int = 64) -> None:
    prefix = f"life{int(time.time())}"
    # A bounded pool: every connection Redis holds has its own buffers (a fresh one a 16 KB reply buffer until Redis
    # shrinks it), so a wave of 1,000 rooms played at once on a loaded host opened hundreds and their buffers moved
    # used_memory by megabytes between two measures (the figures leave client buffers out; this keeps them small).
    # ``max_connections=0``: redis-py's unbounded pool, as the bench had it in issue 31's second pass (its 1.54x).
    client = bootstrap.tool_client(url, max_connections=max_connections or None, pool_wait_s=None)
    archive_dir = Path(tempfile.mkdtemp(prefix="almanac-bench-archive-"))
    archive = ArchiveStore(archive_dir.as_uri())
    # records expire as a deployment's do (ALMANAC_DEDUPE_RETAIN's default): the room's id index answers after
    store = bootstrap.tool_store(client, SHARDS, prefix, archive=archive, dedupe_retain_ms=DEDUPE_RETAIN_MS)
    service = RoomService(store, snapshot_every=100)
    projector = Projector(client, SHARDS, None, name=f"{prefix}-projector", prefix=prefix, store=store,
                          feed_retain_ms=0)
    archiver = Archiver(store, retain_s=0, batch=1_000, name=f"{prefix}-archiver")
    await client.config_set("maxmemory-policy", "noeviction")

    buffers: list[int] = []  # the client and AOF buffers at each measure, for the table

    async def used() -> int:
        """Redis' memory for data and its structures: used_memory less client and AOF buffers (MEMORY STATS'
        clients.normal is the same figure as INFO's mem_clients_normal)."""
        memory = await client.info("memory")
        buffers.append(int(memory.get("mem_clients_normal", 0)) + int(memory.get("mem_aof_buffer", 0)))
        return int(memory["used_memory"]) - buffers[-1]

    await client.memory_purge() if hasattr(client, "memory_purge") else None
    baseline = await used()
    table = Table(title=f"Redis used_memory over the run ({rooms} rooms in waves of {wave}; the last wave stays live)")
    for column in ("rooms played", "rooms archived", "live rooms", "Redis memory above start", "per live room",
                   "client+AOF buffers (left out)"):
        table.add_column(column, justify="right")
    played = archived = commands = 0
    archive_seconds = 0.0
    archive_bytes = 0
    live_peak = live_peak_raw = 0
    live_commands_peak = 0
    names: list[tuple[str, int]] = []
    number = 0
    # MEMORY USAGE by key family after each pass (no live room then): the first and the last give what each room
    # archived between them left in Redis, by key family (the first pass's own one-off keys cancel out)
    archived_families: list[tuple[int, int, list[tuple[str, int, int]]]] = []
    while played < rooms:
        batch = [f"{prefix}-r{number + i}" for i in range(min(wave, rooms - played))]
        number += len(batch)
        counts = await asyncio.gather(*(_play_room(service, client, room, number - len(batch) + i)
                                        for i, room in enumerate(batch)))
        played += len(batch)
        commands_in_wave = sum(counts)
        commands += commands_in_wave
        await projector.drain()
        await projector.trim_feeds() if hasattr(projector, "trim_feeds") else None
        await _give_back_bot_seats(client, store)
        service.loader.forget_where(lambda _room: True)
        with_live = await used() - baseline
        if not live_peak:  # the first wave, nothing archived yet: the live working set of one wave
            live_peak, live_commands_peak = with_live, commands_in_wave
            live_peak_raw = with_live + buffers[-1] - buffers[0]
        table.add_row(str(played), str(archived), str(len(batch)), f"{with_live / 1e6:.2f} MB",
                      f"{with_live / len(batch):,.0f} B", f"{buffers[-1] / 1e6:.2f} MB")
        versions = {room: await store.latest_version(room) for room in batch}
        if played >= rooms:  # the last wave stays live: the reads' baseline
            live_rooms = [(room, versions[room]) for room in batch]
            last_wave_commands = commands_in_wave
            break
        started = time.perf_counter()
        while True:
            results = await archiver.run_once()
            done = [r for r in results if r.status == "archived"]
            archived += len(done)
            archive_bytes += sum(r.size for r in done)
            if not done:
                break
        archive_seconds += time.perf_counter() - started
        names += [(room, versions[room]) for room in batch]
        after = await used() - baseline
        table.add_row(str(played), str(archived), "0", f"{after / 1e6:.2f} MB",
                      f"{after / max(1, archived):,.0f} B per archived room", f"{buffers[-1] / 1e6:.2f} MB")
        archived_families.append((archived, after, await _memory_by_family(client, prefix, samples=0)))
    console.print(table)
    final = await used() - baseline
    final_raw = final + buffers[-1] - buffers[0]
    # used_memory counts Redis' buffers too: a large one at the last measure (AOF under a busy disk, clients)
    # shows here rather than as rooms' bytes
    memory = await client.info("memory")
    console.print("at the end: " + ", ".join(f"{name} {int(memory.get(name, 0)) / 1e6:.2f} MB" for name in (
        "used_memory", "used_memory_dataset", "used_memory_overhead", "mem_aof_buffer", "mem_clients_normal")))
    families = Table(title="Where Redis memory is at the end (MEMORY USAGE by key family)")
    for column in ("key family", "keys", "bytes"):
        families.add_column(column, justify="right" if column != "key family" else "left")
    for name, count, size in (await _memory_by_family(client, prefix))[:FAMILIES]:
        families.add_row(name, str(count), f"{size:,}")
    console.print(families)
    if len(archived_families) >= 2:
        (first_rooms, first_used, first), (last_rooms, last_used, last) = archived_families[0], archived_families[-1]
        rooms_between = last_rooms - first_rooms
        left = Table(title=f"What each archived room leaves in Redis (MEMORY USAGE SAMPLES 0 by key family, after the"
                           f" last pass less after the first: {rooms_between} rooms archived between, none live)")
        for column in ("key family", "keys added", "bytes added", "bytes per archived room"):
            left.add_column(column, justify="right" if column != "key family" else "left")
        rows = _left_per_room(first, last, rooms_between)
        for name, count, size, per in rows:
            if size:
                left.add_row(name, f"{count:+,}", f"{size:+,}", f"{per:+,.1f}")
        total = sum(size for _, _, size, _ in rows)
        left.add_row("all key families (MEMORY USAGE)", "", f"{total:+,}", f"{total / max(1, rooms_between):+,.1f}")
        left.add_row("used_memory (less client and AOF buffers)", "", f"{last_used - first_used:+,}",
                     f"{(last_used - first_used) / max(1, rooms_between):+,.1f}")
        console.print(left)
    archived_commands = commands - last_wave_commands if archived else 0
    figures = Table(title="Lifecycle figures (one run; CPU shared with other work: ratios matter, not absolutes)")
    figures.add_column("figure")
    figures.add_column("value", justify="right")
    figures.add_column("aim", justify="right")
    figures.add_row("Redis bytes per command, live rooms (first wave, read models included)",
                    f"{live_peak / max(1, live_commands_peak):,.0f} B", "")
    figures.add_row("Redis after the run (one wave live) / live working set (the first wave)",
                    f"{final / max(1, live_peak):.2f}x", "<= 1.2x")
    figures.add_row("  the same with client and AOF buffers in (used_memory as INFO says)",
                    f"{final_raw / max(1, live_peak_raw):.2f}x", "")
    figures.add_row("  Redis left per archived room (pointer, room sets, read-model rows)",
                    f"{max(0, final - live_peak) / max(1, archived):,.0f} B", "")
    ids_bytes, ids_count = await _id_index_bytes(client, store, [room for room, _ in live_rooms])
    figures.add_row(f"command-id index of the live rooms (one hash a room, {ids_count / max(1, len(live_rooms)):,.0f}"
                    " ids a room; it leaves with the room)", f"{ids_bytes / max(1, ids_count):,.0f} B per id", "")
    figures.add_row("archive bytes per command (zstd)", f"{archive_bytes / max(1, archived_commands):,.0f} B", "<= 200 B")
    figures.add_row("archiver rooms/s", f"{archived / max(1e-9, archive_seconds):,.0f}", "")

    # Reads: the same read (state at a random version, no loader cache) of live and of archived rooms.
    fresh = bootstrap.tool_store(client, SHARDS, prefix, archive=archive, cache_size=256)
    sample = names if len(names) <= 5_000 else random.Random(3).sample(names, 5_000)
    live_times = await _read_latencies(fresh, live_rooms, READS)
    cold_times = await _read_latencies(fresh, sample, READS)
    warm = sample[: 100]
    warm_times = await _read_latencies(fresh, warm, READS)
    live_p50, live_p99 = _percentile(live_times, 0.5), _percentile(live_times, 0.99)
    for label, times in (("live room (baseline)", live_times), ("archived room, object cached", warm_times),
                         (f"archived room, any of {len(sample)} (object fetched)", cold_times)):
        p50, p99 = _percentile(times, 0.5), _percentile(times, 0.99)
        figures.add_row(f"state at a version, {label}: p50 / p99",
                        f"{p50:.2f} / {p99:.2f} ms ({p50 / live_p50:.1f}x / {p99 / live_p99:.1f}x)",
                        "p99 <= 5x" if "archived" in label else "")

    # verify --all as the command runs it (services/cli/verify_commands.py): every room the store lists, one by one
    verifier = bootstrap.tool_store(client, SHARDS, prefix, archive=archive)
    started = time.perf_counter()
    every = await verifier.rooms()
    for room in every:
        report = await verify_room(verifier, room)
        assert report.ok, (room, report.divergence)
    rate = len(every) / max(1e-9, time.perf_counter() - started)
    live_names = {room for room, _ in live_rooms}
    started = time.perf_counter()
    for room, _ in live_rooms:
        assert (await verify_room(verifier, room)).ok
    live_rate = len(live_rooms) / max(1e-9, time.perf_counter() - started)
    figures.add_row(f"verify --all ({len(every)} rooms: {len(every) - len(live_names)} archived, {len(live_names)} live)",
                    f"{rate:,.0f} rooms/s (live rooms alone: {live_rate:,.0f}/s)", "")
    console.print(figures)
    console.print(f"archive: {archive_dir} ({sum(f.stat().st_size for f in archive_dir.rglob('*') if f.is_file()) / 1e6:.2f} MB"
                  f" for {archived} rooms, {archived_commands} commands; removed now); keys under prefix {prefix!r} "
                  "are left in Redis for inspection")
    shutil.rmtree(archive_dir, ignore_errors=True)
    await client.aclose()


def main(url: str, rooms: int = 20_000, wave: int = 500, max_connections: int = 64) -> None:
    asyncio.run(_run(url, rooms, min(wave, rooms), output_console(), max_connections))
