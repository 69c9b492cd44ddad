"""The key scheme: one shard tag per room, shared by both sides; read-model keys stay in their shard."""

from __future__ import annotations

import zlib

from almanac.projections.keys import ModelKeys, StoreKeys, shard_of
from almanac.services.store import keys as store_keys


def test_every_key_of_a_room_carries_its_shard_tag_as_documented():
    keys = store_keys.Keys(16)
    shard = zlib.crc32(b"r1") % 16
    tag = f"{{s{shard:02d}}}"
    assert keys.shard("r1") == shard_of("r1", 16) == shard
    assert keys.events("r1") == f"alm:{tag}:room:r1:events"
    room_keys = [keys.events("r1"), keys.version("r1"), keys.commands("r1"), keys.rejected("r1"), keys.seed("r1"),
                 keys.snapshot_index("r1"), keys.snapshot_data("r1"), keys.command_outcome("r1", "c-1"),
                 keys.feed(shard), keys.rooms(shard), keys.shard_commands(shard), keys.dead_letters(shard)]
    assert all(key.startswith(f"alm:{tag}:") for key in room_keys)
    assert len(set(room_keys)) == len(room_keys)
    # The read side names the keys it reads with the very same class the write side extends.
    assert isinstance(keys, StoreKeys)


def test_every_read_model_key_of_a_shard_carries_the_shards_hash_tag():
    keys = ModelKeys()
    for key in (keys.checkpoint(7), keys.versions(7), keys.summaries(7), keys.listings(7),
                keys.model_rows(7, "claims"), keys.leaderboard(7, "board"), keys.leaderboard_rulesets(7),
                keys.model_ledger(7, "trades", "r"), keys.model_ledger_rooms(7, "trades")):
        assert key.startswith("alm:{s07}:rm:"), key
