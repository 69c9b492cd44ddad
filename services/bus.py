"""The command bus contract between the gateway (or any client) and the engine, on Redis.

- A command is an entry of its room's shard command stream ``Keys.shard_commands(shard)`` with one
  field ``__data__`` = msgpack(CommandRecord) (FastStream reads such an entry as the raw body).
- The engine publishes the outcome as msgpack(Outcome) on the channel ``outcome_channel(command_id)``
  and the store keeps it under the command id, so a client that missed the message can ask later.
"""

from __future__ import annotations

import asyncio

import msgspec
import redis.asyncio as aioredis

from almanac.events import codec
from almanac.services.room_service import CommandRecord, Outcome
from almanac.storage.keys import Keys, outcome_channel

COMMAND_FIELD = "__data__"
_OUTCOME_DECODER = msgspec.msgpack.Decoder(Outcome)


def encode_outcome(outcome: Outcome) -> bytes:
    return codec.encode(outcome)


def decode_outcome(data: bytes) -> Outcome:
    return _OUTCOME_DECODER.decode(data)


async def submit(client: aioredis.Redis, keys: Keys, record: CommandRecord) -> bytes:
    """Put a command on its shard's command stream; returns the stream entry id."""
    return await client.xadd(keys.shard_commands(keys.shard(record.room)), {COMMAND_FIELD: codec.encode(record)})


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
