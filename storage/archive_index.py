"""The archive's index of finished rooms: what Redis keeps of them for listings and leaderboards, compacted.

After a pass of the archiver, the finished rooms it moved out leave two more things in Redis that grow with every
finished room, and both are cut here, per shard, in ONE script (one hash tag: it runs on a Redis Cluster too):

- **listing rows**: a pass's rows leave the shard's listing hash for one block (``Keys.archived_listings``: block id
  -> zstd msgpack {room: row}); rows of similar rooms compress to a few dozen bytes each. ``listing_rows`` reads
  both tiers, Redis' row first (a rebuild may have written one again: it is the same row, folded again);
- **room sets**: a finished archived room leaves its shard's room set (its pointer says it is a room;
  ``ArchivingStore.rooms`` and a full rebuild read both);
- **projected versions**: a finished archived room's is its pointer's (``ReadModels.projected_version`` and a
  rebuild of some models read it there);
- **leaderboard entries**: a finished room's scores are final, and a leaderboard shows a player's best entry only,
  so of a player's finished archived rooms only the best entry stays (``Keys.leaderboard_best`` remembers which,
  per player); the others never show and leave. An unranked room's entries never show either and leave.

- **rule-set read-model rows** (``Keys.model_rows`` rows and ``Keys.model_ledger`` ledgers, e.g. claim's claims and
  realm's trades): a pass's rows of each model leave for one block, an object of the archive store written and read
  back first, Redis keeping only its digest (``Keys.archived_model_rows``, ``BLOCK_REF``); a listing of the model
  across rooms (``model_rows``) reads both tiers, Redis' rows first; one archived room's rows are folded from its
  archive object when asked for (``projections.read_model_queries``), as its summary is.

Only rooms still archived and archived because they finished are compacted (an idle room comes back and plays on:
its rows stay as they are). A crash before the script leaves the rows in Redis (answers unchanged, only bytes);
the script is all or nothing.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import msgspec
import zstandard

from almanac.events import registry
from almanac.storage.archive import ArchiveError, decode_pointer
from almanac.storage.keys import Keys

ZSTD_LEVEL = 19
_BLOCK = msgspec.msgpack.Decoder(dict[str, bytes])
# A read model's block: room -> [(version, row as the projector encoded it)]; a per-room model's row at version 0.
_MODEL_BLOCK = msgspec.msgpack.Decoder(dict[str, list[tuple[int, bytes]]])
_ENCODER = msgspec.msgpack.Encoder()

# KEYS: 1 the shard's room set, 2 listing hash, 3 archived listing blocks, 4 unranked set, 5 projected versions,
# 6.. pointer buckets, leaderboards and their best hashes (named by index from ARGV). ARGV: 1 block id, 2 block,
# 3 room count, then per room: room, its listing row as the block holds it, pointer bucket index, board key index,
# best key index, player count, then (player, member) per player. Returns the number of rooms compacted.
COMPACT_SCRIPT = """
local rooms, a, done = tonumber(ARGV[3]), 4, 0
for _ = 1, rooms do
  local room, row, bucket, board, best, players = ARGV[a], ARGV[a + 1], KEYS[tonumber(ARGV[a + 2])],
    KEYS[tonumber(ARGV[a + 3])], KEYS[tonumber(ARGV[a + 4])], tonumber(ARGV[a + 5])
  a = a + 6
  local pointer = redis.call('HGET', bucket, room)
  if pointer then
    done = done + 1
    redis.call('HDEL', KEYS[5], room)
    redis.call('SREM', KEYS[1], room)
    if redis.call('HGET', KEYS[2], room) == row then redis.call('HDEL', KEYS[2], room) end
    local unranked = redis.call('SISMEMBER', KEYS[4], room) == 1
    for _ = 1, players do
      local player, member = ARGV[a], ARGV[a + 1]
      local score = redis.call('ZSCORE', board, member)
      if score and unranked then
        redis.call('ZREM', board, member)
      elseif score then
        local held = redis.call('HGET', best, player)
        local held_score = held and held ~= member and redis.call('ZSCORE', board, held)
        if held == member then
        elseif not held_score then
          redis.call('HSET', best, player, member)
        elseif tonumber(score) > tonumber(held_score) or
            (tonumber(score) == tonumber(held_score) and room < cjson.decode(held)[2]) then
          redis.call('ZREM', board, held)
          redis.call('HSET', best, player, member)
        else
          redis.call('ZREM', board, member)
        end
      end
      a = a + 2
    end
  else
    a = a + 2 * players
  end
