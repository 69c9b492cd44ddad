"""Rule-set read-model rows of finished archived rooms leave Redis: given a realm room with a trade (realm's trades
ledger) and a claim room (claim's registry row), both finished, and a claim room still played, when the archiver
moves the finished ones out, then no key of Redis names them but their pointers, seat keys, the shard's feed and a
player's best leaderboard entry, while every read-model answer (each room's rows, every room's, filtered) is the
same; a crash at any step leaves the rows answering from one place, and a rebuild of the models answers the same."""

from __future__ import annotations

import hashlib

import msgspec
import pytest
import zstandard
from archive_support import archiving_store, file_archive_url
from forensics_support import RealmTable

from almanac.projections.projector import Projector
from almanac.projections.read_model_queries import ReadModels
from almanac.projections.rebuild import rebuild
from almanac.services.archiver import Archiver
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage import archive_index
from almanac.storage.archive import ArchiveError, archive_room


async def traded_realm_room(store, room: str) -> None:
    """bob mines, alice's merchant trades with bob, she ends the room (as tests/gateway' traded_room)."""
    table = RealmTable(store, room)
    created = await table.send("alice", {"kind": "create_room", "ruleset": "realm@1",
                                         "options": {"players": ["alice", "bob"]}})
    assert created.accepted, created.error
    await table.join(room)
    for player, body in [("bob", {"kind": "mine", "ore": "gold"}),
                         ("alice", {"kind": "send_merchant", "to": "bob", "load": {"food": 6000, "gold": 2000}})]:
        outcome = await table.send(player, body)
        assert outcome.accepted, outcome.error
    trade = f"trade-{outcome.first_version}"
    for player, body in [("alice", {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1}),
                         ("bob", {"kind": "counter_offer", "trade_id": trade, "want": "gold"}),
                         ("alice", {"kind": "agree_trade", "trade_id": trade}),
                         ("bob", {"kind": "agree_trade", "trade_id": trade}),
                         ("alice", {"kind": "end_room"})]:
        outcome = await table.send(player, body)
        assert outcome.accepted, outcome.error


async def claim_room(store, room: str, owner: str, block: str, ended: bool = True) -> None:
    service = RoomService(store)
    for step, (player, body) in enumerate([(owner, {"kind": "create_room", "ruleset": "claim",
                                                    "options": {"block": block}}),
                                           (owner, {"kind": "join_room"}),
                                           *([(owner, {"kind": "end_room"})] if ended else [])]):
        outcome = await service.handle(CommandRecord(command_id=f"{room}-c{step}", room=room, player=player,
                                                     server_time_ms=1_000 + step, body=body))
        assert outcome.accepted, outcome.error


async def answers(models: ReadModels, rooms: list[str]) -> dict:
    """Every read-model answer the gateway's /read-models/{model} gives for these rooms."""
    found = {}
    for model in ("trades", "claims"):
        found[model] = await models.rows(model)
        for room in rooms:
            found[(model, room)] = await models.rows(model, room)
    found["alice's claims"] = await models.rows("claims", where={"owner": "alice"})
    found["trade rows"] = await models.rows("trades", where={"trade": found["trades"][0]["trade"]})
    return found


async def keys_naming(client, room: str) -> set[str]:
    """Every key whose name or uncompressed content names ``room`` (the whole keyspace, scanned)."""
    named = set()
    needle = room.encode()
    async for key in client.scan_iter(count=1000):
        kind = (await client.type(key)).decode()
        if kind == "hash":
            content = [part for pair in (await client.hgetall(key)).items() for part in pair]
        elif kind == "zset":
            content = await client.zrange(key, 0, -1)
        elif kind == "set":
            content = list(await client.smembers(key))
        elif kind == "string":
            content = [await client.get(key)]
        elif kind == "stream":
            content = [part for _, fields in await client.xrange(key) for pair in fields.items() for part in pair]
        else:
            content = []
        if needle in key or any(needle in part for part in content):
            named.add(key.decode())
    return named


async def played(redis_client, tmp_path):
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    realm, claim = "rm-realm", "rm-claim"
    # the live claim room on the claim room's shard: one compaction batch may hold both
    live = next(name for name in (f"rm-live-{n}" for n in range(1000)) if store.keys.shard(name) == store.keys.shard(claim))
    await traded_realm_room(store, realm)
    await claim_room(store, claim, "alice", "North Forty")
    await claim_room(store, live, "bob", "Creek", ended=False)
    await Projector(redis_client, store.shard_count, store=store).drain()
    return store, realm, claim, live


