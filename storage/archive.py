"""The archive tier: a finished room's whole record moved out of Redis into one immutable, zstd-compressed object.

The object store is named by a URL (ALMANAC_ARCHIVE_URL: ``file:///...``, ``s3://bucket/prefix``, ``gs://...``,
``az://...``) and reached through obstore, so every store it knows works without new code here. An object holds
everything a reader of the room needs, exactly as Redis held it: the envelopes byte for byte as sealed (each with
its hash), the command records, the refusal records, every command id's stored outcome, the seed, the nonces and a
copy's origin. It is named by its own SHA-256, written with "create only" (never overwritten), and read back and
compared with Redis before Redis lets go of anything.

The move (``archive_room``) in the order that keeps the room readable from exactly one place at every step:

1. read the room from Redis; build the object; write it (``create``: an existing object of the same name is the
   same bytes, so a second archiver or a rerun after a crash just reuses it);
2. read the object back from the store and check it against Redis (count, every envelope's bytes and hash, the
   last hash, the records);
3. record the pointer (a field of ``Keys.pointers``) in one script that first checks the room did not move meanwhile (same
   version, same number of refusals; an idle room's move, no fewer) and that no pointer exists: the commit point. Before it every reader reads
   Redis; from it on every reader reads the archive (the pointer names the object and its hash);
4. delete the room's keys from Redis in one script that checks the pointer is still this one (refusals recorded
   after step 3 stay in Redis and are read after the archived ones).

A kill -9 between any two steps leaves either no pointer (Redis has the whole room; an orphan object at most) or
the pointer (the archive has the whole room, checked; Redis may still hold a copy the next run deletes). Two
archivers racing on one room: the pointer script lets one win; the other finds the pointer and only deletes. Every
script touches one room's keys (one hash tag), so it runs on a Redis Cluster as on one server.

``ArchivingStore`` is the Redis event store with the archive below it: every read of an archived room (the one
loader's snapshot-and-tail, ``read``/``iterate``, command and refusal records, outcomes, seed, nonces) is answered
from its object, so every reader built on the store (services.bootstrap builds it) reads archived rooms untold.
"""

from __future__ import annotations

import hashlib
import os
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import obstore
import zstandard
from obstore.exceptions import AlreadyExistsError, NotFoundError
from obstore.store import from_url

from almanac.events import codec
from almanac.events.dice import nonce_commitment
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError
from almanac.events.step import decode_record
from almanac.storage.base import RoomArchived, StoredOutcome
from almanac.storage.redis_store import (
    LOAD_SCRIPT,
    RedisEventStore,
    _decoded,
    decode_kept,
    ids_field,
)

FORMAT = 1
ZSTD_LEVEL = 19  # written once, read many times: the smallest objects are worth the CPU of the one write
_OUTCOME_DECODER = msgspec.msgpack.Decoder(StoredOutcome)


class ArchiveError(Exception):
    """The archive cannot be written or read, or an object does not match what it should hold."""


