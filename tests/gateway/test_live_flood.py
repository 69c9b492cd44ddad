"""A flood of live feeds from one token, then from one address across many seats, against a real gateway process
on its own Redis: refused past the caps (per seat, per address, per gateway), served from one shared read (Redis
clients stay bounded and return to where they were), other clients still served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import redis
from gateway_stack import engine_and_gateway
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner

SECRET = "live-flood-test-secret-" + "x" * 32
PER_SEAT = 3
PER_ADDRESS = 6
PER_GATEWAY = 12
# Clients at other addresses: Linux answers all of 127.0.0.0/8 on loopback, so a feed may come from each.
FLOODER, NEIGHBOUR, LATECOMER = "127.0.0.1", "127.0.0.2", "127.0.0.3"
FLOOD = 40  # feeds one token opens at once
# Redis clients the gateway may add while feeds are open: the shared read, the read that starts it, and one
# catch-up read per served feed at once (a pooled connection each): bounded by the caps, not by the flood.
SHARED_READ_CLIENTS = 2
WAIT_S = 10.0  # the most any step below waits (a refusal, an event, the pool closing idle connections)


class GatewayClients:
    """The Redis clients one gateway process holds: CLIENT LIST's entries whose address is one of that process's
    TCP connections (the engine and projector on the same Redis open and close their own, which are not the
    gateway's to bound)."""

    def __init__(self, server: redis.Redis, pid: int) -> None:
        self.server, self.process = server, psutil.Process(pid)

    def entries(self) -> list[dict]:
        mine = {f"{c.laddr.ip}:{c.laddr.port}" for c in self.process.net_connections(kind="tcp") if c.raddr}
        return [client for client in self.server.client_list() if client["addr"] in mine]

    def __call__(self) -> int:
        return len(self.entries())

    def blocked_stream_reads(self, samples: int = 5) -> int:
        """The most of this gateway's clients seen blocked in XREAD in a few looks 50 ms apart (the engine's clock
        waits in XREAD too, from its own process; a read between two blocks is missed by one look, not by all)."""
        seen = 0
        for _ in range(samples):
            seen = max(seen, sum(1 for c in self.entries() if c["cmd"] == "xread" and "b" in c["flags"]))
            time.sleep(0.05)
        return seen


class Feed:
    """One WebSocket on /rooms/{room}/live: the events it received, or how it was refused."""

    def __init__(self) -> None:
        self.socket: ClientConnection | None = None
        self.events: list[dict] = []
        self.refusal: dict | None = None
        self.close_code: int | None = None
        self.close_reason: dict | None = None

    async def open(self, ws_url: str, room: str, token: str, address: str = FLOODER) -> Feed:
        self.socket = await connect(f"{ws_url}/rooms/{room}/live?token={token}", open_timeout=WAIT_S,
                                    local_addr=(address, 0))
        return self

    async def receive(self, count: int) -> Feed:
        """Read until ``count`` events arrived or the gateway closed the feed (then its refusal and close code)."""
        try:
            while len(self.events) < count:
                message = json.loads(await asyncio.wait_for(self.socket.recv(), WAIT_S))
                if "version" in message:
                    self.events.append(message)
                else:
                    self.refusal = message
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
            self.close_reason = json.loads(closed.rcvd.reason) if closed.rcvd and closed.rcvd.reason else None
        return self

    @property
    def versions(self) -> list[int]:
        return [event["version"] for event in self.events]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/<pid>/limits")
def test_a_live_feed_flood_from_one_client_is_refused_past_the_caps_and_leaves_redis_as_it_was(tmp_path: Path) -> None:
    env = {"ALMANAC_SECRET": SECRET, "ALMANAC_LIVE_MAX_FEEDS_PER_SEAT": str(PER_SEAT),
           "ALMANAC_LIVE_MAX_FEEDS_PER_ADDRESS": str(PER_ADDRESS), "ALMANAC_LIVE_MAX_FEEDS": str(PER_GATEWAY),
           "ALMANAC_REDIS_IDLE_S": "1"}
    with EmbeddedRedis(str(tmp_path / "redis"), persist=False) as server, soft_open_files_limit(1024), \
            engine_and_gateway(server.url, tmp_path, **env) as (url, stack), \
            redis.Redis.from_url(server.url) as watcher:
        # Started under a soft limit of 1,024 open files (inherited), the gateway raised it to its hard limit.
        assert open_files_limits(stack.processes["gateway"].pid) == open_files_limits(os.getpid(), hard_only=True)
        asyncio.run(flood_story(url, watcher, GatewayClients(watcher, stack.processes["gateway"].pid)))


@contextlib.contextmanager
def soft_open_files_limit(soft: int) -> Iterator[None]:
    """This process's soft limit of open files lowered to ``soft`` (its hard limit kept), as many shells set it."""
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, before[1]), before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def open_files_limits(pid: int, hard_only: bool = False) -> tuple[str, str]:
    """A process's (soft, hard) limit of open files from /proc; ``hard_only``: (hard, hard)."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if line.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return (hard, hard) if hard_only else (soft, hard)


async def flood_story(url: str, watcher: redis.Redis, connected_clients: GatewayClients) -> None:
    ws_url = url.replace("http://", "ws://")
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http:
        created = (await http.post("/rooms", json={"ruleset": "board", "player": "p", "room": "flooded"})).json()
        room, token = created["room"], created["token"]
        history = (await http.get(f"/rooms/{room}")).json()["version"]
        # One feed came and went: the gateway's steady connections are open. Redis clients now: the baseline.
        first = await (await Feed().open(ws_url, room, token)).receive(history)
        await first.socket.close()
        await asyncio.sleep(1.5)
        baseline = connected_clients()

        # The flood: one token opens FLOOD feeds at once. Its seat gets PER_SEAT; the rest are refused, with
        # a close code and a reason, before they cost a Redis command.
        flood = await asyncio.gather(*(Feed().open(ws_url, room, token) for _ in range(FLOOD)))
        await asyncio.gather(*(feed.receive(history) for feed in flood))
        served = [feed for feed in flood if feed.close_code is None]
        refused = [feed for feed in flood if feed.close_code is not None]
        assert len(served) == PER_SEAT, [feed.close_code for feed in flood]
        assert all(feed.versions == list(range(1, history + 1)) for feed in served)
        assert {feed.close_code for feed in refused} == {4429}
        assert {feed.close_reason["code"] for feed in refused} == {"too_many_feeds_for_seat"}
        assert all("already has 3 live feeds open" in feed.refusal["message"] for feed in refused)
        assert connected_clients() <= baseline + SHARED_READ_CLIENTS + PER_SEAT

        # Another client is still served at once: a watcher of the room (another seat, another address) follows
        # it and sees the next event live, as do the flooding seat's own feeds (one shared read fans it out).
        signer = TokenSigner(SECRET, 3600)
        other = await (await Feed().open(ws_url, room, signer.issue(room, "q"), NEIGHBOUR)).receive(history)
        assert other.versions == list(range(1, history + 1)) and other.close_code is None
        ended = await http.post(f"/rooms/{room}/end", json={}, headers={"Authorization": f"Bearer {token}"})
        assert ended.status_code == 200, ended.text
        for feed in [other, *served]:
            await feed.receive(history + 1)
        assert all(feed.versions == list(range(1, history + 2)) for feed in [other, *served])

        # The flooding address takes a seat after seat (as POST /rooms hands out a token per room): its feeds
        # together stop at PER_ADDRESS, whatever seats they are for, and the gateway keeps room for others.
        seats = await asyncio.gather(*(Feed().open(ws_url, room, signer.issue(room, f"s{index}"))
                                       for index in range(PER_GATEWAY)))
        await asyncio.gather(*(feed.receive(history + 1) for feed in seats))
        assert [feed.close_code for feed in seats].count(None) == PER_ADDRESS - PER_SEAT
        refused = [feed for feed in seats if feed.close_code is not None]
        assert {feed.close_code for feed in refused} == {4429}
        assert {feed.close_reason["code"] for feed in refused} == {"too_many_feeds_for_address"}
        assert all("already has 6 live feeds open" in feed.refusal["message"] for feed in refused)

        # The gateway's own cap: other addresses' seats (watchers' tokens for this room) fill it; the next is
        # refused 4503.
        open_now = PER_ADDRESS + 1
        watchers = await asyncio.gather(*(Feed().open(ws_url, room, signer.issue(room, f"w{index}"), NEIGHBOUR)
                                          for index in range(PER_GATEWAY - open_now)))
        watchers.append(await Feed().open(ws_url, room, signer.issue(room, "late"), LATECOMER))
        await asyncio.gather(*(feed.receive(history + 1) for feed in watchers))
        assert [feed.close_code for feed in watchers].count(None) == PER_GATEWAY - open_now
        assert [feed.close_code for feed in watchers].count(4503) == 1
        assert {feed.close_reason["code"] for feed in watchers if feed.close_code} == {"too_many_feeds"}
        assert connected_clients() <= baseline + SHARED_READ_CLIENTS + PER_GATEWAY
        # Twelve feeds waiting for the next event: one read waits for all of them, not one read each.
        assert connected_clients.blocked_stream_reads() == 1

        # Every feed closes: Redis clients fall back to the baseline (idle pooled connections close after
        # ALMANAC_REDIS_IDLE_S), and the seat may follow the room again.
        await asyncio.gather(*(feed.socket.close() for feed in [*flood, other, *seats, *watchers]))
        for _ in range(int(WAIT_S * 10)):
            if connected_clients() <= baseline:
                break
            await asyncio.sleep(0.1)
        assert connected_clients() <= baseline
        again = await (await Feed().open(ws_url, room, token)).receive(history + 1)
        assert again.close_code is None and again.versions == list(range(1, history + 2))
        await again.socket.close()

        # Auditors are operators whose tokens all share one seat: no seat cap, only their address's (one that
        # holds no feed yet: the latecomer's was refused).
        auditor = signer.issue(ANY_ROOM, "auditor", ROLE_AUDITOR)
        audits = await asyncio.gather(*(Feed().open(ws_url, room, auditor, LATECOMER) for _ in range(PER_ADDRESS + 1)))
        await asyncio.gather(*(feed.receive(history + 1) for feed in audits))
        assert [feed.close_code for feed in audits].count(None) == PER_ADDRESS
        assert [feed.close_reason["code"] for feed in audits if feed.close_code] == ["too_many_feeds_for_address"]
        await asyncio.gather(*(feed.socket.close() for feed in audits))
