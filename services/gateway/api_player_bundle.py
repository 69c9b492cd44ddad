"""A player's own dispute bundle over HTTP: GET /rooms/{room}/player-bundle (docs/bundle-format.md section 6)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from almanac.events.errors import RuleError
from almanac.services.forensics.errors import ForensicsError
from almanac.services.forensics.player_bundle import player_bundle
from almanac.services.gateway.api_forensics import forensics_api_error
from almanac.services.gateway.api_rooms import RoomId, gateway
from almanac.services.gateway.auth import ROLE_AUDITOR
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import bearer
from almanac.services.gateway.schemas import NAME_PATTERN, TOKEN_REQUIRED

router = APIRouter(tags=["forensics"])


@router.get("/rooms/{room}/player-bundle", openapi_extra=TOKEN_REQUIRED, summary="A player-safe bundle of a live "
            "room for the token's player: every event's public part and your own view opened, every other view as a "
            "salted hash only; `almanac verify-player-bundle` checks it against your checkpoints (rooms created with "
            "commitment scheme almanac-commit-v2; 409 `scheme_v1` for older rooms). An auditor names ?player=")
async def room_player_bundle(
    request: Request,
    room: str = RoomId,
    player: str | None = Query(None, pattern=NAME_PATTERN, max_length=100,
                               description="auditors only: whose bundle (a player's token names its own)"),
) -> Response:
    gw = gateway(request)
    claims = gw.reader_for(bearer(request), room)
    if claims.role != ROLE_AUDITOR:
        if player not in (None, claims.player):
            raise ApiError(403, "not_your_bundle", "a player may fetch only their own bundle", "player")
        player = claims.player
    if not player:
        raise ApiError(422, "player_required", "name the player whose bundle to issue (?player=)", "player")
    try:
        bundle = await gw.heavy.run(lambda loader: player_bundle(loader.store, gw.checkpoints, room, player,
                                                                int(time.time() * 1000)))
    except (ForensicsError, RuleError) as error:  # RuleError: the room's rules are not installed here (409)
        raise forensics_api_error(error) from None
    return json_response(bundle)
