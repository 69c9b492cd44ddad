"""Webhooks against a real receiver: notices of a realm game, signed, redacted per player, and nothing lost."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis
import redis.asyncio as aioredis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))

from gateway_stack import Stack  # noqa: E402
from suite_settings import suite_settings
from waiting import CLOCK_LATE_MS, DELIVERY_LATE_MS  # noqa: E402
from webhook_receiver import Receiver  # noqa: E402

from almanac.client import ApiError, Client, verify_webhook  # noqa: E402
from almanac.events import codec  # noqa: E402
from almanac.events.ruleset import Deadline  # noqa: E402
from almanac.events.testing import RoomDriver  # noqa: E402
from almanac.services.clock import pending_data  # noqa: E402
from almanac.services.gateway.auth import ANY_ROOM, ROLE_AUDITOR, TokenSigner  # noqa: E402
from almanac.services.notifier import Notice, Notifier, Subscription  # noqa: E402
from almanac.storage.keys import Keys  # noqa: E402
from almanac.storage.redis_store import RedisEventStore  # noqa: E402

SECRET = "webhook-test-secret-" + "x" * 32
HOOK_SECRET = "receiver-shared-secret-" + "y" * 16
HIDDEN = {"hidden": True}
# The window is wide enough that a notifier killed -9 after the first warning and started again (a Python start under
# the suite's load) still warns before the deadline: the season times out after SEASON_S.
WARNING_S = 15
SEASON_S = 20


@pytest.fixture(scope="module")
def live(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Client, Stack]]:
    """Engine, notifier and gateway processes; an auditor's client (the game's own service)."""
    redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(redis_url, tmp_path_factory.mktemp("webhooks"))
    stack.env["ALMANAC_SECRET"] = SECRET
    # deadline_soon within WARNING_S of a deadline: a room with a SEASON_S season hears it; realm's default 5 minutes does not
    stack.env["ALMANAC_WEBHOOK_DEADLINE_WARNING_S"] = str(WARNING_S)
    try:
        stack.start("engine")
        stack.start("notifier")
        stack.wait_ready()
        url = stack.start_gateway()
        with Client(url, token=TokenSigner(SECRET, 3600).issue(ANY_ROOM, "auditor", ROLE_AUDITOR)) as service:
            yield url, service, stack
    finally:
        stack.stop()


def subscribe(service: Client, url: str, **body: Any) -> dict[str, Any]:
    return service.request("POST", "/webhooks", json_body={"url": url, "secret": HOOK_SECRET, **body})


def a_realm_season(url: str, room: str) -> tuple[Client, Any, Any]:
    """Alice and bob in a realm room: alice's merchant reaches bob, she offers a trade, both end the season, bob
    ends the room."""
    client = Client(url)
    alice = client.create_room("realm", "alice", room=room, options={"players": ["alice", "bob"]})
    bob = client.join(room, "bob")
    sent = alice.command({"kind": "send_merchant", "to": "bob", "load": {"food": 1000}})
    trade = next(e["event"]["trade_id"] for e in sent.events if e["type"] == "realm.merchant_sent")
    alice.command({"kind": "offer_trade", "trade_id": trade, "buy": "wood"})
    for seat in (alice, bob):
        try:
            seat.command({"kind": "end_turn"})
        except ApiError as refused:
            assert refused.code == "realm.turn_already_ended", refused
    bob.end("the test is over")
    return client, alice, bob


def test_each_subscriber_hears_its_notices_signed_and_only_what_it_may_see(live: tuple[str, Client, Stack]) -> None:
    url, service, _ = live
    receiver = Receiver().start()
    try:
        # Given the game's service subscribed for the whole deployment, for the room, and for each player
        everyone = subscribe(service, f"{receiver.url}/all")
        subscribe(service, f"{receiver.url}/room", scope="room", room="hook-realm")
        subscribe(service, f"{receiver.url}/bob", scope="player", room="hook-realm", player="bob")
        subscribe(service, f"{receiver.url}/alice", scope="player", room="hook-realm", player="alice",
                  kinds=["trade_offered", "room_ended"])
        assert everyone["secret"] == HOOK_SECRET and "secret" not in service.request("GET", "/webhooks")["subscriptions"][0]

        # When alice offers bob a trade, the season ends, and bob ends the room
        client, alice, bob = a_realm_season(url, "hook-realm")

        # Then each receiver hears its notices: bob the offer made to him, alice not (it is not hers), everyone
        # the new season (your turn) and the end
        def kinds(got: list[dict[str, Any]], path: str) -> list[str]:
            return [r["json"]["kind"] for r in got if r["path"] == path]

        got = receiver.wait_for(lambda got: len(kinds(got, "/all")) >= 3 and len(kinds(got, "/bob")) >= 3
                                and len(kinds(got, "/alice")) >= 1 and len(kinds(got, "/room")) >= 3)
        time.sleep(1.0)  # anything extra would arrive now
        got = list(receiver.received)
        assert sorted(kinds(got, "/all")) == ["room_ended", "trade_offered", "your_turn"]
        assert sorted(kinds(got, "/room")) == ["room_ended", "trade_offered", "your_turn"]
        assert sorted(kinds(got, "/bob")) == ["room_ended", "trade_offered", "your_turn"]
        assert kinds(got, "/alice") == ["room_ended"]  # her filter, and the offer is bob's news
        # each signed with the subscription's secret over its exact body, under its delivery id
        for delivery in got:
            assert verify_webhook(HOOK_SECRET, delivery["headers"]["X-Almanac-Signature"], delivery["body"])
            assert not verify_webhook("another-secret" * 3, delivery["headers"]["X-Almanac-Signature"], delivery["body"])
            assert delivery["headers"]["X-Almanac-Delivery"] == delivery["json"]["delivery_id"]
        assert len({d["json"]["delivery_id"] for d in got}) == len(got)

        # and no one hears what they may not see: bob's offer is the event as bob's own feed shows it (alice's
        # holdings hidden), the deployment's as nobody seated sees it (both sides' holdings hidden)
        offer_to_bob = next(d["json"] for d in got if d["path"] == "/bob" and d["json"]["kind"] == "trade_offered")
        offer_to_all = next(d["json"] for d in got if d["path"] == "/all" and d["json"]["kind"] == "trade_offered")
        version = offer_to_bob["version"]
        bobs_feed = next(e for e in bob.events()["events"] if e["version"] == version)
        assert offer_to_bob["event"] == bobs_feed
        assert offer_to_bob["event"]["event"]["home_after"] == HIDDEN
        assert offer_to_bob["event"]["event"]["host_after"] != HIDDEN
        assert offer_to_all["event"]["event"]["home_after"] == HIDDEN
        assert offer_to_all["event"]["event"]["host_after"] == HIDDEN
        client.close()
    finally:
        receiver.stop()


def test_a_receiver_down_for_a_while_gets_everything_once_the_notifier_killed_meanwhile(
        live: tuple[str, Client, Stack]) -> None:
    url, service, stack = live
    # Given a receiver that is down (its port refuses connections), subscribed to one room
    receiver = Receiver()
    subscribe(service, f"{receiver.url}/down", scope="room", room="hook-down")
    # When a season passes and the room ends meanwhile, and the notifier is killed -9 and started again
    client, _, _ = a_realm_season(url, "hook-down")
    time.sleep(1.5)  # a few failed attempts
    os.kill(stack.processes["notifier"].pid, signal.SIGKILL)
    stack.processes["notifier"].wait(10)
    stack.start("notifier")
    # and the receiver comes back, first answering 503 twice
    receiver.failing = 2
    receiver.start()
    try:
        # Then every notice arrives; a delivery seen twice is the same delivery (same id, same body)
        got = receiver.wait_for(lambda got: {r["json"]["kind"] for r in got} >= {"your_turn", "trade_offered",
                                                                                  "room_ended"}, timeout_s=40)
        time.sleep(1.0)
        got = list(receiver.received)
        by_id: dict[str, bytes] = {}
        for delivery in got:
            ident = delivery["json"]["delivery_id"]
            assert by_id.setdefault(ident, delivery["body"]) == delivery["body"]
        # one delivery per notice: never the same notice under two ids
        assert len(by_id) == len({(d["json"]["kind"], d["json"]["version"]) for d in got})
        assert sorted(d["json"]["kind"] for d in {d["json"]["delivery_id"]: d for d in got}.values()) == \
            ["room_ended", "trade_offered", "your_turn"]
        stats = service.request("GET", "/webhooks/stats")
        assert stats["failed_attempts"] >= 2 and stats["latency_ms"]["samples"] >= 3
        client.close()
    finally:
        receiver.stop()


def test_a_subscription_is_an_auditors_and_bad_ones_are_refused(live: tuple[str, Client, Stack]) -> None:
    url, service, _ = live
    with Client(url) as stranger:
        seat = stranger.create_room("board", "eve", room="hook-eve")
        # A player's token cannot subscribe (a player could point the server at any address)
        with pytest.raises(ApiError) as refused:
            stranger.request("POST", "/webhooks", token=seat.token, json_body={"url": "http://127.0.0.1:1/x"})
        assert refused.value.status == 403
    for body, code in (({"url": "ftp://example.org/x"}, "invalid_url"),
                       ({"url": "http://example.org/x", "kinds": ["gossip"]}, "unknown_kind"),
                       ({"url": "http://example.org/x", "scope": "player", "room": "r"}, "player_required"),
                       ({"url": "http://example.org/x", "sneaky": 1}, "invalid_request")):
        with pytest.raises(ApiError) as refused:
            service.request("POST", "/webhooks", json_body=body)
        assert (refused.value.status, refused.value.code) == (422, code)


def an_envelope() -> tuple[Any, Any]:
    """A stored room.ended envelope (through the one room step) and its event."""
    room = RoomDriver("hook-dead")
    room.apply("ann", {"kind": "create_room", "ruleset": "board"})
    room.apply("ann", {"kind": "join_room"})
    [envelope] = room.send("ann", {"kind": "end_room", "reason": "over"})
    return envelope, codec.decode_event(envelope)


async def test_a_delivery_that_keeps_failing_goes_to_the_dead_letters(redis_url: str, tmp_path: Path) -> None:
    """The notifier's outbox on a real Redis and a real receiver that answers 503 to everything."""
    client = aioredis.Redis.from_url(redis_url)
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path)).model_copy(
        update={"webhook_max_attempts": 3, "webhook_backoff_max_s": 1})
    receiver = Receiver().start()
    receiver.failing = 10**6
    # Keys of its own: the module's notifier process shares this Redis and must not take these deliveries
    keys = Keys(settings.shard_count, "alm-dead-letter-test")
    notifier = Notifier(client, RedisEventStore(client, settings.shard_count, keys.prefix, keys=keys), settings,
                        keys=keys)
    try:
        subscription = Subscription(id="wh_00000000000000aa", url=receiver.url, secret=HOOK_SECRET, scope="deployment")
        envelope, event = an_envelope()
        notice = Notice(kind="room_ended", room=envelope.room, version=envelope.version, player=None)
        assert await notifier._enqueue(subscription, notice, envelope, event) == 1  # noqa: SLF001
        assert await notifier._enqueue(subscription, notice, envelope, event) == 0  # noqa: SLF001 - once per id
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not await client.llen(notifier.keys.webhook_dead()):
            await notifier.deliver_once()
            await asyncio.sleep(0.1)
        dead = await client.lrange(notifier.keys.webhook_dead(), 0, -1)
        assert len(dead) == 1 and b"HTTP 503" in dead[0] and HOOK_SECRET.encode() not in dead[0]
        assert await client.zcard(notifier.keys.webhook_outbox()) == 0
        counters = await client.hgetall(notifier.keys.webhook_stats())
        assert int(counters[b"dead"]) == 1 and int(counters[b"failed_attempts"]) == 3
    finally:
        receiver.stop()
        await notifier.aclose()
        await client.aclose()


