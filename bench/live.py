"""`almanac bench live`: what open live feeds cost a gateway and its other clients, against none in the same run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import redis
from rich.table import Table

from almanac.bench.common import output_console
from almanac.client.aio import AsyncClient
from almanac.services import bootstrap
from almanac.services.gateway.auth import TokenSigner
from almanac.services.gateway.http_app import raise_open_files_limit
from almanac.services.settings import Settings
from almanac.services.supervisor import Stack

console = output_console()
IDLE_S = 2  # ALMANAC_REDIS_IDLE_S of the measured gateway: its idle connections close this soon after the feeds
OPEN_AT_ONCE = 100  # feeds opened concurrently (a burst of clients arriving together)
ROOM = "bench-live"


def main(settings: Settings, feeds: int, requests: int) -> dict[str, Any]:
    """A stack of our own (Redis, engine, gateway); ``feeds`` feeds of distinct seats on one room; print, return."""
    raise_open_files_limit()  # this process holds every feed's socket
    with tempfile.TemporaryDirectory(prefix="almanac-bench-live-") as data_dir:
        # Every feed from this one address (the per-address cap would refuse all but its first 64: a refused
        # feed's first message is its refusal, which a raw socket's recv() once counted as the feed's history).
        os.environ.update({"ALMANAC_LOG_LEVEL": "warning", "ALMANAC_REDIS_IDLE_S": str(IDLE_S),
                           "ALMANAC_LIVE_MAX_FEEDS": str(feeds + 1),
                           "ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS": str(feeds + 1)})
        stack_settings = settings.model_copy(update={"data_dir": data_dir, "http_port": 0, "log_level": "warning"})
        console.print(f"starting Redis, an engine and a gateway; then {feeds} live feeds on one room ...")
        with Stack(stack_settings, say=console.print) as stack:
            stack.start()
            signer = TokenSigner(stack.env["ALMANAC_SECRET"], 3600)
            with bootstrap.tool_sync_client(stack.redis_url) as watcher:
                figures = asyncio.run(_measure(stack.url, stack.children["gateway"].pid, watcher, signer, feeds,
                                               requests))
    _print(figures, feeds)
    return figures


async def _measure(url: str, pid: int, watcher: redis.Redis, signer: TokenSigner, feeds: int,
                   requests: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    async with AsyncClient(url, timeout=30) as client:
        seat = await client.create_room("board", "p", room=ROOM)
        await asyncio.sleep(IDLE_S + 1)
        figures["none"] = {**await _latencies(client, requests), "redis_clients": _clients(watcher, pid),
                           "rss_mb": _rss(pid)}

        # Each feed the client's own (``follow``), not reconnecting: a feed that drops would be measured twice.
        feeds_: list[AsyncIterator[dict[str, Any]]] = []
        started = time.perf_counter()
        for first in range(0, feeds, OPEN_AT_ONCE):
            batch = [signer.issue(ROOM, f"watcher-{index}") for index in range(first, min(feeds, first + OPEN_AT_ONCE))]
            opened = [client.follow(ROOM, token=token, reconnect=False) for token in batch]
            await asyncio.gather(*(_until(feed, seat.seen_version) for feed in opened))  # each with its history
            feeds_ += opened
        figures["open_s"] = time.perf_counter() - started
        figures["feeds"] = {**await _latencies(client, requests), "redis_clients": _clients(watcher, pid),
                            "rss_mb": _rss(pid)}

        # One event reaches every feed: the time from the command's answer to the last feed's message.
        ended = await seat.end()
        answered = time.perf_counter()
        await asyncio.gather(*(_until(feed, ended.version) for feed in feeds_))
        figures["fan_out_ms"] = (time.perf_counter() - answered) * 1000

        await asyncio.gather(*(feed.aclose() for feed in feeds_))  # type: ignore[attr-defined]
        await asyncio.sleep(IDLE_S + 1.5)
        figures["after"] = {"redis_clients": _clients(watcher, pid), "rss_mb": _rss(pid)}
    return figures


async def _until(feed: AsyncIterator[dict[str, Any]], version: int) -> None:
    """Read a feed up to ``version`` (each message is one version: a room's history is several)."""
    while (await anext(feed))["version"] < version:
        pass


async def _latencies(client: AsyncClient, requests: int) -> dict[str, float]:
    """Another client's GET /rooms/{room}, one at a time: p50 and p99 in ms."""
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        await client.room(ROOM)
        times.append((time.perf_counter() - started) * 1000)
    cuts = statistics.quantiles(times, n=100)
    return {"p50_ms": statistics.median(times), "p99_ms": cuts[98]}


def _clients(watcher: redis.Redis, pid: int) -> tuple[int, int]:
    """Redis clients: all of them (not the watcher), and the gateway's own (its sockets' local ports)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    clients = watcher.client_list()
    return len(clients) - 1, sum(1 for client in clients if int(client["addr"].rsplit(":", 1)[1]) in ports)


def _rss(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def _print(figures: dict[str, Any], feeds: int) -> None:
    table = Table(title=f"{feeds} live feeds on one gateway (baseline: none open, same run)")
    for column in ("", "none open", f"{feeds} open", "ratio", f"closed, {IDLE_S + 1.5:g} s later"):
        table.add_column(column, justify="right")
    none, open_, after = figures["none"], figures["feeds"], figures["after"]
    for label, key in (("another client's GET p50 ms", "p50_ms"), ("another client's GET p99 ms", "p99_ms")):
        table.add_row(label, f"{none[key]:.2f}", f"{open_[key]:.2f}", f"{open_[key] / none[key]:.2f}x", "")
    for index, label in enumerate(("Redis clients (all)", "Redis clients (the gateway's)")):
        table.add_row(label, str(none["redis_clients"][index]), str(open_["redis_clients"][index]), "",
                      str(after["redis_clients"][index]))
    table.add_row("gateway RSS MB", f"{none['rss_mb']:.0f}", f"{open_['rss_mb']:.0f}",
                  f"+{(open_['rss_mb'] - none['rss_mb']) * 1024 / feeds:.0f} KB/feed", f"{after['rss_mb']:.0f}")
    console.print(table)
    console.print(f"opening them took {figures['open_s']:.2f} s ({OPEN_AT_ONCE} at once); one event reached all "
                  f"{feeds} in {figures['fan_out_ms']:.0f} ms after its command was answered")
