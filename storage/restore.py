"""Bringing a room archived because it was idle back into Redis, exactly once, for a command the rules accept.

A room still being played but untouched for ALMANAC_ARCHIVE_IDLE_AFTER is moved to the archive like a finished one
(storage.archive, ``archive_room(reason="idle")``); its commit point also deletes the room's version key, so no
writer can append to it while it is archived (an append compares the version: a conflict, and the writer loads
again). The engine's load meets the pointer; it decides the command against the archived state, writing nothing
of the room (services.room_service ``RoomService.handle``): a refusal is recorded after the pointer and the room
stays archived; an accepted command has ``ArchivingStore.restore_idle`` call ``restore_room`` and is decided again on
the room in Redis. ``restore_room`` is ONE script on the room's slot that, only while the pointer is still the one
read,

- writes back what the delete step removed (when it ran): the envelopes byte for byte at their versions, the
  command records, the refusal records (the archived ones first, then those recorded in Redis after the pointer),
  the archived commands' outcomes (into the room's id index), the seed, the nonces, a copy's origin;
- sets the room's version, and removes the room's pointer (its field of the shard's pointer hash).

When the delete step has not run yet, Redis still holds the room as checked against the object: the script only
restores the version key and removes the pointer. Two engines (or an engine and a stale one) racing: one script
finds the pointer and restores, the other finds it gone ("gone") and simply loads from Redis. The archiver racing:
its delete step checks the pointer is still there, so a restored room is never deleted; its commit step checks the
version, so a room that moved is not archived. The object stays in the store (it is named by its digest; a later
idle move of the same room writes a new one): the pointer, not the object, says where a room lives. The script
notes the object's digest in the shard's ``Keys.superseded`` hash, and the room's next move to the archive, once
its new pointer is recorded, removes the object (``storage.archive.remove_superseded``): until then it is a copy of
the room's older history, and no reader is sent to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from almanac.storage.redis_store import decode_kept, ids_field

if TYPE_CHECKING:
    from almanac.storage.archive import ArchivingStore, Pointer

# KEYS: 1 the shard's pointer hash, 2 events, 3 version, 4 commands, 5 rejected, 6 seed, 7 nonces, 8 origin, 9 the
# commitment scheme, 10 the shard's superseded objects, 11 the room's id index, 12.. the refusals' dedupe records.
# ARGV: 1 the
# pointer (must still be it), 2 version, 3 room, 4 envelope count, 5 command record count, 6 refusal count, 7 nonce
# count, 8 seed ('-' none, else '+' and the bytes), 9 origin (the same), 10 the commitment scheme (the same: a v2
# room must come back v2, or its heads, and every checkpoint its players hold, would change), 11 the object's
# digest (noted as superseded), then the envelopes, (first version, record) per command, the refusal records,
# (commitment, nonce) per nonce, one record per KEYS[12..], then (id index field, "first:last") per accepted
# command: its resend is answered from the index (storage.redis_store._DEDUPE_LUA), as after its record expired.
RESTORE_SCRIPT = """
if redis.call('HGET', KEYS[1], ARGV[3]) ~= ARGV[1] then return 'gone' end
local version = tonumber(ARGV[2])
local events, commands, refusals, nonces = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if redis.call('EXISTS', KEYS[2]) == 0 then
  local a = 12
  for i = 1, events do redis.call('XADD', KEYS[2], i .. '-0', 'e', ARGV[a]); a = a + 1 end
  redis.call('DEL', KEYS[4])
  for i = 1, commands do redis.call('XADD', KEYS[4], ARGV[a] .. '-0', 'c', ARGV[a + 1]); a = a + 2 end
  local later = redis.call('XRANGE', KEYS[5], '-', '+')
  redis.call('DEL', KEYS[5])
  for i = 1, refusals do redis.call('XADD', KEYS[5], '*', 'c', ARGV[a]); a = a + 1 end
  for _, entry in ipairs(later) do redis.call('XADD', KEYS[5], '*', unpack(entry[2])) end
  for i = 1, nonces do redis.call('HSETNX', KEYS[7], ARGV[a], ARGV[a + 1]); a = a + 2 end
  if string.sub(ARGV[8], 1, 1) == '+' then redis.call('SET', KEYS[6], string.sub(ARGV[8], 2), 'NX') end
  if string.sub(ARGV[9], 1, 1) == '+' then redis.call('SET', KEYS[8], string.sub(ARGV[9], 2), 'NX') end
  if string.sub(ARGV[10], 1, 1) == '+' then redis.call('SET', KEYS[9], string.sub(ARGV[10], 2), 'NX') end
  for i = 12, #KEYS do redis.call('SET', KEYS[i], ARGV[a], 'NX'); a = a + 1 end
  while a < #ARGV do redis.call('HSETNX', KEYS[11], ARGV[a], ARGV[a + 1]); a = a + 2 end
end
redis.call('SET', KEYS[3], version)
redis.call('HDEL', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[10], ARGV[3], (redis.call('HGET', KEYS[10], ARGV[3]) or '') .. ARGV[11])
return 'ok'
"""


def _optional(value: bytes | None) -> bytes:
    return b"-" if value is None else b"+" + value


async def restore_room(store: ArchivingStore, pointer: Pointer) -> str:
    """Bring ``pointer``'s room back into Redis: "ok" (this call did), or "gone" (someone already had: the
    pointer is no longer this one). Either way Redis holds the room afterwards and no pointer names it."""
    from almanac.storage.archive import ArchiveError, encode_pointer  # it builds on this module

    room, keys = pointer.room, store.keys
    try:
        archived = await store.objects.get(pointer)
    except ArchiveError:
        # Its object is gone only once the room came back and moved to the archive again (remove_superseded):
        # then another pointer (or none) names the room, and the caller loads it from where it is now.
        if await store.client.hget(keys.pointer_bucket(room), room) != encode_pointer(pointer):
            store.forget_archived(room)
            return "gone"
        raise
    outcome_ids = sorted(archived.outcomes)
    args: list = [encode_pointer(pointer), archived.version, room, len(archived.events), len(archived.commands),
                  len(archived.rejections), len(archived.nonces), _optional(archived.seed),
                  _optional(archived.origin),
                  _optional(None if archived.commit_scheme is None else archived.commit_scheme.encode()),
                  pointer.digest, *archived.events]
    for first_version, record in archived.commands:
        args += [first_version, record]
    args += archived.rejections
    for commitment, nonce in sorted(archived.nonces.items()):
        args += [commitment, nonce]
    outcomes = {command_id: decode_kept(room, archived.outcomes[command_id]) for command_id in outcome_ids}
    refused = [command_id for command_id in outcome_ids if not outcomes[command_id].accepted]
    args += [archived.outcomes[command_id] for command_id in refused]
    for command_id in outcome_ids:
        if outcomes[command_id].accepted:
            args += [ids_field(keys.command_outcome(room, command_id)),
                     f"{outcomes[command_id].first_version}:{outcomes[command_id].last_version}"]
    script = getattr(store, "_restore_script", None)
    if script is None:
        script = store._restore_script = store.client.register_script(RESTORE_SCRIPT)
    status = await script(keys=[keys.pointer_bucket(room), keys.events(room), keys.version(room),
                                keys.commands(room), keys.rejected(room), keys.seed(room), keys.nonces(room),
                                keys.origin(room), keys.commit_scheme(room),
                                keys.superseded(keys.shard(room)), keys.command_ids(room),
                                *[keys.command_outcome(room, command_id) for command_id in refused]],
                          args=args)
    status = status.decode() if isinstance(status, bytes) else status
    store.forget_archived(room)
    return status