def test_a_deadline_is_heard_once_before_the_season_ends_by_itself_even_across_a_notifier_restart(
        live: tuple[str, Client, Stack]) -> None:
    url, service, stack = live
    receiver = Receiver().start()
    try:
        # Given alice's and bob's subscriptions to a realm room whose seasons time out after SEASON_S, bob's for his
        # turn only, and carol's to a room of her own with realm's default 5 minutes
        subscribe(service, f"{receiver.url}/alice", scope="player", room="hook-soon", player="alice")
        subscribe(service, f"{receiver.url}/bob", scope="player", room="hook-soon", player="bob", kinds=["your_turn"])
        subscribe(service, f"{receiver.url}/carol", scope="player", room="hook-carol", player="carol")
        client = Client(url)
        carol = client.create_room("realm", "carol", room="hook-carol", options={"players": ["carol", "dan"]})
        alice = client.create_room("realm", "alice", room="hook-soon",
                                   options={"players": ["alice", "bob"], "season_timeout_ms": SEASON_S * 1000})
        client.join("hook-soon", "bob")
        created_ms = time.time() * 1000

        # When nobody plays: alice hears the deadline once it is within the warning window
        got = receiver.wait_for(lambda got: any(r["path"] == "/alice" for r in got), timeout_s=20)
        soon = got[0]
        assert soon["json"]["kind"] == "deadline_soon"
        deadline = soon["json"]["deadline"]
        assert deadline["key"] == "season:0" and set(soon["json"]) >= {"room", "ruleset", "delivery_id"}
        assert soon["json"]["room"] == "hook-soon" and soon["json"]["ruleset"] == "realm"
        assert created_ms + (SEASON_S - 5) * 1000 <= deadline["due_ms"] <= created_ms + SEASON_S * 1000 + 500  # the season began at creation
        assert soon["at"] * 1000 < deadline["due_ms"]  # heard before the season ends
        assert soon["at"] * 1000 >= deadline["due_ms"] - WARNING_S * 1000 - 500  # not before the window
        # only the deadline's key and due time: nothing of the command the clock will send, nor of any city
        assert soon["json"]["deadline"] == {"key": "season:0", "due_ms": deadline["due_ms"]}
        assert "event" not in soon["json"]

        # and the notifier is killed -9 and started again while the deadline is still ahead
        os.kill(stack.processes["notifier"].pid, signal.SIGKILL)
        stack.processes["notifier"].wait(10)
        stack.start("notifier")
        # (a subscription made now proves the new notifier warns before the deadline: it hears it, once)
        subscribe(service, f"{receiver.url}/late", scope="room", room="hook-soon", kinds=["deadline_soon"])
        late = receiver.wait_for(lambda got: any(r["path"] == "/late" for r in got), timeout_s=20)
        assert next(r for r in late if r["path"] == "/late")["at"] * 1000 < deadline["due_ms"]

        # Then the season ends by itself (the clock), on time: not before the deadline's due time and within
        # CLOCK_LATE_MS after it, and alice hears her turn after the warning, within DELIVERY_LATE_MS of the season's
        # end (each the measured lateness of its hop, with room to spare: tests/waiting.py)
        turn = receiver.wait_for(lambda got: any(r["path"] == "/alice" and r["json"]["kind"] == "your_turn"
                                                 for r in got), timeout_s=30)
        ended = next(e for e in service.events("hook-soon")["events"]
                     if e["type"] == "realm.season_ended" and e["event"]["season_index"] == 0)
        clock_late_ms = ended["event"]["at_ms"] - deadline["due_ms"]
        assert 0 <= clock_late_ms <= CLOCK_LATE_MS, (clock_late_ms, ended)
        heard_ms = next(r["at"] for r in turn if r["path"] == "/alice" and r["json"]["kind"] == "your_turn") * 1000
        assert heard_ms - ended["event"]["at_ms"] <= DELIVERY_LATE_MS, (heard_ms, ended)
        alice.end("the test is over")
        receiver.wait_for(lambda got: any(r["path"] == "/alice" and r["json"]["kind"] == "room_ended" for r in got))
        time.sleep(1.0)  # anything extra would arrive now
        got = list(receiver.received)
        alices = [r["json"] for r in got if r["path"] == "/alice"]
        warned = [n for n in alices if n["kind"] == "deadline_soon" and n["deadline"]["key"] == "season:0"]
        assert len(warned) == 1, warned  # not again after the restart, under no other id
        assert [n["kind"] for n in alices].index("your_turn") > alices.index(warned[0])
        assert [r["json"]["kind"] for r in got if r["path"] == "/late"] == ["deadline_soon"]
        # bob asked for his turn only; carol's room has no deadline within the window: neither hears a warning
        assert [r["json"]["kind"] for r in got if r["path"] == "/bob"] == ["your_turn"]
        assert [r for r in got if r["path"] == "/carol"] == []
        for delivery in got:
            assert verify_webhook(HOOK_SECRET, delivery["headers"]["X-Almanac-Signature"], delivery["body"])
        carol.end("the test is over")
        client.close()
    finally:
        receiver.stop()


