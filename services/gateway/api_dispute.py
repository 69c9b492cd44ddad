"""Dispute bundles over HTTP for auditors: GET /rooms/{room}/dispute, and POST /bundles/verify (docs/forensics.md)."""

from __future__ import annotations

import json
import time

import msgspec

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from almanac.events.codec import to_builtins
from almanac.events.forensics.bundle_check import BUNDLE_FORMAT, Verdict, verify_bundle
from almanac.services.checkpoints import player_checkpoints
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.forensics.errors import ForensicsError
from almanac.services.gateway.api_forensics import forensics_api_error
from almanac.services.gateway.api_rooms import RoomId, gateway
from almanac.services.gateway.auth import ROLE_AUDITOR
from almanac.services.gateway.context import bearer
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.schemas import (
    MAX_VERSION,
    NAME_PATTERN,
    TOKEN_REQUIRED,
    BundleVerifyRequest,
    decode_body,
    openapi_body,
)

router = APIRouter(tags=["forensics"])


@router.get("/rooms/{room}/dispute", openapi_extra=TOKEN_REQUIRED, summary="Auditors: a dispute bundle (one audit view's item, e.g. ?trade=ID, "
            "or ?view=NAME&id=ID, or ?from=A&to=B) that anyone can verify offline")
async def room_dispute(
    request: Request,
    room: str = RoomId,
    trade: str | None = Query(None, max_length=100, description="a realm trade id (shorthand for view=trade&id=)"),
    view: str | None = Query(None, pattern=NAME_PATTERN, description="an audit view of the room's rule-set"),
    item: str | None = Query(None, alias="id", max_length=100, description="what the audit view follows"),
    first: int | None = Query(None, alias="from", ge=1, le=MAX_VERSION, description="first version of a range"),
    last: int | None = Query(None, alias="to", ge=1, le=MAX_VERSION, description="last version of a range"),
) -> Response:
    gw = gateway(request)
    gw.auditor(bearer(request), room)
    if trade is not None:
        if view is not None or item is not None:
            raise ApiError(422, "subject_conflict", "give trade, or view and id, not both", "trade")
        view, item = "trade", trade
    ranged = first is not None or last is not None
    if ranged == (view is not None) or (view is not None and item is None) or (ranged and (first is None or last is None)):
        raise ApiError(422, "subject_required", "give exactly one of: trade; view and id; from and to", "view")
    try:
        bundle = await gw.heavy.run(lambda store: dispute_bundle(
            store, room, int(time.time() * 1000), view=view, item=item,
            versions=(first, last) if ranged else None, checkpointer=gw.checkpoints))  # type: ignore[arg-type]
    except ForensicsError as error:
        raise forensics_api_error(error) from None
    return json_response(bundle)


@router.post("/bundles/verify", summary="Verify a dispute bundle as `almanac verify-bundle` does: every step and "
             "the verdict; the body is {bundle, checkpoints?, keys?, expect_head?} (or a bare bundle)",
             openapi_extra=openapi_body(BundleVerifyRequest))
async def bundles_verify(request: Request) -> Response:
    gw = gateway(request)  # the body limit of the gateway applies (ALMANAC_MAX_BODY_BYTES)
    data = await request.body()
    try:
        parsed = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ApiError(422, "not_json", f"the body is not JSON: {error}", "body") from None
    if isinstance(parsed, dict) and parsed.get("format") == BUNDLE_FORMAT:
        parsed = {"bundle": parsed}  # a bare bundle, as before checkpoints
    asked: BundleVerifyRequest = decode_body(msgspec.json.encode(parsed), BundleVerifyRequest)
    bundle = asked.bundle
    checkpoints = [msgspec.structs.asdict(checkpoint) for checkpoint in asked.checkpoints]
    keys = to_builtins(asked.keys) if asked.keys is not None else gw.checkpoints.ring.document

    async def check(_store: object) -> Verdict:
        return verify_bundle(bundle, asked.expect_head, checkpoints, keys)

    verdict = await gw.heavy.run(check)  # CPU work off the event loop, a few at once
    return json_response({"ok": verdict.ok, "room": verdict.room, "steps": to_builtins(verdict.steps),
                          "text": verdict.text()})


@router.get("/.well-known/almanac-keys.json", summary="The deployment's checkpoint key set: the Ed25519 public keys "
            "that sign checkpoints (active and retired); docs/bundle-format.md")
async def key_set(request: Request) -> Response:
    return json_response(gateway(request).checkpoints.ring.document,
                         headers={"Cache-Control": "public, max-age=300"})


@router.get("/rooms/{room}/checkpoints", openapi_extra=TOKEN_REQUIRED, summary="Your checkpoints of a room: the "
            "signed head after each of your commands and at the room's head, with the key set (a checkpoint file)")
async def room_checkpoints(request: Request, room: str = RoomId) -> Response:
    gw = gateway(request)
    claims = gw.reader_for(bearer(request), room)
    player = None if claims.role == ROLE_AUDITOR else claims.player
    try:
        document = await gw.heavy.run(lambda store: player_checkpoints(gw.checkpoints, store, room, player))
    except LookupError:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room") from None
    return json_response(document)
