"""The read-model store: how a room update becomes Redis writes, applied with the shard's checkpoint by one script.

``queue_update`` records a room's writes on a ``ShardWrites``; ``commit_shard`` sends them with the
checkpoint compare-and-set as ONE Lua script. Every key of a shard's models carries the shard's hash
tag, so the script is single-slot: atomic on one server and on a Redis Cluster alike (redis-py's
asyncio cluster client has no MULTI/EXEC, and WATCH cannot follow a key across a cluster client).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

import msgspec

from almanac.events import registry
from almanac.projections.read_model_rows import RoomUpdate
from almanac.storage.keys import Keys


def _fallback(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Fraction):
        return str(value)
    return repr(value)


def encode_json(value: Any) -> bytes:
    """Canonical JSON (sorted keys), so a live row and a rebuilt row are byte-for-byte equal."""
    return msgspec.json.encode(msgspec.to_builtins(value, str_keys=True, enc_hook=_fallback), order="sorted")


def decode_json(data: bytes | str) -> Any:
    return msgspec.json.decode(data)


def text(value: bytes | str) -> str:
    """A Redis reply as text, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else value


def leaderboard_member(player: str, room: str) -> bytes:
    # One entry per (player, room): a player's best is the highest of their rooms, and a room's score may fall.
    return encode_json([player, room])


def queue_update(pipe: Any, keys: Keys, shard: int, update: RoomUpdate,
                 models: Iterable[str] | None = None, *, follows_rows: bool = False) -> None:
    """Queue one room's writes for the named models (all when None) on ``pipe`` (a ShardWrites, or any
    object with redis-py's hset/sadd/zadd/zrem methods).

    ``follows_rows``: the shard's rows hold the room at exactly the state the update starts from (the projector
    read its version there): their writes put its rule-set in the leaderboard index and its scores on the board,
    so neither is written again when unchanged (a SADD and a ZADD per room and batch the live projector spent
    Redis time on for nothing)."""
    every = models is None
    models = set(models or ())
    room = update.room
    if every or "rooms" in models:
        pipe.hset(keys.versions(shard), room, update.version)
        pipe.hset(keys.summaries(shard), room, encode_json(update.summary))
        pipe.hset(keys.listings(shard), room, encode_json(update.listing))
        if update.summary.get("ended"):
            # the archiver's work list (services.archiver): ended rooms, by when their last event was projected
            pipe.zadd(keys.ended_rooms(shard), {room: update.summary.get("updated_at_ms", 0)})
    if every or "leaderboards" in models:
        board = keys.leaderboard(shard, update.ruleset)
        if not follows_rows:
            pipe.sadd(keys.leaderboard_rulesets(shard), update.ruleset)
        if update.scores and not (follows_rows and update.scores_unchanged):
            pipe.zadd(board, {leaderboard_member(p, room): s for p, s in update.scores.items()})
        if update.dropped_players:
            pipe.zrem(board, *(leaderboard_member(p, room) for p in update.dropped_players))
    for name, row in update.rows.items():
        if every or name in models:
            pipe.hset(keys.model_rows(shard, name), room, encode_json(row))
    for name, rows in update.ledgers.items():
        if every or name in models:
            pipe.sadd(keys.model_ledger_rooms(shard, name), room)
            pipe.zadd(keys.model_ledger(shard, name, room), {encode_json(row): version for version, row in rows})


async def model_keys_of_shard(client: Any, keys: Keys, shard: int, models: Iterable[str]) -> list[str]:
    """Every key the named models hold in a shard (leaderboards and ledgers are found through their index sets)."""
    models = set(models)
    found: list[str] = []
    if "rooms" in models:
        found += [keys.versions(shard), keys.summaries(shard), keys.listings(shard), keys.ended_rooms(shard)]
        # archived rooms' listing rows (storage.archive_index): the rebuild writes every room's row again (a changed
        # listing must not be shadowed by an old block); the archiver compacts the archived ones again
        found.append(keys.archived_listings(shard))
    if "leaderboards" in models:
        rulesets = await client.smembers(keys.leaderboard_rulesets(shard))
        found += [keys.leaderboard(shard, text(r)) for r in rulesets] + [keys.leaderboard_rulesets(shard)]
        # which archived entry is each player's best (storage.archive_index): rebuilt with the boards
        found += [keys.leaderboard_best(shard, text(r)) for r in rulesets]
    for name, (_, model) in sorted(registry.read_models().items()):
        if name not in models:
            continue
        found.append(keys.archived_model_rows(shard, name))  # archived rooms' rows: written again, as above
        if model.room_row is not None:
            found.append(keys.model_rows(shard, name))
        else:
            rooms = await client.smembers(keys.model_ledger_rooms(shard, name))
            found += [keys.model_ledger(shard, name, text(r)) for r in rooms] + [keys.model_ledger_rooms(shard, name)]
    return found


