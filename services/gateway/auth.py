"""Signed tokens: HMAC-SHA256 over a small JSON claim (room, player, role, expiry) with the server secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

import msgspec

ROLE_PLAYER = "player"
ROLE_AUDITOR = "auditor"
ANY_ROOM = "*"
SECRET_FILE = "gateway.secret"


class Claims(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    player: str
    role: str = ROLE_PLAYER
    exp: int  # unix seconds


class TokenError(Exception):
    """The token is missing, malformed, forged or expired (HTTP 401)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_CLAIMS_DECODER = msgspec.json.Decoder(Claims)


class TokenSigner:
    def __init__(self, secret: str, ttl_s: int) -> None:
        if not secret:
            raise ValueError("the token secret must not be empty")
        self._key = secret.encode()
        self.ttl_s = ttl_s

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, room: str, player: str, role: str = ROLE_PLAYER, ttl_s: int | None = None) -> str:
        exp = int(time.time()) + (self.ttl_s if ttl_s is None else ttl_s)
        body = _b64(msgspec.json.encode(Claims(room=room, player=player, role=role, exp=exp)))
        return f"{body}.{self._mac(body)}"

    def verify(self, token: str) -> Claims:
        body, dot, mac = token.partition(".")
        if not dot or not body or not mac:
            raise TokenError("the token is malformed; expected <claims>.<signature>")
        # Constant-time comparison: a forger learns nothing from how fast a guess is refused.
        if not hmac.compare_digest(mac, self._mac(body)):
            raise TokenError("the token's signature is not valid")
        try:
            claims = _CLAIMS_DECODER.decode(_unb64(body))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            raise TokenError("the token's claims are unreadable") from None
        if claims.exp < time.time():
            raise TokenError("the token has expired; join again or ask for a new one")
        return claims


def resolve_secret(configured: str, data_dir: str) -> str:
    """The configured secret, else one generated once and kept in the data directory (mode 0600)."""
    if configured:
        return configured
    path = Path(data_dir) / SECRET_FILE
    try:
        existing = path.read_text().strip()
        if existing:
            return existing
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = secrets.token_hex(32)
    # O_EXCL: when two processes race, one wins and both then read the winner's secret.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_when_written(path)
    with os.fdopen(fd, "w") as handle:
        handle.write(fresh + "\n")
    return fresh


def _read_when_written(path: Path, attempts: int = 50) -> str:
    # The winner of the O_EXCL race may not have written yet.
    for _ in range(attempts):
        text = path.read_text().strip()
        if text:
            return text
        time.sleep(0.01)
    raise RuntimeError(f"{path} stays empty; delete it or set ALMANAC_SECRET")
