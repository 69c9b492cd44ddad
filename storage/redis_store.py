"""The Redis Streams event store: one Lua script checks version and command id, then appends atomically."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import (
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TimeoutError as RedisTimeoutError,
)

from almanac.events import codec
from almanac.events.dice import nonce_commitment
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError
from almanac.storage.base import (
    AppendRequest,
    AppendResult,
    CommandLimited,
    NotAttempted,
    RejectRequest,
    StoredOutcome,
    VersionConflict,
)
from almanac.storage.keys import Keys, replicated_key, shard_tag

# Dedupe (every write script): a command id's outcome record (``Keys.command_outcome``) answers a resend; with a
# retention (ALMANAC_DEDUPE_RETAIN, ``dedupe_retain_ms``) an accepted command's record expires, and the room's id
# index (``Keys.command_ids``: one hash per room, field: the first 16 bytes of the SHA-1 of the record's key, value:
# "first:last" versions) answers after it, so a resend is never decided twice while the room lives in Redis. Every
# write checks both. A refusal's record (its error: too long for the index's compact encoding, which keeps ~30 B per
# command up to 128 of them) does not expire: the room's refusal stream holds a record per refusal anyway (but for a
# refusal kept outside it, 'q' below: its record expires, whatever the retention). The index leaves Redis with the room
# (archived: its object's outcomes answer) and comes back with it (storage.restore).
# How long the outcome of a refusal kept outside its room's refusal stream stays when ALMANAC_DEDUPE_RETAIN is 0.
REFUSAL_ONLY_MS = 60_000
_DEDUPE_LUA = """
local last_record, last_field
local function id_field(record)
  -- Asked twice for each new command (its lookup, then its record), and the hex-to-bytes step costs several times
  -- the SHA-1: the last one is kept for this call of the script.
  if record ~= last_record then
    last_field = (string.gsub(string.sub(redis.sha1hex(record), 1, 32), '..',
                              function(hex) return string.char(tonumber(hex, 16)) end))
    last_record = record
  end
  return last_field
end
-- ``field``: the record's id index field when the caller sent it (ids_field: the same 16 bytes), else computed here.
local function decided(record, ids, field)
  local found = redis.call('GET', record)
  if found then return found end
  return redis.call('HGET', ids, field or id_field(record))
