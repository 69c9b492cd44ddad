"""The envelope: one stored event of a room, with its place in the room's hash chain."""

from __future__ import annotations

import msgspec


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a room's event stream (entry id ``<version>-0``).

    ``payload`` is the canonical msgpack encoding of the event Struct named by ``type``; ``hash``
    is ``sha256(previous_hash || canonical encoding of every other field)`` (see ``events.hashing``).
    """

    room: str
    version: int
    ruleset: str
    type: str
    payload: bytes
    command_id: str
    player: str
    server_time_ms: int
    previous_hash: str
    hash: str = ""


GENESIS_HASH = "0" * 64
