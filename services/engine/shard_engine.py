"""The engine loop: lease shards, drain own pending commands, then read new ones in batches."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError, ResponseError

from almanac.events.step import CommandRecord, decode_record
from almanac.services.bus import (
    COMMAND_FIELD,
    count as count_request,
    encode_outcome,
    outcome_channel_of,
)
from almanac.services.engine.dead_letters import DeadLetters
from almanac.services.engine.housekeeping import Housekeeping
from almanac.services.engine.inbox import Inbox, NotDecidedHere
from almanac.services.engine.lease import ShardLeases
from almanac.services.engine.metrics import EngineMetrics
from almanac.services.logging import get_logger
from almanac.services.room_service import ROOM_CACHE, BatchPlan, Outcome, RoomService
from almanac.services.settings import Settings, parse_shard_selection
from almanac.storage.base import CommandLimited, Counted, Receipt
from almanac.storage.command_streams import GROUP, CommandStreams, Entry, command_streams
from almanac.storage.keys import engine_heartbeat_key, engine_stats_key, engines_key
from almanac.storage.loader import RoomLoader
from almanac.storage.process_registry import queue_beat_fields
from almanac.storage.redis_errors import INFRASTRUCTURE_ERRORS, redis_failure, refuses_writes, stream_vanished
from almanac.storage.redis_store import RedisEventStore

# Counters go to Redis at most this often from the batch path (and from the lease loop every lease_ms/3):
# a dozen HINCRBYs after every small batch cost Redis and the engine more than the batch's own writes.
METRICS_FLUSH_S = 0.5
# The lease loop's next tick after a lease was lost or its node did not answer (instead of lease_ms/3).
LEASE_RETRY_S = 0.2
# A batch at least this long means the streams are busy: the next read (without BLOCK) leaves in front of
# its writes, and the next batch is decided while Redis applies this one (Engine._write_and_read).
# Below it the next read waits behind the writes with BLOCK, one read per batch, as at a low rate.
READ_AHEAD_AT = 32
# Consume rounds failing in a row for a reason that is not Redis being away or refusing every writer (a
# permission, a script or data this build cannot handle, a bug): then the engine gives its leases back and
# takes none for STEP_ASIDE_LEASES lease periods, so another engine (another build, another host) can
# serve the shards; with no other engine it takes them back and tries again.
STEP_ASIDE_AFTER = 5
STEP_ASIDE_LEASES = 3


class _TakeoverNeeds(set):
    """The shards to take over (group, pending claimed and replayed) before they are read with ``>`` again, and
    how many times each shard's need was recorded: a takeover clears the need only when none was recorded since it
    began (``settle``). One recorded meanwhile may be past the takeover's claim (its lease lost and taken back, the
    holder between having read entries with ``>``; a read dropped): wiped, those entries would wait, pending, for a
    client's resend."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: dict[int, int] = {}

    def add(self, shard: int) -> None:
        super().add(shard)
        self.recorded[shard] = self.recorded.get(shard, 0) + 1

    def update(self, *shard_lists: Iterable[int]) -> None:
        for shards in shard_lists:
            for shard in shards:
                self.add(shard)

    def settle(self, shard: int, recorded: int) -> None:
        """A takeover begun when the shard's need had been recorded ``recorded`` times is done: the need is cleared
        unless recorded again since (the shard is then taken over again)."""
        if self.recorded.get(shard, 0) == recorded:
            self.discard(shard)


class _Batch(msgspec.Struct):
    """Read entries and what was decided for them: (shard, entry id, fields), each entry's record (or why it
    could not be decoded), the outcomes the scripts will publish by batch position, and the decisions."""

    entries: list[Entry]
    records: list
    announced: dict[int, Outcome]
    plan: BatchPlan



def default_engine_name(selection: str) -> str:
    return f"{socket.gethostname()}:{selection}"


def heartbeat_ttl_ms(lease_ms: int) -> int:
    """How long an engine's heartbeat lives (unless its config says): three leases, at least 3 s. /health reads it for
    an engine whose figures do not say (storage.process_registry)."""
    return max(3 * lease_ms, 3000)


