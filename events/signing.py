"""Player-signed commands (dice scheme 3, docs/dice.md): the bytes a player signs and the Ed25519 check.

A seat that registered a public key at join (``room.player_joined.public_key``) signs each later command, in
one of two forms (docs/bundle-format.md, "Signed commands"):

    v2: b"almanac-command-v2|" + room + b"|" + player + b"|" + command_id + b"|" + seen_version + b"|"
        + canonical_json(body)
    v1: b"almanac-command-v1|" + room + b"|" + player + b"|" + command_id + b"|" + canonical_json(body)

``seen_version`` is the room version the client saw and asks the command to be decided against, as ASCII decimal
digits: recorded in the command record, it is what lets a signed *refusal* stand at one version
only (``events.step.step`` refuses a v2 command only at exactly that version). v1 (no version) is what clients sent
before; the engine still decides it, but a refusal signed in it proves the player sent the command, not where.
``command_id`` is the id the engine records: ``"{room}:{player}:{client id}"`` (the client chooses its id, so it
knows it before sending); ``body`` is the command as recorded (``{"kind": ..., ...}``), ``canonical_json`` is
``events.dice.canonical_json``. The signature is 64 bytes, sent and stored as 128 lowercase hex digits in the
command record. Verification is a pure function of those bytes (no clock, no randomness).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from almanac.events.dice import canonical_json

SIGNATURE_HEX = 128


def command_bytes(room: str, player: str, command_id: str, body: Any, seen_version: int | None = None) -> bytes:
    """The exact bytes a signing player signs for one command (module docstring): the v2 form with the version
    the client saw, the v1 form when ``seen_version`` is None (a record sent without one)."""
    if seen_version is None:
        return b"|".join((b"almanac-command-v1", room.encode(), player.encode(), command_id.encode(),
                          canonical_json(body)))
    return b"|".join((b"almanac-command-v2", room.encode(), player.encode(), command_id.encode(),
                      str(seen_version).encode(), canonical_json(body)))


def join_bytes(room: str, player: str, public_key: str, nonce_commitment: str | None) -> bytes:
    """The bytes a player signs with the key their join registers (proof of possession, docs/dice.md):

        b"almanac-join-v1|" + room + b"|" + player + b"|" + public_key hex + b"|" + nonce_commitment hex

    ``nonce_commitment`` is the sha256 hex of the nonce the player sends, empty when they send none (the server then
    draws theirs). The join's signature is kept in its command record like a command's."""
    return b"|".join((b"almanac-join-v1", room.encode(), player.encode(), public_key.encode(),
                      (nonce_commitment or "").encode()))


@lru_cache(maxsize=4096)
def _public_key(public_key_hex: str) -> Ed25519PublicKey:
    # A seat's key is checked on every command: parsed once (a pure function of the hex).
    return Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex))


def signature_valid(public_key_hex: str, signature_hex: str | None, message: bytes) -> bool:
    """Whether ``signature_hex`` is the key's Ed25519 signature of ``message`` (False for anything malformed)."""
    if not signature_hex or len(signature_hex) != SIGNATURE_HEX:
        return False
    try:
        _public_key(public_key_hex).verify(bytes.fromhex(signature_hex), message)
    except (ValueError, InvalidSignature):
        return False
    return True
