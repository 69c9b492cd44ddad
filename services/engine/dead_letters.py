"""A command that keeps failing, set aside: its attempts counted per failure reason, then a dead letter."""

from __future__ import annotations

import time
from typing import Any

from almanac.events.step import CommandRecord
from almanac.services.room_service import Outcome
from almanac.storage.command_streams import GROUP
from almanac.storage.keys import Keys, attempts_key

# Count one failed attempt of a stream entry; a different failure reason starts the count again.
# KEYS: 1 attempts hash; ARGV: 1 entry id, 2 reason
ATTEMPT_SCRIPT = """
local previous = redis.call('HGET', KEYS[1], ARGV[1])
local count = 1
if previous then
  local sep = string.find(previous, '|', 1, true)
  if string.sub(previous, sep + 1) == ARGV[2] then count = tonumber(string.sub(previous, 1, sep - 1)) + 1 end
end
redis.call('HSET', KEYS[1], ARGV[1], count .. '|' .. ARGV[2])
return count
"""


# KEYS: 1 dead-letter stream, 2 command stream, 3 attempts hash; ARGV: 1 group, 2 entry id, 3.. letter fields
DEAD_LETTER_SCRIPT = """
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
return 1
"""


class DeadLetters:
    """A shard's failed attempts (a hash by entry id) and its dead-letter stream."""

    def __init__(self, client: Any, keys: Keys, prefix: str, engine: str, log: Any) -> None:
        self.keys, self.prefix, self.engine, self.log = keys, prefix, engine, log
        self._attempt = client.register_script(ATTEMPT_SCRIPT)
        self._dead_letter_script = client.register_script(DEAD_LETTER_SCRIPT)

    async def attempt(self, shard: int, entry_id: bytes, reason: str) -> int:
        """Count one failed attempt of the entry; how many in a row failed for this reason."""
        return int(await self._attempt(keys=[attempts_key(shard, self.prefix)], args=[entry_id, reason]))

    async def set_aside(self, shard: int, entry_id: bytes, data: bytes, record: CommandRecord | None,
                        reason: str, attempts: int) -> Outcome | None:
        """Move the entry to the shard's dead letters (acknowledged in the same script); the refusal its client
        is answered with (None when the entry could not even be decoded)."""
        stream = self.keys.command_stream(shard)
        letter = {
            "entry_id": entry_id,
            "data": data,
            "reason": reason,
            "attempts": attempts,
            "engine": self.engine,
            "time_ms": int(time.time() * 1000),
            "room": record.room if record else "",
            "command_id": record.command_id if record else "",
        }
        # One script (all keys share the shard's hash tag): the letter exists iff the entry is acked.
        fields = [item for pair in letter.items() for item in pair]
        await self._dead_letter_script(
            keys=[self.keys.dead_letters(shard), stream, attempts_key(shard, self.prefix)],
            args=[GROUP, entry_id, *fields],
        )
        self.log.error("command.dead_lettered", shard=shard, entry=entry_id.decode(), reason=reason,
                       attempts=attempts, room=letter["room"], command_id=letter["command_id"])
        if record is None:
            return None
        return Outcome(
            command_id=record.command_id,
            room=record.room,
            accepted=False,
            error={"code": "engine.dead_letter",
                   "message": f"the engine could not process this command ({reason}); it was set aside"},
        )
