"""The gateway application: ``create_app(settings)`` builds the FastAPI app that uvicorn serves."""

from __future__ import annotations

import asyncio
import contextlib
import re
import resource
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import structlog
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from redis.exceptions import ResponseError

from almanac.events.disclosure import Hidden
from almanac.services import bootstrap
from almanac.services.gateway import (
    api_console,
    api_dispute,
    api_docs,
    api_forensics,
    api_live,
    api_ops,
    api_player_bundle,
    api_queries,
    api_rooms,
    api_webhooks,
    asyncapi,
    metrics,
)
from almanac.services.gateway.auth import deployment_signer
from almanac.services.gateway.errors import (
    REQUEST_ID_HEADER,
    STORE_ERRORS,
    UNREPRESENTABLE,
    ApiError,
    install_error_handlers,
    internal_error,
    log,
    log_unhandled,
    overloaded,
    request_id,
    store_failure,
    store_unavailable,
    unrepresentable,
)
from almanac.services.gateway.gateway import Gateway, may_resend, scope_address
from almanac.services.gateway.heavy_reads import CLIENT_RECEIVE
from almanac.services.gateway.schemas import (
    BODY_TYPES,
    CommandRequest,
    CreateRoomRequest,
    EndRoomRequest,
    ForkRoomRequest,
    JoinRoomRequest,
)
from almanac.services.logging import get_logger
from almanac.services.redis_client import BoundedPool, close_idle_connections
from almanac.services.settings import Settings

_JSON = msgspec.json.Encoder()
access = get_logger("almanac.gateway.access")