end
if done > 0 and ARGV[1] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[2]) end
return done
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def compact(store: Any, rooms: list[str]) -> int:
    """Compact the listing rows and leaderboard entries of ``rooms`` (just archived because they finished), one
    script per shard; the number of rooms compacted."""
    keys: Keys = store.keys
    by_shard: dict[int, list[str]] = {}
    for room in rooms:
        pointer = await store.pointer(room)
        if pointer is not None and pointer.reason == "finished":
            by_shard.setdefault(keys.shard(room), []).append(room)
    script = getattr(store, "_compact_index", None)
    if script is None:
        script = store._compact_index = store.client.register_script(COMPACT_SCRIPT)
    done = 0
    for shard, members in sorted(by_shard.items()):
        rows = await store.client.hmget(keys.listings(shard), members)
        found = {room: row for room, row in zip(members, rows, strict=True) if row is not None}
        # Rooms whose row is in a block already (a rebuild of the leaderboards alone put their entries back): the
        # block's row names their players; it stays where it is.
        indexed = {}
        if len(found) < len(members):
            indexed = {room: row for room, row in (await _blocks(store.client, [keys.archived_listings(shard)])).items()
                       if room in members and room not in found}
        if not found and not indexed:
            continue
        block = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(_ENCODER.encode(dict(sorted(found.items()))))
        script_keys = [keys.rooms(shard), keys.listings(shard), keys.archived_listings(shard), keys.unranked(shard),
                       keys.versions(shard)]
        args: list[Any] = [hashlib.sha256(block).hexdigest()[:32] if found else "", block, len(found) + len(indexed)]
        for room, row in [*found.items(), *indexed.items()]:
            listing = msgspec.json.decode(row)
            row = row if room in found else b""
            board, best = keys.leaderboard(shard, listing["ruleset"]), keys.leaderboard_best(shard, listing["ruleset"])
            bucket = keys.pointer_bucket(room)
            for key in (bucket, board, best):
                if key not in script_keys:
                    script_keys.append(key)
            players = listing.get("players") or []
            args += [room, row, script_keys.index(bucket) + 1, script_keys.index(board) + 1,
                     script_keys.index(best) + 1, len(players)]
            for player in players:  # the member as projections.model_writes.leaderboard_member writes it
                args += [player, msgspec.json.encode([player, room])]
        done += int(await script(keys=script_keys, args=args))
    for shard, members in sorted(by_shard.items()):
        _, complete = await _compact_models(store, shard, members)
        if complete:
            # Last: the rooms leave the archiver's work list only now that nothing of theirs is left to compact, so a
            # pass cut short anywhere before (after the move's delete step included) is finished by the next pass
            # (the move answers "already", this runs again) rather than leaving rows in Redis until a rebuild.
            await store.client.zrem(keys.ended_rooms(shard), *members)
    return done


