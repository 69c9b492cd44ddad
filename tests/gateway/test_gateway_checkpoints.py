"""Every answer a player gets about a room carries a checkpoint signed by a key of the published key set."""

from __future__ import annotations

import msgspec
from fastapi.testclient import TestClient
from game_modules import game_module

from almanac.events import commitments as cm
from almanac.services.gateway.responses import RESPONSES


def _move(api: TestClient, room: str, auditor: str) -> dict:
    board_rules = game_module("board@1", "rules")
    state = api.get(f"/rooms/{room}/state", headers={"Authorization": f"Bearer {auditor}"}).json()
    game = msgspec.convert(state["state"]["game"], game_module("board@1", "state").BoardState)
    move = board_rules.legal_placements(game.board, board_rules.current_element(game))[0]
    return {"kind": "place_element", "row": move.row, "column": move.column, "rotation": move.rotation,
            "mirror": move.mirror}


def test_a_players_answers_carry_checkpoints_a_stranger_checks_against_the_auditors_bundle(api: TestClient,
                                                                                          auditor: str) -> None:
    # Given the deployment's published key set
    keys = api.get("/.well-known/almanac-keys.json")
    assert keys.status_code == 200 and cm.key_set_problem(keys.json()) is None, keys.text
    trusted = cm.trusted_keys(keys.json())

    def valid(checkpoint: dict, room: str, version: int) -> dict:
        assert cm.checkpoint_problem(checkpoint) is None, checkpoint
        assert checkpoint["room"] == room and checkpoint["version"] == version
        assert cm.signature_valid(trusted[checkpoint["kid"]], checkpoint)
        return checkpoint

    # When tess creates and joins a board room, plays a move, reads her view and her events, and follows the feed
    created = api.post("/rooms", json={"ruleset": "board", "player": "tess"})
    assert created.status_code == 201, created.text
    room, headers = created.json()["room"], {"Authorization": f"Bearer {created.json()['token']}"}
    held = [valid(created.json()["checkpoint"], room, created.json()["version"])]
    played = api.post(f"/rooms/{room}/commands", json={"command": _move(api, room, auditor)}, headers=headers)
    assert played.status_code == 200, played.text
    held.append(valid(played.json()["checkpoint"], room, played.json()["version"]))
    view = api.get(f"/rooms/{room}/view", headers=headers).json()
    held.append(valid(view["checkpoint"], room, view["version"]))
    page = api.get(f"/rooms/{room}/events", headers=headers).json()
    valid(page["checkpoint"], room, page["next_version"] - 1)
    with api.websocket_connect(f"/rooms/{room}/live?from_version=1", headers=headers) as socket:
        fed = [socket.receive_json() for _ in range(view["version"])]
    for message in fed:
        held.append(valid(message["checkpoint"], room, message["version"]))
    # The answers' types hold the checkpoint (the OpenAPI documents it)
    for answer, route in ((played, ("post", "/rooms/{room}/commands")), (keys, ("get", "/.well-known/almanac-keys.json"))):
        strict = msgspec.defstruct("S", [], bases=(RESPONSES[route][1],), forbid_unknown_fields=True, kw_only=True)
        msgspec.convert(answer.json(), strict)

    # Then the heads are those of the room's history: the auditor's bundle passes through every one of them
    auditor_headers = {"Authorization": f"Bearer {auditor}"}
    bundle = api.get(f"/rooms/{room}/dispute?from=1&to={view['version']}", headers=auditor_headers)
    assert bundle.status_code == 200, bundle.text
    # (the room is live with hidden values: only an auditor may have it checked against the server's chain)
    as_player = api.post("/bundles/verify", json={"bundle": bundle.json(), "checkpoints": held}, headers=headers)
    assert as_player.status_code == 403 and as_player.json()["code"] == "auditors_only", as_player.text
    verdict = api.post("/bundles/verify", json={"bundle": bundle.json(), "checkpoints": held}, headers=auditor_headers)
    # (a live room: INCOMPLETE, its seed is secret; nothing failed)
    assert verdict.status_code == 200 and verdict.json()["status"] == "INCOMPLETE", verdict.text
    assert not any(s["status"] == "failed" for s in verdict.json()["steps"]), verdict.text
    assert any(s["name"] == "checkpoints" and s["status"] == "passed" and f"{len(held)} checkpoint(s)" in s["detail"]
               for s in verdict.json()["steps"])
    # and a checkpoint moved to another head is a failed step naming it
    moved = {**held[-1], "head": "0" * 64}
    refused = api.post("/bundles/verify", json={"bundle": bundle.json(), "checkpoints": [moved]},
                       headers=auditor_headers).json()
    assert not refused["ok"] and f"{room}@{moved['version']}" in refused["text"]
    # A checkpoint that is not one (unknown field, bad hex) is a 422 naming the field, never a verdict or a 500
    bad = api.post("/bundles/verify", json={"bundle": bundle.json(), "checkpoints": [{**moved, "extra": 1}]},
                   headers=headers)
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request", bad.text
    bad = api.post("/bundles/verify", json={"bundle": bundle.json(), "expect_head": "12:xyz"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["field"] == "expect_head", bad.text

    # Her own checkpoints are exported by the API as a checkpoint file
    exported = api.get(f"/rooms/{room}/checkpoints", headers=headers)
    assert exported.status_code == 200, exported.text
    document = exported.json()
    assert document["keys"] == keys.json() and document["checkpoints"][-1]["version"] == view["version"]
    assert {c["version"] for c in document["checkpoints"]} >= {played.json()["version"]}
    assert api.get(f"/rooms/{room}/checkpoints").status_code == 401
