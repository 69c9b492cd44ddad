"""The live feeds' shared read on a real three-node Redis Cluster: one read per shard (an XREAD may not span slots),
each append reaching the followers of its room once."""

from __future__ import annotations

from live_support import SHARDS, appends_reach_each_follower_of_their_room_once

from almanac.storage.keys import Keys


async def test_appends_reach_each_follower_of_their_room_once_across_the_nodes(cluster) -> None:
    keys = Keys(SHARDS)
    rooms = [f"room-{index}" for index in range(12)]
    assert len({cluster.get_node_from_key(keys.events(room)).name for room in rooms}) == 3
    await appends_reach_each_follower_of_their_room_once(cluster, rooms)
