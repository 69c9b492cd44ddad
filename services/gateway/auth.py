"""Tokens: standard JWTs (RFC 7519) signed HS256 with the server secret; claims room, player, role, iat, exp, ruleset."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
import time
from typing import Any

import jwt
import msgspec
from jwt.utils import base64url_decode, base64url_encode

from almanac.services.data_secrets import file_secret
from almanac.services.settings import MIN_SECRET_BYTES

ROLE_PLAYER = "player"
ROLE_AUDITOR = "auditor"
ANY_ROOM = "*"
SECRET_FILE = "gateway.secret"
# The one algorithm issued and accepted: a token naming any other (``none``, RS256, HS512...) is refused
# before its signature is looked at, so nobody can choose how their token is checked.
ALGORITHM = "HS256"
REQUIRED_CLAIMS = ["room", "player", "role", "exp", "iat"]
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
MALFORMED = ("the token is malformed; expected a JWT (header.claims.signature) as issued: three base64url parts "
             "without padding")


class Claims(msgspec.Struct, frozen=True, kw_only=True):
    room: str
    player: str
    role: str = ROLE_PLAYER
    exp: int  # unix seconds
    iat: int = 0  # unix seconds
    # The room's rules as its events name them (``realm@2``), so that any gateway knows them from the token;
    # "" in tokens that do not say (issued before, or by ``almanac token``): then the room's first event does.
    ruleset: str = ""


class TokenError(Exception):
    """The token is missing, malformed, forged, of a foreign algorithm or expired (HTTP 401)."""


class TokenSigner:
    """Issues and verifies the gateway's JWTs (PyJWT), so any JWT tool can read one's claims."""

    def __init__(self, secret: str, ttl_s: int) -> None:
        if len(secret.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"the token secret must be at least {MIN_SECRET_BYTES} bytes (HS256, RFC 7518 3.2)")
        self._key = secret
        self.ttl_s = ttl_s

    def keyed_id(self, purpose: str, *parts: str) -> str:
        """An id only this deployment can derive (HMAC under the token secret, separated by ``purpose``): for the
        ids of commands the gateway sends on a player's behalf, which no client may send first under the same id."""
        message = "\x00".join((purpose, *parts)).encode()
        return hmac.new(self._key.encode(), message, hashlib.sha256).hexdigest()[:32]

    def issue(self, room: str, player: str, role: str = ROLE_PLAYER, ttl_s: int | None = None,
              ruleset: str = "") -> str:
        return self.issue_with_claims(room, player, role, ttl_s, ruleset)[0]

    def issue_with_claims(self, room: str, player: str, role: str = ROLE_PLAYER,
                          ttl_s: int | None = None, ruleset: str = "") -> tuple[str, Claims]:
        """A new token and the claims it carries (what ``verify`` would return for it)."""
        now = int(time.time())
        exp = now + (self.ttl_s if ttl_s is None else ttl_s)
        claims = Claims(room=room, player=player, role=role, iat=now, exp=exp, ruleset=ruleset)
        payload = msgspec.structs.asdict(claims)
        if not ruleset:
            del payload["ruleset"]  # unknown here: the token says nothing rather than something empty
        return jwt.encode(payload, self._key, algorithm=ALGORITHM), claims

    def verify(self, token: str) -> Claims:
        if not canonical(token):
            # PyJWT decodes base64 leniently: padding ("...sig="), other trailing bits, and so many spellings
            # of one token would each be a token string of their own (so many caches, so many counters).
            raise TokenError(MALFORMED)
        try:
            payload = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                # iat is informative only: a gateway whose clock runs a little behind the issuer's must
                # not refuse a fresh token as "issued in the future". Expiry is checked, with no leeway.
                options={"require": REQUIRED_CLAIMS, "verify_iat": False},
            )
            return msgspec.convert(payload, Claims)
        except jwt.ExpiredSignatureError:
            raise TokenError("the token has expired; join again or ask for a new one") from None
        except jwt.InvalidAlgorithmError:
            raise TokenError(f"the token's algorithm is not accepted; tokens are {ALGORITHM} JWTs") from None
        except jwt.InvalidSignatureError:
            raise TokenError("the token's signature is not valid") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenError(f"the token lacks the claim {error.claim!r}") from None
        except (jwt.PyJWTError, msgspec.ValidationError, ValueError, TypeError):
            # Anything else (not three base64url segments, non-ASCII, unreadable JSON, wrong claim types)
            # is a malformed token: a 401 with a fixed message, never the decoder's text or a 500.
            raise TokenError(MALFORMED) from None


def canonical(token: str) -> bool:
    """The token is three base64url parts (RFC 7515: no padding), each the one encoding of its bytes."""
    parts = token.split(".")
    if len(parts) != 3 or not all(_BASE64URL.fullmatch(part) for part in parts):
        return False
    try:
        return all(base64url_encode(base64url_decode(part)).decode() == part for part in parts)
    except (ValueError, binascii.Error):  # a part of 4n+1 characters encodes no bytes
        return False


def resolve_secret(configured: str, data_dir: str) -> str:
    """The configured secret, else one generated once and kept in the data directory (mode 0600)."""
    if configured:
        return configured
    return file_secret(data_dir, SECRET_FILE, "ALMANAC_SECRET")


def deployment_signer(settings: Any) -> TokenSigner:
    """The deployment's token signer (ALMANAC_SECRET, else the data directory's): the gateway's, `almanac token`'s
    and the bots process's, which mints the token of a seat the room handed to a bot."""
    return TokenSigner(resolve_secret(settings.secret, settings.data_dir), settings.token_ttl_s)
