"""A webhook delivery given up: GET /webhooks/dead answers it in process, checked against the OpenAPI document."""

from __future__ import annotations

import asyncio
import secrets
import time

import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from almanac.events import codec
from almanac.services.notifier import Notice, Notifier, Subscription
from almanac.storage.redis_store import RedisEventStore


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _give_up_on(api: TestClient, redis_url: str, room: str, url: str) -> None:
    """The gateway's own notifier outbox: a room_ended notice for ``url`` that refuses every attempt, delivered
    until the notifier gives up (two attempts)."""
    gw = api.app.state.gateway
    settings = gw.settings.model_copy(update={"webhook_max_attempts": 2, "webhook_backoff_max_s": 1})
    client = aioredis.Redis.from_url(redis_url)
    notifier = Notifier(client, RedisEventStore(client, settings.shard_count, gw.keys.prefix, keys=gw.keys), settings,
                        keys=gw.keys)
    try:
        [envelope] = [e for e in await notifier.store.read(room, 1, 10) if e.type == "room.ended"]
        subscription = Subscription(id=f"wh_{secrets.token_hex(8)}", url=url, secret="s" * 32, scope="deployment")
        notice = Notice(kind="room_ended", room=room, version=envelope.version, player=None)
        assert await notifier._enqueue(subscription, notice, envelope, codec.decode_event(envelope)) == 1  # noqa: SLF001
        before = await client.llen(gw.keys.webhook_dead())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and await client.llen(gw.keys.webhook_dead()) == before:
            await notifier.deliver_once()
            await asyncio.sleep(0.1)
    finally:
        await notifier.aclose()
        await client.aclose()


def test_a_delivery_given_up_is_listed_for_auditors_with_its_notice_as_typed(api: TestClient, stack,
                                                                              auditor: str) -> None:
    # Given a board room that ended, and a subscriber whose address refuses every connection
    ann = f"ann-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "board", "player": ann})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    assert api.post(f"/rooms/{room}/end", headers=auth(created.json()["token"]), json={}).status_code == 200
    # When the notifier gives up on its room_ended notice
    asyncio.run(_give_up_on(api, stack.redis_url, room, "http://127.0.0.1:9/hook"))
    # Then an auditor reads it in the dead letters, the notice whole (the event as nobody seated sees it) and no
    # secret; the answer fits its declared schema (the contract hook on `api` checks it)
    dead = api.get("/webhooks/dead", headers=auth(auditor))
    assert dead.status_code == 200, dead.text
    mine = [row for row in dead.json()["dead"] if row["payload"]["room"] == room]
    assert len(mine) == 1 and mine[0]["attempts"] == 2 and "secret" not in mine[0]
    notice = mine[0]["payload"]
    assert notice["kind"] == "room_ended" and notice["viewer"] is None and notice["event"]["type"] == "room.ended"
    # and a player may not read them
    assert api.get("/webhooks/dead", headers=auth(created.json()["token"])).status_code == 403
