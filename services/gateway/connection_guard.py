"""The gateway's HTTP/1.1 connections: uvicorn's own httptools protocol, behind a guard that bounds what a client
may hold (``server_options`` gives uvicorn both).

Hostile clients cost a gateway memory and file descriptors without ever finishing a request: httptools keeps a
request's head in memory however long it grows (four 48 MB headers took a gateway from 231 to 506 MB), uvicorn
closes a connection only once it has answered a request on it (its keep-alive timeout), so a socket that sends
nothing, or drips a head a byte at a time, held a file descriptor forever, and a client that pipelines without
end (and reads nothing) grew a gateway by ~90 MB/s. The guard bounds each (issue 28, item 4):

- the bytes of an unfinished head (ALMANAC_HTTP_MAX_HEAD_BYTES) and its header count (ALMANAC_HTTP_MAX_HEADERS):
  past either, 431 ``request_head_too_large`` and the connection closed, the bytes never handed on; a chunked
  request's trailers, held to the same limits with its head counted in (past them the connection is closed: its head
  was handed on). Unbounded, four connections each sending 48 trailers of 1 MB took a gateway from 287 to 682 MB;
- the time to deliver a whole request (ALMANAC_HTTP_READ_TIMEOUT_MS) from the connection's opening or from its
  previous answer: past it, the connection is closed (the time to answer a whole request is the server's);
- requests queued on one connection: the guard stops reading while ``MAX_QUEUED`` wait for their answers, and
  past ``MAX_PIPELINED`` parsed from reads already made, 400 and closed.

Past capacity it also sheds (counting the client's address for its fair share of the in-flight limit,
``overload.FairShare``, as the route does): a read made of whole ``POST /rooms/{room}/commands`` requests (one, as clients send
them) that arrives while nothing else of its connection is being answered, names no command id (none in its
body, no Idempotency-Key) and is refused by ``Gateway.command_refusal`` (the rule every place that refuses commands applies) is answered
503 ``overloaded`` here, in one write of bytes encoded once, and never handed on: no ASGI cycle, task, middleware
or second parse. A refusal through the ASGI path cost the gateway about as much as a quarter of a served command,
so that at three times its capacity the refusals took the core from the commands it had accepted (issue 28,
item 19). Anything else (a request that may resend a decided command, one behind an unanswered one, CORS on) is
handed on and answered by the command path, which refuses the same way (``http_app.GatewayApp``). uvicorn
does not see shed requests, so after the first shed read since its last answer the guard hands it no bytes (``data_received(b"")``), which stops
its keep-alive timer (5 s after the last answer it wrote, or the read timeout if shorter): that timer had closed
connections whose every request for that long was shed while their clients kept sending, so a refused client
got a reset connection, not its 503. An idle connection is still closed, by the guard's read timeout.

It is built on public interfaces, with one reliance on uvicorn's behaviour: that an empty ``data_received`` stops
its keep-alive timer (uvicorn's httptools protocol cancels it on any bytes received; uvicorn is pinned in
pyproject.toml and tests/gateway/test_gateway_overload.py's keep-alive story fails if that changes). The
interfaces: the asyncio ``Protocol`` methods through which the event loop drives any protocol (the guard receives the bytes first, then hands them to uvicorn's protocol, which it holds, not
extends), httptools' parser (its own, which sees the same bytes), and the protocol class uvicorn's ``http``
option takes. It learns that an answer began when uvicorn writes a status line (its transport is the guard's
``_Transport``, which passes everything on). Its first version subclassed uvicorn's private
``HttpToolsProtocol`` and replaced its parser callbacks, which tied the gateway to one uvicorn release, to answer
commands and refuse them for overload inside the protocol: measured against the ASGI path (``http_app``) in the
same run it saved nothing at 500/s (docs/capacity.md, issue 29).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import httptools
import msgspec
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from almanac.services.gateway.errors import (
    REQUEST_ID_HEADER,
    ApiError,
    new_request_id,
    overloaded,
    request_id,
)
from almanac.services.gateway.gateway import scope_address
from almanac.services.gateway.http_app import COMMAND_PATH
from almanac.services.settings import Settings

MAX_QUEUED = 8  # requests waiting for their answers on one connection before the guard stops reading it
MAX_PIPELINED = 256  # the same, parsed from reads already made: past it, 400 and closed
_JSON = msgspec.json.Encoder()
_STATUS_LINE = b"HTTP/1."
_INTERIM = (b"HTTP/1.1 100 ", b"HTTP/1.0 100 ")  # "100 Continue" answers nothing yet
# A WebSocket message's largest size, inflated (permessage-deflate): a live feed's client sends nothing but control
# frames (api_live only watches for the close). uvicorn's default, 16 MB, let one client make the gateway inflate
# and hold 16 MB per feed from a few KB of zeros on the wire (12 feeds: 210 -> 390 MB, kept); past this: 1009.
WS_MAX_MESSAGE_BYTES = 4_096


def server_options(settings: Settings) -> dict[str, Any]:
    """``uvicorn.run``'s options for a gateway: the guarded protocol, uvloop, and proxy headers believed only
    from ALMANAC_TRUSTED_PROXIES (uvicorn's own default believes X-Forwarded-For from loopback)."""
    proxies = _trusted(settings.trusted_proxies)
    return {"host": settings.http_host, "port": settings.http_port, "log_level": "warning", "access_log": False,
            "lifespan": "on", "log_config": None, "loop": "uvloop", "http": GuardedConnection,
            # uvicorn's keep-alive (its default 5 s) never outlasts the guard's read timeout, which bounds idleness
            "timeout_keep_alive": min(5.0, settings.http_read_timeout_ms / 1000),
            "ws_max_size": WS_MAX_MESSAGE_BYTES,
            "proxy_headers": bool(proxies), "forwarded_allow_ips": proxies or None}


class GuardedConnection(asyncio.Protocol):
    """One HTTP/1.1 connection: the guard (this object) in front of uvicorn's httptools protocol (``server``)."""

    # uvicorn's own protocol class for ``http="httptools"``, found as uvicorn finds it for that option.
    SERVER_PROTOCOL: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS["httptools"])

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any] | None = None,
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.server = self.SERVER_PROTOCOL(config=config, server_state=server_state,  # type: ignore[call-arg]
                                           app_state=app_state, _loop=_loop)
        self.loop = _loop or asyncio.get_event_loop()
        settings: Settings = config.app.state.settings  # the gateway's app (http_app.create_app)
        self.max_head_bytes = settings.http_max_head_bytes
        self.max_headers = settings.http_max_headers
        self.read_timeout_s = settings.http_read_timeout_ms / 1000
        # The client's address for its fair share of the in-flight limit (overload.FairShare), as the route counts
        # it: the TCP peer's, or behind a trusted proxy the one it forwards (``_client``).
        self.proxies = _proxy_headers(settings.trusted_proxies)
        self.peer: tuple[str, int] | None = None
        self.address = "unknown"  # the peer's (``scope_address``), found once per connection
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.guarding = True  # False once the connection is a WebSocket's (or its bytes no longer HTTP/1.1)
        self.dead_end = False  # True past a request asking to upgrade to anything but a WebSocket (h2c)
        self.in_head = True  # between a request's end (or the connection's start) and its successor's headers' end
        # After a chunk's size line and before any of its data: the last chunk's trailer section, as far as the guard
        # can tell (a chunk with data leaves it at its first byte). Bounded as a head is: httptools holds a trailer
        # until its end, and uvicorn keeps every one it is given.
        self.in_trailers = False
        self.head_read = 0  # bytes read since the head (or the trailer section) began (the part httptools holds too)
        self.head_bytes = 0  # bytes of the request's url and headers parsed so far
        self.headers: list[tuple[bytes, bytes]] = []  # the request's (for a 431's request id)
        self.in_request = False  # a request's bytes have begun and not ended
        self.early = False  # the request in progress was answered before its end (a 413 before its body)
        self.awaiting = 0  # whole requests handed on whose answers have not begun
        self.paused = False  # reading paused by the guard (too many requests waiting)
        self.server_paused = False  # reading paused by uvicorn (its own flow control)
        self.server_timer = False  # uvicorn may have armed its keep-alive timer since the guard last stopped it
        self.read_by: float | None = None  # loop time by which a whole request must have come; None: none awaited
        self.deadline: asyncio.TimerHandle | None = None
        self.app_state = config.app.state  # the Gateway once the lifespan has started; ``cors``
        # The gateway whose rule the guard applies, read from ``app_state`` once it is there (a Starlette ``State``:
        # each attribute read is a Python call, 0.4 µs, three per refusal); False: never shed (CORS on).
        self.gateway: Any = None
        self.default_headers = server_state.default_headers  # uvicorn's date and server headers, renewed each second
        self.server_state = server_state
        self.shed: list[bytes] | None = None  # refusals made for the read being parsed; None: it is not sheddable
        self.handed = False  # the read being parsed holds a request to hand on
        self.candidate = False  # the request in progress may be shed (a command route POST naming no id so far)
        self.client_request_id = False  # its head carries an X-Request-ID (else a refusal draws a fresh id)
        self.url = b""
        self.body = bytearray()

    # --- the asyncio protocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer = (peer[0], peer[1])
            self.address = scope_address({"client": self.peer})
        self.server.connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        self._arm()  # a connection that never sends a whole request is closed

    def data_received(self, data: bytes) -> None:
        if self.dead_end:
            return  # past an upgrade to anything but a WebSocket: nothing can parse it
        if self.guarding:
            # Sheddable only from a request boundary with nothing of the connection being answered: a refusal
            # written now is then surely the answer to the first request of this read (HTTP/1.1 answers in order).
            self.shed = [] if not self.in_request and not self.awaiting else None
            self.handed = False
            if self.in_head or self.in_trailers:
                # httptools holds a header until its end has been read, so a head that never ends is bounded
                # here, by the bytes read: the parser holds at most the limit plus one read of a head.
                self.head_read += len(data)
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                if self._websocket_upgrade():
                    self._stop_guarding()  # a WebSocket from here: its own protocol bounds it
                else:
                    # Another protocol (h2c): uvicorn answers this request as HTTP/1.1 and parses nothing after it,
                    # nor does httptools. The connection is a dead end: what follows is dropped, and the read
                    # timeout, armed when the answer is written, closes it (no whole request can come).
                    self.dead_end = True
            except _Refused:
                return  # answered and closed: nothing of it is handed on
            except httptools.HttpParserError:
                self._stop_guarding()  # not HTTP/1.1: uvicorn's parser answers it 400
            if self.guarding and self.in_head and self.head_read > self.max_head_bytes:
                self._refuse_head(self._head_too_long())
                return
            if self.guarding and self.in_trailers and self.head_read > self.max_head_bytes:
                self._cut_trailers()
                return
            shed, self.shed = self.shed, None
            if shed:
                if not self.handed and not self.in_request and self.guarding:
                    # Whole requests, every one refused: answered here, never handed on (uvicorn's parser stays at
                    # a request boundary, as it was).
                    transport = self.transport
                    if transport is not None and not transport.is_closing():
                        transport.write(shed[0] if len(shed) == 1 else b"".join(shed))
                    # Counted (an integer added), not logged or timed: refusals come in floods.
                    self.gateway.metrics.shed(len(shed))
                    self.read_by = self.loop.time() + self.read_timeout_s  # ``_arm`` inline: the deadline exists
                    if self.deadline is None:
                        self._arm()
                    if self.server_timer:
                        # The client is not idle: uvicorn's protocol is told that data came (none of it to parse),
                        # which stops its keep-alive timer. Left running, it closed a connection whose every request
                        # was shed for 5 s while the client kept sending: a refused client got a reset connection
                        # instead of its 503 (the benchmark's "unexpected ReadError" at 3x). uvicorn arms that timer
                        # only when it finishes an answer (which began with a status line: ``answer_began``), so
                        # once per answer is enough, not once per refusal. The guard's own read timeout (``_arm``)
                        # still closes a connection that then sends nothing.
                        self.server_timer = False
                        self.server.data_received(b"")
                    return
                self.awaiting += len(shed)  # handed on after all: uvicorn answers them (the route refuses them)
        if self.transport is not None and self.transport.is_closing():
            return
        self.server.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm(stop=True)
        self.server.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self.server.eof_received()

    def pause_writing(self) -> None:
        self.server.pause_writing()

    def resume_writing(self) -> None:
        self.server.resume_writing()

    # --- httptools' callbacks (the guard's own parser) ---------------------------------------------------------

    def on_message_begin(self) -> None:
        self.in_request = True
        self.early = False
        self.head_bytes = 0
        self.headers = []
        self.url = b""
        self.candidate = False
        if self.awaiting >= MAX_PIPELINED:
            # One read can hold thousands of small pipelined requests, each queued as a cycle of a few kB: no
            # client needs that many answers outstanding.
            self._answer(400, ApiError(400, "too_many_pipelined_requests",
                                       f"more than {MAX_PIPELINED} pipelined requests on one connection"))
            raise _Refused

    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.headers
        headers.append((name.lower(), value))
        if len(headers) > self.max_headers:
            if not self.in_head:  # a trailer: the head, handed on, may be being answered
                self._cut_trailers()
                raise _Refused
            self._refuse_head(f"it has more than {self.max_headers} headers (ALMANAC_HTTP_MAX_HEADERS)")
            raise _Refused
        self.head_bytes += len(name) + len(value)
        if not self.in_head and self.head_bytes > self.max_head_bytes:  # head and trailers together, read whole
            self._cut_trailers()
            raise _Refused

    def on_headers_complete(self) -> None:
        if self.head_bytes > self.max_head_bytes:  # exact, for a head read whole
            self._refuse_head(self._head_too_long())
            raise _Refused
        self.in_head = False
        self.head_read = 0
        if self.shed is not None:
            self.candidate = self._sheddable_head()
            if self.candidate:
                self.body.clear()

    def on_chunk_header(self) -> None:
        self.in_trailers = True  # the last chunk's, unless data follows (``on_body``)
        self.head_read = 0

    def on_chunk_complete(self) -> None:
        self.in_trailers = False
        self.head_read = 0

    def on_body(self, body: bytes) -> None:
        self.in_trailers = False
        if self.candidate:
            self.body += body
            if len(self.body) > 65_536:
                self.candidate = False  # the route answers it (413 past ALMANAC_MAX_BODY_BYTES)

    def on_message_complete(self) -> None:
        self.in_head = True
        self.in_request = False
        if self.shed is not None:
            refusal = self._refusal() if self.candidate else None
            if refusal is not None:
                self.shed.append(refusal)
                return
            self.handed = True
        if self.early:
            self._arm()  # answered already: the connection waits for its next request now
        else:
            self.awaiting += 1
            self._disarm()  # a whole request: the time to answer it is the server's, not the client's
            if self.awaiting >= MAX_QUEUED and not self.paused and self.transport is not None:
                self.paused = True
                self.transport.pause_reading()

    # --- shedding ----------------------------------------------------------------------------------------------

    def _sheddable_head(self) -> bool:
        """Whether the request whose head was just parsed may be shed: a keep-alive HTTP/1.1 ``POST`` of the
        command route (its path as the route matches it), with no Idempotency-Key and no Expect, while CORS is off
        (with it on, a refusal must carry the CORS headers for its Origin, which ``GatewayApp``'s middleware adds)."""
        parser = self.parser
        if parser.get_method() != b"POST" or not parser.should_keep_alive():
            return False
        if not self.gateway and not self._shedding():
            return False
        client_request_id = connection = False
        for name, _ in self.headers:
            if name in _UNSHEDDABLE:
                return False
            if name == _REQUEST_ID:
                client_request_id = True
            elif name == b"connection":
                connection = True
        # Kept alive without a Connection header is HTTP/1.1: httptools parses versions 0.9, 1.0, 1.1 and 2.0 alone,
        # and keeps any but 1.1 alive only when a Connection header asks. Only then is the version read (building its
        # string cost 0.3 µs a refusal); an HTTP/1.0 keep-alive is handed on (uvicorn answers it as HTTP/1.0 needs).
        if connection and parser.get_http_version() != "1.1":
            return False
        self.client_request_id = client_request_id
        return _COMMAND_PATH.match(self.url) is not None

    def _shedding(self) -> bool:
        """Whether this connection may shed at all: its app has no CORS (read once: ``allow_origins`` is set when the
        app is built) and its gateway is there (the lifespan has started), which is then kept in ``gateway``."""
        if self.gateway is False:
            return False
        if getattr(self.app_state, "cors", True):
            self.gateway = False
            return False
        self.gateway = getattr(self.app_state, "gateway", None)
        return self.gateway is not None

    def on_url(self, url: bytes) -> None:
        self.url += url  # httptools may give a long url in parts
        self.head_bytes += len(url)

    def _refusal(self) -> bytes | None:
        """The 503's bytes when the gateway refuses this command now (``Gateway.command_refusal``, the rule
        ``GatewayApp`` applies to a request handed on: a request that may resend a decided command is never refused
        here); None: hand the request on (``GatewayApp`` asks again when it gets there: the guard cannot hand its
        answer through uvicorn's parser, and the same rule, asked later, can only see a fresher state)."""
        reason = self.gateway.command_refusal(self._client(), self.body, False)  # no Idempotency-Key: _sheddable_head
        if reason is None:
            return None
        # The client's id when it sent one (``request_id`` checks its form), else a fresh one.
        rid = request_id({"headers": self.headers}) if self.client_request_id else new_request_id()
        head, tail = _overloaded_answer(reason, self.server_state.default_headers)
        return head + rid.encode() + tail

    def _client(self) -> str:
        """The request's client as ``gateway.client_address`` names it: uvicorn's own proxy-headers middleware
        (``server_options``) run over the head read so far, which rewrites the scope's client in place and never
        waits (its app here does nothing), so the guard and the route count the same client."""
        if self.proxies is None or self.peer is None:
            return self.address
        scope = {"type": "http", "client": self.peer, "headers": self.headers}
        with contextlib.suppress(StopIteration):
            self.proxies(scope, _nothing, _nothing).send(None)
        return scope_address(scope)

    # --- answers (through ``_Transport``) ------------------------------------------------------------------------

    def answer_began(self) -> None:
        """uvicorn wrote a status line: an answer to the oldest request waiting, or to the one still arriving."""
        self.server_timer = True  # its keep-alive timer starts when this answer ends
        if self.awaiting:
            self.awaiting -= 1
        elif self.in_request:
            self.early = True
        if self.paused and self.awaiting < MAX_QUEUED:
            self.paused = False
            if not self.server_paused and self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()
        if not self.awaiting and not self.in_request:
            self._arm()  # waiting for the next request: it has the read timeout to arrive

    # --- the read deadline: one timer per connection, moved lazily ---------------------------------------------

    def _arm(self) -> None:
        if not self.guarding:
            return
        self.read_by = self.loop.time() + self.read_timeout_s
        if self.deadline is None:
            self.deadline = self.loop.call_at(self.read_by, self._timed_out)

    def _disarm(self, stop: bool = False) -> None:
        self.read_by = None  # the timer, when it fires, finds nothing to do
        if stop and self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _timed_out(self) -> None:
        self.deadline = None
        if self.read_by is None or self.transport is None or self.transport.is_closing():
            return
        if self.read_by > self.loop.time():  # armed again since
            self.deadline = self.loop.call_at(self.read_by, self._timed_out)
        else:
            self.transport.close()

    def _websocket_upgrade(self) -> bool:
        """Whether the request whose upgrade stopped the parser asks for a WebSocket (what uvicorn upgrades to)."""
        return any(name == b"upgrade" and b"websocket" in value.lower() for name, value in self.headers)

    def _stop_guarding(self) -> None:
        self.guarding = False
        self._disarm(stop=True)
        if self.paused and self.transport is not None:
            self.paused = False
            if not self.server_paused:
                self.transport.resume_reading()

    # --- refusals ------------------------------------------------------------------------------------------------

    def _head_too_long(self) -> str:
        return f"its head (request line and headers) is over {self.max_head_bytes} bytes (ALMANAC_HTTP_MAX_HEAD_BYTES)"

    def _cut_trailers(self) -> None:
        """A chunked request's trailers past the head's limits (ALMANAC_HTTP_MAX_HEAD_BYTES, ALMANAC_HTTP_MAX_HEADERS,
        the head's own bytes and headers counted in): the connection is closed without a word, its head having been
        handed on (an answer written now could follow the one uvicorn may be writing for it)."""
        if self.transport is not None:
            self.transport.close()

    def _refuse_head(self, why: str) -> None:
        self._answer(431, ApiError(431, "request_head_too_large", f"the request was refused: {why}", "headers"))

    def _answer(self, status: int, refusal: ApiError) -> None:
        """The refusal, then the connection closed: the rest of it is never read, and the answers of requests
        still being answered on it are dropped (a client that floods or sends a hostile head loses them)."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        body = _JSON.encode(refusal.body())
        rid = request_id({"headers": self.headers})
        transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                        b"%s: %s\r\nconnection: close\r\n\r\n%s" % (
                            status, _PHRASES[status], len(body), _REQUEST_ID, rid.encode(), body))
        transport.close()


_PHRASES = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}
_REQUEST_ID = REQUEST_ID_HEADER.lower().encode()
# Headers after which a request is not shed: a possible resend (Idempotency-Key), one waiting for "100 Continue", an
# upgrade (``_sheddable_head``).
_UNSHEDDABLE = frozenset((b"idempotency-key", b"expect", b"upgrade"))
_COMMAND_PATH = re.compile(COMMAND_PATH.pattern.encode())  # the route's own pattern, on the url's bytes as read
# admission's reason -> (uvicorn's default headers it was made with, the 503's bytes before its request id and after)
_OVERLOADED: dict[str, tuple[list[tuple[bytes, bytes]], bytes, bytes]] = {}


def _overloaded_answer(reason: str, defaults: list[tuple[bytes, bytes]]) -> tuple[bytes, bytes]:
    """The 503 for one of admission's reasons, as the bytes before its request id (status line, fixed headers,
    uvicorn's date and server headers ``defaults``) and after it (the end of the head, the body): encoded once per
    reason and per list of default headers uvicorn makes (each second), not per refusal."""
    answer = _OVERLOADED.get(reason)
    if answer is None or answer[0] is not defaults:
        refusal = overloaded(reason)
        body = _JSON.encode(refusal.body())
        head = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: %d\r\n" % len(body)
        head += b"".join(name.lower().encode() + b": " + value.encode() + b"\r\n" for name, value in (refusal.headers or {}).items())
        head += b"".join(name + b": " + value + b"\r\n" for name, value in defaults)
        answer = _OVERLOADED[reason] = (defaults, head + _REQUEST_ID + b": ", b"\r\n\r\n" + body)
    return answer[1], answer[2]


def _trusted(setting: str) -> list[str]:
    """ALMANAC_TRUSTED_PROXIES as a list (addresses, networks, "*")."""
    return [entry.strip() for entry in setting.split(",") if entry.strip()]


def _proxy_headers(trusted: str) -> ProxyHeadersMiddleware | None:
    """uvicorn's proxy-headers middleware as ``server_options`` has uvicorn run it; None when no proxy is trusted."""
    proxies = _trusted(trusted)
    return ProxyHeadersMiddleware(_nothing, trusted_hosts=proxies) if proxies else None  # type: ignore[arg-type]


