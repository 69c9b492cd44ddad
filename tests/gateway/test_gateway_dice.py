"""Scheme-2 dice over HTTP (docs/dice.md): players join with secret nonces, nobody sees one before the end,
a player may reveal their own, and the end reveals every nonce so the room verifies from them."""

from __future__ import annotations

import hashlib
import secrets

from fastapi.testclient import TestClient


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_realm_room_draws_with_its_players_nonces_and_verifies_after_they_are_revealed(api: TestClient):
    room = f"dice-{secrets.token_hex(3)}"
    ann_nonce, bob_nonce = secrets.token_bytes(32), secrets.token_bytes(32)
    ann_commitment = hashlib.sha256(ann_nonce).hexdigest()

    # Given ann creates a realm room with her nonce, and bob joins with his (commitments only in the events)
    created = api.post("/rooms", json={"ruleset": "realm", "player": "ann", "room": room,
                                       "options": {"players": ["ann", "bob"]},
                                       "nonce": ann_nonce.hex(), "nonce_commitment": ann_commitment})
    assert created.status_code == 201 and created.json()["joined"], created.text
    seed_commitment = api.get(f"/rooms/{room}").json()["seed_commitment"]
    bob = api.post(f"/rooms/{room}/join", json={"player": "bob", "nonce": bob_nonce.hex()})
    assert bob.status_code == 200, bob.text
    assert bob.json()["events"][-1]["event"]["nonce_commitment"] == hashlib.sha256(bob_nonce).hexdigest()
    ann, bob_token = created.json()["token"], bob.json()["token"]

    # When they play a roll, bob tries a wrong reveal, ann reveals hers, and ann ends the room
    mined = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json={"command": {"kind": "mine", "ore": "gold"}})
    assert mined.status_code == 200, mined.text
    seen_before_end = api.get(f"/rooms/{room}/events", headers=bearer(bob_token)).text
    seen_before_end += api.get(f"/rooms/{room}/view", headers=bearer(bob_token)).text
    wrong = api.post(f"/rooms/{room}/commands", headers=bearer(bob_token),
                     json={"command": {"kind": "reveal_nonce", "nonce": ann_nonce.hex()}})
    revealed = api.post(f"/rooms/{room}/commands", headers=bearer(ann),
                        json={"command": {"kind": "reveal_nonce", "nonce": ann_nonce.hex()}})
    ended = api.post(f"/rooms/{room}/end", headers=bearer(bob_token), json={"reason": "done"})

    # Then nobody saw a nonce before the end; the end reveals both and the seed committed before the joins
    assert ann_nonce.hex() not in seen_before_end and bob_nonce.hex() not in seen_before_end
    assert wrong.status_code == 422 and wrong.json()["code"] == "nonce_mismatch"
    assert revealed.status_code == 200 and revealed.json()["events"][0]["type"] == "room.nonce_revealed"
    assert ended.status_code == 200, ended.text
    end = ended.json()["events"][-1]["event"]
    assert end["revealed_nonces"] == {"ann": ann_nonce.hex(), "bob": bob_nonce.hex()}
    assert hashlib.sha256(bytes.fromhex(end["revealed_seed"])).hexdigest() == seed_commitment
    report = api.get(f"/rooms/{room}/verification", headers=bearer(ann)).json()
    assert report["ok"], report
    assert (report["dice_scheme"], report["nonces"], report["players_not_revealing"]) == (3, "revealed", ["bob"])  # new rooms: scheme 3


def test_a_join_must_send_the_nonce_itself_and_a_scheme_1_room_takes_none(api: TestClient):
    room, old = f"dice-{secrets.token_hex(3)}", f"dice1-{secrets.token_hex(3)}"
    nonce = secrets.token_bytes(32)
    assert api.post("/rooms", json={"ruleset": "realm", "player": "ann", "room": room,
                                    "options": {"players": ["ann", "bob", "cy"]}}).status_code == 201
    assert api.post("/rooms", json={"ruleset": "realm", "player": "ann", "room": old, "dice_scheme": 1,
                                    "options": {"players": ["ann", "bob"]}}).status_code == 201

    only_commitment = api.post(f"/rooms/{room}/join",
                               json={"player": "bob", "nonce_commitment": hashlib.sha256(nonce).hexdigest()})
    mismatched = api.post(f"/rooms/{room}/join", json={"player": "bob", "nonce": nonce.hex(),
                                                       "nonce_commitment": "00" * 32})
    not_hex = api.post(f"/rooms/{room}/join", json={"player": "bob", "nonce": "zz" * 32})
    scheme_1 = api.post(f"/rooms/{old}/join", json={"player": "bob", "nonce": nonce.hex()})
    without = api.post(f"/rooms/{room}/join", json={"player": "cy"})

    assert (only_commitment.status_code, only_commitment.json()["code"]) == (422, "nonce_required")
    assert (mismatched.status_code, mismatched.json()["code"]) == (422, "nonce_mismatch")
    assert not_hex.status_code == 422 and not_hex.json()["field"] == "nonce"
    assert (scheme_1.status_code, scheme_1.json()["code"]) == (422, "no_player_nonces")
    assert without.status_code == 200 and without.json()["events"][-1]["event"]["nonce_by_server"] is True
    assert api.get(f"/rooms/{room}").json()["players"] == ["ann", "cy"]  # the refused joins changed nothing
