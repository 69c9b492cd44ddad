"""Auditors' forensics: fork a room into a sandbox, explain a value, bisect a predicate or another rule version."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from almanac.events.errors import RuleError, RulesNotInstalledError
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.investigate import (
    bisect_against,
    bisect_where,
    diff,
    explain,
    fork,
)
from almanac.services.gateway.api_rooms import RoomId, gateway
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.gateway import bearer, now_ms
from almanac.services.gateway.schemas import (
    MAX_VERSION,
    NAME_PATTERN,
    TOKEN_REQUIRED,
    ForkRoomRequest,
    decode_body,
    openapi_body,
)

router = APIRouter(tags=["forensics"])


def forensics_api_error(error: ForensicsError | RuleError) -> ApiError:
    """A forensics refusal as 4xx JSON (every forensics route: here, audit views, dispute bundles); a room whose
    rules this node lacks is 409, as on every route."""
    extra = {"allowed": error.allowed} if error.allowed else {}
    status = error.status if isinstance(error, ForensicsError) else 409
    return ApiError(status, error.code, error.message, error.field, **extra)


@router.post("/rooms/{room}/fork", summary="Auditors: a sandbox fork of the room at a version (its history by "
             "reference, its own dice, excluded from leaderboards); answers the new room id; seat players "
             "with the normal join", openapi_extra=openapi_body(ForkRoomRequest) | TOKEN_REQUIRED)
async def fork_room(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    claims = gw.auditor(bearer(request), room)
    body: ForkRoomRequest = decode_body(await request.body(), ForkRoomRequest)
    try:
        answer = await fork(gw.reader.loader, room, body.at, body.new_room, claims.player or "auditor", now_ms())
    except (ForensicsError, RulesNotInstalledError) as error:
        raise forensics_api_error(error) from None
    # The answer is about the new room: its own head, signed.
    return await gw.room_answer(answer["room"], answer, version=answer["version"], status=201)


@router.get("/rooms/{room}/diff", openapi_extra=TOKEN_REQUIRED, summary="Auditors: where this room's state differs from another room's (e.g. "
            "its fork), path by path with both values, at a version of each (default: latest)")
async def diff_rooms(request: Request, room: str = RoomId, other: str = Query(..., pattern=NAME_PATTERN),
                     at: int | None = Query(None, ge=1, le=MAX_VERSION),
                     at_other: int | None = Query(None, ge=1, le=MAX_VERSION)) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)
    try:
        answer = await diff(gw.reader.loader, room, other, at, at_other)
    except (ForensicsError, RulesNotInstalledError) as error:
        raise forensics_api_error(error) from None
    return await gw.room_answer(room, answer)


@router.get("/rooms/{room}/explain", openapi_extra=TOKEN_REQUIRED, summary="Auditors: every version whose event changed the value at a state "
            "path (cities.bob.stock.gold, scores.alice, view.bob..., room.players), with before and after")
async def explain_value(request: Request, room: str = RoomId,
                        path: str = Query(..., min_length=1, max_length=300),
                        at: int | None = Query(None, ge=1, le=MAX_VERSION)) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)
    try:
        answer = await gw.heavy.run(lambda loader: explain(loader, room, path, at))
    except (ForensicsError, RulesNotInstalledError) as error:
        raise forensics_api_error(error) from None
    return await gw.room_answer(room, answer)


@router.get("/rooms/{room}/bisect", openapi_extra=TOKEN_REQUIRED, summary="Auditors: the first version where a predicate holds (where=PATH OP "
            "LITERAL [and|or ...]), or the first version whose events another rule version decides differently "
            "(against=NAME@VERSION)")
async def bisect_room(request: Request, room: str = RoomId,
                      where: str | None = Query(None, min_length=1, max_length=500),
                      against: str | None = Query(None, min_length=3, max_length=80),
                      linear: bool = Query(False, description="scan every version (non-monotonic predicates)")
                      ) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)
    if (where is None) == (against is None):
        raise ApiError(422, "where_or_against", "give where=EXPR or against=NAME@VERSION (one of them)", "where")
    try:
        if against is not None:
            answer = await gw.heavy.run(lambda loader: bisect_against(loader, room, against))
        else:
            answer = await gw.heavy.run(lambda loader: bisect_where(loader, room, where or "", linear))
    except (ForensicsError, RulesNotInstalledError) as error:
        raise forensics_api_error(error) from None
    return await gw.room_answer(room, answer)
