"""board@2's turn_limit_s is bounded: out of bounds is refused 422 {code, message, field}; board@1 refuses it."""

from __future__ import annotations

import secrets

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(("ruleset", "options"), [
    ("board@2", {"turn_limit_s": 9}),
    ("board@2", {"turn_limit_s": 7 * 24 * 3600 + 1}),
    ("board@2", {"turn_limit_s": "a day"}),
    ("board", {"turn_limit_s": 3600}),  # board@1, the seed as written, has no such option
])
def test_a_turn_limit_out_of_bounds_is_refused(api: TestClient, ruleset: str, options: dict) -> None:
    room = f"turns-{secrets.token_hex(3)}"
    refused = api.post("/rooms", json={"ruleset": ruleset, "player": "alice", "room": room, "options": options})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["code"] == "invalid_options" and body["field"] == "options.turn_limit_s" and body["message"]
    assert api.get(f"/rooms/{room}").status_code == 404


def test_a_turn_limit_in_bounds_is_recorded_and_shown(api: TestClient) -> None:
    room = f"turns-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "board@2", "player": "alice", "room": room,
                                       "options": {"turn_limit_s": 3600}})
    assert created.status_code == 201, created.text
    token = created.json()["token"]
    view = api.get(f"/rooms/{room}/view", headers={"Authorization": f"Bearer {token}"})
    assert view.status_code == 200, view.text
    shown = view.json()["view"]
    assert shown["turn_limit_s"] == 3600 and shown["turn_due_ms"] > 0
