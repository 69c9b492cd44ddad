"""What Redis keeps of a finished archived room, whatever step the archiver's pass was cut at: given a realm room
with a trade, its seats' keys and a seat handed to a bot, and a claim room, both finished and projected, when each
move stops dead after its delete step (before the archive index compacts the room's rows: a kill -9 there) and the
next pass runs, then every key that names either room, by name or in its content, is one of the documented ones
(its pointer, its seats' key digests, the shard's feed, the players' best leaderboard entries) or expires on its
own; the archiver's work list is empty, and a pass after that finds nothing to do: Redis does not grow with
finished rooms."""

from __future__ import annotations

from archive_support import archiving_store, file_archive_url
from bot_gateway import NO_GATEWAY, bots_for
from test_archive_model_rows import answers, claim_room, keys_naming, traded_realm_room

from almanac.projections.projector import Projector
from almanac.projections.read_model_queries import ReadModels
from almanac.services import bots
from almanac.services.archiver import Archiver
from almanac.storage import seat_keys
from almanac.storage.archive import archive_room

NOW_MS = 1_700_000_000_000


async def allowed_keys(client, keys, room: str, ruleset: str) -> set[str]:
    """The documented keys an archived finished room leaves (docs/archive.md, "What stays in Redis")."""
    shard = keys.shard(room)
    return {keys.pointer_bucket(room), keys.seat_key_bucket(room), keys.feed(shard), keys.leaderboard(shard, ruleset),
            keys.leaderboard_best(shard, ruleset)}


async def expiring(client, names: set[str]) -> set[str]:
    """Those of ``names`` that Redis removes on its own (a TTL: e.g. a bot seat's removal mark)."""
    return {name for name in names if await client.pttl(name) > 0}


async def test_a_pass_cut_after_the_delete_step_leaves_only_the_documented_keys_once_the_next_pass_ran(
        redis_client, tmp_path):
    # Given a realm room with a trade whose seats hold keys and whose bob seat was handed to a bot, and a claim
    # room, both finished and projected (the bots process was down: it never saw the end)
    store = archiving_store(redis_client, file_archive_url(tmp_path))
    keys = store.keys
    realm, claim = "left-realm", "left-claim"
    await traded_realm_room(store, realm)
    await claim_room(store, claim, "alice", "North Forty")
    for player in ("alice", "bob"):
        await seat_keys.grant(redis_client, keys, realm, player)
    await seat_keys.grant(redis_client, keys, claim, "alice")
    assert await bots.add_bot(redis_client, keys, realm, "bob", NOW_MS)
    await Projector(redis_client, store.shard_count, store=store).drain()
    models = ReadModels(redis_client, store.shard_count, store=store)
    before = await answers(models, [realm, claim])

    # When each move runs through its delete step and the pass dies there, before the archive index
    for room in (realm, claim):
        assert (await archive_room(store, room)).status == "archived"
    # (the rows are still Redis': the cut this story is about)
    assert await redis_client.hexists(keys.model_rows(keys.shard(claim), "claims"), claim)

    # and the next pass of the archiver runs, and the bots process's next round
    await Archiver(store, retain_s=0).run_once()
    await bots_for(NO_GATEWAY, redis_client, store, keys, key=b"leftover test bots").tick()  # ended: no play

    # Then nothing but the documented keys names either room (or a key that expires on its own)
    for room, ruleset in ((realm, "realm"), (claim, "claim")):
        left = await keys_naming(redis_client, room)
        unexpected = left - await allowed_keys(redis_client, keys, room, ruleset)
        assert unexpected <= await expiring(redis_client, unexpected), sorted(unexpected)
    # the archiver's work list is empty, and the answers are the same
    assert not any([await redis_client.zcard(keys.ended_rooms(shard)) for shard in range(store.shard_count)])
    assert await answers(models, [realm, claim]) == before
    # and a pass after that finds nothing to do
    assert await Archiver(store, retain_s=0).run_once() == []
