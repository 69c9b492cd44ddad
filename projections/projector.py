"""The projector: reads shard feeds from its checkpoints and applies each batch with its checkpoint in one script."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import OrderedDict
from typing import Any

import redis.asyncio as aioredis
import structlog
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from almanac.events import codec
from almanac.events.errors import CorruptEventError, RulesNotInstalledError
from almanac.events.room import RoomCreated, RoomState, manifest_of
from almanac.events.step import advance
from almanac.projections.model_writes import COMMIT_SCRIPT, JoinedWrites, encode_json, queue_update, text
from almanac.projections.read_model_rows import RoomUpdate, created_in, project_room
from almanac.projections.rebuild import rebuild_shard
from almanac.storage.keys import projector_heartbeat_key, projector_stats_key, projectors_key
from almanac.storage.loader import RoomLoader
from almanac.storage.process_registry import forget, queue_beat_fields
from almanac.storage.redis_store import RedisEventStore
from almanac.storage.retention import StreamTrimmer, feed_was_trimmed

START = "0-0"
# The applied part of the shard feeds is trimmed this often, each round within a budget (storage.retention).
TRIM_EVERY_S = 5.0
TRIM_BUDGET_S = 2.0
# The heartbeat lives this long unless given (the projector beats five times in it); /health reads it for a projector
# whose figures do not say (storage.process_registry).
HEARTBEAT_TTL_MS = 5_000


class CheckpointMoved(Exception):
    """Someone else (a rebuild, a second projector) moved a shard's checkpoint: reload and go on from there."""


