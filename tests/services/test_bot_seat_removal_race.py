"""A removed bot seat stays removed while a bots round that read it before (the bound's sync, a create's settling)
writes it back: each side is paused between its steps (the worst interleavings, made certain instead of likely)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis.asyncio as aioredis
from engine_test_support import KEYS

from almanac.services.bots import (
    RESERVATION_GRACE_MS,
    SeatRefused,
    add_bot,
    bot_seats,
    bound_count,
    remove_bot,
    reserve_seats,
    settle_pending,
    sync_bound,
)
from almanac.services.gateway.gateway import internal_command_id
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.keys import bot_seats_key
from almanac.storage.redis_store import RedisEventStore

NOW = 7_000_000


class Paused:
    """The real client, with one call paused: ``name`` on ``key`` waits for ``go`` before it is sent (``after``
    False) or once it has landed (``after`` True), saying so with ``reached``. Every other call goes straight to
    Redis: nothing is faked, only the order of two real sequences is fixed."""

    def __init__(self, client: aioredis.Redis, name: str, key: str, *, after: bool) -> None:
        self.client, self.name, self.key, self.after = client, name, key, after
        self.reached, self.go = asyncio.Event(), asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.client, name)
        if name != self.name:
            return call

        async def paused(key: str, *args: Any, **kwargs: Any) -> Any:
            if key != self.key:
                return await call(key, *args, **kwargs)
            if not self.after:
                self.reached.set()
                await self.go.wait()
            answer = await call(key, *args, **kwargs)
            if self.after:
                self.reached.set()
                await self.go.wait()
            return answer

        return paused


async def played(client: aioredis.Redis) -> list[tuple[str, str]]:
    return await bot_seats(client, KEYS, range(KEYS.shard_count))


async def test_a_removal_between_the_syncs_two_reads_never_hands_the_seat_back_to_its_bot(
        redis_client: aioredis.Redis) -> None:
    # Given bob's seat of "handed", which the room's log gave a bot: played, and counted as the log's
    await add_bot(redis_client, KEYS, "handed", "bob", NOW, log=True)
    assert await played(redis_client) == [("handed", "bob")]
    # When the operator removes it, and its removal is paused once the seat has left its shard's hash (before its
    # place in the bound is given back)
    remover = Paused(redis_client, "hdel", KEYS.bots(KEYS.shard("handed")), after=True)
    removal = asyncio.create_task(remove_bot(remover, KEYS, "handed", "bob"))
    await asyncio.wait_for(remover.reached.wait(), 10)
    # and a bots round matches the bound to the shards meanwhile: it reads the shards without the seat, and the
    # bound with it, marked as the log's (which the sync completes by writing it to its shard's hash)
    await sync_bound(redis_client, KEYS, now_ms=NOW + 1)
    # and then the removal finishes
    remover.go.set()
    assert await asyncio.wait_for(removal, 10)
    # Then no bot plays the seat, and the bound does not count it
    assert await played(redis_client) == []
    assert await bound_count(redis_client, KEYS) == 0
    # and the next round does not count it back either
    await sync_bound(redis_client, KEYS, now_ms=NOW + 2)
    assert await played(redis_client) == [] and await bound_count(redis_client, KEYS) == 0


async def test_a_removal_between_the_syncs_two_reads_leaves_no_place_taken_in_the_bound(
        redis_client: aioredis.Redis) -> None:
    # Given bob's seat of "asked" handed to a bot on a caller's ask, in a deployment of at most 1 bot seat
    assert await add_bot(redis_client, KEYS, "asked", "bob", NOW, max_seats=1)
    # When a bots round reads the shards' hashes (the seat there) and is paused before it reads the bound
    syncer = Paused(redis_client, "hgetall", bot_seats_key(KEYS.prefix), after=False)
    sync = asyncio.create_task(sync_bound(syncer, KEYS, now_ms=NOW + 1))
    await asyncio.wait_for(syncer.reached.wait(), 10)
    # and the operator removes the seat entirely meanwhile
    assert await remove_bot(redis_client, KEYS, "asked", "bob")
    # and then the round goes on: it finds the seat in a shard's hash it read, and not in the bound
    syncer.go.set()
    await asyncio.wait_for(sync, 10)
    # Then the seat is not taken again in the bound (no place leaks for the grace), and no bot plays it
    assert await bound_count(redis_client, KEYS) == 0
    assert await played(redis_client) == []
    assert await reserve_seats(redis_client, KEYS, [("another", "bob")], NOW, max_seats=1) == [("another", "bob")]


async def test_a_seat_removed_is_handed_again_by_a_later_ask_and_its_mark_expires(
        redis_client: aioredis.Redis) -> None:
    # Given bob's seat of "again" handed to a bot, then removed
    await add_bot(redis_client, KEYS, "again", "bob", NOW, max_seats=1)
    assert await remove_bot(redis_client, KEYS, "again", "bob")
    # Then the removal's mark lasts the grace at most (Redis expires it: nothing to prune by hand)
    marks = [key async for key in redis_client.scan_iter(match=f"{KEYS.prefix}:{{bots}}:removed:*")]
    assert len(marks) == 1 and 0 < await redis_client.pttl(marks[0]) <= RESERVATION_GRACE_MS
    # When a caller asks for the seat again, it is handed, played and counted, and a sync round keeps it so
    assert await add_bot(redis_client, KEYS, "again", "bob", NOW + 5, max_seats=1)
    assert await sync_bound(redis_client, KEYS, now_ms=NOW + 10) == (0, 0)
    assert await played(redis_client) == [("again", "bob")]
    assert await bound_count(redis_client, KEYS) == 1
    try:
        await add_bot(redis_client, KEYS, "other", "bob", NOW + 5, max_seats=1)
        raise AssertionError("a seat past the bound was handed")
    except SeatRefused as refused:
        assert refused.code == "bot_seats_full"


async def test_a_removal_while_a_recorded_create_is_settled_never_hands_the_seat_back(
        redis_client: aioredis.Redis) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    # Given a create of "settled" with a bot for bob, answered 202, then recorded by the engine
    create = CommandRecord(command_id=internal_command_id("settled", "alice", "c1"), room="settled", player="alice",
                           server_time_ms=NOW, body={"kind": "create_room", "ruleset": "realm",
                                                     "options": {"players": ["alice", "bob"]}})
    await reserve_seats(redis_client, KEYS, [("settled", "bob")], NOW, max_seats=1, command=create.command_id)
    assert (await RoomService(store).handle(create)).accepted
    # When a bots round settles it (it read the seat awaiting the create) and is paused before it writes the seat to
    # its shard's hash
    settler = Paused(redis_client, "hsetnx", KEYS.bots(KEYS.shard("settled")), after=False)
    settling = asyncio.create_task(settle_pending(settler, store, KEYS, NOW + 1))
    await asyncio.wait_for(settler.reached.wait(), 10)
    # and the operator removes the seat meanwhile, before the round goes on
    await remove_bot(redis_client, KEYS, "settled", "bob")
    settler.go.set()
    await asyncio.wait_for(settling, 10)
    # Then no bot plays the seat, and neither the bound nor the next sync round counts it
    assert await played(redis_client) == [] and await bound_count(redis_client, KEYS) == 0
    await sync_bound(redis_client, KEYS, now_ms=NOW + 2)
    assert await played(redis_client) == [] and await bound_count(redis_client, KEYS) == 0


async def test_a_removed_seat_a_stalled_writer_put_back_is_taken_out_by_the_next_sync(
        redis_client: aioredis.Redis) -> None:
    # Given bob's seat of "stalled" handed to a bot, then removed
    await add_bot(redis_client, KEYS, "stalled", "bob", NOW, max_seats=1)
    assert await remove_bot(redis_client, KEYS, "stalled", "bob")
    # and a writer that read the seat before the removal writes it back to its shard's hash, and stalls before it
    # looks at the removal's mark
    await redis_client.hset(KEYS.bots(KEYS.shard("stalled")), "stalled\x1fbob",
                            json.dumps({"room": "stalled", "seat": "bob", "added_ms": NOW}))
    # When the next bots round matches the bound to the shards
    await sync_bound(redis_client, KEYS, now_ms=NOW + 1)
    # Then the seat is taken out of its shard's hash, not counted in the bound
    assert await played(redis_client) == [] and await bound_count(redis_client, KEYS) == 0
