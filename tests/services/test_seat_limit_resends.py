"""The seat's command limit on real Redis: a decided command id sent again is answered its outcome and never counted;
an id in flight (submitted, undecided) or never decided is counted as any new one, so no id buys a free pass."""

from __future__ import annotations

import pytest

from almanac.services import bus
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord
from almanac.storage.base import CommandLimited, Counted, RejectRequest
from almanac.storage.redis_store import RedisEventStore

ROOM = "limited-room"
REFUSAL = {"code": "not_your_turn", "message": "wait", "field": None}


def command(client_id: str, player: str = "p", room: str = ROOM) -> CommandRecord:
    return CommandRecord(command_id=f"{room}:{player}:{client_id}", room=room, player=player, server_time_ms=0,
                         body={"kind": "pass"})


async def test_an_id_in_flight_is_counted_and_a_decided_one_is_answered_uncounted(redis_client) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    keys = store.keys
    limit = Counted(keys.seat_rate(ROOM, "seat-p"), 1, 60_000)
    stream = keys.command_stream(keys.shard(ROOM))
    sent = command("x")
    # Given a command submitted through the stream that used its seat's window up, still undecided (in flight)...
    await bus.submit(redis_client, keys, sent, limit)
    # ...when its id is sent again, then it is counted and refused as a new command: in flight is not decided.
    with pytest.raises(bus.RateLimited):
        await bus.submit(redis_client, keys, sent, limit)
    with pytest.raises(bus.RateLimited):
        await bus.count(redis_client, keys, ROOM, limit, command_id=sent.command_id)
    assert int(await redis_client.get(limit.key)) == 3

    # Once it is decided (its refusal recorded), the same id is answered its stored outcome: not counted, not appended.
    await store.record_rejection(ROOM, sent.command_id, REFUSAL, b"record")
    with pytest.raises(bus.AlreadyDecided) as resend:
        await bus.submit(redis_client, keys, sent, limit)
    assert (await store.kept_outcome(ROOM, resend.value.stored)).error == REFUSAL
    assert await bus.count(redis_client, keys, ROOM, limit, command_id=sent.command_id) is False
    assert int(await redis_client.get(limit.key)) == 3 and await redis_client.xlen(stream) == 1

    # The same client id from another seat names another command (ids are scoped to room and player): counted.
    with pytest.raises(bus.RateLimited):
        await bus.submit(redis_client, keys, command("x", player="q"), limit)
    assert int(await redis_client.get(limit.key)) == 4


async def test_the_ordered_write_does_not_count_a_decided_command_and_counts_a_new_one(redis_client) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    keys = store.keys
    limit = Counted(keys.seat_rate(ROOM, "seat-p"), 1, 60_000)
    decided = command("decided")
    await store.record_rejection(ROOM, decided.command_id, REFUSAL, b"record")
    await bus.count(redis_client, keys, ROOM, limit)  # the window used up
    # Given a used-up window, when a gateway's engine writes a decided command counted against it, then the write
    # answers its first outcome (a duplicate) and counts nothing...
    [again] = await store.write_ordered([RejectRequest(room=ROOM, command_id=decided.command_id, error=REFUSAL,
                                                       record=b"other", counted=limit)])
    assert not isinstance(again, Exception) and again.duplicate and again.outcome.error == REFUSAL
    assert int(await redis_client.get(limit.key)) == 1
    # ...and a new command is counted and refused, nothing written.
    fresh = command("fresh")
    [refused] = await store.write_ordered([RejectRequest(room=ROOM, command_id=fresh.command_id, error=REFUSAL,
                                                         record=b"record", counted=limit)])
    assert isinstance(refused, CommandLimited)
    assert int(await redis_client.get(limit.key)) == 2
    assert await store.outcome(ROOM, fresh.command_id) is None


async def test_one_id_twice_in_one_ordered_write_is_counted_and_written_once(redis_client) -> None:
    store = RedisEventStore(redis_client, shard_count=16)
    keys = store.keys
    limit = Counted(keys.seat_rate(ROOM, "seat-p"), 5, 60_000)
    twice = command("twice")
    # Given one new command id twice in one write, each counted: the first is counted and recorded, the second finds
    # it decided (the count's lookup serves its own write only, never the next one's): a duplicate, not counted.
    first, second = await store.write_ordered([
        RejectRequest(room=ROOM, command_id=twice.command_id, error=REFUSAL, record=b"first", counted=limit),
        RejectRequest(room=ROOM, command_id=twice.command_id, error={**REFUSAL, "code": "other"}, record=b"second",
                      counted=limit)])
    assert not isinstance(first, Exception) and not first.duplicate
    assert not isinstance(second, Exception) and second.duplicate and second.outcome.error == REFUSAL
    assert int(await redis_client.get(limit.key)) == 1
    assert await redis_client.xlen(keys.rejected(ROOM)) == 1


async def test_on_a_cluster_the_lookup_runs_in_each_rooms_slot(cluster_url) -> None:
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    store = RedisEventStore(client, shard_count=16)
    keys = store.keys
    rooms = [f"limit-room-{index}" for index in range(12)]  # shards (and slots) on all three nodes
    try:
        for room in rooms:
            # Given a seat's window used up by one command, decided, in a room on any node of a Cluster, when the
            # command is sent again, then its submit (one script, the room's slot) answers its outcome, uncounted.
            limit = Counted(keys.seat_rate(room, f"seat-{room}"), 1, 60_000)
            sent = command("x", room=room)
            await bus.submit(client, keys, sent, limit)
            await store.record_rejection(room, sent.command_id, REFUSAL, b"record")
            with pytest.raises(bus.AlreadyDecided):
                await bus.submit(client, keys, sent, limit)
            with pytest.raises(bus.RateLimited):  # a new one is refused
                await bus.submit(client, keys, command("y", room=room), limit)
            assert int(await client.get(limit.key)) == 2
        assert len({client.get_node_from_key(keys.command_stream(keys.shard(room))).name for room in rooms}) > 1
    finally:
        await client.aclose()
