"""Submit one command through the outcome bus and wait for its outcome on its own channel (tests only).

The gateway waits through one shared subscription (services/gateway/outcomes.OutcomeWaiter); this one-channel
wait is the simplest client of the bus's contract (services/bus.py): the engine publishes every outcome on
``outcome_channel(command_id)`` when the record names no reply channel.
"""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from almanac.services.bus import decode_outcome, submit
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.keys import Keys, outcome_channel


async def submit_and_wait(
    client: aioredis.Redis, keys: Keys, record: CommandRecord, timeout_s: float
) -> Outcome | None:
    """Submit a command and wait for its outcome; None when the wait timed out (check by command id)."""
    pubsub = client.pubsub()
    await pubsub.subscribe(outcome_channel(record.command_id))
    try:
        await submit(client, keys, record)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=remaining)
            if message is not None and message["type"] == "message":
                return decode_outcome(message["data"])
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()
