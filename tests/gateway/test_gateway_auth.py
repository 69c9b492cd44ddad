"""Who may do what, over HTTP and the live feed: JWT tokens refused by shape, algorithm and age; only seated
players and auditors end a room; seats are joinable names."""

from __future__ import annotations

import base64
import json
import secrets

import jwt
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

ELEMENT = {"kind": "place_element", "row": 5, "column": 5}


def auth(token: str | bytes) -> dict[str, str | bytes]:
    prefix = b"Bearer " if isinstance(token, bytes) else "Bearer "
    return {"Authorization": prefix + token}  # type: ignore[operator]


def _segment(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def assert_refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["message"], body
    return body


@pytest.fixture(scope="module")
def board(api: TestClient) -> dict:
    room = f"auth-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "board", "player": "alice", "room": room})
    assert created.status_code == 201 and created.json()["joined"], created.text
    return {"room": room, "token": created.json()["token"]}


def bad_tokens(api: TestClient, room: str) -> dict[str, str | bytes]:
    secret = api.app.state.signer._key
    claims = {"room": room, "player": "alice", "role": "player", "iat": 1, "exp": 2**40}
    return {
        "alg none": f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}.",
        "foreign algorithm": jwt.encode(claims, secret, algorithm="HS384"),
        "expired": api.app.state.signer.issue(room, "alice", ttl_s=-5),
        "non-ASCII bytes": b"abc.\xc3\xa9",
        "not a JWT": "abc.def",
    }


def test_alg_none_foreign_expired_and_non_ascii_tokens_are_401_and_change_nothing(api: TestClient,
                                                                                  board: dict) -> None:
    room = board["room"]
    before = api.get(f"/rooms/{room}").json()["version"]
    for name, token in bad_tokens(api, room).items():
        for response in (
            api.post(f"/rooms/{room}/commands", json={"command": ELEMENT}, headers=auth(token)),  # fast path
            api.get(f"/rooms/{room}/view", headers=auth(token)),
            api.post(f"/rooms/{room}/end", json={}, headers=auth(token)),
        ):
            assert_refused(response, 401, "token_invalid")
            assert "Traceback" not in response.text, name
    expired = bad_tokens(api, room)["expired"]
    assert "expired" in api.get(f"/rooms/{room}/view", headers=auth(expired)).json()["message"]
    # The token in the query string, percent-encoded UTF-8.
    assert_refused(api.get(f"/rooms/{room}/view?token=abc.%C3%A9"), 401, "token_invalid")
    assert api.get(f"/rooms/{room}").json()["version"] == before


@pytest.mark.parametrize("query", ["token=abc.%C3%A9", "token=abc.def"])
def test_the_live_feed_answers_a_malformed_token_with_an_error_then_close_4401(api: TestClient, board: dict,
                                                                               query: str) -> None:
    with api.websocket_connect(f"/rooms/{board['room']}/live?{query}") as socket:
        assert socket.receive_json()["code"] == "token_invalid"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_json()
    assert closed.value.code == 4401


def test_the_live_feed_refuses_a_non_ascii_authorization_header(api: TestClient, board: dict) -> None:
    with api.websocket_connect(f"/rooms/{board['room']}/live", headers=auth(b"abc.\xc3\xa9")) as socket:
        assert socket.receive_json()["code"] == "token_invalid"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_json()
    assert closed.value.code == 4401
