"""deadline_soon is per player: a deadline warns the players it waits for (realm: the cities that have not ended
their turn), each player's subscription addressed to its player; a room's subscription hears it once for the room."""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec
import redis.asyncio as aioredis
from suite_settings import suite_settings

from almanac.events.ruleset import Deadline
from almanac.events.testing import RoomDriver
from almanac.services.clock import earliest, pending_data, pending_deadline
from almanac.services.notifier import Notifier, Subscription
from almanac.storage.keys import Keys
from almanac.storage.redis_store import RedisEventStore


def test_a_realm_season_waits_for_the_cities_that_have_not_ended_their_turn() -> None:
    room = RoomDriver("concerns")
    room.send("ann", {"kind": "create_room", "ruleset": "realm",
                      "options": {"players": ["ann", "ben", "cy"], "season_timeout_ms": 60_000}})
    for player in ("ann", "ben", "cy"):
        room.send(player, {"kind": "join_room"})
    assert earliest(room.state).concerns == ("ann", "ben", "cy")
    room.send("ben", {"kind": "end_turn"})
    deadline = earliest(room.state)
    assert deadline.concerns == ("ann", "cy")
    # as the clock keeps it, and as a deadline kept before ``concerns`` existed still reads (every seat)
    assert pending_deadline(pending_data(deadline)) == deadline
    old = msgspec.msgpack.encode([deadline.key, deadline.due_ms, deadline.player, deadline.command])
    assert pending_deadline(old).concerns is None


async def test_a_deadline_warns_the_players_it_waits_for_and_the_room_once(redis_url: str, tmp_path: Path) -> None:
    client = aioredis.Redis.from_url(redis_url)
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path)).model_copy(
        update={"webhook_deadline_warning_s": 60})
    keys = Keys(settings.shard_count, "alm-concerns-test")  # apart from any notifier process on this Redis
    notifier = Notifier(client, RedisEventStore(client, settings.shard_count, keys.prefix, keys=keys), settings,
                        keys=keys)
    try:
        # Given subscriptions of ann, ben and the room, and a season 30 s from its end that waits for ann only
        for ident, scope, player in (("wh_0000000000000a01", "player", "ann"), ("wh_0000000000000a02", "player", "ben"),
                                     ("wh_0000000000000a03", "room", None)):
            subscription = Subscription(id=ident, url="http://127.0.0.1:1/x", secret="s" * 32, scope=scope,
                                        room="season-room", player=player)
            await client.hset(keys.webhook_subscriptions(), ident, msgspec.json.encode(subscription))
        due = int(time.time() * 1000) + 30_000
        deadline = Deadline(key="season:2", due_ms=due, player="ann", command={"kind": "end_season"},
                            concerns=("ann",))
        await client.hset(keys.deadline_commands(0), "season-room", pending_data(deadline))
        await client.zadd(keys.deadlines(0), {"season-room": due})
        # When the notifier looks
        assert await notifier.warn_once() == 2
        # Then ann hears it, addressed to her, and the room once; ben, who ended his turn, hears nothing
        payloads = [json.loads(v)["payload"] for v in (await client.hgetall(keys.webhook_deliveries())).values()]
        heard = sorted((p["subscription"], p["player"]) for p in payloads)
        assert heard == [("wh_0000000000000a01", "ann"), ("wh_0000000000000a03", None)]
        assert all(p["deadline"] == {"key": "season:2", "due_ms": due} for p in payloads)
    finally:
        await notifier.aclose()
        await client.aclose()
