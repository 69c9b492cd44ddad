"""The strict input boundary over HTTP: each bad command or option of issue 11 is a 4xx that changes nothing.

Given a room, when a hostile body arrives (a huge integer, a misspelt guard, an unknown field, a
wrong-typed kind, JSON nested a thousand deep), then the answer is a 4xx JSON {code, message, field}
(``allowed`` where it helps), the room's version is unchanged and nothing was recorded, not even as
a refusal.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from almanac.events.step import decode_record
from almanac.storage.redis_store import RedisEventStore

BIG = 18446744073709551616  # 2**64: one past what a 64-bit unsigned integer holds


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture(scope="module")
def rooms(api: TestClient) -> dict:
    """A sectors colony with a kitchen and a factory at (1, 1), and a realm room of alice and bob."""
    suffix = secrets.token_hex(3)
    colony = {"setup": {"sectors": [{"row": 1, "column": 1, "type": "prairie", "population": 50,
                                     "buildings": ["kitchen", "factory"]}]}}
    sectors = api.post("/rooms", json={"ruleset": "sectors", "player": "alice", "room": f"strict-s-{suffix}",
                                       "options": colony})
    realm = api.post("/rooms", json={"ruleset": "realm", "player": "alice", "room": f"strict-r-{suffix}"})
    assert sectors.status_code == 201 and realm.status_code == 201, (sectors.text, realm.text)
    return {"sectors": sectors.json()["room"], "sectors_token": sectors.json()["token"],
            "realm": realm.json()["room"], "realm_token": realm.json()["token"]}


def version(api: TestClient, room: str) -> int:
    return api.get(f"/rooms/{room}").json()["version"]


def rejections(api: TestClient, auditor: str, room: str) -> list:
    return api.get(f"/rooms/{room}/rejections", headers=auth(auditor)).json()["rejections"]


def assert_refused(response, field: str | None = None, status: int = 422) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) >= {"code", "message"} and body["message"], body
    assert len(response.content) < 2_000, "an error never echoes a large input back"
    if field is not None:
        assert body["field"] == field, body
    return body


def test_a_misspelt_guard_is_refused_instead_of_demolishing(api: TestClient, rooms: dict, auditor: str) -> None:
    room, token = rooms["sectors"], rooms["sectors_token"]
    url, before = f"/rooms/{room}/commands", version(api, room)
    guarded = {"kind": "demolish", "row": 1, "column": 1, "position": 0}
    # The guard works when spelt right: the building at position 0 is the kitchen, not the factory.
    assert api.post(url, json={"command": {**guarded, "building": "factory"}},
                    headers=auth(token)).json()["code"] == "sectors.building_mismatch"
    misspelt = assert_refused(api.post(url, json={"command": {**guarded, "buildng": "factory"}},
                                       headers=auth(token)), field="buildng")
    assert misspelt["code"] == "invalid_command" and "building" in misspelt["allowed"]
    assert version(api, room) == before
    assert [r["error"]["code"] for r in rejections(api, auditor, room)] == ["sectors.building_mismatch"]


def test_unknown_and_huge_fields_are_refused_and_never_stored(api: TestClient, rooms: dict, auditor: str) -> None:
    room, token = rooms["realm"], rooms["realm_token"]
    url, before = f"/rooms/{room}/commands", version(api, room)
    assert_refused(api.post(url, json={"command": {"kind": "mine", "ore": "steel", "moon": "save"}},
                            headers=auth(token)), field="moon")
    junk = {"kind": "mine", "ore": "stone", "junk": "x" * 60_000}
    assert_refused(api.post(url, json={"command": junk}, headers=auth(token)), field="junk")
    long_name = {"kind": "mine", "ore": "stone", "y" * 30_000: 1}
    assert "yyyyyyyy" in assert_refused(api.post(url, json={"command": long_name}, headers=auth(token)))["field"]
    assert_refused(api.post(url, json={"command": {"kind": "mine", "ore": "s" * 5_000}}, headers=auth(token)),
                   field="ore")
    assert version(api, room) == before
    assert rejections(api, auditor, room) == []


def test_integers_beyond_64_bits_are_refused_with_their_range(api: TestClient, rooms: dict) -> None:
    room, token = rooms["sectors"], rooms["sectors_token"]
    url, before = f"/rooms/{room}/commands", version(api, room)
    for value in (BIG, -BIG, 10**30, 2**63):
        body = assert_refused(api.post(url, json={"command": {"kind": "explore", "row": value, "column": 1}},
                                       headers=auth(token)), field="row")
        assert body["code"] == "invalid_command" and body["allowed"]["min"] == 0, body
    realm = rooms["realm"]
    assert_refused(api.post(f"/rooms/{realm}/commands", json={"command": {"kind": "smelt", "ore": "stone",
                                                                          "amount": BIG}},
                            headers=auth(rooms["realm_token"])), field="amount")
    assert version(api, room) == before


def test_a_kind_that_is_not_a_string_is_refused(api: TestClient, rooms: dict) -> None:
    room, token = rooms["sectors"], rooms["sectors_token"]
    before = version(api, room)
    for kind in ([], {}, 5, None, "x" * 1_000):
        body = assert_refused(api.post(f"/rooms/{room}/commands", json={"command": {"kind": kind}},
                                       headers=auth(token)), field="kind")
        assert body["code"] == "unknown_command" and "explore" in body["allowed"], body
    assert version(api, room) == before


def test_deeply_nested_json_is_refused_before_parsing(api: TestClient, rooms: dict) -> None:
    room, token = rooms["sectors"], rooms["sectors_token"]
    before = version(api, room)
    command = b'{"command": {"kind": "explore", "row": ' + nested(1_000) + b', "column": 1}}'
    body = assert_refused(api.post(f"/rooms/{room}/commands", content=command, headers=auth(token)), status=400)
    assert body["code"] == "too_deep"
    create = b'{"ruleset": "sectors", "player": "alice", "options": {"x": ' + nested(1_000) + b"}}"
    assert assert_refused(api.post("/rooms", content=create), status=400)["code"] == "too_deep"
    # Nesting inside a string is only text: depth counts brackets outside strings.
    text = '{"command": {"kind": "explore", "row": "' + "[" * 1_000 + '", "column": 1}}'
    assert_refused(api.post(f"/rooms/{room}/commands", content=text.encode(), headers=auth(token)), field="row")
    assert version(api, room) == before


@pytest.mark.parametrize(
    ("ruleset", "options", "field"),
    [
        ("sectors", {"years": 10**30}, "options.years"),
        ("sectors", {"years": BIG}, "options.years"),
        ("sectors", {"yearz": 3}, "options.yearz"),
        ("sectors", {"setup": {"sectors": [{"row": 0, "column": 0, "type": "prairie", "populaton": 5}]}},
         "options.setup.sectors[0].populaton"),
        ("sectors", {"stock": {"food": BIG}}, "options.stock.food"),
        ("realm", {"years": 10**30}, "options.years"),
        ("realm", {"starting_stock": {"gold": BIG}}, "options.starting_stock"),
        ("realm", {"player": ["alice"]}, "options.player"),
        ("board", {"mountain_bonus": True, "extended": True}, "options.extended"),
        ("claim", {"owner": "bob", "staked_at_ms": 0}, "options.staked_at_ms"),
    ],
)
def test_bad_create_options_are_refused_and_create_nothing(api: TestClient, ruleset: str, options: dict,
                                                           field: str) -> None:
    room = f"strict-o-{secrets.token_hex(4)}"
    body = assert_refused(api.post("/rooms", json={"ruleset": ruleset, "player": "alice", "room": room,
                                                   "options": options}), field=field)
    assert body["code"] == "invalid_options", body
    assert api.get(f"/rooms/{room}").status_code == 404


def test_a_name_or_command_id_with_a_trailing_newline_is_refused(api: TestClient, rooms: dict) -> None:
    """Python's `$` matches before a final newline: "alice\\n" must not pass as a joinable name or an id."""
    room = rooms["sectors"]
    joined = api.post(f"/rooms/{room}/join", json={"player": "alice\n"})
    assert joined.status_code == 422 and joined.json()["field"] == "player", joined.text
    created = api.post("/rooms", json={"ruleset": "board", "player": "ann", "command_id": "c1\n"})
    assert created.status_code == 422 and created.json()["field"] == "command_id", created.text


def test_a_parcel_typed_with_case_and_spaces_is_accepted_and_recorded_in_its_one_spelling(api: TestClient,
                                                                                            stack) -> None:
    # Given a claim (games/claim/RULES.md: "case and spaces are forgiven" for parcel names)
    created = api.post("/rooms", json={"ruleset": "claim", "player": "alice",
                                       "room": f"strict-c-{secrets.token_hex(3)}"})
    assert created.status_code == 201, created.text
    room, token = created.json()["room"], created.json()["token"]

    # When the owner sows hay on " a8 " (the meadow: always allowed on a new claim)
    sown = api.post(f"/rooms/{room}/commands", json={"command": {"kind": "farm", "parcel": " a8 "}},
                    headers=auth(token))

    # Then it is accepted, and the log records the parcel as the rules name it
    assert sown.status_code == 200 and sown.json()["accepted"], sown.text

    async def recorded() -> list[dict]:
        client = aioredis.Redis.from_url(stack.redis_url)
        try:
            store = RedisEventStore(client, api.app.state.gateway.settings.shard_count)
            return [decode_record(data).body for _, data in await store.commands(room)]
        finally:
            await client.aclose()

    assert asyncio.run(recorded())[-1] == {"kind": "farm", "parcel": "A8"}
