"""The event-store contract every store keeps (Redis Streams, memory, export file)."""

from __future__ import annotations

from typing import Protocol

import msgspec

from almanac.events.envelope import Envelope


class VersionConflict(Exception):
    """The room moved on: the append expected ``expected`` but the room is at ``current``."""

    def __init__(self, room: str, expected: int, current: int) -> None:
        super().__init__(f"room {room!r}: expected version {expected}, the room is at version {current}")
        self.room = room
        self.expected = expected
        self.current = current


class StoredOutcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The first outcome of a command id: the versions it appended, or the rule error it got.

    omit_defaults: kept per command for the dedupe window, so a field at its default is not written (an accepted
    command's has no ``error`` or ``record``; 45 bytes where 52 were before ``record`` was added); stored outcomes
    written before decode as before (a missing field is its default)."""

    room: str
    first_version: int = 0
    last_version: int = 0
    error: dict | None = None
    # A refusal recorded from this release on: its stored refusal record (events.step.refusal_record, the version
    # it was refused at inside), so that a resend is answered the same signed refusal receipt (docs/bundle-format.md
    # section 8). None for an accepted command and for a refusal stored before.
    record: bytes | None = None

    @property
    def accepted(self) -> bool:
        return self.error is None


class AppendResult(msgspec.Struct, frozen=True, kw_only=True):
    outcome: StoredOutcome
    # True when the command id had already been recorded and nothing new was appended.
    duplicate: bool = False


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """What a write of a batch also does when (and only when) it takes effect, in the same atomic step:
    acknowledge the command's stream entry (XACK ``stream group entry_id``) and publish its outcome
    (PUBLISH ``channel message``). The engine's answer then leaves at the moment of the append, and the
    separate publish and acknowledgement of every command are gone. ``stream`` must be in the room's
    shard (the same hash tag). A write that finds a duplicate or a conflict does neither. Stores without
    streams (memory, files) ignore it: a caller uses receipts only with ``RedisEventStore``."""

    stream: str
    group: str
    entry_id: bytes
    channel: str
    message: bytes


class Counted(msgspec.Struct, frozen=True):
    """A client's fixed-window command limit: ``amount`` per ``window_ms``, counted under ``key`` (in the room's
    shard: ``Keys.seat_rate``). The stream's submit counts it (``services.bus``, where it is ``RateLimit``), or
    a write counts it first, in the same atomic step: past it the write does nothing and its result is
    ``CommandLimited``. Stores without Redis (memory, files) ignore it."""

    key: str
    amount: int
    window_ms: int


class CommandLimited(Exception):
    """The write counted its command past its client's limit (``Counted``) and wrote nothing."""

    def __init__(self, retry_ms: int, key: str) -> None:
        super().__init__(f"rate limited for another {retry_ms} ms")
        self.retry_ms = retry_ms
        self.key = key


class AppendRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One append of a batch (see ``EventStore.write_many``)."""

    room: str
    expected_version: int
    command_id: str
    envelopes: list[Envelope]
    command_record: bytes = b""
    receipt: Receipt | None = None
    counted: Counted | None = None


class RejectRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded refusal of a batch (see ``EventStore.write_many``)."""

    room: str
    command_id: str
    error: dict
    record: bytes
    receipt: Receipt | None = None
    counted: Counted | None = None
    # False: not the room's own refusal (``events.step.kept_in_room``): only its outcome is kept, for the dedupe
    # window, and nothing joins the room's refusal log.
    kept: bool = True


class NotAttempted(Exception):
    """A write of ``write_ordered`` that was not tried: an earlier write of the same room in that call did
    not take effect (a conflict, a duplicate), so this one was decided against a state the room never had."""

    def __init__(self, room: str) -> None:
        super().__init__(f"room {room!r}: an earlier write of this room in the batch did not take effect")
        self.room = room


class RoomArchived(Exception):
    """A nonce not kept: the room is in the archive (``save_nonce`` of the archiving store), finished, or idle and
    the caller asked for a live room only. Nothing was written."""

    def __init__(self, room: str, idle: bool) -> None:
        super().__init__(f"room {room!r} is archived ({'idle' if idle else 'finished'}); the nonce was not kept")
        self.room = room
        self.idle = idle


