"""Webhook delivery: the notifier's throughput and latency (append -> receiver's 2xx), against bare POSTs.

A real Redis and a real HTTP receiver (its own thread and event loop: keep-alive HTTP/1.1, answers 200). Rooms
of board are created, joined and ended through the one room step and appended with the store (so the shard
feeds carry them, as the engine's appends do); one deployment subscription makes each ``room.ended`` one
delivery. Baseline in the same run: the same bodies POSTed to the same receiver by a bare httpx client with the
notifier's concurrency (what delivery would cost with no outbox, no feed, no signature).

* throughput: ``rooms`` rooms appended at once, then the notifier runs until every delivery is acknowledged;
* latency: rooms appended at ``rate`` a second for ``seconds``; p50/p99 from each event's server time to the
  receiver's answer (the notifier's own latency samples, GET /webhooks/stats);
* a slow subscriber (``slow_s`` > 0, issue 32): ``slow_rooms`` rooms appended at once with two subscriptions, one
  to a receiver answering after ``slow_s`` seconds, one to a healthy one; p50/p99/max from the append to the
  healthy receiver's arrival of each notice, and what the slow one got meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx

from almanac.events.testing import RoomDriver
from almanac.services import bootstrap
from almanac.services.notifier import Notifier, Subscription, stats
from almanac.services.settings import Settings
from almanac.storage.redis_store import RedisEventStore

PREFIX = "almbench-webhooks"


class Receiver:
    """A minimal keep-alive HTTP/1.1 server answering 200 to every POST, counting them (its own loop and thread)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.count = 0
        self.delay_s = delay_s  # answer each POST this long after it arrived
        self.arrived: dict[str, float] = {}  # room -> when its first notice arrived (perf_counter)
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.arrived.setdefault(json.loads(body).get("room", ""), time.perf_counter())
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                self.count += 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


def ended_rooms(prefix: str, count: int) -> list[tuple[str, list[Any]]]:
    """(room, envelopes) of ``count`` board rooms created, joined and ended now."""
    now = int(time.time() * 1000)
    rooms = []
    for index in range(count):
        room = RoomDriver(f"{prefix}-{index}", now_ms=now)
        room.send("ann", {"kind": "create_room", "ruleset": "board"})
        room.send("ann", {"kind": "join_room"})
        room.send("ann", {"kind": "end_room", "reason": "bench"})
        rooms.append((room.room, room.envelopes))
    return rooms


async def append(store: RedisEventStore, rooms: list[tuple[str, list[Any]]]) -> None:
    for room, envelopes in rooms:
        await store.append(room, 0, f"bench-{room}", envelopes)


async def drain(notifier: Notifier, client: Any, until: int, timeout_s: float = 120.0) -> float:
    """Run the notifier until ``until`` deliveries are acknowledged; the seconds it took."""
    stop = asyncio.Event()
    started = time.perf_counter()
    running = asyncio.create_task(notifier.run(stop))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = int((await client.hget(notifier.keys.webhook_stats(), "delivered")) or 0)
        if done >= until:
            break
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    stop.set()
    await running
    return elapsed


async def bare_posts(url: str, count: int, concurrency: int, body: bytes) -> float:
    """The baseline: ``count`` POSTs of ``body`` with ``concurrency`` in flight; the seconds it took."""
    queue = list(range(count))
    async with httpx.AsyncClient(timeout=10) as http:
        async def worker() -> None:
            while queue:
                queue.pop()
                answer = await http.post(url, content=body, headers={"Content-Type": "application/json"})
                answer.raise_for_status()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started


