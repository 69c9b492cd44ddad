"""A player fetches their own player-safe bundle of a live realm room over HTTP and checks it against the
checkpoints their answers carried; nobody else's token gets it."""

from __future__ import annotations

import base64

import msgspec
from fastapi.testclient import TestClient

from almanac.events import commitments as cm
from almanac.events.forensics.player_check import compare_player_bundles, verify_player_bundle
from almanac.services.gateway.responses import RESPONSES


def test_a_player_checks_their_own_trade_in_a_live_room_against_their_checkpoints(api: TestClient, auditor: str) -> None:
    # Given a realm room created now (so on scheme v2) where alice's merchant trades with bob
    created = api.post("/rooms", json={"ruleset": "realm", "player": "pb-alice",
                                       "options": {"players": ["pb-alice", "pb-bob"]}})
    assert created.status_code == 201, created.text
    room = created.json()["room"]
    alice = {"Authorization": f"Bearer {created.json()['token']}"}
    joined = api.post(f"/rooms/{room}/join", json={"player": "pb-bob"})
    bob = {"Authorization": f"Bearer {joined.json()['token']}"}
    held = {"pb-alice": [created.json()["checkpoint"]], "pb-bob": [joined.json()["checkpoint"]]}

    def play(who: str, headers: dict, command: dict) -> dict:
        answer = api.post(f"/rooms/{room}/commands", headers=headers, json={"command": command})
        assert answer.status_code == 200, answer.text
        held[who].append(answer.json()["checkpoint"])
        return answer.json()

    sent = play("pb-alice", alice, {"kind": "send_merchant", "to": "pb-bob", "load": {"food": 6000, "gold": 2000}})
    trade = f"trade-{sent['first_version']}"
    play("pb-alice", alice, {"kind": "offer_trade", "trade_id": trade, "buy": "wood", "pay": "food", "dice": 1})
    play("pb-bob", bob, {"kind": "counter_offer", "trade_id": trade, "want": "gold"})
    play("pb-alice", alice, {"kind": "agree_trade", "trade_id": trade})
    play("pb-bob", bob, {"kind": "agree_trade", "trade_id": trade})
    keys = api.get("/.well-known/almanac-keys.json").json()
    # each reads the room as it now stands (the view's answer carries the checkpoint on its head: what anchors the
    # whole history; before it, only what their own answers carried)
    for who, headers in (("pb-alice", alice), ("pb-bob", bob)):
        view = api.get(f"/rooms/{room}/view", headers=headers)
        assert view.status_code == 200, view.text
        held[who].append(view.json()["checkpoint"])

    # When each fetches their own bundle with their own token
    bundles = {}
    for who, headers in (("pb-alice", alice), ("pb-bob", bob)):
        answer = api.get(f"/rooms/{room}/player-bundle", headers=headers)
        assert answer.status_code == 200, answer.text
        bundles[who] = answer.json()
        strict = msgspec.defstruct("S", [], bases=(RESPONSES[("get", "/rooms/{room}/player-bundle")][1],),
                                   forbid_unknown_fields=True, kw_only=True)
        msgspec.convert(bundles[who], strict)  # the OpenAPI declares exactly what it answers
        # Then it verifies against the checkpoints their answers carried, and says what it cannot prove
        verdict = verify_player_bundle(bundles[who], held[who], keys)
        assert verdict.status == "VERIFIED", verdict.text()
        assert "NOT PROVABLE" in verdict.text()
    # and the trade's steps are opened to each party as their own view, the other's holdings hashed only
    own = [e for e in bundles["pb-alice"]["events"] if "pb-alice" in e["opened"]]
    assert own and all("pb-bob" not in e["opened"] and cm.FULL in e["leaves"] for e in bundles["pb-alice"]["events"])
    views = [msgspec.msgpack.decode(base64.b64decode(e["opened"]["pb-alice"]["view"])) for e in own]
    assert any(view[3].startswith("realm.trade") for view in views)
    # and the two bundles agree on every public part
    assert compare_player_bundles(bundles["pb-alice"], bundles["pb-bob"]) == []
    # Bob's token does not get alice's bundle; an auditor names the player; a stranger's room token is refused
    refused = api.get(f"/rooms/{room}/player-bundle?player=pb-alice", headers=bob)
    assert refused.status_code == 403 and refused.json()["code"] == "not_your_bundle", refused.text
    audited = api.get(f"/rooms/{room}/player-bundle?player=pb-alice", headers={"Authorization": f"Bearer {auditor}"})
    assert audited.status_code == 200 and audited.json()["player"] == "pb-alice"
    missing = api.get(f"/rooms/{room}/player-bundle", headers={"Authorization": f"Bearer {auditor}"})
    assert missing.status_code == 422 and missing.json()["field"] == "player", missing.text
    # and the auditor's whole bundle of the v2 room still verifies against the players' checkpoints
    whole = api.get(f"/rooms/{room}/dispute?from=1&to=2", headers={"Authorization": f"Bearer {auditor}"}).json()
    assert whole["commitments"]["scheme"] == cm.SCHEME_V2
    checked = api.post("/bundles/verify", json={"bundle": whole, "checkpoints": held["pb-alice"] + held["pb-bob"]},
                       headers={"Authorization": f"Bearer {auditor}"}).json()
    assert any(s["name"] == "checkpoints" and s["status"] == "passed" for s in checked["steps"]), checked["text"]
