"""A deciding gateway (ALMANAC_ENGINE_SHARDS=all) when its engine cannot decide or cannot start.

Given the gateway app in process with its lifespan, its engine holding every shard, when the engine's consume
loop is held past a command's whole time, then the command is withdrawn unseen, goes through its shard's
command stream and is decided there once: answered at the next version (200, or 202 and its outcome URL),
one event for it, the same id again a duplicate, the log verifying. And when the engine cannot start (the
replica its durability needs is missing), the start fails and the lifespan closes what it had opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from gateway_stack import Stack, gateway_settings
from log_checks import assert_log_verifies
from test_gateway_engine import stream_entries
from waiting import wait_for

from almanac.events.step import decode_record
from almanac.services.bus import COMMAND_FIELD
from almanac.services.engine import shard_engine
from almanac.services.engine.shard_engine import GROUP, DurabilityError, Engine, NotDecidedHere
from almanac.services.gateway import create_app
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.gateway.outcomes import OutcomeWaiter
from almanac.services.room_service import RoomService
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore

KEYS = Keys(16)
TIMEOUT_MS = 500  # ALMANAC_COMMAND_TIMEOUT_MS: the whole wait of a command, decide_here's included
ADD = {"kind": "add", "amount": 1}


@contextlib.asynccontextmanager
async def deciding_gateway(redis_url: str, tmp_path: Any, room: str, **overrides: object
                           ) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """A deciding gateway's app started in this process (its lifespan), and a client of it; entered once its
    engine decides ``room``'s commands itself (the shard held and taken over)."""
    settings = gateway_settings(Stack(redis_url, tmp_path), **{"engine_shards": "all",
                                                               "command_timeout_ms": TIMEOUT_MS, **overrides})
    app = create_app(settings)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway", timeout=10) as http:
        engine: Engine = app.state.gateway.engine

        async def deciding_here() -> bool:
            return engine.decides_here(room)

        await wait_for(deciding_here, 10, "the gateway's engine to hold and take over the room's shard")
        yield app, http


def hold_the_next_batch_until_withdrawn(engine: Engine) -> asyncio.Future:
    """Hold the consume loop's next batch of commands handed in here until each was withdrawn (its time ran
    out, no batch took it), then let it run as written, once. The future: each held command as (command id,
    taken by a batch, what its waiter was answered)."""
    original = engine._decide_handed
    seen: asyncio.Future = asyncio.get_running_loop().create_future()

    async def held_past_their_time(held: list[int]) -> None:
        del engine._decide_handed  # once: the engine's own method again from the next batch
        entries = list(engine.inbox)
        await asyncio.wait([entry.future for entry in entries], timeout=TIMEOUT_MS / 1000 + 5)
        seen.set_result([(entry.record.command_id, entry.taken, _answer_of(entry.future)) for entry in entries])
        await original(held)

    engine._decide_handed = held_past_their_time  # type: ignore[method-assign]
    return seen


def _answer_of(future: asyncio.Future) -> Any:
    if not future.done():
        return "still waiting"
    if future.cancelled():
        return "cancelled"
    return future.exception() or future.result()


