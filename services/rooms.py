"""Rooms on an event store: load (cache, snapshot + tail), decide a command, append with the chain, dedupe."""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict, deque
from typing import Any

import msgspec

from almanac.events import codec, room as room_rules
from almanac.events.decider import Context
from almanac.events.dice import Dice, seed_commitment
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.errors import RuleError, RulesNotInstalledError, UnusableSnapshotError
from almanac.events.hashing import seal
from almanac.events.room import RoomState
from almanac.services.store.base import (
    AppendRequest,
    AppendResult,
    EventStore,
    RejectRequest,
    StoredOutcome,
    VersionConflict,
)


class CommandRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A command as the engine receives it: the server stamped the time; ``body`` is the client's JSON."""

    command_id: str
    room: str
    player: str
    server_time_ms: int
    body: dict[str, Any]
    # Set on the record kept for a refused command: the room version it was decided against, so
    # that verify can decide it again and check it is still refused for the same reason.
    refused_at_version: int | None = None


def refusal_record(record: CommandRecord, state: RoomState | None) -> bytes:
    """The stored record of a refused command: the command and the version it was refused at."""
    return codec.encode(msgspec.structs.replace(record, refused_at_version=state.version if state else 0))


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What became of a command: the events it appended, or the rule error that refused it."""

    command_id: str
    room: str
    accepted: bool
    first_version: int = 0
    last_version: int = 0
    error: dict | None = None
    envelopes: list[Envelope] = []
    duplicate: bool = False


_RECORD_DECODER = msgspec.msgpack.Decoder(CommandRecord)


def decode_record(data: bytes) -> CommandRecord:
    return _RECORD_DECODER.decode(data)


class RoomService:
    """The write path of every room: one instance per engine process (single writer per shard)."""

    def __init__(self, store: EventStore, snapshot_every: int = 100, cache_size: int = 10_000,
                 max_conflict_retries: int = 5) -> None:
        self.store = store
        self.snapshot_every = snapshot_every
        self.cache_size = cache_size
        self.max_conflict_retries = max_conflict_retries
        self._cache: OrderedDict[str, tuple[RoomState, str]] = OrderedDict()
        # Secret seeds never change once stored: keeping them saves a round trip per command.
        self._seeds: OrderedDict[str, bytes] = OrderedDict()
        self.conflicts = 0

    # --- loading ------------------------------------------------------------------------------

    async def load(self, room: str, at_version: int | None = None) -> tuple[RoomState | None, str]:
        """The room state at ``at_version`` (latest when None) and the chain hash of that version."""
        if at_version is None:
            cached = self._cache.get(room)
            if cached is not None:
                self._cache.move_to_end(room)
                return cached
        state: RoomState | None = None
        last_hash = GENESIS_HASH
        snapshot = await self.store.latest_snapshot(room, at_version)
        if snapshot is not None:
            try:
                state, last_hash = codec.decode_snapshot(snapshot[1])
            except UnusableSnapshotError:
                # A snapshot from an older state format: the log is the truth, fold it from the start.
                state, last_hash = None, GENESIS_HASH
        start = 1 if state is None else state.version + 1
        for envelope in await self.store.read(room, start, at_version):
            state = room_rules.evolve(state, codec.decode_event(envelope), room, envelope.version)
            last_hash = envelope.hash
        if at_version is None and state is not None:
            self._remember(room, state, last_hash)
        return state, last_hash

    def _remember(self, room: str, state: RoomState, last_hash: str) -> None:
        self._cache[room] = (state, last_hash)
        self._cache.move_to_end(room)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def forget(self, room: str) -> None:
        self._cache.pop(room, None)

    # --- the write path -----------------------------------------------------------------------

    async def handle(self, record: CommandRecord) -> Outcome:
        """Decide and append one command; the same command id always gets its first outcome."""
        known = await self.store.outcome(record.room, record.command_id)
        if known is not None:
            return await self._replayed(record, known)
        for _ in range(self.max_conflict_retries + 1):
            try:
                state, last_hash = await self.load(record.room)
                envelopes, new_state = await self._decide(state, last_hash, record)
            except RulesNotInstalledError as error:
                return self._not_installed(record, error)
            except RuleError as error:
                result = await self.store.record_rejection(
                    record.room, record.command_id, error.to_dict(), refusal_record(record, state)
                )
                if result.duplicate:
                    return await self._replayed(record, result.outcome)
                return Outcome(command_id=record.command_id, room=record.room, accepted=False, error=error.to_dict())
            expected = state.version if state is not None else 0
            try:
                result = await self.store.append(
                    record.room, expected, record.command_id, envelopes, codec.encode(record)
                )
            except VersionConflict:
                # Another writer moved the room (a lapsed lease): catch up from the store and decide again.
                self.conflicts += 1
                self.forget(record.room)
                continue
            if result.duplicate:
                self.forget(record.room)
                return await self._replayed(record, result.outcome)
            self._remember(record.room, new_state, envelopes[-1].hash)
            await self._maybe_snapshot(record.room, expected, new_state, envelopes[-1].hash)
            return Outcome(
                command_id=record.command_id,
                room=record.room,
                accepted=True,
                first_version=result.outcome.first_version,
                last_version=result.outcome.last_version,
                envelopes=envelopes,
            )
        raise VersionConflict(record.room, -1, await self.store.latest_version(record.room))

    async def handle_many(self, records: list[CommandRecord]) -> list[Outcome | Exception | None]:
        """Decide a batch in rounds: one command per room per round, each round's writes in one round trip.

        Each result is the command's Outcome, the exception deciding it raised, or None when the
        command must go through ``handle`` alone afterwards, in batch order: after a conflict or a
        failure earlier in its room, or when its command id appeared earlier in the batch.
        """
        results: list[Outcome | Exception | None] = [None] * len(records)
        # No dedupe lookup up front: the append and reject scripts check the command id atomically and
        # answer "dup" without writing, so a replayed command costs a wasted decision, never an effect.
        queues: dict[str, deque[int]] = {}
        seen: set[tuple[str, str]] = set()
        for index, record in enumerate(records):
            if (record.room, record.command_id) not in seen:
                seen.add((record.room, record.command_id))
                queues.setdefault(record.room, deque()).append(index)
        while queues:
            this_round = [queue.popleft() for queue in queues.values()]
            queues = {room: queue for room, queue in queues.items() if queue}
            appends: list[tuple[int, AppendRequest, RoomState]] = []
            rejections: list[tuple[int, RejectRequest]] = []
            for index in this_round:
                record = records[index]
                state = None
                try:
                    state, last_hash = await self.load(record.room)
                    envelopes, new_state = await self._decide(state, last_hash, record)
                except RulesNotInstalledError as error:
                    results[index] = self._not_installed(record, error)
                    continue
                except RuleError as error:
                    rejections.append((index, RejectRequest(room=record.room, command_id=record.command_id,
                                                            error=error.to_dict(),
                                                            record=refusal_record(record, state))))
                    continue
                except Exception as error:  # noqa: BLE001 - reported per command; the room's rest waits
                    results[index] = error
                    queues.pop(record.room, None)
                    continue
                request = AppendRequest(room=record.room, expected_version=state.version if state is not None else 0,
                                        command_id=record.command_id, envelopes=envelopes,
                                        command_record=codec.encode(record))
                appends.append((index, request, new_state))
            append_results, reject_results = await self.store.write_many(
                [request for _, request, _ in appends], [request for _, request in rejections]
            )
            for (index, request, new_state), result in zip(appends, append_results, strict=True):
                if isinstance(result, AppendResult):
                    if result.duplicate:  # seen before: nothing was written, the cached state still holds
                        results[index] = await self._replayed(records[index], result.outcome)
                    else:
                        results[index] = await self._appended(records[index], request, new_state, result)
                    continue
                # A conflict (another writer) or a failed call: catch up, then go alone.
                if isinstance(result, VersionConflict):
                    self.conflicts += 1
                elif isinstance(result, Exception):
                    results[index] = result
                self.forget(request.room)
                queues.pop(request.room, None)
            for (index, request), result in zip(rejections, reject_results, strict=True):
                if isinstance(result, Exception):
                    results[index] = result
                    queues.pop(request.room, None)
                elif result.duplicate:
                    results[index] = await self._replayed(records[index], result.outcome)
                else:
                    results[index] = Outcome(command_id=request.command_id, room=request.room, accepted=False,
                                             error=request.error)
        return results

    @staticmethod
    def _not_installed(record: CommandRecord, error: RulesNotInstalledError) -> Outcome:
        """The room's rules version is missing on this node: refuse, store nothing (no refusal record
        either: the same command id may succeed on a node that has the version)."""
        return Outcome(command_id=record.command_id, room=record.room, accepted=False, error=error.to_dict())

    async def _appended(self, record: CommandRecord, request: AppendRequest, new_state: RoomState,
                        result: AppendResult) -> Outcome:
        envelopes = request.envelopes
        self._remember(record.room, new_state, envelopes[-1].hash)
        await self._maybe_snapshot(record.room, request.expected_version, new_state, envelopes[-1].hash)
        return Outcome(
            command_id=record.command_id,
            room=record.room,
            accepted=True,
            first_version=result.outcome.first_version,
            last_version=result.outcome.last_version,
            envelopes=envelopes,
        )

    async def _decide(
        self, state: RoomState | None, last_hash: str, record: CommandRecord
    ) -> tuple[list[Envelope], RoomState]:
        # The room's own rules version (its envelopes' ``ruleset``), never the newest installed.
        command = codec.decode_command(room_rules.stored_ref(state) if state is not None else None, record.body)
        seed, salt = await self._seed_for(state, record.room, command)
        version = (state.version if state is not None else 0) + 1
        ctx = Context(
            room=record.room,
            player=record.player,
            now_ms=record.server_time_ms,
            version=version,
            dice=Dice(seed, salt, version),
            seed_commitment=seed_commitment(seed),
            secret_seed_hex=seed.hex(),
        )
        events = room_rules.decide(state, command, ctx)
        if not events:
            raise RuleError("no_effect", "the command changes nothing")
        envelopes: list[Envelope] = []
        previous = last_hash
        new_state = state
        for offset, event in enumerate(events):
            event_type, payload = codec.encode_event(event)
            envelope = seal(
                Envelope(
                    room=record.room,
                    version=version + offset,
                    # "realm" for version-1 rooms (as before versions), "realm@2" otherwise: decode_event
                    # reads the room's version from here.
                    ruleset=room_rules.stored_ref(state if state is not None else event),
                    type=event_type,
                    payload=payload,
                    command_id=record.command_id,
                    player=record.player,
                    server_time_ms=record.server_time_ms,
                    previous_hash=previous,
                )
            )
            previous = envelope.hash
            envelopes.append(envelope)
            # Evolve from the decoded payload, exactly as a replay will.
            new_state = room_rules.evolve(new_state, codec.decode_event(envelope), record.room, envelope.version)
        return envelopes, new_state  # type: ignore[return-value]

    async def _seed_for(self, state: RoomState | None, room: str, command: Any) -> tuple[bytes, str]:
        if state is None:
            if not isinstance(command, room_rules.CreateRoom):
                return b"", room  # the room does not exist; deciding refuses the command
            if command.challenge is not None:
                return room_rules.challenge_seed(command.challenge), "challenge"
            # A crash after saving the seed but before the append must not change the dice: keep the first.
            await self.store.save_seed(room, secrets.token_bytes(32))
            seed = await self.store.load_seed(room)
            return seed or b"", room
        if state.challenge is not None:
            return room_rules.challenge_seed(state.challenge), "challenge"
        seed = self._seeds.get(room)
        # Checked against the commitment every time: a room recreated under the same id has a new seed.
        if seed is None or hashlib.sha256(seed).hexdigest() != state.seed_commitment:
            seed = await self.store.load_seed(room)
            if seed is None or hashlib.sha256(seed).hexdigest() != state.seed_commitment:
                raise RuleError("seed_missing", f"room {room!r} has lost its secret seed; it cannot decide dice")
            self._seeds[room] = seed
            while len(self._seeds) > self.cache_size:
                self._seeds.popitem(last=False)
        return seed, room

    async def _maybe_snapshot(self, room: str, before: int, state: RoomState, last_hash: str) -> None:
        if self.snapshot_every and state.version // self.snapshot_every > before // self.snapshot_every:
            await self.store.save_snapshot(room, state.version, codec.encode_snapshot(state, last_hash))

    async def _replayed(self, record: CommandRecord, known: StoredOutcome) -> Outcome:
        envelopes = (
            await self.store.read(known.room, known.first_version, known.last_version) if known.accepted else []
        )
        return Outcome(
            command_id=record.command_id,
            room=known.room,
            accepted=known.accepted,
            first_version=known.first_version,
            last_version=known.last_version,
            error=known.error,
            envelopes=envelopes,
            duplicate=True,
        )
