"""The engine's write path: decide a command with the one room step, append it with the chain, dedupe."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import msgspec

from almanac.events import codec
from almanac.events.dice import COMMAND_BOUND, NONCE_SCHEMES, nonce_commitment, server_nonce
from almanac.events.envelope import Envelope
from almanac.events.errors import InvalidCommand, RuleError, RulesNotInstalledError, SecretMissing
from almanac.events.room import RoomState
from almanac.events.step import (
    CommandRecord,
    VersionMoved,
    decode_fork,
    decode_record,
    kept_in_room,
    needs_secret_seed,
    refusal_record,
    step,
)
from almanac.services.checkpoints import record_scheme
from almanac.services.logging import get_logger
from almanac.storage.base import (
    AppendRequest,
    AppendResult,
    CommandLimited,
    Counted,
    EventStore,
    NotAttempted,
    Receipt,
    RejectRequest,
    RoomArchived,
    StoredOutcome,
    VersionConflict,
)
from almanac.storage.keys import shard_of
from almanac.storage.loader import RoomLoader

_log = get_logger("almanac.engine")

__all__ = ["BatchPlan", "CommandRecord", "Outcome", "RoomService", "decode_record", "refusal_record"]

# Decided writes that make a send of their own before the rest of the batch is decided (see handle_many).
EARLY_WRITE = 50
# One decided write of a batch: (index in the batch, the request, the state it makes, the outcome its
# receipt publishes).
_Decided = tuple[int, "AppendRequest | RejectRequest", "RoomState | None", "Outcome | None"]
# The send of a batch's last writes (one group of requests per shard), answering like write_ordered_shards.
LastWrite = Callable[[list[list["AppendRequest | RejectRequest"]]], Awaitable[list[list["AppendResult | Exception"]]]]


class Outcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What became of a command: the events it appended, or the rule error that refused it.

    omit_defaults: published for every command (services.bus), so a field at its default is not sent (an accepted
    command's ``error`` and ``record``, a refusal's versions and events); a message from an engine before decodes the
    same (a missing field is its default)."""

    command_id: str
    room: str
    accepted: bool
    first_version: int = 0
    last_version: int = 0
    error: dict | None = None
    envelopes: list[Envelope] = []
    duplicate: bool = False
    # A refusal the store recorded: its stored record (events.step.refusal_record), which the gateway signs a
    # refusal receipt over (docs/bundle-format.md section 8). None when accepted or not recorded.
    record: bytes | None = None


class BatchPlan:
    """A decided batch on its way to the store (``RoomService.decide_many``, then ``write``)."""

    __slots__ = ("after", "bases", "counted", "final", "held", "limits", "receipts", "recheck", "records", "results",
                 "rooms", "writes")

    def __init__(self, records: list[CommandRecord], receipts: Callable[[int, Outcome], Receipt] | None,
                 after: BatchPlan | None, limits: list[Counted | None] | None = None) -> None:
        self.records = records
        self.receipts = receipts
        # Each command's client limit, counted by its write in the same step (storage.base.Counted), and the
        # indexes whose count a write did (the others were not written: their caller counts them).
        self.limits = limits
        self.counted: set[int] = set()
        # The batch before, when this one was decided while that one's write was in flight (until revalidated).
        self.after = after
        self.results: list[Outcome | Exception | None] = [None] * len(records)
        self.rooms: dict[str, list[int]] = {}  # room -> its commands' indexes, in order, each command id once
        self.held: dict[int, list[_Decided]] = {}  # shard -> decided writes not yet sent
        self.writes: list[tuple[list[list[_Decided]], Awaitable]] = []  # the sends made, with their decisions
        self.bases: dict[str, RoomState | None] = {}  # room -> the state its decisions started from
        self.final: dict[str, tuple[RoomState, str]] = {}  # room -> the state its decided appends make
        # Rooms decided ahead whose answer read the store (an invalid command's earlier outcome, maybe in
        # the write in flight): decided again by ``revalidate`` whatever their state.
        self.recheck: set[str] = set()


# The rooms whose latest state a writer keeps (its loader's cache), and as many seeds and nonce sets.
ROOM_CACHE = 10_000