async def test_two_notifiers_and_a_third_after_them_warn_of_a_deadline_once(redis_url: str, tmp_path: Path) -> None:
    """The clock's pending deadlines as the clock writes them, on a real Redis; notifiers with keys of their own."""
    client = aioredis.Redis.from_url(redis_url)
    settings = suite_settings(redis_url=redis_url, data_dir=str(tmp_path)).model_copy(
        update={"webhook_deadline_warning_s": 60})
    keys = Keys(settings.shard_count, "alm-warn-test")
    store = RedisEventStore(client, settings.shard_count, keys.prefix, keys=keys)
    notifiers = [Notifier(client, store, settings, keys=keys) for _ in range(4)]
    try:
        subscription = Subscription(id="wh_00000000000000bb", url="http://127.0.0.1:1/x", secret=HOOK_SECRET,
                                    scope="room", room="warn-room")
        await client.hset(keys.webhook_subscriptions(), subscription.id, msgspec.json.encode(subscription))
        now = int(time.time() * 1000)
        shard = 0
        # Given a deadline 30 s ahead in the room the subscription follows, one past due and one 2 minutes ahead
        for room, due in (("warn-room", now + 30_000), ("warn-past", now - 1_000), ("warn-far", now + 120_000)):
            deadline = Deadline(key="season:3", due_ms=due, player="ann", command={"kind": "end_season"})
            await client.hset(keys.deadline_commands(shard), room, pending_data(deadline))
            await client.zadd(keys.deadlines(shard), {room: due})
        # When two notifiers look at once, and a third (a restart) after them
        first = await asyncio.gather(notifiers[0].warn_once(), notifiers[1].warn_once())
        third = await notifiers[2].warn_once()
        # Then one delivery is enqueued in all, for the room within the window
        assert sorted(first) == [0, 1] and third == 0
        assert await client.zcard(keys.webhook_outbox()) == 1
        [record] = [json.loads(v) for v in (await client.hgetall(keys.webhook_deliveries())).values()]
        assert record["payload"]["deadline"] == {"key": "season:3", "due_ms": now + 30_000}
        assert record["payload"]["room"] == "warn-room" and "end_season" not in str(record)
        # and once it is delivered (gone from the outbox) a notifier still does not enqueue it again
        await client.delete(keys.webhook_outbox(), keys.webhook_deliveries())
        assert await notifiers[3].warn_once() == 0
    finally:
        for notifier in notifiers:
            await notifier.aclose()
        await client.aclose()


