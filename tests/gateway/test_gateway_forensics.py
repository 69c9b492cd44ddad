"""Forensics over HTTP through the real engine and projector: an auditor forks a realm room, players join the fork
with the normal join and play another command; the fork is marked in listings and never ranks; explain and
bisect answer auditors, and refuse bad input with 4xx JSON."""

from __future__ import annotations

import json
import secrets

import msgspec
import redis
from fastapi.testclient import TestClient
from gateway_stack import seated_realm
from store_forgery import rewrite_in_redis
from waiting import wait_until

from almanac.services.gateway.responses import RESPONSES
from almanac.storage.keys import Keys


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def typed(method: str, route: str, answer) -> dict:
    """The answer, checked against the route's declared type (unknown fields refused)."""
    status, body = RESPONSES[(method, route)]
    assert answer.status_code == status, (route, answer.text)
    strict = msgspec.defstruct(body.__name__, [], bases=(body,), forbid_unknown_fields=True, kw_only=True)
    msgspec.convert(answer.json(), strict, strict=False)
    return answer.json()


def realm_room(api: TestClient, ended: bool = True) -> tuple[str, str, str, dict[str, str]]:
    """A realm@1 room of alice-X and bob-X where alice mined three times, then ended (only an ended room may be
    forked): (room, alice, bob, tokens)."""
    room, alice, bob, tokens = seated_realm(api)
    for _ in range(3):
        mined = api.post(f"/rooms/{room}/commands", headers=auth(tokens[alice]),
                         json={"command": {"kind": "mine", "ore": "gold"}})
        assert mined.status_code == 200, mined.text
    if ended:
        assert api.post(f"/rooms/{room}/end", headers=auth(tokens[alice]), json={}).status_code == 200
    return room, alice, bob, tokens


def leaderboard_rooms(redis_url: str, shard_count: int) -> set[str]:
    client = redis.Redis.from_url(redis_url)
    keys = Keys(shard_count)
    rooms = set()
    for shard in range(shard_count):
        for member in client.zrange(keys.leaderboard(shard, "realm"), 0, -1):
            rooms.add(json.loads(member)[1])
    client.close()
    return rooms


def test_an_auditor_forks_a_room_players_join_and_play_and_the_fork_is_a_sandbox(api: TestClient, stack,
                                                                                  auditor: str) -> None:
    room, alice, bob, tokens = realm_room(api, ended=False)
    # Only auditors fork, and only a room that has ended (a live room's fork would show its players' hidden views)
    assert api.post(f"/rooms/{room}/fork", headers=auth(tokens[alice]), json={"at": 3}).status_code == 403
    live = api.post(f"/rooms/{room}/fork", headers=auth(auditor), json={"at": 3})
    assert live.status_code == 422 and live.json()["code"] == "parent_live", live.text
    assert api.post(f"/rooms/{room}/end", headers=auth(tokens[alice]), json={}).status_code == 200

    forked = api.post(f"/rooms/{room}/fork", headers=auth(auditor), json={"at": 3, "as": f"{room}-wi"})

    typed("post", "/rooms/{room}/fork", forked)
    fork = forked.json()["room"]
    assert fork == f"{room}-wi" and forked.json()["parent"] == room and forked.json()["at"] == 3
    fork_tokens = {}
    for player in (alice, bob):  # the normal join, decided by the engine process
        joined = api.post(f"/rooms/{fork}/join", json={"player": player})
        assert joined.status_code == 200, joined.text
        fork_tokens[player] = joined.json()["token"]
    cut = api.post(f"/rooms/{fork}/commands", headers=auth(fork_tokens[alice]), json={"command": {"kind": "cut_wood"}})
    assert cut.status_code == 200, cut.text

    described = typed("get", "/rooms/{room}", api.get(f"/rooms/{fork}"))
    assert described["fork"] == {"parent": room, "at": 3} and api.get(f"/rooms/{room}").json()["fork"] is None
    listing = wait_until(lambda: {r["room"]: r for r in api.get("/rooms").json()["rooms"]},
                         lambda rows: rows.get(fork, {}).get("version") == 4 and room in rows)
    assert listing[fork]["fork"] == {"parent": room, "at": 3} and listing[room]["fork"] is None
    ranked = leaderboard_rooms(stack.redis_url, api.app.state.gateway.settings.shard_count)
    assert room in ranked and fork not in ranked
    verified = api.get(f"/rooms/{fork}/verification", headers=auth(auditor)).json()
    assert verified["ok"] is True and verified["fork"]["parent"] == room, verified
    assert api.get(f"/rooms/{room}/verification", headers=auth(auditor)).json()["ok"] is True

    # The fork's charts: its series starts from the parent's state at the fork (the parent's scores), for the
    # public as for an auditor, the public one the public scores as /scores.
    public = typed("get", "/rooms/{room}/series", api.get(f"/rooms/{fork}/series"))
    assert public["versions"] == [1, 2, 3, 4] and public["resources"] == {}
    parent_at_3 = api.get(f"/rooms/{room}/at/3", headers=auth(auditor)).json()["scores"]
    audited = typed("get", "/rooms/{room}/series", api.get(f"/rooms/{fork}/series", headers=auth(auditor)))
    assert {name: series[0] for name, series in audited["scores"].items()} == parent_at_3
    assert {name: series[-1] for name, series in public["scores"].items()} == api.get(f"/rooms/{fork}/scores").json()["scores"]
    assert audited["resources"], audited


