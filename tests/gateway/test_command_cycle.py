"""The command route's one path (``http_app.GatewayApp``) behind the connection guard, on a real gateway process.

Given a real stack (engine process, uvicorn gateway process with the gateway's connection guard), when commands
arrive the ways clients send them (two pipelined in one write, a body over the limit declared or streamed
in chunks, ``Connection: close``, HTTP/1.0, a client that hangs up while its command is decided), then each
is answered as the ASGI route answers it: its JSON, its request id, in order; nothing is submitted for a
refused body, and the connection stays usable wherever HTTP lets it. A client that pipelines without end
and reads nothing is no longer read once its answers and queued requests back up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from gateway_stack import Stack, engine_and_gateway, http_answers, open_board_rooms
from waiting import wait_for

from almanac.services.gateway.connection_guard import MAX_PIPELINED
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.redis_client import connect
from almanac.storage.redis_store import RedisEventStore

MAX_BODY = 2_048
MOVE = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()


@pytest.fixture(scope="module")
def gateway(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stack]]:
    # Access lines (info) say which cycle answered each request.
    with engine_and_gateway(redis_url, tmp_path_factory.mktemp("command-cycle"), ALMANAC_LOG_LEVEL="info",
                            ALMANAC_MAX_BODY_BYTES=str(MAX_BODY), ALMANAC_RATE_ANON="off",
                            ALMANAC_RATE_COMMANDS="off") as running:
        yield running


def command(room: str, token: str, request_id: str, body: bytes = MOVE, *, version: str = "1.1",
            extra: str = "") -> bytes:
    return (f"POST /rooms/{room}/commands HTTP/{version}\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nX-Request-ID: {request_id}\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def chunked(room: str, token: str, request_id: str, chunks: list[bytes]) -> bytes:
    head = (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"X-Request-ID: {request_id}\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    return head + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


async def exchange(url: str, data: bytes, answers: int, *, until_closed: bool = False) -> tuple[bytes, bool]:
    """Send ``data`` on a new connection; the bytes of ``answers`` answers, and whether the gateway closed it."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(data)
    raw = b""
    try:
        while raw.count(b"HTTP/1.1 ") < answers or not raw.rstrip().endswith(b"}"):
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            if not chunk:
                return raw, True
            raw += chunk
        if until_closed:
            return raw + await asyncio.wait_for(reader.read(), 10), True
        return raw, False
    finally:
        writer.close()


def test_two_commands_pipelined_in_one_write_are_answered_in_order_each_with_its_request_id(gateway) -> None:
    url, stack = gateway
    (first, first_token), (second, second_token) = open_board_rooms(url, "pipelined", 2)
    data = (command(first, first_token, "pipe-1") + command(second, second_token, "pipe-2")
            + command(first, first_token, "pipe-3", b'{"command": {"kind": "place_element", "row": 5}, "x": 1}'))
    raw, closed = asyncio.run(exchange(url, data, 3))
    answers = http_answers(raw, 3)
    assert not closed
    assert [(status, headers["x-request-id"]) for status, headers, _ in answers] == [
        (200, "pipe-1"), (200, "pipe-2"), (422, "pipe-3")]
    assert json.loads(answers[0][2])["room"] == first and json.loads(answers[1][2])["room"] == second
    refusal = json.loads(answers[2][2])
    assert set(refusal) >= {"code", "message", "field"} and refusal["field"] == "x"


def test_a_percent_encoded_path_is_answered_as_the_plain_one(gateway) -> None:
    url, stack = gateway
    (room, token), (other, other_token) = open_board_rooms(url, "plain", 2)
    raw, _ = asyncio.run(exchange(url, command(room, token, "plain"), 1))
    encoded = command(other, other_token, "encoded").replace(
        f"/rooms/{other}/".encode(), f"/rooms/{other[:-1]}%{ord(other[-1]):02X}/".encode(), 1)
    raw += asyncio.run(exchange(url, encoded, 1))[0]
    (plain, _, plain_body), (status, _, body) = http_answers(raw, 2)
    assert (plain, status) == (200, 200) and json.loads(body)["room"] == other
    assert json.loads(body).keys() == json.loads(plain_body).keys()


def test_a_body_over_the_limit_is_refused_declared_or_streamed_and_nothing_is_submitted(gateway, redis_url) -> None:
    url, _ = gateway
    (room, token), = open_board_rooms(url, "oversized", 1)
    with httpx.Client(base_url=url) as http:
        version = http.get(f"/rooms/{room}").json()["version"]
    padding = b" " * MAX_BODY
    declared = command(room, token, "declared", MOVE[:-1] + padding + b"}")
    streamed = chunked(room, token, "streamed", [MOVE[:-1], padding, b"}"])
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: after\r\n\r\n"
    for oversized in (declared, streamed):
        raw, closed = asyncio.run(exchange(url, oversized + health, 2))
        (status, headers, body), (after, after_headers, _) = http_answers(raw, 2)
        assert status == 413 and json.loads(body)["code"] == "body_too_large", body
        assert after_headers["x-request-id"] == "after" and after in (200, 503) and not closed

    async def log_length() -> int:
        store = RedisEventStore(connect(redis_url))
        try:
            return len(await store.read(room))
        finally:
            await store.client.aclose()

    assert asyncio.run(log_length()) == version  # nothing of either refused body reached the room's log