class RoundTrips(aioredis.Redis):
    """A real client that counts its round trips to Redis: a command, or a pipeline's execute."""

    round_trips = 0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.round_trips += 1
        return await super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute

        async def counted(raise_on_error: bool = True) -> Any:
            self.round_trips += 1
            return await execute(raise_on_error)

        pipe.execute = counted  # type: ignore[method-assign]
        return pipe


async def test_a_read_of_several_feeds_is_one_round_trip_and_its_cursors_ride_on_the_next(tmp_path: Path) -> None:
    """Given feed entries on three shards and a notifier with no subscriber, when it reads them, then the read is ONE
    round trip (the read and the subscriptions' load, after it), not three (read, load, cursor write: bench e2e's
    notifier, a round trip costing ~40 us of CPU on this machine); and the three moved cursors are written by the
    next read's round trip, in one command, or by ``flush_cursors`` as the notifier stops: each then stands at its
    shard's last entry. (Noticing those entries again after a crash would enqueue nothing: nothing was enqueued.)"""
    from almanac.services.embedded_redis import EmbeddedRedis  # noqa: PLC0415

    with EmbeddedRedis(tmp_path / "redis", persist=False) as server:  # its own: the call counts are the server's
        client = RoundTrips.from_url(server.url)
        settings = suite_settings(redis_url=server.url, data_dir=str(tmp_path))
        keys = Keys(settings.shard_count)
        notifier = Notifier(client, RedisEventStore(client, settings.shard_count, keys=keys), settings, keys=keys)
        try:
            await notifier.notice_once()  # its cursors loaded: nothing appended yet
            last = {shard: await client.xadd(keys.feed(shard), {"r": f"room-{shard}", "v": 1, "l": 1})
                    for shard in (1, 5, 9)}
            await client.config_resetstat()
            client.round_trips = 0
            await notifier.notice_once()
            assert client.round_trips == 1
            assert [await client.get(keys.notifier_cursor(shard)) for shard in last] == [None] * 3
            client.round_trips = 0
            await notifier.notice_once()  # nothing new
            assert client.round_trips == 1
            calls = {name.removeprefix("cmdstat_"): stats["calls"]
                     for name, stats in (await client.info("commandstats")).items()}
            assert calls.get("hgetall") == 2 and calls.get("xread") == 2
            assert calls.get("set", 0) == 0 and calls.get("mset", 0) == 1
            assert {shard: await client.get(keys.notifier_cursor(shard)) for shard in last} == last
            # and a read's cursors not yet written are written as the notifier stops
            again = await client.xadd(keys.feed(5), {"r": "room-5", "v": 2, "l": 2})
            await notifier.notice_once()
            await notifier.flush_cursors()
            assert await client.get(keys.notifier_cursor(5)) == again
        finally:
            await notifier.aclose()
            await client.aclose()