def test_forks_refuse_bad_requests_with_4xx_json(api: TestClient, auditor: str) -> None:
    room, *_ = realm_room(api)
    taken = api.post(f"/rooms/{room}/fork", headers=auth(auditor), json={"at": 2}).json()["room"]
    cases = [
        (f"/rooms/{room}/fork", {"at": 99}, 422, "version_out_of_range"),
        (f"/rooms/{room}/fork", {"at": 0}, 422, "invalid_request"),
        (f"/rooms/{room}/fork", {"at": 2, "extra": 1}, 422, "invalid_request"),
        (f"/rooms/{room}/fork", {"at": 2, "as": "bad id!"}, 422, "invalid_request"),
        (f"/rooms/{room}/fork", {"at": 2, "as": taken}, 409, "room_exists"),
        ("/rooms/nowhere-x/fork", {"at": 1}, 404, "room_not_found"),
    ]
    for url, body, status, code in cases:
        answer = api.post(url, headers=auth(auditor), json=body)
        assert answer.status_code == status and answer.json()["code"] == code, (body, answer.text)
    # A fork's history starts at its parent's version, which a bundle (checked from version 1) cannot prove:
    # its dispute bundle is refused as bisect refuses a fork, never a 500.
    bundle = api.get(f"/rooms/{taken}/dispute", params={"from": 1, "to": 1}, headers=auth(auditor))
    assert bundle.status_code == 422 and bundle.json()["code"] == "fork_not_supported", bundle.text
    assert room in bundle.json()["message"] and bundle.json()["field"] == "room"


def test_explain_and_bisect_answer_auditors_and_refuse_bad_input(api: TestClient, auditor: str) -> None:
    room, alice, _, tokens = realm_room(api)
    path = f"cities.{alice}.actions_used"  # not a real path: the refusal names what is there
    explained = api.get(f"/rooms/{room}/explain", params={"path": f"actions_used.{alice}"}, headers=auth(auditor))
    typed("get", "/rooms/{room}/explain", explained)
    assert [c["version"] for c in explained.json()["changes"]] == [4, 5, 6]  # alice's three tries
    assert [c["after"] for c in explained.json()["changes"]] == [1, 2, 3]
    unknown = api.get(f"/rooms/{room}/explain", params={"path": path}, headers=auth(auditor))
    assert unknown.status_code == 422 and unknown.json()["code"] == "path_not_found"
    assert "stock" in unknown.json()["allowed"]
    beyond = api.get(f"/rooms/{room}/explain", params={"path": "season_index", "at": 99}, headers=auth(auditor))
    assert beyond.status_code == 422 and beyond.json()["code"] == "version_out_of_range"
    assert api.get(f"/rooms/{room}/explain", params={"path": "season_index"}, headers=auth(tokens[alice])
                   ).status_code == 403

    found = api.get(f"/rooms/{room}/bisect", params={"where": f"actions_used.{alice} >= 2"}, headers=auth(auditor))
    assert typed("get", "/rooms/{room}/bisect", found)["version"] == 5
    assert found.json()["values"] == [{"path": f"actions_used.{alice}", "before": 1, "after": 2}]
    against = api.get(f"/rooms/{room}/bisect", params={"against": "realm@2"}, headers=auth(auditor))
    assert typed("get", "/rooms/{room}/bisect", against)["against"] == "realm@2"
    for params, status, code in (({"where": "season_index >> 1"}, 422, "invalid_expression"),
                                 ({"against": "realm@9"}, 404, "unknown_version"),
                                 ({}, 422, "where_or_against"),
                                 ({"where": "season_index > 1", "against": "realm@2"}, 422, "where_or_against"),
                                 ({"where": "x" * 600}, 422, None)):
        answer = api.get(f"/rooms/{room}/bisect", params=params, headers=auth(auditor))
        assert answer.status_code == status and (code is None or answer.json()["code"] == code), (params, answer.text)
    assert api.get("/rooms/nowhere-y/bisect", params={"where": "season_index > 1"},
                   headers=auth(auditor)).status_code == 404


