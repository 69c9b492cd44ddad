"""Tokens in isolation: signed, bound, expiring; forged or malformed ones refused; the secret persists."""

from __future__ import annotations

import base64
import json

import pytest

from almanac.services.gateway.auth import ROLE_AUDITOR, TokenError, TokenSigner, resolve_secret


def test_token_round_trip_binds_room_player_and_role() -> None:
    signer = TokenSigner("s3cret", ttl_s=60)
    claims = signer.verify(signer.issue("room-1", "alice"))
    assert (claims.room, claims.player, claims.role) == ("room-1", "alice", "player")
    assert signer.verify(signer.issue("*", "auditor", ROLE_AUDITOR)).role == ROLE_AUDITOR


def test_forged_claims_and_foreign_secret_are_refused() -> None:
    signer = TokenSigner("s3cret", ttl_s=60)
    body, _, mac = signer.issue("room-1", "alice").partition(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["player"] = "mallory"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError, match="signature"):
        signer.verify(f"{forged}.{mac}")
    with pytest.raises(TokenError, match="signature"):
        signer.verify(TokenSigner("other", ttl_s=60).issue("room-1", "alice"))
    for malformed in ("", "no-dot", ".", "abc."):
        with pytest.raises(TokenError):
            signer.verify(malformed)


def test_expired_token_is_refused() -> None:
    signer = TokenSigner("s3cret", ttl_s=60)
    with pytest.raises(TokenError, match="expired"):
        signer.verify(signer.issue("room-1", "alice", ttl_s=-1))


def test_secret_is_generated_once_and_kept(tmp_path) -> None:
    first = resolve_secret("", str(tmp_path))
    assert len(first) == 64 and resolve_secret("", str(tmp_path)) == first
    assert (tmp_path / "gateway.secret").stat().st_mode & 0o077 == 0
    assert resolve_secret("configured", str(tmp_path)) == "configured"
