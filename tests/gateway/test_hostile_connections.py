"""Hostile connections cost a real gateway process next to nothing, and honest clients are served meanwhile.

- A request head over ALMANAC_HTTP_MAX_HEAD_BYTES, or with more than ALMANAC_HTTP_MAX_HEADERS headers, is
  refused 431 ``{code, message, field}`` and its connection closed, whatever follows: four 8 MB headers do
  not grow the gateway by the size of one (httptools kept every byte of an unfinished head). A chunked request's
  trailers are held to the same limits (its head counted in): past them the connection is closed.
- A connection that sends nothing, a head dripped a byte at a time (slowloris) or a body that never comes
  is closed after ALMANAC_HTTP_READ_TIMEOUT_MS, and so is one gone silent after a request answered before
  its body ended, and one that asked to upgrade to anything but a WebSocket (h2c) and then drips bytes; a keep-alive client that keeps asking is not, nor is a live feed (a WebSocket). With its
  files held by silent sockets, a gateway served no one: it now serves again once the timeout has closed them.
- A live feed takes no message from its client (control frames aside): a message over a few KB closes it 1009.
  uvicorn took messages of up to 16 MB, inflated from permessage-deflate: 12 feeds each sending two 15 MB
  messages of zeros (about 15 KB each on the wire) took a gateway from 210 to 390 MB, kept after they closed.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from gateway_stack import Stack
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

READ_TIMEOUT_MS = 500
MAX_HEAD_BYTES = 16_384
BIG_HEADER = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> str:
    """A gateway process that closes a connection without a whole request after half a second."""
    return stack.start_gateway("bounded", ALMANAC_HTTP_READ_TIMEOUT_MS=str(READ_TIMEOUT_MS),
                               ALMANAC_HTTP_MAX_HEAD_BYTES=str(MAX_HEAD_BYTES), ALMANAC_HTTP_MAX_HEADERS="100")


@contextlib.contextmanager
def raw_connection(url: str, timeout_s: float = 5.0) -> Iterator[socket.socket]:
    where = urlsplit(url)
    with socket.create_connection((where.hostname, where.port), timeout=timeout_s) as connection:
        yield connection


def answer_or_close(connection: socket.socket) -> bytes:
    """What the gateway sent before closing the connection (b"" when it closed, or reset it, without a word);
    raises TimeoutError when it neither answers nor closes."""
    received = b""
    try:
        while chunk := connection.recv(65_536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def rss_bytes(stack: Stack, name: str) -> int:
    status = open(f"/proc/{stack.processes[name].pid}/status").read()  # noqa: SIM115 - read at once
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) * 1024


def assert_431(raw: bytes) -> None:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 "), raw[:300]
    assert b"connection: close" in head.lower()
    refusal = msgspec.json.decode(body)
    assert refusal["code"] == "request_head_too_large" and refusal["field"] == "headers", refusal
    assert refusal["message"]


def test_a_head_over_the_byte_limit_is_refused_431_and_closed(gateway: str) -> None:
    with raw_connection(gateway) as connection:
        connection.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\nX-Padding: " + b"a" * 20_000 + b"\r\n\r\n")
        assert_431(answer_or_close(connection))
    assert httpx.get(f"{gateway}/health", timeout=5).status_code == 200


def test_a_head_with_too_many_headers_is_refused_431_and_closed(gateway: str) -> None:
    def head(count: int) -> bytes:  # a request with ``count`` headers
        extra = b"".join(b"X-Header-%d: 1\r\n" % index for index in range(count - 2))
        return b"GET /health HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n" + extra + b"\r\n"

    with raw_connection(gateway) as connection:
        connection.sendall(head(101))
        assert_431(answer_or_close(connection))
    with raw_connection(gateway) as connection:  # one fewer is served
        connection.sendall(head(100))
        assert answer_or_close(connection).startswith(b"HTTP/1.1 200 ")


def test_four_huge_headers_are_cut_off_without_growing_the_gateway_by_one(stack: Stack, gateway: str) -> None:
    before = rss_bytes(stack, "bounded")
    with raw_connection(gateway) as connection:
        sent = 0
        try:
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\n")
            for index in range(4):  # the head never ends: the gateway would keep every byte of it
                line = b"X-Big-%d: " % index + b"a" * BIG_HEADER + b"\r\n"
                connection.sendall(line)
                sent += len(line)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway closed the connection: what we sent is refused, as it should be
        grown = rss_bytes(stack, "bounded") - before  # the connection is still open on our side
        assert sent < BIG_HEADER, f"the gateway read {sent} bytes of one unfinished head"
        raw = answer_or_close(connection)
        assert raw == b"" or raw.startswith(b"HTTP/1.1 431 "), raw[:300]
    assert grown < BIG_HEADER // 2, f"the gateway grew by {grown / 2**20:.1f} MB"
    assert httpx.get(f"{gateway}/health", timeout=5).status_code == 200


@pytest.mark.parametrize("trailers", ["one that never ends", "many whole ones"])
def test_a_chunked_requests_trailers_are_cut_off_at_the_heads_limit(stack: Stack, gateway: str, trailers: str) -> None:
    # Given a chunked GET whose head is small (handed on, and answered) and whose last chunk is followed by trailers:
    # one trailer line that never ends, or whole 64 KB trailer lines one after another (httptools holds a trailer
    # until its end, and uvicorn keeps each one: four such connections took a gateway from 287 to 682 MB, for good)
    before = rss_bytes(stack, "bounded")
    with raw_connection(gateway) as connection:
        sent = 0
        try:
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n")
            if trailers == "one that never ends":
                connection.sendall(b"X-Trailer: ")
            for index in range(BIG_HEADER // 65_536):
                piece = (b"a" * 65_536 if trailers == "one that never ends"
                         else b"X-Trailer-%d: " % index + b"a" * 65_536 + b"\r\n")
                connection.sendall(piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway closed the connection
        grown = rss_bytes(stack, "bounded") - before
        # Then the gateway closes it once the trailers pass the head's limit, long before 8 MB are sent
        assert sent < BIG_HEADER // 2, f"the gateway read {sent} bytes of trailers"
        answer_or_close(connection)  # its head's answer, if it was written, then the close
    assert grown < BIG_HEADER // 2, f"the gateway grew by {grown / 2**20:.1f} MB"
    # and serves everyone else
    assert httpx.get(f"{gateway}/health", timeout=5).status_code == 200


def test_a_chunked_request_with_a_small_trailer_is_answered(gateway: str) -> None:
    with raw_connection(gateway) as connection:
        connection.sendall(b"POST /health HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: chunked\r\n"
                           b"Connection: close\r\n\r\n3\r\nabc\r\n0\r\nX-Checksum: 1\r\n\r\n")
        assert answer_or_close(connection).startswith(b"HTTP/1.1 405 ")  # answered (GET only), not cut off


def health_on(connection: socket.socket) -> int:
    """The status of ``GET /health`` asked on this kept-alive connection (ConnectionError once it is closed)."""
    connection.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n")
    received = b""
    while True:
        chunk = connection.recv(65_536)
        if not chunk:
            raise ConnectionError("the gateway closed the connection")
        received += chunk
        head, ended, body = received.partition(b"\r\n\r\n")
        lengths = [line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
        if ended and len(body) >= int(lengths[0]):
            return int(head.split()[1])


def test_silent_dripping_and_bodiless_connections_are_closed_after_the_read_timeout(gateway: str) -> None:
    with raw_connection(gateway) as silent, raw_connection(gateway) as dripping, \
            raw_connection(gateway) as bodiless, raw_connection(gateway) as honest:
        started = time.monotonic()
        bodiless.sendall(b"POST /rooms HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{")
        dripping.sendall(b"GET /health HTTP/1.1\r\n")
        closed_at = None
        try:
            for byte in b"X-Slow: " + b"a" * 100:  # a byte every 50 ms: 5 s to finish, were it allowed
                dripping.sendall(bytes([byte]))
                assert health_on(honest) == 200
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            closed_at = time.monotonic() - started
        assert answer_or_close(dripping) == b""
        closed_at = closed_at or time.monotonic() - started
        for connection in (silent, bodiless):
            assert answer_or_close(connection) == b""  # closed, not answered (TimeoutError otherwise)
        assert closed_at < 3, f"the dripping connection lived {closed_at:.1f} s"
        # The honest client, on one keep-alive connection, is served throughout and for several timeouts on.
        while time.monotonic() - started < 4 * READ_TIMEOUT_MS / 1000:
            assert health_on(honest) == 200
            time.sleep(0.05)


def test_a_gateway_whose_files_are_held_by_silent_sockets_serves_again_after_the_timeout(stack: Stack) -> None:
    # A gateway with few files (as 1,024 are few for 1,100 silent sockets): every one is taken by a socket
    # that sends nothing.
    url = stack.start_gateway("few-files", max_files=128, ALMANAC_HTTP_READ_TIMEOUT_MS=str(READ_TIMEOUT_MS))
    where = urlsplit(url)
    silent = [socket.create_connection((where.hostname, where.port), timeout=5) for _ in range(200)]
    try:
        served = None
        deadline = time.monotonic() + 10
        while served is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                served = httpx.get(f"{url}/health", timeout=2).status_code
        assert served == 200, "the gateway served no one while silent sockets held its files"
    finally:
        for connection in silent:
            connection.close()


def test_a_connection_answered_before_its_body_ended_is_still_closed_once_silent(gateway: str) -> None:
    # A command body over the limit is refused 413 from its head; the body that follows is read and dropped,
    # and then the connection waits for its next request like any other.
    with raw_connection(gateway) as connection:
        connection.sendall(b"POST /rooms/r-1/commands HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 70000\r\n\r\n")
        assert connection.recv(65_536).startswith(b"HTTP/1.1 413 ")
        connection.sendall(b" " * 70_000)
        started = time.monotonic()
        assert answer_or_close(connection) == b""
        assert time.monotonic() - started < 3


def test_an_upgrade_to_anything_but_a_websocket_does_not_end_the_guard(gateway: str) -> None:
    # An Upgrade other than websocket (curl --http2 on plain http asks for h2c) is answered as HTTP/1.1, and the
    # connection still has the read timeout: the guard stopped guarding at any upgrade, and a byte every
    # few seconds then held the connection (uvicorn's parser, stuck past the upgrade, ignores what follows,
    # and every byte stopped its keep-alive timer) for as long as the client liked.
    with raw_connection(gateway) as upgrading:
        upgrading.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                          b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n")
        assert upgrading.recv(65_536).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        closed_at = None
        try:
            for byte in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 100:  # a byte every 50 ms: 5 s, were it allowed
                upgrading.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            closed_at = time.monotonic() - started
        if closed_at is None:
            assert answer_or_close(upgrading) is not None  # closed by now (TimeoutError otherwise)
            closed_at = time.monotonic() - started
        assert closed_at < 3, f"the upgraded connection lived {closed_at:.1f} s"


def test_a_live_feed_is_not_held_to_the_read_timeout(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=10) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": "ann"}).json()
        room, token = created["room"], created["token"]
        version = http.get(f"/rooms/{room}").json()["version"]
        with raw_connection(gateway) as connection:
            # A request first, then the upgrade on the same connection (its read deadline armed by the answer).
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n")
            assert connection.recv(65_536).startswith(b"HTTP/1.1 200 ")
            connection.sendall(f"GET /rooms/{room}/live?from_version={version + 1}&token={token} HTTP/1.1\r\n"
                               "Host: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                               .encode())
            assert connection.recv(65_536).startswith(b"HTTP/1.1 101 ")
            time.sleep(3 * READ_TIMEOUT_MS / 1000)  # a WebSocket waits for events as long as it likes
            played = http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                               json={"command": {"kind": "place_element", "row": 5, "column": 5}})
            assert played.status_code == 200, played.text
            frame = connection.recv(65_536)
            assert frame[:1] == b"\x81" and b'"version":%d' % (version + 1) in frame, frame[:200]  # a text frame


def test_a_live_feed_client_sending_a_large_message_is_closed_before_the_gateway_inflates_it(gateway: str) -> None:
    # Given a live feed open on a room, its client compressing what it sends (permessage-deflate)
    with httpx.Client(base_url=gateway, timeout=10) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": "ann"}).json()
    room, token = created["room"], created["token"]
    url = gateway.replace("http://", "ws://") + f"/rooms/{room}/live?from_version=1&token={token}"
    with connect(url, compression="deflate", max_size=None, open_timeout=10) as feed:
        feed.recv(timeout=10)  # the room's first event: the feed is served
        # When the client sends one 4 MB message of zeros (a few KB on the wire)
        with contextlib.suppress(ConnectionClosed):
            feed.send(bytes(4 * 1024 * 1024))
        # Then the gateway closes the feed as "message too big" (1009), never holding the inflated message
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                feed.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009, closed.value
    # and the gateway serves others as before
    assert httpx.get(f"{gateway}/health", timeout=5).status_code == 200
