"""The command bus contract between the gateway (or any client) and the engine, on Redis.

- A command is an entry of its room's shard command stream ``Keys.command_stream(shard)`` with one
  field ``__data__`` = msgpack(CommandRecord) (FastStream reads such an entry as the raw body).
- A command sent on behalf of a rate-limited client may carry a ``RateLimit``: ``submit`` then counts it
  in the limit's fixed-window counter and appends it in ONE script (``SUBMIT_COUNTED``), or appends
  nothing and raises ``RateLimited`` when the window is used up. The counter carries the room's shard
  hash tag, so the script touches one Redis Cluster slot.
- The engine publishes the outcome as msgpack(Outcome) on the channel ``outcome_channel(command_id)``
  and the store keeps it under the command id, so a client that missed the message can ask later. An
  entry may name a reply channel instead (field ``reply``, ``reply_channel(submitter)``): a gateway
  process subscribes to its own and receives its own commands' outcomes only, so N gateways do not each
  receive (and drop) every outcome of the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from almanac.events import codec
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.base import CommandLimited, Counted
from almanac.storage.keys import Keys, outcome_channel, reply_channel
from almanac.storage.redis_store import eval_by_text, ids_field

COMMAND_FIELD = "__data__"
REPLY_FIELD = "reply"
MAX_REPLY_CHANNEL = 200
_OUTCOME_DECODER = msgspec.msgpack.Decoder(Outcome)

# KEYS: the shard command stream, the counter, and (to look the command up) its outcome record and its room's id
# index. ARGV: the limit, the window (ms), the command's field in the id index ('': no lookup), the record (none:
# count only), the reply channel.
# A fixed window, as the `limits` library counts (the window starts with its first hit); every request is
# counted, refused or not, so a client that keeps sending past its limit stays refused until the window ends.
# Except the resend of a command already decided (its outcome stored under its id, the store's dedupe: same seat,
# same id): answered {2, stored outcome}, neither counted nor appended. Its answer is that outcome whatever the
# window, and a resend whose answer was lost must not use up the window (nor be refused 429 for a command that was
# accepted). Only a decided id is free: an id in flight, refused 429 or another seat's has no outcome under this
# key, so it is counted as any new command. The lookup rides on this script (no round trip of its own), as the
# engine's write looks it up (storage.redis_store._DEDUPE_LUA), but with the id index's field computed by the
# caller: the SHA-1 and its hex-to-bytes step in Lua cost Redis about 9 us per submit, the lookup itself 2-3.
SUBMIT_COUNTED = """
if ARGV[3] ~= '' then
  local found = redis.call('GET', KEYS[3]) or redis.call('HGET', KEYS[4], ARGV[3])
  if found then return {2, found} end
end
-- A window's first count is one call (SET NX), the next ones INCR: the window INCR then PEXPIRE at 1 would open.
local count = 1
if not redis.call('SET', KEYS[2], '1', 'PX', ARGV[2], 'NX') then count = redis.call('INCR', KEYS[2]) end
if count > tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl < 0 then redis.call('PEXPIRE', KEYS[2], ARGV[2]); ttl = tonumber(ARGV[2]) end
  return {0, ttl}
end
if ARGV[4] == nil then return {1, ''} end
if ARGV[5] == nil then return {1, redis.call('XADD', KEYS[1], '*', '__data__', ARGV[4])} end
return {1, redis.call('XADD', KEYS[1], '*', '__data__', ARGV[4], 'reply', ARGV[5])}
"""
_SUBMIT_COUNTED_SHA = hashlib.sha1(SUBMIT_COUNTED.encode()).hexdigest()

# How a command reaches Redis: ``client.execute_command`` or anything called the same way.
Call = Callable[..., Awaitable[Any]]


def internal_command_id(room: str, player: str, client_id: str) -> str:
    """The engine's id of a client's command: the client's id scoped to room and player. The store dedupes by
    command id per shard: so two clients that both say "1" never receive each other's outcome."""
    return f"{room}:{player}:{client_id}"


# A client's fixed-window command limit: ``amount`` per ``window_ms``, counted under ``key`` (a key in the
# shard of the room the command is for: ``Keys.seat_rate``). The same limit a write decided in a gateway's
# engine counts itself (storage.base.Counted).
RateLimit = Counted


class RateLimited(CommandLimited):
    """The limit's window is used up: nothing was appended. ``retry_ms``: until the window ends; ``key``: the
    limit's counter (whoever shares the refused submission learns whose window it was). A write that counts
    the limit itself (``storage.base.Counted``) answers its base class, ``CommandLimited``."""