# KEYS: 1 the model's archived blocks, 2 its row hash (a per-room model) or its set of rooms with a ledger, 3.. the
# rooms' pointer buckets and ledgers (named by index from ARGV). ARGV: 1 block id, 2 block, 3 "ledger" or "row",
# 4 room count, then per room: room, pointer bucket index, the row as the block holds it (a ledger: its row count),
# a ledger's key index. All or nothing: every room still archived and its rows in Redis still those of the block,
# or nothing is written (-1: the caller reads again); then the block is written and the rows leave in one step.
COMPACT_MODEL_SCRIPT = """
local ledger, rooms = ARGV[3] == 'ledger', tonumber(ARGV[4])
local step = ledger and 4 or 3
for i = 0, rooms - 1 do
  local a = 5 + i * step
  local room, bucket, held = ARGV[a], KEYS[tonumber(ARGV[a + 1])], ARGV[a + 2]
  if not redis.call('HGET', bucket, room) then return -1 end
  if ledger then
    if redis.call('ZCARD', KEYS[tonumber(ARGV[a + 3])]) ~= tonumber(held) then return -1 end
  elseif redis.call('HGET', KEYS[2], room) ~= held then
    return -1
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
for i = 0, rooms - 1 do
  local a = 5 + i * step
  if ledger then
    redis.call('DEL', KEYS[tonumber(ARGV[a + 3])])
    redis.call('SREM', KEYS[2], ARGV[a])
  else
    redis.call('HDEL', KEYS[2], ARGV[a])
  end
end
return rooms
"""
_MODEL_ATTEMPTS = 3

# A model block stored in the archive store: Redis' block hash holds this prefix and the block's SHA-256 (71 B) in
# place of the block, never a zstd frame (those open with 28 b5 2f fd), so blocks written inline before are read too.
BLOCK_REF = b"object:"
# Model blocks fetched from the archive store, kept per process (a block never changes: its name is its hash), so a
# listing across rooms fetches each once; least recently used leave first past this many bytes.
MAX_CACHED_OBJECT_BYTES = 32 * 1024 * 1024
_OBJECT_BLOCKS: OrderedDict[str, bytes] = OrderedDict()
_cached = [0]  # the bytes in _OBJECT_BLOCKS


def block_path(model: str, digest: str) -> str:
    """Content-addressed, as rooms' objects are: ``blocks/<model>/<sha256>.zst`` (two deployments sharing an archive
    write the same bytes at the same name)."""
    return f"blocks/{model}/{digest}.zst"


async def _put_block(archive: Any, model: str, block: bytes) -> bytes:
    """Write a model block into the archive store and read it back (it must hold the same bytes) before Redis may
    point at it: the reference Redis keeps instead of the block."""
    digest = hashlib.sha256(block).hexdigest()
    path = block_path(model, digest)
    await archive.put_new(path, block)  # False: written before (same name, same bytes), checked below all the same
    if hashlib.sha256(await archive.get(path)).hexdigest() != digest:
        raise ArchiveError(f"the block {path} read back does not have the digest it was written with")
    return BLOCK_REF + digest.encode()


async def _get_block(archive: Any, model: str, value: bytes) -> bytes:
    """A block as Redis' hash holds it (inline) or from the archive store (a ``BLOCK_REF``), checked."""
    if not value.startswith(BLOCK_REF):
        return value
    digest = value[len(BLOCK_REF):].decode()
    found = _OBJECT_BLOCKS.get(digest)
    if found is not None:
        _OBJECT_BLOCKS.move_to_end(digest)
        return found
    if archive is None:
        raise ArchiveError(f"the {model} block {digest} is in the archive store, and this reader has none")
    path = block_path(model, digest)
    data = await archive.get(path)
    if hashlib.sha256(data).hexdigest() != digest:
        raise ArchiveError(f"the block {path} does not have the digest its index recorded")
    _OBJECT_BLOCKS[digest] = data
    _cached[0] += len(data)
    while _cached[0] > MAX_CACHED_OBJECT_BYTES and len(_OBJECT_BLOCKS) > 1:
        _cached[0] -= len(_OBJECT_BLOCKS.popitem(last=False)[1])
    return data


async def compact_models(store: Any, shard: int, rooms: list[str]) -> int:
    """Move the rule-set read-model rows of ``rooms`` (finished, archived, of one shard) into one block per model, one
    script per model; the number of (room, model) rows moved. Rows a rebuild changes meanwhile stay in Redis (the
    script refuses, the rows are read again, at most a few times): Redis' rows are read first, so they still answer."""
    return (await _compact_models(store, shard, rooms))[0]


