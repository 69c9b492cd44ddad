"""Every successful answer about a room carries a checkpoint of it, signed by the published key set: the routes
are read from the OpenAPI document, so a room route added tomorrow fails here until it carries one (or is listed
below as not about one room, with the reason).

Given a realm room played through the real engine (a trade offered, a command refused, the room ended, then
forked), when every room route of the OpenAPI document is called once as the reader it serves, then each answer
holds a checkpoint whose signature a published key verifies, of the room the answer is about, and the auditor's
bundle of the whole room passes through every one of those checkpoints.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi.testclient import TestClient

from almanac.events import commitments as cm
from almanac.events.forensics.bundle_check import verify_bundle

# Room routes that answer about no one room (the only ones allowed to carry no checkpoint).
NOT_ABOUT_ONE_ROOM = {
    ("get", "/rooms"): "a listing of every room (each has its own checkpoint on GET /rooms/{room})",
}
# The checkpoint file is itself a list of checkpoints (docs/bundle-format.md 2.1): each is checked.
CHECKPOINT_LISTS = {("get", "/rooms/{room}/checkpoints"): "checkpoints"}


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def room_routes(api: TestClient) -> set[tuple[str, str]]:
    """(method, path) of every OpenAPI route under /rooms."""
    return {(method, path) for path, operations in api.app.openapi()["paths"].items()
            if path.split("/")[1] == "rooms" for method in operations}


def test_every_room_route_answers_with_a_signed_checkpoint_of_its_room(api: TestClient, auditor: str) -> None:
    suffix = secrets.token_hex(3)
    alice, bob, carol = f"alice-{suffix}", f"bob-{suffix}", f"carol-{suffix}"
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {"players": [alice, bob, carol]}})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    tokens = {alice: created.json()["token"], "auditor": auditor, None: None}
    seat_key = created.json()["seat_key"]
    sent = api.post(f"/rooms/{room}/commands", headers=auth(tokens[alice]),
                    json={"command": {"kind": "send_merchant", "to": bob, "load": {"food": 6000, "gold": 2000}}})
    assert sent.status_code == 200, sent.text
    trade = f"trade-{sent.json()['first_version']}"
    # The calls in order (the room ends near the last, then is forked); {room}, {trade}, {fork} filled in.
    calls: list[tuple[str, str, str, Any, Any]] = [
        ("get", "/rooms/{room}", f"/rooms/{room}", None, None),
        ("post", "/rooms/{room}/join", f"/rooms/{room}/join", None, {"player": bob}),
        ("post", "/rooms/{room}/seat", f"/rooms/{room}/seat", None, {"player": alice, "seat_key": seat_key}),
        ("post", "/rooms/{room}/commands", f"/rooms/{room}/commands", alice,
         {"command": {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1},
          "command_id": "offer-1"}),
        ("get", "/rooms/{room}/commands/{command_id}", f"/rooms/{room}/commands/offer-1", alice, None),
        ("get", "/rooms/{room}/view", f"/rooms/{room}/view", alice, None),
        ("get", "/rooms/{room}/scores", f"/rooms/{room}/scores", None, None),
        ("get", "/rooms/{room}/resources", f"/rooms/{room}/resources", "auditor", None),
        ("get", "/rooms/{room}/events", f"/rooms/{room}/events", alice, None),
        ("get", "/rooms/{room}/state", f"/rooms/{room}/state", "auditor", None),
        ("get", "/rooms/{room}/rejections", f"/rooms/{room}/rejections", "auditor", None),
        ("get", "/rooms/{room}/audit/{view}", f"/rooms/{room}/audit/trade", "auditor", None),
        ("get", "/rooms/{room}/audit/{view}/{item}", f"/rooms/{room}/audit/trade/{trade}", "auditor", None),
        ("get", "/rooms/{room}/verification", f"/rooms/{room}/verification", alice, None),
        ("get", "/rooms/{room}/explain", f"/rooms/{room}/explain?path=room.players", "auditor", None),
        ("get", "/rooms/{room}/bisect", f"/rooms/{room}/bisect?where=room.version%20%3E%3D%202", "auditor", None),
        ("get", "/rooms/{room}/at/{version}", f"/rooms/{room}/at/2", alice, None),
        ("get", "/rooms/{room}/series", f"/rooms/{room}/series", None, None),
        ("get", "/rooms/{room}/checkpoints", f"/rooms/{room}/checkpoints", alice, None),
        ("get", "/rooms/{room}/player-bundle", f"/rooms/{room}/player-bundle", alice, None),
        ("post", "/rooms/{room}/bots", f"/rooms/{room}/bots", alice, {"seat": carol}),
        ("post", "/rooms/{room}/end", f"/rooms/{room}/end", alice, {}),
        ("get", "/rooms/{room}/dispute", f"/rooms/{room}/dispute?trade={trade}", "auditor", None),
        ("post", "/rooms/{room}/fork", f"/rooms/{room}/fork", "auditor", {"at": 2, "as": f"{room}-fork"}),
        ("get", "/rooms/{room}/diff", f"/rooms/{room}/diff?other={room}-fork", "auditor", None),
        ("post", "/rooms", "/rooms", None, {"ruleset": "realm", "player": carol}),
    ]
    # Every room route of the OpenAPI document is called here or listed as not about one room
    assert room_routes(api) - {(m, p) for m, p, *_ in calls} - set(NOT_ABOUT_ONE_ROOM) == set(), \
        "a room route with no call here: add one (its answer must carry a checkpoint)"
    keys = api.get("/.well-known/almanac-keys.json").json()
    trusted = cm.trusted_keys(keys)

    # When each is called as the reader it serves
    held: list[dict] = []
    for method, route, url, who, body in calls:
        answer = api.request(method.upper(), url, headers=auth(tokens[who]), json=body)
        assert answer.status_code in (200, 201), (route, answer.text)
        document = answer.json()
        checkpoints = document[CHECKPOINT_LISTS[(method, route)]] if (method, route) in CHECKPOINT_LISTS \
            else [document.get("checkpoint")]
        # Then each carries a checkpoint signed by a published key, of the room it is about
        about = document["room"] if route in ("/rooms", "/rooms/{room}/fork") else room
        for checkpoint in checkpoints:
            assert isinstance(checkpoint, dict) and cm.checkpoint_problem(checkpoint) is None, (route, document)
            assert checkpoint["room"] == about and cm.signature_valid(trusted[checkpoint["kid"]], checkpoint), route
            if about == room:
                held.append(checkpoint)

    # And the room's whole history, as the auditor's bundle has it, passes through every checkpoint handed out
    latest = api.get(f"/rooms/{room}").json()["version"]
    bundle = api.get(f"/rooms/{room}/dispute?from=1&to={latest}", headers=auth(auditor)).json()
    verdict = verify_bundle(bundle, checkpoints=held, keys=keys)
    assert verdict.failed is None and "checkpoints" not in verdict.unchecked, verdict.text()
    assert len({(c["version"], c["head"]) for c in held}) > 5  # checkpoints at many versions, not one repeated
