"""The gateway's HTTP/1.1 protocol for uvicorn: httptools, a command refused for overload before any ASGI cycle, one write per answer.

Past capacity most requests are refused, and under plain uvicorn a refusal costs nearly a full request:
an asyncio task, the request/response cycle, the ASGI layers, two socket writes (~0.3 ms of the
gateway's one core each), so a gateway offered twice what it serves spends its core refusing and the
commands it accepted queue behind the refusals. Here a ``POST /rooms/{room}/commands`` that finds the
gateway overloaded (``Gateway.overload_reason``, the same test the handler makes) is answered from the
parser's callback with a prepared 503: no task, no cycle, no body read, one write. The body that
follows is parsed and dropped, so the connection stays usable. So is a command whose room token this
gateway already saw over its rate limit (429 until its window ends: ``ratelimit.UsedWindows``), so that
a client that keeps sending past its limit costs next to nothing.

Every other answer goes out in ONE write: uvicorn writes the status line and headers, then the body, as
two system calls; ``OneWriteCycle`` holds the head until the first body chunk (a streamed answer sends
its head with its first chunk, not later).
"""

from __future__ import annotations

import asyncio
import time
from http import HTTPStatus
from typing import Any

import msgspec
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from almanac.services.gateway.errors import REQUEST_ID_HEADER, ApiError, overloaded, request_id

COMMAND_PREFIX = b"/rooms/"
COMMAND_SUFFIX = b"/commands"
_JSON = msgspec.json.Encoder()


class GatewayHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (``uvicorn.run(http=GatewayHttpProtocol)``) with an early overload refusal."""

    def on_headers_complete(self) -> None:
        # The app uvicorn was given (GatewayApp): its state holds the Gateway once the lifespan has started.
        state = getattr(self.config.app, "state", None)
        # With CORS on, commands take the app's ordinary stack, where the CORS middleware answers them too.
        gateway = None if getattr(state, "cors", False) else getattr(state, "gateway", None)
        # Only when no earlier request of this connection is still being answered: HTTP/1.1 answers in
        # order, so a refusal written now would be taken for the earlier request's answer. Behind one, the
        # command goes the usual way (queued by uvicorn) and its handler refuses it, in order.
        idle = self.cycle is None or self.cycle.response_complete
        if (idle and gateway is not None and self.parser.get_method() == b"POST" and not self.parser.should_upgrade()
                and _is_command(self.url)):
            reason = gateway.overload_reason()
            if reason is not None:
                gateway.metrics.commands.inc(outcome="overloaded", ruleset="")
                self._refuse(gateway, overloaded(reason))
                return
            known = _known_rate_refusal(gateway, self.url, self.headers)
            if known is not None:
                self._refuse(gateway, known)
                return
        super().on_headers_complete()
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:
            # The task just created has not run yet: it looks ``send`` up on this object when it starts.
            cycle.__class__ = OneWriteCycle

    def _refuse(self, gateway: Any, refusal: ApiError) -> None:
        started = time.perf_counter()
        body = _JSON.encode(refusal.body())
        rid = request_id({"headers": self.headers})
        # A client that sent "Expect: 100-continue" may never send the body it was not asked for: the bytes
        # that follow could be its next request or the body, so the connection is closed after the answer.
        keep_alive = self.parser.should_keep_alive() and not self.expect_100_continue
        head = [
            b"HTTP/1.1 %d %s\r\n" % (refusal.status, HTTPStatus(refusal.status).phrase.encode()),
            *(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers),
            b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode(), b"\r\n",
            *(name.lower().encode() + b": " + value.encode() + b"\r\n" for name, value in refusal.headers.items()),
            REQUEST_ID_HEADER.lower().encode(), b": ", rid.encode(), b"\r\n",
            b"" if keep_alive else b"connection: close\r\n",
            b"\r\n", body,
        ]
        self.transport.write(b"".join(head))
        # A finished cycle: the parser's body callbacks drop this request's body, and the next request on
        # the connection starts at once (uvicorn's pipelining check).
        self.cycle = _Refused()  # type: ignore[assignment]
        if not keep_alive:
            self.transport.close()
        else:
            self.on_response_complete()
        gateway.metrics.requests.inc(route="/rooms/{room}/commands", method="POST", status=str(refusal.status))
        gateway.metrics.request_latency.observe(time.perf_counter() - started, route="/rooms/{room}/commands")


def _known_rate_refusal(gateway: Any, url: bytes, headers: list[tuple[bytes, bytes]]) -> ApiError | None:
    """The 429 of a room token whose window the gateway already saw used up (ratelimit.UsedWindows)."""
    if not gateway.rate_limits.used:
        return None
    authorization = None
    for name, value in headers:
        if name == b"authorization":
            authorization = value  # the last one, as the handler reads it (http_app.GatewayApp._command)
    if authorization is None:
        return None
    scheme, _, token = authorization.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer":
        return None
    room = url.partition(b"?")[0][len(COMMAND_PREFIX):-len(COMMAND_SUFFIX)].decode("latin-1")
    return gateway.rate_limits.known_refusal(room, token.strip())


def _is_command(url: bytes) -> bool:
    path = url.partition(b"?")[0]
    return path.startswith(COMMAND_PREFIX) and path.endswith(COMMAND_SUFFIX) and path.count(b"/") == 3


class _Refused:
    """The cycle of a request answered by ``GatewayHttpProtocol._refuse``: complete, nothing to receive."""

    response_complete = True
    disconnected = False
    keep_alive = True

    def __init__(self) -> None:
        self.message_event = asyncio.Event()  # uvicorn sets it when the connection is lost


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's cycle, with the head of the answer written together with its first body chunk."""

    _head: bytes | None = None

    async def send(self, message: Any) -> None:
        if self.disconnected or self.response_complete:
            await super().send(message)
            return
        real = self.transport
        collected = _Collect()
        self.transport = collected  # type: ignore[assignment] - uvicorn's send only writes and closes it
        try:
            await super().send(message)
        finally:
            self.transport = real
        data = b"".join(collected.chunks)
        if message["type"] == "http.response.start":
            self._head = data
            return
        if self._head is not None:
            data, self._head = self._head + data, None
        if data:
            real.write(data)
        if collected.closed:
            real.close()


class _Collect:
    """Stands in for the transport while uvicorn's ``send`` formats one message."""

    __slots__ = ("chunks", "closed")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def close(self) -> None:
        self.closed = True