async def _nothing(*_: Any) -> None:
    return None


class _Refused(Exception):
    """Raised from a parser callback once the request was refused: httptools stops parsing the connection."""


class _Transport:
    """The transport uvicorn's protocol writes to: the connection's own, telling the guard when an answer begins,
    keeping reading paused while the guard holds it so, and sending an answer's head with its first body chunk.

    uvicorn writes an answer's status line and headers, then its body, as two system calls: the head is held
    until the next write (the body, in the same turn of the loop) or, at the latest, the loop's next turn; one
    write is about 40% of what refusing a command costs the gateway past capacity (docs/capacity.md)."""

    __slots__ = ("_transport", "_guard", "_held", "_flush")

    def __init__(self, transport: asyncio.BaseTransport, guard: GuardedConnection) -> None:
        self._transport = transport
        self._guard = guard
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        if data[:7] == _STATUS_LINE and data[:13] not in _INTERIM:
            self._guard.answer_began()
            if self._held is None:
                self._held = data
                self._flush = self._guard.loop.call_soon(self.flush)
                return
        if self._held is not None:
            data = self._held + data
            self._held = None
            self._flush.cancel()  # type: ignore[union-attr]
        self._transport.write(data)  # type: ignore[attr-defined]

    def flush(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def pause_reading(self) -> None:
        self._guard.server_paused = True
        self._transport.pause_reading()  # type: ignore[attr-defined]

    def resume_reading(self) -> None:
        self._guard.server_paused = False
        if not self._guard.paused:
            self._transport.resume_reading()  # type: ignore[attr-defined]

    # Asked by uvicorn for every request and answer: spelled out, not found through ``__getattr__`` each time.
    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