async def _feed_reads_under_a_trickle(tmp_path: Path) -> tuple[int, float]:
    """Given a running notifier (no subscription) and a room's feed entry appended every 5 ms, 200 of them, when the
    appends end and its cursor stands at the last entry: (the feed reads it made, the seconds the trickle took)."""
    from almanac.services.embedded_redis import EmbeddedRedis  # noqa: PLC0415

    with EmbeddedRedis(tmp_path / "redis", persist=False) as server:  # its own: the call counts are the server's
        client = aioredis.Redis.from_url(server.url)
        settings = suite_settings(redis_url=server.url, data_dir=str(tmp_path))
        keys = Keys(settings.shard_count)
        notifier = Notifier(client, RedisEventStore(client, settings.shard_count, keys=keys), settings, keys=keys)
        stop = asyncio.Event()
        running = asyncio.create_task(notifier.run(stop))
        try:
            await asyncio.sleep(0.3)  # its cursors read, its first read waiting
            await client.config_resetstat()
            started = time.monotonic()
            for version in range(1, 201):
                last = await client.xadd(keys.feed(3), {"r": "trickle", "v": version, "l": version})
                await asyncio.sleep(0.005)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and await client.get(keys.notifier_cursor(3)) != last:
                await asyncio.sleep(0.05)
            assert await client.get(keys.notifier_cursor(3)) == last
            # Against the time the trickle really took (a loaded machine stretches the 5 ms sleeps).
            return (await client.info("commandstats"))["cmdstat_xread"]["calls"], time.monotonic() - started
        finally:
            stop.set()
            await running
            await notifier.aclose()
            await client.aclose()