class EventStore(Protocol):
    """Append-only per-room event logs with optimistic concurrency and command-id dedupe."""

    shard_count: int

    async def append(
        self,
        room: str,
        expected_version: int,
        command_id: str,
        envelopes: list[Envelope],
        command_record: bytes = b"",
    ) -> AppendResult:
        """Append envelopes (versions expected+1 ...) atomically, unless the command id is known.

        Raises VersionConflict when the room is not at ``expected_version``; a known command id
        returns its first outcome with ``duplicate=True`` and appends nothing.
        """

    async def record_rejection(self, room: str, command_id: str, error: dict, record: bytes,
                               kept: bool = True) -> AppendResult:
        """Remember a refused command (audit trail and dedupe); changes no state. ``kept`` False: its outcome only,
        for the dedupe window (``RejectRequest.kept``)."""

    async def outcome(self, room: str, command_id: str) -> StoredOutcome | None: ...

    async def read(self, room: str, start: int = 1, end: int | None = None) -> list[Envelope]:
        """Envelopes with ``start <= version <= end`` (end None = to the latest), in order."""

    async def latest_version(self, room: str) -> int: ...

    async def save_snapshot(self, room: str, version: int, data: bytes) -> None: ...

    async def save_snapshots(self, snapshots: list[tuple[str, int, bytes]]) -> None:
        """``save_snapshot`` of each (room, version, data), in as few round trips as the store can."""

    async def latest_snapshot(self, room: str, at_most: int | None = None) -> tuple[int, bytes] | None:
        """The newest snapshot at or below ``at_most`` (any when None)."""

    async def snapshot_and_tail(self, room: str, at_most: int | None = None
                                ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        """``latest_snapshot(room, at_most)`` and the envelopes after it up to ``at_most``, in as few round
        trips as the store can (the Redis store: one)."""

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        """(first version, command record) for every accepted command, in order."""

    async def rejections(self, room: str) -> list[bytes]: ...

    async def rooms(self) -> list[str]:
        """Every room id that has events, sorted."""

    async def save_seed(self, room: str, seed: bytes) -> bool:
        """Store a room's secret seed once; False if it already had one."""

    async def load_seed(self, room: str) -> bytes | None: ...

    # Optional (read through getattr): a copy's origin, JSON {room, version, hash} (``import --as``).
    # async def save_origin(self, room: str, origin: bytes) -> bool
    # async def load_origin(self, room: str) -> bytes | None
    # Optional: the room's commitment scheme (docs/bundle-format.md), recorded when it is created; none: v1.
    # async def save_commit_scheme(self, room: str, scheme: str) -> bool
    # async def load_commit_scheme(self, room: str) -> str | None
    # Optional: keep an imported room or a copy out of every leaderboard (``projections.read_model_queries``).
    # async def mark_unranked(self, room: str) -> None

    async def save_nonce(self, room: str, nonce: bytes, beside_idle: bool = True) -> str:
        """Keep a player's secret nonce beside the room's seed, under its commitment (sha256 hex),
        which it returns. Content-addressed: writing one never changes another player's entry. A store with an
        archive tier raises RoomArchived, writing nothing, for a room in the archive: always when it is finished,
        and when it is idle unless ``beside_idle`` (the nonce is then kept in Redis beside the archived room, for the
        join that brings it back)."""

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        """Every nonce held for the room, by commitment (secret until the room's end reveals them)."""

    async def outcomes_many(self, pairs: list[tuple[str, str]]) -> list[StoredOutcome | None]:
        """``outcome(room, command_id)`` for many pairs at once (one round trip on Redis)."""

    async def write_many(
        self, appends: list[AppendRequest], rejections: list[RejectRequest]
    ) -> tuple[list[AppendResult | Exception], list[AppendResult | Exception]]:
        """Many appends and refusals in one round trip; each result is what the single call returns,
        or the exception it raises (VersionConflict), in place. Not atomic across requests."""

    async def write_ordered(self, requests: list[AppendRequest | RejectRequest]) -> list[AppendResult | Exception]:
        """Appends and refusals of ONE shard, in this order, in one round trip (on Redis one atomic script):
        each result is what the single call returns or raises (VersionConflict), in place, and once a
        write of a room does not take effect (a conflict, a duplicate) the room's later writes are not
        tried (NotAttempted): they were decided against the state the earlier one would have made. Each
        request's ``receipt`` is carried out with it where the store can (Redis)."""

    async def write_ordered_shards(self, groups: list[list[AppendRequest | RejectRequest]]
                                   ) -> list[list[AppendResult | Exception]]:
        """``write_ordered`` of several shards (each group one shard's) in one round trip, results per group."""


class WritesInARow:
    """The batched writes of a store where a call costs no round trip (memory, files), as its single calls in a
    row: ``write_ordered`` keeps its rule (once a room's write does not take effect, its later ones are not
    tried). Receipts are ignored (nothing here has streams to acknowledge or channels to publish on)."""

    async def write_ordered(self, requests: list[AppendRequest | RejectRequest]) -> list[AppendResult | Exception]:
        results: list[AppendResult | Exception] = []
        failed: set[str] = set()
        for request in requests:
            if request.room in failed:
                results.append(NotAttempted(request.room))
            elif isinstance(request, RejectRequest):
                results.append(await self.record_rejection(request.room, request.command_id, request.error,
                                                           request.record, request.kept))
            else:
                try:
                    result = await self.append(request.room, request.expected_version, request.command_id,
                                               request.envelopes, request.command_record)
                except VersionConflict as conflict:
                    result = conflict
                if not isinstance(result, AppendResult) or result.duplicate:
                    failed.add(request.room)
                results.append(result)
        return results

    async def write_ordered_shards(self, groups: list[list[AppendRequest | RejectRequest]]
                                   ) -> list[list[AppendResult | Exception]]:
        return [await self.write_ordered(group) for group in groups]

    async def write_many(
        self, appends: list[AppendRequest], rejections: list[RejectRequest]
    ) -> tuple[list[AppendResult | Exception], list[AppendResult | Exception]]:
        append_results: list[AppendResult | Exception] = []
        for r in appends:
            try:
                append_results.append(
                    await self.append(r.room, r.expected_version, r.command_id, r.envelopes, r.command_record))
            except VersionConflict as conflict:
                append_results.append(conflict)
        reject_results: list[AppendResult | Exception] = [
            await self.record_rejection(r.room, r.command_id, r.error, r.record, r.kept) for r in rejections
        ]
        return append_results, reject_results

    async def save_snapshots(self, snapshots: list[tuple[str, int, bytes]]) -> None:
        for room, version, data in snapshots:
            await self.save_snapshot(room, version, data)


async def snapshot_then_tail(store: EventStore, room: str, at_most: int | None = None
                             ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
    """``snapshot_and_tail`` in two steps, for stores where a call costs no round trip (memory, files)."""
    snapshot = await store.latest_snapshot(room, at_most)
    return snapshot, await store.read(room, 1 if snapshot is None else snapshot[0] + 1, at_most)
