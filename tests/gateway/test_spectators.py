"""Spectators: a room's public feed without a token, delayed by N versions, resumable; hidden values: test_hidden_routes."""

from __future__ import annotations

import secrets

from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

DELAY = 2


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def end_turns(api: TestClient, room: str, tokens: dict[str, str], rounds: int) -> None:
    for _ in range(rounds):
        for token in tokens.values():
            answer = api.post(f"/rooms/{room}/commands", headers=auth(token),
                              json={"command": {"kind": "end_turn"}, "command_id": secrets.token_hex(16)})
            assert answer.status_code == 200, answer.text


def played_room(api: TestClient) -> tuple[str, str, str, dict[str, str], int]:
    """A realm room of two seated players who played two turns each: (room, alice, bob, tokens, latest version)."""
    alice, bob = f"alice-{secrets.token_hex(3)}", f"bob-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "realm", "player": alice, "options": {"players": [alice, bob]}})
    room = created.json()["room"]
    tokens = {alice: created.json()["token"], bob: api.post(f"/rooms/{room}/join", json={"player": bob}).json()["token"]}
    end_turns(api, room, tokens, 2)
    return room, alice, bob, tokens, api.get(f"/rooms/{room}").json()["version"]


def test_a_spectator_follows_a_room_delayed_and_resumes_without_gap_or_repeat(api: TestClient) -> None:
    # Given a realm room of two seated players who played some turns
    room, alice, bob, tokens, latest = played_room(api)
    # When a spectator (no token) watches it delayed by two versions
    seen: list[dict] = []
    with api.websocket_connect(f"/rooms/{room}/watch?delay={DELAY}") as socket:
        seen += [socket.receive_json() for _ in range(latest - DELAY)]
        # then a move arrives: it shows the version two behind it, no more
        end_turns(api, room, {alice: tokens[alice]}, 1)
        seen.append(socket.receive_json())
    assert seen[-1]["version"] == api.get(f"/rooms/{room}").json()["version"] - DELAY
    # and after a disconnect, more moves, and a resume from the last version seen: no gap, no repeat
    end_turns(api, room, {bob: tokens[bob], alice: tokens[alice]}, 2)  # alice has ended this season's turn
    latest = api.get(f"/rooms/{room}").json()["version"]
    resume = seen[-1]["version"] + 1
    with api.websocket_connect(f"/rooms/{room}/watch?delay={DELAY}&from_version={resume}") as socket:
        seen += [socket.receive_json() for _ in range(latest - DELAY - resume + 1)]
    assert [m["version"] for m in seen] == list(range(1, latest - DELAY + 1))
    # (that it never carries a hidden value: test_hidden_routes follows it on two games differing only in those)


def test_watching_a_room_that_does_not_exist_or_out_of_bounds_is_refused(api: TestClient) -> None:
    for url, code in (("/rooms/no-such-room/watch", "room_not_found"), ("/rooms/x/watch?delay=-1", "invalid_parameter"),
                      ("/rooms/x/watch?delay=100000", "invalid_parameter")):
        with api.websocket_connect(url) as socket:
            assert socket.receive_json()["code"] == code, url
            try:
                socket.receive_json()
                raise AssertionError(f"{url}: the feed stayed open")
            except WebSocketDisconnect as closed:
                assert 4400 <= closed.code < 4500, (url, closed.code)
