"""Rate limits live in Redis: two gateways on one store share them, per client address on the routes without a
token and per seat on commands; a refusal is 429 rate_limited with Retry-After and changes nothing."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings

from almanac.services.gateway import create_app

ELEMENT = {"kind": "place_element", "row": 5, "column": 5}


@pytest.fixture(scope="module")
def two_gateways(stack: Stack) -> Iterator[tuple[TestClient, TestClient]]:
    settings = gateway_settings(stack, rate_anon="3/minute", rate_commands="4 per minute")
    with TestClient(create_app(settings), raise_server_exceptions=False) as first, \
            TestClient(create_app(settings), raise_server_exceptions=False) as second:
        yield first, second


def assert_limited(response) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["code"] == "rate_limited" and response.json()["message"]
    assert 0 < int(response.headers["Retry-After"]) <= 60


def test_the_anonymous_limit_is_per_address_and_shared_by_two_gateways(two_gateways) -> None:
    first, second = two_gateways
    tag = secrets.token_hex(3)
    # Given three unauthenticated requests from one address, spread over two gateways...
    assert first.post("/rooms", json={"ruleset": "board", "player": "alice", "room": f"rl-a-{tag}"}).status_code == 201
    assert second.post("/rooms", json={"ruleset": "realm", "player": "alice", "room": f"rl-b-{tag}",
                                       "join": True}).status_code == 201
    assert second.post(f"/rooms/rl-b-{tag}/join", json={"player": "bob"}).status_code == 200
    # ...when a fourth comes to either, then it is refused and nothing is created or joined.
    assert_limited(first.post("/rooms", json={"ruleset": "board", "player": "carol", "room": f"rl-c-{tag}"}))
    assert_limited(second.post(f"/rooms/rl-b-{tag}/join", json={"player": "dave"}))
    assert first.get(f"/rooms/rl-c-{tag}").status_code == 404
    assert "dave" not in first.get(f"/rooms/rl-b-{tag}").json()["players"]


def test_the_command_limit_is_per_seat_and_shared_by_two_gateways(api: TestClient, two_gateways) -> None:
    first, second = two_gateways
    tag = secrets.token_hex(3)
    # The rooms come from the unthrottled gateway; the two limited ones only carry commands.
    alice = api.post("/rooms", json={"ruleset": "board", "player": "alice", "room": f"rl-t-{tag}"}).json()
    bob = api.post("/rooms", json={"ruleset": "board", "player": "bob", "room": f"rl-u-{tag}"}).json()
    url = f"/rooms/{alice['room']}/commands"
    headers = {"Authorization": f"Bearer {alice['token']}"}
    for index in range(4):
        client = (first, second)[index % 2]
        answer = client.post(url, json={"command": {**ELEMENT, "row": -1}}, headers=headers)  # refused by rules
        assert answer.status_code == 422, answer.text
    version = api.get(f"/rooms/{alice['room']}").json()["version"]
    assert_limited(first.post(url, json={"command": ELEMENT}, headers=headers))  # the fast path
    assert_limited(second.post(f"/rooms/{alice['room']}/end", json={}, headers=headers))
    assert api.get(f"/rooms/{alice['room']}").json()["version"] == version
    # Another seat is counted on its own.
    other = first.post(f"/rooms/{bob['room']}/commands", json={"command": ELEMENT},
                       headers={"Authorization": f"Bearer {bob['token']}"})
    assert other.status_code == 200, other.text


def test_the_limits_are_documented_in_the_api(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    for path in ("/rooms", "/rooms/{room}/join", "/rooms/{room}/commands"):
        assert "429" in paths[path]["post"]["responses"]
    assert "not_seated" in paths["/rooms/{room}/end"]["post"]["description"]
