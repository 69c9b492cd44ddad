"""Room lifecycle and commands: create, list, describe, join (-> token), end, submit a command, its outcome."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import msgspec
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from almanac.events import codec, registry
from almanac.events.decider import Context
from almanac.events.dice import NONCE_SCHEMES, Dice
from almanac.events.errors import RuleError, RulesNotInstalledError
from almanac.events.room import ROOM_COMMAND_KINDS, CreateRoom, check_bot_policy, convert_options
from almanac.events.shown import Shown
from almanac.events.signing import join_bytes, signature_valid
from almanac.projections.read_model_queries import BadCursor
from almanac.services import bots
from almanac.services.bus import RateLimit
from almanac.services.gateway.auth import ROLE_PLAYER, Claims
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import (
    Gateway,
    bearer,
    client_address,
    internal_command_id,
    may_resend,
    new_command_id,
    now_ms,
)
from almanac.services.gateway.room_reader import room_summary
from almanac.services.gateway.schemas import (
    DEFAULT_PAGE,
    MAX_PAGE,
    NAME_PATTERN,
    PAGE_CURSOR_PATTERN,
    TOKEN_REQUIRED,
    BotSeatRequest,
    CommandRequest,
    CreateRoomRequest,
    EndRoomRequest,
    JoinRoomRequest,
    ReclaimSeatRequest,
    checked_idempotency_key,
    decode_body,
    openapi_body,
)
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage import seat_keys
from almanac.storage.base import RoomArchived, StoredOutcome

router = APIRouter(tags=["rooms"])
RoomId = Path(pattern=NAME_PATTERN, description="room id")
# ``version_moved``: a command naming the version its client saw met the room elsewhere (events.step.VersionMoved).
CONFLICT_CODES = {"version_conflict", "conflict", "version_moved"}
RATE_LIMITED = {
    429: {"description": "`rate_limited`: over ALMANAC_RATE_ANON (per address) or ALMANAC_RATE_COMMANDS (per "
          "seat); the Retry-After header says when to retry"},
    503: {"description": "`store_unavailable`: Redis cannot be reached; retry after the Retry-After header. "
          "`seed_missing`, `nonce_missing`: a secret of the room's dice is not in the store (an import writes them "
          "after the events); nothing was recorded, resend the same command_id later"},
}
# A create/join command id at least this long is treated as a secret: a retry with it gets the token again.
SECRET_COMMAND_ID = 16


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def _submit(gw: Gateway, room: str, player: str, client_id: str, body: dict[str, Any],
                  ruleset: str, admit: bool = True, limit: RateLimit | None = None,
                  signature: str | None = None, seen_version: int | None = None) -> tuple[Outcome | None, float]:
    """Submit and wait; ``admit=False`` for a request's second command (its first already changed
    something, so an overload refusal now would break "a refused request changed nothing"); ``limit``:
    the token's rate limit, counted by the submit itself (429 ``rate_limited``, nothing submitted).
    Inside the request's ``Gateway.command_slot``."""
    record = CommandRecord(
        command_id=internal_command_id(room, player, client_id),
        room=room,
        player=player,
        server_time_ms=now_ms(),
        body=body,
        signature=signature,
        seen_version=seen_version,
    )
    started = time.perf_counter()
    outcome = await gw.submit(record, admit, limit)
    elapsed = time.perf_counter() - started
    if outcome is None:
        gw.metrics.command_latency.observe(elapsed, ruleset=ruleset)
        gw.metrics.commands.inc(outcome="timeout", ruleset=ruleset)
    elif outcome.accepted:
        gw.metrics.decided(ruleset, accepted=True, seconds=elapsed)
    elif _is_conflict(outcome):
        gw.metrics.command_latency.observe(elapsed, ruleset=ruleset)
        gw.metrics.commands.inc(outcome="conflict", ruleset=ruleset)
        gw.metrics.conflicts.inc(ruleset=ruleset)
    else:  # refused by the rules: counted and timed for auditors only (GatewayMetrics.decided)
        gw.metrics.decided(ruleset, accepted=False, code=str((outcome.error or {}).get("code", "")), seconds=elapsed)
    return outcome, elapsed


def _is_conflict(outcome: Outcome) -> bool:
    code = str((outcome.error or {}).get("code", ""))
    return code in CONFLICT_CODES or code.endswith("_conflict")


def _shown(outcome: Outcome) -> dict[int, Shown]:
    """One ``events.shown.Shown`` per event of the outcome, by version: it serves both the events sent and the
    answer's checkpoint (a v2 room's commitment views reuse its decoding and redaction)."""
    return {envelope.version: Shown(envelope) for envelope in outcome.envelopes}


def _outcome_body(outcome: Outcome, shown: dict[int, Shown], player: str, client_id: str) -> dict[str, Any]:
    """An accepted command's answer (``_outcome_answer`` signs it at its last version)."""
    return {
        "command_id": client_id,
        "room": outcome.room,
        "accepted": True,
        "first_version": outcome.first_version,
        "version": outcome.last_version,
        "duplicate": outcome.duplicate,
        "events": [one.form(player) for one in shown.values()],
    }


