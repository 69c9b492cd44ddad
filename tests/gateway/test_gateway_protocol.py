"""The gateway's HTTP protocol pieces on their own: an answer goes out in one write (its head with its
first body chunk), and the standing-queue test refuses only when even the quickest command waited long."""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.flow_control import FlowControl

from almanac.services.gateway.overload import StandingQueue
from almanac.services.gateway.protocol import OneWriteCycle, _is_command


class Transport:
    """Records what is written (the socket's side of a transport)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def cycle(transport: Transport, keep_alive: bool = True) -> OneWriteCycle:
    scope = {"type": "http", "method": "POST", "path": "/rooms/r/commands", "http_version": "1.1", "headers": []}
    return OneWriteCycle(scope=scope, transport=transport, flow=FlowControl(transport), logger=logging.getLogger(),
                         access_logger=logging.getLogger(), access_log=False, default_headers=[],
                         message_event=asyncio.Event(), expect_100_continue=False, keep_alive=keep_alive,
                         on_response=lambda: None)


async def answer(transport: Transport, *chunks: bytes, keep_alive: bool = True, length: bool = True) -> None:
    one = cycle(transport, keep_alive)
    headers = [(b"content-length", str(sum(map(len, chunks))).encode())] if length else []
    await one.send({"type": "http.response.start", "status": 200, "headers": headers})
    for index, chunk in enumerate(chunks):
        await one.send({"type": "http.response.body", "body": chunk, "more_body": index < len(chunks) - 1})


def test_an_answer_is_one_write_and_a_streamed_one_sends_its_head_with_its_first_chunk() -> None:
    single = Transport()
    asyncio.run(answer(single, b'{"ok":true}'))
    assert single.writes == [b'HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{"ok":true}'] and not single.closed
    streamed = Transport()
    asyncio.run(answer(streamed, b"ab", b"cd", length=False))
    assert len(streamed.writes) == 2 and streamed.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert streamed.writes[0].endswith(b"\r\n\r\n2\r\nab\r\n") and streamed.writes[1] == b"2\r\ncd\r\n0\r\n\r\n"
    closing = Transport()
    asyncio.run(answer(closing, b"{}", keep_alive=False))
    assert len(closing.writes) == 1 and b"connection: close" in closing.writes[0] and closing.closed


def test_only_the_command_route_is_refused_early() -> None:
    assert _is_command(b"/rooms/r-1/commands") and _is_command(b"/rooms/r-1/commands?x=1")
    assert not _is_command(b"/rooms/r-1/commands/abc") and not _is_command(b"/rooms")
    assert not _is_command(b"/rooms/r-1/join") and not _is_command(b"/rooms/a/b/commands")


def test_a_queue_stands_when_even_the_quickest_wait_of_an_interval_exceeds_the_target() -> None:
    queue = StandingQueue(target_ms=20)
    # A burst: one slow command among quick ones is no standing queue.
    queue.record(0.005, now=0.0)
    queue.record(0.300, now=0.05)
    assert not queue.standing(now=0.1)
    # Every command of an interval waited past the target: refuse...
    queue.record(0.030, now=0.12)
    queue.record(0.050, now=0.15)
    assert queue.standing(now=0.2) and queue.standing(now=0.21)
    assert round(queue.quickest_s, 3) == 0.030
    # ...until one command is quick again,
    queue.record(0.010, now=0.25)
    assert not queue.standing(now=0.26)
    # or an interval passes with none finished (what was queued has drained).
    queue.record(0.040, now=0.31)
    assert queue.standing(now=0.45)
    assert not queue.standing(now=0.6)
    assert not StandingQueue(target_ms=0).standing(now=1.0)  # 0 = off