async def slow_subscriber(settings: Settings, rooms: int, slow_s: float) -> dict[str, Any]:
    """``rooms`` rooms ended at once, told to a healthy receiver and to one answering after ``slow_s``: the healthy
    one's latency (append -> arrival), and the slow one's count when the healthy one has all."""
    client = bootstrap.redis_client(settings, bootstrap.Role.TOOL)
    await _forget(client)
    healthy, slow = Receiver(), Receiver(delay_s=slow_s)
    store = bootstrap.tool_store(client, settings.shard_count, PREFIX)
    notifier = Notifier(client, store, settings, keys=store.keys)
    for name, receiver in (("healthy000", healthy), ("slow000000", slow)):
        await client.hset(notifier.keys.webhook_subscriptions(), f"wh_bench{name}",
                          json.dumps({"id": f"wh_bench{name}", "url": receiver.url, "secret": "b" * 64,
                                      "scope": "deployment"}))
    stop = asyncio.Event()
    running = asyncio.create_task(notifier.run(stop))
    try:
        ended = ended_rooms("slow", rooms)
        started = time.perf_counter()
        await append(store, ended)
        deadline = time.monotonic() + 60 + rooms * slow_s
        while len(healthy.arrived) < rooms and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        waits = sorted(round((at - started) * 1000) for at in healthy.arrived.values())
        return {"slow_rooms": rooms, "slow_s": slow_s, "healthy_received": len(waits),
                "healthy_latency_ms": {"p50": waits[len(waits) // 2], "p99": waits[min(len(waits) - 1,
                                                                                      int(0.99 * len(waits)))],
                                       "max": waits[-1]},
                "slow_received_by_then": slow.count}
    finally:
        stop.set()
        await running
        await notifier.aclose()
        await _forget(client)
        await client.aclose()


async def run(settings: Settings, rooms: int, rate: int, seconds: int) -> dict[str, Any]:
    client = bootstrap.redis_client(settings, bootstrap.Role.TOOL)
    await _forget(client)
    receiver = Receiver()
    # the bench's keys apart from any deployment's on the same Redis
    store = bootstrap.tool_store(client, settings.shard_count, PREFIX)
    notifier = Notifier(client, store, settings, keys=store.keys)
    subscription = Subscription(id="wh_bench0000000000", url=receiver.url, secret="b" * 64, scope="deployment")
    await client.hset(notifier.keys.webhook_subscriptions(), subscription.id,
                      json.dumps({"id": subscription.id, "url": subscription.url, "secret": subscription.secret,
                                  "scope": "deployment"}))
    try:
        # Throughput: a backlog of rooms, then the notifier catches up
        await append(store, ended_rooms("burst", rooms))
        burst_s = await drain(notifier, client, rooms)
        body = json.dumps({"kind": "room_ended", "event": {"version": 3, "type": "room.ended"}, "pad": "x" * 300}).encode()
        bare_s = await bare_posts(receiver.url, rooms, settings.webhook_concurrency, body)
        # Latency: rooms ending at a steady rate while the notifier runs
        await client.delete(notifier.keys.webhook_latency())
        stop = asyncio.Event()
        running = asyncio.create_task(notifier.run(stop))
        paced = rate * seconds
        started = time.perf_counter()
        for index in range(paced):
            await asyncio.sleep(max(0.0, started + index / rate - time.perf_counter()))
            # made at its append time: the latency runs from the event's server time, as an engine's append
            await append(store, ended_rooms(f"paced-{index}", 1))
        while int((await client.hget(notifier.keys.webhook_stats(), "delivered")) or 0) < rooms + paced:
            await asyncio.sleep(0.02)
        stop.set()
        await running
        figures = await stats(client, notifier.keys)
        return {"rooms": rooms, "notifier_deliveries_per_s": round(rooms / burst_s),
                "bare_posts_per_s": round(rooms / bare_s), "ratio_to_bare": round(bare_s / burst_s, 2),
                "paced_rate": rate, "paced_deliveries": paced, "latency_ms": figures["latency_ms"],
                "failed_attempts": figures["failed_attempts"], "dead": figures["dead"],
                "received": receiver.count}
    finally:
        await notifier.aclose()
        await _forget(client)
        await client.aclose()


async def _forget(client: Any) -> None:
    async for key in client.scan_iter(match=f"{PREFIX}:*", count=1000):
        await client.delete(key)


def main(settings: Settings, rooms: int, rate: int, seconds: int, slow_s: float = 0.0, slow_rooms: int = 100) -> None:
    figures = asyncio.run(run(settings, rooms, rate, seconds))
    if slow_s > 0:
        figures |= asyncio.run(slow_subscriber(settings, slow_rooms, slow_s))
    print(json.dumps(figures, indent=2))
