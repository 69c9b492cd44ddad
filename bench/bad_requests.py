"""What a bad request costs the gateway's event loop, against a good cheap request (GET /rulesets) in the same run.

Requests go straight into the ASGI app (no sockets, no client), one at a time, so each one's wall time
is the time it held the event loop. Logging is configured as in production (JSON, level info: every
request writes its access line; a 500 also writes its bounded traceback) into /dev/null.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI

from almanac.services.gateway import create_app
from almanac.services.settings import Settings

# Each bad request: (label, method, path, body). The 500 comes from a reader made to fail deep in a call stack.
BAD_REQUESTS: list[tuple[str, str, str, bytes]] = [
    ("400 malformed JSON body", "POST", "/rooms", b'{"ruleset": "board", "player": '),
    ("404 unknown route", "GET", "/no/such/route", b""),
    ("422 invalid query parameter", "GET", "/rooms?limit=18446744073709551616", b""),
    ("500 internal error (deep traceback)", "GET", "/rooms/r1", b""),
]
GOOD_REQUEST = ("GET", "/rulesets", b"")


async def call(app: Any, method: str, path: str, body: bytes = b"") -> int:
    """One request through the ASGI app; its status."""
    route, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": route, "raw_path": route.encode(), "query_string": query.encode(),
             "root_path": "", "headers": [(b"host", b"bench"), (b"content-type", b"application/json"),
                                          (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("bench", 80), "state": {}}
    sent = False
    status = 0

    async def receive() -> dict:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def fail_deep(depth: int = 60) -> Callable[..., Any]:
    """A reader method that raises from ``depth`` frames down, each holding a large local (never logged)."""

    def descend(level: int) -> None:
        ballast = "x" * 20_000  # noqa: F841 - a rich traceback with locals would print it at every frame
        if level == 0:
            raise RuntimeError("the reader failed")
        descend(level - 1)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        descend(depth)

    return broken


@contextlib.asynccontextmanager
async def running_gateway(settings: Settings) -> AsyncIterator[FastAPI]:
    """The gateway app with its lifespan running, its room reader failing deep (for the 500s)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        app.state.gateway.reader.latest = fail_deep()
        yield app


async def time_requests(app: Any, request: tuple[str, str, bytes], count: int) -> list[float]:
    """Milliseconds per request, ``count`` requests one after another."""
    method, path, body = request
    times = []
    for _ in range(count):
        started = time.perf_counter()
        await call(app, method, path, body)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def latency_under_bad_load(app: Any, good: int = 200, bad_senders: int = 4) -> list[float]:
    """Latency (ms) of ``good`` GET /rulesets, one every 5 ms, while ``bad_senders`` tasks send bad requests
    back to back on the same event loop."""
    stop = asyncio.Event()

    async def bad_sender(offset: int) -> None:
        index = offset
        while not stop.is_set():
            _, method, path, body = BAD_REQUESTS[index % len(BAD_REQUESTS)]
            await call(app, method, path, body)
            index += 1
            await asyncio.sleep(0)

    senders = [asyncio.create_task(bad_sender(n)) for n in range(bad_senders)]
    latencies = []
    try:
        for _ in range(good):
            await asyncio.sleep(0.005)
            started = time.perf_counter()
            await call(app, *GOOD_REQUEST)
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        stop.set()
        await asyncio.gather(*senders)
    return latencies


def main(settings: Settings, count: int = 2_000) -> None:
    from almanac.services.logging import configure_logging  # noqa: PLC0415

    sink = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the benchmark
    configure_logging("json", "info", stream=sink)

    async def run() -> None:
        async with running_gateway(settings) as app:
            await time_requests(app, GOOD_REQUEST, 200)  # warm up
            baseline = statistics.median(await time_requests(app, GOOD_REQUEST, count))
            print(f"{'baseline: 200 GET /rulesets':40s} {baseline * 1000:8.0f} us per request")
            worst = 0.0
            for label, method, path, body in BAD_REQUESTS:
                median = statistics.median(await time_requests(app, (method, path, body), count))
                worst = max(worst, median)
                print(f"{label:40s} {median * 1000:8.0f} us per request  ({median / baseline:.2f}x baseline)")
            latencies = sorted(await latency_under_bad_load(app))
            p50, p90 = statistics.median(latencies), latencies[int(len(latencies) * 0.9)]
            print(f"GET /rulesets while 4 senders send bad requests: median {p50:.2f} ms, p90 {p90:.2f} ms")
            verdict = "under" if worst < 5 else "OVER"
            print(f"worst bad request: {worst:.3f} ms of event loop, {verdict} the 5 ms aim")

    asyncio.run(run())