class Projector:
    """Applies shard feeds to the read models, exactly once per feed entry across restarts.

    The feed cursor lives only in Redis, next to the models, and moves in the same transaction as
    the writes it covers. No consumer group: FastStream's groups neither redeliver nor reclaim, and
    the checkpoint already says exactly where to resume. The commit script compares the checkpoint
    before it writes, which makes a second projector or a concurrent rebuild a clean conflict
    instead of a double apply.

    On a Redis Cluster (a ``RedisCluster`` client) each shard's feed is read on its own (one XREAD
    may not span slots): a standing blocking read per shard, and a batch as soon as any shard answers.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        shard_count: int,
        shards: list[int] | None = None,
        *,
        batch_size: int = 500,
        block_ms: int = 200,
        gather_ms: int = 100,
        name: str = "projector",
        heartbeat_ttl_ms: int = HEARTBEAT_TTL_MS,
        cache_size: int = 10_000,
        prefix: str = "alm",
        feed_retain_ms: int = 300_000,
        notifier_hold_ms: int = 0,
        store: RedisEventStore | None = None,
        loader: RoomLoader | None = None,
    ) -> None:
        self.client = client
        self.shard_count = shard_count
        self.shards = list(range(shard_count)) if shards is None else sorted(shards)
        self.batch_size = batch_size
        self.block_ms = block_ms
        # After a batch that filled no shard's read, wait this long so events gather: committing
        # batches of one or two entries across 16 shards took 45-60% of a core at 500 commands/s,
        # about as much as the engine, and a 25 ms wait cut it to ~23% for at most this much more lag;
        # 100 ms (ALMANAC_PROJECTOR_GATHER_MS) cut the projector's CPU by another third and the stack's
        # by ~12% at 500/s (docs/capacity.md). Read models lag by that much more; answers do not wait.
        # A full read means the projector is behind: it reads again at once and never falls behind.
        self.gather_ms = gather_ms
        self._last_read_full = False
        self.name = name
        self.heartbeat_ttl_ms = heartbeat_ttl_ms
        self.cache_size = cache_size
        # The process's store on ``client`` (services.bootstrap.runtime) when given; its keys are the process's.
        self.store = store or RedisEventStore(client, shard_count, prefix)
        self.keys = self.store.keys
        self.cursors: dict[int, str] = {}
        self._feed_shard = {self.keys.feed(s): s for s in self.shards}
        # The one loader: room states as projected so far (cached) or rebuilt from snapshot + tail. The process's
        # (services.bootstrap.Runtime.loader, on the same store) when given; else one of ``cache_size`` rooms here.
        self.loader = loader if loader is not None else RoomLoader(self.store, cache_size)
        self.log = structlog.get_logger("almanac.projector").bind(projector=name)
        self.events_applied = 0
        self.batches = 0
        self.conflicts = 0
        self.started_at_ms = int(time.time() * 1000)
        self.last_batch_at_ms = 0
        self._commit_script = client.register_script(COMMIT_SCRIPT)
        self._trimmer = StreamTrimmer(client, feed_retain_ms, notifier_hold_ms)
        self.feed_entries_trimmed = 0
        self._cluster = isinstance(client, RedisCluster)
        # Cluster only: shard -> (the cursor it reads from, the standing blocking XREAD).
        self._reads: dict[int, tuple[str, asyncio.Task]] = {}
        # A shard whose batch failed (a corrupt entry, a room that cannot be loaded) is not read again until
        # its pause ends (doubling, up to 5 s): it stalls visibly (lag) while the other shards go on.
        self._paused_until: dict[int, float] = {}
        self._pause_s: dict[int, float] = {}
        self._failures: list[Exception] = []  # of the last batch (drain raises the first)
        # Each room's ``room.created`` (its setup decides whether the room ranks: read_model_rows.leaderboard_scores),
        # kept from the batch that held it, else read once (a room whose creation this process did not project).
        self._creations: OrderedDict[str, RoomCreated | None] = OrderedDict()

    # --- cursors and cached states -----------------------------------------------------------

    async def load_checkpoints(self) -> None:
        """Read each shard's checkpoint (``_cursor_from``: a shard with none on a trimmed feed is rebuilt)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                pipe.get(self.keys.checkpoint(shard))
            values = await pipe.execute()
        self.cursors = {shard: await self._cursor_from(shard, value)
                        for shard, value in zip(self.shards, values, strict=True)}

    async def _cursor_from(self, shard: int, stored: Any) -> str:
        """Where to read a shard's feed from, given its stored checkpoint. With none, the feed's start is
        where its history begins, unless the feed was trimmed: then the shard is rebuilt from the room
        streams first, which sets its checkpoint (projections.rebuild.rebuild_shard)."""
        if stored is not None:
            return text(stored)
        if not await feed_was_trimmed(self.client, self.keys.feed(shard)):
            return START
        self._forget_shard(shard)
        rooms = await rebuild_shard(self.client, self.store, self.keys, shard)
        self.log.warning("shard_rebuilt", shard=shard, rooms=rooms, reason="no checkpoint, and the feed was trimmed")
        stored = await self.client.get(self.keys.checkpoint(shard))
        return text(stored) if stored is not None else START

    async def trim_feeds(self) -> int:
        """Drop the applied, retained-long-enough entries of this projector's shard feeds; entries removed."""
        removed = sum(await asyncio.gather(*(
            self._trimmer.trim_feed(self.keys.feed(shard), self.keys.checkpoint(shard), self.keys.feed_hold(shard),
                                    self.keys.notifier_cursor(shard))
            for shard in self.shards)))
        self.feed_entries_trimmed += removed
        return removed

    def _forget_shard(self, shard: int) -> None:
        self.loader.forget_where(lambda room: self.keys.shard(room) == shard)

    def _remember(self, staged: dict[str, tuple[RoomState, str]]) -> None:
        for room, (state, last_hash) in staged.items():
            self.loader.remember(room, state, last_hash)

    async def _state_before(self, room: str, version: int) -> RoomState | None:
        # The cached state when it is the one before this version; else (cold start, an evicted room)
        # the state the checkpoint implies, from the room's snapshot and stream.
        return await self.loader.load_exactly(room, version - 1)

    # --- one batch ----------------------------------------------------------------------------

    async def run_once(self, block_ms: int | None = None) -> int:
        """Read one batch from every shard feed (waiting up to ``block_ms``) and apply it; events applied."""
        if not self.cursors:
            await self.load_checkpoints()
        if self._cluster:
            replies = await self._read_each_shard(block_ms)
        else:
            streams = {self.keys.feed(s): self.cursors[s] for s in self.shards if not self._paused(s)}
            if not streams:
                await asyncio.sleep(min(self._pause_s.values(), default=0.1))
                return 0
            replies = await self.client.xread(streams, count=self.batch_size, block=block_ms)
        self._last_read_full = any(len(entries) >= self.batch_size for _, entries in replies or [])
        batches = {self._feed_shard[text(stream)]: entries for stream, entries in replies or [] if entries}
        if not batches:
            return 0
        if self._cluster:
            # One node's failure must fail its own shards only: each shard applies on its own round trips.
            applied = await asyncio.gather(*(self._apply_or_resync({shard: entries})
                                             for shard, entries in batches.items()))
            return sum(applied)
        # Shards share no keys: every shard's reads travel in one pipeline and every shard's commit in
        # another (three round trips a batch instead of three per shard: at 500 commands/s, with batches
        # spread thin over 16 shards, the per-shard round trips were most of the projector's CPU).
        return await self._apply_or_resync(batches)

    async def _read_each_shard(self, block_ms: int | None) -> list:
        """A Cluster's feeds: one XREAD per shard (their keys live in different slots)."""
        if block_ms is None:
            # The cluster pipeline sends one batch per node, the nodes concurrently.
            async with self.client.pipeline(transaction=False) as pipe:
                for shard in self.shards:
                    pipe.xread({self.keys.feed(shard): self.cursors[shard]}, count=self.batch_size)
                replies = await pipe.execute()
            return [stream for reply in replies for stream in reply or []]
        # Waiting for ALL blocking reads would add the idle shards' block time to every batch: keep
        # one standing read per shard and take whichever answered (XREAD has no side effects, so a
        # read from a cursor that has moved on since is simply dropped).
        for shard in self.shards:
            if shard not in self._reads and not self._paused(shard):
                cursor = self.cursors[shard]
                read = self.client.xread({self.keys.feed(shard): cursor}, count=self.batch_size,
                                         block=block_ms)
                self._reads[shard] = (cursor, asyncio.ensure_future(read))
        if not self._reads:  # every shard paused after a failure
            await asyncio.sleep(min(self._pause_s.values(), default=0.1))
            return []
        await asyncio.wait([task for _, task in self._reads.values()], return_when=asyncio.FIRST_COMPLETED)
        replies = []
        for shard, (cursor, task) in list(self._reads.items()):
            if task.done():
                del self._reads[shard]
                reply = task.result()
                if reply and cursor == self.cursors.get(shard):
                    replies += reply
        return replies

    async def _cancel_reads(self) -> None:
        reads = [task for _, task in self._reads.values()]
        self._reads.clear()
        for task in reads:
            task.cancel()
        await asyncio.gather(*reads, return_exceptions=True)

    async def _apply_or_resync(self, batches: dict[int, list[tuple[Any, dict]]]) -> int:
        applied, moved = await self.apply_shards(batches)
        for shard in moved:
            self.conflicts += 1
            self._forget_shard(shard)
            checkpoint = await self.client.get(self.keys.checkpoint(shard))
            self.cursors[shard] = await self._cursor_from(shard, checkpoint)
            self.log.info("checkpoint_moved", shard=shard, checkpoint=self.cursors[shard])
        return applied

    async def drain(self) -> int:
        """Apply everything in the feeds now (no waiting); events applied."""
        total = 0
        while True:
            self._failures.clear()
            applied = await self.run_once(block_ms=None)
            if self._failures:  # a shard that cannot be applied now will not be by waiting here
                raise self._failures[0]
            total += applied
            if not applied and not await self.resync_moved_checkpoints() and await self._caught_up():
                return total

    async def resync_moved_checkpoints(self) -> list[int]:
        """Shards whose stored checkpoint is no longer our cursor (a rebuild set it back): resume from it.

        A commit notices a moved checkpoint, but an idle shard commits nothing: without this, a rebuild
        that set an idle shard's checkpoint behind our cursor would leave it there until the next event.
        """
        if not self.cursors:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                pipe.get(self.keys.checkpoint(shard))
            values = await pipe.execute()
        moved = []
        for shard, value in zip(self.shards, values, strict=True):
            stored = text(value) if value is not None else START
            if stored != self.cursors.get(shard):
                self.conflicts += 1
                self._forget_shard(shard)
                self.cursors[shard] = await self._cursor_from(shard, value)
                moved.append(shard)
                self.log.info("checkpoint_moved", shard=shard, checkpoint=self.cursors[shard])
        return moved

    async def _caught_up(self) -> bool:
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                pipe.xrevrange(self.keys.feed(shard), "+", "-", count=1)
            heads = await pipe.execute()
        return all(not head or _id_tuple(text(head[0][0])) <= _id_tuple(self.cursors[s])
                   for s, head in zip(self.shards, heads, strict=True))

    async def apply(self, shard: int, entries: list[tuple[Any, dict]]) -> int:
        """Apply one shard's feed entries (see ``apply_shards``); CheckpointMoved if its checkpoint moved."""
        applied, moved = await self.apply_shards({shard: entries})
        if moved:
            raise CheckpointMoved(shard)
        return applied

    async def apply_shards(self, batches: dict[int, list[tuple[Any, dict]]]) -> tuple[int, list[int]]:
        """Fold each shard's feed entries into room states, then write each shard's read models with its
        checkpoint atomically (one script per shard). (events applied, shards whose checkpoint had moved)."""
        staged: dict[str, RoomState] = {}
        hashes: dict[str, str] = {}
        before: dict[str, RoomState | None] = {}
        events: dict[str, list] = {}
        # A shard's feed names only its own rooms: each batch's references, reads and failures are its own.
        references = {shard: _spans([(text(_field(fields, "r")), int(_field(fields, "v")), int(_field(fields, "l")))
                                     for _, fields in entries])
                      for shard, entries in batches.items()}
        rooms_of = {shard: sorted({room for room, _, _ in refs}) for shard, refs in references.items()}
        # One round trip: the events the feeds name, and what each shard's rows already project.
        async with self.store.stream_reads.pipeline(transaction=False) as pipe:
            for refs in references.values():
                self.store.queue_read_ranges(pipe, refs)
            for shard, rooms in rooms_of.items():
                pipe.hmget(self.keys.versions(shard), rooms)
            replies = await pipe.execute()
        reads = iter(replies)
        failed: dict[int, Exception] = {}
        parsed = []
        for shard, refs in references.items():
            shard_reads = [next(reads) for _ in refs]
            try:
                try:
                    ranges = self.store.parse_read_ranges(refs, shard_reads)
                except CorruptEventError:
                    # a room archived since its feed entries were written (storage.archive): the store reads
                    # each range from where the room is now; a range that is really missing fails again here
                    ranges = await self.store.read_ranges(refs)
            except Exception as error:  # noqa: BLE001 - a corrupt log stalls its shard, never the others
                failed[shard] = error
                continue
            parsed += [(shard, room, envelope.version, envelope)
                       for (room, _, _), envelopes in zip(refs, ranges, strict=True) for envelope in envelopes]
        projected = {room: int(value) for (shard, rooms), values in zip(rooms_of.items(), reads, strict=True)
                     for room, value in zip(rooms, values, strict=True) if value is not None}
        skipped: set[str] = set()
        for shard, room, version, envelope in parsed:
            if version <= projected.get(room, 0) or room in skipped or shard in failed:
                continue  # a rebuild already projected this version (it resets the checkpoint to an earlier entry)
            try:
                current = staged[room] if room in staged else await self._state_before(room, version)
                if (current.version if current is not None else 0) != version - 1:
                    current = await self.loader.load_exactly(room, version - 1)
                if version == 1:
                    current = await self.loader.base_of(envelope)  # a fork folds onto its parent
                event = codec.decode_event(envelope)
                after = advance(current, envelope, event)
            except RulesNotInstalledError as error:
                # Never fold a room with other rules than its own: skip it (its rows stay where they were;
                # they catch up from the log once the version is installed, ledgers by a rebuild).
                self.log.warning("room_skipped_rules_not_installed", room=room, version=version, error=error.message)
                skipped.add(room)
                for staging in (staged, before, events, hashes):
                    staging.pop(room, None)
                continue
            except Exception as error:  # noqa: BLE001 - a room that cannot be folded stalls its shard only
                failed[shard] = error
                continue
            if room not in before:
                before[room] = current
                events[room] = []
            staged[room] = after
            hashes[room] = envelope.hash
            events[room].append((envelope, event))
        for shard, error in failed.items():
            self._pause_shard(shard, error)
        for room in [room for room in staged if self.keys.shard(room) in failed]:
            for staging in (staged, before, events, hashes):
                staging.pop(room, None)
        updates: dict[int, list[RoomUpdate]] = {shard: [] for shard in batches if shard not in failed}
        creations = await self._created(staged, events)
        for room in staged:
            updates[self.keys.shard(room)].append(project_room(before[room], staged[room], events[room],
                                                               creations.get(room)))
        # Rooms whose rows stand at exactly the state this batch starts from: what those rows' writes put in place
        # and the batch did not change is not written again (model_writes.queue_update).
        follows = {room for room, state in before.items()
                   if state is not None and state.room == room and projected.get(room) == state.version}
        moved = await self._commit_many({shard: (updates[shard], text(entries[-1][0]))
                                         for shard, entries in batches.items() if shard not in failed}, follows)
        for shard in updates:
            self._pause_s.pop(shard, None)  # a shard that went through starts its next failure's pause afresh
        # Only now, with the transactions applied, may the cache move on (a failed commit leaves it as it was).
        self._remember({room: (state, hashes[room]) for room, state in staged.items()
                        if self.keys.shard(room) not in moved})
        applied = sum(len(e) for room, e in events.items() if self.keys.shard(room) not in moved)
        self.events_applied += applied
        self.batches += 1
        self.last_batch_at_ms = int(time.time() * 1000)
        return applied, moved

    async def _created(self, staged: dict[str, RoomState], events: dict[str, list]) -> dict[str, RoomCreated | None]:
        """The ``room.created`` of each staged room whose rules judge setups (a manifest's ``ranks``; not a fork's,
        nor a challenge room's: those never rank): from its batch, this process's record, or one read of its
        version 1 (all such reads gathered)."""
        found: dict[str, RoomCreated | None] = {}
        missing = []
        for room, state in staged.items():
            if state.fork is not None or state.challenge is not None or manifest_of(state).ranks is None:
                continue
            created = created_in(events[room]) if room not in self._creations else self._creations[room]
            if created is None and room not in self._creations:
                missing.append(room)
                continue
            found[room] = created
        if missing:
            firsts = await asyncio.gather(*(self.store.read(room, 1, 1) for room in missing))
            for room, first in zip(missing, firsts, strict=True):
                event = codec.decode_event(first[0]) if first else None
                found[room] = event if isinstance(event, RoomCreated) else None
        for room, created in found.items():
            self._creations[room] = created
            self._creations.move_to_end(room)
        while len(self._creations) > self.cache_size:
            self._creations.popitem(last=False)
        return found

    async def _commit(self, shard: int, updates: list[RoomUpdate], last_id: str) -> None:
        """One shard's model rows and its new checkpoint in one script, if the checkpoint is still ours."""
        if await self._commit_many({shard: (updates, last_id)}):
            raise CheckpointMoved(shard)

    async def _commit_many(self, commits: dict[int, tuple[list[RoomUpdate], str]],
                           follows: set[str] | frozenset[str] = frozenset()) -> list[int]:
        """Each shard's rows and new checkpoint by one script call, every shard's call in one pipeline;
        the shards whose checkpoint had moved (nothing written for them). ``follows``: the rooms whose rows
        stood at the state their update starts from (``queue_update``'s ``follows_rows``)."""
        calls = []
        for shard, (updates, last_id) in commits.items():
            joined = JoinedWrites()
            for update in updates:
                queue_update(joined, self.keys, shard, update, follows_rows=update.room in follows)
            calls.append(joined.shard_writes().script_call(self.keys.checkpoint(shard), self.cursors[shard], last_id))
        # Read models are derived (a rebuild writes them again from the logs): under ALMANAC_DURABILITY=replica
        # waiting for a replica would confirm nothing a player relies on (and on a Cluster its WAIT path stalled
        # the projector: the model scripts never ran).
        replies = await self.store.evalsha_many([(self._commit_script, keys, args) for keys, args in calls],
                                                replicated=False)
        moved = []
        errors = []
        for (shard, (_, last_id)), reply in zip(commits.items(), replies, strict=True):
            if isinstance(reply, Exception):
                errors.append(reply)  # raised below, once every shard that did commit has moved its cursor
            elif int(reply[0]) != 1:
                moved.append(shard)
            else:
                self.cursors[shard] = last_id
        if errors:
            raise errors[0]
        return moved

    def _paused(self, shard: int) -> bool:
        return time.monotonic() < self._paused_until.get(shard, 0.0)

    def _pause_shard(self, shard: int, error: Exception) -> None:
        pause = min(self._pause_s.get(shard, 0.25) * 2, 5.0)
        self._pause_s[shard] = pause
        self._paused_until[shard] = time.monotonic() + pause
        self._forget_shard(shard)
        self._failures.append(error)
        self.log.error("shard_batch_failed", shard=shard, error=f"{type(error).__name__}: {error}",
                       retry_in_s=pause)

    # --- running ------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Apply batches until ``stop`` is set; the batch in hand is finished first."""
        heartbeat = asyncio.create_task(self._heartbeat(stop))
        trimming = asyncio.create_task(self._trim_loop(stop))
        backoff = 0.5
        self.log.info("projector_started", shards=self.shards, batch_size=self.batch_size)
        try:
            while not stop.is_set():
                try:
                    if not self.cursors:
                        await self.load_checkpoints()
                    if not await self.run_once(block_ms=self.block_ms):
                        await self.resync_moved_checkpoints()
                    elif self.gather_ms and not self._last_read_full:
                        await _sleep_or_stop(stop, self.gather_ms / 1000)
                    backoff = 0.5
                except RedisError as error:
                    self.log.warning("redis_error", error=str(error), retry_in_s=backoff)
                    self.cursors.clear()
                    await self._cancel_reads()
                    await _sleep_or_stop(stop, backoff)
                    backoff = min(backoff * 2, 5.0)
                except Exception as error:  # a corrupt entry stalls its shard visibly (lag) instead of being skipped
                    self.log.error("batch_failed", error=f"{type(error).__name__}: {error}", retry_in_s=backoff)
                    self.cursors.clear()
                    self.loader.forget_where(lambda room: True)
                    await _sleep_or_stop(stop, backoff)
                    backoff = min(backoff * 2, 5.0)
        finally:
            stop.set()
            await self._cancel_reads()
            await heartbeat
            await trimming
            self.log.info("projector_stopped", events_applied=self.events_applied)

    async def _trim_loop(self, stop: asyncio.Event) -> None:
        """Trim the applied part of the feeds every TRIM_EVERY_S, within a budget: never in the way of the
        heartbeat or the batches (a node failing over answers nothing for seconds)."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(self.trim_feeds(), TRIM_BUDGET_S)
            except Exception as error:  # noqa: BLE001 - trimming is housekeeping: the next round tries again
                self.log.warning("trim_failed", error=f"{type(error).__name__}: {error}")
            await _sleep_or_stop(stop, TRIM_EVERY_S)

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        interval = self.heartbeat_ttl_ms / 5000
        last_events, last_at = self.events_applied, time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            rate = (self.events_applied - last_events) / max(now - last_at, 1e-6)
            last_events, last_at = self.events_applied, now
            try:
                await self.publish_status(rate)
            except RedisError as error:
                self.log.warning("heartbeat_failed", error=str(error))
            await _sleep_or_stop(stop, interval)
        # A clean stop (scaled down, renamed, restarted) takes the projector out of the set too: /health reports a
        # registered projector without a heartbeat as missing, which is for one that died, not one that was stopped.
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.delete(projector_heartbeat_key(self.name, self.keys.prefix))
                forget(pipe, projectors_key(self.keys.prefix), self.name,
                       projector_stats_key(self.name, self.keys.prefix))
                await pipe.execute()
        except RedisError:
            pass

    async def publish_status(self, events_per_s: float = 0.0) -> None:
        """The heartbeat (expires when the projector dies) and its running figures."""
        status = {
            "name": self.name,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "shards": self.shards,
            "started_at_ms": self.started_at_ms,
            "at_ms": int(time.time() * 1000),
        }
        stats = {
            "events_applied": self.events_applied,
            "batches": self.batches,
            "conflicts": self.conflicts,
            "events_per_s": round(events_per_s, 1),
            "last_batch_at_ms": self.last_batch_at_ms,
            "cached_rooms": len(self.loader),
            "feed_entries_trimmed": self.feed_entries_trimmed,
        }
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.set(projector_heartbeat_key(self.name, self.keys.prefix), encode_json(status), px=self.heartbeat_ttl_ms)
            pipe.hset(projector_stats_key(self.name, self.keys.prefix), mapping=stats)
            # Its stats before its name: a member without stats was forgotten (storage.process_registry; not in order
            # on a Redis Cluster: such a member is taken out and back at its next beat).
            queue_beat_fields(pipe, projector_stats_key(self.name, self.keys.prefix), self.heartbeat_ttl_ms)
            pipe.sadd(projectors_key(self.keys.prefix), self.name)
            await pipe.execute()


def _spans(references: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """A shard's feed references (room, first version, last version) with each room's consecutive ones joined:
    one XRANGE per room and batch rather than one per feed entry. A reference that does not continue its room's
    last (a feed read again after a rebuild) stays apart, in its order."""
    spans: dict[str, list[list[int]]] = {}
    for room, first, last in references:
        held = spans.setdefault(room, [])
        if held and held[-1][1] + 1 == first:
            held[-1][1] = last
        else:
            held.append([first, last])
    return [(room, first, last) for room, held in spans.items() for first, last in held]


def _field(fields: dict, name: str) -> Any:
    value = fields.get(name.encode())
    return fields[name] if value is None else value


def _id_tuple(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        pass
