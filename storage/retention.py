"""Trimming the shard streams that carry work, not truth: command streams and feeds, past what was consumed.

The room event streams are the log and are never trimmed. A shard's command stream only carries commands
to the engine (an acknowledged entry's outcome is stored under its command id, its events carry the id),
and a shard's feed is a derived copy of its events for the projector (a rebuild folds the room streams).
Untrimmed, both grow by every command and event for ever: about 0.3 KB of Redis memory per command,
as much as the command's dedupe record and events together for a short command (docs/capacity.md).

Each trim is one script on one shard's keys (one Redis Cluster slot), atomic against the consumers it
protects:
- a command stream keeps every entry some consumer group has not acknowledged (its oldest pending entry)
  or not yet been delivered (after its last-delivered id); a stream without a group is left alone;
- a feed keeps every entry after the shard's projector checkpoint (and, while a full rebuild of the shard
  runs, everything: ``Keys.feed_hold``); a shard without a checkpoint is left alone; it also keeps every entry
  after the notifier's cursor (``Keys.notifier_cursor``: the webhooks' notices come from the feeds) while that
  cursor is younger than the notifier hold (``ALMANAC_NOTIFIER_HOLD_S``): a notifier stopped for a while misses
  nothing, and one gone for good holds the feed back no longer than the hold;
- both keep the last ``retain_ms`` of consumed entries too (stream ids are Redis' append times), for
  operators and outside readers of the feed (it is a published channel: docs/api.md, /asyncapi.json).
Trimming is approximate (``XTRIM ... MINID ~``): Redis drops whole stream nodes only, the cheap way, so up
to one node of consumed entries (100 by default) may stay behind the bound.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# Shared Lua: stream ids compared as (ms, seq); the bound of retention from the server's own clock.
_LUA_IDS = """
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function earlier(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end
local function retention_bound(retain_ms)
  local now = redis.call('TIME')
  local cut = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(retain_ms)
  if cut < 0 then cut = 0 end
  return string.format('%.0f-0', cut)
end
"""

# KEYS: 1 command stream. ARGV: 1 retain (ms).
# Returns {entries removed, the group that held the trim back ('' for the retention, or no group), length}.
TRIM_COMMANDS_SCRIPT = _LUA_IDS + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, '', 0} end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return {0, '', redis.call('XLEN', KEYS[1])} end
local bound = retention_bound(ARGV[1])
local held_by = ''
for _, group in ipairs(groups) do
  local info = {}
  for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
  local keep = info['last-delivered-id']
  if tonumber(info['pending']) > 0 then
    keep = redis.call('XPENDING', KEYS[1], info['name'])[2]
  end
  if earlier(keep, bound) then
    bound = keep
    held_by = info['name']
  end
end
local removed = redis.call('XTRIM', KEYS[1], 'MINID', '~', bound)
return {removed, held_by, redis.call('XLEN', KEYS[1])}
"""

# KEYS: 1 feed, 2 the shard's projector checkpoint, 3 the shard's feed hold, 4 the shard's notifier cursor.
# ARGV: 1 retain (ms), 2 notifier hold (ms). Returns the entries removed.
TRIM_FEED_SCRIPT = _LUA_IDS + """
local checkpoint = redis.call('GET', KEYS[2])
if not checkpoint then return 0 end
local bound = retention_bound(ARGV[1])
if earlier(checkpoint, bound) then bound = checkpoint end
local hold = redis.call('GET', KEYS[3])
if hold and earlier(hold, bound) then bound = hold end
local noticed = redis.call('GET', KEYS[4])
if noticed and earlier(noticed, bound) and not earlier(noticed, retention_bound(ARGV[2])) then
  bound = noticed  -- an entry id is its append time: the cursor is younger than the hold
end
return redis.call('XTRIM', KEYS[1], 'MINID', '~', bound)
"""
# A full rebuild sets the shard's checkpoint back to the feed head it read before folding the rooms: the
# feed must keep everything after that head until the rebuild commits, or the projector resuming there
# would never see what was appended (and trimmed) meanwhile. The hold expires in case the rebuild dies.
HOLD_MS = 3_600_000


class CommandsTrim(NamedTuple):
    """What a command stream's trim did: entries removed, the consumer group whose position held it back
    ('' when only the retention did, or no group reads the stream), and the entries left."""

    removed: int
    held_by: str
    length: int


class StreamTrimmer:
    """The two trim scripts, registered on one client (which loads them again on a server that forgot one)."""

    def __init__(self, client: Any, retain_ms: int, notifier_hold_ms: int = 0) -> None:
        self.retain_ms = retain_ms
        self.notifier_hold_ms = notifier_hold_ms
        self._commands = client.register_script(TRIM_COMMANDS_SCRIPT)
        self._feed = client.register_script(TRIM_FEED_SCRIPT)

    async def trim_commands(self, stream: str) -> CommandsTrim:
        """Drop a command stream's entries every consumer group has acknowledged, older than the retention."""
        removed, held_by, length = await self._commands(keys=[stream], args=[self.retain_ms])
        return CommandsTrim(int(removed), held_by.decode() if isinstance(held_by, bytes) else held_by, int(length))

    async def trim_feed(self, feed: str, checkpoint: str, hold: str, noticed: str) -> int:
        """Drop a feed's entries before the checkpoint (applied), the hold and the notifier's cursor (``noticed``,
        while younger than the notifier hold), older than the retention."""
        return int(await self._feed(keys=[feed, checkpoint, hold, noticed],
                                    args=[self.retain_ms, self.notifier_hold_ms]))


async def feed_was_trimmed(client: Any, feed: str) -> bool:
    """True when entries may have been removed from ``feed``: Redis 7 says so (``entries-added`` exceeds the
    length); an older Redis cannot tell, so a feed with entries counts as trimmed (a rebuild is always right).

    A projector starting on such a feed without a checkpoint cannot read the shard's history from it.
    """
    try:
        info = await client.xinfo_stream(feed)
    except Exception as error:  # noqa: BLE001 - "no such key": a feed never written
        if "no such key" in str(error).lower():
            return False
        raise
    added = info.get("entries-added", info.get(b"entries-added"))
    length = int(info.get("length", info.get(b"length")) or 0)
    return length > 0 if added is None else int(added) > length
