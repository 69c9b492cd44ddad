"""Dispute bundles over HTTP: auditors fetch a trade's bundle, anyone can have one verified, bad input is a 4xx."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import msgspec
import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from almanac.events.forensics.bundle_check import verify_bundle
from almanac.services.gateway.responses import RESPONSES, BundleVerdict
from almanac.storage.export_store import ExportFileStore, import_room
from almanac.storage.redis_store import RedisEventStore

REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"


def _import_golden_realm(stack, shards: int, as_room: str) -> None:
    async def work() -> None:
        client = aioredis.Redis.from_url(stack.redis_url)
        exported = ExportFileStore.open(REALM)
        await import_room(exported, RedisEventStore(client, shards), exported.room, as_room)
        await client.aclose()

    asyncio.run(work())


def test_an_auditor_fetches_a_trade_bundle_that_verifies_and_others_are_refused(api: TestClient, stack, auditor):
    room = f"dispute-{secrets.token_hex(3)}"
    _import_golden_realm(stack, api.app.state.gateway.settings.shard_count, room)
    headers = {"Authorization": f"Bearer {auditor}"}

    bundle = api.get(f"/rooms/{room}/dispute?trade=trade-24", headers=headers)
    assert bundle.status_code == 200, bundle.text
    assert bundle.json()["subject"]["item"] == "trade-24" and verify_bundle(bundle.json()).ok
    ranged = api.get(f"/rooms/{room}/dispute?from=30&to=35", headers=headers)
    assert ranged.status_code == 200 and len(ranged.json()["events"]) == 6

    for answer, route in ((bundle, ("get", "/rooms/{room}/dispute")),):
        status, body = RESPONSES[route]
        strict = msgspec.defstruct(body.__name__, [], bases=(body,), forbid_unknown_fields=True, kw_only=True)
        msgspec.convert(answer.json(), strict)
    assert bundle.json()["room"] == "golden-realm-v1" and bundle.json()["copied_as"]["room"] == room
    # A bundle larger than the gateway's body limit is refused whole (the CLI verifies any size offline).
    assert api.post("/bundles/verify", content=bundle.content).status_code == 413

    # A small room's bundle, verified by the gateway for anyone who posts it.
    created = api.post("/rooms", json={"ruleset": "board", "player": "tess"}).json()
    token = {"Authorization": f"Bearer {created['token']}"}
    assert api.post(f"/rooms/{created['room']}/end", json={"reason": "done"}, headers=token).status_code == 200
    small = api.get(f"/rooms/{created['room']}/dispute?from=1&to=2", headers=headers)
    assert small.status_code == 200, small.text
    verdict = api.post("/bundles/verify", content=small.content)
    assert verdict.status_code == 200 and verdict.json()["ok"] and "VERIFIED" in verdict.json()["text"], verdict.text
    msgspec.convert(verdict.json(), msgspec.defstruct("V", [], bases=(BundleVerdict,), forbid_unknown_fields=True,
                                                      kw_only=True))
    forged = small.json()
    forged["chain"]["envelopes"].pop(0)
    refused = api.post("/bundles/verify", content=json.dumps(forged))
    assert refused.status_code == 200 and not refused.json()["ok"]
    assert any(s["status"] == "failed" and s["name"] == "chain" for s in refused.json()["steps"])

    player = api.app.state.signer.issue(room, "alice")
    assert api.get(f"/rooms/{room}/dispute?trade=trade-24", headers={"Authorization": f"Bearer {player}"}
                   ).status_code == 403
    for query, status, code in [("trade=nosuch", 404, "trade_not_found"), ("view=nosuch&id=x", 404,
                                "audit_view_not_found"), ("", 422, "subject_required"), ("from=3", 422,
                                "subject_required"), ("from=9&to=999", 422, "bad_range"),
                                ("trade=a&from=1&to=2", 422, "subject_required")]:
        answer = api.get(f"/rooms/{room}/dispute?{query}", headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (status, code), (query, answer.text)
    missing = api.get("/rooms/nosuch-room/dispute?trade=t", headers=headers)
    assert missing.status_code == 404 and missing.json()["code"] == "room_not_found"
    assert api.post("/bundles/verify", content=b"{not json").status_code == 422
