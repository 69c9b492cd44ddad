"""Tokens in isolation: HS256 JWTs, bound, expiring; forged, foreign or malformed ones refused; the secret persists."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from almanac.services.gateway.auth import ROLE_AUDITOR, TokenError, TokenSigner, resolve_secret

SECRET = "s3cret-" + "x" * 64


def test_token_round_trip_binds_room_player_and_role() -> None:
    signer = TokenSigner(SECRET, ttl_s=60)
    claims = signer.verify(signer.issue("room-1", "alice"))
    assert (claims.room, claims.player, claims.role) == ("room-1", "alice", "player")
    assert claims.exp - claims.iat == 60
    assert signer.verify(signer.issue("*", "auditor", ROLE_AUDITOR)).role == ROLE_AUDITOR


def test_a_token_is_a_standard_hs256_jwt_any_jwt_library_reads() -> None:
    token = TokenSigner(SECRET, ttl_s=60).issue("room-1", "alice")
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert {k: claims[k] for k in ("room", "player", "role")} == {"room": "room-1", "player": "alice",
                                                                  "role": "player"}
    assert claims["exp"] > claims["iat"]


def _segment(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_forged_claims_and_foreign_secret_are_refused() -> None:
    signer = TokenSigner(SECRET, ttl_s=60)
    header, body, mac = signer.issue("room-1", "alice").split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["player"] = "mallory"
    with pytest.raises(TokenError, match="signature"):
        signer.verify(f"{header}.{_segment(claims)}.{mac}")
    with pytest.raises(TokenError, match="signature"):
        signer.verify(TokenSigner("other-" + "y" * 32, ttl_s=60).issue("room-1", "alice"))
    for malformed in ("", "no-dot", ".", "abc.", "a.b.c", "abc.\xc3\xa9", "abc.é", "é.é.é", "x" * 5000):
        with pytest.raises(TokenError, match="malformed"):
            signer.verify(malformed)


def test_alg_none_and_foreign_algorithms_are_refused() -> None:
    signer = TokenSigner(SECRET, ttl_s=60)
    claims = {"room": "room-1", "player": "mallory", "role": "auditor", "iat": 1, "exp": 2**40}
    unsigned = f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}."
    with pytest.raises(TokenError, match="algorithm"):
        signer.verify(unsigned)
    # The same secret under another HMAC: a valid signature, but not the algorithm the server issues.
    with pytest.raises(TokenError, match="algorithm"):
        signer.verify(jwt.encode(claims, SECRET, algorithm="HS512"))


def test_missing_or_mistyped_claims_are_refused() -> None:
    signer = TokenSigner(SECRET, ttl_s=60)
    with pytest.raises(TokenError, match="role"):
        signer.verify(jwt.encode({"room": "r", "player": "p", "iat": 1, "exp": 2**40}, SECRET, algorithm="HS256"))
    with pytest.raises(TokenError, match="malformed"):
        signer.verify(jwt.encode({"room": 5, "player": "p", "role": "player", "iat": 1, "exp": 2**40}, SECRET,
                                 algorithm="HS256"))


def test_expired_token_is_refused() -> None:
    signer = TokenSigner(SECRET, ttl_s=60)
    with pytest.raises(TokenError, match="expired"):
        signer.verify(signer.issue("room-1", "alice", ttl_s=-1))


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        TokenSigner("s3cret", ttl_s=60)


def test_secret_is_generated_once_and_kept(tmp_path) -> None:
    first = resolve_secret("", str(tmp_path))
    assert len(first) == 64 and resolve_secret("", str(tmp_path)) == first
    assert (tmp_path / "gateway.secret").stat().st_mode & 0o077 == 0
    assert resolve_secret("configured", str(tmp_path)) == "configured"


def test_the_claims_issued_with_a_token_are_the_claims_its_verification_gives() -> None:
    """The gateway remembers the tokens it issues as verified (their first command checks no signature): what
    it remembers must be exactly what checking the signature would have given."""
    signer = TokenSigner(SECRET, ttl_s=60)
    token, claims = signer.issue_with_claims("room-1", "alice")
    assert signer.verify(token) == claims
    token, claims = signer.issue_with_claims("*", "auditor", ROLE_AUDITOR, ttl_s=5)
    assert signer.verify(token) == claims and claims.exp - claims.iat == 5


def test_a_token_may_name_its_rooms_rules_and_one_that_does_not_says_nothing() -> None:
    """A token issued at creation or join names the room's rules, so any gateway knows them without a read;
    one that does not know them (``almanac token``, tokens issued before) carries no such claim at all."""
    signer = TokenSigner(SECRET, ttl_s=60)
    token, claims = signer.issue_with_claims("room-1", "alice", ruleset="realm@2")
    assert signer.verify(token) == claims and claims.ruleset == "realm@2"
    assert jwt.decode(token, SECRET, algorithms=["HS256"])["ruleset"] == "realm@2"
    plain = signer.issue("room-1", "alice")
    assert signer.verify(plain).ruleset == "" and "ruleset" not in jwt.decode(plain, SECRET, algorithms=["HS256"])
