"""The clock of a shard: keeps each room's earliest deadline in Redis and sends its timeout command when due.

Run by whoever holds the shard's engine lease (``services.engine.shard_engine.Engine`` starts one over its held
shards). Two steps per round and shard:

- ``track``: read the shard feed from the clock's cursor; for each room that moved, fold its state and ask
  its rule-set (``RuleSet.deadlines``, pure) for the deadlines it names; keep the earliest in a sorted set
  ``Keys.deadlines(shard)`` (room -> due ms) with its command in ``Keys.deadline_commands(shard)``, and move
  the cursor in the same transaction. A room with no deadline leaves both.
- ``fire``: for every deadline due, one script (one slot: the shard's) removes it and appends its command
  to the shard's command stream, only if the deadline is still the one read. The command is an ordinary
  recorded command whose id is derived from (room, deadline key, seat): a second clock (a lease that
  lapsed) or a retry after a crash sends the same id, which the engine's dedupe answers with the first
  outcome. Removal and append are one step: a clock killed anywhere either sent it or left it pending.

Everything the clock keeps is in Redis under the shard's hash tag, so a Cluster failover keeps it (as it
keeps the shard's log); a lost cursor or a feed trimmed past it makes the clock read every room of the shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from redis.asyncio.cluster import RedisCluster

from almanac.events import codec, registry
from almanac.events.room import RoomState, deadline_command_id, pending_deadlines
from almanac.events.ruleset import Deadline
from almanac.events.step import CommandRecord, replay
from almanac.services.logging import get_logger
from almanac.services.redis_client import read_or_stop
from almanac.storage.base import EventStore
from almanac.storage.keys import Keys
from almanac.storage.loader import RoomLoader
from almanac.storage.raw_connection import stream_reply

_log = get_logger("almanac.clock")

# KEYS: 1 the shard's deadlines (zset), 2 their commands (hash), 3 the shard's command stream, 4 the deadlines
# sent (hash). ARGV: quadruples (room, the command data read with it, the record to append, its command id). Only a
# deadline still the one read is removed and sent: a clock that lost the race, or read before the tracker replaced
# it, sends nothing. The id sent is kept (``Keys.deadlines_fired``) so that tracking does not put it back.
FIRE_SCRIPT = """
local sent = 0
for i = 1, #ARGV, 4 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('XADD', KEYS[3], '*', '__data__', ARGV[i + 2])
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 3])
    sent = sent + 1
  end
end
return sent
"""

# KEYS: 1 the shard's deadlines (zset), 2 their commands (hash), 3 the deadlines sent (hash), 4 the clock's cursor.
# ARGV: 1 the cursor to set ('' none), then quadruples (room, due ms ('' no deadline), command data, command id).
# A room's earliest deadline is kept unless it is the one already sent: its timeout is in the command stream, and
# the room's state names it until the engine has decided it (a second clock's rescan, or a feed entry read
# meanwhile, would otherwise send it again). One script, one slot (the shard's): atomic with FIRE_SCRIPT.
TRACK_SCRIPT = """
for i = 2, #ARGV, 4 do
  local room = ARGV[i]
  if ARGV[i + 1] == '' then
    redis.call('ZREM', KEYS[1], room)
    redis.call('HDEL', KEYS[2], room)
    redis.call('HDEL', KEYS[3], room)
  elseif redis.call('HGET', KEYS[3], room) ~= ARGV[i + 3] then
    redis.call('HSET', KEYS[2], room, ARGV[i + 2])
    redis.call('ZADD', KEYS[1], ARGV[i + 1], room)
    redis.call('HDEL', KEYS[3], room)
  end
end
if ARGV[1] ~= '' then redis.call('SET', KEYS[4], ARGV[1]) end
return 1
"""


class _Pending(msgspec.Struct, array_like=True, frozen=True):
    key: str
    due_ms: int
    player: str
    command: dict
    concerns: tuple[str, ...] | None = None  # last, with a default: a pending deadline written before it decodes


_PENDING = msgspec.msgpack.Decoder(_Pending)


def pending_data(deadline: Deadline) -> bytes:
    """What ``Keys.deadline_commands`` holds for a room's earliest deadline."""
    return codec.encode(_Pending(deadline.key, deadline.due_ms, deadline.player, deadline.command, deadline.concerns))


