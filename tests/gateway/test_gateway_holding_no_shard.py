"""A gateway that holds no shard (ALMANAC_ENGINE_SHARDS=none) in front of an `almanac engine` process: a layout.

Every gateway runs the same shard engine; what a layout changes is only which shards a process holds. Given a real
gateway process holding none beside a real engine process holding all, when a player creates a room and plays over
HTTP, then every command goes through its shard's command stream and is decided by the engine process: the
leases all name it, the gateway's engine has no heartbeat (it counts as no engine in /health), and the room's log
verifies. And when the engine process stops, the gateway still takes no lease: a command waits in the stream (202)
for whoever will hold its shard, and is decided once an engine process runs again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest
import redis
from gateway_stack import Stack, engine_and_gateway
from test_gateway_engine import _verified, stream_entries

from almanac.bench.e2e import CHALLENGE, _script
from almanac.storage.keys import engine_heartbeat_key, engines_key, lease_key

SHARDS = 16
LEASE_MS = 1_000  # short, so that leases the engine process gave back would be seen taken by the gateway soon


@pytest.fixture(scope="module")
def holding_none(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Stack]]:
    """An engine process holding every shard, then a gateway holding none (gateway_stack's default)."""
    data_dir = tmp_path_factory.mktemp("holding-no-shard")
    with engine_and_gateway(redis_url, data_dir, ALMANAC_LEASE_MS=str(LEASE_MS), ALMANAC_COMMAND_TIMEOUT_MS="1500",
                            ALMANAC_RATE_ANON="off") as (url, stack):
        yield url, stack


def lease_holders(client: redis.Redis) -> set[str]:
    """The engine names the shard leases name now (a lease's token is ``name|pid|nonce``); "" for a free shard."""
    return {(value or b"").decode().split("|")[0] for value in client.mget([lease_key(s) for s in range(SHARDS)])}


def heartbeats(client: redis.Redis) -> list[str]:
    return sorted(json.loads(beat)["name"] for name in client.smembers(engines_key())
                  if (beat := client.get(engine_heartbeat_key(name.decode()))))


def test_an_engine_process_decides_the_commands_of_a_gateway_that_holds_no_shard(holding_none, redis_url) -> None:
    url, _ = holding_none
    client = redis.Redis.from_url(redis_url)
    moves = asyncio.run(_script("board"))
    # Given the engine process holding every lease, and the gateway's engine none
    (engine,) = lease_holders(client)
    assert engine and ":gateway-" not in engine, engine
    assert heartbeats(client) == [engine]  # the gateway's own engine beats nowhere: it is no engine to /health
    with httpx.Client(base_url=url, timeout=10) as http:
        health = http.get("/health").json()
        assert [beat["name"] for beat in health["engine"]["engines"]] == [engine], health
        # When a player creates a room and plays through the gateway
        created = http.post("/rooms", json={"ruleset": "board", "player": "ann", "challenge": CHALLENGE,
                                            "room": "decided-there"})
        assert created.status_code == 201 and created.json()["joined"], created.text
        headers = {"Authorization": f"Bearer {created.json()['token']}"}
        versions = []
        for move in moves[:4]:
            answer = http.post("/rooms/decided-there/commands", json={"command": move}, headers=headers)
            assert answer.status_code == 200, answer.text
            versions.append(answer.json()["version"])
    # Then each was decided in turn by the engine process, through the command streams (create, join, 4 moves)
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert stream_entries(client) >= 6
    assert asyncio.run(_verified("decided-there", redis_url))[-1].version == versions[-1]
    # and the engine process still holds every lease: the gateway took none meanwhile
    assert lease_holders(client) == {engine}
    client.close()


def test_a_gateway_that_holds_no_shard_takes_no_lease_even_when_no_engine_holds_one(holding_none, redis_url) -> None:
    url, stack = holding_none
    client = redis.Redis.from_url(redis_url)
    with httpx.Client(base_url=url, timeout=10) as http:
        created = http.post("/rooms", json={"ruleset": "board", "player": "bo", "challenge": CHALLENGE,
                                            "room": "waits-for-an-engine"})
        assert created.status_code == 201, created.text
        headers = {"Authorization": f"Bearer {created.json()['token']}"}
        move = asyncio.run(_script("board"))[0]
        # Given the engine process stopped (its leases given back) and several lease periods gone by
        stack.processes["engine"].terminate()
        stack.processes["engine"].wait(30)
        time.sleep(3 * LEASE_MS / 1000)
        # Then no shard is held: the gateway's engine took none of the free leases
        assert lease_holders(client) == {""}
        # and a command through the gateway waits in its shard's stream, accepted (202), not decided here
        waiting = http.post("/rooms/waits-for-an-engine/commands", json={"command": move}, headers=headers)
        assert waiting.status_code == 202, waiting.text
        assert lease_holders(client) == {""}
        # When an engine process runs again, then it takes the shards and decides the command waiting
        stack.start("engine")
        stack.wait_ready()
        outcome_url = waiting.json()["outcome_url"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            outcome = http.get(outcome_url, headers=headers)
            if outcome.status_code == 200:
                break
            time.sleep(0.1)
        assert outcome.status_code == 200 and outcome.json()["version"] >= 2, outcome.text
    client.close()