class RoomService:
    """The write path of every room: one instance per engine process (single writer per shard)."""

    def __init__(self, store: EventStore, snapshot_every: int = 100, cache_size: int = ROOM_CACHE,
                 max_conflict_retries: int = 5, loader: RoomLoader | None = None) -> None:
        """``loader``: the process's room loader on ``store`` (``bootstrap.Runtime.loader``) where it has a runtime;
        else one of ``cache_size`` rooms is made here (tests, ``almanac sim``, the benchmarks, a forensics fork)."""
        self.store = store
        self.snapshot_every = snapshot_every
        self.cache_size = cache_size
        self.max_conflict_retries = max_conflict_retries
        self.loader = loader if loader is not None else RoomLoader(store, cache_size)
        # Secret seeds never change once stored: keeping them saves a round trip per command.
        self._seeds: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        # Scheme-2 rooms: the players' nonces by commitment, reloaded when a commitment is not held.
        self._nonces: OrderedDict[str, tuple[tuple[tuple[str, str], ...], dict[str, bytes]]] = OrderedDict()
        self.conflicts = 0
        self.redecided = 0  # rooms of a batch decided ahead decided again (``revalidate``)
        self.snapshot_failures = 0  # batches whose snapshots could not be saved (loading replays more)
        # Called with the ms each room brought back from the archive took (the engine's metrics: /metrics)
        self.on_restore: Callable[[float], None] | None = None

    # --- loading (the one loader; this service is its rooms' only writer, so it trusts the cache) --

    async def load(self, room: str, at_version: int | None = None,
                   bring_back: bool = True) -> tuple[RoomState | None, str]:
        """The room state at ``at_version`` (latest when None) and the chain hash of that version.

        A room archived because it was idle is brought back into Redis first (storage.restore) and loaded again
        from there, with ``bring_back``: the engine appends only to a room that lives in Redis, whole. Without it the
        archived state is answered (the same state: the room's version, read from its object), which a command the
        rules refuse is decided and recorded against (``handle``)."""
        loaded = await self.loader.load(room, at_version)
        if bring_back and at_version is None and self._met_idle(room):
            started = time.perf_counter()
            try:
                restored = await self.store.restore_idle(room)  # type: ignore[attr-defined]
            except BaseException:
                self.loader.forget(room)  # its cached state is the archived one: the next try loads (and restores)
                raise
            if restored:
                self.loader.forget(room)
                loaded = await self.loader.load(room)
                if self.on_restore is not None:  # the trip back as the command waits for it: write-back and load
                    self.on_restore((time.perf_counter() - started) * 1000)
        return loaded

    def _met_idle(self, room: str) -> bool:
        """Whether the last load of ``room`` met it archived because it was idle (not brought back since)."""
        met_idle = getattr(self.store, "met_idle", None)
        return met_idle is not None and met_idle(room)

    def _remember(self, room: str, state: RoomState, last_hash: str) -> None:
        self.loader.remember(room, state, last_hash)

    def forget(self, room: str) -> None:
        self.loader.forget(room)

    # --- the write path -----------------------------------------------------------------------

    async def handle(self, record: CommandRecord) -> Outcome:
        """Decide and append one command; the same command id always gets its first outcome."""
        known = await self.store.outcome(record.room, record.command_id)
        if known is not None:
            return await self._replayed(record, known)
        # A room archived idle is brought back only for a command the rules accept: one they refuse is recorded
        # against the archived state (a refusal recorded after the pointer is kept by the restore, storage.restore).
        # Brought back for a refusal, the room's trip was public (the restore histogram in /metrics) and so was
        # its next idle move (the archiver's rooms and bytes): a rival learnt that a command was refused (issue 28).
        bring_back = False
        original = record  # each pass completes it again: its server nonce is saved only on the room in Redis
        tries_left = self.max_conflict_retries + 1
        while tries_left > 0:
            tries_left -= 1
            state = None
            try:
                state, last_hash = await self.load(record.room, bring_back=bring_back)
                archived = self._met_idle(record.room)  # read from the archive: write nothing for the room yet
                if bring_back and archived:
                    # The archiver moved the room again between its trip back and the reload: a state read from the
                    # archive is never appended (its server nonce unsaved, it would land on a room another engine
                    # brought back without it). Load again, which brings it back; a try used up (bounded race).
                    self.forget(record.room)
                    continue
                record, unsaved = await self._complete(state, original, save=not archived)
                envelopes, new_state = await self._decide(state, last_hash, record, unsaved)
            except VersionMoved as error:
                # Its answer names the room's version for the client to sign again: a cached state another
                # writer has since moved would name one the room has passed. Decide again against the store's.
                if await self.store.latest_version(record.room) != (state.version if state is not None else 0):
                    self.conflicts += 1
                    self.forget(record.room)
                    continue
                return self._unrecorded(record, error)
            except (InvalidCommand, RulesNotInstalledError) as error:
                if (isinstance(error, SecretMissing) and not bring_back and self._met_idle(record.room)
                        and await self.store.pointer(record.room) is None):  # type: ignore[attr-defined]
                    # Its secrets read from the archive while another engine brought the room back (neither place
                    # had them at its read): decide again on the room in Redis. With the pointer still there the
                    # archive is where they are: missing there, they are missing.
                    bring_back = True
                    tries_left += 1  # not a conflict: it does not use up a try
                    continue
                return self._unrecorded(record, error)
            except RuleError as error:
                refused = refusal_record(record, state)
                result = await self.store.record_rejection(record.room, record.command_id, error.to_dict(), refused,
                                                           kept_in_room(record, error))
                if result.duplicate:
                    return await self._replayed(record, result.outcome)
                return Outcome(command_id=record.command_id, room=record.room, accepted=False, error=error.to_dict(),
                               record=refused)
            if unsaved is not None and not archived:
                # Its server nonce's write met the room archived (a cached state, moved since): as if the load had.
                # Appended, the join would land without its nonce on a room brought back meanwhile.
                archived = True
                if bring_back:
                    self.forget(record.room)  # moved again since its trip back (above): load again, a try used up
                    continue
            if not bring_back and archived:
                # Accepted: bring the room back, then decide again against the room in Redis (from the original
                # record: that pass saves the server's nonce). The trip is not a conflict: it uses up no try.
                bring_back = True
                tries_left += 1
                continue
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
            return await self._accepted(record, expected, envelopes, new_state, result)
        raise VersionConflict(record.room, -1, await self.store.latest_version(record.room))

    async def handle_many(self, records: list[CommandRecord],
                          receipts: Callable[[int, Outcome], Receipt] | None = None,
                          last_write: LastWrite | None = None) -> list[Outcome | Exception | None]:
        """Decide a batch and write it (``decide_many``, then ``write``): ONE ordered write per shard
        (``EventStore.write_ordered_shards``), sent as soon as EARLY_WRITE decided writes wait, so Redis
        applies them while the next shards are decided; a small batch goes in one send.

        A room's commands are decided one after another, each against the state its predecessor makes,
        before any is written; the write applies them in that order and, once one of a room does not
        take effect (a conflict, a duplicate), skips the room's rest atomically. Each result is the
        command's Outcome, the exception deciding (or writing) it raised, or None when the command must
        go through ``handle`` alone afterwards, in batch order: after a conflict, a duplicate or a
        failure earlier in its room, or when its command id appeared earlier in the batch.

        With ``receipts`` (the engine on one Redis), each append or recorded refusal carries the receipt
        ``receipts(index, outcome)`` returns for the outcome it will have if it takes effect
        (``storage.base.Receipt``: the store acknowledges the command and publishes that outcome in the
        same atomic step). When it does take effect, its result is that very Outcome object; any other
        result (a duplicate's replay, an unrecorded refusal, a failure) was not published.

        ``last_write``, when given, makes the batch's last send instead of ``store.write_ordered_shards``
        (with the same results): the engine sends it together with its next read.
        """
        return await self.write(await self.decide_many(records, receipts), last_write)

    async def decide_many(self, records: list[CommandRecord],
                          receipts: Callable[[int, Outcome], Receipt] | None = None,
                          after: BatchPlan | None = None, limits: list[Counted | None] | None = None) -> BatchPlan:
        """Decide a batch (``handle_many``'s first half); ``write`` sends and collects it.

        ``after``: the batch before, decided and sent but its write not yet collected (the engine decides
        the next batch while Redis applies the last one). Its rooms are decided on from the states its
        decisions make; nothing is sent early; and ``write`` first decides again, through ``revalidate``,
        every room whose state then is not the one assumed (its write failed, or a command went alone).
        """
        plan = BatchPlan(records, receipts, after, limits)
        # No dedupe lookup up front: the write script checks the command id atomically and answers "dup"
        # without writing, so a replayed command costs a wasted decision, never an effect.
        seen: set[tuple[str, str]] = set()
        for index, record in enumerate(records):
            if (record.room, record.command_id) not in seen:
                seen.add((record.room, record.command_id))
                plan.rooms.setdefault(record.room, []).append(index)
        shards: dict[int, list[str]] = {}
        for room in plan.rooms:
            shards.setdefault(shard_of(room, self.store.shard_count), []).append(room)
        count = 0
        try:
            for shard, shard_rooms in shards.items():
                decided: list[_Decided] = []
                for room in shard_rooms:
                    await self._decide_room(plan, room, decided)
                if not decided:
                    continue
                if count >= EARLY_WRITE and after is None and limits is None:
                    # Enough to be worth a send of its own: it goes out now, and Redis applies it while the
                    # next shards are decided. Fewer wait and go in one send with the rest (a send costs more
                    # than the overlap saves when a batch is small). Not when the writes count clients' limits
                    # (commands decided in a gateway's own engine, few at a time): a batch whose deciding fails
                    # then has written and counted nothing, as its caller assumes.
                    held = list(plan.held.values())
                    groups = [[d[1] for d in group] for group in held]
                    plan.writes.append((held, asyncio.ensure_future(self.store.write_ordered_shards(groups))))
                    await asyncio.sleep(0)
                    plan.held, count = {}, 0
                plan.held[shard] = decided
                count += len(decided)
        except BaseException:
            # Deciding failed (Redis, while looking up an earlier outcome): the writes already sent still
            # take effect, so they are awaited and their rooms' cached states move on before the error goes up.
            with contextlib.suppress(BaseException):
                await self._collect(records, plan.writes, plan.results, plan.counted)
            raise
        return plan

    async def write(self, plan: BatchPlan, last_write: LastWrite | None = None) -> list[Outcome | Exception | None]:
        """Send what ``decide_many`` decided and record what each write did; the batch's results."""
        await self.revalidate(plan)
        if plan.held:  # the last send (often the only one): no task, and the caller's ``last_write`` if given
            held = list(plan.held.values())
            groups = [[d[1] for d in group] for group in held]
            plan.writes.append((held, (last_write or self.store.write_ordered_shards)(groups)))
            plan.held = {}
        await self._collect(plan.records, plan.writes, plan.results, plan.counted)
        return plan.results

    async def revalidate(self, plan: BatchPlan) -> None:
        """Decide again each room of a batch decided ahead (``decide_many(after=...)``) whose state is not
        the one its decisions started from, now that the batch before is written and done with.

        Only a room the batch before touched can have moved (this service is its rooms' only writer), and
        it moved as assumed exactly when the cache holds the very state object the decisions started from:
        the state the batch before decided is the one its successful write caches. A failed write, a
        conflict, a duplicate or a command handled alone leaves another state (or none) there. Appends
        would be safe without this (the write checks each room's version), refusals would not: a refusal
        is recorded without a version check, and must be decided against a state the log really has.
        """
        before, plan.after = plan.after, None
        if before is None:
            return
        for room, base in list(plan.bases.items()):
            if room not in before.rooms:
                continue
            cached = self.loader.cached(room)
            if room not in plan.recheck and base is not None and cached is not None and cached[0] is base:
                continue
            self.redecided += 1
            for index in plan.rooms[room]:
                plan.results[index] = None
            plan.final.pop(room, None)
            shard = shard_of(room, self.store.shard_count)
            kept = [d for d in plan.held.get(shard, []) if d[1].room != room]
            await self._decide_room(plan, room, kept)
            if kept:
                plan.held[shard] = kept
            else:
                plan.held.pop(shard, None)

    async def _collect(self, records: list[CommandRecord], writes: list[tuple[list[list[_Decided]], Awaitable]],
                       results: list[Outcome | Exception | None], counted: set[int]) -> None:
        """Await every send of the batch and record what each write did (the first failure raised after)."""
        failure: BaseException | None = None
        snapshots: list[tuple[str, int, bytes]] = []  # the batch's, saved together below
        for decided_groups, write in reversed(writes):  # the last first: it is sent only when awaited
            try:
                written_groups = await write
            except BaseException as error:  # noqa: BLE001 - the other shards' writes are still collected
                failure = failure or error
                continue
            for decided, written in zip(decided_groups, written_groups, strict=True):
                await self._written(records, decided, written, results, snapshots, counted)
        if snapshots and (failure is None or isinstance(failure, Exception)):
            try:
                await self.store.save_snapshots(snapshots)
            except Exception as error:  # noqa: BLE001 - a snapshot is a cache: the writes it follows stand
                self.snapshot_failures += 1
                _log.warning("snapshots.unsaved", rooms=len(snapshots), error=f"{type(error).__name__}: {error}")
        if failure is not None:
            raise failure  # the shard's entries stay pending (Redis error) and are re-processed

    async def _decide_room(self, plan: BatchPlan, room: str, decided: list[_Decided]) -> None:
        """Decide one room's commands of a batch in order, each against the state the one before makes,
        starting from the state the batch before decided for it (``plan.after``) or the loaded one."""
        records, indexes, results, receipts, limits = (plan.records, plan.rooms[room], plan.results, plan.receipts,
                                                       plan.limits)
        start = plan.after.final.get(room) if plan.after is not None else None
        if start is None:
            try:
                # Not brought back from the archive here: a room met archived idle is left to ``handle`` (below),
                # which brings it back for a command the rules accept and records a refused one against the
                # archived state (its comment says why).
                start = await self.load(room, bring_back=False)
            except Exception as error:  # noqa: BLE001 - reported per command (a corrupt room): the rest waits
                results[indexes[0]] = error
                return
            if self._met_idle(room):
                # Read from the archive: the move took the room's outcome records and id index out of Redis, so the
                # write script's dedupe cannot see an earlier outcome and a resend refused now would be recorded over
                # its first answer. Its commands go through ``handle`` (None), which looks the outcome up first.
                return
        state, last_hash = start
        plan.bases[room] = state
        # The room may yet be met archived below (``_met_idle``), mid-decision: a state from the cache or the batch
        # before is not read, so a room the archiver moved since is met by the first read of its seed or nonces that
        # falls back to the archive (the "cached room" stories, tests/store/test_archive_idle.py).
        for index in indexes:
            record = records[index]
            try:
                # Read from the archive: nothing of the room is written before its append (which fails there:
                # ``handle`` brings the room back and completes the record again, saving the server's nonce).
                record, unsaved = await self._complete(state, record, save=not self._met_idle(room))
                envelopes, new_state = await self._decide(state, last_hash, record, unsaved)
            except VersionMoved:
                # Decided against the batch's state, which may be a cached or planned one behind the store:
                # this command and the room's rest go through ``handle`` alone, which checks the store's version.
                break
            except InvalidCommand as error:
                if isinstance(error, SecretMissing) and self._met_idle(room):
                    break  # read from the archive as the room came back: ``handle`` decides on the room in Redis
                # Its id may name an earlier outcome: that one stands (as in ``handle``).
                if plan.after is not None:
                    plan.recheck.add(room)  # that outcome may be in the write still in flight
                known = await self.store.outcome(record.room, record.command_id)
                results[index] = (await self._replayed(record, known) if known is not None
                                  else self._unrecorded(record, error))
                continue
            except RulesNotInstalledError as error:
                results[index] = self._unrecorded(record, error)
                continue
            except RuleError as error:
                announced = receipt = None
                refused = refusal_record(record, state)
                if receipts is not None:
                    announced = Outcome(command_id=record.command_id, room=record.room, accepted=False,
                                        error=error.to_dict(), record=refused)
                    receipt = receipts(index, announced)
                decided.append((index, RejectRequest(room=record.room, command_id=record.command_id,
                                                     error=error.to_dict(), record=refused,
                                                     receipt=receipt, counted=limits[index] if limits else None,
                                                     kept=kept_in_room(record, error)),
                                None, announced))
                continue
            except Exception as error:  # noqa: BLE001 - reported per command; the room's rest waits (None)
                results[index] = error
                break
            if unsaved:
                # Accepted with a server nonce not written (the room read from the archive): were the room back
                # meanwhile (another engine), the append would land without it. ``handle`` brings it back, saves it.
                break
            expected = state.version if state is not None else 0
            announced = receipt = None
            if receipts is not None:
                announced = Outcome(command_id=record.command_id, room=record.room, accepted=True,
                                    first_version=expected + 1, last_version=expected + len(envelopes),
                                    envelopes=envelopes)
                receipt = receipts(index, announced)
            decided.append((index, AppendRequest(room=record.room, expected_version=expected,
                                                 command_id=record.command_id, envelopes=envelopes,
                                                 command_record=codec.encode(record), receipt=receipt,
                                                 counted=limits[index] if limits else None),
                            new_state, announced))
            state, last_hash = new_state, envelopes[-1].hash
        if state is not start[0]:
            plan.final[room] = (state, last_hash)  # type: ignore[assignment]

    async def _written(self, records: list[CommandRecord], decided: list[_Decided],
                       written: list[AppendResult | Exception], results: list[Outcome | Exception | None],
                       snapshots: list[tuple[str, int, bytes]], counted: set[int]) -> None:
        """The results of one shard's ordered write: cache what was appended, answer, set the rest aside."""
        failed: set[str] = set()
        for (index, request, new_state, announced), result in zip(decided, written, strict=True):
            room = request.room
            if isinstance(result, NotAttempted):
                continue  # None: alone, after the write of its room that did not take effect
            if request.counted is not None and (not isinstance(result, Exception)
                                                or isinstance(result, (CommandLimited, VersionConflict))):
                counted.add(index)  # its count ran in the script (a conflict's too: only the write was refused)
            if isinstance(result, Exception):
                if isinstance(result, VersionConflict):
                    self.conflicts += 1  # another writer moved the room: caught up when it goes alone
                else:
                    results[index] = result
                failed.add(room)
            elif result.duplicate:
                results[index] = await self._replayed(records[index], result.outcome)
                if isinstance(request, AppendRequest):
                    failed.add(room)  # the states decided after it assumed its events
            elif isinstance(request, RejectRequest):
                results[index] = announced or Outcome(command_id=request.command_id, room=room, accepted=False,
                                                      error=request.error, record=request.record)
            else:
                results[index] = await self._accepted(records[index], request.expected_version, request.envelopes,
                                                      new_state, result, announced, snapshots)
        for room in failed:
            self.forget(room)

    async def fork(self, record: CommandRecord) -> Outcome:
        """Start the sandbox fork ``record.room`` from a ``fork_room`` command (its parent and version):
        the parent's state and chain hash at that version through the one loader, a new secret seed for
        the fork, the one room step, and an append at version 1. Refusals are answered, not recorded
        (the fork room does not exist); the caller is an auditor, never a player's command stream."""
        try:
            command = decode_fork(record.body)
            if record.room == command.parent:
                raise RuleError("fork_base", "a fork needs a new room id", field="as")
            if await self.store.latest_version(record.room) != 0:
                raise RuleError("room_exists", f"room {record.room!r} already exists", field="as")
            latest = await self.store.latest_version(command.parent)
            if latest == 0:
                raise RuleError("room_not_found", f"room {command.parent!r} does not exist", field="room")
            if command.at > latest:
                raise RuleError("version_out_of_range",
                                f"room {command.parent!r} has versions 1 to {latest}; cannot fork at {command.at}",
                                field="at")
            parent, parent_hash = await self.loader.load(command.parent, command.at)
            current, _ = await self.loader.load(command.parent)
            if current is None or not current.ended:
                # A fork's seats are taken by the normal join: forking a live room would let whoever joins
                # as alice read alice's hidden view of the parent. Once the room has ended (its seed is
                # revealed) nothing of it is hidden any more.
                raise RuleError("parent_live", f"room {command.parent!r} has not ended: only an ended room "
                                "may be forked (a fork's seats would show its players' hidden views)",
                                field="room")
            seed = await self._seed_for(None, record)
            envelopes, new_state = step(parent, parent_hash, record, seed, command=command)
        except (InvalidCommand, RulesNotInstalledError, RuleError) as error:
            return self._unrecorded(record, error)
        try:
            result = await self.store.append(record.room, 0, record.command_id, envelopes, codec.encode(record))
        except VersionConflict:
            error = RuleError("room_exists", f"room {record.room!r} already exists", field="as")
            return self._unrecorded(record, error)
        if result.duplicate:
            return await self._replayed(record, result.outcome)
        self._remember(record.room, new_state, envelopes[-1].hash)
        return Outcome(command_id=record.command_id, room=record.room, accepted=True, first_version=1,
                       last_version=1, envelopes=envelopes)

    @staticmethod
    def _unrecorded(record: CommandRecord, error: RuleError) -> Outcome:
        """Answered, never recorded (no event, refusal record or outcome): a command that does not fit
        its schema, or a room whose rules version this node lacks (the same command id may succeed on
        a node that has it)."""
        return Outcome(command_id=record.command_id, room=record.room, accepted=False, error=error.to_dict())

    async def _accepted(self, record: CommandRecord, expected_version: int, envelopes: list[Envelope],
                        new_state: RoomState, result: AppendResult, announced: Outcome | None = None,
                        snapshots: list[tuple[str, int, bytes]] | None = None) -> Outcome:
        """An append went through: cache the new state, snapshot when due (into ``snapshots`` when given,
        saved with the rest of its batch), answer with the events (``announced``: the outcome its receipt
        already published, the same by construction)."""
        self._remember(record.room, new_state, envelopes[-1].hash)
        await self._maybe_snapshot(record.room, expected_version, new_state, envelopes[-1].hash, snapshots)
        if announced is not None:
            return announced
        return Outcome(
            command_id=record.command_id,
            room=record.room,
            accepted=True,
            first_version=result.outcome.first_version,
            last_version=result.outcome.last_version,
            envelopes=envelopes,
        )

    async def _complete(self, state: RoomState | None, record: CommandRecord,
                        save: bool = True) -> tuple[CommandRecord, dict[str, bytes] | None]:
        """The record as the room will store it: what the server chose on the client's behalf, written in,
        and the server's nonce it chose when ``save`` is False (by commitment, for ``_decide``), else None.

        A new secret-seed room that names no dice scheme gets the newest (3: command-bound). A join
        of a scheme-2 or 3 room without a nonce gets the server's (``events.dice.server_nonce``, derived
        from the seed), kept beside the seed, and says so (``nonce_by_server``). Written into the record, a
        re-decision (verify, bundles, forks) decides exactly the same without knowing this rule. Without
        ``save`` (a room read from the archive), or when the store finds the room archived as it writes, the nonce
        is not written: a refused join leaves nothing of the room in Redis, and an accepted one is completed again
        once the room is back (the same nonce).
        """
        body = record.body
        kind = body.get("kind")
        if state is None and kind == "create_room" and "dice_scheme" not in body and body.get("challenge") is None:
            return msgspec.structs.replace(record, body={**body, "dice_scheme": COMMAND_BOUND}), None
        if (kind == "join_room" and state is not None and state.dice_scheme in NONCE_SCHEMES
                and body.get("nonce_commitment") is None and record.player not in state.players):
            nonce = server_nonce(await self._seed_for(state, record), record.player)
            commitment, unsaved = nonce_commitment(nonce), {nonce_commitment(nonce): nonce}
            if save and not self._met_idle(record.room):
                # The state and seed may have come from this engine's caches: the store keeps the nonce only while
                # the room is in Redis, checked in the same step as the write, so a room archived since is met here
                # and the nonce stays unwritten, as for a room known to be read from the archive.
                with contextlib.suppress(RoomArchived):
                    commitment, unsaved = await self.store.save_nonce(record.room, nonce, beside_idle=False), None
            return msgspec.structs.replace(record, body={**body, "nonce_commitment": commitment,
                                                         "nonce_by_server": True}), unsaved
        return record, None

    async def _decide(
        self, state: RoomState | None, last_hash: str, record: CommandRecord, unsaved: dict[str, bytes] | None = None
    ) -> tuple[list[Envelope], RoomState]:
        """The one room step, with the room's secret seed fetched (or drawn, for a new room) when it is used,
        and, in a scheme-2 room, the players' nonces (with ``unsaved``: the server's nonce ``_complete`` chose
        for a join of a room read from the archive, not written)."""
        if needs_secret_seed(state, record.body):
            seed = await self._seed_for(state, record)  # (a new room's scheme is recorded with its drawn seed)
        else:
            seed = None
            if state is None and record.body.get("kind") == "create_room":
                # A challenge room (public seed: nothing drawn) commits per viewer like every new room (scheme v2)
                await record_scheme(self.store, record.room)
        nonces = None
        if state is not None and state.dice_scheme in NONCE_SCHEMES:
            nonces = await self._nonces_for(state, record)
            if unsaved:
                nonces = {**nonces, **unsaved}  # a copy: the cached set holds only what the store holds
        return step(state, last_hash, record, seed, nonces=nonces)

    async def _nonces_for(self, state: RoomState, record: CommandRecord) -> dict[str, bytes]:
        room = record.room
        entry = self._nonces.get(room)
        joining = record.body.get("nonce_commitment") if record.body.get("kind") == "join_room" else None
        if entry is not None and entry[0] is state.nonce_commitments and (joining is None or joining in entry[1]):
            return entry[1]  # the same commitments as last time (one tuple from join to join): nothing to check
        held = entry[1] if entry is not None else None
        if (held is None or any(c not in held for _, c in state.nonce_commitments)
                or (isinstance(joining, str) and joining not in held)):
            # Content-addressed: keep only entries that hash to their commitment (a stray write is inert).
            held = {c: n for c, n in (await self.store.load_nonces(room)).items() if nonce_commitment(n) == c}
        self._nonces[room] = (state.nonce_commitments, held)
        self._nonces.move_to_end(room)
        while len(self._nonces) > self.cache_size:
            self._nonces.popitem(last=False)
        return held

    async def _seed_for(self, state: RoomState | None, record: CommandRecord) -> bytes:
        room = record.room
        if state is None:
            # A crash after saving the seed but before the append must not change the dice: keep the first.
            await self.store.save_seed(room, secrets.token_bytes(32))
            await record_scheme(self.store, room)  # rooms created from now on commit per viewer (scheme v2)
            return await self.store.load_seed(room) or b""
        held = self._seeds.get(room)
        # Checked against the commitment every time (a room recreated under the same id has a new seed):
        # kept with the commitment it was checked against, so the hash is computed once, not per command.
        if held is not None and held[1] == state.seed_commitment:
            return held[0]
        seed = await self.store.load_seed(room)
        if seed is None or hashlib.sha256(seed).hexdigest() != state.seed_commitment:
            raise SecretMissing("seed_missing", f"room {room!r} has no secret seed in the store (being imported, or "
                              "lost); it cannot decide dice")
        self._seeds[room] = (seed, state.seed_commitment)
        while len(self._seeds) > self.cache_size:
            self._seeds.popitem(last=False)
        return seed

    async def _maybe_snapshot(self, room: str, before: int, state: RoomState, last_hash: str,
                              snapshots: list[tuple[str, int, bytes]] | None = None) -> None:
        if self.snapshot_every and state.version // self.snapshot_every > before // self.snapshot_every:
            snapshot = (room, state.version, codec.encode_snapshot(state, last_hash))
            if snapshots is None:
                await self.store.save_snapshot(*snapshot)
            else:
                snapshots.append(snapshot)

    async def _replayed(self, record: CommandRecord, known: StoredOutcome) -> Outcome:
        return await stored_outcome(self.store, record, known, duplicate=True)


async def stored_outcome(store: EventStore, record: CommandRecord, known: StoredOutcome,
                         duplicate: bool = False) -> Outcome:
    """A command's stored first outcome as an Outcome, with the events it appended read back."""
    envelopes = await store.read(known.room, known.first_version, known.last_version) if known.accepted else []
    return Outcome(command_id=record.command_id, room=known.room, accepted=known.accepted,
                   first_version=known.first_version, last_version=known.last_version, error=known.error,
                   envelopes=envelopes, duplicate=duplicate, record=known.record)
