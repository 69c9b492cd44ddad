"""Rate limits live in Redis: two gateways on one store share them, per client address on the routes without a
token and per seat on commands; a refusal is 429 rate_limited with Retry-After and changes nothing. The deployment's
defaults bound what one client adds to Redis (rooms, recorded refusals), and a bots process's joins are not counted
on its address."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import limits
import pytest
import redis
from fastapi.testclient import TestClient
from gateway_stack import Stack, gateway_settings

from almanac.services import bots
from almanac.services.checkpoints import commit_secret
from almanac.services.gateway import create_app
from almanac.services.settings import Settings
from almanac.storage.keys import Keys

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


# --- the deployment's defaults (services/settings.py), attacked as they ship -----------------------------------------

DEFAULTS = {name: Settings.model_fields[name].default for name in ("rate_anon", "rate_commands")}


@pytest.fixture
def deployed(stack: Stack) -> Iterator[tuple[TestClient, Settings]]:
    """A gateway at the deployment's rate limits (not the suite's), and its settings; its client at an address of the
    test's own (an address's window is shared by every gateway on the store)."""
    settings = gateway_settings(stack, **DEFAULTS)
    address = f"10.{secrets.randbelow(256)}.{secrets.randbelow(256)}.{secrets.randbelow(255) + 1}"
    with TestClient(create_app(settings), raise_server_exceptions=False, client=(address, 40000)) as client:
        yield client, settings


def test_one_address_creates_at_most_the_default_number_of_rooms_a_window(deployed) -> None:
    client, _ = deployed
    allowed = limits.parse(DEFAULTS["rate_anon"]).amount
    tag = secrets.token_hex(3)
    # Given one address creating rooms as fast as it can (a spammer growing Redis a room, ~10 KB, at a time)
    answers = [client.post("/rooms", json={"ruleset": "board", "player": "p", "room": f"spam-{tag}-{n}"})
               for n in range(allowed + 5)]
    # Then the default window lets `allowed` through, the rest are 429 and wrote nothing
    created = [n for n, answer in enumerate(answers) if answer.status_code == 201]
    assert created == list(range(allowed)), [answer.status_code for answer in answers]
    for n, answer in enumerate(answers[allowed:], start=allowed):
        assert_limited(answer)
        assert client.get(f"/rooms/spam-{tag}-{n}").status_code == 404


def test_a_seat_sends_at_most_the_default_number_of_commands_a_window(api: TestClient, deployed, stack: Stack) -> None:
    client, settings = deployed
    allowed = limits.parse(DEFAULTS["rate_commands"]).amount
    window_s = limits.parse(DEFAULTS["rate_commands"]).get_expiry()
    room = api.post("/rooms", json={"ruleset": "board", "player": "mallory", "room": f"flood-{secrets.token_hex(3)}"})
    token = room.json()["token"]
    room = room.json()["room"]
    # Given a seat sending commands the rules refuse, as fast as it can (each refusal recorded: ~880 B of Redis)
    started = time.monotonic()
    answers = [client.post(f"/rooms/{room}/commands", json={"command": {**ELEMENT, "row": 10, "column": 10}},
                           headers={"Authorization": f"Bearer {token}"}) for _ in range(3 * allowed)]
    elapsed_s = time.monotonic() - started
    # Then at most `allowed` a window got to the rules; the rest were 429 and left nothing in Redis
    decided = sum(answer.status_code == 422 for answer in answers)  # by the rules: off the map (no element is one cell)
    assert all(answer.json()["code"].startswith("board.") for answer in answers if answer.status_code == 422)
    assert decided + sum(answer.status_code == 429 for answer in answers) == len(answers)
    assert allowed <= decided <= allowed * (1 + int(elapsed_s // window_s)), (decided, elapsed_s)
    assert all(answer.json()["code"] == "rate_limited" for answer in answers if answer.status_code == 429)
    recorded = redis.Redis.from_url(stack.redis_url).xlen(Keys(settings.shard_count).rejected(room))
    assert recorded == decided


def test_a_bots_process_joins_its_seats_whatever_the_address_has_used(deployed) -> None:
    client, settings = deployed
    allowed = limits.parse(DEFAULTS["rate_anon"]).amount
    tag = secrets.token_hex(3)
    # Given a realm room with every other seat handed to bots, and its address's window used up
    seats = [f"bot{n}" for n in range(4)]
    created = client.post("/rooms", json={"ruleset": "realm", "player": "ann", "room": f"bots-{tag}",
                                          "options": {"players": ["ann", *seats]}, "bots": seats})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    while client.post("/rooms", json={"ruleset": "board", "player": "p", "room": f"fill-{tag}-{allowed}"}
                      ).status_code != 429:
        allowed += 1
    # When the deployment's bots process joins the bot seats from that address (its join id: the bot key's)
    key = bots.dice_key(commit_secret(settings))
    for seat in seats:
        joined = client.post(f"/rooms/{room}/join",
                             json={"player": seat, "command_id": bots.bot_join_client_id(key, room, seat)})
        # Then each join is answered: the deployment's bots share one address, and are not counted on it
        assert joined.status_code == 200, joined.text
    # while anyone else's join from that address is still refused: an id of its own, or one of the bots' form made
    # under another key (a forger's), or another seat's bot id
    forged = bots.bot_join_client_id(b"a forger's key", room, "eve")
    for player, command_id in (("eve", f"eve-{tag}"), ("eve", forged),
                               ("eve", bots.bot_join_client_id(key, room, seats[0]))):
        assert_limited(client.post(f"/rooms/{room}/join", json={"player": player, "command_id": command_id}))