async def _compact_models(store: Any, shard: int, rooms: list[str]) -> tuple[int, bool]:
    """``compact_models``, and whether every model's rows of ``rooms`` left Redis (False: a model's script refused
    every attempt; the rooms stay on the archiver's work list and its next pass tries again)."""
    keys: Keys = store.keys
    complete = True
    client = store.client
    script = getattr(store, "_compact_models", None)
    if script is None:
        script = store._compact_models = client.register_script(COMPACT_MODEL_SCRIPT)
    moved = 0
    for name, (_, model) in sorted(registry.read_models().items()):
        ledger = model.room_row is None
        for _ in range(_MODEL_ATTEMPTS):
            found = await _model_rows_in_redis(client, keys, shard, name, ledger, rooms)
            if not found:
                break
            block = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(_ENCODER.encode(dict(sorted(found.items()))))
            # With an archive store the block is an object there, written and read back before the script points
            # at it and takes the rows out of Redis (a crash between leaves an unnamed object, the rows in Redis)
            archive = getattr(store, "archive", None)
            stored = block if archive is None else await _put_block(archive, name, block)
            script_keys = [keys.archived_model_rows(shard, name),
                           keys.model_ledger_rooms(shard, name) if ledger else keys.model_rows(shard, name)]
            args: list[Any] = [hashlib.sha256(block).hexdigest()[:32], stored, "ledger" if ledger else "row",
                               len(found)]
            for room, rows in sorted(found.items()):
                bucket = keys.pointer_bucket(room)
                if bucket not in script_keys:
                    script_keys.append(bucket)
                args += [room, script_keys.index(bucket) + 1]
                if ledger:
                    script_keys.append(keys.model_ledger(shard, name, room))
                    args += [len(rows), len(script_keys)]
                else:
                    args.append(rows[0][1])
            done = int(await script(keys=script_keys, args=args))
            if done >= 0:
                moved += done
                break
        else:
            complete = False
    return moved, complete


async def _model_rows_in_redis(client: Any, keys: Keys, shard: int, model: str, ledger: bool,
                               rooms: list[str]) -> dict[str, list[tuple[int, bytes]]]:
    """room -> [(version, row)] of the rooms that have rows of ``model`` in Redis (a ledger's in its zset's order)."""
    if not ledger:
        rows = await client.hmget(keys.model_rows(shard, model), rooms)
        return {room: [(0, row)] for room, row in zip(rooms, rows, strict=True) if row is not None}
    async with client.pipeline(transaction=False) as pipe:
        for room in rooms:
            pipe.zrange(keys.model_ledger(shard, model, room), 0, -1, withscores=True)
        replies = await pipe.execute()
    return {room: [(int(score), member) for member, score in reply]
            for room, reply in zip(rooms, replies, strict=True) if reply}


async def model_rows(client: Any, keys: Keys, shard_count: int, model: str, ledger: bool,
                     archive: Any = None) -> dict[str, list[tuple[int, bytes]]]:
    """room -> [(version, row)] of every room's rows of a rule-set read model: Redis' rows, then the archived blocks'
    rows of rooms Redis has none of (read after Redis': a room compacted between the two reads is in the blocks;
    a block in the archive store is fetched from ``archive``)."""
    found: dict[str, list[tuple[int, bytes]]] = {}
    if ledger:
        async with client.pipeline(transaction=False) as pipe:
            for shard in range(shard_count):
                pipe.smembers(keys.model_ledger_rooms(shard, model))
            members = await pipe.execute()
        rooms = sorted((shard, _text(room)) for shard, found_rooms in enumerate(members) for room in found_rooms)
        async with client.pipeline(transaction=False) as pipe:
            for shard, room in rooms:
                pipe.zrange(keys.model_ledger(shard, model, room), 0, -1, withscores=True)
            replies = await pipe.execute()
        for (_, room), reply in zip(rooms, replies, strict=True):
            if reply:
                found[room] = [(int(score), member) for member, score in reply]
    else:
        async with client.pipeline(transaction=False) as pipe:
            for shard in range(shard_count):
                pipe.hgetall(keys.model_rows(shard, model))
            replies = await pipe.execute()
        for live in replies:
            found.update((_text(room), [(0, row)]) for room, row in live.items())
    async with client.pipeline(transaction=False) as pipe:
        for shard in range(shard_count):
            pipe.hvals(keys.archived_model_rows(shard, model))
        blocks = await pipe.execute()
    decompressor = zstandard.ZstdDecompressor()
    for shard_blocks in blocks:
        for value in shard_blocks:
            block = await _get_block(archive, model, value)
            for room, rows in _MODEL_BLOCK.decode(decompressor.decompress(block)).items():
                found.setdefault(room, rows)
    return found


