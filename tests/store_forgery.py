"""A forger at the store: a stored event rewritten (in memory or in Redis), re-sealed or not, or one appended as decided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import redis

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import seal
from almanac.events.step import CommandRecord
from almanac.storage.keys import Keys
from almanac.storage.memory_store import MemoryEventStore


def with_event(envelope: Envelope, change: Callable[[dict[str, Any]], None]) -> Envelope:
    """The envelope with its event changed in place by ``change(event as builtins)``; not re-sealed."""
    event = codec.to_builtins(codec.decode_event(envelope))
    change(event)
    return msgspec.structs.replace(envelope, payload=codec.encode(event))


def rewritten(envelopes: list[Envelope], version: int, change: Callable[[Envelope], Envelope], *,
              reseal: bool) -> list[Envelope]:
    """The chain with the envelope at ``version`` replaced by ``change(envelope)``. With ``reseal`` it and every one
    after it are sealed again onto the one before (a careful forger: every hash agrees, only re-deciding can tell);
    without, its stored hash no longer covers its content (a clumsy one)."""
    chain = list(envelopes)
    index = next(i for i, envelope in enumerate(chain) if envelope.version == version)
    chain[index] = change(chain[index])
    if reseal:
        previous = chain[index - 1].hash if index else GENESIS_HASH
        for later in range(index, len(chain)):
            chain[later] = seal(msgspec.structs.replace(chain[later], previous_hash=previous))
            previous = chain[later].hash
    return chain


async def rewrite_in_memory(store: MemoryEventStore, room: str, version: int, change: Callable[[Envelope], Envelope],
                            *, reseal: bool) -> None:
    """``rewritten`` applied to the room's log in a memory store, entry by entry."""
    before = await store.read(room)
    for old, new in zip(before, rewritten(before, version, change, reseal=reseal), strict=True):
        if new != old:
            store.tamper(room, new.version, codec.encode_envelope(new))


def rewrite_in_redis(redis_url: str, shard_count: int, room: str, target: Callable[[Envelope], bool],
                     change: Callable[[dict[str, Any]], None], *, reseal: bool) -> int:
    """The room's first event ``target`` picks changed in Redis by ``change`` (on its event, in place; see
    ``with_event``) and ``rewritten`` with ``reseal``, the stream written again. The version rewritten."""
    client = redis.Redis.from_url(redis_url)
    key = Keys(shard_count).events(room)
    envelopes = [codec.decode_envelope(fields[b"e"], room, int(entry_id.split(b"-")[0]))
                 for entry_id, fields in client.xrange(key)]
    version = next(envelope.version for envelope in envelopes if target(envelope))
    envelopes = rewritten(envelopes, version, lambda envelope: with_event(envelope, change), reseal=reseal)
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        for envelope in envelopes:
            pipe.xadd(key, {"e": codec.encode_envelope(envelope)}, id=f"{envelope.version}-0")
        pipe.execute()
    client.close()
    return version


async def operator_appends(store, record: CommandRecord, event: msgspec.Struct) -> Envelope:
    """What an operator holding the store can do: append ``event`` to ``record``'s room as decided by ``record``,
    sealed onto the chain, the record stored beside it. The envelope appended."""
    head = (await store.read(record.room))[-1]
    event_type, payload = codec.encode_event(event)
    forged = seal(Envelope(room=record.room, version=head.version + 1, ruleset=head.ruleset, type=event_type,
                           payload=payload, command_id=record.command_id, player=record.player,
                           server_time_ms=record.server_time_ms, previous_hash=head.hash))
    await store.append(record.room, head.version, record.command_id, [forged], codec.encode(record))
    return forged
