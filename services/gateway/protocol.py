"""The gateway's HTTP/1.1 protocol for uvicorn: httptools, a command refused for overload before any ASGI cycle, one write per answer.

Past capacity most requests are refused, and under plain uvicorn a refusal costs nearly a full request:
an asyncio task, the request/response cycle, the ASGI layers, two socket writes (~0.3 ms of the
gateway's one core each), so a gateway offered twice what it serves spends its core refusing and the
commands it accepted queue behind the refusals. Here a ``POST /rooms/{room}/commands`` that finds the
gateway overloaded (``Gateway.overload_reason``, the same test the handler makes) and names no command id
(none in its body, no Idempotency-Key) is answered from the parser's callback with a prepared 503 once its
body is read: no task, no cycle, one write. One that names an id may resend a command already decided: its
task looks the stored outcome up (``Gateway.decided``: one read, no decide) and answers it, or refuses it
(``api_rooms.run_command``). A command whose room token this gateway already saw over its rate limit is
answered 429 from the parser's callback before its body is read (its body is parsed and dropped, so the
connection stays usable), until its window ends (``ratelimit.UsedWindows``), so that a client that keeps
sending past its limit costs next to nothing.

A command the gateway takes is answered by the protocol itself too (``CommandCycle``): its body is
collected by the parser's callbacks, one task runs the handler (``http_app.command_answer``, which the
ASGI route also calls) and the answer leaves in one write. Under uvicorn's cycle a command paid for the
ASGI scope and messages, the proxy-headers and exception layers and the cycle's send path: about a third
of the gateway's CPU per command at 500/s, more than the command's own checks. A command behind an
unanswered request of its connection, with ``Expect: 100-continue``, a percent-encoded path, CORS on, or
while its client leaves answers unread (writing paused) takes uvicorn's cycle and the ASGI fast path
(``http_app.GatewayApp``) as before. Pipelining is bounded per connection (``_QueueBoundFlow``,
``MAX_PIPELINED``).

Connections are bounded (ALMANAC_HTTP_MAX_HEAD_BYTES, ALMANAC_HTTP_MAX_HEADERS, ALMANAC_HTTP_READ_TIMEOUT_MS):
httptools keeps a request's head in memory however long it grows (four 48 MB headers took a gateway from
231 to 506 MB), and uvicorn closes a connection only once it has answered a request on it (its keep-alive
timeout), so a socket that sends nothing, or drips a head a byte at a time, held a file descriptor forever.
Here the bytes of an unfinished head are counted as they are read and its headers as they are parsed: past
either limit, 431 and the connection is closed; and a connection must deliver a whole request within the
read timeout of opening or of its previous answer, or it is closed (``_read_deadline``).

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

from almanac.services.gateway.auth import ROLE_PLAYER
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
from almanac.services.settings import Settings

COMMAND_PREFIX = b"/rooms/"
COMMAND_SUFFIX = b"/commands"
MAX_QUEUED = 8  # pipelined requests queued on one connection before the gateway stops reading it
MAX_PIPELINED = 256  # queued on one connection (parsed from reads already made): past it, 400 and closed
_JSON = msgspec.json.Encoder()


def server_options(settings: Settings) -> dict[str, Any]:
    """``uvicorn.run``'s options for a gateway: this protocol, uvloop, and proxy headers believed only from
    ALMANAC_TRUSTED_PROXIES (uvicorn's own default believes X-Forwarded-For from loopback)."""
    proxies = [entry.strip() for entry in settings.trusted_proxies.split(",") if entry.strip()]
    return {"host": settings.http_host, "port": settings.http_port, "log_level": "warning", "access_log": False,
            "lifespan": "on", "log_config": None, "loop": "uvloop", "http": GatewayHttpProtocol,
            "proxy_headers": bool(proxies), "forwarded_allow_ips": proxies or None}


class GatewayHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (``uvicorn.run(http=GatewayHttpProtocol)``) with an early overload refusal."""

    _settings: Settings
    _head_bytes = 0  # bytes of the request's header names and values parsed so far
    _head_read = 0  # bytes read since the head began (while _in_head), the part httptools holds included
    _in_head = True  # between a request's end (or the connection's start) and its successor's headers' end
    _read_deadline: asyncio.TimerHandle | None = None  # fires at _read_by or earlier (then set again)
    _read_by: float | None = None  # loop time by which a whole request must have come; None: none awaited

    # --- the connection's limits -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        # httptools holds a header until its end has been read, so a head that never ends is bounded here, by
        # the bytes read. Counted per read: a read that starts inside a head counts whole (one in which a head
        # ends starts the count again), so the parser holds at most the limit plus one read (256 kB) of a head.
        if self._in_head:
            self._head_read += len(data)
        super().data_received(data)
        if self._in_head and self._head_read > self._settings.http_max_head_bytes:
            self._refuse_head(self._head_too_long())

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self._settings.http_max_headers:
            self._refuse_head(f"it has more than {self._settings.http_max_headers} headers "
                              "(ALMANAC_HTTP_MAX_HEADERS)")
            raise HeadTooLarge  # stops the parser; uvicorn's 400 then finds the connection closed
        self._head_bytes += len(name) + len(value)
        super().on_header(name, value)

    def _head_too_long(self) -> str:
        return (f"its head (request line and headers) is over {self._settings.http_max_head_bytes} bytes "
                "(ALMANAC_HTTP_MAX_HEAD_BYTES)")

    def _refuse_head(self, why: str) -> None:
        """431 and close: a refused head's request is never run, and the rest of the connection is unread."""
        if self.transport.is_closing():
            return
        refusal = ApiError(431, "request_head_too_large", f"the request was refused: {why}", "headers")
        body = _JSON.encode(refusal.body())
        self.write_answer(431, json_headers(body), body, request_id({"headers": self.headers or []}), False)
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if not self.transport.is_closing():  # a connection already answered and closed (431) gets nothing more
            super().send_400_response(msg)

    def _arm_read_deadline(self) -> None:
        # One timer per connection, moved lazily: a request costs two attribute writes, not a timer of its own
        # (when it fires before the deadline, it is set again for the deadline).
        self._read_by = self.loop.time() + self._settings.http_read_timeout_ms / 1000
        if self._read_deadline is None:
            self._read_deadline = self.loop.call_at(self._read_by, self._read_timed_out)

    def _disarm_read_deadline(self) -> None:
        self._read_by = None  # the timer, when it fires, finds nothing to do

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self._read_by is None or self.transport.is_closing():
            return
        if self._read_by > self.loop.time():  # armed again since
            self._read_deadline = self.loop.call_at(self._read_by, self._read_timed_out)
        else:
            self.transport.close()

    def _stop_read_deadline(self) -> None:
        self._read_by = None
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def handle_websocket_upgrade(self) -> None:
        self._stop_read_deadline()  # the connection is the WebSocket's from here
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_read_deadline()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Waiting for the next request (none is queued complete): it has the read timeout to arrive.
        if not self.pipeline and not self.transport.is_closing():
            self._arm_read_deadline()

    # --- requests ----------------------------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        # Exact, for a head read whole (the count of reads above bounds one that never ends).
        if self._head_bytes + len(self.url) > self._settings.http_max_head_bytes:
            self._refuse_head(self._head_too_long())
            raise HeadTooLarge
        self._in_head = False
        self._head_read = 0
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
            # Refused for overload once its body says it cannot resend a decided command (``on_message_complete``),
            # not here; but a client waiting for "100 Continue" is refused before its body, which it may never
            # send (its resend is looked up only when Idempotency-Key names its id, in ``run_command``).
            reason = gateway.overload_reason() if self.expect_100_continue else None
            if reason is not None and not _names_idempotency_key(self.headers):
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
        if type(cycle) is CommandCycle and not cycle.names_command_id():
            reason = cycle.gateway.overload_reason()
            if reason is not None:  # no resend of a decided command: refused now, without a task
                cycle.gateway.metrics.commands.inc(outcome="overloaded", ruleset="")
                self._refuse(cycle.gateway, overloaded(reason))
                cycle = self.cycle
        self._in_head = True
        if cycle is not None and cycle.response_complete:
            # Answered before its body ended (a refusal): the connection waits for its next request now. (The
            # keep-alive timer the answer armed was cancelled when the rest of the body was read.)
            self._arm_read_deadline()
        else:
            self._disarm_read_deadline()  # a whole request: the time to answer it is the server's, not the client's
        if type(cycle) is not CommandCycle:
            super().on_message_complete()
            return
        task = self.loop.create_task(cycle.run())
        task.add_done_callback(self.tasks.discard)  # uvicorn's shutdown waits for self.tasks
        self.tasks.add(task)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _QueueBoundFlow(transport, self.pipeline)
        self._settings = self.config.app.state.settings
        self._arm_read_deadline()  # a connection that never sends a whole request is closed

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
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
    """The 429 of a seat whose window the gateway already saw used up (ratelimit.UsedWindows), for a token it
    already verified (any other request is judged the usual way)."""
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
    claims = gateway.known_claims(token.strip())
    room = url.partition(b"?")[0][len(COMMAND_PREFIX):-len(COMMAND_SUFFIX)].decode("latin-1")
    if claims is None or claims.role != ROLE_PLAYER or claims.room != room:
        return None
    return gateway.rate_limits.known_refusal(room, claims.player)


def _names_idempotency_key(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name == b"idempotency-key" for name, _ in headers)


def _is_command(url: bytes) -> bool:
    path = url.partition(b"?")[0]
    return path.startswith(COMMAND_PREFIX) and path.endswith(COMMAND_SUFFIX) and path.count(b"/") == 3


class HeadTooLarge(Exception):
    """Raised from ``on_header`` once the head was refused (431): httptools stops parsing the connection."""


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

    def names_command_id(self) -> bool:
        """Whether the request may name a command id (Idempotency-Key, or "command_id" in its body): only such
        a request can resend a decided command. A substring test: cheap, and never false for a body that does."""
        return b"command_id" in self.body or _names_idempotency_key(self.headers)

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
