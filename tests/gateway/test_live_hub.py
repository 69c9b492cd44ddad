"""The live feeds' one shared read per gateway, on a real Redis: each append reaches the followers of its room once,
a follower that falls behind holds nothing (it reads the store instead), and a damaged room holds up no other."""

from __future__ import annotations

from live_support import (
    a_damaged_room_leaves_the_other_rooms_followed,
    a_follower_that_falls_behind_holds_nothing_and_reads_the_store,
    appends_reach_each_follower_of_their_room_once,
)


async def test_appends_reach_each_follower_of_their_room_once(redis_client) -> None:
    await appends_reach_each_follower_of_their_room_once(redis_client, ["room-a", "room-b", "room-c"])


async def test_a_follower_that_falls_behind_holds_nothing_and_reads_the_store(redis_client) -> None:
    await a_follower_that_falls_behind_holds_nothing_and_reads_the_store(redis_client)


async def test_a_damaged_room_leaves_the_other_rooms_followed(redis_client) -> None:
    await a_damaged_room_leaves_the_other_rooms_followed(redis_client)
