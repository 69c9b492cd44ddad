"""A room's first command reads nothing to know the room's rules: the token issued at creation names them.

Given rooms created through a real deciding gateway (a projector beside it, and a second gateway that decides
nothing), when a room's first move arrives at either gateway, then Redis (MONITOR) runs no read of the room's
first event for it; a token that does not name the rules makes a gateway read them once, and the reader that
remembers rooms' rules keeps a bounded number of them.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from gateway_stack import Stack, redis_commands_seen

from almanac.bench.e2e import CHALLENGE, _script
from almanac.services.gateway import room_reader
from almanac.services.gateway.auth import TokenSigner, resolve_secret
from almanac.storage.keys import Keys
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore

KEYS = Keys(16)


@pytest.fixture(scope="module")
def two_gateways(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, TokenSigner]]:
    """(a gateway deciding every shard's commands, a gateway that decides none: its commands go by the streams,
    a signer with their secret, as ``almanac token`` has it)."""
    redis.Redis.from_url(redis_url).flushdb()  # no engine or lease left by an earlier module
    data_dir = tmp_path_factory.mktemp("first-command")
    stack = Stack(redis_url, data_dir)
    try:
        stack.start("projector")
        deciding = stack.start_gateway(ALMANAC_ENGINE_SHARDS="all", ALMANAC_RATE_ANON="off")
        other = stack.start_gateway("gateway-2", ALMANAC_RATE_ANON="off")
        yield deciding, other, TokenSigner(resolve_secret(os.environ.get("ALMANAC_SECRET", ""), str(data_dir)),
                                           ttl_s=600)
    finally:
        stack.stop()


def _created_and_projected(url: str, redis_url: str) -> tuple[str, str]:
    """A new board room created through ``url`` and joined by its creator: (room, token), once the projector has
    read the creation (so nothing reads the room's first event later for it)."""
    room = f"first-{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{url}/rooms", json={"ruleset": "board", "player": "ann", "challenge": CHALLENGE,
                                               "room": room}, timeout=10)
    assert created.status_code == 201 and created.json()["joined"], created.text
    version = str(created.json()["version"]).encode()
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and client.hget(KEYS.versions(KEYS.shard(room)), room) != version:
            time.sleep(0.05)
        assert client.hget(KEYS.versions(KEYS.shard(room)), room) == version
    finally:
        client.close()
    return room, created.json()["token"]


def _move_reads(url: str, room: str, token: str, redis_url: str, move_number: int = 0) -> list[str]:
    """Play one of the room's moves through ``url``; the reads of the room's first event alone that Redis ran."""
    move = asyncio.run(_script("board"))[move_number]
    stream = KEYS.events(room)
    with redis_commands_seen(redis_url) as seen:
        answer = httpx.post(f"{url}/rooms/{room}/commands", json={"command": move},
                            headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    # MONITOR saw the command's own append to the room's stream (inside the write script) ...
    assert any(command.startswith(f"XADD {stream} ") for command in seen), seen[:20]
    # ... and what RoomReader.ruleset_of reads of a room it does not know: its first event alone.
    return [command for command in seen if command.startswith(f"XRANGE {stream} 1-0 1-0 ")]


def test_the_gateway_that_created_a_room_knows_its_rules_from_the_token_it_issued(two_gateways, redis_url) -> None:
    deciding, _, _ = two_gateways
    room, token = _created_and_projected(deciding, redis_url)
    assert _move_reads(deciding, room, token, redis_url) == []


def test_another_gateway_knows_the_rooms_rules_from_the_token_the_first_issued(two_gateways, redis_url) -> None:
    deciding, other, _ = two_gateways
    room, token = _created_and_projected(deciding, redis_url)
    assert _move_reads(other, room, token, redis_url) == []


def test_a_token_that_does_not_name_the_rules_makes_each_gateway_read_them_once(two_gateways, redis_url) -> None:
    # As ``almanac token`` makes them (and tokens issued before the claim): the room's first event says, once.
    deciding, other, signer = two_gateways
    room, _ = _created_and_projected(deciding, redis_url)
    claimless = signer.issue(room, "ann")
    assert len(_move_reads(other, room, claimless, redis_url)) == 1
    assert _move_reads(other, room, claimless, redis_url, move_number=1) == []


def test_a_reader_remembers_a_bounded_number_of_rooms_rules_and_reads_a_forgotten_ones_again(
        redis_url, monkeypatch) -> None:
    """Given a gateway's reader that may remember two rooms' rule-sets, when a third is learnt, then the oldest
    is forgotten, and asked again it is read from the room's first event (a room with none: None)."""
    rooms = [f"bounded-{uuid.uuid4().hex[:8]}-{name}" for name in "abc"]

    async def story() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            reader = room_reader.RoomReader(RoomLoader(RedisEventStore(client, 16), room_reader.READER_CACHE))
            for room in rooms:
                reader.remember_ruleset(room, "board")
            assert await reader.ruleset_of(rooms[2]) == "board"  # remembered: its empty stream is not read
            assert await reader.ruleset_of(rooms[0]) is None  # forgotten, and nothing in its stream
        finally:
            await client.aclose()

    monkeypatch.setattr(room_reader, "RULESETS_KNOWN", 2)
    asyncio.run(story())