async def listing_rows(client: Any, keys: Keys, shard_count: int) -> list[bytes]:
    """Every room's listing row: Redis' rows, then the archived blocks' rows of rooms Redis has no row for."""
    async with client.pipeline(transaction=False) as pipe:
        for shard in range(shard_count):
            pipe.hgetall(keys.listings(shard))
        replies = await pipe.execute()
    found: dict[str, bytes] = {}
    for live in replies:
        found.update((_text(room), row) for room, row in live.items())
    for room, row in (await _blocks(client, [keys.archived_listings(shard) for shard in range(shard_count)])).items():
        found.setdefault(room, row)
    return list(found.values())


# Decoded blocks kept per process: a block never changes once written (its id is the hash of its bytes), so a
# listing polled every 2 s decodes each block once. Bounded by the rows' bytes, counted as room + row + _ENTRY_COST
# of Python overhead per row: 64 MiB holds ~250k rows of a few hundred bytes; least recently used leave first.
MAX_CACHED_BYTES = 64 * 1024 * 1024
_ENTRY_COST = 120


class BlockCache:
    """block id -> its rows as ((room, listing row), ...) sorted by room, least recently used first out."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.decoded = 0  # blocks decoded (a miss), for tests and measurements
        self._blocks: OrderedDict[str, tuple[tuple[str, bytes], ...]] = OrderedDict()

    def get(self, block_id: str) -> tuple[tuple[str, bytes], ...] | None:
        rows = self._blocks.get(block_id)
        if rows is not None:
            self._blocks.move_to_end(block_id)
        return rows

    def decode(self, block_id: str, block: bytes) -> tuple[tuple[str, bytes], ...]:
        """The block's rows, decoded now and kept (unless the block alone is larger than the whole cache)."""
        rows = tuple(sorted(_BLOCK.decode(zstandard.ZstdDecompressor().decompress(block)).items()))
        self.decoded += 1
        size = sum(len(room) + len(row) + _ENTRY_COST for room, row in rows)
        if size <= self.max_bytes and block_id not in self._blocks:
            self._blocks[block_id] = rows
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, dropped = self._blocks.popitem(last=False)
                self.bytes -= sum(len(room) + len(row) + _ENTRY_COST for room, row in dropped)
        return rows

    def clear(self) -> None:
        self._blocks.clear()
        self.bytes = 0
        self.decoded = 0


CACHE = BlockCache()


async def _block_rows(client: Any, key: str, block_ids: list[str]) -> list[tuple[tuple[str, bytes], ...]]:
    """The rows of these blocks of ``key`` (one keys.archived_listings), decoded ones from the cache; a block id
    no longer there (never, blocks are not removed; a flushed store) has no rows."""
    found = {block_id: rows for block_id in block_ids if (rows := CACHE.get(block_id)) is not None}
    missing = [block_id for block_id in block_ids if block_id not in found]
    if missing:
        for block_id, block in zip(missing, await client.hmget(key, missing), strict=True):
            if block is not None:
                found[block_id] = CACHE.decode(block_id, block)
    return [found.get(block_id, ()) for block_id in block_ids]