async def test_a_command_the_engine_does_not_take_in_time_is_decided_once_through_the_command_stream(
        redis_url, redis_client, sync_redis, tmp_path) -> None:
    """Given a deciding gateway whose engine holds every shard and a counter room created there (decided here:
    the command streams stay empty), when the engine's consume loop is held past a command's whole time,
    then the command is withdrawn (NotDecidedHere, never taken), submitted to its shard's command stream and
    decided from there at the next version, with one event; the same id again is a duplicate of it, the next
    command is decided here again, and the log verifies."""
    room = f"fallback-{secrets.token_hex(3)}"
    stream = KEYS.command_stream(KEYS.shard(room))
    async with deciding_gateway(redis_url, tmp_path, room) as (app, http):
        engine: Engine = app.state.gateway.engine
        created = await http.post("/rooms", json={"ruleset": "counter", "player": "ann", "room": room})
        assert created.status_code == 201 and created.json()["joined"], created.text
        headers = {"Authorization": f"Bearer {created.json()['token']}"}
        joined_at = created.json()["version"]
        assert stream_entries(sync_redis) == 0  # created and joined in the gateway's own process

        # When the consume loop is held past the command's whole time.
        withdrawn = hold_the_next_batch_until_withdrawn(engine)
        sent = await http.post(f"/rooms/{room}/commands", json={"command": ADD, "command_id": "late"},
                               headers=headers)
        late = internal_command_id(room, "ann", "late")
        [(command_id, taken, answered)] = await asyncio.wait_for(withdrawn, 5)
        assert (command_id, taken) == (late, False) and isinstance(answered, NotDecidedHere), answered

        # Then it went through the stream, and is answered at the next version: at once, or by its outcome URL.
        assert sent.status_code in (200, 202), sent.text
        if sent.status_code == 202:
            assert sent.json()["code"] == "outcome_pending", sent.text

            async def decided() -> httpx.Response | None:
                answer = await http.get(sent.json()["outcome_url"], headers=headers)
                return answer if answer.status_code != 404 else None

            outcome = await wait_for(decided, 5, "the withdrawn command decided from the stream")
        else:
            outcome = sent
            assert not sent.json()["duplicate"], sent.text  # its own decision, not a replay of one made here
        assert outcome.status_code == 200 and outcome.json()["version"] == joined_at + 1, outcome.text
        entries = await redis_client.xrange(stream)
        assert [decode_record(fields[COMMAND_FIELD.encode()]).command_id for _, fields in entries] == [late]
        assert stream_entries(sync_redis) == 1

        async def stream_entry_done() -> bool:  # read and acknowledged by the engine's consumer group
            return any(group["name"] == GROUP.encode() and group["pending"] == 0
                       and group["last-delivered-id"] == entries[0][0]
                       for group in await redis_client.xinfo_groups(stream))

        await wait_for(stream_entry_done, 5, "the engine to acknowledge the command's stream entry")
        assert engine.metrics.totals["duplicates"] == 0  # decided once: not here and then again from the stream

        # The same id again: the first outcome, nothing appended; the next command is decided here again.
        again = await http.post(f"/rooms/{room}/commands", json={"command": ADD, "command_id": "late"},
                                headers=headers)
        assert again.status_code == 200, again.text
        assert again.json()["duplicate"] and again.json()["version"] == joined_at + 1, again.text
        following = await http.post(f"/rooms/{room}/commands", json={"command": ADD, "command_id": "next"},
                                    headers=headers)
        assert following.status_code == 200 and following.json()["version"] == joined_at + 2, following.text
        assert stream_entries(sync_redis) == 1

    store = RedisEventStore(redis_client, 16)
    envelopes = await assert_log_verifies(store, room)
    assert [envelope.version for envelope in envelopes if envelope.command_id == late] == [joined_at + 1]
    assert len(envelopes) == joined_at + 2
    state, _ = await RoomService(store).load(room)
    assert state.game.total == 2  # each add once


def named(redis_url: str, name: str) -> str:
    """``redis_url`` whose every connection is named ``name`` (CLIENT SETNAME on connect, by redis-py)."""
    return f"{redis_url}{'&' if '?' in redis_url else '?'}client_name={name}"


async def connections_named(client: aioredis.Redis, name: str) -> int:
    return sum(1 for connection in await client.client_list() if connection.get("name") == name)


async def test_a_gateway_engine_that_cannot_start_fails_the_start_and_leaves_nothing_open(
        redis_url, redis_client, tmp_path, monkeypatch) -> None:
    """Given ALMANAC_DURABILITY=replica and a Redis without a replica, when the deciding gateway starts, then
    its start fails with DurabilityError, and the lifespan closes what it had opened by then: no connection
    of the app is left on Redis (its outcome subscription included) and none of its tasks runs on."""
    replication = await redis_client.info("replication")
    assert int(replication.get("connected_slaves", 0)) == 0, "this story needs a Redis without replicas"
    name = f"failed-start-{secrets.token_hex(4)}"
    settings = gateway_settings(Stack(named(redis_url, name), tmp_path), engine_shards="all",
                                durability="replica")
    app = create_app(settings)
    before = asyncio.all_tasks()
    opened: dict = {}
    require_replica = shard_engine.require_replica

    async def observed(client: aioredis.Redis) -> None:  # what was open when the engine checked, then the check
        await client.ping()  # the engine's own client connected too
        opened["connections"] = await connections_named(redis_client, name)
        opened["subscribers"] = (await redis_client.pubsub_numsub(app.state.gateway.outcomes.reply))[0][1]
        opened["tasks"] = asyncio.all_tasks() - before
        await require_replica(client)

    monkeypatch.setattr(shard_engine, "require_replica", observed)
    with pytest.raises(DurabilityError):
        async with app.router.lifespan_context(app):
            pytest.fail("the gateway started without the replica its durability needs")

    # The start got as far as the engine: the outcome subscription, the engine's client and their tasks open.
    assert opened["connections"] >= 2 and opened["subscribers"] == 1 and opened["tasks"], opened

    async def all_closed() -> bool:
        return await connections_named(redis_client, name) == 0

    await wait_for(all_closed, 2, f"every connection named {name} closed")
    assert (await redis_client.pubsub_numsub(app.state.gateway.outcomes.reply))[0][1] == 0

    async def no_task_left() -> bool:
        return not {task for task in asyncio.all_tasks() - before if not task.done()} - {asyncio.current_task()}

    await wait_for(no_task_left, 2, "the gateway's tasks to end")


