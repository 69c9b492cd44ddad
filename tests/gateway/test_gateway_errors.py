"""The gateway's error boundary: bounded parameters, JSON 500s with request ids, live-feed close codes.

Every refusal is JSON {code, message[, field]} and changes nothing; anything unexpected is a JSON 500
naming the request id that the X-Request-ID header also carries; a live feed says why it closed.
"""

from __future__ import annotations

import json
import secrets

import pytest
import redis
from fastapi.testclient import TestClient
from gateway_stack import gateway_settings
from starlette.websockets import WebSocketDisconnect

from almanac.services.embedded_redis import EmbeddedRedis
from almanac.services.gateway import create_app

BIG = 18446744073709551616  # 2**64: Redis refuses it as a stream id, msgpack as an integer


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def room(api: TestClient) -> dict:
    created = api.post("/rooms", json={"ruleset": "board", "player": "erin", "room": f"err-{secrets.token_hex(3)}"})
    assert created.status_code == 201, created.text
    return {"room": created.json()["room"], "token": created.json()["token"]}


def version(api: TestClient, room: str) -> int:
    return api.get(f"/rooms/{room}").json()["version"]


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code and body["message"] and "Traceback" not in response.text, body
    return body


def test_every_version_parameter_is_bounded(api: TestClient, room: dict, auditor: str) -> None:
    name, token = room["room"], room["token"]
    for query in (f"from_version={BIG}", f"to_version={BIG}", f"from_version={2**53 + 1}"):
        body = refused(api.get(f"/rooms/{name}/events?{query}", headers=auth(token)), 422, "invalid_parameter")
        assert body["field"] == query.split("=")[0]
    refused(api.get(f"/rooms/{name}/state?version={BIG}", headers=auth(auditor)), 422, "invalid_parameter")
    at_the_bound = api.get(f"/rooms/{name}/events?from_version={2**53}", headers=auth(token))
    assert at_the_bound.status_code == 200 and at_the_bound.json()["events"] == []


def test_request_ids_are_returned_and_a_sane_client_id_is_kept(api: TestClient) -> None:
    generated = api.get("/rulesets").headers["x-request-id"]
    assert len(generated) == 16 and generated != api.get("/rulesets").headers["x-request-id"]
    assert api.get("/rulesets", headers={"X-Request-ID": "trace-42.a"}).headers["x-request-id"] == "trace-42.a"
    for hostile in (b"x" * 65, b"has space", b"-leading", "é".encode()):
        kept = api.get("/rulesets", headers={b"X-Request-ID": hostile})
        assert kept.headers["x-request-id"].encode() != hostile and len(kept.headers["x-request-id"]) == 16
    assert api.get("/no/such/route").headers["x-request-id"]


def test_an_unexpected_failure_is_a_json_500_naming_the_request_id(api: TestClient, room: dict,
                                                                   monkeypatch) -> None:
    async def broken(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(api.app.state.gateway.reader, "latest", broken)
    monkeypatch.setattr(api.app.state.gateway.reader, "ruleset_of", broken)
    monkeypatch.setattr(api.app.state.gateway, "submit", broken)  # the command path (its token names the rules)
    routed = api.get(f"/rooms/{room['room']}", headers={"X-Request-ID": "req-500"})
    body = refused(routed, 500, "internal_error")
    assert body["request_id"] == routed.headers["x-request-id"] == "req-500"
    assert "passwd" not in routed.text and "RuntimeError" not in routed.text
    # The command path, answered in front of the middleware, has the same boundary.
    fast = api.post(f"/rooms/{room['room']}/commands", headers=auth(room["token"]),
                    json={"command": {"kind": "place_element", "row": 1, "column": 1}})
    assert refused(fast, 500, "internal_error")["request_id"] == fast.headers["x-request-id"]
    # A token that does not name the room's rules makes the path read them first: the read's failure too.
    claimless = api.app.state.signer.issue(room["room"], "erin")
    reading = api.post(f"/rooms/{room['room']}/commands", headers=auth(claimless),
                       json={"command": {"kind": "place_element", "row": 1, "column": 1}})
    assert refused(reading, 500, "internal_error")["request_id"] == reading.headers["x-request-id"]


def test_values_the_server_cannot_represent_are_refused_and_change_nothing(api: TestClient, room: dict) -> None:
    name, token = room["room"], room["token"]
    before = version(api, name)
    big = api.post(f"/rooms/{name}/commands", headers=auth(token),
                   json={"command": {"kind": "place_element", "row": BIG, "column": 1}})
    assert big.status_code == 422 and big.json()["code"], big.text
    listed = api.post(f"/rooms/{name}/commands", headers=auth(token), json={"command": {"kind": []}})
    assert listed.status_code == 422 and listed.json()["code"], listed.text
    deep = api.post("/rooms", content=b'{"ruleset":"board","player":"x","options":' + b"[" * 1000 + b"]" * 1000 + b"}",
                    headers={"content-type": "application/json"})
    assert 400 <= deep.status_code < 500 and deep.json()["code"], deep.text
    assert version(api, name) == before


def closed(api: TestClient, url: str, **kwargs) -> tuple[WebSocketDisconnect, list[dict]]:
    messages: list[dict] = []
    with api.websocket_connect(url, **kwargs) as socket, pytest.raises(WebSocketDisconnect) as ended:
        while True:
            messages.append(socket.receive_json())
    return ended.value, messages


@pytest.mark.parametrize("from_version", [str(BIG), "abc", "0"])
def test_a_bad_live_from_version_closes_4422_with_a_json_reason(api: TestClient, room: dict,
                                                                from_version: str) -> None:
    ended, messages = closed(api, f"/rooms/{room['room']}/live?from_version={from_version}",
                             headers=auth(room["token"]))
    assert ended.code == 4422
    assert json.loads(ended.reason) == {"code": "invalid_parameter", "field": "from_version"}
    assert messages[0]["code"] == "invalid_parameter" and messages[0]["field"] == "from_version"


def test_a_store_error_in_the_live_feed_closes_1011_not_1000(api: TestClient, stack) -> None:
    name = f"err-wrongtype-{secrets.token_hex(3)}"
    keys = api.app.state.gateway.keys
    client = redis.Redis.from_url(stack.redis_url)
    client.set(keys.events(name), "not a stream")  # XREAD answers WRONGTYPE: a real Redis error
    try:
        token = api.app.state.signer.issue(name, "erin")
        ended, messages = closed(api, f"/rooms/{name}/live", headers=auth(token))
    finally:
        client.delete(keys.events(name))
        client.close()
    assert ended.code == 1011 and messages == []
    assert json.loads(ended.reason)["code"] == "internal_error"


def test_the_live_feed_closes_1013_when_redis_goes_away(stack, tmp_path) -> None:
    server = EmbeddedRedis(str(tmp_path / "redis"), persist=False).start()
    try:
        settings = gateway_settings(stack, redis_url=server.url)
        with TestClient(create_app(settings), raise_server_exceptions=False) as lonely:
            token = lonely.app.state.signer.issue("gone", "erin")
            with lonely.websocket_connect("/rooms/gone/live", headers=auth(token)) as socket:
                server.stop()
                with pytest.raises(WebSocketDisconnect) as ended:
                    socket.receive_json()
    finally:
        server.stop()
    assert ended.value.code == 1013
    assert json.loads(ended.value.reason) == {"code": "store_unavailable", "retry": True}
