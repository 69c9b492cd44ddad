"""Dispute bundles over HTTP for auditors: GET /rooms/{room}/dispute, and POST /bundles/verify (docs/forensics.md)."""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from almanac.events import codec
from almanac.events.codec import to_builtins
from almanac.events.forensics.bundle_check import Verdict, verify_bundle
from almanac.services.checkpoints import player_checkpoints
from almanac.services.forensics.bundle import audience_of, dispute_bundle
from almanac.services.forensics.errors import ForensicsError
from almanac.services.gateway.api_forensics import forensics_api_error
from almanac.services.gateway.api_rooms import RoomId, gateway
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, Claims
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import bearer
from almanac.services.gateway.schemas import (
    MAX_VERSION,
    NAME_PATTERN,
    TOKEN_REQUIRED,
    CheckpointBody,
    KeySetBody,
    ReceiptBody,
    decode_body,
    openapi_body,
)

router = APIRouter(tags=["forensics"])
HEAD_PATTERN = r"^([0-9]{1,9}:)?[0-9a-f]{64}$"
ROOM_ID = re.compile(NAME_PATTERN)


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
        bundle = await gw.heavy.run(lambda loader: dispute_bundle(
            loader.store, room, int(time.time() * 1000), view=view, item=item,
            versions=(first, last) if ranged else None, checkpointer=gw.checkpoints))  # type: ignore[arg-type]
    except ForensicsError as error:
        raise forensics_api_error(error) from None
    return json_response(bundle)


class VerifyBundleRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A dispute bundle to verify (as ``almanac dispute`` or GET /rooms/{room}/dispute wrote it; the gateway's body
    limit ALMANAC_MAX_BODY_BYTES bounds it, the CLI verifies any size offline) and, optionally, the head you hold
    for its room from elsewhere: ``HASH`` (its head) or ``VERSION:HASH`` (an earlier version's: checked, but only a
    head at the bundle's last version, yours or this server's own chain, makes the verdict VERIFIED)."""

    bundle: dict[str, Any]
    expect_head: Annotated[str, msgspec.Meta(pattern=HEAD_PATTERN, max_length=75)] | None = None
    # Signed checkpoints players hold (any number, any player; docs/bundle-format.md): the bundle's history must
    # pass through each; a contradiction is a failed step naming the checkpoint.
    checkpoints: Annotated[list[CheckpointBody], msgspec.Meta(max_length=10_000)] = []
    # The key set to check signatures with; default: this deployment's (GET /.well-known/almanac-keys.json).
    keys: KeySetBody | None = None
    # Signed refusal receipts players hold (docs/bundle-format.md section 8): each must stand on the bundle's history
    # and its command, decided again there, be refused with the signed code; one the rules accept is a false refusal.
    receipts: Annotated[list[ReceiptBody], msgspec.Meta(max_length=1_000)] = []


async def _verify_posted(store: Any, body: VerifyBundleRequest, claims: Claims, keys: dict[str, Any]) -> Verdict:
    """The verdict, anchored also on this server's own chain when it holds the bundle's room (a forged bundle of
    a room held here, with another head, fails its anchor step; a refusal it shows must be one stored here).
    For a held room that is live with hidden values, only an auditor may ask: the answer compares (and, on a
    mismatch, shows) the server's chain hashes, and whether a refusal was stored, which would let a player
    confirm a guess of a hidden value (such a room's bundles are AUDITORS ONLY too)."""
    anchors, refusals = [], None
    room, head = body.bundle.get("room"), body.bundle.get("head")
    if isinstance(room, str) and ROOM_ID.fullmatch(room) and isinstance(head, dict):
        latest = await store.latest_version(room)
        version = head.get("version")
        if latest and not (claims.role == ROLE_AUDITOR and claims.room in (ANY_ROOM, room)) \
                and await _auditors_only(store, room, latest):
            raise ApiError(403, "auditors_only", f"room {room!r} is live and its rules hide values: a bundle of it is "
                           "verified against this server's chain only for an auditor (role 'auditor')", "bundle")
        if latest and isinstance(version, int) and not isinstance(version, bool):
            if not 1 <= version <= latest:
                # More versions than the room has here: no version of ours to compare with but our head, which
                # the bundle's chain must then pass through.
                version = latest
            for envelope in await store.read(room, version, version):
                anchors.append((f"{version}:{envelope.hash}", "the server's own chain"))
            refusals = set(await store.rejections(room))  # a refusal shown must be one stored here
    checkpoints = [msgspec.structs.asdict(checkpoint) for checkpoint in body.checkpoints]
    receipts = [msgspec.structs.asdict(receipt) for receipt in body.receipts]
    return verify_bundle(body.bundle, body.expect_head, anchors=anchors, stored_refusals=refusals,
                         checkpoints=checkpoints, keys=keys, receipts=receipts)


async def _auditors_only(store: Any, room: str, latest: int) -> bool:
    """Whether a room this server holds is one whose bundles only auditors may read (live, its rules hiding values)."""
    first, last = (await store.read(room, 1, 1))[0], (await store.read(room, latest, latest))[0]
    if first.type != "room.created":
        return True  # a fork: its parent's rules, not read here; as hidden as it can be
    return audience_of(room, codec.decode_event(first), ended=last.type == "room.ended")["who"] == "auditors"


@router.post("/bundles/verify", openapi_extra=openapi_body(VerifyBundleRequest) | TOKEN_REQUIRED,
             summary="Verify a dispute bundle as `almanac verify-bundle` does: every step and the verdict (VERIFIED, "
             "INCOMPLETE naming what was not checked, NOT VERIFIED); for a room this server holds, also against its "
             "own chain. Any valid token, but an auditor's for a held room that is live with hidden values (403 "
             "`auditors_only`: the answer would show the server's chain hashes); a heavy read (a few at once: 503 "
             "`overloaded` past that)")
async def bundles_verify(request: Request) -> Response:
    gw = gateway(request)  # the body limit of the gateway applies (ALMANAC_MAX_BODY_BYTES)
    claims = gw.claims(bearer(request))  # not anonymous: the whole chain is re-decided, CPU in proportion
    await gw.rate_limits.check_token(claims)  # counted per token (ALMANAC_RATE_COMMANDS)
    body: VerifyBundleRequest = decode_body(await request.body(), VerifyBundleRequest)
    keys = to_builtins(body.keys) if body.keys is not None else gw.checkpoints.ring.document
    verdict = await gw.heavy.run(lambda loader: _verify_posted(loader.store, body, claims, keys))  # off the event loop, a few at once
    # ``seats`` as the text's seats line shows them: only while no step failed (a failed chain's seats are nobody's)
    seats = to_builtins(verdict.seats) if verdict.seats is not None and verdict.failed is None else None
    return json_response({"ok": verdict.ok, "status": verdict.status, "room": verdict.room,
                          "unchecked": verdict.unchecked, "steps": to_builtins(verdict.steps),
                          "text": verdict.text(), "seats": seats})


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
        document = await gw.heavy.run(lambda loader: player_checkpoints(gw.checkpoints, loader.store, room, player))
    except LookupError:
        raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room") from None
    return json_response(document)
