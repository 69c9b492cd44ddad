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

A command the gateway takes is answered by the protocol itself too (``CommandCycle``): its body is
collected by the parser's callbacks, one task runs the handler (``http_app.command_answer``, which the
ASGI route also calls) and the answer leaves in one write. Under uvicorn's cycle a command paid for the
ASGI scope and messages, the proxy-headers and exception layers and the cycle's send path: about a third
of the gateway's CPU per command at 500/s, more than the command's own checks. A command behind an
unanswered request of its connection, with ``Expect: 100-continue``, a percent-encoded path, CORS on, or
while its client leaves answers unread (writing paused) takes uvicorn's cycle and the ASGI fast path
(``http_app.GatewayApp``) as before. Pipelining is bounded per connection (``_QueueBoundFlow``,
``MAX_PIPELINED``).

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
import structlog
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from almanac.services.gateway.errors import (
    REQUEST_ID_HEADER,
    ApiError,
    internal_error,
    log_unhandled,
    overloaded,
    request_id,
)
from almanac.services.gateway.http_app import (
    COMMAND_PATH,
    COMMAND_ROUTE,
    access,
    body_too_large,
    command_answer,
    json_headers,
)

COMMAND_PREFIX = b"/rooms/"
COMMAND_SUFFIX = b"/commands"
MAX_QUEUED = 8  # pipelined requests queued on one connection before the gateway stops reading it
MAX_PIPELINED = 256  # queued on one connection (parsed from reads already made): past it, 400 and closed
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
        # command goes the usual way (queued by uvicorn) and its handler refuses it, in order. Nor while the
        # client leaves our answers unread (the transport paused writing): uvicorn's cycle waits for the
        # drain before it answers, and reads nothing more meanwhile, so such a client cannot grow our buffer.
        idle = (self.cycle is None or self.cycle.response_complete) and not self.flow.write_paused
        if (idle and gateway is not None and self.parser.get_method() == b"POST" and not self.parser.should_upgrade()
                and _is_command(self.url)):
            reason = gateway.overload_reason()
            # A command of a room this process left a command of unanswered may be its resend: taken, so that
            # ``run_command`` can answer its stored outcome (or refuse it there). Any other is refused here.
            if reason is not None and not gateway.unsettled_in(_room_of(self.url)):
                gateway.metrics.commands.inc(outcome="overloaded", ruleset="")
                self._refuse(gateway, overloaded(reason))
                return
            known = _known_rate_refusal(gateway, self.url, self.headers)
            if known is not None:
                self._refuse(gateway, known)
                return
            if self._take_command(gateway):
                return
        super().on_headers_complete()
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:
            # The task just created has not run yet: it looks ``send`` up on this object when it starts.
            cycle.__class__ = OneWriteCycle

    def _take_command(self, gateway: Any) -> bool:
        """Start this request's own ``CommandCycle``; False leaves it to uvicorn's cycle."""
        path = self.url.partition(b"?")[0]
        match = None if self.expect_100_continue or b"%" in path else COMMAND_PATH.match(path.decode("latin-1"))
        if match is None:
            return False
        max_bytes = self.config.app.state.max_body_bytes
        for name, value in self.headers:
            if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
                self._refuse(gateway, body_too_large(max_bytes))  # its body is read and dropped
                return True
        keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
        self.cycle = CommandCycle(self, gateway, match.group(1), keep_alive)  # type: ignore[assignment]
        return True

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if type(cycle) is not CommandCycle:
            super().on_body(body)
            return
        cycle.body += body
        if len(cycle.body) > cycle.max_bytes:  # a chunked body that outgrew the limit: the rest is dropped
            self._refuse(cycle.gateway, body_too_large(cycle.max_bytes))

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if type(cycle) is not CommandCycle:
            super().on_message_complete()
            return
        task = self.loop.create_task(cycle.run())
        task.add_done_callback(self.tasks.discard)  # uvicorn's shutdown waits for self.tasks
        self.tasks.add(task)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _QueueBoundFlow(transport, self.pipeline)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A new request: the keep-alive timer armed by the answer before it (a refusal answered while the
        # same read was still being parsed) must not close the connection under this one.
        self._unset_keepalive_if_required()
        if len(self.pipeline) >= MAX_PIPELINED:
            # One read can hold thousands of small pipelined requests, each queued as a cycle of a few kB:
            # no client needs that many answers outstanding. The parser's error answers 400 and closes.
            raise PipelineFlood(f"more than {MAX_PIPELINED} pipelined requests on one connection")

    def _refuse(self, gateway: Any, refusal: ApiError) -> None:
        started = time.perf_counter()
        body = _JSON.encode(refusal.body())
        rid = request_id({"headers": self.headers})
        # A client that sent "Expect: 100-continue" may never send the body it was not asked for: the bytes
        # that follow could be its next request or the body, so the connection is closed after the answer.
        keep_alive = (self.parser.should_keep_alive() and not self.expect_100_continue
                      and self.parser.get_http_version() != "1.0")
        self.write_answer(refusal.status, json_headers(body, refusal.headers), body, rid, keep_alive)
        # A finished cycle: the parser's body callbacks drop this request's body, and the next request on
        # the connection starts at once (uvicorn's pipelining check).
        self.cycle = _Refused()  # type: ignore[assignment]
        if not keep_alive:
            self.transport.close()
        else:
            self.on_response_complete()
        # Overload and rate refusals come in floods: they are counted, not logged.
        self.answered(gateway, refusal.status, started, rid, log=refusal.status == 413)

    def write_answer(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes, rid: str,
                     keep_alive: bool) -> None:
        """An answer of the protocol's own, head and body in one write."""
        head = [STATUS_LINE[status] if status in STATUS_LINE else b"HTTP/1.1 %d %s\r\n" % (
                    status, HTTPStatus(status).phrase.encode()),
                *(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers),
                *(name + b": " + value + b"\r\n" for name, value in headers),
                _REQUEST_ID, rid.encode(), b"\r\n",
                b"" if keep_alive else b"connection: close\r\n", b"\r\n", body]
        self.transport.write(b"".join(head))

    def answered(self, gateway: Any, status: int, started: float, rid: str, log: bool = True) -> None:
        """The request metrics and access-log line of a command the protocol answered itself."""
        elapsed = time.perf_counter() - started
        gateway.metrics.request(COMMAND_ROUTE, "POST", status, elapsed)
        if log:
            access.info("request", method="POST", route=COMMAND_ROUTE, status=status, ms=round(elapsed * 1000, 2),
                        request_id=rid, client=f"{self.client[0]}:{self.client[1]}" if self.client else None,
                        answered_by="protocol")


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


def _room_of(url: bytes) -> str:
    """The room a command's path names (``_is_command``: /rooms/{room}/commands), as sent."""
    return url.partition(b"?")[0][len(COMMAND_PREFIX):-len(COMMAND_SUFFIX)].decode("latin-1")


def _is_command(url: bytes) -> bool:
    path = url.partition(b"?")[0]
    return path.startswith(COMMAND_PREFIX) and path.endswith(COMMAND_SUFFIX) and path.count(b"/") == 3


class PipelineFlood(Exception):
    """Raised from a parser callback: httptools stops parsing and uvicorn answers 400 and closes."""


class _QueueBoundFlow(FlowControl):
    """uvicorn's flow control, reading nothing more while ``MAX_QUEUED`` requests wait on the connection.

    uvicorn resumes reading after every answer and whenever a handler asks for its body (``receive``),
    and a client that pipelines without end (and reads nothing) grew a gateway by ~90 MB/s. It cannot
    stall a request: one that waits for the rest of its body is the last one parsed, so it is started
    only once every request queued before it has started, and then reading resumes.
    """

    def __init__(self, transport: asyncio.Transport, pipeline: Any) -> None:
        super().__init__(transport)
        self._pipeline = pipeline

    def resume_reading(self) -> None:
        if len(self._pipeline) < MAX_QUEUED:
            super().resume_reading()


class CommandCycle:
    """A ``POST /rooms/{room}/commands`` the protocol answers itself: the body from the parser's callbacks,
    the handler in one task (``run``), the answer in one write.

    uvicorn's connection code treats it as a cycle: it reads ``response_complete``, sets ``disconnected``
    and ``message_event`` when the connection is lost, and clears ``keep_alive`` on shutdown.
    """

    __slots__ = ("protocol", "gateway", "room", "headers", "path", "keep_alive", "body", "max_bytes",
                 "response_complete", "disconnected", "message_event")

    def __init__(self, protocol: GatewayHttpProtocol, gateway: Any, room: str, keep_alive: bool) -> None:
        self.protocol = protocol
        self.gateway = gateway
        self.room = room
        # Its own: a pipelined request parsed while this one is answered replaces the protocol's.
        self.headers: list[tuple[bytes, bytes]] = protocol.headers
        self.path = protocol.url.partition(b"?")[0].decode("latin-1")
        self.keep_alive = keep_alive
        self.body = bytearray()
        self.max_bytes: int = protocol.config.app.state.max_body_bytes
        self.response_complete = False
        self.disconnected = False
        self.message_event = _NoWaiter()  # nothing waits for more body: the task starts with all of it

    async def run(self) -> None:
        protocol = self.protocol
        headers = self.headers
        rid = request_id({"headers": headers})
        started = time.perf_counter()
        status = 500
        written = False
        try:
            with structlog.contextvars.bound_contextvars(request_id=rid):
                try:
                    status, raw, body = await command_answer(protocol.config.app, self.room, headers,
                                                             bytes(self.body), self.path)
                except Exception as error:  # the gateway's one boundary, as GatewayApp._unexpected
                    log_unhandled(error, COMMAND_ROUTE, "POST", rid)
                    body = _JSON.encode(internal_error({"headers": headers, "almanac.request_id": rid}).body())
                    status, raw = 500, json_headers(body)
            if protocol.flow.write_paused and not self.disconnected:
                await protocol.flow.drain()  # the client reads slowly: wait, reading nothing more meanwhile
            if not self.disconnected and not protocol.transport.is_closing():
                protocol.write_answer(status, raw, body, rid, self.keep_alive)
                written = True
        finally:
            self.response_complete = True
            protocol.answered(self.gateway, status, started, rid)
            if not self.disconnected and not protocol.transport.is_closing():
                if self.keep_alive and written:
                    protocol.on_response_complete()  # the next request of the connection, or the keep-alive timer
                else:
                    # Closing, or no answer was written (the task was cancelled at shutdown): a request queued
                    # behind this one must not have its answer taken for this one's.
                    protocol.transport.close()


_REQUEST_ID = REQUEST_ID_HEADER.lower().encode() + b": "


class _NoWaiter:
    """``CommandCycle.message_event``: uvicorn sets it on a lost connection; nothing waits on it."""

    __slots__ = ()

    def set(self) -> None:
        pass


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