async def _outcome_answer(gw: Gateway, outcome: Outcome, shown: dict[int, Shown], answer: dict[str, Any],
                          status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``answer`` about ``outcome``'s room, signed at the command's last version (the envelopes it holds)."""
    return await gw.room_answer(outcome.room, answer, version=outcome.last_version, envelopes=outcome.envelopes,
                                shown=shown, status=status, headers=headers)


async def _refused(gw: Gateway, outcome: Outcome, client_id: str) -> ApiError:
    """``_refusal`` with, for a refusal the engine recorded, its signed refusal receipt (``receipt``; docs/bundle-
    format.md section 8): the player's proof of what the deployment answered, at which version."""
    error = _refusal(outcome, client_id)
    if outcome.record is not None and error.status == 422:
        try:
            receipt = await gw.checkpoints.refusal_receipt(gw.store, outcome.record, error.code)
        except LookupError:  # the room's versions up to the refusal cannot be read here now: answered without one
            receipt = None
        if receipt is not None:
            error.extra["receipt"] = receipt
    return error


def _refusal(outcome: Outcome, client_id: str) -> ApiError:
    error = dict(outcome.error or {})
    code = str(error.pop("code", "refused"))
    message = str(error.pop("message", "the command was refused"))
    field = error.pop("field", None)
    if _is_conflict(outcome) or code == "ruleset_not_installed":
        status = 409  # ruleset_not_installed: the room is fine, this node lacks its rules version
    elif code == "room_not_found":
        status = 404
    elif code in ("seed_missing", "nonce_missing"):
        status = 503  # nothing was recorded: the room cannot decide until its seed is back (an import finishing)
    else:
        status = 422
    return ApiError(status, code, message, field, command_id=client_id, duplicate=outcome.duplicate, **error)


def _pending(room: str, client_id: str) -> Response:
    url = f"/rooms/{room}/commands/{client_id}"
    return json_response(
        {
            "code": "outcome_pending",
            "message": "the engine has not answered within the wait; GET the outcome URL later, or resend the "
            "same command_id (commands are idempotent by id)",
            "command_id": client_id,
            "outcome_url": url,
        },
        202,
        headers={"Location": url},
    )


async def _answer(gw: Gateway, outcome: Outcome | None, room: str, player: str, client_id: str) -> Response:
    if outcome is None:
        return _pending(room, client_id)
    if not outcome.accepted:
        raise await _refused(gw, outcome, client_id)
    shown = _shown(outcome)
    return await _outcome_answer(gw, outcome, shown, _outcome_body(outcome, shown, player, client_id))


@router.post(
    "/rooms",
    summary="Create a room of a rule-set; the creator joins it and receives a token",
    description="Rate limited per client address (ALMANAC_RATE_ANON): 429 `rate_limited` with Retry-After. "
    "Bot seats (`bots`) per client address: at most a hundredth of ALMANAC_MAX_BOT_SEATS (at least 16) an hour, "
    "else 429 `bot_seats_rate_limited` with Retry-After; past the deployment's bound 429 `bot_seats_full`. "
    "Seat-naming options (`owner`, `player`, `players`) must be joinable player names, else 422 "
    "`invalid_options` naming the option. The token is a JWT (HS256) with claims room, player, role, iat, exp "
    "and ruleset (the room's rules).",
    responses=RATE_LIMITED,
    openapi_extra=openapi_body(CreateRoomRequest),
    status_code=201,
)
async def create_room(request: Request) -> Response:
    gw = gateway(request)
    resend = await _overloaded_resend(gw, request, CreateRoomRequest, None)
    with gw.command_slot(resend):  # admitted before any read: a flood of creates starts no unbounded reads
        return await _create_room(gw, request)


async def _create_room(gw: Gateway, request: Request) -> Response:
    await gw.rate_limits.check_address(client_address(request))
    body: CreateRoomRequest = decode_body(await request.body(), CreateRoomRequest)
    try:
        # "realm": its default version (the seed as written); "realm@2": that version (the engine resolves it alike).
        decider = registry.manifest(body.ruleset).decider
    except RuleError as error:
        raise ApiError(422, error.code, error.message, "ruleset", allowed=error.allowed) from None
    command: dict[str, Any] = {"kind": "create_room", "ruleset": body.ruleset, "options": body.options,
                               "challenge": body.challenge}
    if body.dice_scheme is not None:
        command["dice_scheme"] = body.dice_scheme
    try:  # the one check every way of making a room shares (`almanac sim`, `almanac import` too)
        check_bot_policy(body.ruleset, seat_bots=body.seat_bots, bot_after_missed=body.bot_after_missed)
    except RuleError as error:
        raise ApiError(422, error.code, error.message, error.field) from None
    if body.bot_after_missed is not None:
        command["bot_after_missed"] = body.bot_after_missed
    elif body.seat_bots:
        command["seat_bots"] = True
    join_commitment = _nonce_commitment(body.nonce, body.nonce_commitment)
    if body.join:
        _check_join_signature(body.room, body.player, body.public_key, join_commitment,
                              body.join_signature, "join_signature")
    if body.nonce is not None and (body.challenge is not None or body.dice_scheme == 1 or not body.join):
        raise ApiError(422, "no_player_nonces", "a nonce goes with the creator's join of a scheme-2 room (no "
                       "challenge, dice_scheme 2, join true)", "nonce")
    if body.setup is not None:
        # An explicit setup goes where this server takes one: the room command, else the rule-set's options.
        if "setup" in CreateRoom.__struct_fields__:
            command["setup"] = body.setup
        elif "setup" in decider.options_type.__struct_fields__:
            command["options"] = {**body.options, "setup": body.setup}
        else:
            raise ApiError(
                422, "setup_not_supported",
                f"{decider.name} rooms are created from options only; send 'options'", "setup",
            )
    try:
        codec.decode_command(None, command)
    except RuleError as error:
        gw.metrics.commands.inc(outcome="invalid", ruleset=decider.name)
        raise ApiError(422, error.code, error.message, error.field, allowed=error.allowed) from None
    if body.join and body.player in body.bots:
        raise ApiError(422, "bot_seat_taken", "the creator joins their own seat; hand a bot another seat, or create "
                       "with join false", "bots")
    if body.bots and registry.manifest(body.ruleset).seat_bot is None:
        raise ApiError(422, "no_seat_bot", f"{decider.name} has no seat bot", "bots")
    if len(set(body.bots)) != len(body.bots):
        raise ApiError(422, "duplicate_bot_seat", "each seat is handed to a bot once: name it once in `bots`", "bots")
    if body.bots:
        seats = _seats_at_create(decider, command["options"], body.player)
        if seats and not set(body.bots) <= set(seats):
            strangers = ", ".join(repr(bot) for bot in body.bots if bot not in seats)
            raise ApiError(422, "no_seat", f"{strangers} is not a seat of this room", "bots", allowed=list(seats))
    # A delay also goes with a bot policy: the seats the room hands over later move with it (services/bots.py).
    if body.bot_delay_ms and not body.bots and body.bot_after_missed is None and not body.seat_bots:
        raise ApiError(422, "bot_delay_without_bots", "a bot move delay goes with the seats handed to bots: send "
                       "`bots`, `bot_after_missed` or `seat_bots`, or no `bot_delay_ms`", "bot_delay_ms")
    room = body.room or gw.created_room(decider.name, body.player, body.command_id)
    # The bots' seats are taken against the bound before the room exists, all at once (one script: racing creates
    # cannot pass it together), and given back if the create is refused: a refused create makes nothing.
    seated = [(room, seat) for seat in dict.fromkeys(body.bots)]
    # per address before the deployment's bound: one client cannot take every seat (services/gateway/ratelimit.py)
    await gw.rate_limits.check_bot_seats(client_address(request), len(seated))
    client_id = body.command_id or new_command_id()
    try:
        reserved = await bots.reserve_seats(gw.client, gw.keys, seated, now_ms(), max_seats=gw.settings.max_bot_seats,
                                            command=internal_command_id(room, body.player, client_id),
                                            delay_ms=body.bot_delay_ms)
    except bots.SeatRefused as refused:
        raise ApiError(429, refused.code, f"{refused.message} (create without bots, or later)", "bots") from None
    try:
        outcome, _ = await _submit(gw, room, body.player, client_id, command, decider.name)
    except BaseException:
        await bots.release_seats(gw.client, gw.keys, reserved)
        raise
    if outcome is None:
        return _pending(room, client_id)  # decided later: its recorded outcome settles the seats (bots.settle_pending)
    if not outcome.accepted:
        await bots.release_seats(gw.client, gw.keys, reserved)
        error = await _refused(gw, outcome, client_id)
        if error.code == "room_exists":
            error.status = 409
        raise error
    try:
        _refuse_replayed_grant(outcome, body.player, "create", client_id)
    except ApiError:
        await bots.release_seats(gw.client, gw.keys, reserved)  # a replay hands no new seat to a bot either
        raise
    signed_at, shown = outcome, _shown(outcome)  # what the answer's checkpoint is signed after: the create, or its join
    answer = _outcome_body(outcome, shown, body.player, client_id)
    # The creator's token: the only way to act for this name in this room, so nobody can squat it.
    answer["token"] = gw.issue_token(room, body.player, outcome.envelopes[0].ruleset if outcome.envelopes else "")
    answer["player"] = body.player
    answer["joined"] = False
    # after the room exists: a refused create hands nothing to a bot (taken above); its delay before its seats, so
    # that no bot moves without it (a create answered 202: bots.settle_pending does both, in this order)
    if body.bot_delay_ms:
        await bots.set_delay(gw.client, gw.keys, room, body.bot_delay_ms)
    await bots.confirm_seats(gw.client, gw.keys, seated, now_ms())
    answer["bots"] = list(dict.fromkeys(body.bots))
    answer["bot_delay_ms"] = body.bot_delay_ms
    if body.join:
        join_id = f"{client_id}.join"
        join_command = await _join_command(gw, room, body.nonce, join_commitment, body.public_key)
        joined, _ = await _submit(gw, room, body.player, join_id, join_command, decider.name,
                                  admit=False, signature=body.join_signature)
        if joined is not None and joined.accepted:
            answer["joined"] = True
            answer["seat_key"] = await _grant_seat_key(gw, room, body.player)
            answer["version"] = joined.last_version
            signed_at, shown = joined, _shown(joined)
            answer["events"] += [one.form(body.player) for one in shown.values()]
        elif joined is not None:
            answer["join_error"] = joined.error
        else:
            answer["join_error"] = {"code": "outcome_pending", "message": "the join has not been answered yet"}
    return await _outcome_answer(gw, signed_at, shown, answer, 201, headers={"Location": f"/rooms/{room}"})


@router.post(
    "/rooms/{room}/bots",
    summary="Hand a seat to a bot: an empty seat (the room's creator or an auditor), or your own seat",
    description="A bot (`almanac bots`, docs/bots.md) then plays the seat from its view. An empty seat: the "
    "room's creator's token or an auditor's; the bot joins it. Your own seat (its token): the room decides "
    "`hand_to_bot` as a command (`room.seat_to_bot`, reason `left`, in every player's events) and the bot plays on. "
    "Leaving your own seat needs a room created with `seat_bots` or `bot_after_missed` (its `room.bot_policy`; "
    "GET /rooms/{room} `bot_policy`), else 422 `no_bot_policy` and nothing is recorded. "
    "403 `not_room_owner` (an empty seat, another player's token), 409 `seat_held` (a seat another person "
    "holds), 409 `room_ended`, 422 `no_seat` / `no_seat_bot` / `no_bot_policy`, 429 `bot_seats_full` "
    "(ALMANAC_MAX_BOT_SEATS), 429 `bot_seats_rate_limited` (a player's token: its client address asked for more "
    "than a hundredth of ALMANAC_MAX_BOT_SEATS, at least 16, this hour; Retry-After), 429 `rate_limited` (a "
    "player's token: its client address past ALMANAC_RATE_ANON; an auditor's: past ALMANAC_RATE_COMMANDS).",
    openapi_extra=openapi_body(BotSeatRequest) | TOKEN_REQUIRED,
    responses={403: {"description": "a token of another room, or not the room's creator for an empty seat"},
               409: {"description": "`seat_held`: a person holds the seat; `room_ended`"},
               422: {"description": "`no_seat`, `no_seat_bot`, `no_bot_policy` (your own seat, in a room created "
                     "without seat bots), or an invalid body: {code, message, field}"},
               **RATE_LIMITED},
)
async def hand_seat_to_bot(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    with gw.command_slot():  # admitted before any read, as a command
        return await _hand_seat_to_bot(gw, request, room)


async def _hand_seat_to_bot(gw: Gateway, request: Request, room: str) -> Response:
    claims = gw.reader_for(bearer(request), room)  # before reading the body: strangers learn nothing
    if claims.role == ROLE_PLAYER:
        await gw.rate_limits.check_address(client_address(request))
    else:
        await gw.rate_limits.check_auditor(claims)
    body: BotSeatRequest = decode_body(await request.body(), BotSeatRequest)
    state = await gw.reader.latest(room)
    player = claims.player if claims.role == ROLE_PLAYER else None
    try:  # the one rule for a caller's ask (services/bots.py), shared with the operator's `almanac bots add`
        how = await bots.admit_seat(gw.client, gw.keys, gw.store, state, room, body.seat,
                                    max_seats=gw.settings.max_bot_seats, holder=player,
                                    owner=player is None or state is None or player == state.created_by,
                                    key=gw.bot_key)
    except bots.SeatRefused as refused:
        raise ApiError(refused.status, refused.code, refused.message, refused.field, **refused.extra) from None
    seat, answer = body.seat, {"room": room, "seat": body.seat}
    # A new seat ("empty", "left") is taken against the bound in one step (services/bots.py reserve_seats): racing
    # asks never pass ALMANAC_MAX_BOT_SEATS together. "already": back in the hash if an operator removed it.
    bound = gw.settings.max_bot_seats if how != "already" else None
    if bound is not None and claims.role == ROLE_PLAYER:  # a player's token is anyone's: counted per address
        await gw.rate_limits.check_bot_seats(client_address(request), 1)
    try:
        if how != "left":  # "empty": the bot joins it
            added = await bots.add_bot(gw.client, gw.keys, room, seat, now_ms(), max_seats=bound)
            return await gw.room_answer(room, {**answer, "how": how, "added": added})
        if body.signature is not None and body.command_id is None:
            raise ApiError(422, "command_id_required", "a signed command names its command_id: the signature covers "
                           "it (docs/dice.md)", "command_id")
        # taken before the room decides the leave, so a leave the log records always has its seat in the bound
        client_id = body.command_id or new_command_id()
        reserved = await bots.reserve_seats(gw.client, gw.keys, [(room, seat)], now_ms(), max_seats=bound,
                                            command=internal_command_id(room, seat, client_id))
    except bots.SeatRefused as refused:
        raise ApiError(refused.status, refused.code, refused.message, refused.field, **refused.extra) from None
    try:
        outcome, _ = await _submit(gw, room, seat, client_id, {"kind": "hand_to_bot"}, state.ruleset,
                                   limit=gw.rate_limits.seat_limit(room, seat), signature=body.signature,
                                   seen_version=body.seen_version)
    except BaseException:
        await bots.release_seats(gw.client, gw.keys, reserved)
        raise
    if outcome is None:
        return _pending(room, client_id)  # decided later: its recorded outcome settles the seat (bots.settle_pending)
    if not outcome.accepted:
        await bots.release_seats(gw.client, gw.keys, reserved)
        raise await _refused(gw, outcome, client_id)
    (added,) = await bots.confirm_seats(gw.client, gw.keys, [(room, seat)], now_ms())  # after the log says so
    shown = _shown(outcome)
    handed = _outcome_body(outcome, shown, seat, client_id)
    return await _outcome_answer(gw, outcome, shown, {**answer, "how": "left", "added": added, "handed": handed})


PageLimit = Query(DEFAULT_PAGE, ge=1, le=MAX_PAGE, description=f"rooms a page holds at most ({DEFAULT_PAGE} unless "
                  f"given, at most {MAX_PAGE})")
PageCursor = Query(None, pattern=PAGE_CURSOR_PATTERN, description="where the page starts: the `next_cursor` of the "
                   "page before (absent: the first page)")


async def rooms_page(request: Request, ruleset: str | None, limit: int, cursor: str | None) -> tuple[list[dict],
                                                                                                   str | None]:
    """A page of the listing (projections.read_model_queries.ReadModels.rooms_page); 422 ``bad_cursor`` for a cursor it never
    handed out."""
    try:
        return await gateway(request).read_models.rooms_page(ruleset, limit, cursor)
    except BadCursor:
        raise ApiError(422, "bad_cursor", "not a cursor of this listing: pass a page's next_cursor as it came "
                       "(or none, for the first page)", "cursor") from None


@router.get("/rooms", summary="List rooms, a page at a time (optionally of one rule-set): rooms still in play or "
                              "recently over newest first, then finished archived rooms; follow next_cursor")
async def list_rooms(
    request: Request,
    ruleset: str | None = Query(None, pattern=NAME_PATTERN, description="only rooms of this rule-set"),
    limit: int = PageLimit,
    cursor: str | None = PageCursor,
) -> Response:
    rooms, next_cursor = await rooms_page(request, ruleset, limit, cursor)
    return json_response({"rooms": codec.to_builtins(rooms), "source": "projection", "next_cursor": next_cursor})


@router.get("/rulesets", summary="The rule-sets this server hosts, with their versions and command kinds")
async def list_rulesets(request: Request) -> Response:
    hosted, installed = [], set(registry.installed())
    for name in (name for name in registry.hosted() if name in installed):
        default = registry.default(name)
        hosted.append({"ruleset": name, "version": default.version,
                       "versions": [registry.at(name, v).ref for v in registry.versions(name)],
                       "fingerprint": default.fingerprint,
                       "code_revision": (running.number if (running := default.revision(default.fingerprint)) else None),
                       "commands": [k for k in codec.command_kinds(registry.stored_ref(name, default.version))
                                    if k != "create_room"]})
    return json_response({"rulesets": hosted})


@router.get("/rooms/{room}", summary="A room's public summary: rule-set, version, players, seats, over")
async def describe_room(request: Request, room: str = RoomId) -> Response:
    state = await gateway(request).reader.latest(room)
    if state is None:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    return await gateway(request).room_answer(room, room_summary(state), version=state.version)


@router.post(
    "/rooms/{room}/join",
    summary="Take a seat as a player and receive a signed token bound to the room and player",
    description="Rate limited per client address (ALMANAC_RATE_ANON): 429 `rate_limited` with Retry-After; "
    "not counted: the deployment's bots process joining a bot's seat (its `command_id` derived under its key). "
    "In a room with dice scheme 2 (docs/dice.md) send `nonce` (your secret, 32 bytes hex; kept beside the room's "
    "seed, revealed when the room ends) and optionally `nonce_commitment` (its sha256, checked); without a "
    "nonce the server uses its own for you and says so (`nonce_by_server`). 422 `nonce_required` (a commitment "
    "without its nonce), `nonce_mismatch`, `no_player_nonces` (a scheme-1 room). A `public_key` (dice scheme 3: "
    "the seat signs its commands) goes with `signature`, that key's Ed25519 signature of events.signing.join_bytes "
    "(room, player, key, nonce commitment): 422 `signature_required` or `signature_invalid` (docs/dice.md).",
    responses=RATE_LIMITED,
    openapi_extra=openapi_body(JoinRoomRequest),
)
async def join_room(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    resend = await _overloaded_resend(gw, request, JoinRoomRequest, room)
    with gw.command_slot(resend):  # admitted before any read, as a command
        return await _join_room(gw, request, room)


async def _overloaded_resend(gw: Gateway, request: Request, schema: type, room: str | None) -> bool:
    """While the gateway refuses for overload: whether this create or join (of ``room``, or the one its body
    names) resends one already decided, which is let in to get its answer; False whenever not overloaded."""
    if gw.overload_reason() is None:
        return False
    try:
        body = decode_body(await request.body(), schema)
    except ApiError:
        return False  # refused as overloaded, as any other request now
    if room is None:
        if body.room is not None:
            room = body.room
        else:  # a create naming no room: the one its command id makes (Gateway.created_room), if any
            try:
                name = registry.manifest(body.ruleset).decider.name
            except RuleError:
                return False
            room = gw.created_room(name, body.player, body.command_id)
    return await _decided_resend(gw, room, body.player, body.command_id)


async def _join_room(gw: Gateway, request: Request, room: str) -> Response:
    try:
        body: JoinRoomRequest = decode_body(await request.body(), JoinRoomRequest)
    except ApiError:
        await gw.rate_limits.check_address(client_address(request))  # a body refused is counted as any other join
        raise
    if body.command_id is None or not hmac.compare_digest(
            body.command_id.encode(), bots.bot_join_client_id(gw.bot_key, room, body.player).encode()):
        # Not counted: a bots process's join of a seat handed to a bot (an id only the deployment's bot key makes, as
        # secret as the seat's token). All of the deployment's bots join from one address, which would otherwise
        # share one client's limit.
        await gw.rate_limits.check_address(client_address(request))
    ruleset = await gw.reader.ruleset_of(room)
    if ruleset is None:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist; create it first", "room")
    commitment = _nonce_commitment(body.nonce, body.nonce_commitment)
    if body.nonce is not None:
        state = await gw.reader.latest(room)
        if state is not None and state.dice_scheme not in NONCE_SCHEMES:
            raise ApiError(422, "no_player_nonces", "this room's dice draw from the server seed alone (dice scheme "
                           f"{state.dice_scheme}); join without a nonce", "nonce")
    _check_join_signature(room, body.player, body.public_key, commitment, body.signature, "signature")
    client_id = body.command_id or new_command_id()
    command = await _join_command(gw, room, body.nonce, commitment, body.public_key)
    outcome, _ = await _submit(gw, room, body.player, client_id, command, ruleset, signature=body.signature)
    if outcome is None:
        return _pending(room, client_id)
    if not outcome.accepted:
        raise await _refused(gw, outcome, client_id)
    _refuse_replayed_grant(outcome, body.player, "join", client_id)
    shown = _shown(outcome)
    answer = _outcome_body(outcome, shown, body.player, client_id)
    answer["player"] = body.player
    answer["token"] = gw.issue_token(room, body.player, ruleset)
    answer["seat_key"] = await _grant_seat_key(gw, room, body.player)
    return await _outcome_answer(gw, outcome, shown, answer)


async def _grant_seat_key(gw: Gateway, room: str, player: str) -> str:
    """A new seat key for a join just answered (a first answer, or a retry proven by its long command id): the
    server keeps its sha256 only, and a key given before for this seat stops working."""
    return await seat_keys.grant(gw.client, gw.keys, room, player)


@router.post(
    "/rooms/{room}/seat",
    summary="Take your seat back with its seat key: a fresh token for the same seat, and the seat back from its bot",
    description="The seat key is the secret the join answer carried (`seat_key`; keep it, the console stores it "
    "in the browser). Rate limited per client address (ALMANAC_RATE_ANON): 429 `rate_limited`. A wrong key, a "
    "player without a seat or a room that does not exist all answer 403 `seat_key_invalid` (nothing tells "
    "which). A seat the room handed to a bot (`room.seat_to_bot`) is taken back first: the room decides "
    "`reclaim_seat` as the player (`room.seat_reclaimed`, in every player's events; its command id derived from "
    "the room, the player and the version seen, so a retry is answered, never recorded twice), and the bot stops. "
    "`reclaimed`: whether this answer's reclaim was recorded (false: no bot played the seat, or the room has not "
    "decided it yet: ask again).",
    responses=RATE_LIMITED,
    openapi_extra=openapi_body(ReclaimSeatRequest),
)
async def reclaim_seat(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    await gw.rate_limits.check_address(client_address(request))
    body: ReclaimSeatRequest = decode_body(await request.body(), ReclaimSeatRequest)
    if not await seat_keys.opens(gw.client, gw.keys, room, body.player, body.seat_key):
        raise ApiError(403, "seat_key_invalid", "this seat key does not open a seat of this player in this room",
                       "seat_key")
    ruleset = await gw.reader.ruleset_of(room) or ""
    answer: dict[str, Any] = {"room": room, "player": body.player, "reclaimed": False}
    state = await gw.reader.latest(room)
    if state is not None and not state.ended and body.player in state.bot_seats:
        outcome = None
        try:
            with gw.command_slot():  # a command, admitted as one
                outcome, _ = await _submit(gw, room, body.player,
                                           reclaim_client_id(gw, room, body.player, state.version),
                                           {"kind": "reclaim_seat"}, state.ruleset,
                                           limit=gw.rate_limits.seat_limit(room, body.player))
        except ApiError as refused:
            if refused.status not in (429, 503):
                raise
            # Overloaded or the seat's limit used up: the key still opens the seat (its token, as before bots
            # could hold seats); ``reclaimed`` false says to ask again for the seat back.
        if outcome is not None and outcome.accepted and _reclaimed_by(outcome, body.player):
            # The registry frees the seat now; the bots process, which reads the log each round, stops it too.
            await bots.remove_bot(gw.client, gw.keys, room, body.player)
            answer.update(reclaimed=True, version=outcome.last_version)
    answer["token"] = gw.issue_token(room, body.player, ruleset)
    return await gw.room_answer(room, answer)


def _seats_at_create(decider: Any, options: dict[str, Any], creator: str) -> tuple[str, ...]:
    """The seats a room created with ``options`` will have (empty: anyone may join), from its rules' own setup
    with throwaway dice: seats are named by the options, never drawn, so the room's own draws cannot differ."""
    ctx = Context(room="", player=creator, now_ms=now_ms(), version=1, dice=Dice(secrets.token_bytes(32), "", 1))
    try:
        return tuple(decider.seats(decider.initial_state(decider.setup(convert_options(decider, options), ctx))))
    except (RuleError, ValueError, msgspec.ValidationError):
        return ()  # options the room itself refuses: its create answers why


def reclaim_client_id(gw: Gateway, room: str, player: str, version: int) -> str:
    """The command id of the ``reclaim_seat`` sent for ``player`` having seen the room at ``version``: a retry at
    the same version is the same command (the gateway's dedupe answers it); one after it finds the seat back.
    Keyed with the deployment's secret: a client holding the seat's token cannot send another command under it
    first and have its outcome taken for the reclaim's."""
    return "reclaim-" + gw.signer.keyed_id("reclaim", room, player, str(version))


def _reclaimed_by(outcome: Outcome, player: str) -> bool:
    """Whether the accepted ``outcome`` recorded ``room.seat_reclaimed`` for ``player``: only then is the seat back.

    Its own events say so, with no second read of the log: every accepted outcome the gateway is handed carries
    them (the engine's, published or decided here, and a stored one, whose events ``room_service.stored_outcome``
    reads back). Keeping event types in the stored outcome instead would grow every command's dedupe record for
    this one route."""
    return any(envelope.type == bots.SEAT_RECLAIMED and envelope.player == player for envelope in outcome.envelopes)


def _nonce_commitment(nonce: str | None, commitment: str | None) -> str | None:
    """The commitment of the nonce a join sends (422 if the body's own commitment disagrees)."""
    if nonce is None:
        if commitment is not None:
            raise ApiError(422, "nonce_required", "send the nonce itself with its commitment: the server draws the "
                           "game's dice with it; it stays secret until the room ends", "nonce")
        return None
    computed = hashlib.sha256(bytes.fromhex(nonce)).hexdigest()
    if commitment is not None and commitment != computed:
        raise ApiError(422, "nonce_mismatch", "nonce_commitment is not the sha256 of nonce", "nonce_commitment")
    return computed


def _check_join_signature(room: str | None, player: str, public_key: str | None, commitment: str | None,
                          signature: str | None, field: str) -> None:
    """A join registering a key must be signed by it (events.signing.join_bytes): 422 ``signature_required`` or
    ``signature_invalid`` before anything is kept (the engine checks it again when it decides the join)."""
    if public_key is None:
        if signature is not None:
            raise ApiError(422, "signature_without_key", "a join's signature goes with the public_key it registers",
                           field)
        return
    if signature is None:
        raise ApiError(422, "signature_required", "a join registering a public_key is signed by it: send "
                       f"`{field}`, the key's signature of events.signing.join_bytes (docs/dice.md)", field)
    if room is None:
        raise ApiError(422, "room_required", "a signed join names its room: send `room` with the create", "room")
    if not signature_valid(public_key, signature, join_bytes(room, player, public_key, commitment)):
        raise ApiError(422, "signature_invalid", f"`{field}` is not the public_key's signature of this join (room, "
                       "player, public_key, nonce commitment: events.signing.join_bytes)", field)


async def _join_command(gw: Gateway, room: str, nonce: str | None, commitment: str | None,
                        public_key: str | None = None) -> dict[str, Any]:
    """The join command; a nonce is kept beside the room's seed first (never in the command or an event). A room
    archived finished keeps nothing (the rules refuse the join: ``room_ended``); beside an idle room's archive the
    nonce waits for the join that brings the room back."""
    command: dict[str, Any] = {"kind": "join_room"}
    if nonce is not None:
        with contextlib.suppress(RoomArchived):
            await gw.store.save_nonce(room, bytes.fromhex(nonce))
        command["nonce_commitment"] = commitment
    if public_key is not None:
        command["public_key"] = public_key
    return command


def _refuse_replayed_grant(outcome: Outcome, player: str, what: str, client_id: str) -> None:
    # Client command ids may be guessable: a replayed join/create must not hand the seat's token to
    # whoever repeats a short id. A long id (the gateway's own are 24 random characters) is the caller's
    # proof on a retry: whoever lost the first answer (a timeout, a dropped connection) gets the token again.
    if outcome.duplicate and len(client_id) < SECRET_COMMAND_ID:
        raise ApiError(
            409, "already_joined",
            f"this {what} was already handled and its token went to the first caller; {player!r} is taken "
            f"(a retry gets the token again only with a command_id of at least {SECRET_COMMAND_ID} characters)",
            "command_id",
        )


@router.post(
    "/rooms/{room}/end",
    summary="End the room (a seated player of the room or an auditor); reveals its secret seed",
    description="Who may end a room: a player who has joined it (holds a seat: its token's player is among "
    "the room's players) or an auditor. A creator whose own join was refused (`no_seat`) holds a token for "
    "the room but no seat, and is refused with 403 `not_seated`; so is the same request as an `end_room` "
    "command on POST /rooms/{room}/commands.",
    openapi_extra=openapi_body(EndRoomRequest) | TOKEN_REQUIRED,
    responses={403: {"description": "a token of another room, or of a player without a seat (`not_seated`)"},
               **RATE_LIMITED},
)
async def end_room(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    with gw.command_slot():  # admitted before any read, as a command
        return await _end_room(gw, request, room)


async def _end_room(gw: Gateway, request: Request, room: str) -> Response:
    token = bearer(request)
    claims = gw.reader_for(token, room)
    limit = None
    if claims.role == ROLE_PLAYER:  # a seat of this room: counted in its shard, by the submit (ratelimit.py)
        known = gw.rate_limits.known_refusal(room, claims.player)  # a window seen used up
        if known is not None:
            # As for a command (``_admitted_command``): a resend of a decided end gets its stored outcome, not 429.
            stored = await _resent_end(gw, room, claims.player, await request.body())
            if stored is not None:
                return stored
            raise known
        limit = gw.rate_limits.seat_limit(room, claims.player)
    else:  # an auditor's token is valid in every room: its counter is not in any one room's shard
        await gw.rate_limits.check_auditor(claims)
    try:
        raw = await request.body()
        body: EndRoomRequest = decode_body(raw, EndRoomRequest) if raw.strip() else EndRoomRequest()
        ruleset = await gw.reader.ruleset_of(room)
        if ruleset is None:
            raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
        await gw.require_seated(claims, room)
        if body.signature is not None and body.command_id is None:
            raise ApiError(422, "command_id_required", "a signed command names its command_id: the signature covers "
                           "it (docs/dice.md)", "command_id")
    except ApiError:
        await gw.count_refused(room, limit)
        raise
    client_id = body.command_id or new_command_id()
    outcome, _ = await _submit(
        gw, room, claims.player, client_id, {"kind": "end_room", "reason": body.reason}, ruleset, limit=limit,
        signature=body.signature, seen_version=body.seen_version,
    )
    return await _answer(gw, outcome, room, claims.player, client_id)


@router.post(
    "/rooms/{room}/commands",
    summary="Submit a game command as the token's player; answers the new version and visible events",
    description="Rate limited per seat, whichever of its tokens is sent (ALMANAC_RATE_COMMANDS): 429 "
    "`rate_limited` with Retry-After. An `end_room` command, like POST /rooms/{room}/end, needs a seated player (403 `not_seated` otherwise). "
    "An `Idempotency-Key` header names the command when its body names no `command_id`, held to the same schema "
    "(1-100 of A-Z a-z 0-9 _ . : -): another is refused 422 `invalid_idempotency_key`.",
    openapi_extra=openapi_body(CommandRequest) | TOKEN_REQUIRED,
    responses={
        200: {"description": "accepted: the new version and the events this player may see"},
        202: {"description": "no outcome within the wait: GET outcome_url later"},
        401: {"description": "missing, forged or expired token"},
        403: {"description": "a token of another room or another seat"},
        409: {"description": "a version conflict the engine could not resolve, or `version_moved`: the command "
              "names a `seen_version` and the room is elsewhere (`allowed`: its version; nothing recorded)"},
        413: {"description": "body larger than the limit"},
        422: {"description": "refused by the rules or invalid: {code, message, field}"},
        **RATE_LIMITED,
    },
)
async def submit_command(request: Request, room: str = RoomId) -> Response:
    """The operation as OpenAPI documents it. ``http_app.GatewayApp`` answers every such request whose room id is
    well formed before the FastAPI stack, CORS on or off (``command_answer``, which calls ``run_command``); the
    stack sees only a malformed id, refused 422 by the ``RoomId`` pattern before this body runs."""
    return await run_command(
        gateway(request), room, bearer(request), await request.body(), request.headers.get("idempotency-key"),
        client_address(request),
    )


async def run_command(gw: Gateway, room: str, token: str | None, raw_body: bytes,
                      idempotency_key: str | None, address: str | None = None, admitted: bool = False) -> Response:
    """The one function that answers a command (http_app.command_answer calls it for GatewayApp, which answers
    every command; the route above documents it).
    ``address``: the client's (``client_address``), for its fair share of the in-flight limit. ``admitted``: the
    caller asked ``Gateway.command_refusal`` and was let in; otherwise admission is decided here, once."""
    idempotency_key = checked_idempotency_key(idempotency_key)
    if not admitted:
        reason = gw.overload_reason(address)  # the same decision GatewayApp and the guard ask (command_refusal)
        if reason is not None:
            if may_resend(raw_body, idempotency_key is not None):
                # Admission refuses, but this may be the resend of a command already decided (through any gateway,
                # before any restart): its stored outcome is the answer (a 503 would hide it until a later resend).
                # The one refusal not answered at once: it waits for that read.
                stored = await _resent_outcome(gw, room, token, raw_body, idempotency_key)
                if stored is not None:
                    return stored
            raise gw.refused_command(reason)
    with gw.command_slot(address=address, admitted=True):  # before any parsing: a refusal must cost next to nothing
        return await _admitted_command(gw, room, token, raw_body, idempotency_key)


async def _admitted_command(gw: Gateway, room: str, token: str | None, raw_body: bytes,
                            idempotency_key: str | None) -> Response:
    claims = gw.player_for(token, room)  # before reading the body: strangers learn nothing
    known = gw.rate_limits.known_refusal(room, claims.player)  # a window seen used up
    if known is not None:
        if may_resend(raw_body, idempotency_key is not None):
            # A resend of a decided command is answered its stored outcome whatever the window, never 429 for a
            # command that was accepted: the one bounded lookup admission's refusal makes, nothing counted.
            stored = await _resent_outcome(gw, room, token, raw_body, idempotency_key)
            if stored is not None:
                return stored
        raise known
    # The seat's rate limit is counted by the submit itself (one script); a request refused before it is
    # counted on its own, so every request with a valid token counts, as before.
    limit = gw.rate_limits.seat_limit(room, claims.player)
    try:
        body, ruleset = await _checked_command(gw, claims, room, raw_body)
    except ApiError:
        await gw.count_refused(room, limit)
        raise
    client_id = body.command_id or idempotency_key or new_command_id()
    outcome, _ = await _submit(gw, room, claims.player, client_id, body.command, ruleset, limit=limit,
                               signature=body.signature, seen_version=body.seen_version)
    return await _answer(gw, outcome, room, claims.player, client_id)


async def _resent_outcome(gw: Gateway, room: str, token: str | None, raw_body: bytes,
                          idempotency_key: str | None) -> Response | None:
    """The stored outcome's answer when the request names a command id that is decided (``Gateway.decided``:
    one read); None otherwise, without a read when it names none (admission refuses it)."""
    try:
        claims = gw.player_for(token, room)
        client_id = decode_body(raw_body, CommandRequest).command_id or idempotency_key
    except ApiError:
        return None  # answered as any other request (refused while overloaded, its error otherwise)
    if client_id is None:
        return None
    stored = await gw.decided(room, internal_command_id(room, claims.player, client_id))
    return None if stored is None else await _replayed(gw, room, claims.player, client_id, stored)


async def _resent_end(gw: Gateway, room: str, player: str, raw_body: bytes) -> Response | None:
    """The stored outcome's answer when an end request names a command id that is decided (``Gateway.decided``:
    one bounded read); None otherwise, without a read when its body names none."""
    if not may_resend(raw_body, False):
        return None
    try:
        client_id = decode_body(raw_body, EndRoomRequest).command_id
    except ApiError:
        return None  # answered as any other request refused: 429
    if client_id is None:
        return None
    stored = await gw.decided(room, internal_command_id(room, player, client_id))
    return None if stored is None else await _replayed(gw, room, player, client_id, stored)


async def _decided_resend(gw: Gateway, room: str, player: str, client_id: str | None) -> bool:
    """Whether a create or join resends a command that is decided (``Gateway.decided``: one read): admitted
    past overload, its answer (a token with it) is made as for any request, from the outcome the engine finds
    stored (a duplicate)."""
    return client_id is not None and await gw.decided(room, internal_command_id(room, player, client_id)) is not None


async def _stored_answer(gw: Gateway, room: str, player: str, command_id: str) -> Response | None:
    """The answer to ``player``'s command ``command_id`` from its stored outcome (a replay); None while undecided."""
    stored = await gw.store.outcome(room, internal_command_id(room, player, command_id))
    return None if stored is None else await _replayed(gw, room, player, command_id, stored)


async def _replayed(gw: Gateway, room: str, player: str, command_id: str, stored: StoredOutcome) -> Response:
    """The answer a stored outcome makes, marked duplicate (its events read back when it was accepted)."""
    envelopes = await gw.store.read(room, stored.first_version, stored.last_version) if stored.accepted else []
    outcome = Outcome(command_id=command_id, room=room, accepted=stored.accepted, first_version=stored.first_version,
                      last_version=stored.last_version, error=stored.error, envelopes=envelopes, duplicate=True,
                      record=stored.record)
    return await _answer(gw, outcome, room, player, command_id)


async def _checked_command(gw: Gateway, claims: Claims, room: str, raw_body: bytes) -> tuple[CommandRequest, str]:
    """The request and the room's rule-set, once the command is valid for it (ApiError otherwise)."""
    body: CommandRequest = decode_body(raw_body, CommandRequest)
    if body.player is not None and body.player != claims.player:
        raise ApiError(403, "other_seat", f"this token acts for {claims.player!r}, not {body.player!r}", "player")
    if body.signature is not None and body.command_id is None:
        raise ApiError(422, "command_id_required", "a signed command names its command_id: the signature covers "
                       "it (docs/dice.md)", "command_id")
    # The token names the room's rules when this gateway or another issued it at creation or join: signed, so
    # as sure as the room's first event, which is read only for a token that does not say.
    ruleset = claims.ruleset or await gw.reader.ruleset_of(room)
    if ruleset is None:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    kind = body.command.get("kind")
    if isinstance(kind, str) and kind in ROOM_COMMAND_KINDS and kind not in ("end_room", "reveal_nonce"):
        route = {"hand_to_bot": "POST /rooms/{room}/bots", "reclaim_seat": "POST /rooms/{room}/seat"}.get(
            kind, "POST /rooms or /rooms/{room}/join")
        raise ApiError(422, "use_room_endpoint", f"send {kind} through {route}", "kind")
    if kind == "end_room":
        await gw.require_seated(claims, room)
    try:
        command = codec.decode_command(ruleset, body.command)
    except RulesNotInstalledError as error:
        raise ApiError(409, error.code, error.message, "room") from None
    except RuleError as error:
        gw.metrics.commands.inc(outcome="invalid", ruleset=ruleset)
        # ``field`` names a field of the command, as in the engine's refusals.
        raise ApiError(422, error.code, error.message, error.field, allowed=error.allowed) from None
    # Recorded as decoded: a field the rules forgive (a parcel's case and spaces) is stored in its one spelling.
    recorded = codec.recorded_body(body.command, command)
    if body.signature is not None and recorded != body.command:
        # The engine checks the signature over the recorded form; a signer must send exactly that form.
        raise ApiError(422, "sign_recorded_form", "a signed command must be sent in its recorded form: sign "
                       f"{json.dumps(recorded, sort_keys=True)}", "command")
    return msgspec.structs.replace(body, command=recorded), ruleset


@router.get("/rooms/{room}/commands/{command_id}", openapi_extra=TOKEN_REQUIRED, summary="The outcome of one of your commands by its id")
async def command_outcome(request: Request, room: str = RoomId,
                          command_id: str = Path(pattern=r"^[A-Za-z0-9_.:\-]{1,100}$")) -> Response:
    gw = gateway(request)
    claims = gw.player_for(bearer(request), room)
    answer = await _stored_answer(gw, room, claims.player, command_id)
    if answer is None:
        raise ApiError(
            404, "outcome_unknown",
            "no outcome yet: the command is still queued or never arrived; ask again, or resend it with the "
            "same command_id (that is safe)", "command_id",
        )
    return answer
