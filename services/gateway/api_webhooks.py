"""Webhook subscriptions (auditor tokens: a game's own service), their dead letters and delivery figures.

The deliveries themselves are the notifier's (services/notifier.py): this router only writes and reads the
subscriptions and the outbox's figures in Redis.
"""

from __future__ import annotations

import json
import time
from typing import Annotated
from urllib.parse import urlsplit

import msgspec
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from almanac.services import notifier
from almanac.services.gateway.errors import ApiError, json_response
from almanac.services.gateway.gateway import Gateway, bearer
from almanac.services.gateway.schemas import TOKEN_REQUIRED, Name, decode_body, openapi_body

router = APIRouter(tags=["webhooks"])
# Typed as strings with their enum in the schema (not Literal): an unknown kind or scope gets its own refusal naming
# the allowed values, as every other refusal does.
Kind = Annotated[str, msgspec.Meta(pattern=r"^[a-z_]{1,32}$", extra_json_schema={"enum": list(notifier.KINDS)})]


class SubscribeRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where to POST notices, and which: ``scope`` deployment (every room), room, or player (one seat: only
    what that player may see). ``kinds``: your_turn, trade_offered, room_ended, deadline_soon (empty: all).
    ``secret``: the HMAC key of the signature header (at least 32 characters; drawn by the server if absent)."""

    url: Annotated[str, msgspec.Meta(min_length=8, max_length=2000)]
    scope: Annotated[str, msgspec.Meta(pattern=f"^({'|'.join(notifier.SCOPES)})$",
                                       extra_json_schema={"enum": list(notifier.SCOPES)})] = "deployment"
    room: Name | None = None
    player: Name | None = None
    kinds: Annotated[list[Kind], msgspec.Meta(max_length=8)] = []
    secret: Annotated[str, msgspec.Meta(min_length=32, max_length=200)] | None = None


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


@router.post("/webhooks", status_code=201, openapi_extra={**TOKEN_REQUIRED, **openapi_body(SubscribeRequest)},
             summary="Auditors: subscribe a URL to notices (your turn, trade offered, room ended)")
async def subscribe(request: Request) -> Response:
    gw = _gateway(request)
    gw.auditor(bearer(request))
    body: SubscribeRequest = decode_body(await request.body(), SubscribeRequest)
    parts = urlsplit(body.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError(422, "invalid_url", "the webhook URL must be http(s)://host/...", "url")
    unknown = [kind for kind in body.kinds if kind not in notifier.KINDS]
    if unknown:
        raise ApiError(422, "unknown_kind", f"no notice is called {unknown[0]!r}", "kinds", allowed=list(notifier.KINDS))
    if body.scope in ("room", "player") and body.room is None:
        raise ApiError(422, "room_required", f"a {body.scope} subscription names its room", "room")
    if body.scope == "player" and body.player is None:
        raise ApiError(422, "player_required", "a player subscription names its player", "player")
    if body.scope != "player" and body.player is not None:
        raise ApiError(422, "player_not_allowed", "only a player subscription names a player", "player")
    subscription = notifier.new_subscription(body.url, body.scope, body.room, body.player, tuple(body.kinds),
                                             body.secret, int(time.time() * 1000))
    await gw.client.hset(gw.keys.webhook_subscriptions(), subscription.id, msgspec.json.encode(subscription))
    return json_response(msgspec.to_builtins(subscription), 201, headers={"Location": f"/webhooks/{subscription.id}"})


@router.get("/webhooks", openapi_extra=TOKEN_REQUIRED, summary="Auditors: the webhook subscriptions (secrets left out)")
async def list_subscriptions(request: Request) -> Response:
    gw = _gateway(request)
    gw.auditor(bearer(request))
    raw = await gw.client.hgetall(gw.keys.webhook_subscriptions())
    found = [msgspec.json.decode(value, type=notifier.Subscription) for value in raw.values()]
    shown = [{k: v for k, v in msgspec.to_builtins(s).items() if k != "secret"} for s in found]
    return json_response({"subscriptions": sorted(shown, key=lambda s: s["created_ms"])})


@router.delete("/webhooks/{subscription}", openapi_extra=TOKEN_REQUIRED, summary="Auditors: end a subscription")
async def unsubscribe(request: Request, subscription: str = Path(pattern=r"^wh_[0-9a-f]{16}$")) -> Response:
    gw = _gateway(request)
    gw.auditor(bearer(request))
    if not await gw.client.hdel(gw.keys.webhook_subscriptions(), subscription):
        raise ApiError(404, "subscription_not_found", f"there is no subscription {subscription!r}", "subscription")
    return json_response({"deleted": subscription})


@router.get("/webhooks/dead", openapi_extra=TOKEN_REQUIRED, summary="Auditors: deliveries given up, newest first")
async def dead_letters(request: Request, limit: int = Query(100, ge=1, le=1000)) -> Response:
    gw = _gateway(request)
    gw.auditor(bearer(request))
    rows = await gw.client.lrange(gw.keys.webhook_dead(), 0, limit - 1)
    return json_response({"dead": [json.loads(row) for row in rows]})


@router.get("/webhooks/stats", openapi_extra=TOKEN_REQUIRED,
            summary="Auditors: deliveries enqueued, delivered, failed, dead, pending; latency p50/p99 (ms)")
async def delivery_stats(request: Request) -> Response:
    gw = _gateway(request)
    gw.auditor(bearer(request))
    return json_response(await notifier.stats(gw.client, gw.keys))