async def block_ids(client: Any, key: str) -> list[str]:
    """The block ids of one keys.archived_listings hash, sorted: the archived tier's stable order (a new block's
    rooms were listed in Redis' rows before, so where it sorts does not matter to a listing being paged)."""
    return sorted(_text(block_id) for block_id in await client.hkeys(key))


async def _blocks(client: Any, hashes: list[str]) -> dict[str, bytes]:
    """room -> listing row of every block in ``hashes`` (keys.archived_listings of some shards)."""
    found: dict[str, bytes] = {}
    for key in hashes:
        ids = await block_ids(client, key)
        for rows in await _block_rows(client, key, ids):
            found.update(rows)
    return found


async def archived_page(client: Any, keys: Keys, after: tuple[int, str, str] | None, budget: int,
                        ) -> tuple[list[tuple[tuple[int, str, str], bytes]], bool]:
    """Archived rows in the archived tier's order (shard, block id, room) strictly after ``after``, at most
    ``budget`` of them, each with its position; and whether the tier ends there. Reads only the block ids and the
    blocks it returns rows of (cached), so its cost does not grow with the rooms archived before ``after``."""
    found: list[tuple[tuple[int, str, str], bytes]] = []
    first_shard = after[0] if after is not None else 0
    for shard in range(first_shard, keys.shard_count):
        key = keys.archived_listings(shard)
        ids = await block_ids(client, key)
        if after is not None and shard == after[0]:
            ids = [block_id for block_id in ids if block_id >= after[1]]
        index = 0
        while index < len(ids):
            wanted = ids[index:index + 8]  # a few blocks a round trip: a page rarely needs more than one
            index += len(wanted)
            for block_id, rows in zip(wanted, await _block_rows(client, key, wanted), strict=True):
                for room, row in rows:
                    position = (shard, block_id, room)
                    if after is not None and position <= after:
                        continue
                    if len(found) == budget:
                        return found, False
                    found.append((position, row))
    return found, True


async def archived_versions(client: Any, keys: Keys, shard: int) -> dict[str, int]:
    """room -> version of the shard's archived rooms, from their pointers."""
    async with client.pipeline(transaction=False) as pipe:
        for bucket in keys.pointer_buckets(shard):
            pipe.hgetall(bucket)
        replies = await pipe.execute()
    return {_text(room): decode_pointer(_text(room), value).version
            for pointers in replies for room, value in pointers.items()}


# KEYS: 1 a shard's pointer hash of the first layout (one hash per shard), 2.. the rooms' pointer buckets (same hash
# tag). ARGV: the rooms. Each pointer moves to its bucket unless one is there already; the number moved.
MIGRATE_POINTERS_SCRIPT = """
local moved = 0
for i, room in ipairs(ARGV) do
  local pointer = redis.call('HGET', KEYS[1], room)
  if pointer then
    moved = moved + redis.call('HSETNX', KEYS[i + 1], room, pointer)
    redis.call('HDEL', KEYS[1], room)
  end
end
return moved
"""


async def migrate_pointers(client: Any, keys: Keys) -> int:
    """Move pointers of the first layout into their buckets (run by the archiver before its first pass; each move is
    one script per batch, so a crash leaves every pointer in one of the two places and a rerun finishes). Until it
    has run, rooms archived by a version before the buckets read as not archived. The number moved."""
    script = client.register_script(MIGRATE_POINTERS_SCRIPT)
    moved = 0
    for shard in range(keys.shard_count):
        old = keys.first_layout_pointers(shard)
        while await client.hlen(old):  # (pointers an archiver of the first layout wrote meanwhile: again)
            cursor = 0
            while True:  # the cursor followed to its end: a page may come back empty before it (HSCAN's contract)
                cursor, found = await client.hscan(old, cursor, count=200)
                if found:
                    rooms = [_text(room) for room in found]
                    moved += int(await script(keys=[old, *(keys.pointer_bucket(room) for room in rooms)],
                                              args=rooms))
                if not cursor:
                    break
    return moved

