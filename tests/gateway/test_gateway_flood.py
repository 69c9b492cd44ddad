"""A flood against the default stack: admission bounds what waits, refuses the rest at once, and loses nothing.

Given the product's shape (a gateway that decides the commands of the shards it holds, ALMANAC_ENGINE_SHARDS)
with an in-flight limit of 4, whose rooms' shards are held by an engine that stops deciding for as long as the
test says (SIGSTOP: the worst a queue can be, nothing drains), when 40 players each send a move at once, then:

- exactly 4 are admitted and wait; the other 36 are answered 503 ``overloaded`` with Retry-After while those 4
  still wait (the answers arrive before the engine is let go, so no clock is needed to show the refusals did
  not queue behind the stalled ones), and the gateway's own gauge shows 4 in flight, never more;
- meanwhile a bystander's read of another room is answered 200 (reads are not behind the commands' queue);
- once the engine is let go the 4 admitted moves are answered 200 and each is in its room's log, and every
  refused move left its room exactly as it was until its player came back;
- the refused players come back as Retry-After tells them and every move is then accepted, once.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from gateway_stack import Stack, open_board_rooms

from almanac.services.redis_client import connect
from almanac.storage.redis_store import RedisEventStore

PLAYERS = 40
MAX_INFLIGHT = 4
GATEWAY_ENV = {"ALMANAC_ENGINE_SHARDS": "all", "ALMANAC_GATEWAY_MAX_INFLIGHT": str(MAX_INFLIGHT),
               "ALMANAC_RATE_COMMANDS": "off", "ALMANAC_RATE_ANON": "off",
               # Longer than the test holds the engine: an admitted command is answered its outcome, not 202.
               "ALMANAC_COMMAND_TIMEOUT_MS": "60000"}
MOVE = {"command": {"kind": "place_element", "row": 5, "column": 5}}


@pytest.fixture(scope="module")
def deciding_gateway(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stack]]:
    """A deciding gateway beside an engine process that took every shard's lease first: the gateway's commands go
    to it through the command stream, so stopping it stalls them (a gateway cannot stop its own engine alone)."""
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, Path(tmp_path_factory.mktemp("flood-stack")))
    # Leases that outlast the stop: the gateway must not take the stopped engine's shards over meanwhile.
    stack.env["ALMANAC_LEASE_MS"] = "30000"
    try:
        stack.start("engine")
        stack.wait_ready(timeout_s=90)  # its heartbeat comes every lease/3: 10 s
        yield stack.start_gateway(**GATEWAY_ENV), stack
    finally:
        stack.stop()


def _inflight(metrics: str) -> float:
    return next(float(line.split()[-1]) for line in metrics.splitlines()
                if line.startswith("almanac_gateway_inflight "))


async def _flood(url: str, engine: subprocess.Popen, rooms: list[tuple[str, str]], bystander: tuple[str, str]) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=90, limits=httpx.Limits(max_connections=PLAYERS + 4)) as http:

        async def move(room: str, token: str) -> httpx.Response:
            return await http.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"}, json=MOVE)

        engine.send_signal(signal.SIGSTOP)  # let go below, never by a clock
        try:
            pending = {asyncio.ensure_future(move(room, token)): room for room, token in rooms}
            refused: dict[str, httpx.Response] = {}
            while len(refused) < PLAYERS - MAX_INFLIGHT:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED, timeout=60)
                assert done, f"only {len(refused)} answers came while the engine was stopped"
                for task in done:
                    answer = task.result()
                    assert answer.status_code == 503, (answer.status_code, answer.text)
                    refused[pending.pop(task)] = answer
            waiting = len(pending)
            inflight_seen = _inflight((await http.get("/metrics")).text)
            room, token = bystander
            read = await http.get(f"/rooms/{room}", headers={"Authorization": f"Bearer {token}"})
        finally:
            engine.send_signal(signal.SIGCONT)
        admitted = dict(zip(pending.values(), await asyncio.gather(*pending), strict=True))

        # The refused players come back when Retry-After tells them (a well-behaved client), until accepted.
        comeback: dict[str, httpx.Response] = {}
        for room, _answer in refused.items():
            token = dict(rooms)[room]
            for _ in range(50):
                answer = await move(room, token)
                if answer.status_code != 503:
                    break
                await asyncio.sleep(float(answer.headers["retry-after"]) / 10)
            comeback[room] = answer
    return {"refused": refused, "admitted": admitted, "waiting": waiting, "inflight": inflight_seen,
            "read": read, "comeback": comeback}


def test_a_flood_waits_at_most_the_in_flight_limit_refuses_the_rest_at_once_and_loses_nothing(
        deciding_gateway: tuple[str, Stack], redis_url: str) -> None:
    url, stack = deciding_gateway
    rooms = open_board_rooms(url, "flood", PLAYERS)
    bystander = open_board_rooms(url, "bystander", 1)[0]
    created = {room: _versions(redis_url, room) for room, _ in rooms}

    seen = asyncio.run(_flood(url, stack.processes["engine"], rooms, bystander))

    # While the engine was stopped: 4 admitted and waiting, 36 refused with Retry-After, the gauge at the limit.
    assert seen["waiting"] == MAX_INFLIGHT and seen["inflight"] == MAX_INFLIGHT
    for answer in seen["refused"].values():
        assert answer.json()["code"] == "overloaded" and int(answer.headers["retry-after"]) >= 1
    # A bystander's read was answered all the same.
    assert seen["read"].status_code == 200 and seen["read"].json()["room"] == bystander[0]
    # Nothing acknowledged is lost: each admitted move answered 200 and in its log; each refused one left its
    # room as it was until it came back, and was then accepted once.
    assert all(answer.status_code == 200 for answer in seen["admitted"].values()), \
        [answer.text for answer in seen["admitted"].values()]
    assert all(answer.status_code == 200 for answer in seen["comeback"].values()), \
        [answer.text for answer in seen["comeback"].values()]
    logs = asyncio.run(_logs(redis_url, [room for room, _ in rooms]))
    for room, _ in rooms:
        answer = seen["admitted"].get(room) or seen["comeback"][room]
        moves = [envelope for envelope in logs[room] if envelope.command_id not in created[room]]
        assert len({envelope.command_id for envelope in moves}) == 1, (room, moves)  # one move, decided once
        assert logs[room][-1].version == answer.json()["version"]


def _versions(redis_url: str, room: str) -> set[str]:
    """The command ids already in a room's log (its creation and join)."""
    return {envelope.command_id for envelope in asyncio.run(_logs(redis_url, [room]))[room]}


async def _logs(redis_url: str, rooms: list[str]) -> dict[str, list]:
    store = RedisEventStore(connect(redis_url))
    try:
        return {room: await store.read(room) for room in rooms}
    finally:
        await store.client.aclose()

