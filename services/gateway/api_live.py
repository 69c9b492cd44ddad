"""The live feed: a WebSocket per room pushing the events the connected player may see, from a version on."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

import msgspec
from fastapi import APIRouter, Path, Query, WebSocket, WebSocketDisconnect
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

from almanac.events.shown import Shown
from almanac.services.gateway.auth import Claims
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.gateway import Gateway, bearer, client_address, viewer_of
from almanac.services.gateway.live_hub import Follower
from almanac.services.gateway.room_reader import PUBLIC, Viewer
from almanac.services.gateway.schemas import MAX_VERSION, NAME_PATTERN
from almanac.services.logging import get_logger
from almanac.services.redis_client import pool_exhausted

router = APIRouter(tags=["live"])
BATCH = 500
_JSON = msgspec.json.Encoder()
log = get_logger("almanac.gateway.live")
RoomId = Path(pattern=NAME_PATTERN, description="room id")


@router.websocket("/rooms/{room}/live")
async def live(websocket: WebSocket, room: str = RoomId,
               from_version: int = Query(1, ge=1, le=MAX_VERSION)) -> None:
    """Query ``from_version`` (default 1) and ``token`` (or an Authorization header).

    Each message is one event as the player may see it, in version order, each version once; a client
    that reconnects with ``from_version`` = last seen + 1 misses nothing and sees nothing twice.
    A refusal is one JSON message ``{code, message, field}`` and a close code 4000 + the HTTP status
    (4401, 4403, 4422; 4429 ``too_many_feeds_for_seat`` or ``too_many_feeds_for_address``: that seat's or that
    client address's feeds on this gateway are at their limit; 4503 ``too_many_feeds``: this gateway's are)
    whose reason is JSON ``{code, field}``. A close with 1011
    (server error) or 1013 (store unreachable or busy: try again later) means the feed did not end: reconnect
    with ``from_version``.
    """
    gw: Gateway = websocket.app.state.gateway
    await websocket.accept()
    try:
        claims = gw.reader_for(bearer(websocket), room)
        viewer = viewer_of(claims)
        follower = gw.live.open(room, claims, client_address(websocket))
    except ApiError as error:
        await refuse(websocket, error)
        return
    await _serve(gw, websocket, room, follower, from_version, viewer, 0)


# A spectator's feed may trail the room by at most this many versions.
MAX_DELAY = 1_000


@router.websocket("/rooms/{room}/watch")
async def watch(websocket: WebSocket, room: str = RoomId,
                from_version: int = Query(1, ge=1, le=MAX_VERSION),
                delay: int = Query(0, ge=0, le=MAX_DELAY)) -> None:
    """Spectators: the room's events as the public sees them (no token; every hidden value left out, as for
    the public on /events), version ``v`` sent once the room has reached ``v + delay`` (a delayed feed tells
    rival players nothing they could use now). Resuming, closes and refusals as on ``/live`` (the feeds a
    client address may open count them too)."""
    gw: Gateway = websocket.app.state.gateway
    await websocket.accept()
    address = client_address(websocket)
    try:
        if await gw.reader.ruleset_of(room) is None:
            raise ApiError(404, "room_not_found", f"room {room!r} does not exist", "room")
        # One "seat" per client address: spectators share no per-seat limit across addresses.
        follower = gw.live.open(room, Claims(room=room, player=f"spectator@{address}", role="spectator", exp=0),
                                address)
    except ApiError as error:
        await refuse(websocket, error)
        return
    await _serve(gw, websocket, room, follower, from_version, PUBLIC, delay)


async def _serve(gw: Gateway, websocket: WebSocket, room: str, follower: Follower, from_version: int,
                 viewer: Viewer, delay: int) -> None:
    gw.metrics.open_websockets += 1
    disconnected = asyncio.Event()
    watcher = asyncio.create_task(_watch_disconnect(websocket, disconnected, follower))
    code, reason = 1000, ""
    try:
        await _follow(gw, websocket, follower, from_version, viewer, disconnected, delay)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client went away mid-send
    except (RedisConnectionError, RedisTimeoutError) as error:  # other failures: the boundary closes 1011
        log.warning("live.store_unavailable", room=room, error=str(error)[:200])
        # A pool whose every connection stayed busy is this gateway's overload, not the store's outage.
        what = "overloaded" if pool_exhausted(error) else "store_unavailable"
        code, reason = 1013, _JSON.encode({"code": what, "retry": True}).decode()
    finally:
        gw.live.close(follower)
        gw.metrics.open_websockets -= 1
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
    with contextlib.suppress(Exception):
        await websocket.close(code=code, reason=reason)


async def refuse(websocket: WebSocket, error: ApiError) -> None:
    """Tell an accepted WebSocket why it is refused (a JSON message) and close it with 4000 + status."""
    await websocket.send_text(_JSON.encode(error.body()).decode())
    await websocket.close(code=4000 + error.status, reason=close_reason(error))


def close_reason(error: ApiError) -> str:
    # A close reason holds at most 123 bytes: the code and field; the message went before it.
    reason = _JSON.encode({"code": error.code, "field": error.field}).decode()
    return reason if len(reason.encode()) <= 123 else _JSON.encode({"code": error.code[:100]}).decode()


async def _watch_disconnect(websocket: WebSocket, disconnected: asyncio.Event, follower: Follower) -> None:
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
    finally:
        disconnected.set()
        follower.wake.set()


async def _follow(gw: Gateway, websocket: WebSocket, follower: Follower, from_version: int, viewer: Viewer,
                  disconnected: asyncio.Event, delay: int = 0) -> None:
    """History from the store, then what the gateway's shared read hands over (live_hub): each version once.

    The store is read whenever the handed-over events may be incomplete (at the start, after an overflow, on a
    gap), so the hand-over from history to live has no gap and no overlap."""
    await follower.started()  # from here on every append reaches ``follower.pending``
    last = from_version - 1
    held: collections.deque = collections.deque()  # read, not yet sent: within ``delay`` of the newest
    sent_checkpoint: dict[str, Any] | None = None  # the last checkpoint sent: where the next one's head starts
    while not disconnected.is_set():
        if follower.failed is not None:
            raise follower.failed
        if follower.behind:
            follower.behind = False  # before the read: whatever is handed over from here on is after it
            follower.pending.clear()
            envelopes = await gw.store.page(follower.room, last + 1, BATCH)
            follower.behind = follower.behind or len(envelopes) == BATCH  # more to read
        elif follower.pending:
            envelopes, follower.pending = follower.pending, []
        else:
            follower.wake.clear()
            await follower.wake.wait()
            continue
        for envelope in envelopes:
            if envelope.version <= last:
                continue  # read from the store already
            if envelope.version != last + 1:
                follower.behind = True  # a gap (the shared read started after it): read it from the store
                break
            last = envelope.version
            held.append(envelope)
            while held and held[0].version + delay <= last:
                sent = held.popleft()
                shown = Shown(sent)  # the message and its checkpoint's views from one decoding and redaction
                message = viewer.event(sent, shown)
                message["checkpoint"] = await gw.checkpoint(follower.room, sent.version, (sent,), sent_checkpoint,
                                                            {sent.version: shown})
                sent_checkpoint = message["checkpoint"] or sent_checkpoint
                await websocket.send_text(_JSON.encode(message).decode())