async def test_a_gateway_whose_outcome_subscription_fails_to_start_leaves_nothing_open(
        redis_url, redis_client, tmp_path, monkeypatch) -> None:
    """Given the outcome subscription is made but never confirmed (its start times out), when the gateway
    starts, then the start fails with that timeout and the lifespan closes what it had opened: the
    subscription's reader, its connection and the gateway's client."""
    name = f"unconfirmed-{secrets.token_hex(4)}"
    app = create_app(gateway_settings(Stack(named(redis_url, name), tmp_path)))
    before = asyncio.all_tasks()
    start = OutcomeWaiter.start
    opened: dict = {}

    async def unconfirmed(waiter: OutcomeWaiter) -> None:
        await start(waiter)  # subscribed, its reader running ...
        opened["connections"] = await connections_named(redis_client, name)
        opened["tasks"] = asyncio.all_tasks() - before
        raise TimeoutError("the subscription was not confirmed in time")  # ... as its ready wait times out

    monkeypatch.setattr(OutcomeWaiter, "start", unconfirmed)
    with pytest.raises(TimeoutError):
        async with app.router.lifespan_context(app):
            pytest.fail("the gateway started without its outcome subscription")
    assert opened["connections"] >= 1 and opened["tasks"], opened

    async def all_closed() -> bool:
        return await connections_named(redis_client, name) == 0

    await wait_for(all_closed, 2, f"every connection named {name} closed")

    async def no_task_left() -> bool:
        return not {task for task in asyncio.all_tasks() - before if not task.done()} - {asyncio.current_task()}

    await wait_for(no_task_left, 2, "the gateway's tasks to end")


async def test_a_command_counted_by_the_gateways_engine_is_not_counted_again_on_its_way_through_the_stream(
        redis_url, redis_client, tmp_path) -> None:
    """Given a deciding gateway with a per-seat limit and a room it decided, when another writer leaves an
    unreadable event after it, then a command sent there is counted once by the gateway's engine (its write
    conflicts, it is counted on its own, the room fails to load) and goes through the command stream
    without being counted a second time."""
    room = f"counted-{secrets.token_hex(3)}"
    stream = KEYS.command_stream(KEYS.shard(room))
    # A whole command timeout of 5 s: the stream path's attempts end in the dead letter well within it.
    async with deciding_gateway(redis_url, tmp_path, room, rate_commands="10/minute",
                                command_timeout_ms=5_000) as (app, http):
        created = await http.post("/rooms", json={"ruleset": "counter", "player": "ann", "room": room})
        assert created.status_code == 201, created.text
        token = created.json()["token"]
        limit = app.state.gateway.rate_limits.seat_limit(room, "ann")
        version = created.json()["version"]
        await redis_client.xadd(KEYS.events(room), {"e": b"\x00not an envelope"}, id=f"{version + 1}-0")
        await redis_client.set(KEYS.version(room), version + 1)

        sent = await http.post(f"/rooms/{room}/commands", json={"command": ADD, "command_id": "after"},
                               headers={"Authorization": f"Bearer {token}"})
        # Decided from the stream: the room cannot be loaded there either, so it is set aside (dead letter).
        assert sent.status_code == 422 and sent.json()["code"] == "engine.dead_letter", sent.text
        assert await redis_client.xlen(stream) == 1  # it went through the stream
        assert int(await redis_client.get(limit.key)) == 1  # and was counted once
