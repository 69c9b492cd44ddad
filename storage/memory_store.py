"""An in-memory event store with the Redis store's contract, for pure service tests and `almanac sim`."""

from __future__ import annotations

import asyncio

from almanac.events import codec
from almanac.events.dice import nonce_commitment
from almanac.events.envelope import Envelope
from almanac.storage.base import (
    AppendResult,
    StoredOutcome,
    VersionConflict,
    WritesInARow,
    snapshot_then_tail,
)


class MemoryEventStore(WritesInARow):
    """Keeps stored bytes (not objects) so that it decodes exactly like the Redis store."""

    def __init__(self, shard_count: int = 16) -> None:
        self.shard_count = shard_count
        self._events: dict[str, list[bytes]] = {}
        self._outcomes: dict[tuple[str, str], StoredOutcome] = {}
        self._commands: dict[str, list[tuple[int, bytes]]] = {}
        self._rejections: dict[str, list[bytes]] = {}
        self._snapshots: dict[str, dict[int, bytes]] = {}
        self._seeds: dict[str, bytes] = {}
        self._schemes: dict[str, str] = {}
        self._origins: dict[str, bytes] = {}
        self._nonces: dict[str, dict[str, bytes]] = {}
        self.unranked: set[str] = set()  # imported rooms and copies: never ranked
        # One entry per append, as on Redis: (room, first version, last version).
        self.feed: list[tuple[str, int, int]] = []
        self._lock = asyncio.Lock()

    async def append(
        self,
        room: str,
        expected_version: int,
        command_id: str,
        envelopes: list[Envelope],
        command_record: bytes = b"",
    ) -> AppendResult:
        async with self._lock:
            known = self._outcomes.get((room, command_id))
            if known is not None:
                return AppendResult(outcome=known, duplicate=True)
            log = self._events.setdefault(room, [])
            if len(log) != expected_version:
                raise VersionConflict(room, expected_version, len(log))
            encoded = [codec.encode_envelope(envelope) for envelope in envelopes]
            log.extend(encoded)
            self.feed.append((room, expected_version + 1, expected_version + len(encoded)))
            outcome = StoredOutcome(
                room=room, first_version=expected_version + 1, last_version=expected_version + len(envelopes)
            )
            self._outcomes[(room, command_id)] = outcome
            if command_record:
                self._commands.setdefault(room, []).append((expected_version + 1, command_record))
            return AppendResult(outcome=outcome)

    async def record_rejection(self, room: str, command_id: str, error: dict, record: bytes,
                               kept: bool = True) -> AppendResult:
        async with self._lock:
            known = self._outcomes.get((room, command_id))
            if known is not None:
                return AppendResult(outcome=known, duplicate=True)
            outcome = StoredOutcome(room=room, error=error, record=record)
            self._outcomes[(room, command_id)] = outcome  # (no dedupe window here: kept as the others)
            if kept:
                self._rejections.setdefault(room, []).append(record)
            return AppendResult(outcome=outcome)

    async def outcome(self, room: str, command_id: str) -> StoredOutcome | None:
        return self._outcomes.get((room, command_id))

    async def outcomes_many(self, pairs: list[tuple[str, str]]) -> list[StoredOutcome | None]:
        return [self._outcomes.get(pair) for pair in pairs]

    async def read(self, room: str, start: int = 1, end: int | None = None) -> list[Envelope]:
        log = self._events.get(room, [])
        last = len(log) if end is None else min(end, len(log))
        return [codec.decode_envelope(log[v - 1], room, v) for v in range(max(start, 1), last + 1)]

    async def read_raw(self, room: str, start: int = 1, end: int | None = None) -> list[tuple[int, bytes]]:
        log = self._events.get(room, [])
        last = len(log) if end is None else min(end, len(log))
        return [(v, log[v - 1]) for v in range(max(start, 1), last + 1)]

    async def latest_version(self, room: str) -> int:
        return len(self._events.get(room, []))

    async def save_snapshot(self, room: str, version: int, data: bytes) -> None:
        self._snapshots.setdefault(room, {})[version] = data

    async def latest_snapshot(self, room: str, at_most: int | None = None) -> tuple[int, bytes] | None:
        versions = [v for v in self._snapshots.get(room, {}) if at_most is None or v <= at_most]
        if not versions:
            return None
        best = max(versions)
        return best, self._snapshots[room][best]

    async def snapshot_and_tail(self, room: str, at_most: int | None = None
                                ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        return await snapshot_then_tail(self, room, at_most)

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        return list(self._commands.get(room, []))

    async def rejections(self, room: str) -> list[bytes]:
        return list(self._rejections.get(room, []))

    async def rooms(self) -> list[str]:
        return sorted(room for room, log in self._events.items() if log)

    async def save_seed(self, room: str, seed: bytes) -> bool:
        if room in self._seeds:
            return False
        self._seeds[room] = seed
        return True

    async def load_seed(self, room: str) -> bytes | None:
        return self._seeds.get(room)

    async def save_commit_scheme(self, room: str, scheme: str) -> bool:
        return self._schemes.setdefault(room, scheme) == scheme

    async def load_commit_scheme(self, room: str) -> str | None:
        return self._schemes.get(room)

    async def save_origin(self, room: str, origin: bytes) -> bool:
        return self._origins.setdefault(room, origin) == origin

    async def load_origin(self, room: str) -> bytes | None:
        return self._origins.get(room)

    async def mark_unranked(self, room: str) -> None:
        self.unranked.add(room)

    async def save_nonce(self, room: str, nonce: bytes, beside_idle: bool = True) -> str:
        commitment = nonce_commitment(nonce)
        self._nonces.setdefault(room, {})[commitment] = nonce
        return commitment

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        return dict(self._nonces.get(room, {}))

    def tamper(self, room: str, version: int, data: bytes) -> None:
        """Overwrite one stored entry (tests of the chain check only)."""
        self._events[room][version - 1] = data