class EngineConfig(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    shards: list[int]
    shard_count: int = 16
    lease_ms: int = 5_000
    batch_size: int = 100
    max_attempts: int = 3
    snapshot_every: int = 100
    block_ms: int = 100
    prefix: str = "alm"
    durability: str = "aof"  # settings.durability; "replica": every append waits for one replica (WAIT)
    stream_retain_ms: int = 300_000  # acknowledged commands kept this long in the command streams
    clock: bool = True  # run the clock of the held shards (settings.clock)
    heartbeat_ttl_ms: int = 0  # 0: ``heartbeat_ttl_ms(lease_ms)``


def engine_config(settings: Settings) -> EngineConfig:
    """The engine the settings describe (``almanac engine``'s, or a gateway's: ``gateway.gateway_engine_config``)."""
    return EngineConfig(
        name=settings.engine_name or default_engine_name(settings.engine_shards),
        shards=parse_shard_selection(settings.engine_shards, settings.shard_count),
        shard_count=settings.shard_count,
        lease_ms=settings.lease_ms,
        batch_size=settings.batch_size,
        max_attempts=settings.max_attempts,
        snapshot_every=settings.snapshot_every,
        durability=settings.durability,
        stream_retain_ms=settings.stream_retain_s * 1000,
        clock=settings.clock,
    )


class DurabilityError(Exception):
    """The configured durability cannot be had from this Redis (one line for the operator)."""


async def require_replica(client: aioredis.Redis) -> None:
    """Fail fast when ALMANAC_DURABILITY=replica but Redis has no connected replica: every append would
    otherwise wait out its WAIT timeout and fail. On a Cluster every primary needs one (each node's writes
    are confirmed by WAIT on that node: RedisEventStore._evalsha_waited_per_node)."""
    if isinstance(client, RedisCluster):
        infos = await client.info("replication", target_nodes=RedisCluster.PRIMARIES)
        bare = sorted(node for node, info in infos.items() if int(info.get("connected_slaves", 0)) < 1)
        if bare:
            raise DurabilityError(f"ALMANAC_DURABILITY=replica needs a connected replica on every Cluster primary; "
                                  f"{', '.join(bare)} has none (add replicas, or use ALMANAC_DURABILITY=aof)")
        return
    replicas = int((await client.info("replication")).get("connected_slaves", 0))
    if replicas < 1:
        raise DurabilityError("ALMANAC_DURABILITY=replica needs a Redis with at least one connected replica; this "
                              "one has none (add a replica, or use ALMANAC_DURABILITY=aof)")


class Engine:
    """One engine process: a lease loop (renew, acquire), a consume loop over held shards and a beat loop (counters,
    heartbeat)."""

    def __init__(self, client: aioredis.Redis, config: EngineConfig, store: RedisEventStore | None = None,
                 write_call: Callable[..., Awaitable[Any]] | None = None, streams: CommandStreams | None = None,
                 loaders: Callable[[int], RoomLoader] | None = None,
                 call_many: Callable[..., Awaitable[list[Any]]] | None = None) -> None:
        """``write_call``: how the writes of commands handed in (``decide_here``) are sent, one script call each
        (the gateway's pipelined submit connection, ``PipelinedConnection.call``): one Redis only and unless every append
        waits for a replica; otherwise (and without it) the store's own write, which ends with WAIT.
        ``streams``: how the shards' command streams are read and answered on ``client`` (one Redis or a
        Cluster: storage.command_streams, chosen by the client's class when not given).
        ``loaders``: how the process makes a room loader on ``store`` (``bootstrap.Runtime.loader``, given with the
        runtime's store): one for the room step, one for the clock; without it they are made on ``store`` here.
        ``call_many``: how several commands go together on ``write_call``'s connection (its
        ``PipelinedConnection.call_many``): a batch's writes (with ``write_call``), the clock's looks at the held
        shards; without it, a task per write and ``client``'s pipeline for the clock."""
        self.client = client
        self.config = config
        # The process's store on ``client`` (services.bootstrap.runtime) when given; its keys are the process's.
        self.store = store or RedisEventStore(client, config.shard_count, config.prefix,
                                              wait_replicas=1 if config.durability == "replica" else 0)
        self.keys = self.store.keys
        self.loaders = loaders or functools.partial(RoomLoader, self.store)
        self.service = RoomService(self.store, snapshot_every=config.snapshot_every, loader=self.loaders(ROOM_CACHE))
        self.leases = ShardLeases(client, config.shards, config.name, config.lease_ms, config.prefix)
        self.metrics = EngineMetrics()
        self.service.on_restore = self.metrics.observe_restore
        self.log = get_logger("almanac.engine", engine=config.name)
        self.dead_letters = DeadLetters(client, self.keys, config.prefix, config.name, self.log)
        self._stopping = asyncio.Event()
        # Set by the consume loop when the engine has become ready after its start: the beat loop beats at once,
        # so readiness (consumed_ms) is published now rather than at the next beat (METRICS_FLUSH_S later).
        # (Not after each Redis failure: a failing node would make it beat at the pace of the failures.)
        self._ready_news = asyncio.Event()
        self._needs_takeover = _TakeoverNeeds()
        self._conflicts_seen = 0
        self._redecided_seen = 0
        self._unsaved_seen = 0
        self._tasks: list[asyncio.Task] = []
        self._started_ms = int(time.time() * 1000)
        self.heartbeat_ttl_ms = config.heartbeat_ttl_ms or heartbeat_ttl_ms(config.lease_ms)
        # On one Redis the append scripts acknowledge and publish (storage.base.Receipt); the store says when
        # (not with ALMANAC_DURABILITY=replica, nor on a Cluster: RedisEventStore.answers_in_its_write).
        self._receipts = self.store.answers_in_its_write
        self.streams = streams or command_streams(client, self.keys, config.name, config.batch_size, config.block_ms)
        # Readiness, published in the heartbeat (epoch ms; 0 = not yet): the last Redis failure the lease or the
        # consume loop saw (not the beat's: its keys are the engine's own, not the shards'), and the last consume
        # round completed with every held shard taken over (group created, pending claimed = writes, then a read).
        # /health trusts an engine only when its round is newer than its own failure and than any outage the gateway
        # saw: Redis answering PING is not the engine accepting commands.
        self._redis_error_ms = 0
        self._consumed_ms = 0
        # structlog's filtering logger: skip building command.done lines that would be dropped.
        self._log_done = not hasattr(self.log, "is_enabled_for") or self.log.is_enabled_for(logging.DEBUG)
        # A batch read in front of the last one's writes and decided while Redis applied them; next to go.
        self._ahead: _Batch | None = None
        self.housekeeping = Housekeeping(client, self.keys, self.store, lambda: self.leases.held,
                                         self.leases.safely_held, self._stopping, self.metrics, self.log,
                                         config.stream_retain_ms, config.clock, self.service.loader.cached,
                                         self.loaders, call_many, self.streams.stuck, self._take_over_stuck)
        # Commands handed in by the gateway of this same process (``decide_here``), with their waiters: decided
        # by the consume loop between its batches, so this process stays its shards' only, serial writer.
        self.inbox = Inbox()
        self._taking_over = False  # a takeover may replay a long backlog: commands go to the stream meanwhile
        # On a Cluster each shard's takeover is a task of its own, off the loop that serves the other shards
        # (``_take_over_apart``): those in progress, by shard, and a failure of one that is not its node's alone,
        # raised in the loop's next round as a takeover in the loop raises it.
        self._takeovers: dict[int, asyncio.Task] = {}
        self._takeover_error: BaseException | None = None
        self._write_call = write_call if self._receipts else None
        self._write_many = call_many if self._write_call is not None else None

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.config.shards:
            # A gateway that holds no shard (ALMANAC_ENGINE_SHARDS=none): nothing to lease, read or clock, and no
            # heartbeat, which would count a process that decides nothing among the engines (/health).
            self.log.info("engine.holds_no_shard", pid=os.getpid())
            return
        if self.config.durability == "replica":
            await require_replica(self.client)
        self.log.info("engine.start", shards=self.config.shards, lease_ms=self.config.lease_ms,
                      batch_size=self.config.batch_size, pid=os.getpid())
        self._tasks = [
            asyncio.create_task(self._lease_loop(), name="engine-leases"),
            asyncio.create_task(self._consume_loop(), name="engine-consume"),
            asyncio.create_task(self._beat_loop(), name="engine-beat"),
        ]
        self.housekeeping.start()

    async def stop(self) -> None:
        """Finish the command in hand, acknowledge what is done, give the leases back."""
        self._stopping.set()
        if not self._tasks:  # never started (no shard to hold, or its start failed): nothing taken to give back
            await self.streams.close()
            return
        leases, consume, beat = self._tasks
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await consume
        for task in (leases, beat):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.housekeeping.stop()
        await self.streams.close()
        with contextlib.suppress(*INFRASTRUCTURE_ERRORS, ResponseError):
            await self._flush_metrics_and_heartbeat(alive=False)
        with contextlib.suppress(*INFRASTRUCTURE_ERRORS, ResponseError):  # apart: a counters' node down keeps no lease
            await self.leases.release_all()
        self.log.info("engine.stop", commands=self.metrics.totals["commands"])

    async def wait_stopped(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- commands decided in this process -----------------------------------------------------

    def decides_here(self, room: str) -> bool:
        """Whether ``decide_here`` takes the room's commands now: its shard safely held and taken over."""
        shard = self.keys.shard(room)
        return (self.streams.decides_in_process and not self._stopping.is_set() and not self._taking_over
                and shard not in self._needs_takeover and shard in self.leases.safely_held())

    async def decide_here(self, record: CommandRecord, limit: Counted | None = None,
                          timeout_s: float = 5.0) -> Outcome | None:
        """Decide a command of this process's gateway without the command stream, if its room's shard is
        safely held here: its Outcome once written. None when it is not (another process holds the shard,
        a takeover is due, this engine is stopping, or the streams take no command in process: a Cluster):
        submit it to the stream instead.

        The gateway's submit, the engine's read of it and the published answer cost more CPU than deciding
        (each a message between processes). The command is decided by the consume loop between its
        batches, against the same room states, and written by the same ordered write (the command record,
        its dedupe and the version check included): this process stays its shards' only, serial writer.
        ``limit``: the client's limit, counted as the stream's submit counts it (every command, refused or not)
        but by the command's own write, in the same step: ``CommandLimited`` (a 429), nothing written.
        Raises a Redis failure (the gateway answers 503; the command id may be sent again), and
        ``NotDecidedHere`` when no batch took the command within ``timeout_s`` (it is withdrawn: nothing
        written) or it failed here for another reason than Redis (nothing written; the stream path takes it).
        A command a batch took is waited for to the end: its write is bounded by Redis's timeout.
        """
        if not self.decides_here(record.room):
            return None
        return await self.inbox.hand_in(record, limit, timeout_s)  # type: ignore[return-value]

    async def _decide_handed(self, held: list[int]) -> None:
        """Decide and write the commands handed in by ``decide_here``; never raises (each waiter gets its own
        answer: an Outcome, None to go through the stream, or the Redis failure)."""
        batch = self.inbox.take()
        # Held now, not when the read began (it may have waited a whole block): the lease's margin covers
        # this batch's decision and write, as it covers a stream batch read just before it.
        safe = set(self.leases.safely_held()).intersection(held).difference(self._needs_takeover)
        records: list[CommandRecord] = []
        limits: list[Counted | None] = []
        waiters: list[asyncio.Future] = []
        for entry in batch:
            if entry.future.done():
                continue  # its request left before it was decided: nothing was written
            if self.keys.shard(entry.record.room) not in safe:
                entry.future.set_result(None)  # a lease lapsed meanwhile: the shard's next holder decides it
                continue
            entry.taken = True
            records.append(entry.record)
            limits.append(entry.counted)
            waiters.append(entry.future)
        if not records:
            return
        try:
            await self._decide_taken(records, limits, waiters)
        finally:
            for waiter in waiters:  # something raised past the answers (a bug, a cancellation): never left hanging
                if not waiter.done():
                    waiter.set_exception(RedisConnectionError("the engine stopped deciding this command; send it again"))

    async def _decide_taken(self, records: list[CommandRecord], limits: list[Counted | None],
                            waiters: list[asyncio.Future]) -> None:
        """Decide and write the taken commands (counting each client's limit once) and answer each waiter."""
        plan = None
        try:
            plan = await self.service.decide_many(records, limits=limits if any(limits) else None)
            results: list = await self.service.write(plan, self._write_handed if self._write_call is not None else None)
            counted = plan.counted
        except Exception as error:  # noqa: BLE001 - answered to each waiter below
            # Deciding failed: nothing was written, nothing counted (no early writes when limits are counted,
            # RoomService.decide_many). The write failed: it may have taken effect, its counts with it, so they
            # are taken as counted (a Redis failure is a 503 and the same id sent again a duplicate; a bug that
            # fails before the send may leave a command uncounted, never counted twice).
            results = [error] * len(records)
            counted = set() if plan is None else set(range(len(records)))
        for index, (record, limit, waiter) in enumerate(zip(records, limits, waiters, strict=True)):
            result = results[index]
            uncounted = limit is not None and index not in counted
            if result is None:
                try:
                    if uncounted:
                        await self._count_handed(record, limit)  # type: ignore[arg-type]
                        uncounted = False
                    result = await self.service.handle(record)  # alone, in batch order (conflict, duplicate)
                except Exception as error:  # noqa: BLE001 - answered to its waiter
                    result = error
            elif isinstance(result, Outcome) and uncounted:
                try:  # answered without a write (an unrecorded refusal, an earlier outcome): counted all the same
                    await self._count_handed(record, limit)  # type: ignore[arg-type]
                except Exception as error:  # noqa: BLE001 - a 429 (or 503) instead
                    result = error
            if isinstance(result, CommandLimited):
                pass  # the client's window is used up: a 429, nothing written
            elif isinstance(result, Exception):
                # The write may have taken effect without its reply: decide the room again from the store.
                self.service.forget(record.room)
                if not redis_failure(result):
                    # Not Redis (a room that cannot be loaded, a bug): the stream path counts its attempts
                    # and sets it aside after max_attempts, as for every other command; its limit, if counted
                    # here already, is not counted again there.
                    self.log.warning("here.failed", room=record.room, command_id=record.command_id,
                                     error=f"{type(result).__name__}: {result}")
                    result = NotDecidedHere(f"command {record.command_id!r} failed here: {type(result).__name__}",
                                            counted=limit is not None and not uncounted)
            elif isinstance(result, Outcome):
                self._account(record, result)
            if not waiter.done():
                if isinstance(result, Exception):
                    waiter.set_exception(result)
                else:
                    waiter.set_result(result)

    async def _write_handed(self, groups: list[list]) -> list[list]:
        """The ordered writes of commands handed in, one script call per shard on ``write_call`` (redis-py's
        pooled call path cost more than the write), sent together by ``call_many`` when given (a task per write
        cost more than its call: docs/capacity.md, issue 29's seventh pass); a NOSCRIPT one written again by the
        store."""
        assert self._write_call is not None
        commands = [self.store.ordered_command(group) for group in groups]
        if self._write_many is not None:
            replies = await self._write_many(commands, raise_on_error=False)
        else:
            replies = await asyncio.gather(*(self._write_call(*command) for command in commands),
                                           return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException) and not isinstance(reply, ResponseError):
                raise reply  # the connection failed: the writes may have taken effect (see _decide_handed)
        return [await self.store.ordered_reply_results(group, reply)
                for group, reply in zip(groups, replies, strict=True)]

    async def _count_handed(self, record: CommandRecord, limit: Counted) -> None:
        """Count a command handed in that no write counted; ``RateLimited`` past its limit. A command decided
        already (a resend answered its first outcome) is not counted, as the write script would not count it."""
        await count_request(self.client, self.keys, record.room, limit, call=self._write_call,
                            command_id=record.command_id)

    def _still_held(self, batch: list[Entry]) -> list[Entry]:
        """A read's entries whose shard is still safely held: commands decided here while it waited took time
        from the lease's margin. The others stay pending, for a takeover (``>`` never delivers them again)."""
        if not batch:
            return batch
        safe = set(self._readable(self.leases.safely_held()))
        lapsed = {shard for shard, _, _ in batch if shard not in safe}
        if not lapsed:
            return batch
        self._orphan(lapsed)
        return [entry for entry in batch if entry[0] not in lapsed]

    def _orphan(self, shards: set[int]) -> None:
        """Shards read while not safely held: what was delivered of them stays pending for their next holder,
        which may be this engine again (a lease renewed late): then only a takeover re-reads it."""
        if shards:
            self._needs_takeover.update(shards)
            self.log.info("shard.read_orphaned", shards=sorted(shards))

    async def _next_batch(self, held: list[int]) -> list[Entry]:
        """The next read of the held shards' command streams (``_read_new``), deciding the commands handed in
        (``decide_here``) while it waits: the one way commands come to this engine's consume loop."""
        inbox = self.inbox
        read = asyncio.ensure_future(self._read_new(held))
        read.add_done_callback(inbox.wake)
        try:
            while True:
                if inbox and not self._stopping.is_set():  # stopping: they go back (inbox.release)
                    await self._decide_handed(held)
                if read.done():
                    return self._still_held(read.result())
                if inbox and not self._stopping.is_set():
                    continue
                await inbox.sleep()  # a command handed in, or the read done
        except BaseException:
            if not read.done():
                read.cancel()
                with contextlib.suppress(BaseException):
                    await read
            raise

    # --- leases and heartbeat -----------------------------------------------------------------

    async def _lease_loop(self) -> None:
        interval = self.config.lease_ms / 3000
        while not self._stopping.is_set():
            # A lease lost, or one whose node did not answer (a Cluster failing over): tick again soon.
            pause = interval
            try:
                acquired, lost = await self.leases.tick()
                if lost or self.leases.unsettled:
                    pause = min(interval, LEASE_RETRY_S)
                for shard in acquired:
                    self._needs_takeover.add(shard)
                    self.log.info("lease.acquired", shard=shard)
                for shard in lost:
                    self.log.warning("lease.lost", shard=shard)
            except (*INFRASTRUCTURE_ERRORS, ResponseError) as error:
                # Unreachable, or refusing writes (MISCONF, BUSY): the leases lapse meanwhile, and are taken
                # again once Redis takes writes. This loop must never end while the engine runs.
                self._redis_error_ms = int(time.time() * 1000)
                self.log.warning("lease.redis_unreachable", error=f"{type(error).__name__}: {error}")
                pause = min(interval, LEASE_RETRY_S)
            except Exception:  # noqa: BLE001 - a bug: logged, and the leases are tried again
                self.log.exception("lease.unexpected_error")
                pause = min(interval, LEASE_RETRY_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)

    async def _beat_loop(self) -> None:
        """The engine's counters and heartbeat, every METRICS_FLUSH_S, in a loop of their own: their keys are the
        engine's, on whichever node holds them, so a node that does not answer (a Cluster primary stopped) holds up
        these writes only, never the shards' answers or the leases (the counters once rode with the outcomes, and
        every live shard's answers then waited a socket timeout)."""
        while not self._stopping.is_set():
            try:
                await self._flush_metrics_and_heartbeat(alive=True)
            except (*INFRASTRUCTURE_ERRORS, ResponseError) as error:
                self.log.warning("engine.beat_failed", error=f"{type(error).__name__}: {error}")
            except Exception:  # noqa: BLE001 - a bug: logged, and the beat is tried again
                self.log.exception("engine.beat_unexpected_error")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping_or_ready_news(), METRICS_FLUSH_S)

    async def _stopping_or_ready_news(self) -> None:
        """Return once the engine is stopping or has become ready after its start (``_ready_news``, then cleared)."""
        waits = {asyncio.ensure_future(self._stopping.wait()), asyncio.ensure_future(self._ready_news.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        self._ready_news.clear()

    async def _flush_metrics_and_heartbeat(self, alive: bool) -> None:
        name = self.config.name
        beat = {
            "name": name,
            "pid": os.getpid(),
            "shards_owned": self.config.shards,
            "shards_held": self.leases.held,
            "started_at_ms": self._started_ms,
            "time_ms": int(time.time() * 1000),
            "consumed_ms": self._consumed_ms,
            "redis_error_ms": self._redis_error_ms,
        }
        prefix = self.config.prefix
        key = engine_stats_key(name, prefix)
        deltas = self._metrics_deltas()
        # The counters and the heartbeat in two sends, side by side: every command of the counters' on their key (one
        # node), while the heartbeat's key and the engines' set share no slot with it on a Cluster. In one send, a
        # failure of their node would have the next beat count again what the counters' node had already added; one
        # after the other, a counters' node that does not answer would hold the heartbeat back a socket timeout.
        counted, beaten = await asyncio.gather(self._send_counters(key, deltas), self._send_beat(name, beat, alive),
                                               return_exceptions=True)
        for failure in (counted, beaten):
            if isinstance(failure, BaseException):
                raise failure

    async def _send_counters(self, key: str, deltas: dict[str, int]) -> None:
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for field, amount in deltas.items():
                    pipe.hincrby(key, field, amount)
                pipe.hset(key, mapping={"shards_held": len(self.leases.held)})
                # Its counters before its name: a member without them was forgotten (storage.process_registry; not in
                # order on a Redis Cluster: such a member is taken out and back at its next beat).
                queue_beat_fields(pipe, key, self.heartbeat_ttl_ms)
                await pipe.execute()
        except Exception:
            # Not written: they go with the next beat (a connection lost between Redis's run and its reply counts
            # them twice). A cancelled send (the engine stopping) is not sent again: it may have been applied.
            self.metrics.unsent(deltas)
            raise

    async def _send_beat(self, name: str, beat: dict[str, Any], alive: bool) -> None:
        prefix = self.config.prefix
        async with self.client.pipeline(transaction=False) as pipe:
            if alive:
                pipe.set(engine_heartbeat_key(name, prefix), json.dumps(beat), px=self.heartbeat_ttl_ms)
                pipe.sadd(engines_key(prefix), name)
            else:
                # A clean stop (scaled down, restarted, renamed) leaves the set too: /health reports a registered
                # engine without a heartbeat as missing, which is for one that died. Its counters stay: they count
                # since the name first ran, and a restart under it goes on with them.
                pipe.delete(engine_heartbeat_key(name, prefix))
                pipe.srem(engines_key(prefix), name)
            await pipe.execute()

    def _metrics_deltas(self) -> dict[str, int]:
        """The counters' increments since the last flush, the room service's counts taken in."""
        conflicts, redecided = self.service.conflicts, self.service.redecided
        if conflicts != self._conflicts_seen:
            self.metrics.count("conflicts", conflicts - self._conflicts_seen)
            self._conflicts_seen = conflicts
        if redecided != self._redecided_seen:
            self.metrics.count("rooms_redecided", redecided - self._redecided_seen)
            self._redecided_seen = redecided
        unsaved = self.service.snapshot_failures
        if unsaved != self._unsaved_seen:
            self.metrics.count("snapshot_failures", unsaved - self._unsaved_seen)
            self._unsaved_seen = unsaved
        return self.metrics.pending_deltas()

    # --- consuming ----------------------------------------------------------------------------

    async def _consume_loop(self) -> None:
        try:
            await self._consume()
        finally:
            await self._settle_takeovers()
            self.inbox.release()
            # Stopping (or a bug): whatever was decided is published and acknowledged before the leases go.
            with contextlib.suppress(*INFRASTRUCTURE_ERRORS, ResponseError):
                await self._send_done()

    async def _consume(self) -> None:
        backoff = 0.1
        failed_rounds = 0
        while not self._stopping.is_set():
            held = self.leases.safely_held()
            if not held:
                self.inbox.release()
                # No read to ride on (leases lapsing or lost): what is done goes now, as it always did.
                with contextlib.suppress(*INFRASTRUCTURE_ERRORS, ResponseError):
                    await self._send_done()
                await self._pause(self.config.block_ms / 1000)
                continue
            try:
                taking_over = (self._needs_takeover and not self._needs_takeover.isdisjoint(held)
                               or self._takeover_error is not None)
                held = await self._take_over_due(held) if taking_over else held
                if taking_over and self._stopping.is_set():
                    return
                if not held:  # every held shard waits out a failure of its own or is being taken over
                    await self._pause_for_takeovers(0.05)
                    continue
                if self.inbox and self._ahead is None:
                    await self._decide_handed(held)
                if self._ahead is not None:
                    ahead, self._ahead = self._ahead, None
                    shards = {shard for shard, _, _ in ahead.entries}
                    if shards.issubset(held):
                        await self._process_batch(ahead.entries, ride=held, decided=ahead)
                    else:
                        # A lease lapsed since: its entries stay pending, for its next holder's takeover.
                        self._needs_takeover.update(shards)
                        self.log.info("batch_ahead.dropped", shards=sorted(shards - set(held)))
                else:
                    batch = await self._next_batch(held)
                    if batch:
                        await self._process_batch(batch, ride=held)
                if not self._needs_takeover.intersection(held):
                    if not self._consumed_ms:  # ready for the first time: published at once
                        self._ready_news.set()
                    self._consumed_ms = int(time.time() * 1000)
                backoff = 0.1
                failed_rounds = 0
            except INFRASTRUCTURE_ERRORS as error:
                await self._drop_in_flight()
                self.inbox.release()
                self._redis_error_ms = int(time.time() * 1000)
                # Whatever was read stays pending; take the shards over again once Redis answers.
                self.log.warning("consume.redis_unreachable", error=str(error), retry_in_s=backoff)
                self._needs_takeover.update(held)
                failed_rounds = 0  # Redis away is not this engine's failure: no reason to step aside
                await self._pause(backoff)
                backoff = self.streams.next_backoff(backoff)
            except ResponseError as error:
                await self._drop_in_flight()
                self.inbox.release()
                self._needs_takeover.update(held)
                if stream_vanished(error):
                    # The stream or group vanished (a flush, a restart without persistence): set it up again.
                    self.log.warning("consume.group_missing", error=str(error))
                    continue
                # Redis refused a read or an acknowledgement (MISCONF: it cannot persist; BUSY: a script
                # runs too long; or our bug): the loop must outlive it while this engine holds the leases, or
                # its shards stall for good. What was read stays pending.
                self._redis_error_ms = int(time.time() * 1000)
                if refuses_writes(error):
                    self.log.error("consume.redis_refused", error=f"{type(error).__name__}: {error}",
                                   retry_in_s=backoff)
                    failed_rounds = 0  # refused to every writer alike: stepping aside would help none
                else:
                    self.log.exception("consume.unexpected_redis_error", retry_in_s=backoff)
                    failed_rounds += 1
                    if failed_rounds >= STEP_ASIDE_AFTER:
                        await self._step_aside(error)
                        failed_rounds, backoff = 0, 0.1
                        continue
                await self._pause(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception as error:  # noqa: BLE001 - the loop must outlive a bug; pending entries are re-read
                await self._drop_in_flight()
                self.inbox.release()
                self.log.exception("consume.unexpected_error", retry_in_s=backoff)
                self._needs_takeover.update(held)
                failed_rounds += 1
                if failed_rounds >= STEP_ASIDE_AFTER:
                    await self._step_aside(error)
                    failed_rounds, backoff = 0, 0.1
                    continue
                await self._pause(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _step_aside(self, error: BaseException | None) -> None:
        """STEP_ASIDE_AFTER rounds failed in a row: give the leases back (what was read stays pending for
        whoever takes the shards) and take none for STEP_ASIDE_LEASES lease periods."""
        hold_off_s = STEP_ASIDE_LEASES * self.config.lease_ms / 1000
        self.log.error("consume.stepping_aside", shards=self.leases.held, failed_rounds=STEP_ASIDE_AFTER,
                       error=f"{type(error).__name__}: {error}", hold_off_s=hold_off_s)
        self.metrics.count("stepped_aside")
        await self._settle_takeovers()  # none writes once the leases are given back
        self._takeover_error = None
        self.inbox.release()
        self._needs_takeover.update(self.leases.held)
        await self._drop_in_flight()
        with contextlib.suppress(*INFRASTRUCTURE_ERRORS, ResponseError):
            await self._send_done()
        try:
            await self.leases.step_aside(hold_off_s)
        except (*INFRASTRUCTURE_ERRORS, ResponseError) as release_error:
            # Not given back: they lapse within a lease period all the same, as nothing renews them.
            self.log.warning("consume.release_failed", error=f"{type(release_error).__name__}: {release_error}")

    async def _drop_in_flight(self) -> None:
        """Forget the read in flight and the batch decided ahead. What they delivered stays pending, and a
        ``>`` read never delivers an entry again: only a takeover re-reads it, so their shards need one."""
        self._needs_takeover.update(await self.streams.drop_read())
        if self._ahead is not None:
            self._needs_takeover.update(shard for shard, _, _ in self._ahead.entries)
            self._ahead = None

    def _take_over_stuck(self, shard: int) -> None:
        """A held shard's group holds an entry nobody is deciding (``Housekeeping``'s look): take it over, which
        replays it, unless a takeover is already asked for or under way (it replays it then)."""
        if shard in self._needs_takeover:
            return
        self.log.warning("shard.pending_stuck", shard=shard)
        self.metrics.count("pending_stuck")
        self._needs_takeover.add(shard)

    async def _take_over_due(self, held: list[int]) -> list[int]:
        """Take over the held shards that need it (group, pending claimed, backlog replayed); the shards ready
        to read. A shard whose takeover fails alone (``streams.isolates``: its Cluster node is down, or refuses
        writes) waits out its backoff and is tried again on a later round, the others read meanwhile; any other
        failure fails the round. On a Cluster the takeovers run apart (``_take_over_apart``)."""
        due = [shard for shard in held if shard in self._needs_takeover and self.streams.ready(shard)]
        if self.streams.takes_over_apart:
            return self._take_over_apart(held, due)
        if due and (self.streams.reading is not None or self._ahead is not None):
            # A takeover replays every pending entry, those of the read in flight or decided ahead too: drop
            # them before it, or they would be decided twice. (Not while every shard needing one waits out its
            # backoff: nothing is replayed then, and the others' read goes on.)
            await self._drop_in_flight()
        if not due:
            return [shard for shard in held if shard not in self._needs_takeover]
        self._taking_over = True
        self.inbox.release()  # a takeover may replay a long backlog: these go through the stream
        try:
            for shard in due:
                if shard not in self._needs_takeover or not self.streams.ready(shard):
                    continue
                recorded = self._needs_takeover.recorded[shard]  # the lease loop may record it again meanwhile
                try:
                    await self._take_over(shard)
                except Exception as error:
                    if not self.streams.isolates(error):
                        raise
                    self._takeover_failed(shard, error)
                    continue
                self._needs_takeover.settle(shard, recorded)  # recorded again: the next round takes it over again
                if self._stopping.is_set():
                    break
        finally:
            self._taking_over = False
        return [shard for shard in held if shard not in self._needs_takeover]

    def _take_over_apart(self, held: list[int], due: list[int]) -> list[int]:
        """(A Cluster) Start the takeover of each due shard as a task of its own, and return the held shards ready
        to read now, the others' takeovers under way.

        In the loop, one after another, the takeovers of a dead node's shards held every other shard's answers:
        each attempt waited out the client's reconnects to that node (~130 ms), a round of them about once a
        second until the promotion, and the live shards' answers came in bunches 1.1-2.2 s late (issue 28,
        `almanac bench failover`). Apart, they fail concurrently while the loop serves the live shards; a shard
        taken over joins the next round's read. A shard is never read while its takeover runs (it stays in
        ``_needs_takeover`` until the takeover is done), so its entries are decided by the takeover alone. A need
        recorded again while it runs outlives it, and the next round starts another (``_TakeoverNeeds.settle``)."""
        error, self._takeover_error = self._takeover_error, None
        if error is not None:
            raise error
        for shard in due:
            if shard not in self._takeovers:
                recorded = self._needs_takeover.recorded[shard]
                self._takeovers[shard] = asyncio.create_task(self._take_over_alone(shard, recorded),
                                                             name=f"engine-takeover-{shard}")
        return [shard for shard in held if shard not in self._needs_takeover]

    async def _take_over_alone(self, shard: int, recorded: int) -> None:
        """One shard's takeover apart from the loop (``_take_over_apart``): done, it is read again; failed alone, it
        waits out its backoff; failed otherwise, the loop's next round raises the failure (the shard still needs
        a takeover)."""
        try:
            await self.streams.drop_shard_read(shard)  # its reads' answers are the takeover's to replay
            await self._take_over(shard)
        except Exception as error:  # noqa: BLE001 - handed to the loop below, or the shard's own failure
            if self.streams.isolates(error):
                self._takeover_failed(shard, error)
            elif self._takeover_error is None:
                self._takeover_error = error
        else:
            self._needs_takeover.settle(shard, recorded)
        finally:
            self._takeovers.pop(shard, None)

    def _takeover_failed(self, shard: int, error: BaseException) -> None:
        """A takeover failed alone (``streams.isolates``): the shard waits out its backoff, the others are read."""
        self._redis_error_ms = int(time.time() * 1000)
        self.streams.fail(shard, error)
        self.log.warning("shard.takeover_failed", shard=shard, error=f"{type(error).__name__}: {error}")

    async def _pause_for_takeovers(self, seconds: float) -> None:
        """Pause ``seconds``, or until a takeover under way ends (its shard is then read at once) or the engine stops."""
        if not self._takeovers:
            await self._pause(seconds)
            return
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([stopping, *self._takeovers.values()], timeout=seconds,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def _settle_takeovers(self) -> None:
        """Wait for the takeovers under way (each stops between its batches once the engine stops)."""
        if self._takeovers:
            await asyncio.gather(*self._takeovers.values(), return_exceptions=True)
            self._takeovers.clear()  # each takes itself out as it ends; one cancelled before it began did not

    def _shard_unreachable(self, shard: int, error: BaseException) -> None:
        """A shard that failed alone (``streams.isolates``): take it over again once its reads' backoff is over."""
        self._redis_error_ms = int(time.time() * 1000)
        self._needs_takeover.add(shard)
        self.streams.fail(shard, error)
        self.log.warning("shard.write_failed", shard=shard, error=f"{type(error).__name__}: {error}")

    async def _read_new(self, held: list[int]) -> list[Entry]:
        return self._collected(await self.streams.read(held))

    def _collected(self, entries: list[Entry]) -> list[Entry]:
        """A read's entries, once the shards it reports are marked: those read while not safely held (a late
        lease renewal: delivered entries are pending, and only a takeover reads them again), and those whose
        read failed alone (delivered entries whose answer was lost are pending: re-take them)."""
        streams = self.streams
        self._orphan(streams.orphaned)
        if streams.failed:
            self._redis_error_ms = int(time.time() * 1000)
            self._needs_takeover.update(streams.failed)
            for shard, error in streams.failed.items():
                self.log.warning("shard.read_failed", shard=shard, error=f"{type(error).__name__}: {error}")
        return entries

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _take_over(self, shard: int) -> None:
        """Create the group (from the stream's start), claim every pending entry, re-process them in order."""
        await self._send_done()  # acknowledged first, or the pending read below would hand them back
        if self.streams.acks.get(shard):
            raise RedisConnectionError(f"the acknowledgements of shard {shard} could not be sent")
        # After a Redis failure a write may have taken effect without its reply reaching us: the shard's
        # cached room states are loaded again, so no command (a refusal is recorded without a version
        # check) is decided against a state the log has moved past.
        self.service.loader.forget_where(lambda room: self.keys.shard(room) == shard)
        # A node that surely takes no confirmed write (ALMANAC_DURABILITY=replica and no replica online): fail
        # now, before the backlog is read and its rooms loaded again for nothing on every retry.
        await self.store.require_confirmable(self.streams.names[shard])
        await self.streams.create_group(shard)
        # We hold the lease: anything pending under another consumer name belongs to a dead holder.
        claimed = await self.streams.claim_pending(shard)
        replayed = 0
        while not self._stopping.is_set():
            entries = await self.streams.read_pending(shard)
            if not entries:
                break
            replayed += len(entries)
            failed = await self._process_batch(entries)
            await self._send_done()
            if shard in failed:
                # Its node took no write (down, or with ALMANAC_DURABILITY=replica no replica confirmed it): the
                # entries stay pending. Reading them again at once would spin in this loop, which serves every
                # shard, until the node recovers (for ever if it never does): the takeover fails instead, and
                # the shard alone waits out its backoff (``_take_over_due``).
                raise failed[shard]
        self.log.info("shard.taken_over", shard=shard, claimed=claimed, pending_replayed=replayed)

    async def _decide_batch(self, batch: list[Entry], after: BatchPlan | None = None) -> _Batch:
        """Decode the entries and decide their commands (``RoomService.decide_many``; ``after``: the batch
        whose write is in flight, see ``_write_and_read``)."""
        records: list[CommandRecord | Exception] = []
        for _, _, fields in batch:
            try:
                records.append(decode_record(fields.get(COMMAND_FIELD.encode(), b"")))
            except Exception as error:  # noqa: BLE001 - an undecodable entry is a poison command
                records.append(error)
        positions = [position for position, record in enumerate(records) if isinstance(record, CommandRecord)]
        # Outcomes the append and reject scripts publish themselves, acknowledging the entry in the same
        # step (storage.base.Receipt): by batch position, the Outcome object handed to the script.
        announced: dict[int, Outcome] = {}
        receipts = None
        if self._receipts:
            commands = self.streams.names.__getitem__

            def receipts(index: int, outcome: Outcome) -> Receipt:
                position = positions[index]
                shard, entry_id, fields = batch[position]
                announced[position] = outcome
                return Receipt(stream=commands(shard), group=GROUP, entry_id=entry_id,
                               channel=outcome_channel_of(fields, outcome.command_id, self.config.prefix),
                               message=encode_outcome(outcome))

        decoded = [records[position] for position in positions]
        plan = await self.service.decide_many(decoded, receipts, after)  # type: ignore[arg-type]
        return _Batch(entries=batch, records=records, announced=announced, plan=plan)

    async def _process_batch(self, batch: list[Entry], ride: list[int] | None = None,
                             decided: _Batch | None = None) -> dict[int, BaseException]:
        """Decide and write the batch (RoomService.decide_many and write), then whatever failed or waited,
        alone; ``ride``: the shards whose next read may leave with the batch's writes (``_write_and_read``,
        or reading ahead when the batch is long); ``decided``: the batch as decided ahead. Returns the shards
        that failed alone under the batch (``streams.isolates``: a Cluster node), with the failure (their
        entries stay pending)."""
        if decided is None:
            decided = await self._decide_batch(batch)
        announced, records, plan = decided.announced, decided.records, decided.plan
        last_write = None
        if self._receipts and ride:
            # Not while commands handed in here wait: a batch decided ahead must be the next thing written
            # (RoomService.revalidate trusts that only the batch before moved its rooms).
            ahead_of = plan if len(batch) >= READ_AHEAD_AT and not self.inbox else None

            def last_write(requests: list) -> Awaitable[list]:
                return self._write_and_read(requests, ride, ahead_of)

        batch_results = iter(await self.service.write(plan, last_write))
        results = [record if isinstance(record, Exception) else next(batch_results) for record in records]

        streams = self.streams
        unreachable: dict[int, BaseException] = {}  # shards that failed alone under this batch (a Cluster node)
        for position, ((shard, entry_id, fields), record, result) in enumerate(zip(batch, records, results,
                                                                                    strict=True)):
            if shard in unreachable:
                continue  # stays pending, re-read in order when the shard is taken over
            if streams.isolates(result):
                # Not the command's failure (no attempt counted): its node is down. Only this shard waits
                # for its takeover; the batch's other shards are answered now.
                unreachable[shard] = result
                self._shard_unreachable(shard, result)
                continue
            if redis_failure(result):
                raise result  # every shard's failure: the round fails, its shards are taken over again
            if isinstance(result, Outcome):
                self._account(record, result)  # type: ignore[arg-type]
                if announced.get(position) is result:
                    continue  # published and acknowledged by its own append or refusal
                outcome: Outcome | None = result
            elif self._stopping.is_set():
                continue  # stopping: what was not done stays pending for the next holder of the shard
            else:
                try:
                    outcome = await self._process_entry(shard, entry_id, fields, first_failure=result)
                except Exception as error:
                    if not streams.isolates(error):
                        raise
                    unreachable[shard] = error
                    self._shard_unreachable(shard, error)
                    continue
            streams.ack(shard, entry_id)
            if outcome is not None:
                streams.publish(shard, outcome_channel_of(fields, outcome.command_id, self.config.prefix),
                                encode_outcome(outcome))
        self.metrics.count("batches")
        if await streams.after_batch(read_ahead=self._ahead is not None):
            self._done_unsent()
        return unreachable

    async def _write_and_read(self, groups: list[list], shards: list[int], plan: BatchPlan | None = None
                              ) -> list[list]:
        """The batch's last writes (one script call per shard) and the next read in ONE send on the engine's
        own connection; the writes' replies now, the read's when the next batch is wanted (``_read_new``).

        With ``plan`` (a long batch's), the read goes IN FRONT of the writes, without BLOCK, and the batch it
        brings is decided (``self._ahead``) while Redis applies the writes; then their replies are read. At
        a high rate the engine and Redis took turns: Redis idle while a batch was decided, the engine idle
        while Redis applied it. The next batch is decided from the states this one's decisions make
        (``decide_many(after=plan)``); before it is written, ``RoomService.revalidate`` decides again every
        room this one's write did not move as assumed.
        """
        held = self._readable(shards)
        await self.streams.send_with_read([self.store.ordered_command(group) for group in groups], held,
                                          ahead=plan is not None)
        if held and plan is not None:
            ahead = self._collected(await self.streams.read_in_flight(self._readable(held)))
            if ahead:
                try:
                    self._ahead = await self._decide_batch(ahead, after=plan)
                    self.metrics.count("batches_ahead")
                except BaseException:
                    self._needs_takeover.update(shard for shard, _, _ in ahead)  # read, so only a takeover re-reads
                    raise
        replies = await self.streams.write_replies(len(groups))  # a NOSCRIPT one written again by the store
        return [await self.store.ordered_reply_results(group, reply)
                for group, reply in zip(groups, replies, strict=True)]

    def _readable(self, shards: list[int]) -> list[int]:
        """Those of ``shards`` safely held and not waiting for a takeover (usually all: then ``shards``)."""
        safe = self.leases.safely_held()
        if not self._needs_takeover and (shards is safe or shards == safe):
            return safe
        return [shard for shard in shards if self.leases.holds(shard) and shard not in self._needs_takeover]

    async def _send_done(self) -> None:
        """Publish the outcomes and send the acknowledgements not yet sent (``streams.send_done``): on one Redis
        all or nothing (a failure raises; they go with the next round trip), on a Cluster what a dead node's
        part held stays unsent."""
        if await self.streams.send_done():
            self._done_unsent()

    def _done_unsent(self) -> None:
        self.log.warning("engine.done_unsent", outcomes=len(self.streams.outcomes), shards=sorted(self.streams.acks))

    async def _process_entry(self, shard: int, entry_id: bytes, fields: dict,
                             first_failure: Exception | None = None) -> Outcome | None:
        """Handle one command alone; one that fails the same way max_attempts times is dead-lettered."""
        data = fields.get(COMMAND_FIELD.encode(), b"")
        record: CommandRecord | None = None
        failure = first_failure
        while True:
            if failure is None:
                try:
                    record = decode_record(data)
                    outcome = await self.service.handle(record)
                except Exception as error:  # noqa: BLE001 - any failure of one command must not stop the shard
                    if redis_failure(error):  # retried once Redis answers and takes writes, never an attempt
                        raise
                    failure = error
                else:
                    self._account(record, outcome)
                    return outcome
            reason = f"{type(failure).__name__}: {failure}"
            failure = None
            count = await self.dead_letters.attempt(shard, entry_id, reason)
            self.metrics.count("failures")
            self.log.warning("command.failed", shard=shard, entry=entry_id.decode(), attempt=count, reason=reason,
                             room=record.room if record else None,
                             command_id=record.command_id if record else None)
            if record is not None:
                self.service.forget(record.room)
            if count >= self.config.max_attempts:
                if record is None:
                    with contextlib.suppress(Exception):
                        record = decode_record(data)
                outcome = await self.dead_letters.set_aside(shard, entry_id, data, record, reason, count)
                self.metrics.count("dead_letters")
                return outcome
            await asyncio.sleep(0.02 * count)

    def _account(self, record: CommandRecord, outcome: Outcome) -> None:
        self.metrics.count("commands")
        if outcome.duplicate:
            self.metrics.count("duplicates")
        elif outcome.accepted:
            self.metrics.count("accepted")
        else:
            self.metrics.count("rejected")
        self.metrics.observe_latency(int(time.time() * 1000) - record.server_time_ms)
        if self._log_done:
            self.log.debug("command.done", room=record.room, command_id=record.command_id,
                           version=outcome.last_version, accepted=outcome.accepted, duplicate=outcome.duplicate,
                           code=(outcome.error or {}).get("code"))
        if not outcome.accepted and not outcome.duplicate:
            self.log.info("command.rejected", room=record.room, command_id=record.command_id,
                          player=record.player, code=(outcome.error or {}).get("code"))
