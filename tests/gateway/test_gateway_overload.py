"""Overload is refused, not queued: a gateway past its in-flight limit answers 503 overloaded quickly.

Given a real stack (engine process, gateway process under uvicorn) whose gateway may decide only 2
commands at once, when 60 players each send a move at the same moment, then some are refused with 503
``overloaded`` and a Retry-After header, no answer is any other 5xx, every accepted move's event is in
its room's log, and every refused move left its room exactly as it was (no event, no stored outcome).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from gateway_stack import CHILD, Stack

from almanac.services.gateway.context import internal_command_id
from almanac.services.redis_client import connect
from almanac.storage.redis_store import RedisEventStore

PLAYERS = 60
MAX_INFLIGHT = 2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def gateway_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Engine and a uvicorn gateway process with ALMANAC_GATEWAY_MAX_INFLIGHT=2."""
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, tmp_path_factory.mktemp("overload-stack"))
    stack.start("engine")
    port = free_port()
    env = {**stack.env, "ALMANAC_GATEWAY_MAX_INFLIGHT": str(MAX_INFLIGHT), "ALMANAC_HTTP_PORT": str(port),
           "ALMANAC_RATE_COMMANDS": "off", "ALMANAC_RATE_ANON": "off"}
    log = open(stack.data_dir / "gateway.log", "ab")  # noqa: SIM115 - the child owns it
    stack.processes["gateway"] = subprocess.Popen([sys.executable, "-c", CHILD, "gateway"], env=env,
                                                  stdout=log, stderr=subprocess.STDOUT)
    log.close()
    url = f"http://127.0.0.1:{port}"
    try:
        stack.wait_ready()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(f"the gateway did not become healthy: {stack.log('gateway')}")
        yield url
    finally:
        stack.stop()


async def _storm(url: str, redis_url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 limits=httpx.Limits(max_connections=PLAYERS)) as http:
        rooms = []
        for index in range(PLAYERS):  # one at a time: within the limit
            created = await http.post("/rooms", json={"ruleset": "board", "player": "p", "room": f"storm-{index}"})
            assert created.status_code == 201, created.text
            rooms.append((created.json()["room"], created.json()["token"], created.json()["version"]))

        async def move(room: str, token: str) -> httpx.Response:
            return await http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                                   json={"command": {"kind": "place_element", "row": 5, "column": 5},
                                         "command_id": "storm"})

        answers = await asyncio.gather(*(move(room, token) for room, token, _ in rooms))

    statuses = [answer.status_code for answer in answers]
    refused = [answer for answer in answers if answer.status_code == 503]
    assert refused, f"no command was refused past an in-flight limit of {MAX_INFLIGHT}: {statuses}"
    assert all(answer.json()["code"] == "overloaded" and answer.headers.get("retry-after") for answer in refused)
    assert set(statuses) <= {200, 503}, statuses
    assert statuses.count(200) >= 1

    store = RedisEventStore(connect(redis_url))
    try:
        for (room, _, created_version), answer in zip(rooms, answers, strict=True):
            log = await store.read(room)
            command_id = internal_command_id(room, "p", "storm")
            if answer.status_code == 200:
                assert log[-1].version == answer.json()["version"]
                assert any(envelope.command_id == command_id for envelope in log), room
            else:
                assert len(log) == created_version, room  # nothing appended
                assert await store.outcome(room, command_id) is None, room  # nothing submitted
    finally:
        await store.client.aclose()


def test_commands_past_the_in_flight_limit_are_refused_and_change_nothing(gateway_url: str,
                                                                          redis_url: str) -> None:
    asyncio.run(_storm(gateway_url, redis_url))
