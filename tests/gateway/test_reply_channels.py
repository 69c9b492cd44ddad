"""Each gateway process receives the outcomes of its own commands only (its reply channel), however many share
the store; an entry that names no reply channel is still answered on its command id's own channel.

Given two gateways on one store and a real engine, when 19 commands go through the first and 6 through the
second, then each gateway received exactly the outcome messages of its own commands, and none of the other's.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import redis
import redis.asyncio as aioredis
from fastapi.testclient import TestClient
from gateway_stack import gateway_settings
from outcome_bus import submit_and_wait

from almanac.bench.e2e import CHALLENGE, _script
from almanac.services.gateway import create_app
from almanac.services.room_service import CommandRecord
from almanac.storage.keys import Keys, outcome_channel, reply_channel

MOVES = asyncio.run(_script("board"))  # legal moves, in order, in every room of the challenge


def play(client: TestClient, room: str, moves: int) -> None:
    created = client.post("/rooms", json={"ruleset": "board", "player": "p", "challenge": CHALLENGE, "room": room})
    assert created.status_code == 201, created.text
    headers = {"Authorization": f"Bearer {created.json()['token']}"}
    for move in MOVES[:moves]:
        answer = client.post(f"/rooms/{room}/commands", json={"command": move}, headers=headers)
        assert answer.status_code == 200, answer.text


def test_two_gateways_each_receive_only_their_own_outcomes(stack) -> None:
    settings = gateway_settings(stack)
    listener = redis.Redis.from_url(stack.redis_url).pubsub()
    listener.psubscribe(outcome_channel("*"), reply_channel("*"))
    with TestClient(create_app(settings), raise_server_exceptions=False) as first, \
            TestClient(create_app(settings), raise_server_exceptions=False) as second:
        waiters = [client.app.state.gateway.outcomes for client in (first, second)]
        assert waiters[0].reply != waiters[1].reply
        with ThreadPoolExecutor(2) as both:  # at the same time
            list(both.map(play, (first, second), ("reply-a", "reply-b"), (17, 4)))
        # Creating a room is two commands (create, join), then the moves.
        assert [waiter.received for waiter in waiters] == [2 + 17, 2 + 4]
    published: dict[bytes, int] = {}
    while (message := listener.get_message(timeout=0.5)) is not None:
        if message["type"] == "pmessage":
            published[message["channel"]] = published.get(message["channel"], 0) + 1
    listener.close()
    # Every outcome went to its gateway's own channel, none to a command id's channel.
    assert published == {waiters[0].reply.encode(): 19, waiters[1].reply.encode(): 6}, published


async def test_an_entry_without_a_reply_channel_is_answered_on_its_command_ids_channel(stack) -> None:
    """What an earlier release's gateway, or any client of the bus contract, relies on."""
    client = aioredis.Redis.from_url(stack.redis_url)
    try:
        record = CommandRecord(command_id="bare-1", room="no-such-room", player="p", server_time_ms=1,
                               body={"kind": "join_room"})
        outcome = await submit_and_wait(client, Keys(16), record, timeout_s=10)
        assert outcome is not None and not outcome.accepted and outcome.error["code"] == "room_not_found"
    finally:
        await client.aclose()