def pending_deadline(data: bytes) -> Deadline:
    """A room's pending deadline as ``Keys.deadline_commands`` holds it (the notifier's warnings read it)."""
    pending = _PENDING.decode(data)
    return Deadline(key=pending.key, due_ms=pending.due_ms, player=pending.player, command=pending.command,
                    concerns=pending.concerns)


def earliest(state: RoomState | None) -> Deadline | None:
    """The earliest deadline the room's rule-set names in its state (None: none, or the room ended): of
    ``events.room.pending_deadlines``, the one list the step also accepts a signing seat's unsigned timeout from."""
    try:
        found = pending_deadlines(state)
    except Exception:  # noqa: BLE001 - rules not installed on this node: no deadline known here
        return None
    return min(found, key=lambda d: (d.due_ms, d.key)) if found else None


async def state_at_least(loader: RoomLoader, store: EventStore, room: str, version: int) -> RoomState | None:
    """The room's state at ``version`` or later: the loader's cached state, brought up to the log's end with
    its tail when it is older (the loader alone trusts its cache), else loaded (the bots read rooms alike)."""
    cached = loader.cached(room)
    if cached is not None and cached[0].version >= version:
        return cached[0]
    if cached is not None:
        tail = await store.read(room, cached[0].version + 1)
        state = replay(tail, cached[0])
        if state is not None and tail:
            loader.remember(room, state, tail[-1].hash)
        return state
    state, _ = await loader.load(room)
    return state


UNTIMED_LIMIT = 100_000  # rooms (or handed seats) a clock remembers, then forgets all: a bound on its memory


def _untimed(state: RoomState) -> bool:
    """Whether the room's rules name no deadlines at all (its rule-set and version never change)."""
    try:
        return registry.at(state.ruleset, state.ruleset_version).deadlines is None
    except Exception:  # noqa: BLE001 - rules not installed here: looked at again next time
        return False


# The longest a clock waits between ticks with no feed moving and no deadline due: how soon it sees shards taken
# over (their deadlines, due meanwhile, are sent then). Below the client's socket timeout (bootstrap.REDIS_TIMEOUT_S).
IDLE_WAIT_S = 1.0


def wall_ms() -> int:
    return int(time.time() * 1000)


