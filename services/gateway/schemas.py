"""Request bodies as msgspec Structs, decoded with field-level messages, and their OpenAPI schemas."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from almanac.events import codec
from almanac.events.schema import NAME_PATTERN as STRICT_NAME_PATTERN
from almanac.services.bots import MAX_DELAY_MS as MAX_BOT_DELAY_MS
from almanac.services.gateway.errors import ApiError

_NAMED_FIELD = re.compile(r"(?:unknown|required) field `([^`]+)`")
# For FastAPI path and query parameters (pydantic's regex engine: `$` is the end of the text there).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
# The largest room version a query may name: every integer a client sends is bounded (Redis stream ids
# stop at 2**64 - 1; 2**53 also survives a JavaScript client).
MAX_VERSION = 2**53
# A listing's pages (GET /rooms, GET /status/rooms): a bounded page size and the opaque cursor an answer's
# ``next_cursor`` hands out (projections.read_model_queries.ReadModels.rooms_page); a call's cost is one page's, not every room's.
DEFAULT_PAGE = 50
MAX_PAGE = 500
PAGE_CURSOR_PATTERN = r"^[A-Za-z0-9_\-]{1,512}$"
# Bodies decode with msgspec (Python's `re`, where `$` also matches before a final newline): the
# write model's pattern, which refuses "alice\n".
Name = Annotated[str, msgspec.Meta(pattern=STRICT_NAME_PATTERN, description="letters, digits, _ . -; at most 64")]
# A player's secret nonce (scheme-2 dice) or its sha256 commitment: 32 bytes as 64 lowercase hex digits.
Hex32 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}(?!\n)$", min_length=64, max_length=64,
                                    description="32 bytes as 64 lowercase hex digits")]
# An Ed25519 signature (64 bytes) as 128 lowercase hex digits (events.signing).
SignatureHex = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{128}(?!\n)$", min_length=128, max_length=128,
                                           description="Ed25519 signature, 64 bytes as 128 lowercase hex digits")]
# The room version a client saw when it sent a command (events.step.CommandRecord.seen_version).
SeenVersion = Annotated[int, msgspec.Meta(ge=0, le=MAX_VERSION, description="the room version the client saw "
                                          "(its latest checkpoint's); covered by the v2 signed form")]
COMMAND_ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,100}(?!\n)$"
CommandId = Annotated[str, msgspec.Meta(pattern=COMMAND_ID_PATTERN, description="client id for idempotent retries")]
_COMMAND_ID = re.compile(COMMAND_ID_PATTERN)
def checked_idempotency_key(value: str | None) -> str | None:
    """An Idempotency-Key header held to the body's ``command_id`` schema: 422 ``invalid_idempotency_key`` (nothing
    done) for one that is not (a header of other bytes, read as Latin-1, fails it too)."""
    if not value:  # absent, or sent empty: no key (as the command path's own reading has it)
        return None
    if _COMMAND_ID.match(value):
        return value
    raise ApiError(422, "invalid_idempotency_key", "Idempotency-Key is a command id: 1-100 of A-Z a-z 0-9 _ . : -",
                   "Idempotency-Key")


class CreateRoomRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Create a room; the creator joins it too unless ``join`` is false."""

    ruleset: str
    player: Name
    room: Name | None = None
    options: dict[str, Any] = {}
    setup: dict[str, Any] | None = None
    challenge: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    join: bool = True
    command_id: CommandId | None = None
    # The dice construction (docs/dice.md): 3 (command-bound, signed seats) unless 1 or 2 is asked for.
    dice_scheme: Annotated[int, msgspec.Meta(ge=1, le=3)] | None = None
    # The creator's own join (see JoinRoomRequest).
    nonce: Hex32 | None = None
    nonce_commitment: Hex32 | None = None
    public_key: Hex32 | None = None
    join_signature: SignatureHex | None = None  # JoinRoomRequest.signature of the creator's join
    # Seats handed to bots (services/bots.py, `almanac bots`): each bot joins its seat and plays it from the
    # seat's view. Not the creator's own seat while ``join`` is true (422 ``bot_seat_taken``); each a seat of the
    # room (422 ``no_seat``), named once (422 ``duplicate_bot_seat``).
    bots: Annotated[tuple[Name, ...], msgspec.Meta(max_length=16)] = ()
    # How long the room's bots wait before each move, after the room's newest event (services/bots.py ``set_delay``,
    # as `almanac bots add --delay`): 0 (none) .. 60,000 ms; only with ``bots``, ``bot_after_missed`` or
    # ``seat_bots`` (the seats handed later move with it; else 422 ``bot_delay_without_bots``).
    bot_delay_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_BOT_DELAY_MS)] = 0
    # A seat that misses this many of the rules' deadlines in a row is handed to a bot (1 .. 100; absent: never):
    # the room records it (``room.bot_policy``) and decides each handover as an event (``room.seat_to_bot``).
    bot_after_missed: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    # Players may leave their own seats to a bot (POST /rooms/{room}/bots): recorded as ``room.bot_policy``
    # (``after_missed`` 0 without ``bot_after_missed``, which implies it). A room created without either refuses
    # it (422 ``no_bot_policy``). Any rule-set with a seat bot, deadlines or not.
    seat_bots: bool = False


class BotSeatRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hand a seat of the room to a bot (POST /rooms/{room}/bots): an empty seat (the room's creator or an
    auditor), or your own seat, which you leave to the bot (``command_id`` and ``signature`` as for any command
    of a signing seat: the command is ``{"kind": "hand_to_bot"}``)."""

    seat: Name
    command_id: CommandId | None = None
    signature: SignatureHex | None = None
    # The room version the client saw, as for a command (CommandRequest.seen_version).
    seen_version: SeenVersion | None = None


class JoinRoomRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Take a seat. In a scheme-2 room, ``nonce`` is the player's secret contribution to the dice (kept
    by the server beside the room's seed, revealed when the room ends); ``nonce_commitment``, when
    given, must be its sha256. Without a nonce the server draws one for the player and says so."""

    player: Name
    command_id: CommandId | None = None
    nonce: Hex32 | None = None
    nonce_commitment: Hex32 | None = None
    # Scheme 3: the player's Ed25519 public key (32 bytes hex); every later command of the seat must then be
    # signed (``CommandRequest.signature``), so a token alone cannot act for this player.
    public_key: Hex32 | None = None
    # With a public_key, required: its Ed25519 signature of events.signing.join_bytes (room, player, public_key,
    # the nonce's commitment), proving the joining player holds the key; kept in the join's record, checked by verify.
    signature: SignatureHex | None = None


# A seat key as the server makes them (secrets.token_urlsafe(32): 43 characters of the URL-safe alphabet)
SeatKeyText = Annotated[str, msgspec.Meta(min_length=43, max_length=43, pattern=r"^[A-Za-z0-9_-]{43}$")]


class ReclaimSeatRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Take one's seat back: the player's name and the seat key their join answer carried."""

    player: Name
    seat_key: SeatKeyText


class EndRoomRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] = "ended by a player"
    command_id: CommandId | None = None
    # A signing seat signs {"kind": "end_room", "reason": reason} like any command (docs/dice.md).
    signature: SignatureHex | None = None
    # The room version the client saw, as for a command (CommandRequest.seen_version).
    seen_version: SeenVersion | None = None


class ForkRoomRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Fork the room at one of its versions into a sandbox room (``as``: its id; default a fresh one)."""

    at: Annotated[int, msgspec.Meta(ge=1, le=MAX_VERSION)]
    new_room: Name | None = msgspec.field(default=None, name="as")


class CommandRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A game command (``{"kind": ..., ...}``) for the room; the acting player comes from the token."""

    command: dict[str, Any]
    command_id: CommandId | None = None
    # A signing seat's Ed25519 signature of events.signing.command_bytes(room, player,
    # "{room}:{player}:{command_id}", command, seen_version) (docs/dice.md); needs ``command_id``.
    signature: SignatureHex | None = None
    # The room version the client saw (its latest checkpoint's): the command is decided at that version or a
    # later one and refused only at that one, else 409 `version_moved` (unrecorded: sign the version in `allowed`
    # and resend with the same id). Signed in the v2 form, so a signed refusal stands at one version only.
    seen_version: SeenVersion | None = None
    # Optional: when given it must be the token's player (a command for another seat is refused).
    player: Name | None = None



def decode_body(data: bytes, type_: type) -> Any:
    """Decode a JSON body; 400 for malformed JSON, 422 naming the field for a wrong shape."""
    if not data.strip():
        raise ApiError(400, "empty_body", "the request needs a JSON object body")
    # Before parsing: msgspec has no depth limit and would hit Python's recursion limit (a 500).
    if codec.json_depth_exceeds(data):
        raise ApiError(400, "too_deep", f"the JSON nests deeper than {codec.MAX_JSON_DEPTH} levels")
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.ValidationError as error:
        text, field = split_validation_error(error)
        where = f" (field {field})" if field else ""
        raise ApiError(422, "invalid_request", f"{text}{where}", field) from None
    except msgspec.DecodeError as error:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {error}") from None


def split_validation_error(error: msgspec.ValidationError) -> tuple[str, str | None]:
    """msgspec's message and the dotted path of the field it names ("Object contains unknown field `x`"
    and "missing required field `x`" name the field in the message, at the path of its object)."""
    text, path = str(error), ""
    if " - at `$" in text:
        text, _, path = text.partition(" - at `$")
        path = path.rstrip("`").lstrip(".")
    named = _NAMED_FIELD.search(text)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return text, path or None


# The OpenAPI security scheme of the gateway's bearer tokens (api_docs.build_openapi declares it).
SECURITY_SCHEME = "bearer"
# The ``openapi_extra`` of a route refused without a token (401): the document lists the token as required.
# Every other route answers without one ("sending one never hurts"), documented with the empty alternative;
# tests/gateway/test_console_contract.py calls each operation without a token to hold the two together.
TOKEN_REQUIRED: dict[str, Any] = {"security": [{SECURITY_SCHEME: []}]}


# Every type a route documents as its body (openapi_body): their component schemas join the document
# (http_app._openapi), so a route's body can never point at a schema the document lacks.
BODY_TYPES: list[type] = []


def openapi_body(type_: type) -> dict[str, Any]:
    """An ``openapi_extra`` that documents a msgspec-decoded JSON body."""
    if type_ not in BODY_TYPES:
        BODY_TYPES.append(type_)
    # The component schemas themselves are merged into the document once, in app._openapi.
    (schema,), _ = msgspec.json.schema_components([type_], ref_template="#/components/schemas/{name}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class CheckpointBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A signed checkpoint a player holds (docs/bundle-format.md section 2)."""

    room: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    version: Annotated[int, msgspec.Meta(ge=1, le=2**62)]
    head: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}(?!\n)$")]
    kid: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}(?!\n)$")]
    sig: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{128}(?!\n)$")]


class ReceiptBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A signed refusal receipt a player holds (docs/bundle-format.md section 8)."""

    room: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    version: Annotated[int, msgspec.Meta(ge=1, le=2**62)]
    head: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}(?!\n)$")]
    player: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    command_id: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    code: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_.]{1,100}(?!\n)$")]
    raw: Annotated[str, msgspec.Meta(min_length=1, max_length=100_000, pattern=r"^[A-Za-z0-9+/]+={0,2}(?!\n)$")]
    kid: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}(?!\n)$")]
    sig: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{128}(?!\n)$")]


class KeyBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    kid: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}(?!\n)$")]
    alg: Literal["Ed25519"]
    public_key: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}(?!\n)$")]
    status: Literal["active", "retired"]


class KeySetBody(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The deployment's key set (GET /.well-known/almanac-keys.json; docs/bundle-format.md section 3)."""

    format: Literal["almanac-keys"]
    format_version: Literal[1]
    active: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{16}(?!\n)$")]
    keys: Annotated[list[KeyBody], msgspec.Meta(min_length=1, max_length=100)]
