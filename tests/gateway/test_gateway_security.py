"""Refusals over HTTP against a real engine: bad tokens, bad bodies, unknown routes, failures, timeouts.

Every refusal answers JSON {code, message[, field]} and leaves the room exactly as it was.
"""

from __future__ import annotations

import secrets
import time

import msgspec
import pytest
import redis
from fastapi.testclient import TestClient
from game_modules import game_module
from gateway_stack import gateway_settings

from almanac.services.gateway import create_app
from almanac.services.gateway.auth import TokenSigner
from almanac.storage.keys import shard_of

ELEMENT = {"kind": "place_element", "row": 5, "column": 5}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def board(api: TestClient) -> dict:
    """A board room owned by alice, with her token, and a second room of bob's."""
    suffix = secrets.token_hex(3)
    alice = api.post("/rooms", json={"ruleset": "board", "player": "alice", "room": f"sec-a-{suffix}"})
    bob = api.post("/rooms", json={"ruleset": "board", "player": "bob", "room": f"sec-b-{suffix}"})
    assert alice.status_code == 201 and bob.status_code == 201, (alice.text, bob.text)
    return {"room": alice.json()["room"], "token": alice.json()["token"],
            "other_room": bob.json()["room"], "other_token": bob.json()["token"]}


def version(api: TestClient, room: str) -> int:
    return api.get(f"/rooms/{room}").json()["version"]


def assert_refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["message"], body
    assert "Traceback" not in response.text
    return body


def test_forged_expired_wrong_room_and_other_seat_tokens_change_nothing(api: TestClient, board: dict) -> None:
    room, before = board["room"], version(api, board["room"])
    url = f"/rooms/{room}/commands"
    body, _, mac = board["token"].partition(".")
    forged = f"{body}.{mac[:-2]}{'AA' if not mac.endswith('AA') else 'BB'}"
    foreign = TokenSigner("not-the-server-secret-" + "z" * 32, 60).issue(room, "alice")
    expired = api.app.state.signer.issue(room, "alice", ttl_s=-5)
    assert_refused(api.post(url, json={"command": ELEMENT}), 401, "token_missing")
    assert_refused(api.post(url, json={"command": ELEMENT}, headers=auth(forged)), 401, "token_invalid")
    assert_refused(api.post(url, json={"command": ELEMENT}, headers=auth(foreign)), 401, "token_invalid")
    assert "expired" in assert_refused(
        api.post(url, json={"command": ELEMENT}, headers=auth(expired)), 401, "token_invalid")["message"]
    assert_refused(api.post(url, json={"command": ELEMENT}, headers=auth(board["other_token"])), 403, "wrong_room")
    assert_refused(api.post(url, json={"command": ELEMENT, "player": "bob"}, headers=auth(board["token"])),
                   403, "other_seat")
    auditor = api.app.state.signer.issue("*", "auditor", "auditor")
    assert_refused(api.post(url, json={"command": ELEMENT}, headers=auth(auditor)), 403, "not_a_player")
    # Reads are guarded too: another room's token sees neither this view nor its events.
    assert_refused(api.get(f"/rooms/{room}/view", headers=auth(board["other_token"])), 403, "wrong_room")
    assert_refused(api.get(f"/rooms/{room}/state", headers=auth(board["token"])), 403, "auditors_only")
    assert version(api, room) == before


def test_replayed_join_does_not_hand_out_the_seat(api: TestClient, board: dict) -> None:
    room = f"sec-join-{secrets.token_hex(3)}"
    api.post("/rooms", json={"ruleset": "realm", "player": "alice", "room": room, "join": False})
    first = api.post(f"/rooms/{room}/join", json={"player": "bob", "command_id": "join-1"})
    assert first.status_code == 200 and first.json()["token"]
    again = assert_refused(api.post(f"/rooms/{room}/join", json={"player": "bob", "command_id": "join-1"}),
                           409, "already_joined")
    assert "token" not in again
    assert_refused(api.post(f"/rooms/{room}/join", json={"player": "bob"}), 422, "already_joined")


