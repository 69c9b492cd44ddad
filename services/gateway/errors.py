"""API errors as JSON {code, message, field}; every failure path answers this shape and never a traceback."""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from redis.exceptions import (
    ClusterError,
    ConnectionError as RedisConnectionError,
    ReadOnlyError,
    TimeoutError as RedisTimeoutError,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from almanac.events.errors import RulesNotInstalledError
from almanac.services.logging import get_logger

log = get_logger("almanac.gateway")
_JSON = msgspec.json.Encoder()


# Redis cannot be reached or cannot take writes (refused, timed out, loading, a Cluster without a quorum,
# a read-only replica): the request is answered 503 store_unavailable, never 500.
STORE_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, ClusterError, ReadOnlyError)
STORE_RETRY_AFTER_S = 2


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
        body.update(self.extra)
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
    gateway = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.note_store_outage()
    log.warning("store_unavailable", path=path, error=type(error).__name__)
    return ApiError(
        503, "store_unavailable",
        "the event store (Redis) cannot be reached; retry after Retry-After seconds. A command may or may not "
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

    @app.exception_handler(RulesNotInstalledError)
    async def _rules_not_installed(request: Request, error: RulesNotInstalledError) -> Response:
        # A room of a rules version this node lacks is never folded with other rules: a clear 409.
        return error_response(409, error.code, error.message, "room", allowed=error.allowed)

    @app.exception_handler(RequestValidationError)
    async def _invalid_parameter(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0] if error.errors() else {}
        location = [str(part) for part in first.get("loc", ()) if part not in ("query", "path", "header", "body")]
        field = ".".join(location) or None
        message = f"{first.get('msg', 'invalid value')}" + (f" (field {field})" if field else "")
        return error_response(422, "invalid_parameter", message, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
        message = error.detail if isinstance(error.detail, str) else "request refused"
        if error.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}; see /docs or /openapi.json"
        return error_response(error.status_code, _HTTP_CODES.get(error.status_code, "http_error"), message)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> Response:
        # The traceback goes to the server log only; the client gets a stable code and a hint.
        log.exception("unhandled_error", path=request.url.path, method=request.method)
        return error_response(500, "internal_error", "the gateway failed to answer; the error is in its log")
