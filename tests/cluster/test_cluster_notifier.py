"""The notifier and the bots on a real Redis Cluster: feeds, outbox, warnings and bot seats in their own slots."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot_gateway import bots_for, served_gateway  # noqa: E402
from suite_settings import suite_settings
from webhook_receiver import Receiver  # noqa: E402

from almanac.client import verify_webhook  # noqa: E402
from almanac.events.step import decode_record  # noqa: E402
from almanac.services.bots import add_bot, bot_join_client_id  # noqa: E402
from almanac.services.bus import internal_command_id  # noqa: E402
from almanac.services.clock import Clock  # noqa: E402
from almanac.services.notifier import Notifier, Subscription  # noqa: E402
from almanac.services.room_service import CommandRecord, RoomService  # noqa: E402
from almanac.storage.keys import Keys  # noqa: E402
from almanac.storage.redis_store import RedisEventStore  # noqa: E402

SHARDS = 16
SECRET = "cluster-receiver-secret-" + "z" * 16


def record(command_id: str, player: str, body: dict, room: str, now_ms: int) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def test_notices_and_deadline_warnings_of_rooms_on_every_node_reach_the_receiver_once(
        cluster: Any, cluster_url: str, tmp_path: Path) -> None:
    settings = suite_settings(redis_url=cluster_url, data_dir=str(tmp_path)).model_copy(
        update={"redis_cluster": True, "webhook_deadline_warning_s": 600, "shard_count": SHARDS})
    keys = Keys(SHARDS)
    store = RedisEventStore(cluster, SHARDS)
    service = RoomService(store)
    receiver = Receiver().start()
    notifier = Notifier(cluster, store, settings, keys=keys)
    try:
        # Given a deployment's subscription and ann's to the room cn-0, made before anything happens
        now = int(time.time() * 1000)
        everything = Subscription(id="wh_00000000000000c1", url=f"{receiver.url}/all", secret=SECRET,
                                  scope="deployment", created_ms=now - 1_000)
        await cluster.hset(keys.webhook_subscriptions(), everything.id, msgspec.json.encode(everything))
        ann_sub = Subscription(id="wh_00000000000000c3", url=f"{receiver.url}/ann-room", secret=SECRET,
                               scope="player", room="cn-0", player="ann", created_ms=now - 1_000)
        await cluster.hset(keys.webhook_subscriptions(), ann_sub.id, msgspec.json.encode(ann_sub))
        # and realm rooms spread over the shards (so over the three nodes), whose seasons end in 5 minutes
        rooms = [f"cn-{index}" for index in range(8)]
        assert len({keys.shard(room) for room in rooms}) >= 4
        options = {"players": ["ann", "bo"], "years": 1, "season_timeout_ms": 300_000}
        for room in rooms:
            for command_id, player, body in ((f"{room}-c", "ann", {"kind": "create_room", "ruleset": "realm",
                                                                   "options": options}),
                                             (f"{room}-ja", "ann", {"kind": "join_room"}),
                                             (f"{room}-jb", "bo", {"kind": "join_room"})):
                assert (await service.handle(record(command_id, player, body, room, now))).accepted
        # When the clock tracks the deadlines, the notifier warns, the rooms end, and it notices and delivers
        await Clock(cluster, keys, store).tick(list(range(SHARDS)))
        assert await notifier.warn_once() == len(rooms) + 1  # the deployment's, each room once; ann's of cn-0
        for room in rooms[1:]:
            assert (await service.handle(record(f"{room}-end", "ann", {"kind": "end_room", "reason": "done"}, room,
                                                now + 1))).accepted
        for _ in range(3):  # a second and third look enqueue nothing new
            await notifier.notice_once()
            await notifier.warn_once()

        def heard(got: list[dict]) -> bool:
            return len(got) >= len(rooms[1:]) + len(rooms) + 1

        for _ in range(100):
            await notifier.deliver_once()
            if heard(list(receiver.received)):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        await notifier.deliver_once()
        got = list(receiver.received)
        # Then every room's end reached the deployment's receiver once, every room's deadline too (for the room),
        # and ann heard the deadline of cn-0 addressed to her
        ends = sorted((r["path"], r["json"]["room"]) for r in got if r["json"]["kind"] == "room_ended")
        assert ends == [("/all", room) for room in rooms[1:]]
        soon = sorted((r["path"], r["json"]["room"], r["json"]["player"], r["json"]["deadline"]["key"])
                      for r in got if r["json"]["kind"] == "deadline_soon")
        assert soon == sorted([("/all", room, None, "season:0") for room in rooms] + [("/ann-room", "cn-0", "ann",
                                                                                          "season:0")])
        assert len(got) == len(ends) + len(soon)
        assert len({r["headers"]["X-Almanac-Delivery"] for r in got}) == len(got)
        assert all(verify_webhook(SECRET, r["headers"]["X-Almanac-Signature"], r["body"]) for r in got)
    finally:
        receiver.stop()
        await notifier.aclose()


async def test_a_bot_seat_on_a_cluster_sends_its_join_to_its_rooms_shard(cluster: Any, cluster_url: str) -> None:
    keys = Keys(SHARDS)
    store = RedisEventStore(cluster, SHARDS)
    service = RoomService(store)
    rooms = [f"cb-{index}" for index in range(6)]
    for room in rooms:
        assert (await service.handle(record(f"{room}-c", "ann", {"kind": "create_room", "ruleset": "board",
                                                                 "options": {"player": "robo"}}, room, 1_000))).accepted
        await add_bot(cluster, keys, room, "robo", 1_000)
    # (no engine runs: the gateway the bots play through queues each join and answers 202)
    async with served_gateway(cluster_url, REDIS_CLUSTER="true", ALMANAC_COMMAND_TIMEOUT_MS="50") as gateway:
        assert await bots_for(gateway, cluster, store, keys, key=b"test bots", rate=0).tick() == len(rooms)
    sent = []
    for shard in range(SHARDS):
        sent += [decode_record(fields[b"__data__"]) for _, fields in await cluster.xrange(keys.command_stream(shard))]
    joined = {room: internal_command_id(room, "robo", bot_join_client_id(b"test bots", room, "robo")) for room in rooms}
    assert sorted((r.room, r.command_id, r.body["kind"]) for r in sent) == sorted(
        (room, joined[room], "join_room") for room in rooms)
