"""The archive tier on a real three-node Redis Cluster: rooms on every node move to the archive and read back whole,
and two archivers racing on each room archive it once (every script touches one room's slot); the archive index
compacts their listing rows and leaderboard entries shard by shard (one slot each) and both read the same."""

from __future__ import annotations

import asyncio

from archive_support import archiving_store, expired, file_archive_url
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.projections.read_model_queries import ReadModels
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord
from almanac.storage import archive_index
from almanac.storage.archive import archive_room

SHARDS = 16


async def test_rooms_on_every_node_archive_once_and_read_back_whole(cluster, tmp_path) -> None:
    url = file_archive_url(tmp_path)
    store = archiving_store(cluster, url, SHARDS)
    rooms = [f"cl-arch-{index}" for index in range(6)]  # spread over the shards, so over the nodes
    before = {}
    for room in rooms:
        table = RealmTable(store, room)
        await table.create("realm@1")
        await table.play_mining(1)
        assert (await table.send("alice", {"kind": "end_room"})).accepted
        before[room] = await store.read_raw(room)
    assert len({store.keys.shard(room) for room in rooms}) > 3
    await Projector(cluster, SHARDS, store=store).drain()
    models = ReadModels(cluster, SHARDS, store=store)
    listed, board = await models.rooms(), await models.leaderboard("realm")

    rivals = archiving_store(cluster, url, SHARDS)
    results = await asyncio.gather(*(archive_room(s, room) for room in rooms for s in (store, rivals)))

    for room in rooms:
        assert sorted(r.status for r in results if r.room == room) == ["already", "archived"]
        assert not await cluster.exists(store.keys.events(room))
        fresh = archiving_store(cluster, url, SHARDS)
        assert await fresh.read_raw(room) == before[room]
        assert (await verify_room(fresh, room)).ok

    assert await archive_index.compact(store, rooms) == len(rooms)
    assert await models.rooms() == listed and await models.leaderboard("realm") == board
    assert [await cluster.hexists(store.keys.listings(store.keys.shard(room)), room) for room in rooms] == [0] * 6

async def test_idle_rooms_on_every_node_move_and_come_back_once_under_racing_engines(cluster, tmp_path) -> None:
    """Idle moves and their restores (storage.restore) run one script on one room's slot: on a Cluster as on one
    server, two engines racing to bring a room back bring it back once."""
    from almanac.services.room_service import CommandRecord, RoomService  # noqa: PLC0415

    url = file_archive_url(tmp_path)
    store = archiving_store(cluster, url, SHARDS)
    rooms = [f"cl-idle-{index}" for index in range(6)]
    versions = {}
    for room in rooms:
        table = RealmTable(store, room)
        await table.create("realm@1")
        await table.play_mining(1)
        versions[room] = await store.latest_version(room)
        assert (await archive_room(store, room, reason="idle")).status == "archived"
        assert not await cluster.exists(store.keys.events(room))
    assert len({store.keys.shard(room) for room in rooms}) > 3

    engines = [RoomService(archiving_store(cluster, url, SHARDS)) for _ in range(2)]
    outcomes = await asyncio.gather(*(
        engine.handle(CommandRecord(command_id=f"{room}-{player}", room=room, player=player, server_time_ms=90_000,
                                    body={"kind": "end_turn"}))
        for room in rooms for engine, player in zip(engines, ("alice", "bob"), strict=True)))
    assert all(o.accepted for o in outcomes), [o.error for o in outcomes if not o.accepted]
    fresh = archiving_store(cluster, url, SHARDS)
    for room in rooms:
        assert await fresh.pointer(room) is None
        events = await fresh.read(room)
        assert [e.version for e in events] == list(range(1, len(events) + 1))
        assert {e.command_id for e in events[versions[room]:]} == {f"{room}-alice", f"{room}-bob"}
        assert (await verify_room(fresh, room)).ok


async def test_expired_dedupe_records_and_superseded_objects_on_the_cluster(cluster, tmp_path) -> None:
    """On every node: an acknowledged command resent after its record expired is answered from its room's id index
    (never decided twice), and a room brought back and moved again leaves only its new object."""
    url = file_archive_url(tmp_path)
    store = archiving_store(cluster, url, SHARDS)
    store.dedupe_retain_ms = 200
    rooms = [f"cl-ids-{index}" for index in range(6)]
    for room in rooms:
        table = RealmTable(store, room)
        await table.create("realm@1")
        mine = CommandRecord(command_id=f"{room}-mine", room=room, player="alice", server_time_ms=90_000,
                             body={"kind": "mine", "ore": "gold"})
        first = await table.service.handle(mine)
        await expired(cluster, store.keys.command_outcome(room, mine.command_id))
        (again,) = await table.service.handle_many([mine])
        assert (again is None or again.duplicate) and (await table.service.handle(mine)).duplicate
        assert await store.latest_version(room) == first.last_version

        old = await archive_room(store, room, reason="idle")
        await table.mine("bob")  # brings it back
        new = await archive_room(store, room, reason="idle")
        assert old.status == new.status == "archived"
        assert [p for p in await store.archive.paths() if f"/{room}/" in p] == [new.path]
        assert (await verify_room(archiving_store(cluster, url, SHARDS), room)).ok