def create_app(settings: Settings, on_ready: Callable[[], None] | None = None) -> FastAPI:
    """The gateway's app; ``on_ready`` is called once it is built, before it serves or its engine takes leases
    (the CLI freezes the start-up heap)."""
    if not settings.redis_url:
        raise ValueError("the gateway needs REDIS_URL (almanac up starts a Redis and sets it)")
    raise_open_files_limit()
    signer = deployment_signer(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A bounded pool with timeouts (bootstrap.Role.GATEWAY); its idle connections close (ALMANAC_REDIS_IDLE_S).
        runtime = bootstrap.runtime(settings, bootstrap.Role.GATEWAY)
        client = runtime.client
        gateway = app.state.gateway = Gateway(runtime, signer)
        reaper = None
        pool = getattr(client, "connection_pool", None)  # one server's; a Cluster client has one per node
        if settings.redis_idle_s and isinstance(pool, BoundedPool):
            reaper = asyncio.get_running_loop().create_task(
                close_idle_connections(pool, settings.redis_idle_s), name="gateway-idle-connections")
        try:  # everything it opened is closed below, also when a step of the start fails
            await gateway.outcomes.start()
            if on_ready is not None:
                on_ready()  # before its engine takes leases (the freeze's own collection stalls no command)
            await gateway.engine.start()
            yield
        finally:
            await gateway.engine.stop()  # the commands it holds go through the stream: before the waiter
            await gateway.engine_runtime.aclose()
            await gateway.live.stop()
            if reaper is not None:
                reaper.cancel()
                with contextlib.suppress(BaseException):
                    await reaper
            await gateway.heavy.close()
            await gateway.outcomes.close()
            await runtime.aclose()

    app = GatewayApp(
        title="Almanac gateway",
        version="0.1.0",
        description="Rooms, commands, views, audits and a live feed for the Almanac game backend. "
        "Errors are JSON {code, message, field, allowed}; every answer carries an X-Request-ID header "
        "(a 500 names it as request_id).",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from api_docs, with their assets from the package
        redoc_url=None,
        # FastAPI's OpenTelemetry hooks cost about 0.1 ms per request even when nothing is configured.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.signer = signer
    app.state.max_body_bytes = settings.max_body_bytes
    app.state.settings = settings  # the connections' limits (connection_guard.GuardedConnection)
    install_error_handlers(app)
    for router in (api_rooms.router, api_queries.router, api_forensics.router, api_dispute.router, api_player_bundle.router, api_live.router,
                   api_ops.router, api_webhooks.router, asyncapi.router, api_docs.docs_router(app.openapi_url or "/openapi.json")):
        app.include_router(router)
    api_console.mount(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    # Added last = outermost: an oversized body is refused before anything else reads it.
    # (POST /rooms/{room}/commands does not come through here: GatewayApp answers it first, CORS or not.)
    app.add_middleware(MetricsTiming)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.allow_origins([o.strip() for o in settings.cors_origins.split(",") if o.strip()])
    return app


def raise_open_files_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (as Go's runtime does); the limit now.

    Every live feed and HTTP client holds a socket: under a soft limit of 1,024 (many shells, and containers
    whose runtime sets 1024:524288) 512 feeds locked every other client out. The hard limit is the operator's
    (systemd's LimitNOFILE, the container runtime's); the gateway's own caps keep it from being reached."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _openapi(app: FastAPI) -> dict[str, Any]:
    return api_docs.build_openapi(
        # Hidden: the marker a redacted event field carries ({"hidden": true}), see events/disclosure.py.
        app, [*dict.fromkeys([CreateRoomRequest, JoinRoomRequest, EndRoomRequest, CommandRequest, ForkRoomRequest,
                              *BODY_TYPES]), Hidden])


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

        # A heavy read listens on the request's receive for its client's going away (heavy_reads.CLIENT_RECEIVE).
        listening = CLIENT_RECEIVE.set(receive)
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            CLIENT_RECEIVE.reset(listening)
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            gateway: Gateway | None = getattr(scope["app"].state, "gateway", None)
            if gateway is not None:
                gateway.metrics.request(path, scope["method"], status["code"], time.perf_counter() - started)


COMMAND_PATH = re.compile(r"^/rooms/([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})/commands$")
COMMAND_ROUTE = metrics.COMMAND_ROUTE


class GatewayApp(FastAPI):
    """FastAPI behind the gateway's one exception boundary, with ``POST /rooms/{room}/commands`` answered
    before Starlette's middleware stack.

    The boundary (``__call__``) gives every HTTP request and WebSocket an id (``X-Request-ID``, the
    client's own when well-formed), writes one access-log line per request, and turns anything that
    escaped the handlers into a JSON 500 ``internal_error`` carrying the request id (a WebSocket: close
    code 1011 with a JSON reason) plus one log line with a bounded traceback. Nothing reaches uvicorn.

    The command path is the hot path of every game: the generic layers (error and telemetry middleware,
    two body limits, the metrics wrapper, routing and dependencies, each wrapping ``send``) cost more CPU
    than the command's own work on a 2-core machine. Here the same checks are done inline, once: the body
    limit (413), the handler (api_rooms.run_command, as the documented route calls it), errors as JSON
    and the request metrics. It is the one path of commands in every configuration: with CORS on
    (``allow_origins``) Starlette's ``CORSMiddleware`` stands at this boundary, in front of both the command
    path and the FastAPI stack, so a command's answer carries the same CORS headers as any other.
    """

    cors: CORSMiddleware | None = None  # set by allow_origins; its app is ``_dispatch``

    def allow_origins(self, origins: list[str]) -> None:
        """CORS for ``origins`` (none: off), on every HTTP answer: one ``CORSMiddleware`` used as the ASGI app it
        is (its public interface), wrapped around the command path and the FastAPI stack alike; it answers
        preflights itself. ``state.cors`` tells the connection guard (which sheds commands only when it is off)."""
        self.state.cors = bool(origins)
        self.cors = CORSMiddleware(self._dispatch, allow_origins=origins, allow_methods=["*"],
                                   allow_headers=["Authorization", "Content-Type", "Idempotency-Key"]) if origins else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await super().__call__(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(scope)
        answer = {"status": 0, "accepted": False}
        header = (REQUEST_ID_HEADER.encode(), rid.encode())

        async def send_with_id(message: dict) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif message["type"] == "websocket.accept":
                answer["accepted"] = True
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif message["type"] in ("websocket.close", "websocket.http.response.start"):
                answer["status"] = message.get("code", message.get("status", 0))
            await send(message)

        route = None
        # The request id in every log line of the request: its context variable set, then reset to what it was.
        # Not ``bound_contextvars``, which copies every structlog variable of the context to restore them after (8 µs a
        # request of the ~10 it cost, on the command path; docs/capacity.md, issue 29's sixth pass).
        bound = structlog.contextvars.bind_contextvars(request_id=rid)
        try:
            if kind == "http" and scope["method"] == "POST" and COMMAND_PATH.match(scope["path"]):
                route = COMMAND_ROUTE
            if kind == "http" and self.cors is not None:
                await self.cors(scope, receive, send_with_id)
            else:
                await self._dispatch(scope, receive, send_with_id)
        except Exception as error:
            await self._unexpected(error, scope, send, send_with_id, answer, rid)
        finally:
            structlog.contextvars.reset_contextvars(**bound)
            access.info("request", method=scope.get("method", "WS"),
                        route=route or getattr(scope.get("route"), "path", "unmatched"),
                        status=answer["status"], ms=round((time.perf_counter() - started) * 1000, 2),
                        request_id=rid, client=_client(scope))

    async def _dispatch(self, scope: dict, receive: Any, send: Any) -> None:
        """A command to ``_command``, anything else to the FastAPI stack."""
        match = COMMAND_PATH.match(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if match is not None:
            await self._command(match.group(1), scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _unexpected(self, error: Exception, scope: dict, send: Any, send_with_id: Any,
                          answer: dict, rid: str) -> None:
        log_unhandled(error, scope.get("path"), scope.get("method", "WS"), rid)
        with contextlib.suppress(Exception):  # the client may be gone: nothing more to tell it
            if scope["type"] == "http":
                if not answer["status"]:  # a started answer (Starlette's error handler) is already JSON
                    await _send_json(send_with_id, 500, _JSON.encode(internal_error(scope).body()))
            else:
                reason = _JSON.encode({"code": "internal_error", "request_id": rid}).decode()
                if not answer["accepted"]:
                    await send_with_id({"type": "websocket.accept"})
                await send_with_id({"type": "websocket.close", "code": 1011, "reason": reason})

    async def _command(self, room: str, scope: dict, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        status = 500
        try:
            declared = None
            names_id = False
            for name, value in scope["headers"]:
                if name == b"content-length":
                    declared = value
                elif name == b"idempotency-key":
                    names_id = True
            gw: Gateway | None = getattr(self.state, "gateway", None)
            address = scope_address(scope)
            max_bytes = self.state.max_body_bytes
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                status = 413
                await _send_json(send, 413, _too_large(max_bytes))
                return
            body = b""
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if len(body) > max_bytes:
                    status = 413
                    await _send_json(send, 413, _too_large(max_bytes))
                    return
                if not message.get("more_body", False):
                    break
            # Admitted or refused once, here, by the rule every place that can refuse a command first uses
            # (``Gateway.command_refusal``; a client waiting for "100 Continue" is told to continue and asked with its
            # body, which may resend a decided command). Past capacity most requests are refused: their answer is
            # encoded once (``_refuse_overloaded``), no parsing, token or task.
            admitted = False
            if gw is not None:
                if (reason := gw.command_refusal(address, body, names_id)) is not None:
                    status = 503
                    await _refuse_overloaded(gw, send, reason)
                    return
                admitted = not may_resend(body, names_id)  # decided here: run_command does not ask again
            status, headers, answer = await command_answer(self, room, scope["headers"], body, scope["path"], address,
                                                           admitted)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
        finally:
            gateway: Gateway | None = getattr(self.state, "gateway", None)
            if gateway is not None:
                gateway.metrics.request(COMMAND_ROUTE, "POST", status, time.perf_counter() - started)


async def command_answer(app: Any, room: str, headers: list[tuple[bytes, bytes]], body: bytes,
                         path: str, address: str | None = None, admitted: bool = False
                         ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The answer to ``POST /rooms/{room}/commands`` once its body is read: status, raw headers, body.
    ``admitted``: admission already let it in (``GatewayApp``), so ``run_command`` does not decide again.

    Refusals become their JSON error, a store failure 503, anything else unexpected propagates to the
    caller's 500 (``GatewayApp``'s boundary).
    """
    authorization = idempotency = None
    for name, value in headers:
        if name == b"authorization":
            authorization = value
        elif name == b"idempotency-key":
            idempotency = value
    scheme, _, token = (authorization or b"").decode("latin-1").partition(" ")
    try:
        response = await api_rooms.run_command(
            app.state.gateway,
            room,
            token.strip() if scheme.lower() == "bearer" else None,
            body,
            idempotency.decode("latin-1") if idempotency else None,
            address,
            admitted,
        )
    except ApiError as error:
        return _error_answer(error)
    except (*STORE_ERRORS, ResponseError) as error:
        if not store_failure(error):
            raise
        return _error_answer(store_unavailable(app, error, path))
    except UNREPRESENTABLE as error:
        log.info("refused_unrepresentable", error_type=type(error).__name__, path=path)
        return _error_answer(unrepresentable(error))
    return response.status_code, response.raw_headers, response.body


_OVERLOADED: dict[str, tuple[list[tuple[bytes, bytes]], bytes]] = {}


async def _refuse_overloaded(gateway: Gateway, send: Any, reason: str) -> None:
    """503 ``overloaded`` for ``reason`` (one of admission's two, constant for the process: encoded once)."""
    gateway.metrics.commands.inc(outcome="overloaded", ruleset="")
    answer = _OVERLOADED.get(reason)
    if answer is None:
        refusal = overloaded(reason)
        body = _JSON.encode(refusal.body())
        answer = _OVERLOADED[reason] = (json_headers(body, refusal.headers), body)
    await send({"type": "http.response.start", "status": 503, "headers": answer[0]})
    await send({"type": "http.response.body", "body": answer[1]})


def _error_answer(error: ApiError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = _JSON.encode(error.body())
    return error.status, json_headers(body, error.headers), body


def _client(scope: dict) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None


def body_too_large(max_bytes: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the request body is larger than {max_bytes} bytes")


def _too_large(max_bytes: int) -> bytes:
    return _JSON.encode(body_too_large(max_bytes).body())


def json_headers(body: bytes, headers: dict[str, str] | None = None) -> list[tuple[bytes, bytes]]:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return raw + [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]


async def _send_json(send: Any, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": json_headers(body, headers)})
    await send({"type": "http.response.body", "body": body})


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
        await _send_json(send, 413, _too_large(self.max_bytes))