async def test_read_model_rows_of_finished_archived_rooms_leave_redis_and_answer_the_same(redis_client, tmp_path):
    # Given a realm room with a trade and a claim room, finished and projected, and a claim room still played
    store, realm, claim, live = await played(redis_client, tmp_path)
    keys = store.keys
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models, [realm, claim, live])
    assert before[("trades", realm)] and before[("claims", claim)] and before[("claims", live)]
    assert [row["room"] for row in before["claims"]] == [claim, live]

    # When the archiver makes its pass
    results = await Archiver(store, retain_s=0).run_once()

    # Then both are archived, and every answer is the same, read by a reader that never saw them live too
    assert sorted(r.room for r in results if r.status == "archived") == [claim, realm]
    assert await answers(models, [realm, claim, live]) == before
    fresh = ReadModels(redis_client, store.shard_count, store=archiving_store(redis_client, file_archive_url(tmp_path)))
    assert await answers(fresh, [realm, claim, live]) == before
    # and no read-model key of theirs is left: what names them is their pointer, their seats' key digests, the
    # shard's feed (trimmed by retention, not per room) and the players' best leaderboard entries (final scores: docs/archive.md); the rows are in the archive index's compressed blocks
    for room in (realm, claim):
        shard = keys.shard(room)
        ruleset = "realm" if room == realm else "claim"
        allowed = {keys.pointer_bucket(room), keys.seat_key_bucket(room), keys.feed(shard),
                   keys.leaderboard(shard, ruleset), keys.leaderboard_best(shard, ruleset)}
        left = await keys_naming(redis_client, room)
        assert left <= allowed, sorted(left - allowed)
        assert not any(":rm:model:" in key for key in left)
    assert await redis_client.hexists(keys.model_rows(keys.shard(live), "claims"), live)  # the live room keeps its row
    assert await redis_client.hlen(keys.archived_model_rows(keys.shard(claim), "claims")) == 1
    assert await redis_client.hlen(keys.archived_model_rows(keys.shard(realm), "trades")) == 1

    # A rebuild of the rule-sets' models alone writes the archived rooms' rows again (folded from the archive) and
    # puts them back on the archiver's list: the same answers, and its next pass compacts them again
    await rebuild(redis_client, store.shard_count, ["trades", "claims"], store=store)
    assert await answers(models, [realm, claim, live]) == before
    assert await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    await Archiver(store, retain_s=0).run_once()
    assert await answers(models, [realm, claim, live]) == before
    assert not await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert not await redis_client.exists(keys.model_ledger(keys.shard(realm), "trades", realm))
    # A full rebuild likewise (its old blocks go with it: a changed model is never shadowed by an old block)
    await rebuild(redis_client, store.shard_count, store=store)
    assert await answers(models, [realm, claim, live]) == before
    await Archiver(store, retain_s=0).run_once()
    assert await answers(models, [realm, claim, live]) == before
    assert not any(":rm:model:" in key for key in await keys_naming(redis_client, claim))
    assert not any(":rm:model:" in key for key in await keys_naming(redis_client, realm))


async def test_a_move_cut_short_at_any_step_leaves_the_rows_answering_from_one_place(redis_client, tmp_path):
    # Given the same rooms, projected
    store, realm, claim, live = await played(redis_client, tmp_path)
    keys = store.keys
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models, [realm, claim, live])

    # When the move stops after its commit point (the pointer), and again after its delete step, before the index
    for room in (realm, claim):
        assert (await archive_room(store, room, crash_after="pointed")).status == "crashed"
    assert await answers(models, [realm, claim, live]) == before
    for room in (realm, claim):
        assert (await archive_room(store, room)).status == "already"
    # Then the rows are still Redis' alone (no block yet), answering the same
    assert await answers(models, [realm, claim, live]) == before
    assert await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert not await redis_client.exists(keys.archived_model_rows(keys.shard(claim), "claims"))

    # A compaction whose batch holds a room that is not archived does nothing at all (all or nothing): the archived
    # room's rows stay in Redis too, never half in a block
    assert await archive_index.compact_models(store, keys.shard(claim), [claim, live]) == 0
    assert await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert not await redis_client.exists(keys.archived_model_rows(keys.shard(claim), "claims"))
    assert await answers(models, [realm, claim, live]) == before

    # When the index compacts them: the block holds the rows in the same script that removes them from Redis
    assert await archive_index.compact(store, [realm, claim]) == 2
    assert await answers(models, [realm, claim, live]) == before
    assert not await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert await redis_client.hlen(keys.archived_model_rows(keys.shard(claim), "claims")) == 1
    # and compacting again finds nothing left to move
    assert await archive_index.compact_models(store, keys.shard(claim), [claim]) == 0
    assert await answers(models, [realm, claim, live]) == before


