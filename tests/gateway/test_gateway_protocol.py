"""The gateway's HTTP protocol pieces on their own: an answer goes out in one write (its head with its
first body chunk), and the standing-queue test refuses only when even the quickest command waited long."""

from __future__ import annotations

import asyncio
import logging
import time

from uvicorn.protocols.http.flow_control import FlowControl

from almanac.services.gateway.overload import AdaptiveLimit, LoopLag, StandingQueue
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
    queue = StandingQueue(target_ms=20, interval_ms=100)
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
    assert not StandingQueue(target_ms=0, interval_ms=100).standing(now=1.0)  # 0 = off


def _interval(limit: AdaptiveLimit, start: float, waits_s: list[float]) -> None:
    """One interval's finished commands, spread over its first 20 ms (the next interval's first record judges
    it). Interval n starts at n * 0.1001 s: clear of the 100 ms window the first record of n - 1 opened."""
    start = round(start * 10) * 0.1001
    for index, wait in enumerate(waits_s):
        limit.record(wait, now=start + index * 0.001)


QUEUED = [0.002] + [0.030] * 19  # a queue: the quickest came straight through, the rest waited their turn


def test_the_in_flight_limit_shrinks_while_commands_queue_and_grows_back_once_they_do_not() -> None:
    limit = AdaptiveLimit(ceiling=32, target_ms=10, interval_ms=100, floor=8)
    assert limit.limit == 32
    for index in range(5):  # sustained overload: each interval's median wait 30 ms, its quickest 2 ms
        _interval(limit, index * 0.1, QUEUED)  # each judges the one before
    assert limit.limit == 9  # 32 -> 24 -> 18 -> 13 -> 9
    _interval(limit, 0.5, QUEUED)
    assert limit.limit == 8  # the floor: the loop-lag and standing-queue tests need 8 in flight to judge
    for index in range(6, 40):  # waits back under the target: one step an interval, up to the ceiling only
        _interval(limit, index * 0.1, [0.004] * 20)
    assert limit.limit == 32


def test_a_slow_store_a_lone_slow_command_or_a_few_commands_never_lower_the_limit() -> None:
    limit = AdaptiveLimit(ceiling=32, target_ms=10, interval_ms=100, floor=8)
    for index in range(5):  # every wait 15 ms alike (a remote Redis, WAIT for a replica): no queue
        _interval(limit, index * 0.1, [0.015] * 20)
    _interval(limit, 0.5, [0.004] * 19 + [0.160])  # one slow command among quick ones
    _interval(limit, 0.7, [0.002] + [0.500] * 6)  # a stall's few commands: too few to judge
    _interval(limit, 0.8, [0.004])
    assert limit.limit == 32
    fixed = AdaptiveLimit(ceiling=32, target_ms=0, interval_ms=100, floor=8)  # 0 = the limit stays fixed
    for index in range(10):
        _interval(fixed, index * 0.1, QUEUED)
    assert fixed.limit == 32


def test_quiet_intervals_grow_the_limit_back_as_calm_ones_do() -> None:
    limit = AdaptiveLimit(ceiling=32, target_ms=10, interval_ms=100, floor=8)
    for index in range(3):
        _interval(limit, index * 0.1, QUEUED)
    limit.record(0.004, now=0.3005)  # judges the third interval; a quick command opens the next
    assert limit.limit == 13
    # Nothing finishes for a while: the limit as the next command finds it (and as /metrics shows it).
    assert limit.current(now=1.5) == 24  # its interval was calm (+1), then ten quiet ones (+10)
    assert limit.current(now=9.0) == 32


def test_the_loop_lag_ticks_only_while_the_gateway_is_busy_and_reads_zero_once_idle() -> None:
    async def story() -> None:
        busy = False
        lag = LoopLag(lambda: busy, grace_s=0.05)
        assert not lag.ticking  # a new, idle gateway: no timer wakes the process
        lag.start()
        busy = True
        lag.wake()
        await asyncio.sleep(0.012)
        time.sleep(0.06)  # the event loop is held: a request arriving now waits ~60 ms to be looked at
        await asyncio.sleep(0.001)
        assert lag.ticking and lag.lag_ms >= 40
        busy = False  # the load hovers around the threshold: the reading decays, it is not dropped
        await asyncio.sleep(0.012)
        assert lag.ticking and lag.lag_ms > 0
        await asyncio.sleep(0.1)  # idle past the grace: the timer stops, and no queue is left to describe
        assert not lag.ticking and lag.lag_ms == 0
        await lag.stop()

    asyncio.run(story())
