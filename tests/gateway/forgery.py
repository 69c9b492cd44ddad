"""A forger at the store: one stored event rewritten in Redis, the hashes after it re-chained or left as they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import redis

from almanac.events import codec
from almanac.events.envelope import Envelope
from almanac.events.hashing import envelope_hash
from almanac.storage.keys import Keys


def rewrite_event(redis_url: str, shard_count: int, room: str, target: Callable[[Envelope], bool],
                  change: Callable[[dict[str, Any]], dict[str, Any]], rechain: bool) -> int:
    """Rewrite the room's first event ``target`` picks with ``change`` (on its decoded event). With ``rechain`` the
    event and every one after it get hashes that link again (a careful forger); without, its stored hash no longer
    covers its content (a clumsy one). The version rewritten."""
    client = redis.Redis.from_url(redis_url)
    key = Keys(shard_count).events(room)
    envelopes = [codec.decode_envelope(fields[b"e"], room, int(entry_id.split(b"-")[0]))
                 for entry_id, fields in client.xrange(key)]
    index = next(i for i, envelope in enumerate(envelopes) if target(envelope))
    event = change(codec.to_builtins(codec.decode_event(envelopes[index])))
    envelopes[index] = msgspec.structs.replace(envelopes[index], payload=msgspec.msgpack.encode(event))
    if rechain:
        previous = envelopes[index - 1].hash
        for later in range(index, len(envelopes)):
            relinked = msgspec.structs.replace(envelopes[later], previous_hash=previous, hash="")
            envelopes[later] = msgspec.structs.replace(relinked, hash=envelope_hash(relinked))
            previous = envelopes[later].hash
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        for envelope in envelopes:
            pipe.xadd(key, {"e": codec.encode_envelope(envelope)}, id=f"{envelope.version}-0")
        pipe.execute()
    client.close()
    return envelopes[index].version
