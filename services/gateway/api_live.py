"""The live feed: a WebSocket per room pushing the events the connected player may see, from a version on."""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
from fastapi import APIRouter, Path, Query, WebSocket, WebSocketDisconnect
from redis.exceptions import ConnectionError as RedisConnectionError, TimeoutError as RedisTimeoutError

from almanac.events import codec
from almanac.services.gateway.context import Gateway, bearer
from almanac.services.gateway.errors import ApiError
from almanac.services.gateway.room_reader import Viewer
from almanac.services.gateway.schemas import MAX_VERSION, NAME_PATTERN
from almanac.services.logging import get_logger

router = APIRouter(tags=["live"])
BLOCK_MS = 1_000
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
    (4401, 4403, 4422) whose reason is JSON ``{code, field}``. A close with 1011 (server error) or 1013
    (store unreachable: try again later) means the feed did not end: reconnect with ``from_version``.
    """
    gw: Gateway = websocket.app.state.gateway
    await websocket.accept()
    try:
        viewer = gw.viewer(bearer(websocket), room)
    except ApiError as error:
        await refuse(websocket, error)
        return
    gw.metrics.open_websockets += 1
    disconnected = asyncio.Event()
    watcher = asyncio.create_task(_watch_disconnect(websocket, disconnected))
    code, reason = 1000, ""
    try:
        await _follow(gw, websocket, room, from_version, viewer, disconnected)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client went away mid-send
    except (RedisConnectionError, RedisTimeoutError) as error:  # other failures: the boundary closes 1011
        log.warning("live.store_unavailable", room=room, error=str(error)[:200])
        code, reason = 1013, _JSON.encode({"code": "store_unavailable", "retry": True}).decode()
    finally:
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


async def _watch_disconnect(websocket: WebSocket, disconnected: asyncio.Event) -> None:
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
    finally:
        disconnected.set()


async def _follow(gw: Gateway, websocket: WebSocket, room: str, from_version: int, viewer: Viewer,
                  disconnected: asyncio.Event) -> None:
    key = gw.keys.events(room)
    last_id = f"{from_version - 1}-0"
    while not disconnected.is_set():
        # XREAD from the last id both catches up on the stored history and then waits for new entries,
        # so the hand-over from history to live has no gap and no overlap.
        answer = await gw.client.xread({key: last_id}, count=BATCH, block=BLOCK_MS)
        for _, entries in answer or ():
            for entry_id, fields in entries:
                version = int(entry_id.split(b"-", 1)[0])
                envelope = codec.decode_envelope(fields[b"e"], room, version)
                await websocket.send_text(_JSON.encode(viewer.event(envelope)).decode())
                last_id = entry_id.decode()