def test_forensics_on_a_room_of_rules_this_node_lacks_answer_409(api: TestClient, stack, auditor: str) -> None:
    import asyncio  # noqa: PLC0415

    import redis.asyncio as aioredis  # noqa: PLC0415
    from counter_ruleset import CounterDecider  # noqa: PLC0415

    from almanac.events import codec, registry  # noqa: PLC0415
    from almanac.events.manifest import RuleSet  # noqa: PLC0415
    from almanac.services.room_service import CommandRecord, RoomService  # noqa: PLC0415
    from almanac.storage.redis_store import RedisEventStore  # noqa: PLC0415

    room = f"c2-{secrets.token_hex(3)}"

    async def create_under_counter_2() -> None:
        client = aioredis.Redis.from_url(stack.redis_url)
        service = RoomService(RedisEventStore(client, api.app.state.gateway.settings.shard_count))
        outcome = await service.handle(CommandRecord(command_id="create", room=room, player="alice",
                                                     server_time_ms=1_000,
                                                     body={"kind": "create_room", "ruleset": "counter@2"}))
        assert outcome.accepted, outcome.error
        await client.aclose()

    registry.register(RuleSet(decider=CounterDecider(), version=2, source="counter_ruleset"))
    try:
        asyncio.run(create_under_counter_2())
    finally:
        registry.unregister("counter", 2)
        codec._event_decoders.cache_clear()
        codec._command_type.cache_clear()
        codec._command_types_by_kind.cache_clear()

    for method, url, params in (("get", f"/rooms/{room}/explain", {"path": "total"}),
                                ("get", f"/rooms/{room}/bisect", {"where": "total > 1"}),
                                ("get", f"/rooms/{room}/bisect", {"against": "counter@1"}),
                                ("post", f"/rooms/{room}/fork", None)):
        answer = (api.get(url, params=params, headers=auth(auditor)) if method == "get"
                  else api.post(url, json={"at": 1}, headers=auth(auditor)))
        assert answer.status_code == 409 and answer.json()["code"] == "ruleset_not_installed", \
            (url, params, answer.text)


def test_an_auditor_diffs_two_rooms_over_http(api: TestClient, auditor: str) -> None:
    room, alice, bob, tokens = realm_room(api)
    other, *_ = realm_room(api)
    # Players may not; an auditor sees where the two rooms' states differ, path by path
    assert api.get(f"/rooms/{room}/diff", params={"other": other}, headers=auth(tokens[alice])).status_code == 403
    answer = api.get(f"/rooms/{room}/diff", params={"other": other, "at": 2, "at_other": 2}, headers=auth(auditor))
    assert answer.status_code == 200, answer.text
    typed("get", "/rooms/{room}/diff", answer)
    assert answer.json()["differences"], answer.json()  # other players' cities
    missing = api.get(f"/rooms/{room}/diff", params={"other": "no-such-room"}, headers=auth(auditor))
    assert missing.status_code == 404, missing.text


def _mined(envelope) -> bool:
    return envelope.type == "realm.mined"


def _one_more(event: dict) -> None:
    event["amount"] += 1


def test_a_tampered_rooms_verification_shows_both_sides_as_the_document_types_them(api: TestClient, stack,
                                                                                    auditor: str) -> None:
    shards = api.app.state.gateway.settings.shard_count
    # Given a realm room whose first mined event is altered in Redis without re-chaining (a clumsy forger)
    clumsy, *_ = realm_room(api)
    version = rewrite_in_redis(stack.redis_url, shards, clumsy, _mined, _one_more, reseal=False)
    # When an auditor verifies it, Then the chain check names the version with both hashes (strings), and the
    # answer fits its declared schema (the contract hook on `api` checks every answer against the document)
    chain = typed("get", "/rooms/{room}/verification", api.get(f"/rooms/{clumsy}/verification", headers=auth(auditor)))
    assert chain["ok"] is False and chain["divergence"]["check"] == "chain"
    assert chain["divergence"]["version"] == version
    assert all(isinstance(chain["divergence"][side], str) for side in ("recorded", "recomputed"))
    # Given another room altered the same way and re-chained (a careful forger)
    careful, *_ = realm_room(api)
    version = rewrite_in_redis(stack.redis_url, shards, careful, _mined, _one_more, reseal=True)
    # Then re-deciding its command finds it: both sides are the events as stored and as the rules decide them
    redecided = typed("get", "/rooms/{room}/verification", api.get(f"/rooms/{careful}/verification",
                                                                  headers=auth(auditor)))
    divergence = redecided["divergence"]
    assert redecided["ok"] is False and divergence["check"] == "redecide" and divergence["version"] == version
    assert divergence["recorded"]["event"]["amount"] == divergence["recomputed"]["event"]["amount"] + 1