class Clock:
    """The deadlines of the shards its owner holds (``shards()``), tracked and fired every ``interval_s``."""

    def __init__(self, client, keys: Keys, store: EventStore, now_ms: Callable[[], int] = wall_ms,
                 batch: int = 1000, cache_size: int = 10_000,
                 held: Callable[[str], tuple[RoomState, str] | None] | None = None,
                 loader: RoomLoader | None = None,
                 call_many: Callable[[list[tuple]], Awaitable[list[Any]]] | None = None) -> None:
        """``loader``: a room loader of the process's on ``store`` (``bootstrap.Runtime.loader``, never the writer's
        own: its cache holds only states whose write went through); else one of ``cache_size`` rooms is made here.
        ``call_many``: how a tick's look at its shards and its cursor writes are sent on one Redis (the gateway's
        pipelined connection, ``PipelinedConnection.call_many``: one write, raw replies); else a redis-py pipeline."""
        self.client = client
        self.call_many = call_many
        self.keys = keys
        self.store = store
        self.now_ms = now_ms
        self.batch = batch
        self.loader = loader if loader is not None else RoomLoader(store, cache_size)
        # The states the writer in this process holds (its loader's ``cached``: each one cached only once its
        # write went through): a room that moved is most often there at the version the feed names, and
        # reading its tail back from Redis to fold it again was the clock's largest cost (docs/capacity.md).
        self.held = held
        self._fire = client.register_script(FIRE_SCRIPT)
        self._track = client.register_script(TRACK_SCRIPT)
        self.fired = 0
        self.tracked = 0
        self._untimed: set[str] = set()  # rooms whose rule-set names no deadlines
        self._handed: set[tuple[str, str]] = set()  # (room, seat) this process wrote to the bot seats
        # shard -> the feed entry id read up to, while the shard is held (read from Redis when taken again)
        self._cursors: dict[int, str] = {}
        # During a tick: the shards whose feed moved past rooms without deadlines only, to their new cursor (one
        # write for all at the tick's end), and the earliest deadline the tick's tracking wrote.
        self._moved: dict[int, str] | None = None
        self._earliest_tracked = 0
        self.idle_wait_s = IDLE_WAIT_S  # the longest wait between ticks (``_wait``)
        self._said_polling = False  # logged once that a Cluster makes it tick (``_wait``)
        self._feeds_moved = False  # the last tick read entries from a feed (``_wait``)

    # --- tracking ------------------------------------------------------------------------------

    async def _state(self, room: str, version: int) -> RoomState | None:
        if self.held is not None:
            held = self.held(room)
            if held is not None and held[0].version >= version:
                return held[0]
        return await state_at_least(self.loader, self.store, room, version)

    async def _set(self, shard: int, rooms: dict[str, int], cursor: str | None) -> None:
        """Write the earliest deadline of each room (at least at its version) and the cursor, in one script (a
        repeat is harmless: tracking is idempotent; a deadline already sent is not put back)."""
        args: list = [cursor or ""]
        for room, version in rooms.items():
            if room in self._untimed:
                continue  # its rules name no deadlines: nothing to fold (most rooms of most games)
            state = await self._state(room, version)
            if state is not None and _untimed(state):
                if len(self._untimed) >= UNTIMED_LIMIT:
                    self._untimed.clear()
                self._untimed.add(room)
                self.loader.forget(room)
            if state is not None and state.bot_seats:  # the log handed seats to bots: let a bot act on it
                from almanac.services import bots  # noqa: PLC0415 - bots reads rooms through this module

                if len(self._handed) >= UNTIMED_LIMIT:
                    self._handed.clear()  # only a memo: writing a handed seat again changes nothing
                await bots.hand_over(self.client, self.keys, state, self._handed)
            deadline = earliest(state)
            if deadline is None:
                args += [room, "", "", ""]
            else:
                self._earliest_tracked = min(self._earliest_tracked, deadline.due_ms)
                args += [room, deadline.due_ms, pending_data(deadline),
                         deadline_command_id(room, deadline.key, deadline.player)]
        if len(args) == 1 and cursor is not None and self._moved is not None:
            self._moved[shard] = cursor  # only the cursor moved (untimed rooms): written with the tick's others
        elif len(args) > 1 or cursor is not None:
            await self._track(keys=[self.keys.deadlines(shard), self.keys.deadline_commands(shard),
                                    self.keys.deadlines_fired(shard), self.keys.clock_cursor(shard)], args=args)
        self.tracked += len(rooms)

    async def _cursor(self, shard: int) -> str | None:
        """Where the clock reads the shard's feed from: its own cursor, or None (read every room: a first
        start, a cursor lost, or a feed trimmed past it)."""
        cursor = self._cursors.get(shard)
        if cursor is not None:
            return cursor
        raw = await self.client.get(self.keys.clock_cursor(shard))
        cursor = raw.decode() if isinstance(raw, bytes) else raw
        first = await self.client.xrange(self.keys.feed(shard), count=1)
        if first and cursor is not None and _older(cursor, first[0][0]):
            return None  # the feed was trimmed past the cursor: what moved meanwhile is unknown
        return cursor

    async def track(self, shard: int, entries: list | None = None) -> int:
        """Bring the shard's deadlines up to its feed (``entries``: its first read, already made); the
        number of rooms looked at."""
        feed = self.keys.feed(shard)
        cursor = await self._cursor(shard)
        if cursor is None:
            looked = await self._rescan(shard)
            self._cursors.pop(shard, None)
            return looked
        looked = 0
        while True:
            if entries is None:
                reply = await self.client.xread({feed: cursor}, count=self.batch)
                entries = reply[0][1] if reply else []
            if not entries:
                self._cursors[shard] = cursor
                return looked
            rooms: dict[str, int] = {}
            for _, fields in entries:
                room = fields[b"r"].decode()
                rooms[room] = max(rooms.get(room, 0), int(fields[b"l"]))
            cursor = entries[-1][0].decode()
            await self._set(shard, rooms, cursor)
            looked += len(rooms)
            if len(entries) < self.batch:
                self._cursors[shard] = cursor
                return looked
            entries = None

    async def _rescan(self, shard: int) -> int:
        """Every room of the shard, from the feed's current end (a first start, or a cursor lost)."""
        last = await self.client.xrevrange(self.keys.feed(shard), count=1)
        cursor = last[0][0].decode() if last else "0-0"
        looked = 0
        rooms: dict[str, int] = {}
        async for member in self.client.sscan_iter(self.keys.rooms(shard), count=self.batch):
            rooms[member.decode()] = 0
            if len(rooms) >= self.batch:
                await self._set(shard, rooms, None)
                looked += len(rooms)
                rooms = {}
        await self._set(shard, rooms, cursor)
        _log.info("clock.rescanned", shard=shard, rooms=looked + len(rooms))
        return looked + len(rooms)

    # --- firing --------------------------------------------------------------------------------

    async def fire(self, shard: int) -> int:
        """Send every due deadline's command of the shard (once); the number sent."""
        due_key, commands_key = self.keys.deadlines(shard), self.keys.deadline_commands(shard)
        sent = 0
        while True:
            now = self.now_ms()
            due = await self.client.zrangebyscore(due_key, "-inf", now, start=0, num=self.batch)
            if not due:
                return sent
            datas = await self.client.hmget(commands_key, due)
            args: list = []
            for member, data in zip(due, datas, strict=True):
                if data is None:
                    continue
                pending = _PENDING.decode(data)
                room = member.decode()
                record = CommandRecord(
                    command_id=deadline_command_id(room, pending.key, pending.player), room=room,
                    player=pending.player, server_time_ms=max(now, pending.due_ms), body=pending.command)
                args += [room, data, codec.encode(record), record.command_id]
            if not args:
                return sent
            count = int(await self._fire(keys=[due_key, commands_key, self.keys.command_stream(shard),
                                               self.keys.deadlines_fired(shard)], args=args))
            sent += count
            self.fired += count
            if len(due) < self.batch:
                return sent

    # --- the loop ------------------------------------------------------------------------------

    async def tick(self, shards: list[int]) -> int:
        """One round over ``shards``: a single pipelined look at every shard's feed and due deadlines, then
        the work for the shards where something moved or fell due; the number of commands sent."""
        for shard in list(self._cursors):
            if shard not in shards:
                del self._cursors[shard]  # given up: whoever holds it now moves its cursor
        cursors = {shard: await self._cursor(shard) for shard in shards if shard not in self._cursors}
        now = self.now_ms()
        replies = await self._look(shards, cursors, now)
        sent = 0
        self._moved = {}
        self._feeds_moved = any(replies[0::2])
        try:
            for index, shard in enumerate(shards):
                read, due = replies[2 * index], replies[2 * index + 1]
                self._earliest_tracked = now + 1
                if shard in cursors and cursors[shard] is None:
                    await self.track(shard)  # read every room
                elif read:
                    if shard in cursors:
                        self._cursors[shard] = cursors[shard]  # type: ignore[assignment]
                    await self.track(shard, read[0][1])
                elif shard in cursors:
                    self._cursors[shard] = cursors[shard]  # type: ignore[assignment]
                # Only where a deadline is due (seen above, or written by this tracking): a look at the due
                # deadlines of every shard whose feed moved was a round trip per shard and tick for nothing.
                if due or shard in cursors or self._earliest_tracked <= now:
                    sent += await self.fire(shard)
        finally:
            moved, self._moved = self._moved, None
            if moved:
                if self.call_many is not None:
                    await self.call_many([("SET", self.keys.clock_cursor(shard), cursor)
                                          for shard, cursor in moved.items()])
                else:
                    cursors_pipe = self.client.pipeline(transaction=False)
                    for shard, cursor in moved.items():
                        cursors_pipe.set(self.keys.clock_cursor(shard), cursor)
                    await cursors_pipe.execute()
        return sent

    async def _look(self, shards: list[int], cursors: dict[int, str | None], now: int) -> list:
        """Each shard's feed entries past its cursor and its first deadline due at ``now``, in one round trip: per
        shard an XREAD reply (as redis-py parses it) and a list, in turn."""
        if self.call_many is None:
            pipe = self.client.pipeline(transaction=False)
            for shard in shards:
                cursor = self._cursors.get(shard) or cursors.get(shard)
                pipe.xread({self.keys.feed(shard): cursor or "0-0"}, count=self.batch)
                pipe.zrangebyscore(self.keys.deadlines(shard), "-inf", now, start=0, num=1)
            return await pipe.execute()
        commands: list[tuple] = []
        for shard in shards:
            cursor = self._cursors.get(shard) or cursors.get(shard)
            commands.append(("XREAD", "COUNT", self.batch, "STREAMS", self.keys.feed(shard), cursor or "0-0"))
            commands.append(("ZRANGEBYSCORE", self.keys.deadlines(shard), "-inf", now, "LIMIT", 0, 1))
        replies = await self.call_many(commands)
        replies[0::2] = [stream_reply(read) for read in replies[0::2]]
        return replies

    async def run(self, shards: Callable[[], list[int]], stopping: asyncio.Event, interval_s: float = 0.1) -> None:
        """Tick over ``shards()`` (the leases held now) until ``stopping``, at most every ``interval_s``; between
        ticks, wait for a held shard's feed to move or its earliest deadline to fall due (``_wait``); errors are
        logged and retried."""
        while not stopping.is_set():
            started = time.monotonic()
            held = list(shards())
            try:
                await self.tick(held)
                # Feed entries arriving during the tick's first interval_s gather for the next tick, as before.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stopping.wait(), max(0.0, started + interval_s - time.monotonic()))
                if not stopping.is_set():
                    await self._wait(held, stopping)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - Redis away or failing over: the deadlines wait in it
                _log.warning("clock.round_failed", error=f"{type(error).__name__}: {error}")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stopping.wait(), interval_s)

    async def _wait(self, shards: list[int], stopping: asyncio.Event) -> None:
        """Until a feed of ``shards`` moves past the clock's cursor (a room moved: its deadline may change) or the
        earliest pending deadline falls due, at most ``idle_wait_s`` (shards taken or lost meanwhile), or ``stopping``. One blocking
        XREAD over the feeds, not ten looks a second: an idle clock cost more than anything else in an idle gateway.
        A Cluster spreads the feeds over slots (one XREAD may not span them): there, and while a shard's cursor is
        unknown (it is read again by the next tick), the clock ticks every ``interval_s`` as it did."""
        if self._feeds_moved:
            # The last tick read entries: while commands come, a feed has moved again by now, and the wait's look
            # at the deadlines and its read would return at once, two round trips a tick for nothing (a fifth of
            # the clock's CPU at 500 commands/s, docs/capacity.md, issue 29's sixth pass). The next tick looks.
            return
        cursors = {self.keys.feed(shard): self._cursors.get(shard) for shard in shards}
        if isinstance(self.client, RedisCluster):
            if not self._said_polling:  # once: an operator comparing idle CPU should know why this one ticks
                _log.info("clock.polling", reason="Redis Cluster: one blocking read cannot span the shards' slots")
                self._said_polling = True
            return
        if not shards or None in cursors.values():
            return
        pipe = self.client.pipeline(transaction=False)
        for shard in shards:
            pipe.zrange(self.keys.deadlines(shard), 0, 0, withscores=True)
        firsts = [int(first[0][1]) for first in await pipe.execute() if first]
        wait_ms = int(self.idle_wait_s * 1000)
        if firsts:
            wait_ms = min(wait_ms, min(firsts) - self.now_ms())
        if wait_ms <= 0:
            return
        # XREAD's BLOCK 0 is "forever": a deadline due within the millisecond is sent by the next tick at once.
        await read_or_stop(self.client, cursors, wait_ms, stopping)  # a failed read: the round's error (logged, retried)


def _older(cursor: str, first: bytes | str) -> bool:
    """Whether feed entry id ``cursor`` is before ``first`` with entries between lost (ids ``ms-seq``)."""
    first_id = first.decode() if isinstance(first, bytes) else first
    a, b = (tuple(int(part) for part in x.split("-")) for x in (cursor, first_id))
    return a < b and cursor != "0-0"