end
-- A refusal kept outside the room's refusal stream ('q'): of a finished archived room (its archived record is closed,
-- the object never changes, and the room refuses every command for ever: nothing of it comes back into Redis), or not
-- the room's own (a create naming it: events.step.kept_in_room). Only its outcome is kept, for the dedupe window, and
-- for REFUSAL_ONLY_MS when the retention is 0 ("for ever"): nothing else would ever delete it (the archiver finds a
-- room's records through its logs), and a resend after it is refused the same again.
local function remember_refusal(record, outcome, ttl)
  if tonumber(ttl) <= 0 then ttl = REFUSAL_ONLY_MS end
  redis.call('SET', record, outcome, 'PX', ttl)
end
local function remember(record, ids, outcome, kept, ttl, field)
  if tonumber(ttl) > 0 then
    redis.call('SET', record, outcome, 'PX', ttl)
    redis.call('HSET', ids, field or id_field(record), kept)
  else
    redis.call('SET', record, outcome)
  end
end
""".replace("REFUSAL_ONLY_MS", str(REFUSAL_ONLY_MS))

# KEYS: 1 room events, 2 room version, 3 command outcome, 4 shard feed, 5 room commands, 6 shard rooms, 7 room ids
# ARGV: 1 expected version, 2 room id, 3 outcome (msgpack), 4 command record, 5 dedupe retention (ms, 0: for ever),
# 6.. envelopes (msgpack)
# The shard feed gets ONE small entry per append: r room, v first version, l last version. It points
# into the room stream rather than copying the events: a copy there (per event, or the batch as one
# value) cost 1.4-1.8x the write time of the room stream itself (bench store, same run).
APPEND_SCRIPT = _DEDUPE_LUA + """
local existing = decided(KEYS[3], KEYS[7])
if existing then return {'dup', existing} end
local expected = tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current ~= expected then return {'conflict', tostring(current)} end
local count = #ARGV - 5
for i = 1, count do
  redis.call('XADD', KEYS[1], (expected + i) .. '-0', 'e', ARGV[5 + i])
end
redis.call('XADD', KEYS[4], '*', 'r', ARGV[2], 'v', expected + 1, 'l', expected + count)
redis.call('SET', KEYS[2], expected + count)
remember(KEYS[3], KEYS[7], ARGV[3], (expected + 1) .. ':' .. (expected + count), ARGV[5])
if ARGV[4] ~= '' then
  redis.call('XADD', KEYS[5], (expected + 1) .. '-0', 'c', ARGV[4])
end
if expected == 0 then redis.call('SADD', KEYS[6], ARGV[2]) end
return {'ok', tostring(expected + count)}
"""

# The same for many appends of one shard (one hash tag, so one Cluster slot) in one call: KEYS are the
# seven above per append; ARGV: 1 dedupe retention (ms), then per append: envelope count, expected version, room
# id, outcome, record, then the envelopes. One call per shard and batch instead of one per command: redis-py's cost of packing and
# parsing each call was most of the engine's write time. Each append is checked and applied exactly as
# APPEND_SCRIPT does, in order (a later append of the same room sees the earlier one's version).
APPEND_MANY_SCRIPT = _DEDUPE_LUA + """
local results = {}
local a = 2
for i = 0, #KEYS / 7 - 1 do
  local k = i * 7
  local count = tonumber(ARGV[a])
  local expected = tonumber(ARGV[a + 1])
  local existing = decided(KEYS[k + 3], KEYS[k + 7])
  if existing then
    results[i + 1] = {'dup', existing}
  else
    local current = tonumber(redis.call('GET', KEYS[k + 2]) or '0')
    if current ~= expected then
      results[i + 1] = {'conflict', tostring(current)}
    else
      for j = 1, count do
        redis.call('XADD', KEYS[k + 1], (expected + j) .. '-0', 'e', ARGV[a + 4 + j])
      end
      redis.call('XADD', KEYS[k + 4], '*', 'r', ARGV[a + 2], 'v', expected + 1, 'l', expected + count)
      redis.call('SET', KEYS[k + 2], expected + count)
      remember(KEYS[k + 3], KEYS[k + 7], ARGV[a + 3], (expected + 1) .. ':' .. (expected + count), ARGV[1])
      if ARGV[a + 4] ~= '' then
        redis.call('XADD', KEYS[k + 5], (expected + 1) .. '-0', 'c', ARGV[a + 4])
      end
      if expected == 0 then redis.call('SADD', KEYS[k + 6], ARGV[a + 2]) end
      results[i + 1] = {'ok', tostring(expected + count)}
    end
  end
  a = a + 5 + count
end
return results
"""

# The engine's batch of ONE shard (one hash tag, one Cluster slot): appends and recorded refusals in the
# order they were decided, each checked and applied as APPEND_SCRIPT / REJECT_SCRIPT do, in ONE call.
# The engine decides a room's commands of a batch one after another against the state the previous one
# makes, before any is written; so once a write of a room does not take effect (dup, conflict) the room's
# later writes are answered 'skip' untried, atomically (no other writer runs inside a script). A write
# with a receipt (storage.base.Receipt: entry id not '') also acknowledges its command entry and
# publishes its outcome when it takes effect: the answer leaves at the moment of the append.
# A write with a client's limit (storage.base.Counted) is preceded by a count of it, as the stream's submit
# script counts (services.bus.SUBMIT_COUNTED): past the limit the room's writes from there are not tried
# and the count answers 'limited' with the window's remaining ms. As there, a command whose id is decided already
# (the write after the count names its outcome record and id index) is not counted: a resend is answered its first
# outcome ('dup') whatever the window, and never uses it up.
# KEYS: 1 shard feed, 2 shard rooms, 3 shard command stream, then per append: room events, room version,
# command outcome, room commands, room ids; per refusal: command outcome, room rejected stream, room ids; per
# count: counter. ARGV: 1 consumer group of the receipts, 2 dedupe retention (ms, 0: for ever), then per append: 'a', room, envelope count, expected version,
# outcome, record, entry id ('' = no receipt), channel, message, id field, the envelopes; per refusal: 'r', room,
# outcome, record, entry id, channel, message, id field; per count: 'l', room, limit, window (ms).
# The id field (``ids_field`` of the outcome record's key) is computed by the caller: the same 16 bytes the Lua
# ``id_field`` makes, whose SHA-1 and hex-to-bytes steps were ~16% of this script's instructions (bench e2e's calls).
WRITE_ORDERED_SCRIPT = _DEDUPE_LUA + """
local results, failed = {}, {}
-- The outcome record a count just found undecided: its write, next, need not look it up again (then forgotten).
local undecided
local k, a, n = 4, 3, 0
while a <= #ARGV do
  n = n + 1
  local room = ARGV[a + 1]
  if ARGV[a] == 'a' then
    local count, expected = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local fresh = undecided
    undecided = nil
    if failed[room] then
      results[n] = {'skip', ''}
    else
      local existing = fresh ~= KEYS[k + 2] and decided(KEYS[k + 2], KEYS[k + 4], ARGV[a + 9])
      local current = tonumber(redis.call('GET', KEYS[k + 1]) or '0')
      if existing then
        results[n] = {'dup', existing}
        failed[room] = true
      elseif current ~= expected then
        results[n] = {'conflict', tostring(current)}
        failed[room] = true
      else
        -- The first and last versions as text once: a number turned into text (a concatenation, or an argument of
        -- redis.call) is a printf each time, ~5% of this script's instructions when done at every use.
        local last = tostring(expected + count)
        local first = last
        if count ~= 1 then first = tostring(expected + 1) end
        local first_id = first .. '-0'
        for j = 1, count do
          redis.call('XADD', KEYS[k], j == 1 and first_id or (expected + j) .. '-0', 'e', ARGV[a + 9 + j])
        end
        redis.call('XADD', KEYS[1], '*', 'r', room, 'v', first, 'l', last)
        redis.call('SET', KEYS[k + 1], last)
        remember(KEYS[k + 2], KEYS[k + 4], ARGV[a + 4], first .. ':' .. last, ARGV[2], ARGV[a + 9])
        if ARGV[a + 5] ~= '' then
          redis.call('XADD', KEYS[k + 3], first_id, 'c', ARGV[a + 5])
        end
        if expected == 0 then redis.call('SADD', KEYS[2], room) end
        if ARGV[a + 6] ~= '' then
          redis.call('XACK', KEYS[3], ARGV[1], ARGV[a + 6])
          redis.call('PUBLISH', ARGV[a + 7], ARGV[a + 8])
        end
        results[n] = {'ok', last}
      end
    end
    k = k + 5
    a = a + 10 + count
  elseif ARGV[a] == 'l' then
    -- The write counted comes next: an append's outcome record and id index are its keys 3 and 5, a refusal's 1 and 3.
    local record, ids, field = k + 1, k + 3, ARGV[a + 11]
    if ARGV[a + 4] == 'a' then record, ids, field = k + 3, k + 5, ARGV[a + 13] end
    if failed[room] then
      results[n] = {'skip', ''}
    elseif decided(KEYS[record], KEYS[ids], field) then
      results[n] = {'ok', ''}  -- a resend: its write answers 'dup', nothing counted
    else
      undecided = KEYS[record]
      -- A window's first count is one call (a seat sends a few commands a minute: most counts open a window), the
      -- next ones INCR; the same fixed window as INCR and then PEXPIRE at 1.
      local counted = 1
      if not redis.call('SET', KEYS[k], '1', 'PX', ARGV[a + 3], 'NX') then counted = redis.call('INCR', KEYS[k]) end
      if counted > tonumber(ARGV[a + 2]) then
        local ttl = redis.call('PTTL', KEYS[k])
        if ttl < 0 then redis.call('PEXPIRE', KEYS[k], ARGV[a + 3]); ttl = tonumber(ARGV[a + 3]) end
        results[n] = {'limited', tostring(ttl)}
        failed[room] = true
      else
        results[n] = {'ok', ''}
      end
    end
    k = k + 1
    a = a + 4
  else
    local fresh = undecided
    undecided = nil
    if failed[room] then
      results[n] = {'skip', ''}
    else
      local existing = fresh ~= KEYS[k] and decided(KEYS[k], KEYS[k + 2], ARGV[a + 7])
      if existing then
        results[n] = {'dup', existing}
      else
        if ARGV[a] == 'q' then
          remember_refusal(KEYS[k], ARGV[a + 2], ARGV[2])
        else
          redis.call('SET', KEYS[k], ARGV[a + 2])
          redis.call('XADD', KEYS[k + 1], '*', 'c', ARGV[a + 3])
        end
        if ARGV[a + 4] ~= '' then
          redis.call('XACK', KEYS[3], ARGV[1], ARGV[a + 4])
          redis.call('PUBLISH', ARGV[a + 5], ARGV[a + 6])
        end
        results[n] = {'ok', ARGV[a + 2]}
      end
    end
    k = k + 3
    a = a + 8
  end
end
return results
"""

# KEYS: 1 command outcome, 2 room rejected stream, 3 room ids; ARGV: 1 outcome, 2 record, 3 'q' for a refusal of a
# finished archived room or one not the room's own (its outcome only, for the dedupe window), 4 dedupe retention (ms)
REJECT_SCRIPT = _DEDUPE_LUA + """
local existing = decided(KEYS[1], KEYS[3])
if existing then return {'dup', existing} end
if ARGV[3] == 'q' then
  remember_refusal(KEYS[1], ARGV[1], ARGV[4])
  return {'ok', ARGV[1]}
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('XADD', KEYS[2], '*', 'c', ARGV[2])
return {'ok', ARGV[1]}
"""

# KEYS: 1 snapshot data hash, 2 snapshot index zset; ARGV: 1 version, 2 snapshot bytes
SNAPSHOT_SCRIPT = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[1]), ARGV[1])
return 1
"""

# KEYS: 1 snapshot index zset, 2 snapshot data hash, 3 room events; ARGV: 1 highest version ("+inf" = any),
# 2 page size. The newest snapshot at or below the version and the first page of the tail after it: a room
# loads in ONE round trip instead of three in a row (ZREVRANGEBYSCORE, HGET, XRANGE).
LOAD_SCRIPT = """
local found = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, 1)
local version, data = 0, false
if found[1] then
  data = redis.call('HGET', KEYS[2], found[1])
  if data then version = tonumber(found[1]) end
end
local high = '+'
if ARGV[1] ~= '+inf' then high = ARGV[1] .. '-0' end
return {version, data, redis.call('XRANGE', KEYS[3], (version + 1) .. '-0', high, 'COUNT', tonumber(ARGV[2]))}
"""


def _unparsed_stream_reads(client: aioredis.Redis) -> aioredis.Redis:
    """A client on the same connections whose XRANGE replies stay as hiredis returns them.

    redis-py turns every stream entry into a tuple and a dict in Python; skipping that made replay
    (read + decode + fold) 35-40% faster. A Cluster client keeps the parsed replies.
    """
    if not isinstance(client, aioredis.Redis):
        return client
    reads = aioredis.Redis(connection_pool=client.connection_pool)
    reads.set_response_callback("XRANGE", lambda response, **options: response)
    return reads


def _envelope_field(fields: list | dict) -> bytes | None:
    """The ``e`` field of a stream entry, from an unparsed [field, value, ...] list or a parsed dict."""
    if isinstance(fields, dict):
        return fields.get(b"e")
    if len(fields) == 2 and fields[0] == b"e":
        return fields[1]  # the only shape the append script writes
    for index in range(0, len(fields) - 1, 2):
        if fields[index] == b"e":
            return fields[index + 1]
    return None


def _decoded(room: str, version: int, data: bytes | None) -> Envelope:
    if data is None:
        raise CorruptEventError(room, version, "entry has no envelope field 'e'")
    return codec.decode_envelope(data, room, version)


_OUTCOME_DECODER = msgspec.msgpack.Decoder(StoredOutcome)


def ids_field(record_key: str) -> bytes:
    """A command's field in its room's id index (``_DEDUPE_LUA``): the first 16 bytes of the SHA-1 of its record's key.

    Not 8: command ids are the clients' (and the clock's timeouts' ids are public), so a player could search
    offline for an id of their own whose field equals a coming timeout's (2^64 / targets SHA-1s), send it, and
    have that timeout answered as already decided once its record expired. 16 bytes put that out of reach."""
    return hashlib.sha1(record_key.encode()).digest()[:16]  # noqa: S324 - unguessable enough as a name, not a MAC


async def eval_by_text(call: Callable[..., Awaitable[Any]], text: str | bytes, script_keys: list[str],
                       args: list) -> Any:
    """A script call sent as EVALSHA on ``call`` and answered NOSCRIPT (a restarted or flushed Redis forgot the
    script; the call did nothing), sent again on the same ``call`` by its text: EVAL runs it and caches it, so the
    next EVALSHA finds it. One round trip, whatever ``call`` is (a client, the gateway's pipelined connection).

    The one reload of the single-call paths (``bus``'s counted submit, ``write_ordered``), called only on NOSCRIPT:
    the EVALSHA stays inline at each (no await or allocation added per command). Elsewhere: redis-py's Script
    reloads its own calls; FailoverCluster runs a Cluster node's by text (``script_text_call``); ``evalsha_many``
    and ``_send_waited`` reload a pipeline's (each call of it, and WAIT, on its own connection)."""
    return await call("EVAL", text, len(script_keys), *script_keys, *args)


def decode_kept(room: str, value: bytes) -> StoredOutcome:
    """A command's stored outcome from its record or its room's id index ("first:last" of an append)."""
    if value[:1].isdigit():
        first, last = value.split(b":")
        return StoredOutcome(room=room, first_version=int(first), last_version=int(last))
    return _OUTCOME_DECODER.decode(value)


class ReplicaWaitError(RedisTimeoutError):
    """ALMANAC_DURABILITY=replica and no replica confirmed a write in time: an infrastructure failure (the
    engine leaves the commands pending and retries; the gateway answers 503), never an acknowledgement."""
_PAGE = 1000
# ALMANAC_DURABILITY=replica on a Cluster: the WAIT timeout for a node whose last WAIT was not confirmed.
SHORT_WAIT_MS = 50


def _has_dup(reply: object) -> bool:
    """True when an append/reject reply ({status, value}, or a list of them) answers "dup" anywhere."""
    if not isinstance(reply, list) or not reply:
        return False
    if isinstance(reply[0], list):
        return any(_has_dup(item) for item in reply)
    return reply[0] == b"dup"


class RedisEventStore:
    """The event store on Redis Streams (works on a single server and, by its hash tags, on a Cluster)."""

    def __init__(self, client: aioredis.Redis, shard_count: int = 16, prefix: str = "alm",
                 wait_replicas: int = 0, wait_timeout_ms: int = 1_000, keys: Keys | None = None,
                 dedupe_retain_ms: int = 0) -> None:
        self.client = client
        # ALMANAC_DEDUPE_RETAIN: how long a command's outcome record stays (0: for ever); the room's id index
        # answers a resend after it (_DEDUPE_LUA)
        self.dedupe_retain_ms = dedupe_retain_ms
        # ALMANAC_DURABILITY=replica: every write pipeline ends with WAIT on its own connection (WAIT
        # counts the writes of the connection that sends it), so no outcome precedes the replica's copy.
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._unreplicated: set[str] = set()  # Cluster nodes whose last WAIT was not confirmed
        self._replicated: set[str] = set()  # Cluster nodes whose last WAIT was confirmed
        # ``keys``: the process's one set (services.bootstrap), for this shard count and prefix
        self.keys = keys or Keys(shard_count, prefix)
        self.shard_count = self.keys.shard_count
        self._append = client.register_script(APPEND_SCRIPT)
        self._append_many = client.register_script(APPEND_MANY_SCRIPT)
        self._reject = client.register_script(REJECT_SCRIPT)
        self._write_ordered = client.register_script(WRITE_ORDERED_SCRIPT)
        self._snapshot = client.register_script(SNAPSHOT_SCRIPT)
        self._load = client.register_script(LOAD_SCRIPT)
        self._scripts_loaded = False
        self.stream_reads = _unparsed_stream_reads(client)


    @property
    def answers_in_its_write(self) -> bool:
        """One Redis and no WAIT: a write's own reply is its whole answer, so its script may acknowledge the
        command's stream entry and publish its outcome (``Receipt``), and a caller may send the ordered write
        on a connection of its own (``ordered_command``). On a Cluster (per-node pipelines and partial
        failures) or with ``wait_replicas`` (the answer waits for WAIT, after the script) it is False."""
        return not self.wait_replicas and isinstance(self.client, aioredis.Redis)
    async def append(
        self,
        room: str,
        expected_version: int,
        command_id: str,
        envelopes: list[Envelope],
        command_record: bytes = b"",
    ) -> AppendResult:
        request = AppendRequest(room=room, expected_version=expected_version, command_id=command_id,
                                envelopes=envelopes, command_record=command_record)
        script_keys, args = self._append_call(request)
        if self.wait_replicas:
            reply = (await self.evalsha_many([(self._append, script_keys, args)]))[0]
            if isinstance(reply, Exception):
                raise reply
            return self._append_result(request, reply)
        return self._append_result(request, await self._append(keys=script_keys, args=args))

    def _append_call(self, request: AppendRequest) -> tuple[list[str], list]:
        keys = self.keys
        room = request.room
        shard = keys.shard(room)
        outcome = StoredOutcome(
            room=room,
            first_version=request.expected_version + 1,
            last_version=request.expected_version + len(request.envelopes),
        )
        script_keys = [
            keys.events(room),
            keys.version(room),
            keys.command_outcome(room, request.command_id),
            keys.feed(shard),
            keys.commands(room),
            keys.rooms(shard),
            keys.command_ids(room),
        ]
        args = [request.expected_version, room, codec.encode(outcome), request.command_record, self.dedupe_retain_ms]
        return script_keys, args + [codec.encode_envelope(e) for e in request.envelopes]

    def _append_result(self, request: AppendRequest, reply: list) -> AppendResult:
        status, value = reply
        if status == b"dup":
            return AppendResult(outcome=decode_kept(request.room, value), duplicate=True)
        if status == b"conflict":
            raise VersionConflict(request.room, request.expected_version, int(value))
        return AppendResult(outcome=StoredOutcome(
            room=request.room,
            first_version=request.expected_version + 1,
            last_version=request.expected_version + len(request.envelopes),
        ))

    async def record_rejection(self, room: str, command_id: str, error: dict, record: bytes,
                               kept: bool = True) -> AppendResult:
        request = RejectRequest(room=room, command_id=command_id, error=error, record=record, kept=kept)
        script_keys, args = self._reject_call(request)
        return self._reject_result(room, await self._reject(keys=script_keys, args=args))

    def _reject_call(self, request: RejectRequest) -> tuple[list[str], list]:
        outcome = StoredOutcome(room=request.room, error=request.error, record=request.record)
        script_keys = [self.keys.command_outcome(request.room, request.command_id), self.keys.rejected(request.room),
                       self.keys.command_ids(request.room)]
        return script_keys, [codec.encode(outcome), request.record, "" if self._logs(request) else "q",
                             self.dedupe_retain_ms]

    def _logs(self, request: RejectRequest) -> bool:
        """Whether a refusal joins its room's refusal stream (else 'q': its outcome only, for the dedupe window)."""
        return request.kept and self.keeps_refusals(request.room)

    def keeps_refusals(self, room: str) -> bool:
        """Whether a refusal for ``room`` joins its refusal stream (every room Redis holds; not a finished archived
        room's: ArchivingStore)."""
        return True

    @staticmethod
    def _reject_result(room: str, reply: list) -> AppendResult:
        status, value = reply
        outcome = decode_kept(room, value)
        return AppendResult(outcome=outcome, duplicate=status == b"dup")

    async def outcomes_many(self, pairs: list[tuple[str, str]]) -> list[StoredOutcome | None]:
        if not pairs:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for room, command_id in pairs:
                record = self.keys.command_outcome(room, command_id)
                pipe.get(record)
                pipe.hget(self.keys.command_ids(room), ids_field(record))
            values = await pipe.execute()
        return [None if (value := values[2 * i] or values[2 * i + 1]) is None else decode_kept(room, value)
                for i, (room, _) in enumerate(pairs)]

    async def write_many(
        self, appends: list[AppendRequest], rejections: list[RejectRequest]
    ) -> tuple[list[AppendResult | Exception], list[AppendResult | Exception]]:
        if not appends and not rejections:
            return [], []
        by_shard: dict[int, list[int]] = {}
        for index, request in enumerate(appends):
            by_shard.setdefault(self.keys.shard(request.room), []).append(index)
        calls = []
        for indexes in by_shard.values():
            script_keys: list[str] = []
            script_args: list = [self.dedupe_retain_ms]
            for index in indexes:
                call_keys, call_args = self._append_call(appends[index])
                script_keys += call_keys
                del call_args[4]  # the retention: once, first
                script_args += [len(call_args) - 4, *call_args]
            calls.append((self._append_many, script_keys, script_args))
        calls += [(self._reject, *self._reject_call(r)) for r in rejections]
        replies = await self.evalsha_many(calls)
        append_replies: list = [None] * len(appends)
        for indexes, reply in zip(by_shard.values(), replies[: len(by_shard)], strict=True):
            for position, index in enumerate(indexes):
                append_replies[index] = reply if isinstance(reply, Exception) else reply[position]
        append_results: list[AppendResult | Exception] = []
        for request, reply in zip(appends, append_replies, strict=True):
            try:
                append_results.append(reply if isinstance(reply, Exception) else self._append_result(request, reply))
            except VersionConflict as conflict:
                append_results.append(conflict)
        reject_results: list[AppendResult | Exception] = [
            reply if isinstance(reply, Exception) else self._reject_result(request.room, reply)
            for request, reply in zip(rejections, replies[len(by_shard):], strict=True)
        ]
        return append_results, reject_results

    async def write_ordered(self, requests: list[AppendRequest | RejectRequest]) -> list[AppendResult | Exception]:
        """One shard's appends and refusals in order, as ONE script call (WRITE_ORDERED_SCRIPT)."""
        if not requests:
            return []
        script_keys, script_args = self._ordered_call(requests)
        if not self.answers_in_its_write:
            (reply,) = await self.evalsha_many([(self._write_ordered, script_keys, script_args)])
        else:
            # One call, no pipeline: the engine's most frequent write (a batch of one shard) pays no
            # pipeline machinery.
            try:
                try:
                    reply = await self.client.execute_command("EVALSHA", self._write_ordered.sha, len(script_keys),
                                                              *script_keys, *script_args)
                except NoScriptError:
                    reply = await eval_by_text(self.client.execute_command, self._write_ordered.script, script_keys,
                                               script_args)
            except ResponseError as error:
                reply = error
        return self.ordered_results(requests, reply)

    async def write_ordered_shards(self, groups: list[list[AppendRequest | RejectRequest]]
                                   ) -> list[list[AppendResult | Exception]]:
        """``write_ordered`` of several shards in ONE pipeline (one send): a small batch spans a few shards."""
        if len(groups) == 1:
            return [await self.write_ordered(groups[0])]
        replies = await self.evalsha_many([(self._write_ordered, *self._ordered_call(group)) for group in groups])
        return [self.ordered_results(group, reply) for group, reply in zip(groups, replies, strict=True)]

    def ordered_command(self, requests: list[AppendRequest | RejectRequest]) -> tuple:
        """``write_ordered``'s command (EVALSHA ...), for a caller that sends it on its own connection and
        turns the reply into results with ``ordered_reply_results``. Its NOSCRIPT reply did nothing: then
        ``write_ordered`` (which sends it by its text on NOSCRIPT) writes the same requests."""
        script_keys, script_args = self._ordered_call(requests)
        return ("EVALSHA", self._write_ordered.sha, len(script_keys), *script_keys, *script_args)

    def _ordered_call(self, requests: list[AppendRequest | RejectRequest]) -> tuple[list[str], list]:
        keys = self.keys
        encode, encode_envelope = codec.encode, codec.encode_envelope
        shard = keys.shard(requests[0].room)
        script_keys: list[str] = [keys.feed(shard), keys.rooms(shard), keys.command_stream(shard)]
        group = ""
        script_args: list = [group, self.dedupe_retain_ms]
        for request in requests:
            room, receipt = request.room, request.receipt
            if keys.shard(room) != shard:
                raise ValueError(f"write_ordered takes the writes of one shard; room {room!r} is not on shard {shard}")
            if request.counted is not None:
                counted = request.counted
                script_keys.append(counted.key)
                script_args += ["l", room, counted.amount, counted.window_ms]
            if receipt is None:
                sent: list = ["", "", ""]
            else:
                group = receipt.group
                sent = [receipt.entry_id, receipt.channel, receipt.message]
            record = keys.command_outcome(room, request.command_id)
            if isinstance(request, RejectRequest):
                script_keys += [record, keys.rejected(room), keys.command_ids(room)]
                script_args += ["r" if self._logs(request) else "q", room,
                                encode(StoredOutcome(room=room, error=request.error, record=request.record)), request.record, *sent,
                                ids_field(record)]
                continue
            expected, count = request.expected_version, len(request.envelopes)
            script_keys += [keys.events(room), keys.version(room), record, keys.commands(room), keys.command_ids(room)]
            script_args += ["a", room, count, expected,
                            encode(StoredOutcome(room=room, first_version=expected + 1, last_version=expected + count)),
                            request.command_record, *sent, ids_field(record)]
            script_args += [encode_envelope(e) for e in request.envelopes]
        script_args[0] = group
        return script_keys, script_args

    async def ordered_reply_results(self, requests: list[AppendRequest | RejectRequest], reply: list | Exception
                                    ) -> list[AppendResult | Exception]:
        """``ordered_command``'s reply (or its error reply) as results; after NOSCRIPT, which did nothing, the
        same requests written again by ``write_ordered`` (``eval_by_text``, its one reload of a single call)."""
        if isinstance(reply, NoScriptError):
            return await self.write_ordered(requests)
        return self.ordered_results(requests, reply)

    def ordered_results(self, requests: list[AppendRequest | RejectRequest], reply: list | Exception
                        ) -> list[AppendResult | Exception]:
        """The results of ``write_ordered`` from its script's reply (or the error it got)."""
        if isinstance(reply, Exception):
            return [reply] * len(requests)
        results: list[AppendResult | Exception] = []
        if len(reply) != len(requests) + sum(request.counted is not None for request in requests):
            raise ValueError(f"the ordered write answered {len(reply)} results for {len(requests)} writes")
        replies = iter(reply)
        for request in requests:
            if request.counted is not None:
                status, value = next(replies)  # its count first
                if status == b"limited":
                    next(replies)  # the write itself: not tried
                    results.append(CommandLimited(int(value), request.counted.key))
                    continue
            status, value = next(replies)
            if status == b"skip":
                results.append(NotAttempted(request.room))
            elif isinstance(request, RejectRequest):
                results.append(self._reject_result(request.room, [status, value]))
            else:
                try:
                    results.append(self._append_result(request, [status, value]))
                except VersionConflict as conflict:
                    results.append(conflict)
        return results

    async def evalsha_many(self, calls: list[tuple[AsyncScript, list[str], list]], *, replicated: bool = True) -> list:
        """The calls as EVALSHA in one pipeline (on a Cluster: grouped by node, the nodes sent concurrently).

        On one Redis the scripts are loaded once up front rather than checked before every pipeline:
        redis-py's SCRIPT EXISTS round trip cost about 9% of the engine's CPU and one more round trip on
        every command's path. A call refused with NOSCRIPT (a server restarted without its script cache)
        did nothing, so it is simply sent again after a reload. A call that failed otherwise is returned
        as its exception. On a Cluster nothing is loaded up front: a node that answers NOSCRIPT is given
        the scripts alone (``_evalsha_waited_per_node``) or runs the call by its text (FailoverCluster),
        so one primary down fails only its own calls, not a new store's first batch on every node.

        ``replicated`` False: writes that need no replica's copy whatever the store's ``wait_replicas`` (read
        models, which a rebuild derives again from the rooms' logs), sent without WAIT.
        """
        if not self._scripts_loaded:
            if isinstance(self.client, aioredis.Redis):
                await self._load_scripts()
            else:
                # Not SCRIPT LOAD on a Cluster: it goes to every primary, and failed a new store's (an engine, a
                # gateway started while a primary is down) first batch whole, the live nodes' shards included.
                # Only the node map, which the per-node grouping reads before any command would load it.
                await self.client.initialize()
                self._scripts_loaded = True  # as far as this store loads them: each node on its NOSCRIPT
        waits = self.wait_replicas if replicated else 0
        if waits and not isinstance(self.client, aioredis.Redis):
            return await self._evalsha_waited_per_node(calls)
        async with self.client.pipeline(transaction=False) as pipe:
            for script, script_keys, args in calls:
                # execute_command: the Cluster pipeline refuses its evalsha() method, not the command itself.
                pipe.execute_command("EVALSHA", script.sha, len(script_keys), *script_keys, *args)
            if waits:
                # WAIT counts this connection's last write. A retry that finds its commands already written
                # ("dup", perhaps by a write whose own WAIT failed) writes nothing: one small write first makes
                # the WAIT cover everything Redis took before it, on any connection (replication is in order).
                pipe.execute_command("SET", replicated_key("{s00}", self.keys.prefix), 1)
                pipe.execute_command("WAIT", waits, self.wait_timeout_ms)
            replies = await pipe.execute(raise_on_error=False)
        if waits:
            replies.pop(-2)  # the SET's OK
        missing = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if waits:
            confirmed = replies.pop()
            if missing or isinstance(confirmed, Exception) or int(confirmed) < waits:
                # Written, perhaps, but not confirmed: no outcome may be answered. The caller's retry finds
                # the writes by their command ids (dup) and waits again; scripts reloaded below meanwhile.
                if missing:
                    await self._load_scripts()
                raise ReplicaWaitError(f"the write was not confirmed by {waits} replica(s) within "
                                       f"{self.wait_timeout_ms} ms (WAIT answered {confirmed!r})")
        if missing:
            # Not ``eval_by_text`` call by call: the store's scripts loaded once serve the next pipelines too.
            # redis-py never reloads a raw EVALSHA sent in a pipeline (its Pipeline loads only the scripts
            # called with client=pipe): loaded here, then each refused call sent alone as its Script, which
            # reloads (one server) or runs by its text (FailoverCluster) should its node forget it again.
            await self._load_scripts()
            again = await asyncio.gather(
                *(calls[i][0](keys=calls[i][1], args=calls[i][2]) for i in missing), return_exceptions=True
            )
            for index, reply in zip(missing, again, strict=True):
                replies[index] = reply
        return replies

    async def _evalsha_waited_per_node(self, calls: list[tuple[AsyncScript, list[str], list]]) -> list:
        """ALMANAC_DURABILITY=replica on a Cluster: each node's calls, then WAIT, in that node's part of one
        pipeline (one connection per node, so WAIT counts exactly those writes); the nodes concurrently.

        A node whose WAIT saw fewer replicas than asked (or failed), or whose calls were redirected, has
        its calls answered ReplicaWaitError: written perhaps, confirmed not. The engine leaves those
        commands pending and takes their shard over again; the retry finds the writes by command id
        ("dup") and, before answering, confirms them with a write and WAIT of its own (_confirm_dups).
        No redirection is followed: a call resent to another node would not be covered by this WAIT.
        """
        replies: list = [None] * len(calls)
        by_node: dict[str, tuple[object, list[int]]] = {}
        for index, (_, script_keys, _) in enumerate(calls):
            try:
                node = self.client.get_node_from_key(script_keys[0])
            except RedisError as error:  # no known primary for the slot (the Cluster is failing over)
                replies[index] = error
                continue
            by_node.setdefault(node.name, (node, []))[1].append(index)
        # A node whose last WAIT failed, or on which none was ever confirmed (a replica just promoted): while it
        # has no replica online, WAIT could only fail, after its full timeout, and every node's part of the batch
        # (every shard's commands) would wait that long with it. Refused at once, nothing written.
        doubtful = [name for name in by_node if self._in_doubt(name)]
        checked = await asyncio.gather(*(self._without_replica(by_node[name][0]) for name in doubtful))
        for name, refused in zip(doubtful, checked, strict=True):
            indexes = by_node[name][1]
            if refused is not None:
                for index in indexes:
                    replies[index] = refused
                del by_node[name]
        if not by_node:
            return replies
        sent = await self._send_waited(calls, list(by_node.values()))
        # A node that answered NOSCRIPT (a promoted replica, a restart without persistence: a Cluster replicates no
        # script cache) and whose WAIT was confirmed is sent, alone, its scripts and those calls again, then WAIT:
        # nothing is loaded on the other nodes (redis-py's reload sends SCRIPT LOAD to every primary, and failed the
        # whole batch while any primary was down), and each resent call is covered by a WAIT on its own node.
        resend = [(node, [index for index, reply in zip(indexes, part, strict=True)
                          if isinstance(reply, NoScriptError)])
                  for node, indexes, part, confirmed in sent
                  if self._unconfirmed(confirmed) is None and any(isinstance(reply, NoScriptError) for reply in part)]
        again = {node.name: (dict(zip(indexes, part, strict=True)), confirmed)
                 for node, indexes, part, confirmed in await self._send_waited(calls, resend, load=True)}
        for node, indexes, part, confirmed in sent:
            confirmed_first: set[int] = set()  # calls whose own WAIT (the first) confirmed them, the resend's failing
            if node.name in again:
                replies_again, confirmed = again[node.name]  # the first WAIT was confirmed: the resend's decides
                part = [replies_again.get(index, reply) for index, reply in zip(indexes, part, strict=True)]
                if self._unconfirmed(confirmed) is not None:
                    # Not the calls written by the first send: its WAIT covered them. A "dup" wrote nothing then,
                    # and is confirmed by no WAIT yet: it stays unconfirmed, as the resent calls do.
                    confirmed_first = {index for index, reply in zip(indexes, part, strict=True)
                                       if index not in replies_again and not _has_dup(reply)}
            unconfirmed = self._unconfirmed(confirmed)
            self._confirmed(node.name, unconfirmed is None)
            if unconfirmed is None:
                unconfirmed = await self._confirm_dups(node, [calls[i][1][0] for i in indexes], part)
            for index, reply in zip(indexes, part, strict=True):
                replies[index] = (reply if unconfirmed is None or isinstance(reply, Exception) or index in confirmed_first
                                  else unconfirmed)
                if isinstance(reply, NoScriptError):  # its WAIT failed, or its node lost the scripts again
                    replies[index] = unconfirmed or ReplicaWaitError("the script was not loaded; sent again later")
        return replies

    async def _send_waited(self, calls: list[tuple[AsyncScript, list[str], list]], nodes: list[tuple[object, list[int]]],
                           load: bool = False) -> list[tuple[object, list[int], list, object]]:
        """Each node's calls (by index), then WAIT, in that node's part of one pipeline: (node, indexes, replies,
        WAIT's answer) per node. ``load``: the store's scripts are loaded first, on that node only (SCRIPT LOAD,
        in order on the same connection, so its calls find them)."""
        if not nodes:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for node, indexes in nodes:
                # Not ``eval_by_text`` after the pipeline: the resent calls must go before this node's WAIT.
                for script in self._scripts() if load else ():
                    pipe.execute_command("SCRIPT", "LOAD", script.script, target_nodes=node)
                for index in indexes:
                    script, script_keys, args = calls[index]
                    pipe.execute_command("EVALSHA", script.sha, len(script_keys), *script_keys, *args,
                                         target_nodes=node)
                # A node whose last WAIT found no replica (a promoted replica, before one rejoins it) is given
                # a short WAIT: the nodes answer together, and its full timeout would hold up every shard.
                timeout_ms = SHORT_WAIT_MS if node.name in self._unreplicated else self.wait_timeout_ms
                pipe.execute_command("WAIT", self.wait_replicas, timeout_ms, target_nodes=node)
            results = await pipe.execute(raise_on_error=False, allow_redirections=False)
        sent = []
        position = 0
        for node, indexes in nodes:
            position += len(self._scripts()) if load else 0  # SCRIPT LOAD's answers: a failed load shows as NOSCRIPT
            part, confirmed = results[position:position + len(indexes)], results[position + len(indexes)]
            position += len(indexes) + 1
            sent.append((node, indexes, part, confirmed))
        return sent

    async def require_confirmable(self, key: str) -> None:
        """Raise what a write to ``key``'s node would be answered now, when it surely cannot be confirmed: with
        WAIT on a Cluster, a node whose last WAIT failed and that still has no replica online (ReplicaWaitError),
        or that is down. One round trip for such a node, none otherwise: a caller about to read and decide a
        backlog for that node (the engine's takeover) learns first that nothing of it could be written."""
        if not self.wait_replicas or isinstance(self.client, aioredis.Redis):
            return
        node = self.client.get_node_from_key(key)
        if self._in_doubt(node.name) and (refused := await self._without_replica(node)) is not None:
            raise refused

    def _in_doubt(self, name: str) -> bool:
        """Whether a write to Cluster node ``name`` is checked for a replica online before it is sent: its last
        WAIT failed, or this store never had one confirmed there. A replica promoted in a failover is such a
        node, and has no replica of its own until one rejoins it: its first WAIT used to sit out the full
        timeout (1 s) in a batch every shard's commands wait for (the other shards' stall after a primary's
        kill grew by that second)."""
        return name in self._unreplicated or name not in self._replicated

    def _confirmed(self, name: str, confirmed: bool) -> None:
        """Note whether node ``name``'s last WAIT was confirmed."""
        if confirmed:
            self._unreplicated.discard(name)
            self._replicated.add(name)
        else:
            self._unreplicated.add(name)
            self._replicated.discard(name)

    async def _without_replica(self, node: object) -> Exception | None:
        """None when ``node`` has ``wait_replicas`` replicas online (INFO replication), else the error its
        writes are answered instead: ReplicaWaitError, or the node's own failure (it is down)."""
        try:
            info = await self.client.execute_command("INFO", "replication", target_nodes=node)
        except (RedisError, RedisClusterException, OSError) as error:
            return error
        if isinstance(info, dict) and getattr(node, "name", None) in info:
            info = info[node.name]  # type: ignore[attr-defined] - the Cluster client keys a reply by its node
        online = sum(1 for key, value in info.items()
                     if key.startswith("slave") and isinstance(value, dict) and value.get("state") == "online")
        if online >= self.wait_replicas:
            return None
        return ReplicaWaitError(f"the write was not sent: {online} replica(s) online on its node, "
                                f"{self.wait_replicas} needed to confirm it")

    def _unconfirmed(self, confirmed: object) -> ReplicaWaitError | None:
        """None when WAIT's answer confirms ``wait_replicas`` replicas, else the error to answer instead."""
        if isinstance(confirmed, Exception) or int(confirmed) < self.wait_replicas:  # type: ignore[call-overload]
            return ReplicaWaitError(f"the write was not confirmed by {self.wait_replicas} replica(s) within "
                                    f"{self.wait_timeout_ms} ms (WAIT answered {confirmed!r})")
        return None

    async def _confirm_dups(self, node: object, first_keys: list[str], part: list) -> ReplicaWaitError | None:
        """A "dup" reply wrote nothing on this connection, so its WAIT did not cover the earlier write it
        found (perhaps never confirmed: its WAIT had failed). One small write on the same node, then WAIT."""
        tags = {key[key.index("{"):key.index("}") + 1] for key, reply in zip(first_keys, part, strict=True)
                if not isinstance(reply, Exception) and _has_dup(reply) and "{" in key}
        if not tags:
            return None
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.execute_command("SET", replicated_key(tags.pop(), self.keys.prefix), 1, target_nodes=node)
            pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms, target_nodes=node)
            first, confirmed = await pipe.execute(raise_on_error=False, allow_redirections=False)
        return self._unconfirmed(first if isinstance(first, Exception) else confirmed)

    def _scripts(self) -> tuple[AsyncScript, ...]:
        """Every script the store runs by its SHA."""
        return (self._append, self._append_many, self._reject, self._write_ordered, self._snapshot, self._load)

    async def _load_scripts(self) -> None:
        """Load the store's scripts (on a Cluster, on every primary the client knows)."""
        for script in self._scripts():
            await self.client.script_load(script.script)  # the Cluster client sends it to every primary
        self._scripts_loaded = True

    async def outcome(self, room: str, command_id: str, call: Callable[..., Awaitable[Any]] | None = None
                      ) -> StoredOutcome | None:
        """The command's stored outcome (None: undecided); ``call`` sends the GET instead of the client (the
        gateway's pipelined line, ``PipelinedConnection.call``: a fraction of redis-py's CPU per command)."""
        key = self.keys.command_outcome(room, command_id)
        value = await (self.client.get(key) if call is None else call("GET", key))
        if value is None:  # undecided, or its record expired (ALMANAC_DEDUPE_RETAIN): the room's id index
            index = (self.keys.command_ids(room), ids_field(key))
            value = await (self.client.hget(*index) if call is None else call("HGET", *index))
        if value is None:
            return None
        return await self.kept_outcome(room, value)

    async def kept_outcome(self, room: str, value: bytes) -> StoredOutcome:
        """A stored outcome from the value its record (or the room's id index) holds, read here or by a script
        (``services.bus.SUBMIT_COUNTED`` finding a resend decided), answered as ``outcome`` answers it."""
        if self.wait_replicas:
            # ALMANAC_DURABILITY=replica: an outcome is answered only once a replica has it. The write that stored
            # it may have failed its WAIT (a replica gone): an answer read back now (a resend, GET of the outcome,
            # the engine's dedupe) would acknowledge a write a failover can still lose (issue 28, item 17/18).
            await self.confirm_replicated(room)
        return decode_kept(room, value)

    async def confirm_replicated(self, room: str) -> None:
        """Return once ``wait_replicas`` replicas have everything the room's node took so far (ReplicaWaitError
        otherwise): one small write to the room's shard, then WAIT, on one connection of the client's pool
        (replication is in order, so the WAIT covers every earlier write to that node, on any connection). Not
        on the gateway's pipelined connection: WAIT blocks its connection, and every submit pipelined behind it."""
        key = replicated_key(shard_tag(self.keys.shard(room)), self.keys.prefix)
        if isinstance(self.client, aioredis.Redis):
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.execute_command("SET", key, 1)
                pipe.execute_command("WAIT", self.wait_replicas, self.wait_timeout_ms)
                first, confirmed = await pipe.execute(raise_on_error=False)
        else:
            # As the writes do (``_evalsha_waited_per_node``): a node whose last WAIT failed and that has no replica
            # online is refused at once, and one whose last WAIT failed gets a short WAIT, so that a read of a
            # node without a replica never holds its caller (an engine serving every shard) for the full timeout.
            node = self.client.get_node_from_key(key)
            if self._in_doubt(node.name) and (refused := await self._without_replica(node)) is not None:
                raise refused
            timeout_ms = SHORT_WAIT_MS if node.name in self._unreplicated else self.wait_timeout_ms
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.execute_command("SET", key, 1, target_nodes=node)
                pipe.execute_command("WAIT", self.wait_replicas, timeout_ms, target_nodes=node)
                first, confirmed = await pipe.execute(raise_on_error=False, allow_redirections=False)
            self._confirmed(node.name, self._unconfirmed(first if isinstance(first, Exception) else confirmed) is None)
        unconfirmed = self._unconfirmed(first if isinstance(first, Exception) else confirmed)
        if unconfirmed is not None:
            raise unconfirmed

    async def read(self, room: str, start: int = 1, end: int | None = None) -> list[Envelope]:
        return [envelope async for envelope in self.iterate(room, start, end)]

    async def _pages(self, room: str, start: int, end: int | None, count: int = _PAGE):
        """(version, envelope bytes or None) of the room stream, ``count`` entries at a time."""
        low: str | bytes = f"{max(start, 1)}-0"
        high = "+" if end is None else f"{end}-0"
        key = self.keys.events(room)
        while True:
            entries = await self.stream_reads.xrange(key, low, high, count=count)
            yield [(int(entry_id.split(b"-", 1)[0]), _envelope_field(fields)) for entry_id, fields in entries]
            if len(entries) < count:
                return
            low = b"(" + entries[-1][0]

    async def page(self, room: str, start: int, count: int = _PAGE) -> list[Envelope]:
        """Up to ``count`` envelopes from version ``start`` on, in one read (fewer: the room's end)."""
        async for page in self._pages(room, start, None, count):
            return [_decoded(room, version, data) for version, data in page]
        return []

    async def read_ranges(self, ranges: list[tuple[str, int, int]]) -> list[list[Envelope]]:
        """The envelopes of each (room, first version, last version), all in one pipelined round trip.

        Shard feed entries point into the room streams this way; every version of a range must be there.
        """
        async with self.stream_reads.pipeline(transaction=False) as pipe:
            self.queue_read_ranges(pipe, ranges)
            replies = await pipe.execute()
        return self.parse_read_ranges(ranges, replies)

    def queue_read_ranges(self, pipe: Any, ranges: list[tuple[str, int, int]]) -> None:
        """Queue ``read_ranges``' reads on a pipeline of ``stream_reads`` (to share a round trip with others)."""
        for room, first, last in ranges:
            pipe.xrange(self.keys.events(room), f"{first}-0", f"{last}-0")

    def parse_read_ranges(self, ranges: list[tuple[str, int, int]], replies: list) -> list[list[Envelope]]:
        """The envelopes from the replies of ``queue_read_ranges`` (CorruptEventError where one is missing)."""
        result = []
        for (room, first, last), entries in zip(ranges, replies, strict=True):
            envelopes = []
            for expected, (entry_id, fields) in enumerate(entries, start=first):
                version = int(entry_id.split(b"-", 1)[0])
                data = _envelope_field(fields)
                if version != expected or data is None:
                    raise CorruptEventError(room, expected, "the room stream lacks a version the shard feed names")
                envelopes.append(codec.decode_envelope(data, room, version))
            if len(envelopes) != last - first + 1:
                raise CorruptEventError(room, first + len(envelopes),
                                        "the room stream lacks a version the shard feed names")
            result.append(envelopes)
        return result

    async def read_raw(self, room: str, start: int = 1, end: int | None = None) -> list[tuple[int, bytes]]:
        """(version, stored bytes) without decoding, for audits of damaged entries and benchmarks."""
        return [(version, data or b"") async for page in self._pages(room, start, end) for version, data in page]

    async def iterate(self, room: str, start: int = 1, end: int | None = None):
        """Envelopes page by page; a malformed entry raises CorruptEventError naming room and version."""
        async for page in self._pages(room, start, end):
            for version, data in page:
                yield _decoded(room, version, data)

    async def latest_version(self, room: str) -> int:
        value = await self.client.get(self.keys.version(room))
        return int(value or 0)

    async def save_snapshot(self, room: str, version: int, data: bytes) -> None:
        # A script rather than MULTI: atomic on a single server and on a Cluster alike.
        await self._snapshot(keys=[self.keys.snapshot_data(room), self.keys.snapshot_index(room)], args=[version, data])

    async def save_snapshots(self, snapshots: list[tuple[str, int, bytes]]) -> None:
        """An engine batch's snapshots in one pipeline (``evalsha_many``), not one round trip each."""
        if len(snapshots) < 2 or self.wait_replicas:  # (with WAIT: as save_snapshot does, without it)
            for room, version, data in snapshots:
                await self.save_snapshot(room, version, data)
            return
        keys = self.keys
        replies = await self.evalsha_many([(self._snapshot, [keys.snapshot_data(room), keys.snapshot_index(room)],
                                            [version, data]) for room, version, data in snapshots])
        failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
        if failed is not None:
            raise failed

    async def latest_snapshot(self, room: str, at_most: int | None = None) -> tuple[int, bytes] | None:
        high = "+inf" if at_most is None else at_most
        versions = await self.client.zrevrangebyscore(self.keys.snapshot_index(room), high, "-inf", start=0, num=1)
        if not versions:
            return None
        data = await self.client.hget(self.keys.snapshot_data(room), versions[0])
        if data is None:
            return None
        return int(versions[0]), data

    async def snapshot_and_tail(self, room: str, at_most: int | None = None
                                ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        """The newest snapshot at or below ``at_most`` and the envelopes after it up to ``at_most``, in one
        round trip (a script); only a tail longer than a page costs more (the rest, page by page)."""
        reply = await self._load(keys=[self.keys.snapshot_index(room), self.keys.snapshot_data(room),
                                       self.keys.events(room)],
                                 args=["+inf" if at_most is None else at_most, _PAGE])
        return await self._parse_load(room, at_most, reply)

    async def _parse_load(self, room: str, at_most: int | None, reply: list
                          ) -> tuple[tuple[int, bytes] | None, list[Envelope]]:
        """LOAD_SCRIPT's reply (version, snapshot data, the first page of the tail) as the snapshot and the whole
        tail; a full page means more may follow, read page by page."""
        version, data, entries = int(reply[0]), reply[1], reply[2]
        snapshot = (version, data) if data is not None else None
        tail = []
        for entry_id, fields in entries:
            entry_version = int(entry_id.split(b"-", 1)[0])
            value = _envelope_field(fields)
            if value is None:
                raise CorruptEventError(room, entry_version, "entry has no envelope field 'e'")
            tail.append(codec.decode_envelope(value, room, entry_version))
        if len(entries) == _PAGE:
            tail += await self.read(room, tail[-1].version + 1, at_most)
        return snapshot, tail

    async def commands(self, room: str) -> list[tuple[int, bytes]]:
        entries = await self.client.xrange(self.keys.commands(room), "-", "+")
        return [(int(entry_id.split(b"-", 1)[0]), fields[b"c"]) for entry_id, fields in entries]

    async def rejections(self, room: str) -> list[bytes]:
        entries = await self.client.xrange(self.keys.rejected(room), "-", "+")
        return [fields[b"c"] for _, fields in entries]

    async def rooms(self) -> list[str]:
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.shard_count):
                pipe.smembers(self.keys.rooms(shard))
            results = await pipe.execute()
        return sorted(member.decode() for members in results for member in members)

    async def save_seed(self, room: str, seed: bytes) -> bool:
        return bool(await self.client.set(self.keys.seed(room), seed, nx=True))

    async def load_seed(self, room: str) -> bytes | None:
        return await self.client.get(self.keys.seed(room))

    async def save_origin(self, room: str, origin: bytes) -> bool:
        return bool(await self.client.set(self.keys.origin(room), origin, nx=True))

    async def save_commit_scheme(self, room: str, scheme: str) -> bool:
        return bool(await self.client.set(self.keys.commit_scheme(room), scheme, nx=True))

    async def load_commit_scheme(self, room: str) -> str | None:
        found = await self.client.get(self.keys.commit_scheme(room))
        return found.decode() if found is not None else None

    async def load_origin(self, room: str) -> bytes | None:
        return await self.client.get(self.keys.origin(room))

    async def mark_unranked(self, room: str) -> None:
        """Keep ``room`` out of every leaderboard (an imported room or a copy: its history was not played here)."""
        await self.client.sadd(self.keys.unranked(self.keys.shard(room)), room)

    async def save_nonce(self, room: str, nonce: bytes, beside_idle: bool = True) -> str:
        commitment = nonce_commitment(nonce)
        await self.client.hset(self.keys.nonces(room), commitment, nonce)
        return commitment

    async def load_nonces(self, room: str) -> dict[str, bytes]:
        held = await self.client.hgetall(self.keys.nonces(room))
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in held.items()}
