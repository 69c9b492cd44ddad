"""A room's history under another room id: every envelope and command record relabelled, the chain re-sealed.

The chain hashes cover the room id, and the dice are salted with it, so a copy of a room under a new id
(``almanac import FILE --as NEW``) cannot keep the original hashes. The copy is the same history
relabelled: each envelope's ``room`` becomes the new id and every hash is recomputed from the genesis
hash; each command record's ``room`` becomes the new id. The copy records its origin ({room, version,
hash}: the original's head when copied), and ``verify`` proves the copy by relabelling its first
``version`` entries back to the origin id: they must re-seal to exactly the origin's head hash, and
they are re-decided as the origin (whose id salted the dice). Relabelling is its own inverse.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import seal
from almanac.events.step import decode_record


def relabel(envelopes: Iterable[Envelope], room: str, previous_hash: str = GENESIS_HASH) -> list[Envelope]:
    """``envelopes`` (consecutive, from the one after ``previous_hash``) as ``room``'s, re-sealed."""
    result: list[Envelope] = []
    for envelope in envelopes:
        envelope = seal(msgspec.structs.replace(envelope, room=room, previous_hash=previous_hash))
        previous_hash = envelope.hash
        result.append(envelope)
    return result


def relabel_record(data: bytes, room: str) -> bytes:
    """A stored command record (accepted or refused) as ``room``'s."""
    return codec.encode(msgspec.structs.replace(decode_record(data), room=room))
