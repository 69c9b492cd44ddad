"""A gateway that decides its own commands (ALMANAC_ENGINE_SHARDS=all): no engine process, no command stream.

Given a real gateway process running an engine over every shard and a projector (no engine process), when a
player creates a room and plays over HTTP, then every command is answered from the gateway's own decision,
nothing passes through the shard command streams, the room's log verifies and the read models follow it;
the token's rate limit still refuses with 429 and appends nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from gateway_stack import Stack
from log_checks import assert_log_verifies

from almanac.bench.e2e import CHALLENGE, _script
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

KEYS = Keys(16)
LIMIT = 6  # commands per minute per room token


@pytest.fixture(scope="module")
def deciding_gateway(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, tmp_path_factory.mktemp("gateway-engine"))
    try:
        stack.start("projector")
        yield stack.start_gateway(ALMANAC_ENGINE_SHARDS="all", ALMANAC_RATE_COMMANDS=f"{LIMIT}/minute",
                                  ALMANAC_RATE_ANON="off")
    finally:
        stack.stop()


def stream_entries(client: redis.Redis) -> int:
    return sum(client.xlen(KEYS.command_stream(shard)) for shard in range(16))


def test_a_game_played_through_a_deciding_gateway_skips_the_command_stream(deciding_gateway, redis_url) -> None:
    client = redis.Redis.from_url(redis_url)
    moves = asyncio.run(_script("board"))
    with httpx.Client(base_url=deciding_gateway, timeout=10) as http:
        health = http.get("/health").json()
        assert health["engine"]["shards_held"] >= 16, health
        created = http.post("/rooms", json={"ruleset": "board", "player": "ann", "challenge": CHALLENGE,
                                            "room": "decided-here"})
        assert created.status_code == 201 and created.json()["joined"], created.text
        headers = {"Authorization": f"Bearer {created.json()['token']}"}
        versions = []
        for move in moves[:LIMIT]:
            answer = http.post("/rooms/decided-here/commands", json={"command": move}, headers=headers)
            assert answer.status_code == 200, answer.text
            versions.append(answer.json()["version"])
        assert versions == sorted(versions) and len(set(versions)) == LIMIT

        # The token's window is used up: refused before anything is decided, nothing appended.
        refused = http.post("/rooms/decided-here/commands", json={"command": moves[LIMIT]}, headers=headers)
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited", refused.text
        assert refused.headers.get("retry-after")

    assert stream_entries(client) == 0  # create, join and every move decided in the gateway's process
    envelopes = asyncio.run(_verified("decided-here", redis_url))
    assert envelopes[-1].version == versions[-1]  # the refused command appended nothing

    # The projector follows the shard feeds the writes append to, as with an engine process.
    with httpx.Client(base_url=deciding_gateway, timeout=10) as http:
        deadline = time.monotonic() + 15
        listed: list = []
        while time.monotonic() < deadline:
            listed = [row for row in http.get("/rooms", params={"ruleset": "board"}).json()["rooms"]
                      if row.get("room") == "decided-here"]
            if listed and listed[0].get("version") == versions[-1]:
                break
            time.sleep(0.05)
        assert listed and listed[0].get("version") == versions[-1], listed
    client.close()


async def _verified(room: str, redis_url: str) -> list:
    client = aioredis.Redis.from_url(redis_url)
    try:
        return await assert_log_verifies(RedisEventStore(client, 16), room)
    finally:
        await client.aclose()
