"""The gateway application: ``create_app(settings)`` builds the FastAPI app that uvicorn serves."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from services.gateway import api_live, api_ops, api_queries, api_rooms
from services.gateway.auth import TokenSigner, resolve_secret
from services.gateway.context import Gateway
from services.gateway.errors import ApiError, install_error_handlers, json_response
from services.gateway.schemas import CommandRequest, CreateRoomRequest, EndRoomRequest, JoinRoomRequest
from services.redis_client import connect
from services.settings import Settings

_JSON = msgspec.json.Encoder()


def create_app(settings: Settings) -> FastAPI:
    if not settings.redis_url:
        raise ValueError("the gateway needs REDIS_URL (almanac up starts a Redis and sets it)")
    signer = TokenSigner(resolve_secret(settings.secret, settings.data_dir), settings.token_ttl_s)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = connect(settings.redis_url, settings.redis_cluster)
        gateway = app.state.gateway = Gateway(settings, client, signer)
        await gateway.outcomes.start()
        try:
            yield
        finally:
            await gateway.outcomes.stop()
            await client.aclose()

    app = FastAPI(
        title="Almanac gateway",
        version="0.1.0",
        description="Rooms, commands, views, audits and a live feed for the Almanac game backend. "
        "Errors are JSON {code, message, field}.",
        lifespan=lifespan,
        # FastAPI's OpenTelemetry hooks cost about 0.1 ms per request even when nothing is configured.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.signer = signer
    install_error_handlers(app)
    for router in (api_rooms.router, api_queries.router, api_live.router, api_ops.router):
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    # Added last = outermost: an oversized body is refused before anything else reads it.
    app.add_middleware(CommandFastPath)
    app.add_middleware(MetricsTiming)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    _, components = msgspec.json.schema_components(
        [CreateRoomRequest, JoinRoomRequest, EndRoomRequest, CommandRequest],
        ref_template="#/components/schemas/{name}",
    )
    schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
    app.openapi_schema = schema
    return schema


class MetricsTiming:
    """Counts requests and their latency by route template (never by raw path: bounded label values)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_with_status(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            gateway: Gateway | None = getattr(scope["app"].state, "gateway", None)
            if gateway is not None:
                gateway.metrics.requests.inc(route=path, method=scope["method"], status=str(status["code"]))
                gateway.metrics.request_latency.observe(time.perf_counter() - started, route=path)


class CommandFastPath:
    """``POST /rooms/{room}/commands`` without FastAPI's routing and dependency layers.

    The hot path of every game: those layers cost more CPU than the command's own work on a 2-core
    machine. Same handler (api_rooms.run_command) and same answers as the documented route.
    """

    PATH = re.compile(r"^/rooms/([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})/commands$")

    ROUTE_LABEL = SimpleNamespace(path="/rooms/{room}/commands")

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        match = self.PATH.match(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if match is None:
            await self.app(scope, receive, send)
            return
        fastapi_app: FastAPI = scope["app"]
        scope["route"] = self.ROUTE_LABEL  # the metrics label, as if routed
        headers = dict(scope["headers"])
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = authorization.partition(" ")
        idempotency = headers.get(b"idempotency-key")
        try:
            response = await api_rooms.run_command(
                fastapi_app.state.gateway,
                match.group(1),
                token.strip() if scheme.lower() == "bearer" else None,
                body,
                idempotency.decode("latin-1") if idempotency else None,
            )
        except ApiError as error:
            response = json_response(error.body(), error.status)
        await response(scope, receive, send)


class BodyLimit:
    """Refuses bodies over the limit with 413 before the app sees them (declared or streamed length)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:
        body = _JSON.encode(
            ApiError(413, "body_too_large", f"the request body is larger than {self.max_bytes} bytes").body()
        )
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
