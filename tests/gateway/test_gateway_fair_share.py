"""One client's flood cannot keep another client out: the in-flight limit is shared between the clients competing.

Given a deciding gateway with an in-flight limit of 4 and one attacker (one address) flooding it from 16 keep-alive
connections, each sending its next command the moment the last is answered, 503s and Retry-After ignored (so every
slot the gateway frees is taken by the attacker's next request within microseconds), then a player on another
address, who sends a move and, refused, comes back as Retry-After tells them:

- is refused at most once per move and decided on the return, three moves running (before, the attacker took every
  freed slot before the player's return reached the gateway: the player came back refused, move after move);
- meanwhile the player's read of their room is answered 200, and the attacker, refused by the thousand, gets only
  503 ``overloaded`` or its commands decided (no other 5xx), with its share of the slots still its own.

The same behind a trusted proxy (ALMANAC_TRUSTED_PROXIES), both clients arriving through it and named by the
X-Forwarded-For it adds: the connection guard, which sheds most refusals, counts the client the route counts.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from gateway_stack import Stack, open_board_rooms

MAX_INFLIGHT = 4
ATTACKER_CONNECTIONS = 16
MOVES = 3
GATEWAY_ENV = {"ALMANAC_ENGINE_SHARDS": "all", "ALMANAC_GATEWAY_MAX_INFLIGHT": str(MAX_INFLIGHT),
               "ALMANAC_RATE_COMMANDS": "off", "ALMANAC_RATE_ANON": "off"}
PLAYER_ADDRESS = "127.0.0.2"  # another client than the attacker's 127.0.0.1 (Linux routes all of 127/8 to lo)
# Behind the proxy: the addresses it forwards (documentation ranges), both clients connecting from 127.0.0.1.
FORWARDED = {"attacker": "198.51.100.1", "player": "198.51.100.2"}


@pytest.fixture(scope="module", params=["direct", "behind a trusted proxy"])
def deciding_gateway(request: pytest.FixtureRequest, redis_url: str,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, bool]]:
    proxied = request.param != "direct"
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, Path(tmp_path_factory.mktemp("fair-stack")))
    try:
        yield stack.start_gateway(**GATEWAY_ENV, **({"ALMANAC_TRUSTED_PROXIES": "127.0.0.1"} if proxied else {})), proxied
    finally:
        stack.stop()


async def _attack(port: int, room: str, token: str, statuses: Counter, stop: asyncio.Event, forwarded: str) -> None:
    """One attacker connection: a move, its answer read, the next at once, until ``stop``."""
    body = json.dumps({"command": {"kind": "place_element", "row": 5, "column": 5}}).encode()
    request = (f"POST /rooms/{room}/commands HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n{forwarded}"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while not stop.is_set():
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            statuses[int(head[9:12])] += 1
    finally:
        writer.close()


async def _play(url: str, attackers: list[tuple[str, str]], player: tuple[str, str], proxied: bool) -> dict:
    port = int(url.rsplit(":", 1)[1])
    statuses: Counter = Counter()
    stop = asyncio.Event()
    forwarded = f"X-Forwarded-For: {FORWARDED['attacker']}\r\n" if proxied else ""
    flood = [asyncio.ensure_future(_attack(port, room, token, statuses, stop, forwarded)) for room, token in attackers]
    room, token = player
    # Another address: its own (direct), or the one the proxy forwards (every connection from the proxy's).
    transport = None if proxied else httpx.AsyncHTTPTransport(local_address=PLAYER_ADDRESS)
    headers = {"Authorization": f"Bearer {token}", **({"X-Forwarded-For": FORWARDED["player"]} if proxied else {})}
    sends_per_move: list[list[int]] = []
    async with httpx.AsyncClient(base_url=url, timeout=60, transport=transport, headers=headers) as http:
        try:
            for _ in range(600):  # the flood is on: the attacker is being refused
                if statuses[503] >= 200 or any(task.done() for task in flood):
                    break
                await asyncio.sleep(0.05)
            assert statuses[503] >= 200, f"the attacker was never refused: {statuses}"
            for column in range(MOVES):
                sends: list[int] = []
                for _ in range(10):
                    answer = await http.post(f"/rooms/{room}/commands",
                                             json={"command": {"kind": "place_element", "row": 1, "column": column}})
                    sends.append(answer.status_code)
                    if answer.status_code != 503:
                        break
                    assert answer.json()["code"] == "overloaded", answer.text
                    await asyncio.sleep(float(answer.headers["retry-after"]))  # as told
                sends_per_move.append(sends)
            read = await http.get(f"/rooms/{room}")
        finally:
            stop.set()
            await asyncio.gather(*flood)
    return {"sends": sends_per_move, "read": read, "attacker": statuses}


def test_a_clients_flood_cannot_keep_another_client_from_every_slot(deciding_gateway: tuple[str, bool]) -> None:
    url, proxied = deciding_gateway
    attackers = open_board_rooms(url, "attacker", ATTACKER_CONNECTIONS)
    player = open_board_rooms(url, "player", 1)[0]

    seen = asyncio.run(_play(url, attackers, player, proxied))

    # Each move was decided (200, or 422 from the rules) on the player's first send or on their first return.
    for sends in seen["sends"]:
        assert sends[-1] != 503 and len(sends) <= 2, (seen["sends"], seen["attacker"])
    assert seen["read"].status_code == 200
    # The attacker was refused for overload and otherwise served: nothing else, no 5xx but the 503s.
    attacker = seen["attacker"]
    assert set(attacker) <= {200, 422, 503} and attacker[503] >= 200, attacker
    assert attacker[200] + attacker[422] > 0, attacker