def test_oversized_and_malformed_bodies_get_clear_4xx_and_change_nothing(api: TestClient, board: dict) -> None:
    room, token = board["room"], board["token"]
    before = version(api, room)
    url = f"/rooms/{room}/commands"
    limit = api.app.state.gateway.settings.max_body_bytes
    huge = {"command": {**ELEMENT, "padding": "x" * (limit + 10)}}
    assert_refused(api.post(url, json=huge, headers=auth(token)), 413, "body_too_large")

    def chunks():  # no Content-Length: the limit holds for streamed bodies too
        for _ in range(limit // 1000 + 2):
            yield b"x" * 1000

    assert_refused(api.post(url, content=chunks(), headers=auth(token)), 413, "body_too_large")
    assert_refused(api.post(url, content=b"{not json", headers=auth(token)), 400, "malformed_json")
    assert_refused(api.post(url, content=b"", headers=auth(token)), 400, "empty_body")
    wrong = assert_refused(api.post(url, json={"command": 5}, headers=auth(token)), 422, "invalid_request")
    assert wrong["field"] == "command"
    extra = assert_refused(api.post(url, json={"command": ELEMENT, "bogus": 1}, headers=auth(token)),
                           422, "invalid_request")
    assert extra["field"] == "bogus"
    kind = assert_refused(api.post(url, json={"command": {"kind": "fly"}}, headers=auth(token)),
                          422, "unknown_command")
    assert kind["field"] == "kind" and "place_element" in kind["allowed"]
    typed = assert_refused(api.post(url, json={"command": {**ELEMENT, "row": "five"}}, headers=auth(token)),
                           422, "invalid_command")
    assert typed["field"] == "row"
    bad_id = assert_refused(api.post(url, json={"command": ELEMENT, "command_id": "no spaces!"},
                                     headers=auth(token)), 422, "invalid_request")
    assert bad_id["field"] == "command_id"
    create = assert_refused(api.post("/rooms", json={"ruleset": "chess", "player": "alice"}), 422, "unknown_ruleset")
    assert "board" in create["allowed"]
    assert_refused(api.post("/rooms", json={"ruleset": "board", "player": "no spaces"}), 422, "invalid_request")
    assert_refused(api.get(f"/rooms/{room}/events?from_version=0", headers=auth(token)), 422, "invalid_parameter")
    assert version(api, room) == before
    assert api.get(f"/rooms/{room}/rejections", headers=auth(api.app.state.signer.issue("*", "a", "auditor"))
                   ).json()["rejections"] == []


def test_rule_refusal_from_the_engine_is_422_with_code_and_field(api: TestClient, board: dict) -> None:
    room, token = board["room"], board["token"]
    before = version(api, room)
    # A rotation of 45 degrees fits the schema's range (0 .. 270) but no rule: the engine refuses it.
    # (Row -1 is no longer the engine's to refuse: the schema declares rows 0 .. 10.)
    refused = assert_refused(
        api.post(f"/rooms/{room}/commands", json={"command": {"kind": "place_element", "row": 0, "column": 0,
                                                              "rotation": 45},
                                                   "command_id": "bad-rotation"}, headers=auth(token)),
        422, "board.invalid_rotation")
    assert refused["command_id"] == "bad-rotation" and refused["field"] == "rotation"
    # The outcome stays answerable by id, and resending the id replays it rather than deciding again.
    again = api.get(f"/rooms/{room}/commands/bad-rotation", headers=auth(token))
    assert again.status_code == 422 and again.json()["code"] == "board.invalid_rotation"
    assert version(api, room) == before


def test_unknown_routes_and_internal_failures_answer_json_without_traceback(api: TestClient, board: dict,
                                                                             monkeypatch) -> None:
    assert_refused(api.get("/no/such/route"), 404, "not_found")
    assert_refused(api.get("/rooms/no-such-room"), 404, "room_not_found")
    reader = api.app.state.gateway.reader

    async def broken(room: str):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(reader, "latest", broken)
    failed = assert_refused(api.get(f"/rooms/{board['room']}"), 500, "internal_error")
    assert "passwd" not in str(failed) and "RuntimeError" not in str(failed)


def test_timeout_answers_202_with_the_outcome_url(stack) -> None:
    # With 17 shards a room can land on shard 16, whose command stream the engine (16 shards) never reads.
    settings = gateway_settings(stack).model_copy(update={"shard_count": 17, "command_timeout_ms": 300})
    room = next(f"slow-{n}" for n in range(1000) if shard_of(f"slow-{n}", 17) == 16)
    with TestClient(create_app(settings), raise_server_exceptions=False) as lonely:
        pending = lonely.post("/rooms", json={"ruleset": "board", "player": "alice", "room": room,
                                              "command_id": "slow-1"})
        assert pending.status_code == 202, pending.text
        body = pending.json()
        assert body["code"] == "outcome_pending" and body["command_id"] == "slow-1"
        assert pending.headers["location"] == body["outcome_url"] == f"/rooms/{room}/commands/slow-1"


def test_health_metrics_and_openapi(api: TestClient, board: dict, auditor: str) -> None:
    health = api.get("/health").json()
    assert health["status"] == "ok", health
    assert health["redis"]["ok"] and health["engine"]["shards_held"] == 16 and health["projector"]["ok"]
    metrics = api.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for name in ("almanac_commands_total", "almanac_command_latency_seconds_bucket", "almanac_http_requests_total",
                 "almanac_projector_lag_ms", "almanac_engine_up 1"):
        assert name in text, name
    # Refused in an earlier test of this module: a refusal, and its code, are the auditors' (they can tell a
    # rival's storage); the public counts the accepted commands only (tests/gateway/test_refusal_silence.py).
    assert 'outcome="accepted"' in text and 'outcome="rejected"' not in text and 'outcome="decided"' not in text
    assert "board.invalid_rotation" not in text and "almanac_command_rejects_total" not in text
    audited = api.get("/metrics", headers=auth(auditor)).text
    assert 'code="board.invalid_rotation"' in audited
    assert 'outcome="accepted"' in audited and 'outcome="rejected"' in audited
    # The engines' own accepted/rejected counters likewise (written to Redis every few seconds: wait for them)
    deadline = time.monotonic() + 15
    while 'field="rejected"' not in audited and time.monotonic() < deadline:
        time.sleep(0.2)
        audited = api.get("/metrics", headers=auth(auditor)).text
    assert 'field="accepted"' in audited and 'field="rejected"' in audited
    text = api.get("/metrics").text
    assert 'field="accepted"' in text and 'field="rejected"' not in text and 'field="commands"' not in text
    # A player's token reads what anyone reads (a Prometheus scraper that also plays is not refused), and no more.
    as_player = api.get("/metrics", headers=auth(board["token"]))
    assert as_player.status_code == 200, as_player.text
    assert "almanac_commands_total" in as_player.text and "almanac_command_rejects_total" not in as_player.text
    assert api.get("/metrics", headers=auth("not-a-token")).status_code == 401
    document = api.get("/openapi.json").json()
    assert "/rooms/{room}/commands" in document["paths"]
    assert "CommandRequest" in document["components"]["schemas"]
    body_schema = document["paths"]["/rooms/{room}/commands"]["post"]["requestBody"]["content"]["application/json"]
    assert body_schema["schema"]["$ref"].endswith("/CommandRequest")


def test_a_retried_command_id_is_answered_once_and_applied_once(api: TestClient, auditor: str) -> None:
    created = api.post("/rooms", json={"ruleset": "board", "player": "dora", "challenge": "retry-test"})
    room, token = created.json()["room"], created.json()["token"]
    state = api.get(f"/rooms/{room}/state", headers=auth(auditor)).json()["state"]["game"]
    from almanac.events import codec, registry  # noqa: PLC0415
    choose_command = game_module("board@1", "policy").choose_command
    from almanac.events.dice import Dice  # noqa: PLC0415

    game = msgspec.convert(state, registry.get("board").state_type, strict=False)
    move = {"command": codec.encode_command(choose_command(game, "dora", Dice(b"r", room, 0)))}
    first = api.post(f"/rooms/{room}/commands", json=move, headers={**auth(token), "Idempotency-Key": "k-1"})
    again = api.post(f"/rooms/{room}/commands", json=move, headers={**auth(token), "Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert (first.json()["duplicate"], again.json()["duplicate"]) == (False, True)
    assert first.json()["version"] == again.json()["version"] == version(api, room)
    assert first.json()["events"] == again.json()["events"]
    by_id = api.get(f"/rooms/{room}/commands/k-1", headers=auth(token))
    assert by_id.status_code == 200 and by_id.json()["version"] == first.json()["version"]
    assert api.get(f"/rooms/{room}/commands/never-sent", headers=auth(token)).json()["code"] == "outcome_unknown"


def test_an_idempotency_key_that_is_not_a_command_id_is_refused_and_records_nothing(api: TestClient,
                                                                                   auditor: str) -> None:
    """Given a seated player, when a command comes with an Idempotency-Key the body's ``command_id`` would refuse
    (over 100 characters, a slash and a pipe, or UTF-8 bytes, which the header is read as Latin-1), then it is
    refused 422 ``invalid_idempotency_key`` naming the header and the room does not move: the header used to be
    taken as the command's id as it came (a recorded id of 200 characters, ``ÑÑ`` for ``шщ``)."""
    created = api.post("/rooms", json={"ruleset": "realm", "player": "ivy", "options": {"players": ["ivy", "jo"]}})
    room, token = created.json()["room"], created.json()["token"]
    before = version(api, room)
    for key in ("bad key:with/slash|pipe=" + "z" * 200, "шщ".encode(), "a\tb", "x" * 101):
        refused = api.post(f"/rooms/{room}/commands", json={"command": {"kind": "cut_wood"}},
                           headers={**auth(token), "Idempotency-Key": key})
        assert refused.status_code == 422, (key, refused.text)
        assert (refused.json()["code"], refused.json()["field"]) == ("invalid_idempotency_key", "Idempotency-Key")
    assert version(api, room) == before
    accepted = api.post(f"/rooms/{room}/commands", json={"command": {"kind": "cut_wood"}},
                        headers={**auth(token), "Idempotency-Key": "k.1:a_b-c"})
    assert accepted.status_code == 200 and accepted.json()["command_id"] == "k.1:a_b-c", accepted.text


def test_a_valid_token_for_a_room_the_store_does_not_have_answers_404_and_writes_nothing(api: TestClient,
                                                                                         stack) -> None:
    """Given a well-signed token naming a room's rules for a room the store does not hold (lost with a restore
    from an older backup while the token lives on), when it sends a move or ends the room, then 404
    ``room_not_found``, as a token without the claim gets, and nothing is stored for that room."""
    signer = api.app.state.signer
    ghost = f"ghost-{secrets.token_hex(3)}"
    for token in (signer.issue(ghost, "p", ruleset="board"), signer.issue(ghost, "p")):
        assert_refused(api.post(f"/rooms/{ghost}/commands", json={"command": ELEMENT}, headers=auth(token)),
                       404, "room_not_found")
        assert_refused(api.post(f"/rooms/{ghost}/commands", json={"command": {"kind": "end_room"}},
                                headers=auth(token)), 404, "room_not_found")
    client = redis.Redis.from_url(stack.redis_url)
    try:
        assert list(client.scan_iter(match=f"*{ghost}*")) == []
    finally:
        client.close()