async def test_a_model_block_lives_in_the_archive_store_and_redis_keeps_only_its_digest(redis_client, tmp_path):
    # Given the rooms, projected and archived (the move alone: their rows still in Redis)
    store, realm, claim, live = await played(redis_client, tmp_path)
    keys = store.keys
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models, [realm, claim, live])
    for room in (realm, claim):
        assert (await archive_room(store, room)).status == "archived"

    # When the archive index compacts their rows
    assert await archive_index.compact(store, [realm, claim]) == 2

    # Then each model's block is an object of the archive store, and Redis keeps a reference of 71 bytes to it
    for room, model in ((realm, "trades"), (claim, "claims")):
        [value] = await redis_client.hvals(keys.archived_model_rows(keys.shard(room), model))
        assert value.startswith(archive_index.BLOCK_REF) and len(value) == 71, value
        digest = value[len(archive_index.BLOCK_REF):].decode()
        assert (tmp_path / archive_index.block_path(model, digest)).is_file()
    # and every answer is the same, also for a reader process that never fetched a block
    assert await answers(models, [realm, claim, live]) == before
    archive_index._OBJECT_BLOCKS.clear()
    archive_index._cached[0] = 0
    fresh = ReadModels(redis_client, store.shard_count, store=archiving_store(redis_client, file_archive_url(tmp_path)))
    assert await answers(fresh, [realm, claim, live]) == before


async def test_rows_leave_redis_only_once_their_block_was_written_and_read_back(redis_client, tmp_path, monkeypatch):
    # Given the rooms, projected and archived, their rows still in Redis
    store, realm, claim, live = await played(redis_client, tmp_path)
    keys = store.keys
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models, [realm, claim, live])
    for room in (realm, claim):
        assert (await archive_room(store, room)).status == "archived"

    # When the process dies after writing a block object, before the script that points at it and drops the rows
    async def killed(*_args, **_kwargs):
        raise ConnectionError("killed before the script ran")

    monkeypatch.setattr(store, "_compact_models", killed, raising=False)  # the script, as the pass calls it
    with pytest.raises(ConnectionError):
        await archive_index.compact_models(store, keys.shard(claim), [claim])
    monkeypatch.undo()
    # Then the object is there, unnamed by Redis, and the rows are Redis' alone, answering the same
    assert list((tmp_path / "blocks" / "claims").iterdir())
    assert not await redis_client.exists(keys.archived_model_rows(keys.shard(claim), "claims"))
    assert await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert await answers(models, [realm, claim, live]) == before

    # When the archive holds other bytes under a block's name (a torn or tampered write) and a pass compacts again
    found = await archive_index._model_rows_in_redis(redis_client, keys, keys.shard(realm), "trades", True, [realm])
    block = zstandard.ZstdCompressor(level=archive_index.ZSTD_LEVEL).compress(
        msgspec.msgpack.encode(dict(sorted(found.items()))))
    torn = tmp_path / archive_index.block_path("trades", hashlib.sha256(block).hexdigest())
    torn.parent.mkdir(parents=True, exist_ok=True)
    torn.write_bytes(block[: len(block) // 2])
    with pytest.raises(ArchiveError):
        await archive_index.compact_models(store, keys.shard(realm), [realm])
    # Then the read-back refuses it before Redis points at it: the ledger stays in Redis
    assert await redis_client.exists(keys.model_ledger(keys.shard(realm), "trades", realm))
    assert not await redis_client.exists(keys.archived_model_rows(keys.shard(realm), "trades"))
    assert await answers(models, [realm, claim, live]) == before

    # When the object is whole again, the next pass completes both moves (the claim's object written again: the same)
    torn.write_bytes(block)
    assert await archive_index.compact(store, [realm, claim]) == 2
    assert not await redis_client.exists(keys.model_ledger(keys.shard(realm), "trades", realm))
    assert not await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)
    assert await answers(models, [realm, claim, live]) == before
