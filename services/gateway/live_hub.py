"""The live feeds' one shared read per gateway: it follows the shard feeds and fans new events out to the feeds.

Each feed used to block on its own XREAD of its room's stream, which holds a pooled Redis connection for as long
as the feed lives: a thousand feeds from one token were a thousand Redis clients (and file descriptors in both
processes), kept by the pool after the feeds closed. Here a gateway reads the shard feeds (one entry per append:
room, first and last version) with one blocking XREAD (on a Redis Cluster one per shard: one XREAD may not span
slots), reads the new events of the rooms someone follows once, and hands them to each follower's bounded list.
A follower catches up on history with short reads of its own, and falls back to them whenever it fell behind
(its list overflowed: a slow consumer) or sees a gap: the store is the buffer, never this process's memory.

Admission: at most ``live_max_feeds_per_seat`` feeds per seat (role, room, player: every token of one seat
counts together), ``live_max_feeds_per_address`` per client address (one client creating rooms for seat after
seat would otherwise fill the gateway) and ``live_max_feeds`` per gateway process; past them the feed is refused
before it costs a Redis command. Auditors (operators, whose tokens all share one seat) have no seat cap: their
address's and the gateway's bound them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import TypeVar

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError
from almanac.projections.model_writes import text
from almanac.services.gateway.auth import ROLE_AUDITOR, Claims
from almanac.services.gateway.errors import OVERLOAD_RETRY_AFTER_S, ApiError
from almanac.services.logging import get_logger
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

log = get_logger("almanac.gateway.live")
BLOCK_MS = 1_000
FEED_BATCH = 500  # shard feed entries per read
PENDING = 256  # events a follower may have waiting; past it, it reads from the store instead
K = TypeVar("K")


class Follower:
    """One live feed: its room, its seat, its client's address, and the events handed to it that it has not sent yet."""

    __slots__ = ("room", "seat", "address", "pending", "behind", "failed", "wake", "group")

    def __init__(self, room: str, seat: tuple[str, str, str], address: str, group: _Group) -> None:
        self.room = room
        self.seat = seat
        self.address = address
        self.pending: list[Envelope] = []
        # True: what was handed to it is incomplete (it starts so, and overflowing sets it): read the store.
        self.behind = True
        self.failed: BaseException | None = None  # the shared read failed: the feed ends (the client reconnects)
        self.wake = asyncio.Event()
        self.group = group

    def deliver(self, envelopes: list[Envelope]) -> None:
        if not self.behind:
            if len(self.pending) + len(envelopes) > PENDING:
                self.behind = True  # never buffered without bound: the follower reads these from the store
                self.pending.clear()
            else:
                self.pending.extend(envelopes)
        self.wake.set()

    def fail(self, error: BaseException) -> None:
        self.failed = error
        self.wake.set()

    async def started(self) -> None:
        """Once the shared read has its cursors: anything appended from here on is handed to this follower."""
        await self.group.started.wait()
        if self.failed is not None:
            raise self.failed


class _Group:
    """The shards one XREAD follows (all of them, or one on a Cluster), and their followed rooms."""

    def __init__(self, shards: list[int]) -> None:
        self.shards = shards
        self.rooms: dict[str, set[Follower]] = {}
        self.task: asyncio.Task | None = None
        self.started = asyncio.Event()