# --- one shard's writes as one script -------------------------------------------------------------

# The checkpoint compare-and-set and the writes, atomically (one slot: every key has the shard's tag).
# KEYS: 1 checkpoint, 2.. the keys the writes touch
# ARGV: 1 "1" to check the checkpoint, 2 the value it must hold (absent reads as 0-0),
#       3 "set" / "del" / "keep" the checkpoint, 4 its new value,
#       5 the writes' heads, 6 bytes each: command (1 byte, _COMMANDS), key index into KEYS (3 bytes, big-endian),
#         argument count (2 bytes, big-endian); 6.. every write's arguments, in order
# Returns {1, ""} when applied, {0, <current checkpoint>} when the checkpoint had moved (nothing written).
# The heads are one string of bytes rather than three arguments per write: each argument becomes a Lua string (its
# every byte hashed) and each count and index a tonumber(); on bench e2e's calls that was ~a quarter of the script.
COMMIT_SCRIPT = """
if ARGV[1] == '1' then
  local current = redis.call('GET', KEYS[1]) or '0-0'
  if current ~= ARGV[2] then return {0, current} end
end
local commands = {'HSET', 'SADD', 'ZADD', 'ZREM', 'DEL'}
local heads, byte = ARGV[5], string.byte
local i = 6
for p = 1, #heads, 6 do
  local command, k1, k2, k3, n1, n2 = byte(heads, p, p + 5)
  local count = n1 * 256 + n2
  redis.call(commands[command], KEYS[(k1 * 256 + k2) * 256 + k3], unpack(ARGV, i, i + count - 1))
  i = i + count
end
if ARGV[3] == 'set' then
  redis.call('SET', KEYS[1], ARGV[4])
elseif ARGV[3] == 'del' then
  redis.call('DEL', KEYS[1])
end
return {1, ''}
"""
# The command of each write head (its byte: the position in COMMIT_SCRIPT's table, from 1).
_COMMANDS = {"HSET": 1, "SADD": 2, "ZADD": 3, "ZREM": 4, "DEL": 5}
# The most keys one commit can name (a head's key index has 3 bytes).
_MAX_KEYS = 1 << 24

NO_CHECKPOINT = "0-0"
# Arguments per write: Lua's unpack() stops at a few thousand values, so long writes are split.
_CHUNK = 512


def commit_heads(args: list[Any]) -> list[tuple[str, int, int]]:
    """COMMIT_SCRIPT's write heads in its ARGV (``ShardWrites.script_call``): (command, key index, argument count)."""
    heads, names = args[4], {code: name for name, code in _COMMANDS.items()}
    return [(names[heads[p]], int.from_bytes(heads[p + 1:p + 4], "big"), int.from_bytes(heads[p + 4:p + 6], "big"))
            for p in range(0, len(heads), 6)]


class CheckpointConflict(Exception):
    """The shard's checkpoint no longer held the expected value: nothing was written."""

    def __init__(self, current: str) -> None:
        super().__init__(current)
        self.current = current