class RoomObject(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One archived room (msgpack, then zstd). ``events[i]`` is the stored bytes of version i+1."""

    format: int
    room: str
    version: int
    last_hash: str
    events: list[bytes]
    commands: list[tuple[int, bytes]]
    rejections: list[bytes]
    outcomes: dict[str, bytes]
    seed: bytes | None = None
    nonces: dict[str, bytes] = {}
    origin: bytes | None = None
    commit_scheme: str | None = None  # the room's commitment scheme (docs/bundle-format.md 6.1); None: v1


class Pointer(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """What Redis keeps of an archived room: its object's digest (the object's name derives from it and the
    room), its version and what it holds. Stored as a field of the shard's pointer hash (``Keys.pointers``, the
    room is the field): ``encode_pointer`` leaves the room out, about 47 bytes."""

    room: str
    digest: bytes  # SHA-256 of the object
    version: int
    rejections: int
    size: int
    archived_at_ms: int
    reason: str = "finished"

    @property
    def sha256(self) -> str:
        return self.digest.hex()

    @property
    def path(self) -> str:
        return object_path(self.room, self.sha256)


_OBJECT_DECODER = msgspec.msgpack.Decoder(RoomObject)
_STORED_POINTER = msgspec.msgpack.Decoder(list[Any])
_ENCODER = msgspec.msgpack.Encoder()


def encode_pointer(pointer: Pointer) -> bytes:
    """The pointer's value in the shard's pointer hash: every field but the room (the hash's field), the time in
    seconds and the reason only when not "finished": ~47 bytes, so each fits a small allocation."""
    fields = [pointer.digest, pointer.version, pointer.rejections, pointer.size, pointer.archived_at_ms // 1000]
    return _ENCODER.encode(fields if pointer.reason == "finished" else [*fields, pointer.reason])


def decode_pointer(room: str, value: bytes) -> Pointer:
    digest, version, rejections, size, archived_at_s, *reason = _STORED_POINTER.decode(value)
    return Pointer(room=room, digest=digest, version=version, rejections=rejections, size=size,  # type: ignore[arg-type]
                   archived_at_ms=archived_at_s * 1000, reason=reason[0] if reason else "finished")  # type: ignore[operator]


def encode_object(room_object: RoomObject) -> bytes:
    """The object's bytes: deterministic (sorted maps), so two archivers of one room write the same object."""
    ordered = msgspec.structs.replace(room_object, outcomes=dict(sorted(room_object.outcomes.items())),
                                      nonces=dict(sorted(room_object.nonces.items())))
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(_ENCODER.encode(ordered))


def decode_object(data: bytes, decompressor: zstandard.ZstdDecompressor | None = None) -> RoomObject:
    try:
        decoded = _OBJECT_DECODER.decode((decompressor or zstandard.ZstdDecompressor()).decompress(data))
    except (zstandard.ZstdError, msgspec.DecodeError) as error:
        raise ArchiveError(f"not an archived room object: {error}") from None
    if decoded.format != FORMAT:
        raise ArchiveError(f"archived room object of format {decoded.format}; this version reads {FORMAT}")
    return decoded


def object_path(room: str, digest: str) -> str:
    """Content-addressed: ``rooms/<room, quoted>/<sha256>.zst``."""
    return f"rooms/{urllib.parse.quote(room, safe='')}/{digest}.zst"


def default_archive_url(data_dir: str) -> str:
    return Path(data_dir).resolve().joinpath("archive").as_uri()


class ArchiveStore:
    """The object store of archived rooms, by URL (obstore: file, s3, gs, az, memory). S3 options come from the
    usual AWS_* environment (AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, credentials), as obstore reads them."""

    def __init__(self, url: str) -> None:
        self.url = url
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("file", "s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "memory", "http", "https"):
            raise ArchiveError(f"ALMANAC_ARCHIVE_URL={url!r} is not usable: use file://, s3://, gs:// or az://")
        self._local = urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else None
        self._store: Any = None  # built at first use: a process that never archives creates nothing

    @property
    def store(self) -> Any:
        if self._store is None:
            options: dict[str, Any] = {}
            if self._local is not None:
                os.makedirs(self._local, exist_ok=True)
            elif os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true":
                options["client_options"] = {"allow_http": True}
            try:
                self._store = from_url(self.url, **options)
            except Exception as error:  # noqa: BLE001 - obstore's configuration errors: one line for the operator
                raise ArchiveError(f"ALMANAC_ARCHIVE_URL={self.url!r} is not usable: {error}") from None
        return self._store

    async def put_new(self, path: str, data: bytes) -> bool:
        """Write ``data`` at ``path`` unless an object is there already (False then): objects never change."""
        try:
            await obstore.put_async(self.store, path, data, mode="create")
        except AlreadyExistsError:
            return False
        except FileExistsError:
            return False
        except Exception as error:  # noqa: BLE001 - S3 answers a conditional put with 412
            if "Precondition" in type(error).__name__ or "already exists" in str(error).lower():
                return False
            raise
        return True

    async def get(self, path: str) -> bytes:
        if self._local is not None:
            # A directory: read the file here. obstore's read of a small object hops to its runtime's threads and
            # back, which was most of an uncached archived read's time and all of its tail (bench lifecycle).
            try:
                return Path(self._local, path).read_bytes()
            except FileNotFoundError:
                raise ArchiveError(f"no archived object {path} in {self.url}") from None
        try:
            result = await obstore.get_async(self.store, path)
            return bytes(await result.bytes_async())
        except (FileNotFoundError, NotFoundError):
            # The same answer as a directory's (restore's "gone" rests on it) on every kind of store.
            raise ArchiveError(f"no archived object {path} in {self.url}") from None

    async def delete(self, path: str) -> None:
        """Remove the object at ``path``; one already gone is no error (a rerun after a crash removes it again)."""
        try:
            await obstore.delete_async(self.store, path)
        except (FileNotFoundError, NotFoundError):
            pass

    async def paths(self, prefix: str = "rooms/") -> list[str]:
        found = []
        async for batch in obstore.list(self.store, prefix):
            found += [item["path"] for item in batch]
        return found


# KEYS: 1 the shard's pointer hash, 2 room version, 3 room rejected stream. ARGV: 1 pointer, 2 version,
# 3 refusals archived, 4 room id. The commit point: only when no pointer exists and the room did not move.
RECORD_POINTER_SCRIPT = """
if redis.call('HEXISTS', KEYS[1], ARGV[4]) == 1 then return 'exists' end
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[2]) then return 'moved' end
if redis.call('XLEN', KEYS[3]) ~= tonumber(ARGV[3]) then return 'moved' end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[1])
return 'ok'
"""

# The same commit point for a room archived because it was idle (still being played): it also deletes the room's
# version key, so a writer that still holds the room's state (an engine's cache) has its append refused as a
# conflict (the append scripts compare the version) and loads the room again, which finds the pointer and brings
# the room back first (storage.restore). Without it, an append between this step and the delete step would be
# deleted with the room. Refusals recorded since the read do not stop it (only fewer than read would): they are
# after the pointer's count, which the delete step keeps, ``rejections`` reads after the archived ones and the
# restore writes back after them; refusing the move for them let a room refused faster than it moves never move.
RECORD_IDLE_POINTER_SCRIPT = RECORD_POINTER_SCRIPT.replace(
    "redis.call('HSET', KEYS[1], ARGV[4], ARGV[1])",
    "redis.call('HSET', KEYS[1], ARGV[4], ARGV[1])\nredis.call('DEL', KEYS[2])").replace(
    "if redis.call('XLEN', KEYS[3]) ~= tonumber(ARGV[3]) then", "if redis.call('XLEN', KEYS[3]) < tonumber(ARGV[3]) then")
if "redis.call('DEL', KEYS[2])" not in RECORD_IDLE_POINTER_SCRIPT or "XLEN', KEYS[3]) <" not in \
        RECORD_IDLE_POINTER_SCRIPT:  # the lines it rewrites changed: say so, never drop a guard
    raise ImportError("RECORD_IDLE_POINTER_SCRIPT lost a guard: rewrite it beside RECORD_POINTER_SCRIPT")

# KEYS: 1 the shard's pointer hash, 2 events, 3 commands, 4 rejected, 5 snapshot index, 6 snapshot data, 7 seed,
# 8 nonces, 9 origin, 10 the shard's ended rooms (the archiver's work list: a finished room stays on it until the
# archive index has compacted its rows, archive_index.compact takes it off; an idle room leaves it here), 11 the
# shard's summary rows (an archived
# room's is folded from the archive when asked for: projections.read_model_queries), 12 the room's version (the pointer has it;
# an ended room never appends again), 13.. the room's id index and the dedupe records of the archived commands. ARGV: 1 the pointer
# (must still be it), 2 refusals archived, 3 room id. The room's place in the shard's room set stays: registries
# keep counting it. ARGV 4: the move's reason; an idle room keeps its summary row (it comes back, and nothing
# would write the row again before its next event: storage.restore), and loses only the nonces its object holds
# (ARGV 5..: their commitments): one the gateway saved for a join after the move read the room (it saves a
# player's own nonce before the engine decides) stays for that join, which the restore merges it with (HSETNX).
# The archived refusals are removed only while the events are there: the first run removes both in this one step, and what a later run of the same pointer (an
# archiver that lost the race, a rerun) finds in the stream are refusals recorded after the pointer, to keep.
DELETE_SCRIPT = """
if redis.call('HGET', KEYS[1], ARGV[3]) ~= ARGV[1] then return 0 end
local archived = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then
  if redis.call('XLEN', KEYS[4]) <= archived then
    redis.call('DEL', KEYS[4])
  elseif archived > 0 then  -- (XRANGE's COUNT 0 answers nil, not an empty list)
    local first = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', archived)
    for _, entry in ipairs(first) do redis.call('XDEL', KEYS[4], entry[1]) end
  end
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[9], KEYS[12])
if ARGV[4] == 'idle' then
  redis.call('ZREM', KEYS[10], ARGV[3])
  for i = 5, #ARGV do redis.call('HDEL', KEYS[8], ARGV[i]) end
else
  redis.call('DEL', KEYS[8])
  redis.call('HDEL', KEYS[11], ARGV[3])
end
for i = 13, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
"""


# KEYS: 1 the shard's superseded objects. ARGV: 1 room, 2 the digests read. Forgets the room's superseded objects
# once removed, unless more were noted meanwhile (the room came back again: those stay for its next move).
FORGET_SUPERSEDED_SCRIPT = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""


# LOAD_SCRIPT (storage.redis_store) with the pointer first: KEYS 4 the shard's pointer hash, ARGV 3 the room.
# {-1, pointer} for an archived room, else LOAD_SCRIPT's answer: a live room still loads in one round trip.
LOAD_OR_POINTER_SCRIPT = """
local pointer = redis.call('HGET', KEYS[4], ARGV[3]) or redis.call('HGET', KEYS[5], ARGV[3])
if pointer then return {-1, pointer} end
""" + LOAD_SCRIPT


# KEYS: 1 the room's pointer bucket, 2 the shard's first-layout pointers, 3 the room's nonces. ARGV: 1 room,
# 2 commitment, 3 nonce, 4 "1" to keep it beside an idle room's archive too. Keeps the nonce while the room has no
# pointer, or beside an idle archive when asked, checked in the same step: a room moved (or brought back, finished
# and archived again) after a caller's read gets nothing of it written. Answers false when kept without a pointer,
# else {pointer, 1 if kept beside it}. An idle pointer is msgpack's array of six (0x96) whose last item is the str
# "idle" (0xa4 then its 4 bytes): encode_pointer writes the reason last, and only when not "finished" (Redis's
# cmsgpack cannot read msgspec's bin items, so the bytes are matched; tests/store/test_archive_idle.py holds it).
SAVE_NONCE_SCRIPT = """
local pointer = redis.call('HGET', KEYS[1], ARGV[1]) or redis.call('HGET', KEYS[2], ARGV[1])
if not pointer then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  return false
end
if ARGV[4] == '1' and string.byte(pointer, 1) == 150 and string.sub(pointer, -5) == '\\164idle' then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  return {pointer, 1}
end
return {pointer, 0}
"""


class ArchivedRooms:
    """Decoded objects of archived rooms, newest used kept, fetched and decompressed once each: at most ``size`` of
    them and ``max_bytes`` of their stored envelopes and records (one huge room cannot hold a process' memory)."""

    def __init__(self, archive: ArchiveStore, size: int = 256, max_bytes: int = 64 << 20) -> None:
        self.archive = archive
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._cache: OrderedDict[str, tuple[RoomObject, int]] = OrderedDict()
        self._decompressor = zstandard.ZstdDecompressor()  # one context, reused: building one per object cost

    async def get(self, pointer: Pointer) -> RoomObject:
        found = self._cache.get(pointer.sha256)
        if found is not None:
            self._cache.move_to_end(pointer.sha256)
            return found[0]
        data = await self.archive.get(pointer.path)
        if hashlib.sha256(data).hexdigest() != pointer.sha256:
            raise ArchiveError(f"the archived object {pointer.path} does not have the digest its pointer recorded")
        decoded = decode_object(data, self._decompressor)
        weight = sum(map(len, decoded.events)) + sum(len(record) for _, record in decoded.commands) + \
            sum(map(len, decoded.rejections)) + sum(map(len, decoded.outcomes.values()))
        self._cache[pointer.sha256] = (decoded, weight)
        self.bytes += weight
        while len(self._cache) > self.size or (self.bytes > self.max_bytes and len(self._cache) > 1):
            self.bytes -= self._cache.popitem(last=False)[1][1]
        return decoded


class ArchivingStore(RedisEventStore):
    """The Redis event store with the archive tier below it: an archived room reads from its object."""

    def __init__(self, client: Any, archive: ArchiveStore, *args: Any, cache_size: int = 256, **kwargs: Any) -> None:
        super().__init__(client, *args, **kwargs)
        self.archive = archive
        self.objects = ArchivedRooms(archive, cache_size)
        self._pointers: OrderedDict[str, Pointer] = OrderedDict()  # archived is for ever: positives are cached
        self._record_pointer = client.register_script(RECORD_POINTER_SCRIPT)
        self._record_idle_pointer = client.register_script(RECORD_IDLE_POINTER_SCRIPT)
        # Rooms archived because idle (reason "idle") come back (storage.restore): their pointers are never cached
        # (another process may have brought the room back); the last one the loader's read met is kept here, for
        # the engine's ``restore_idle`` only.
        self._idle_met: OrderedDict[str, Pointer] = OrderedDict()
        self._delete_room = client.register_script(DELETE_SCRIPT)
        self._forget_superseded = client.register_script(FORGET_SUPERSEDED_SCRIPT)
        self._load_or_pointer = client.register_script(LOAD_OR_POINTER_SCRIPT)
        self._save_nonce = client.register_script(SAVE_NONCE_SCRIPT)

    async def pointer(self, room: str) -> Pointer | None:
        known = self._pointers.get(room)
        if known is not None:
            return known
        value = await self.client.hget(self.keys.pointer_bucket(room), room)
        if value is None:  # archived before the buckets, and not moved yet
            value = await self.client.hget(self.keys.first_layout_pointers(self.keys.shard(room)), room)
        if value is None:
            return None
        return self._met(room, decode_pointer(room, value))

    async def pointers(self, rooms: list[str]) -> dict[str, Pointer]:
        """The pointers of those of ``rooms`` that are archived (``pointer`` for many: one round trip, the cached
        ones none); a room not archived is left out."""
        found = {room: self._pointers[room] for room in rooms if room in self._pointers}
        asked = [room for room in rooms if room not in found]
        if asked:
            async with self.client.pipeline(transaction=False) as pipe:
                for room in asked:
                    pipe.hget(self.keys.pointer_bucket(room), room)
                    pipe.hget(self.keys.first_layout_pointers(self.keys.shard(room)), room)  # archived before the buckets
                values = await pipe.execute()
            for index, room in enumerate(asked):
                value = values[2 * index] if values[2 * index] is not None else values[2 * index + 1]
                if value is not None:
                    found[room] = self._met(room, decode_pointer(room, value))
        return found

    def _met(self, room: str, pointer: Pointer) -> Pointer:
        """Cache a pointer met in Redis: a finished room's for ever; an idle room's only for ``restore_idle``."""
        cache = self._idle_met if pointer.reason == "idle" else self._pointers
        cache[room] = pointer
        while len(cache) > 100_000:
            cache.popitem(last=False)
        return pointer

    def met_idle(self, room: str) -> bool:
        """Whether a read of ``room`` met an idle room's pointer since it was last brought back (no I/O: the
        engine asks it on every load, and calls ``restore_idle`` only then)."""
        return room in self._idle_met

    async def restore_idle(self, room: str) -> bool:
        """The engine's step once the rules accepted a command decided against the archived ``room`` (a refused one
        leaves it archived): when the load it made met an idle room's pointer, bring the room back into Redis
        (storage.restore; exactly once, whoever races) and answer True: the caller loads again, from Redis, and
        decides again."""
        pointer = self._idle_met.pop(room, None)
        if pointer is None:
            return False
        from almanac.storage.restore import restore_room  # it builds on this module

        await restore_room(self, pointer)
        return True

    def forget_archived(self, room: str) -> None:
        """Forget a room's cached pointer (an operator removed it, e.g. restoring another history in its place)."""
        self._pointers.pop(room, None)

    async def save_nonce(self, room: str, nonce: bytes, beside_idle: bool = True) -> str:
        """The nonce kept while the room is in Redis, in one step with the check (a room moved since the caller's
        read is never written into); an archived room: see ``EventStore.save_nonce``."""
        commitment = nonce_commitment(nonce)
        keys = self.keys
        found = await self._save_nonce(keys=[keys.pointer_bucket(room), keys.first_layout_pointers(keys.shard(room)),
                                             keys.nonces(room)], args=[room, commitment, nonce, int(beside_idle)])
        if found is None:
            return commitment
        pointer = self._met(room, decode_pointer(room, found[0]))
        if not int(found[1]):
            raise RoomArchived(room, idle=pointer.reason == "idle")
        # Kept beside an idle room's archive: the move's delete step keeps it, the room's next trip back merges it,
        # and ``load_nonces`` reads it with the archived ones meanwhile.
        return commitment

    async def archived_object(self, room: str) -> RoomObject | None:
        pointer = await self.pointer(room)
        return None if pointer is None else await self.objects.get(pointer)

    # --- the reads, each falling back to the archive --------------------------------------------------

    async def snapshot_and_tail(self, room: str, at_most: int | None = None
                                ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        """The one loader's read: for a live room still one round trip (the script answers the pointer too)."""
        pointer = self._pointers.get(room)
        if pointer is None:
            keys = self.keys
            reply = await self._load_or_pointer(keys=[keys.snapshot_index(room), keys.snapshot_data(room),
                                                      keys.events(room), keys.pointer_bucket(room),
                                                      keys.first_layout_pointers(keys.shard(room))],
                                                args=["+inf" if at_most is None else at_most, 1000, room])
            if int(reply[0]) >= 0:
                return await self._parse_load(room, at_most, reply)
            pointer = self._met(room, decode_pointer(room, reply[1]))
        return None, _envelopes(await self.objects.get(pointer), 1, at_most)

    # Each read asks Redis first (a live room costs no extra round trip) and the archive when the room is known
    # archived, or when Redis has nothing and the room's pointer exists. Between the pointer and the delete step
    # Redis still holds the room as checked against its object: the same answer from either.

    async def _known(self, room: str) -> RoomObject | None:
        pointer = self._pointers.get(room)
        return None if pointer is None else await self.objects.get(pointer)

    async def latest_snapshot(self, room: str, at_most: int | None = None) -> tuple[int, bytes] | None:
        if room in self._pointers:
            return None
        return await super().latest_snapshot(room, at_most)

    async def _raw_pages(self, room: str, start: int, end: int | None):
        """(version, stored bytes or None) of versions ``start``..``end``, page by page: Redis' pages, then the
        archive's from the version after the last one Redis gave, when Redis stopped short and the room's pointer
        exists now. Short means: nothing at all, or a read of more than one page that ended before ``end``. The
        second is the archiver's delete step landing between two of this read's pages (each XRANGE is atomic,
        the delete removes every event at once): without it a long room read while it is archived would come back
        cut at a page's end. A read one page answered whole (a live room's usual read) costs no extra round trip;
        a longer one, a look-up of the pointer at its end. The object holds the room as Redis did (checked before the pointer), so
        the versions join up."""
        first = max(start, 1)
        archived = await self._known(room)
        if archived is None:
            pages, last = 0, first - 1
            async for page in self._pages(room, first, end):
                pages += 1
                if page:
                    last = page[-1][0]
                    yield page
            if (end is not None and last >= end) or (pages == 1 and last >= first):
                return
            if (archived := await self.archived_object(room)) is None:
                return
            first = last + 1
        last = len(archived.events) if end is None else min(end, len(archived.events))
        if first <= last:
            yield [(version, archived.events[version - 1]) for version in range(first, last + 1)]

    async def iterate(self, room: str, start: int = 1, end: int | None = None):
        async for page in self._raw_pages(room, start, end):
            for version, data in page:
                yield _decoded(room, version, data)

    async def page(self, room: str, start: int, count: int = 1000) -> list[Envelope]:
        # One XRANGE: atomic against the delete step, so either Redis' whole answer or, when it has nothing, the
        # archive's.
        archived = await self._known(room)
        if archived is None:
            found = await super().page(room, start, count)
            if found or (archived := await self.archived_object(room)) is None:
                return found
        return _envelopes(archived, start, start + count - 1)

    async def read_raw(self, room: str, start: int = 1, end: int | None = None) -> list[tuple[int, bytes]]:
        return [(version, data or b"") async for page in self._raw_pages(room, start, end) for version, data in page]

    async def read_ranges(self, ranges: list[tuple[str, int, int]]) -> list[list[Envelope]]:
        try:
            return await super().read_ranges(ranges)
        except CorruptEventError:  # a range of a room archived meanwhile: each from where it is now
            return [await self.read(room, first, last) for room, first, last in ranges]

    async def latest_version(self, room: str) -> int:
        pointer = self._pointers.get(room)
        if pointer is None:
            version = await super().latest_version(room)
            if version or (pointer := await self.pointer(room)) is None:
                return version
        return pointer.version

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        archived = await self._known(room)
        if archived is None:
            found = await super().commands(room)
            if found or (archived := await self.archived_object(room)) is None:
                return found
        return list(archived.commands)

    async def rejections(self, room: str) -> list[bytes]:
        archived = await self.archived_object(room)
        if archived is None:
            return await super().rejections(room)
        # Refusals recorded after the pointer stay in Redis, after the archived ones; until the move's delete
        # step has run (it removes events and the archived refusals in one script) Redis still has those too.
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.exists(self.keys.events(room))
            pipe.xrange(self.keys.rejected(room), "-", "+")
            not_deleted, entries = await pipe.execute()
        later = [fields[b"c"] for _, fields in entries]
        if not_deleted:
            later = later[len(archived.rejections):]
        return list(archived.rejections) + later

    async def outcome(self, room: str, command_id: str, call: Callable[..., Awaitable[Any]] | None = None
                      ) -> StoredOutcome | None:
        if call is not None or room in self._pointers:
            found = await super().outcome(room, command_id, call)
            return found if found is not None else await self._archived_outcome(room, command_id)
        # the command's record and the room's pointer in one round trip: the write path pays no extra one
        record = self.keys.command_outcome(room, command_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(record)
            pipe.hget(self.keys.command_ids(room), ids_field(record))  # the record expired: the room's id index
            pipe.hget(self.keys.pointer_bucket(room), room)
            pipe.hget(self.keys.first_layout_pointers(self.keys.shard(room)), room)  # archived before the buckets, not moved yet
            value, kept, pointer, first_layout = await pipe.execute()
        pointer = pointer if pointer is not None else first_layout
        if value is not None or kept is not None:
            if self.wait_replicas:  # as RedisEventStore.outcome: answered only once a replica has it
                await self.confirm_replicated(room)
            return decode_kept(room, value or kept)
        if pointer is None:
            return None
        self._met(room, decode_pointer(room, pointer))
        return await self._archived_outcome(room, command_id)

    async def outcomes_many(self, pairs: list[tuple[str, str]]) -> list[StoredOutcome | None]:
        found = await super().outcomes_many(pairs)
        return [outcome if outcome is not None else await self._archived_outcome(room, command_id)
                for outcome, (room, command_id) in zip(found, pairs, strict=True)]

    async def _archived_outcome(self, room: str, command_id: str) -> StoredOutcome | None:
        """An archived room's commands keep their answers there: a resend is never applied a second time."""
        archived = await self.archived_object(room)
        if archived is None or command_id not in archived.outcomes:
            return None
        return _OUTCOME_DECODER.decode(archived.outcomes[command_id])

    async def load_seed(self, room: str) -> bytes | None:
        archived = await self._known(room)
        if archived is None:
            found = await super().load_seed(room)
            if found is not None or (archived := await self.archived_object(room)) is None:
                return found
        return archived.seed

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        archived = await self._known(room)
        if archived is None:
            found = await super().load_nonces(room)
            if found and room not in self._idle_met:
                return found
            if (archived := await self.archived_object(room)) is None:
                return found
            # A room archived idle: a nonce the gateway kept for a join to it (before the engine decides) is in Redis
            # alone; the players' are in the archive. Both, or the join would find the others' missing.
            return {**archived.nonces, **found}
        return dict(archived.nonces)

    async def load_origin(self, room: str) -> bytes | None:
        archived = await self._known(room)
        if archived is None:
            found = await super().load_origin(room)
            if found is not None or (archived := await self.archived_object(room)) is None:
                return found
        return archived.origin

    async def load_commit_scheme(self, room: str) -> str | None:
        archived = await self._known(room)
        if archived is None:
            found = await super().load_commit_scheme(room)
            if found is not None or (archived := await self.archived_object(room)) is None:
                return found
        return archived.commit_scheme

    def keeps_refusals(self, room: str) -> bool:
        # A finished archived room (its pointer met by the load that decided the refusal, cached for ever): the
        # refusal's outcome is kept for the dedupe window only, and nothing of the room comes back into Redis.
        return room not in self._pointers

    async def archived_rooms(self) -> list[str]:
        return sorted(await archived_room_set(self.client, self.keys))

    async def rooms(self) -> list[str]:
        """Every room: the shard room sets (live rooms, and archived ones until the archive index compacts them)
        and the archived rooms' pointers (a finished archived room leaves its room set: storage.archive_index)."""
        return sorted(set(await super().rooms()) | await archived_room_set(self.client, self.keys))


async def archived_room_set(client: Any, keys: Any, shards: list[int] | None = None) -> set[str]:
    """The archived rooms of ``shards`` (all when None): the fields of their pointer buckets."""
    found: set[str] = set()
    for shard in range(keys.shard_count) if shards is None else shards:
        async with client.pipeline(transaction=False) as pipe:
            for bucket in keys.pointer_buckets(shard):
                pipe.hkeys(bucket)
            pipe.hkeys(keys.first_layout_pointers(shard))  # archived before the buckets, not moved yet
            results = await pipe.execute()
        found.update(member.decode() if isinstance(member, bytes) else member
                     for members in results for member in members)
    return found


def _envelopes(archived: RoomObject, start: int, end: int | None) -> list[Envelope]:
    last = len(archived.events) if end is None else min(end, len(archived.events))
    return [codec.decode_envelope(archived.events[version - 1], archived.room, version)
            for version in range(max(start, 1), last + 1)]


# --- the move -----------------------------------------------------------------------------------------------

STEPS = ("read", "written", "checked", "pointed", "deleted")


class ArchiveResult(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    # "archived"; "already" (another archiver, or an earlier run, recorded the pointer: this one only deleted);
    # "moved" (the room changed while it was read: nothing done, the next pass tries again); "empty"; "crashed"
    # (tests' crash_after)
    status: str
    version: int = 0
    size: int = 0
    commands: int = 0
    path: str = ""


async def read_room_object(store: RedisEventStore, room: str) -> tuple[RoomObject, int]:
    """The room's whole record as Redis holds it, and the number of refusal records read."""
    raw = await RedisEventStore.read_raw(store, room)
    for expected, (version, data) in enumerate(raw, start=1):
        if version != expected or not data:
            raise CorruptEventError(room, expected, "the room stream lacks a version; not archived")
    envelopes = [codec.decode_envelope(data, room, version) for version, data in raw]
    commands = await RedisEventStore.commands(store, room)
    rejections = await RedisEventStore.rejections(store, room)
    command_ids = [decode_record(record).command_id for _, record in commands]
    command_ids += [decode_record(record).command_id for record in rejections]
    outcomes: dict[str, bytes] = {}
    if command_ids:
        async with store.client.pipeline(transaction=False) as pipe:
            for command_id in command_ids:
                record = store.keys.command_outcome(room, command_id)
                pipe.get(record)
                pipe.hget(store.keys.command_ids(room), ids_field(record))
            values = await pipe.execute()
        # an outcome whose record expired is kept by the room's id index: the object holds it as a record again
        outcomes = {command_id: values[2 * i] or codec.encode(decode_kept(room, values[2 * i + 1]))
                    for i, command_id in enumerate(command_ids) if values[2 * i] or values[2 * i + 1]}
    room_object = RoomObject(
        format=FORMAT, room=room, version=len(raw), last_hash=envelopes[-1].hash if envelopes else "",
        events=[data for _, data in raw], commands=commands, rejections=rejections, outcomes=outcomes,
        seed=await RedisEventStore.load_seed(store, room), nonces=await RedisEventStore.load_nonces(store, room),
        origin=await RedisEventStore.load_origin(store, room),
        commit_scheme=await RedisEventStore.load_commit_scheme(store, room))
    return room_object, len(rejections)


def check_object(found: RoomObject, expected: RoomObject) -> None:
    """The object read back must be the room as Redis holds it: count, bytes and hash of every envelope."""
    if found.room != expected.room or found.version != expected.version or len(found.events) != len(expected.events):
        raise ArchiveError(f"room {expected.room!r}: the archived object holds {len(found.events)} envelopes, "
                           f"Redis {len(expected.events)}")
    for version, (mine, theirs) in enumerate(zip(found.events, expected.events, strict=True), start=1):
        if mine != theirs or codec.decode_envelope(mine, found.room, version).hash != \
                codec.decode_envelope(theirs, found.room, version).hash:
            raise ArchiveError(f"room {expected.room!r}: version {version} differs between the archive and Redis")
    if found != expected:
        raise ArchiveError(f"room {expected.room!r}: the archived records differ from Redis'")


async def archive_room(store: ArchivingStore, room: str, reason: str = "finished",
                       crash_after: str | None = None) -> ArchiveResult:
    """Move one room to the archive (the module's docstring gives the order). ``crash_after`` (tests only) names
    a step of STEPS after which the move stops dead, as a kill -9 there would."""
    keys = store.keys
    existing = await store.pointer(room)
    if existing is None:
        room_object, refusals = await read_room_object(store, room)
        if room_object.version == 0:
            return ArchiveResult(room=room, status="empty")
        if crash_after == "read":
            return ArchiveResult(room=room, status="crashed")
        data = encode_object(room_object)
        digest = hashlib.sha256(data).hexdigest()
        path = object_path(room, digest)
        await store.archive.put_new(path, data)
        if crash_after == "written":
            return ArchiveResult(room=room, status="crashed")
        read_back = await store.archive.get(path)
        if hashlib.sha256(read_back).hexdigest() != digest:
            raise ArchiveError(f"room {room!r}: the object read back from {path} is not the one written")
        check_object(decode_object(read_back), room_object)
        if crash_after == "checked":
            return ArchiveResult(room=room, status="crashed")
        pointer = Pointer(room=room, digest=bytes.fromhex(digest), version=room_object.version,
                          rejections=refusals, size=len(data), archived_at_ms=int(time.time()) * 1000, reason=reason)
        record = store._record_idle_pointer if reason == "idle" else store._record_pointer
        recorded = await record(keys=[keys.pointer_bucket(room), keys.version(room), keys.rejected(room)],
                                args=[encode_pointer(pointer), room_object.version, refusals, room])
        recorded = recorded.decode() if isinstance(recorded, bytes) else recorded
        if recorded == "moved":
            return ArchiveResult(room=room, status="moved")
        status = "archived" if recorded == "ok" else "already"
        if crash_after == "pointed":
            return ArchiveResult(room=room, status="crashed")
        store._pointers.pop(room, None)
        existing = await store.pointer(room)
        assert existing is not None
        size, commands = len(data), len(room_object.commands) + refusals
    else:
        status, size, commands = "already", existing.size, 0
    pointer_value = encode_pointer(existing)
    await remove_superseded(store, existing)
    archived = await store.objects.get(existing)
    dedupe = [keys.command_ids(room), *(keys.command_outcome(room, command_id) for command_id in archived.outcomes)]
    await store._delete_room(keys=[keys.pointer_bucket(room), keys.events(room), keys.commands(room),
                                   keys.rejected(room), keys.snapshot_index(room), keys.snapshot_data(room),
                                   keys.seed(room), keys.nonces(room), keys.origin(room),
                                   keys.ended_rooms(keys.shard(room)), keys.summaries(keys.shard(room)),
                                   keys.version(room), keys.commit_scheme(room), *dedupe],
                             args=[pointer_value, existing.rejections, room, existing.reason, *archived.nonces])
    return ArchiveResult(room=room, status=status, version=existing.version, size=size, commands=commands,
                         path=existing.path)


async def remove_superseded(store: ArchivingStore, pointer: Pointer) -> int:
    """Remove the objects of ``pointer``'s room that an earlier trip back left behind (storage.restore), now that
    ``pointer`` (recorded: the commit point) names the room's whole history; the number removed. Never the object
    the pointer names (a room brought back and moved again unchanged writes the same object). Run on every move
    before the delete step, so a move cut short after its commit point removes them on its next pass."""
    keys = store.keys
    key = keys.superseded(keys.shard(pointer.room))
    held = await store.client.hget(key, pointer.room)
    if not held:
        return 0
    removed = 0
    current = encode_pointer(pointer)
    for digest in {held[i:i + 32] for i in range(0, len(held), 32)} - {pointer.digest}:
        # Only while ``pointer`` is still the room's: a mover stalled past the room's next trip back and move
        # (unchanged, the same object) would otherwise remove the object the newer pointer names. That move
        # removes what is left behind itself.
        now = await store.client.hget(keys.pointer_bucket(pointer.room), pointer.room)
        if now != current:
            return removed
        await store.archive.delete(object_path(pointer.room, digest.hex()))
        removed += 1
    await store._forget_superseded(keys=[key], args=[pointer.room, held])
    return removed