def test_connection_close_and_http_1_0_are_answered_then_closed(gateway) -> None:
    url, _ = gateway
    (room, token), (other, other_token) = open_board_rooms(url, "closing", 2)
    raw, closed = asyncio.run(exchange(url, command(room, token, "closing", extra="Connection: close\r\n"), 1,
                                       until_closed=True))
    ((status, headers, _),) = http_answers(raw, 1)
    assert status == 200 and headers["connection"] == "close" and closed
    raw, closed = asyncio.run(exchange(url, command(other, other_token, "old", version="1.0"), 1,
                                       until_closed=True))
    ((status, headers, body),) = http_answers(raw, 1)
    assert status == 200 and json.loads(body)["room"] == other and closed


def test_a_client_that_hangs_up_while_its_command_is_decided_leaves_the_gateway_answering(gateway, redis_url) -> None:
    url, stack = gateway
    (room, token), (other, other_token) = open_board_rooms(url, "hangup", 2)
    engine = stack.processes["engine"]

    async def hang_up() -> None:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(command(room, token, "gone", MOVE[:-1] + b', "command_id": "gone-1"}'))
        await writer.drain()
        await asyncio.sleep(0.3)  # the command is submitted and waits for the (paused) engine
        writer.close()

    engine.send_signal(signal.SIGSTOP)
    try:
        asyncio.run(hang_up())
    finally:
        engine.send_signal(signal.SIGCONT)

    async def decided() -> None:
        store = RedisEventStore(connect(redis_url))
        try:
            await wait_for(lambda: store.outcome(room, internal_command_id(room, "p", "gone-1")), 10,
                           "the outcome of the command whose client hung up")
        finally:
            await store.client.aclose()

    asyncio.run(decided())
    raw, _ = asyncio.run(exchange(url, command(other, other_token, "next"), 1))
    ((status, headers, _),) = http_answers(raw, 1)
    assert status == 200 and headers["x-request-id"] == "next"
    assert "Traceback" not in stack.log("gateway") and "unhandled_error" not in stack.log("gateway")


def test_a_client_that_never_reads_its_answers_stops_being_read(gateway) -> None:
    """Back-pressure: with its answers unread, the gateway stops reading the client instead of queueing its
    pipelined requests and buffering answers without end (before: ~90 MB/s of gateway memory from one
    connection). The client sends requests as fast as its socket takes them until its sends have been
    refused for 2 s in a row (the gateway reads no more) or the gateway closes the connection, or fails
    after 30 s."""
    url, _ = gateway
    host, port = url.removeprefix("http://").split(":")
    request = command("unread", "not-a-token", "unread")  # answered 401 at once: the cheapest answer
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect((host, int(port)))
    client.setblocking(False)
    taken = 0
    started = refused_since = time.monotonic()
    try:
        while time.monotonic() - started < 30:
            try:
                taken += client.send(request[taken % len(request):])  # a partial send goes on where it stopped
                refused_since = time.monotonic()
            except (ConnectionResetError, BrokenPipeError):
                break  # or it closed the connection (more pipelined requests than MAX_PIPELINED in one read)
            except BlockingIOError:
                if time.monotonic() - refused_since > 2:
                    break
                time.sleep(0.005)
        else:
            raise AssertionError(f"the gateway kept reading a client that reads nothing: {taken} bytes in 30 s")
    finally:
        client.close()


def test_a_write_of_more_pipelined_requests_than_the_bound_is_answered_400_and_closed(gateway) -> None:
    url, stack = gateway
    host, port = url.removeprefix("http://").split(":")
    within = command("flood", "not-a-token", "within") * 100
    raw, closed = asyncio.run(exchange(url, within, 100))
    assert raw.count(b"HTTP/1.1 401 ") == 100 and not closed  # deep, but within the bound: all answered
    flood = socket.create_connection((host, int(port)))
    try:
        flood.sendall(command("flood", "not-a-token", "flood") * (MAX_PIPELINED + 50))
        flood.settimeout(10)
        answered = b""
        with contextlib.suppress(ConnectionResetError):  # closed with requests unread: a reset
            while chunk := flood.recv(65536):
                answered += chunk
    finally:
        flood.close()
    assert b"HTTP/1.1 400 " in answered and answered.count(b"HTTP/1.1 ") <= MAX_PIPELINED
    raw, _ = asyncio.run(exchange(url, command("flood", "not-a-token", "after"), 1))
    assert raw.startswith(b"HTTP/1.1 401 ")  # the gateway serves the next connection
    assert "Traceback" not in stack.log("gateway", 200_000)