class ShardWrites:
    """One shard's read-model writes, recorded in order, to be sent as COMMIT_SCRIPT's arguments.

    It has the redis-py method names ``queue_update`` uses (hset, sadd, zadd, zrem, delete), so the
    same code describes the writes whatever applies them.
    """

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}
        self._heads = bytearray()
        self._args: list[Any] = []

    def __len__(self) -> int:
        return len(self._args)

    def _key(self, key: str) -> int:
        # KEYS[1] is the checkpoint; the writes' keys follow from KEYS[2].
        index = self._keys.setdefault(key, len(self._keys) + 2)
        if index >= _MAX_KEYS:
            raise ValueError(f"one commit names at most {_MAX_KEYS - 1} keys")
        return index

    def _head(self, command: str, key: str, count: int) -> None:
        index = self._key(key)
        self._heads += bytes((_COMMANDS[command], index >> 16, (index >> 8) & 255, index & 255, count >> 8, count & 255))

    def _write(self, command: str, key: str, values: list[Any], width: int = 1) -> None:
        step = _CHUNK - _CHUNK % width
        for start in range(0, len(values), step):
            chunk = values[start:start + step]
            self._head(command, key, len(chunk))
            self._args += chunk

    def hset(self, key: str, field: Any = None, value: Any = None, mapping: Mapping | None = None) -> None:
        pairs = [] if field is None else [field, value]
        for item in (mapping or {}).items():
            pairs += item
        self._write("HSET", key, pairs, 2)

    def sadd(self, key: str, *members: Any) -> None:
        self._write("SADD", key, list(members))

    def zadd(self, key: str, mapping: Mapping[Any, float]) -> None:
        pairs: list[Any] = []
        for member, score in mapping.items():
            pairs += [score, member]
        self._write("ZADD", key, pairs, 2)

    def zrem(self, key: str, *members: Any) -> None:
        self._write("ZREM", key, list(members))

    def delete(self, *keys: str) -> None:
        for key in keys:
            self._head("DEL", key, 0)

    def script_call(self, checkpoint_key: str, expected: str | None, new_checkpoint: str | None,
                    keep_checkpoint: bool = False) -> tuple[list[str], list[Any]]:
        """(KEYS, ARGV) of COMMIT_SCRIPT: ``expected`` None skips the check; ``new_checkpoint`` None deletes it."""
        action = "keep" if keep_checkpoint else ("del" if new_checkpoint is None else "set")
        head = ["0" if expected is None else "1", expected or "", action, new_checkpoint or "", bytes(self._heads)]
        return [checkpoint_key, *self._keys], head + self._args


class JoinedWrites:
    """A shard's writes as ``ShardWrites`` records them, but joined per command and key: every room's HSET of the
    shard's summaries becomes one HSET of all their fields, and so on. COMMIT_SCRIPT then makes one call per key
    and command instead of one per room (each ``redis.call`` and its three header arguments cost Redis and the
    projector time per room and batch). Only for writes whose order between rooms does not matter: each room's
    fields and members are its own (``queue_update``'s); no ``delete``."""

    _WIDTH = {"HSET": 2, "ZADD": 2, "SADD": 1, "ZREM": 1}

    def __init__(self) -> None:
        self._joined: dict[tuple[str, str], list[Any]] = {}

    def _values(self, command: str, key: str) -> list[Any]:
        return self._joined.setdefault((command, key), [])

    def hset(self, key: str, field: Any = None, value: Any = None, mapping: Mapping | None = None) -> None:
        values = self._values("HSET", key)
        if field is not None:
            values += (field, value)
        for item in (mapping or {}).items():
            values += item

    def sadd(self, key: str, *members: Any) -> None:
        self._values("SADD", key).extend(members)

    def zadd(self, key: str, mapping: Mapping[Any, float]) -> None:
        values = self._values("ZADD", key)
        for member, score in mapping.items():
            values += (score, member)

    def zrem(self, key: str, *members: Any) -> None:
        self._values("ZREM", key).extend(members)

    def shard_writes(self) -> ShardWrites:
        writes = ShardWrites()
        for (command, key), values in self._joined.items():
            if values:
                writes._write(command, key, values, self._WIDTH[command])  # noqa: SLF001 - its own module's
        return writes


async def commit_shard(script: Any, checkpoint_key: str, writes: ShardWrites, *, expected: str | None,
                       new_checkpoint: str | None, keep_checkpoint: bool = False) -> None:
    """Apply ``writes`` and move the checkpoint in one script; CheckpointConflict if it no longer held ``expected``.

    ``script`` is ``client.register_script(COMMIT_SCRIPT)``: a server that forgot it has it loaded again by
    the client (redis-py's Script on one server, ``FailoverCluster`` on a Cluster).
    """
    script_keys, args = writes.script_call(checkpoint_key, expected, new_checkpoint, keep_checkpoint)
    applied, current = await script(keys=script_keys, args=args)
    if int(applied) != 1:
        raise CheckpointConflict(text(current))
