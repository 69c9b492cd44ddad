"""Queries: a player's view, scores and resources, events (redacted or for auditors), time travel, audits, read models."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from almanac.events import codec, registry, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.hashing import state_hash
from almanac.services.forensics.audit import offered_view, story
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.verify import verify_room
from almanac.services.gateway.api_forensics import forensics_api_error
from almanac.services.gateway.api_rooms import RoomId, gateway
from almanac.services.gateway.auth import ANY_ROOM
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import Gateway, bearer
from almanac.services.gateway.room_reader import PUBLIC, room_summary
from almanac.services.gateway.schemas import MAX_VERSION, NAME_PATTERN, TOKEN_REQUIRED
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

router = APIRouter(tags=["queries"])
MAX_EVENTS_PAGE = 5_000


async def _state(gw: Gateway, room: str):
    state = await gw.reader.latest(room)
    if state is None:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    return state


@router.get("/rooms/{room}/view", openapi_extra=TOKEN_REQUIRED, summary="The room as the calling player may see it (hidden information left out)")
async def room_view(
    request: Request,
    room: str = RoomId,
    player: str | None = Query(None, pattern=NAME_PATTERN, description="auditors only: whose view"),
) -> Response:
    gw = gateway(request)
    viewer = gw.viewer(bearer(request), room)
    whose = viewer.whose_view(player)
    state = await _state(gw, room)
    return await gw.room_answer(room, {**room_summary(state), "player": whose, "view": viewer.view(state, whose)},
                                version=state.version)


@router.get("/rooms/{room}/scores", summary="Public scores per player (the rule-set's public_scores: they reveal no hidden amount)")
async def room_scores(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    state = await _state(gw, room)
    return await gw.room_answer(room, {"room": room, "ruleset": state.ruleset, "version": state.version,
                                       "scores": PUBLIC.scores(state)}, version=state.version)


@router.get("/rooms/{room}/resources", openapi_extra=TOKEN_REQUIRED, summary="Auditors: every player's resources and holdings (players: see /view)")
async def room_resources(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    # A rule-set's resources() covers every player (realm: every city's storage), so players read their
    # own share through their view, where the rule-set hides what is not theirs.
    gw.auditor(bearer(request), room)
    state = await _state(gw, room)
    decider = room_rules.decider_of(state)
    return await gw.room_answer(
        room, {"room": room, "ruleset": state.ruleset, "version": state.version,
               "scores": codec.to_builtins(decider.scores(state.game)),
               "resources": codec.to_builtins(decider.resources(state.game))}, version=state.version)


@router.get("/rooms/{room}/events", openapi_extra=TOKEN_REQUIRED, summary="The room's events: redacted for a player, complete with hashes for an auditor")
async def room_events(
    request: Request,
    room: str = RoomId,
    from_version: int = Query(1, ge=1, le=MAX_VERSION),
    to_version: int | None = Query(None, ge=1, le=MAX_VERSION),
    limit: int = Query(1_000, ge=1, le=MAX_EVENTS_PAGE),
) -> Response:
    gw = gateway(request)
    viewer = gw.viewer(bearer(request), room)
    last = from_version + limit - 1 if to_version is None else min(to_version, from_version + limit - 1)
    envelopes = await gw.store.read(room, from_version, last)
    if not envelopes and await gw.reader.ruleset_of(room) is None:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    events = [viewer.event(e) for e in envelopes]
    latest = await gw.store.latest_version(room)
    next_version = envelopes[-1].version + 1 if envelopes else from_version
    # Signed at the page's last event (an empty page: the head it was read against)
    return await gw.room_answer(room, {"room": room, "latest_version": latest, "next_version": next_version,
                                       "events": events},
                                version=envelopes[-1].version if envelopes else latest, envelopes=envelopes)


@router.get("/rooms/{room}/state", openapi_extra=TOKEN_REQUIRED, summary="Auditors: the complete state at a version (time travel: snapshot + tail)")
async def room_state_at(
    request: Request,
    room: str = RoomId,
    version: int | None = Query(None, ge=1, le=MAX_VERSION, description="default: the latest"),
) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)
    latest = await gw.store.latest_version(room)
    if latest == 0:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    if version is not None and version > latest:
        raise ApiError(422, "version_out_of_range", f"room {room!r} has versions 1..{latest}", "version")
    state = await gw.reader.at_version(room, version or latest)
    assert state is not None
    return await gw.room_answer(
        room, {"room": room, "version": state.version, "latest_version": latest, "state_hash": state_hash(state),
               "state": codec.to_builtins(state)}, version=latest)


@router.get("/rooms/{room}/rejections", openapi_extra=TOKEN_REQUIRED, summary="Auditors: commands the rules refused, with their codes")
async def room_rejections(request: Request, room: str = RoomId) -> Response:
    from almanac.services.room_service import decode_record  # noqa: PLC0415

    gw = gateway(request)
    gw.auditor(bearer(request), room)
    records = [decode_record(data) for data in await gw.store.rejections(room)]
    rejected = []
    for record in records:
        stored = await gw.store.outcome(room, record.command_id)
        rejected.append({**codec.to_builtins(record), "error": stored.error if stored else None})
    return await gw.room_answer(room, {"room": room, "rejections": rejected})


async def _room_envelopes(store: RedisEventStore, room: str) -> list[Envelope]:
    """The whole room (a heavy read: on the heavy-read worker, ``Gateway.heavy``); 404 when it does not exist."""
    envelopes = await store.read(room)
    if not envelopes:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    return envelopes


@router.get("/rooms/{room}/audit/{view}", openapi_extra=TOKEN_REQUIRED, summary="Auditors: the ids an audit view of the room can follow "
            "(e.g. realm's trade ids)")
async def audit_view_ids(request: Request, room: str = RoomId, view: str = Path(pattern=NAME_PATTERN)) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)

    async def ids(loader: RoomLoader) -> list[str]:
        try:
            offered, pairs = offered_view(await _room_envelopes(loader.store, room), room, view)
        except ForensicsError as error:
            raise forensics_api_error(error) from None
        return list(offered.ids(pairs))

    return await gw.room_answer(room, {"room": room, "view": view, "ids": await gw.heavy.run(ids)})


@router.get("/rooms/{room}/audit/{view}/{item}", openapi_extra=TOKEN_REQUIRED, summary="Auditors: one thing told step by step from the log "
            "(an audit view of the room's rule-set, e.g. realm's trade)")
async def audit_view(request: Request, room: str = RoomId, view: str = Path(pattern=NAME_PATTERN),
                     item: str = Path(max_length=100)) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)

    async def told(loader: RoomLoader) -> Any:
        try:
            return codec.to_builtins(story(await _room_envelopes(loader.store, room), room, view, item))
        except ForensicsError as error:
            raise forensics_api_error(error) from None

    return await gw.room_answer(room, {"room": room, "view": view, "item": item, "story": await gw.heavy.run(told)})


@router.get("/rooms/{room}/verification", openapi_extra=TOKEN_REQUIRED, summary="Replay the room and check its hash chain, dice and state")
async def room_verification(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    viewer = gw.viewer(bearer(request), room)
    if await gw.store.latest_version(room) == 0:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
    body = codec.to_builtins(await gw.heavy.run(lambda loader: verify_room(loader.store, room)))
    divergence = body.get("divergence")
    if not viewer.auditor and isinstance(divergence, dict):
        # Both sides of a divergence are whole events: a player learns where, an auditor learns what.
        body["divergence"] = {"check": divergence.get("check"), "version": divergence.get("version"),
                              "message": "the history does not verify at this check; auditors read what differs"}
    if not viewer.auditor:
        # How many commands the rules refused in the room is the auditors': a rival who sees the count grow while
        # the room's version stands still learns that another seat was refused, and a refusal can tell hidden state
        # (a ``smelt`` of bronze refused: the city holds less). A player holds their own refusals' signed receipts.
        for counted in ("refusals_rechecked", "refusals_signed"):
            body.pop(counted, None)
        body["notes"] = [*body.get("notes", []), "refusals re-checked: counted for auditors only"]
    return await gw.room_answer(room, {**body, "room": room})


@router.get("/leaderboards/{ruleset}", summary="The best scores of a rule-set across rooms (projection)",
            description="Each player's best current public score over the rule-set's rooms. A room ranks once every "
            "seat is taken, and only when played as the standard game: never a sandbox fork, a challenge room (its "
            "seed is public), an imported room or copy, nor a room whose creator set it up otherwise (its "
            "manifest's `ranks`: a chosen stock, position, variant or length), whose scores do not compare.")
async def leaderboard(request: Request, ruleset: str, limit: int = Query(20, ge=1, le=1000)) -> Response:
    gw = gateway(request)
    if ruleset not in registry.names():
        raise ApiError(404, "unknown_ruleset", f"no rule-set {ruleset!r}; known: {', '.join(registry.names())}",
                       "ruleset")
    entries = await gw.read_models.leaderboard(ruleset, limit)
    return json_response({"ruleset": ruleset, "leaderboard": codec.to_builtins(entries)})


@router.get("/read-models/{model}", summary="A read model a rule-set adds (e.g. claim's claims, realm's trades): "
            "its rows, for a room or all, filtered by the fields the model allows")
async def read_model_rows(request: Request, model: str = Path(pattern=NAME_PATTERN),
                          room: str | None = Query(None, pattern=NAME_PATTERN)) -> Response:
    gw = gateway(request)
    declared = registry.read_models().get(model)
    if declared is None:
        known = sorted(registry.read_models())
        raise ApiError(404, "unknown_read_model", f"no read model {model!r}; known: {', '.join(known) or 'none'}",
                       "model", allowed=known)
    allowed = declared[1].filters
    where: dict[str, str] = {}
    for field, value in request.query_params.multi_items():
        if field == "room":
            continue
        if field not in allowed or field in where:
            raise ApiError(422, "unknown_filter", f"{model} rows filter by room and {', '.join(allowed) or 'nothing else'}"
                           f"; {field!r} is not one of them (or is given twice)", field, allowed=["room", *allowed])
        if len(value) > 100:
            raise ApiError(422, "filter_too_long", f"{field} is at most 100 characters", field)
        where[field] = value
    if declared[1].auditors_only:
        # The rows carry what players may not see (e.g. both cities' holdings after a trade).
        gw.auditor(bearer(request), room or ANY_ROOM)
    rows = await gw.read_models.rows(model, room, where)
    return json_response({"model": model, "room": room, "where": where, "rows": codec.to_builtins(rows)})
