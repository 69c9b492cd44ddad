"""API errors as JSON {code, message, field}; every failure path answers this shape and never a traceback."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from fastapi import FastAPI, Request, WebSocket
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import Response
from redis.exceptions import (
    ClusterError,
    ConnectionError as RedisConnectionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TimeoutError as RedisTimeoutError,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from almanac.events.errors import RulesNotInstalledError
from almanac.services.gateway.ids import UnguessableIds
from almanac.services.logging import get_logger
from almanac.services.redis_client import CLUSTER_ERRORS, pool_exhausted, refuses_writes

log = get_logger("almanac.gateway")
_JSON = msgspec.json.Encoder()
REQUEST_ID_HEADER = "x-request-id"
# A client's own request id is kept when it is short and plain (it reaches logs and headers); else a new one.
_CLIENT_REQUEST_ID = re.compile(rb"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,63}$")
INTERNAL_ERROR_MESSAGE = "the gateway failed to answer; the error is in its log under this request_id"
# Input the decoders let through but the server cannot represent: integers beyond 64 bits reach the msgpack
# encoder (OverflowError), JSON nested deeper than msgspec's recursion limit (RecursionError). They are the
# client's fault, so 422 and nothing changed (the command never reached the stream).
UNREPRESENTABLE = (OverflowError, RecursionError, msgspec.EncodeError)


new_request_id = UnguessableIds(16)  # names a request in logs: 16 hex digits, as before


def request_id(scope: dict[str, Any]) -> str:
    """This request's id: the client's X-Request-ID when well-formed, else a fresh one (kept in the scope)."""
    known = scope.get("almanac.request_id")
    if known is None:
        for name, value in scope.get("headers") or ():
            if name == b"x-request-id" and _CLIENT_REQUEST_ID.match(value):
                known = value.decode("ascii")
                break
        else:
            known = new_request_id()
        scope["almanac.request_id"] = known
    return known


def unrepresentable(error: BaseException) -> ApiError:
    what = "JSON nested too deep" if isinstance(error, RecursionError) else "a value out of range (integers are 64-bit)"
    return ApiError(422, "unrepresentable_value", f"the request holds {what}; nothing was changed")


def internal_error(scope: dict[str, Any]) -> ApiError:
    return ApiError(500, "internal_error", INTERNAL_ERROR_MESSAGE, request_id=request_id(scope))


def log_unhandled(error: BaseException, path: str | None, method: str, rid: str) -> None:
    """The one log line (bounded traceback) of an error that escaped the handlers: the client sees a 500."""
    log.error("unhandled_error", error_type=type(error).__name__, error=str(error)[:300], path=path, method=method,
              request_id=rid, exc_info=error)


# Redis cannot be reached or cannot take writes (refused, timed out, loading, a Cluster without a quorum,
# a read-only replica, a Cluster failing over: CLUSTERDOWN, TRYAGAIN, a slot without a primary, MOVED
# loops): the request is answered 503 store_unavailable, never 500. So is a Redis refusing writes for now
# (OOM, MISCONF, BUSY, READONLY, NOREPLICAS, MASTERDOWN: redis_client.refuses_writes): ``store_failure`` says
# which errors are the store's.
STORE_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, ClusterError, ReadOnlyError,
                                             ConnectionError, *CLUSTER_ERRORS)
STORE_RETRY_AFTER_S = 2


def store_failure(error: BaseException) -> bool:
    """The store's failure (503 store_unavailable), not the request's or ours: unreachable, or refusing writes."""
    return isinstance(error, STORE_ERRORS) or refuses_writes(error)
OVERLOAD_RETRY_AFTER_S = 1


def overloaded(what: str) -> ApiError:
    """The 503 for a command this gateway cannot start in time (a bounded queue is full): nothing was done."""
    return ApiError(503, "overloaded", f"the server is busy ({what}); nothing was done, retry after Retry-After "
                    "seconds", headers={"Retry-After": str(OVERLOAD_RETRY_AFTER_S)})


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None, *,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers  # response headers (Retry-After), never part of the body
        self.extra = extra

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        # An extra given as None (``allowed`` where a refusal names none) is left out: the Error schema has no null.
        body.update((name, value) for name, value in self.extra.items() if value is not None)
        return body


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_JSON.encode(body), status_code=status, media_type="application/json", headers=headers)


def error_response(status: int, code: str, message: str, field: str | None = None, **extra: Any) -> Response:
    return json_response(ApiError(status, code, message, field, **extra).body(), status)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
}


def store_unavailable(app: Any, error: Exception, path: str) -> ApiError:
    """The 503 for a Redis failure; the gateway notes the outage, which /health then reports until the
    engine shows it works again (api_ops.health)."""
    if pool_exhausted(error):  # every pooled connection stayed busy: this process is overloaded, Redis is fine
        log.warning("redis_pool_exhausted", path=path)
        return overloaded(str(error))
    gateway = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.note_store_outage()
    log.warning("store_unavailable", path=path, error=type(error).__name__)
    if isinstance(error, OutOfMemoryError):
        what = "is full (out of memory) and refuses writes"
    elif refuses_writes(error):
        what = "refuses writes for now (it cannot persist, a script holds it, or it is a replica)"
    else:
        what = "cannot be reached"
    return ApiError(
        503, "store_unavailable",
        f"the event store (Redis) {what}; retry after Retry-After seconds. A command may or may not "
        "have been queued: resend it with the same command_id (commands are idempotent by id)",
        headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
    )


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, error: ApiError) -> Response:
        return json_response(error.body(), error.status, error.headers)

    async def _store_error(request: Request, error: Exception) -> Response:
        refusal = store_unavailable(request.app, error, request.url.path)
        return json_response(refusal.body(), refusal.status, refusal.headers)

    for error_type in STORE_ERRORS:
        app.add_exception_handler(error_type, _store_error)

    @app.exception_handler(ResponseError)
    async def _redis_refused(request: Request, error: ResponseError) -> Response:
        if refuses_writes(error):  # OOM, MISCONF, BUSY, READONLY...: the store's failure, for now
            return await _store_error(request, error)
        raise error  # any other refusal is our bug: the 500 of the gateway's boundary

    @app.exception_handler(RulesNotInstalledError)
    async def _rules_not_installed(request: Request, error: RulesNotInstalledError) -> Response:
        # A room of a rules version this node lacks is never folded with other rules: a clear 409.
        return error_response(409, error.code, error.message, "room", allowed=error.allowed)

    @app.exception_handler(RequestValidationError)
    async def _invalid_parameter(request: Request, error: RequestValidationError) -> Response:
        gateway = getattr(request.app.state, "gateway", None)
        outsider = gateway.outsider_refusal(request) if gateway is not None else None
        if outsider is not None:  # an outsider learns it needs a token, not which parameters the route takes
            return json_response(outsider.body(), outsider.status, outsider.headers)
        first = error.errors()[0] if error.errors() else {}
        location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "header", "body")]
        field = ".".join(location) or None
        message = f"{first.get('msg', 'invalid value')}" + (f" (field {field})" if field else "")
        return error_response(422, "invalid_parameter", message, field)

    @app.exception_handler(WebSocketRequestValidationError)
    async def _invalid_live_parameter(websocket: WebSocket, error: WebSocketRequestValidationError) -> None:
        # Accept, then refuse with a close code and a JSON reason (not a bare HTTP 403 at the handshake).
        first = error.errors()[0] if error.errors() else {}
        location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "header")]
        field = ".".join(location) or None
        refusal = ApiError(422, "invalid_parameter", f"{first.get('msg', 'invalid value')} (field {field})", field)
        await websocket.accept()
        await websocket.send_text(_JSON.encode(refusal.body()).decode())
        await websocket.close(code=4422, reason=_JSON.encode({"code": refusal.code, "field": field}).decode()[:123])

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
        message = error.detail if isinstance(error.detail, str) else "request refused"
        if error.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}; see /docs or /openapi.json"
        return error_response(error.status_code, _HTTP_CODES.get(error.status_code, "http_error"), message)

    async def _unrepresentable(request: Request, error: Exception) -> Response | None:
        if request.scope["type"] != "http":
            raise error  # a WebSocket: the boundary closes it (1011)
        log.info("refused_unrepresentable", error_type=type(error).__name__, path=request.url.path)
        return json_response(unrepresentable(error).body(), 422)

    for kind in UNREPRESENTABLE:
        app.add_exception_handler(kind, _unrepresentable)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> Response:
        # Starlette re-raises after this answer: the gateway's boundary (app.GatewayApp) logs it, once.
        return json_response(internal_error(request.scope).body(), 500)
