"""The read side's copy of the store's key names agrees with services/store/keys.py."""

from __future__ import annotations

from projections.keys import ModelKeys, StoreKeys, shard_of
from services.store import keys as store_keys


def test_the_projections_read_the_same_keys_the_store_writes():
    for shard_count in (1, 4, 16):
        ours, theirs = StoreKeys(shard_count, "alm"), store_keys.Keys(shard_count, "alm")
        for room in ("r1", "room-1", "ünïcode", "a:b{c}", ""):
            assert shard_of(room, shard_count) == store_keys.shard_of(room, shard_count)
            for name in ("events", "version", "snapshot_index", "snapshot_data"):
                assert getattr(ours, name)(room) == getattr(theirs, name)(room), name
        for shard in range(shard_count):
            assert ours.feed(shard) == theirs.feed(shard)
            assert ours.rooms(shard) == theirs.rooms(shard)


def test_every_read_model_key_of_a_shard_carries_the_shards_hash_tag():
    keys = ModelKeys()
    for key in (keys.checkpoint(7), keys.versions(7), keys.summaries(7), keys.listings(7), keys.claims(7),
                keys.leaderboard(7, "board"), keys.leaderboard_rulesets(7), keys.trades(7, "r"), keys.trade_rooms(7)):
        assert key.startswith("alm:{s07}:rm:"), key