class LiveHub:
    def __init__(self, client: object, store: RedisEventStore, keys: Keys, max_feeds: int, max_per_seat: int,
                 max_per_address: int) -> None:
        self.client = client
        self.store = store
        self.keys = keys
        self.max_feeds = max_feeds
        self.max_per_seat = max_per_seat
        self.max_per_address = max_per_address
        self.open_feeds = 0
        self._seats: dict[tuple[str, str, str], int] = {}
        self._addresses: dict[str, int] = {}
        shards = list(range(keys.shard_count))
        groups = [[shard] for shard in shards] if isinstance(client, RedisCluster) else [shards]
        self._groups = [_Group(group) for group in groups]
        self._group_of_shard = {shard: group for group in self._groups for shard in group.shards}
        self._shard_of_feed = {keys.feed(shard): shard for shard in shards}

    def open(self, room: str, claims: Claims, address: str) -> Follower:
        """A follower of ``room`` for this seat from the client at ``address``, or the refusal: 503 past the
        gateway's feeds, 429 past the seat's (but an auditor's) or the address's."""
        seat = (claims.role, claims.room, claims.player)
        if self.open_feeds >= self.max_feeds:
            raise ApiError(503, "too_many_feeds",
                           f"this gateway serves {self.open_feeds} live feeds, its limit; retry after "
                           f"{OVERLOAD_RETRY_AFTER_S} s or on another gateway", retry_after_s=OVERLOAD_RETRY_AFTER_S)
        held = self._seats.get(seat, 0)
        if held >= self.max_per_seat and claims.role != ROLE_AUDITOR:
            raise ApiError(429, "too_many_feeds_for_seat",
                           f"{claims.player!r} already has {held} live feeds open on this gateway, the limit per "
                           "seat (all its tokens together); close one first")
        from_address = self._addresses.get(address, 0)
        if from_address >= self.max_per_address:
            raise ApiError(429, "too_many_feeds_for_address",
                           f"your address already has {from_address} live feeds open on this gateway, the limit per "
                           "client address (all its seats together); close one first")
        group = self._group_of_shard[self.keys.shard(room)]
        follower = Follower(room, seat, address, group)
        group.rooms.setdefault(room, set()).add(follower)
        self._seats[seat] = held + 1
        self._addresses[address] = from_address + 1
        self.open_feeds += 1
        if group.task is None:
            group.started = asyncio.Event()
            group.task = asyncio.get_running_loop().create_task(self._follow(group), name="gateway-live-hub")
        return follower

    def close(self, follower: Follower) -> None:
        group = follower.group
        followers = group.rooms.get(follower.room)
        if followers is None or follower not in followers:
            return
        followers.discard(follower)
        if not followers:
            del group.rooms[follower.room]
        self.open_feeds -= 1
        _release(self._seats, follower.seat)
        _release(self._addresses, follower.address)
        # The group's read ends by itself once it has no room left (within one BLOCK_MS).

    async def stop(self) -> None:
        tasks = [group.task for group in self._groups if group.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def _follow(self, group: _Group) -> None:
        """Follow the group's shard feeds while any of its rooms is followed; a failure ends every follower's feed."""
        try:
            cursors = await self._heads(group.shards)
            group.started.set()
            while group.rooms:
                replies = await self.client.xread({self.keys.feed(s): cursors[s] for s in group.shards},
                                                  count=FEED_BATCH, block=BLOCK_MS)
                ranges: list[tuple[str, int, int]] = []
                for stream, entries in replies or ():
                    if not entries:
                        continue
                    cursors[self._shard_of_feed[text(stream)]] = text(entries[-1][0])
                    ranges += [(room, int(fields[b"v"]), int(fields[b"l"]))
                               for room, fields in ((text(fields[b"r"]), fields) for _, fields in entries)
                               if room in group.rooms]
                if ranges:
                    try:
                        read = await self.store.read_ranges(ranges)
                    except (CorruptEventError, ResponseError):
                        # One room's stream cannot be read as the feed says (damaged, or not a stream): its
                        # followers read the store themselves and fail alone; the others are not held up.
                        for follower in _every(group.rooms.get(room, set()) for room, _, _ in ranges):
                            follower.behind = True
                            follower.wake.set()
                        continue
                    for (room, _, _), envelopes in zip(ranges, read, strict=True):
                        for follower in tuple(group.rooms.get(room, ())):
                            follower.deliver(envelopes)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - each feed ends on it (1013 or 1011); the next one starts again
            log.warning("live.shared_read_failed", error=f"{type(error).__name__}: {str(error)[:200]}")
            for follower in _every(group.rooms.values()):
                follower.fail(error)
        finally:
            group.task = None
            group.started.set()  # a follower waiting for the start sees its failure

    async def _heads(self, shards: list[int]) -> dict[int, str]:
        """Each shard feed's last entry id now ("0-0" for an empty one): the shared read starts after them."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.xrevrange(self.keys.feed(shard), "+", "-", count=1)
            heads = await pipe.execute()
        return {shard: text(head[0][0]) if head else "0-0" for shard, head in zip(shards, heads, strict=True)}


def _every(groups: Iterable[set[Follower]]) -> list[Follower]:
    return [follower for followers in groups for follower in followers]



def _release(held: dict[K, int], key: K) -> None:
    """One feed fewer for ``key``; a key holding none is forgotten (the counts never grow with past clients)."""
    left = held[key] - 1
    if left:
        held[key] = left
    else:
        del held[key]
