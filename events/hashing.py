"""Canonical hashes: the state hash and the per-room event hash chain."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from almanac.events.envelope import Envelope

# Sorted map keys make the encoding independent of dict insertion order (and of PYTHONHASHSEED).
_CANONICAL = msgspec.msgpack.Encoder(order="deterministic")


def canonical_bytes(value: Any) -> bytes:
    return _CANONICAL.encode(value)


def state_hash(state: Any) -> str:
    """The hash of the canonical msgpack encoding of a state.

    A Struct may name fields added after states were first hashed in ``_hash_omits_empty``: such a field is
    left out of the encoding while it is empty, so every state recorded before it existed (the golden
    corpus's state hashes) keeps its hash; when set, the bytes are exactly the Struct's own encoding.
    """
    omits = getattr(type(state), "_hash_omits_empty", ())
    if omits and any(not getattr(state, name) for name in omits):
        return hashlib.sha256(_encode_without_empty(state, omits)).hexdigest()
    return hashlib.sha256(_CANONICAL.encode(state)).hexdigest()


def _encode_without_empty(state: Any, omits: tuple[str, ...]) -> bytes:
    """``state`` encoded as msgspec encodes a Struct (a map of its fields in order) minus its empty ``omits``."""
    kept = [f for f in msgspec.structs.fields(state) if not (f.name in omits and not getattr(state, f.name))]
    count = len(kept)
    header = bytes([0x80 | count]) if count < 16 else b"\xde" + count.to_bytes(2, "big")
    return header + b"".join(_CANONICAL.encode(f.encode_name) + _CANONICAL.encode(getattr(state, f.name))
                             for f in kept)


def envelope_hash(envelope: Envelope) -> str:
    """The chain hash of an envelope: covers every field but the hash itself, chained to the previous."""
    body = _CANONICAL.encode(
        (
            envelope.room,
            envelope.version,
            envelope.ruleset,
            envelope.type,
            envelope.payload,
            envelope.command_id,
            envelope.player,
            envelope.server_time_ms,
        )
    )
    return hashlib.sha256(envelope.previous_hash.encode() + body).hexdigest()


def seal(envelope: Envelope) -> Envelope:
    """The envelope with its own hash filled in."""
    return msgspec.structs.replace(envelope, hash=envelope_hash(envelope))


def first_broken_link(envelopes: list[Envelope], previous_hash: str | None = None) -> tuple[int, str] | None:
    """The first version whose chain link or own hash is wrong, with the reason; None if the chain holds.

    ``previous_hash`` is the hash the first envelope must point at (the genesis hash for version 1).
    """
    expected_previous = previous_hash
    expected_version = envelopes[0].version if envelopes else 0
    for envelope in envelopes:
        if envelope.version != expected_version:
            return envelope.version, f"expected version {expected_version}, found {envelope.version}"
        if expected_previous is not None and envelope.previous_hash != expected_previous:
            return envelope.version, "previous hash does not match the hash of the event before it"
        if envelope_hash(envelope) != envelope.hash:
            return envelope.version, "stored hash does not match the event's content"
        expected_previous = envelope.hash
        expected_version += 1
    return None