class AlreadyDecided(Exception):  # noqa: N818 - an answer, not an error
    """A counted submit found its command decided already (a resend): nothing counted, nothing appended.
    ``stored``: the outcome as the store keeps it (``storage.redis_store.decode_kept``)."""

    def __init__(self, stored: bytes) -> None:
        super().__init__("the command is decided already")
        self.stored = stored


def encode_outcome(outcome: Outcome) -> bytes:
    return codec.encode(outcome)


def decode_outcome(data: bytes) -> Outcome:
    return _OUTCOME_DECODER.decode(data)


def outcome_channel_of(fields: dict, command_id: str, prefix: str) -> str:
    """Where the engine publishes the outcome of a command stream entry: the reply channel it names (one of
    this key prefix's), else the command id's own channel."""
    reply = fields.get(REPLY_FIELD.encode())
    if reply is not None:
        channel = reply.decode(errors="replace")
        if channel.startswith(reply_channel("", prefix)) and len(channel) <= MAX_REPLY_CHANNEL:
            return channel
    return outcome_channel(command_id)


async def submit(client: aioredis.Redis, keys: Keys, record: CommandRecord, limit: RateLimit | None = None,
                 reply: str | None = None, call: Call | None = None) -> bytes:
    """Put a command on its shard's command stream; returns the stream entry id.

    With a ``limit``, the command is counted and appended in one round trip, or counted and refused with
    ``RateLimited`` (nothing appended) when its window is used up, or neither counted nor appended when its id is
    decided already: ``AlreadyDecided`` with its stored outcome (``SUBMIT_COUNTED``). With a ``reply`` channel the
    outcome is published there instead of on the command id's own channel. ``call`` sends the command (default:
    the client's ``execute_command``; the gateway's ``PipelinedConnection.call``).
    """
    stream = keys.command_stream(keys.shard(record.room))
    call = call or client.execute_command
    if limit is None:
        fields = [COMMAND_FIELD, codec.encode(record)] + ([] if reply is None else [REPLY_FIELD, reply])
        return await call("XADD", stream, "*", *fields)
    return await _counted(call, stream, limit, _dedupe_keys(keys, record.room, record.command_id),
                          codec.encode(record), reply)


async def count(client: aioredis.Redis, keys: Keys, room: str, limit: RateLimit, call: Call | None = None,
                command_id: str | None = None) -> bool:
    """Count a request against ``limit`` without submitting anything (a request refused before its submit
    still uses up its client's limit); ``RateLimited`` when the window was already used up. With its
    ``command_id`` (the engine's), a command decided already is not counted: False."""
    dedupe = None if command_id is None else _dedupe_keys(keys, room, command_id)
    try:
        await _counted(call or client.execute_command, keys.command_stream(keys.shard(room)), limit, dedupe)
    except AlreadyDecided:
        return False
    return True


def _dedupe_keys(keys: Keys, room: str, command_id: str) -> tuple[list[str], bytes]:
    """Where the store keeps a command's outcome (its record, its room's id index) and its field in that index: in
    the room's shard, as the stream and the counter, so SUBMIT_COUNTED reads them in its one slot."""
    record = keys.command_outcome(room, command_id)
    return [record, keys.command_ids(room)], ids_field(record)


async def _counted(call: Call, stream: str, limit: RateLimit, dedupe: tuple[list[str], bytes] | None,
                   data: bytes | None = None, reply: str | None = None) -> bytes:
    lookup, field = dedupe if dedupe is not None else ([], b"")
    script_keys = [stream, limit.key, *lookup]
    args = [limit.amount, limit.window_ms, field] + ([] if data is None else [data])
    if data is not None and reply is not None:
        args.append(reply)
    try:
        # EVALSHA as a plain command: one call, no script object; a Cluster client routes it by its keys.
        reply = await call("EVALSHA", _SUBMIT_COUNTED_SHA, len(script_keys), *script_keys, *args)
    except NoScriptError:  # a restarted or flushed server forgot it
        # Here, not left to the client: ``call`` is also the gateway's PipelinedConnection (a raw socket), which
        # neither redis-py's Script reload nor FailoverCluster's run-by-text covers.
        reply = await eval_by_text(call, SUBMIT_COUNTED, script_keys, args)
    status = int(reply[0])
    if status == 2:
        raise AlreadyDecided(reply[1])
    if not status:
        raise RateLimited(int(reply[1]), limit.key)
    return reply[1]
