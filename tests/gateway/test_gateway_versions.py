"""Rule-set versions over HTTP: create a room of a named version or the default; a room whose version is
not installed on this node is answered 409 with the reason, never folded with other rules."""

from __future__ import annotations

import asyncio
import secrets

import redis.asyncio as aioredis
from counter_ruleset import CounterDecider
from fastapi.testclient import TestClient

from almanac.events import codec, registry
from almanac.events.manifest import RuleSet
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.redis_store import RedisEventStore


def test_a_room_is_created_at_a_named_version_or_the_default_and_rulesets_lists_the_versions(api: TestClient):
    suffix = secrets.token_hex(3)
    old = api.post("/rooms", json={"ruleset": "realm", "player": "alice", "room": f"v1-{suffix}",
                                   "options": {"players": ["alice", "bob"]}})
    new = api.post("/rooms", json={"ruleset": "realm@2", "player": "alice", "room": f"v2-{suffix}",
                                   "options": {"players": ["alice", "bob"]}})
    missing = api.post("/rooms", json={"ruleset": "realm@7", "player": "alice"})

    assert old.status_code == 201 and new.status_code == 201, (old.text, new.text)
    assert api.get(f"/rooms/v1-{suffix}").json()["ruleset_version"] == 1
    assert api.get(f"/rooms/v2-{suffix}").json()["ruleset_version"] == 2
    assert missing.status_code == 422 and missing.json()["code"] == "ruleset_not_installed"
    realm = next(r for r in api.get("/rulesets").json()["rulesets"] if r["ruleset"] == "realm")
    assert (realm["version"], realm["versions"]) == (1, ["realm@1", "realm@2"])  # the default, not the newest
    # and which listed revision of realm@1's code this node runs (its fingerprints.toml)
    assert realm["code_revision"] == len(registry.at("realm", 1).revisions)


def test_a_room_of_a_version_this_node_lacks_is_answered_409_and_changes_nothing(api: TestClient, stack):
    room = f"c2-{secrets.token_hex(3)}"
    shards = api.app.state.gateway.settings.shard_count

    async def create_under_counter_2() -> None:
        client = aioredis.Redis.from_url(stack.redis_url)
        service = RoomService(RedisEventStore(client, shards))
        for command_id, body in (("create", {"kind": "create_room", "ruleset": "counter@2"}),
                                 ("join", {"kind": "join_room"})):
            outcome = await service.handle(CommandRecord(command_id=command_id, room=room, player="alice",
                                                         server_time_ms=1_000, body=body))
            assert outcome.accepted, outcome.error
        await client.aclose()

    # Given a room created under counter@2 by a node that had it (this process, for a moment)
    registry.register(RuleSet(decider=CounterDecider(), version=2, source="counter_ruleset"))
    try:
        asyncio.run(create_under_counter_2())
    finally:
        registry.unregister("counter", 2)
        codec._event_decoders.cache_clear()  # this node now has never seen counter@2
        codec._command_type.cache_clear()
        codec._command_types_by_kind.cache_clear()
    token = api.app.state.signer.issue(room, "alice")

    # When it is read and sent a command here
    described = api.get(f"/rooms/{room}")
    sent = api.post(f"/rooms/{room}/commands", headers={"Authorization": f"Bearer {token}"},
                    json={"command": {"kind": "add", "amount": 1}})

    # Then both answers say which version is missing, and the room is untouched
    for answer in (described, sent):
        assert answer.status_code == 409, answer.text
        assert answer.json()["code"] == "ruleset_not_installed"
        assert answer.json()["message"].startswith("counter@2 is not installed on this node")
