"""The store contract on a real three-node Redis Cluster: the shard hash tags keep each script in one slot."""

from __future__ import annotations

import asyncio

import pytest
from game_driver import fold_envelopes
from store.test_store_contract import make_envelopes

from almanac.events.envelope import GENESIS_HASH
from almanac.events.hashing import first_broken_link
from almanac.services.redis_client import connect
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage import seat_keys
from almanac.storage.base import VersionConflict
from almanac.storage.keys import shard_of
from almanac.storage.redis_store import RedisEventStore


@pytest.fixture
async def cluster_store(cluster_url):
    client = connect(cluster_url, cluster=True)
    await client.flushall()
    yield RedisEventStore(client, shard_count=16)
    await client.aclose()


async def test_rooms_on_every_shard_append_read_and_list_on_a_cluster(cluster_store):
    rooms = [f"room-{index}" for index in range(40)]
    assert len({shard_of(room, 16) for room in rooms}) > 8
    for room in rooms:
        await cluster_store.append(room, 0, f"create-{room}", make_envelopes(room, 1, 3, GENESIS_HASH))

    assert await cluster_store.rooms() == sorted(rooms)
    for room in rooms[:5]:
        envelopes = await cluster_store.read(room)
        assert [e.version for e in envelopes] == [1, 2, 3]
        assert first_broken_link(envelopes, GENESIS_HASH) is None


async def test_a_conflict_and_a_duplicate_on_a_cluster_behave_as_on_one_server(cluster_store):
    await cluster_store.append("r1", 0, "c1", make_envelopes("r1", 1, 2, GENESIS_HASH))
    with pytest.raises(VersionConflict) as conflict:
        await cluster_store.append("r1", 0, "c2", make_envelopes("r1", 1, 1, GENESIS_HASH))
    assert conflict.value.current == 2
    again = await cluster_store.append("r1", 2, "c1", make_envelopes("r1", 3, 1, "x"))
    assert again.duplicate and await cluster_store.latest_version("r1") == 2


async def test_games_on_many_rooms_through_the_write_path_on_a_cluster(cluster_store):
    service = RoomService(cluster_store, snapshot_every=5)

    async def play(room: str) -> None:
        def record(command_id: str, body: dict) -> CommandRecord:
            return CommandRecord(command_id=f"{room}-{command_id}", room=room, player="alice",
                                 server_time_ms=1, body=body)

        await service.handle(record("create", {"kind": "create_room", "ruleset": "counter"}))
        await service.handle(record("join", {"kind": "join_room"}))
        for index in range(12):
            outcome = await service.handle(record(str(index), {"kind": "roll", "dice": 2}))
            assert outcome.accepted

    await asyncio.gather(*(play(f"game-{index}") for index in range(10)))
    for index in range(10):
        room = f"game-{index}"
        state, _ = await RoomService(cluster_store, snapshot_every=5).load(room, at_version=9)
        assert state == fold_envelopes((await cluster_store.read(room))[:9])


async def test_seat_keys_are_granted_and_opened_in_their_rooms_slot_on_a_cluster(cluster_store):
    # Given seats of rooms on every shard, one of them keyed under the first layout (a hash per room)
    client, keys = cluster_store.client, cluster_store.keys
    rooms = [f"seated-{index}" for index in range(24)]
    granted = {room: await seat_keys.grant(client, keys, room, "bob") for room in rooms}
    await client.hset(keys.first_layout_seat_keys("old"), "bob", seat_keys.digest_of("old-key").hex())
    # Then each key opens its own seat only, the first layout's too
    assert all([await seat_keys.opens(client, keys, room, "bob", granted[room]) for room in rooms])
    assert not await seat_keys.opens(client, keys, rooms[0], "bob", granted[rooms[1]])
    assert await seat_keys.opens(client, keys, "old", "bob", "old-key")
    # and a new key for the old seat (the grant's script: bucket and first layout in one slot) replaces it
    fresh = await seat_keys.grant(client, keys, "old", "bob")
    assert await seat_keys.opens(client, keys, "old", "bob", fresh)
    assert not await seat_keys.opens(client, keys, "old", "bob", "old-key")
