"""The one room loader: a room's state at a version from the newest snapshot at or below it plus the tail.

Every reader goes through it (the engine, the gateway, the projector, the CLI; compare eventsourcing's
``Repository.get``). It keeps an LRU cache of (state, chain hash) per room. What the cache may be
trusted for differs by caller: the engine is the single writer of its rooms and trusts it (and
forgets a room on a conflict); readers call ``latest`` which catches the cached state up from the
stream tail; the projector asks for an exact version and gets the cached state only when it is at it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import CorruptEventError, UnusableSnapshotError
from almanac.events.room import RoomState
from almanac.events.step import replay
from almanac.storage.base import EventStore


class RoomLoader:
    """Snapshot + tail loading with a cache of up to ``cache_size`` rooms (0: no cache)."""

    def __init__(self, store: EventStore, cache_size: int = 10_000) -> None:
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[RoomState, str]] = OrderedDict()

    async def load(self, room: str, at_version: int | None = None) -> tuple[RoomState | None, str]:
        """The state at ``at_version`` (latest when None; the cached state is trusted) and its chain hash."""
        cached = self._cache.get(room)
        if cached is not None and (at_version is None or cached[0].version == at_version):
            self._cache.move_to_end(room)
            return cached
        if at_version is not None and at_version <= 0:
            return None, GENESIS_HASH
        state: RoomState | None = None
        last_hash = GENESIS_HASH
        snapshot, tail = await self.store.snapshot_and_tail(room, at_version)  # one round trip on Redis
        if snapshot is not None:
            try:
                state, last_hash = codec.decode_snapshot(snapshot[1])
            except UnusableSnapshotError:
                # A snapshot from an older state format: the log is the truth, fold it from the start.
                state, last_hash = None, GENESIS_HASH
                tail = await self.store.read(room, 1, at_version)
            else:
                if state.version != snapshot[0]:  # a snapshot filed under another version: trust its state
                    tail = await self.store.read(room, state.version + 1, at_version)
        if state is None and tail:
            state = await self.base_of(tail[0])  # a fork folds onto its parent's state
        state = replay(tail, state)
        if tail:
            last_hash = tail[-1].hash
        if at_version is None and state is not None:
            self.remember(room, state, last_hash)
        return state, last_hash

    async def base_of(self, first: Envelope) -> RoomState | None:
        """What a room's version-1 envelope folds onto: None, or for a fork (``room.forked``) its parent's
        state at the fork's version, loaded through this loader (a fork of a fork works the same)."""
        if first.version != 1 or first.type != "room.forked":
            return None
        forked = codec.decode_event(first)
        if forked.parent == first.room:
            raise CorruptEventError(first.room, 1, "the room names itself as its fork parent")
        parent, parent_hash = await self.load(forked.parent, forked.at)
        if parent is None or parent.version != forked.at:
            raise CorruptEventError(first.room, 1, f"the fork's parent {forked.parent!r} has no version {forked.at}")
        if parent_hash != forked.parent_hash:
            raise CorruptEventError(first.room, 1, f"the parent {forked.parent!r} at version {forked.at} no "
                                    "longer has the hash the fork recorded")
        return parent

    async def load_exactly(self, room: str, version: int) -> RoomState | None:
        """The state at ``version`` (None at 0); CorruptEventError when the stream ends before it."""
        state, _ = await self.load(room, version)
        if version > 0 and (state is None or state.version != version):
            raise CorruptEventError(room, version, "the room's stream ends before this version")
        return state

    async def latest(self, room: str) -> tuple[RoomState | None, str]:
        """The latest state for a reader that is not the writer: the cached state caught up from the tail."""
        cached = self._cache.get(room)
        if cached is None:
            return await self.load(room)
        state, last_hash = cached
        tail = await self.store.read(room, state.version + 1)
        if tail:
            state, last_hash = replay(tail, state), tail[-1].hash  # type: ignore[assignment]
            current = self._cache.get(room)
            if current is None or current[0].version < state.version:  # two readers raced: never go back
                self.remember(room, state, last_hash)  # type: ignore[arg-type]
        return state, last_hash

    def cached(self, room: str) -> tuple[RoomState, str] | None:
        return self._cache.get(room)

    def remember(self, room: str, state: RoomState, last_hash: str) -> None:
        if self.cache_size <= 0:
            return
        self._cache[room] = (state, last_hash)
        self._cache.move_to_end(room)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def forget(self, room: str) -> None:
        self._cache.pop(room, None)

    def forget_where(self, predicate: Callable[[str], bool]) -> None:
        for room in [r for r in self._cache if predicate(r)]:
            del self._cache[room]

    def __len__(self) -> int:
        return len(self._cache)
