"""A signed seat's Ed25519 key in the Python client (dice scheme 3, docs/dice.md): make, keep, sign.

Which bytes are signed is decided in one place, ``almanac.events.signing`` (``command_bytes``, ``join_bytes``; every
byte in docs/bundle-format.md): the client calls it, so the engine checks exactly what the client signs. This module
only holds the key and its one exchange format, the web console's: the private key as PKCS#8 DER in base64 (what the
console keeps in local storage under ``almanac-key:<room>:<player>``). A key file written by ``almanac player-key``
(the 32-byte private key as 64 hex digits) is read too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_der_private_key,
)

from almanac.events.signing import command_bytes, join_bytes

__all__ = ["KeySubstituted", "PlayerKey", "nonce_commitment", "recorded_command_id"]

_RAW_HEX = re.compile(r"[0-9a-fA-F]{64}")


def recorded_command_id(room: str, player: str, client_id: str) -> str:
    """The id the engine records for a client's command id (the one a signature covers, docs/dice.md)."""
    return f"{room}:{player}:{client_id}"


def nonce_commitment(nonce: str | None) -> str | None:
    """The sha256 hex of a join's nonce (64 hex digits), which a signed join covers; None without a nonce."""
    return None if nonce is None else hashlib.sha256(bytes.fromhex(nonce)).hexdigest()


class PlayerKey:
    """A player's Ed25519 key for one signed seat: its public half is registered at join, and every later command
    of the seat carries its signature. Keep ``export()`` with the seat key: without it the seat cannot act."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_key = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def __repr__(self) -> str:  # never the private half
        return f"PlayerKey(public_key={self.public_key[:16]}...)"

    @classmethod
    def generate(cls) -> PlayerKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def import_key(cls, text: str) -> PlayerKey:
        """A key exported by ``export()`` or the web console (base64 PKCS#8), or an ``almanac player-key`` file's
        content (64 hex digits). ValueError for anything else."""
        text = text.strip()
        if _RAW_HEX.fullmatch(text):
            return cls(Ed25519PrivateKey.from_private_bytes(bytes.fromhex(text)))
        try:
            key = load_der_private_key(base64.b64decode(text, validate=True), password=None)
        except (binascii.Error, ValueError, TypeError):
            raise ValueError("not a player key: base64 PKCS#8 (as exported) or 64 hex digits") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("not a player key: the PKCS#8 key is not Ed25519")
        return cls(key)

    def export(self) -> str:
        """The private key as the web console keeps it: PKCS#8 DER, base64. Secret: whoever holds it signs as you."""
        der = self._key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
        return base64.b64encode(der).decode()

    def sign_join(self, room: str, player: str, commitment: str | None) -> str:
        """The join's proof of possession (``events.signing.join_bytes``), as 128 hex digits."""
        return self._key.sign(join_bytes(room, player, self.public_key, commitment)).hex()

    def sign_command(self, room: str, player: str, client_id: str, body: Any, seen_version: int) -> str:
        """A command's signature in the v2 form (``events.signing.command_bytes``) over the version the client saw."""
        recorded = recorded_command_id(room, player, client_id)
        return self._key.sign(command_bytes(room, player, recorded, body, seen_version)).hex()


class KeySubstituted(Exception):
    """The join the server answered registered another key than the one this client sent (an operator's own,
    signed by itself, is valid in every other respect, docs/dice.md): whoever holds that key can act for the seat.
    ``seat`` is the seat as answered (keep it and its checkpoints as evidence); ``registered`` the key it names."""

    def __init__(self, seat: Any, sent: str, registered: str | None) -> None:
        super().__init__(f"the join of {seat.player!r} in {seat.room!r} registered the key {registered!r}, not the "
                         f"key this client sent ({sent[:16]}...): keep the answer and its checkpoint as evidence")
        self.seat = seat
        self.sent = sent
        self.registered = registered


def signed_join(key: PlayerKey | None, room: str, player: str, nonce: str | None) -> dict[str, str]:
    """The fields a join registering ``key`` adds to its body: ``public_key`` and ``signature`` (``POST /rooms``
    sends the signature as ``join_signature``); none without a key."""
    if key is None:
        return {}
    return {"public_key": key.public_key, "signature": key.sign_join(room, player, nonce_commitment(nonce))}


def registered_key(answer: dict[str, Any], player: str) -> tuple[bool, str | None]:
    """Whether a create/join answer holds ``player``'s ``room.player_joined``, and the key it registered."""
    for event in answer.get("events") or ():
        body = event.get("event") if isinstance(event, dict) else None
        if event.get("type") == "room.player_joined" and isinstance(body, dict) and body.get("player") == player:
            return True, body.get("public_key")
    return False, None


def newest_version(answer: Any, seen: int) -> int:
    """The newest room version an answer shows (its ``version``, its checkpoint's), or ``seen`` if not newer: the
    version a signed seat signs its next command over (versions only grow, so the newest is the one seen last)."""
    if not isinstance(answer, dict):
        return seen
    checkpoint = answer.get("checkpoint")
    for value in (answer.get("version"), checkpoint.get("version") if isinstance(checkpoint, dict) else None):
        if isinstance(value, int) and not isinstance(value, bool) and value > seen:
            seen = value
    return seen


def version_moved(error: Any) -> tuple[bool, int | None]:
    """Whether a refusal is ``409 version_moved`` (nothing recorded: sign again over the room's version and resend
    with the same id), and the version it names (``allowed``; None when it names none: read the room's). Any other
    refusal is raised, never retried."""
    if getattr(error, "status", None) != 409 or getattr(error, "code", None) != "version_moved":
        return False, None
    allowed = error.body.get("allowed") if isinstance(getattr(error, "body", None), dict) else None
    return True, allowed if isinstance(allowed, int) and not isinstance(allowed, bool) and allowed >= 0 else None
