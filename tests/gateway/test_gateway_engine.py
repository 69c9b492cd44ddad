"""A gateway that decides its own commands (ALMANAC_GATEWAY_ENGINE): no engine process, no command stream.

Given a real gateway process running an engine over every shard and a projector (no engine process), when a
player creates a room and plays over HTTP, then every command is answered from the gateway's own decision,
nothing passes through the shard command streams, the room's log verifies and the read models follow it;
the token's rate limit still refuses with 429 and appends nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from gateway_stack import Stack
from log_checks import assert_log_verifies

from almanac.services.bench.e2e import CHALLENGE, _script
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
        yield stack.start_gateway(ALMANAC_GATEWAY_ENGINE="true", ALMANAC_RATE_COMMANDS=f"{LIMIT}/minute",
                                  ALMANAC_RATE_ANON="off")
    finally:
        stack.stop()


def stream_entries(client: redis.Redis) -> int:
    return sum(client.xlen(KEYS.shard_commands(shard)) for shard in range(16))


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


def _commands_seen(redis_url: str, started: threading.Event, seen: list[str]) -> None:
    """Every command Redis runs (MONITOR) until the test's own ``ECHO monitor-done``."""
    with redis.Redis.from_url(redis_url).monitor() as monitor:
        started.set()
        for command in monitor.listen():
            if command["command"] == "ECHO monitor-done":
                return
            seen.append(command["command"])


def test_a_rooms_first_command_after_its_creation_reads_nothing_to_know_its_rules(deciding_gateway,
                                                                                 redis_url) -> None:
    """Given a room this gateway created (and a token it issued), when its first move arrives, then the gateway
    does not read the room's first event to learn its rule-set: the creation's answer told it."""
    client = redis.Redis.from_url(redis_url)
    room = f"first-contact-{uuid.uuid4().hex[:8]}"
    stream = KEYS.events(room)
    try:
        moves = asyncio.run(_script("board"))
        with httpx.Client(base_url=deciding_gateway, timeout=10) as http:
            created = http.post("/rooms", json={"ruleset": "board", "player": "ann", "challenge": CHALLENGE,
                                                "room": room})
            assert created.status_code == 201 and created.json()["joined"], created.text
            headers = {"Authorization": f"Bearer {created.json()['token']}"}
            # The projector has read the creation first, so nothing else reads the room's first event later.
            version = str(created.json()["version"]).encode()
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and client.hget(KEYS.versions(KEYS.shard(room)), room) != version:
                time.sleep(0.05)
            assert client.hget(KEYS.versions(KEYS.shard(room)), room) == version

            seen: list[str] = []
            started = threading.Event()
            watching = threading.Thread(target=_commands_seen, args=(redis_url, started, seen), daemon=True)
            watching.start()
            assert started.wait(10)
            time.sleep(0.2)  # MONITOR is on before the command is sent
            answer = http.post(f"/rooms/{room}/commands", json={"command": moves[0]}, headers=headers)
            client.echo("monitor-done")
            watching.join(10)
        assert not watching.is_alive(), "MONITOR never saw the end of the command"
        assert answer.status_code == 200, answer.text
        # MONITOR saw the command's own append to the room's stream (inside the write script) ...
        assert any(command.startswith(f"XADD {stream} ") for command in seen), seen[:20]
        # ... and not the read RoomReader.ruleset_of makes of a room it does not know: its first event alone.
        first_event_reads = [command for command in seen if command.startswith(f"XRANGE {stream} 1-0 1-0 ")]
        assert first_event_reads == [], first_event_reads
    finally:
        client.close()


def test_a_reader_remembers_a_bounded_number_of_rooms_rules_and_reads_a_forgotten_ones_again(
        redis_url, monkeypatch) -> None:
    """Given a gateway's reader that may remember two rooms' rule-sets, when a third is learnt, then the oldest
    is forgotten, and asked again it is read from the room's first event (a room with none: None)."""
    from almanac.services.gateway import room_reader  # noqa: PLC0415

    rooms = [f"bounded-{uuid.uuid4().hex[:8]}-{name}" for name in "abc"]

    async def story() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            reader = room_reader.RoomReader(RedisEventStore(client, 16))
            for room in rooms:
                reader.remember_ruleset(room, "board")
            assert await reader.ruleset_of(rooms[2]) == "board"  # remembered: its empty stream is not read
            assert await reader.ruleset_of(rooms[0]) is None  # forgotten, and nothing in its stream
        finally:
            await client.aclose()

    monkeypatch.setattr(room_reader, "RULESETS_KNOWN", 2)
    asyncio.run(story())