async def test_a_notifier_under_a_steady_trickle_of_appends_reads_its_feeds_a_few_times_a_second(tmp_path: Path) -> None:
    """Given a trickle of 200 appends, then the notifier read the feeds about once per gather wait
    (NOTICE_GATHER_S) at most, not once per entry (each read three round trips: bench e2e's notifier cost 10-20% of
    the stack), and its cursor stands at the last entry."""
    from almanac.services.notifier import NOTICE_GATHER_S  # noqa: PLC0415

    reads, took = await _feed_reads_under_a_trickle(tmp_path)
    assert reads <= 3 * took / NOTICE_GATHER_S + 5 and reads < 200 / 4, (reads, took)


async def test_a_notifier_with_no_subscription_reads_a_trickle_of_appends_about_twice_a_second(tmp_path: Path) -> None:
    """Given a trickle of 200 appends and no subscription, then the notifier read the feeds about once per idle
    gather wait (NOTICE_IDLE_GATHER_S: there is nothing to enqueue, only cursors to move; bench e2e runs with no
    subscriber), not once per NOTICE_GATHER_S, and its cursor stands at the last entry."""
    from almanac.services.notifier import NOTICE_IDLE_GATHER_S  # noqa: PLC0415

    reads, took = await _feed_reads_under_a_trickle(tmp_path)
    assert reads <= 1.5 * took / NOTICE_IDLE_GATHER_S + 3, (reads, took)


