"""Signed seats over HTTP (docs/dice.md): a player registers a key at join and a token alone no longer acts for them.

Given ann creates a realm room (scheme 3 by default) registering the key `almanac player-key` made, when a
command for her seat arrives unsigned, badly signed, or signed by `almanac sign`, then the first two are
refused 422 naming `signature` and change nothing, the signed one is decided, a resend with its id keeps its
roll, and the room's verification names ann as signing and bob as not.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from almanac.services.cli import _load_commands, app

_load_commands()
runner = CliRunner()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def almanac(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def anns_signing_room(api: TestClient, tmp_path: Path, name: str) -> tuple[str, Path, dict]:
    """A realm room (scheme 3 by default, bob's seat empty) ann created over HTTP, registering the key `almanac
    player-key` made (its file under ``tmp_path``) with her join signed by `almanac sign --join`: (room, ann's key
    file, the create's answer, holding her token)."""
    room = f"{name}-{secrets.token_hex(3)}"
    key_file = tmp_path / "ann.key"
    public_key = almanac("player-key", str(key_file))["public_key"]
    join = almanac("sign", "--join", "--room", room, "--player", "ann", "--key", str(key_file))
    created = api.post("/rooms", json={"ruleset": "realm", "player": "ann", "room": room,
                                       "options": {"players": ["ann", "bob"]}, "nonce": join["nonce"],
                                       "public_key": public_key, "join_signature": join["signature"]})
    assert created.status_code == 201 and created.json()["joined"], created.text
    assert created.json()["events"][-1]["event"]["public_key"] == public_key
    return room, key_file, created.json()


def test_a_signing_seat_takes_only_commands_its_player_signed(api: TestClient, tmp_path):
    room, key_file, created = anns_signing_room(api, tmp_path, "signed")
    bob = api.post(f"/rooms/{room}/join", json={"player": "bob"}).json()
    ann = created["token"]  # a token the operator could mint as well
    mine = {"kind": "mine", "ore": "gold"}

    unsigned = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json={"command": mine, "command_id": "m1"})
    bad = api.post(f"/rooms/{room}/commands", headers=bearer(ann),
                   json={"command": mine, "command_id": "m1b", "signature": "ab" * 64})
    no_id = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json={"command": mine, "signature": "ab" * 64})
    assert (unsigned.status_code, unsigned.json()["code"], unsigned.json()["field"]) == (
        422, "signature_required", "signature")
    assert (bad.status_code, bad.json()["code"]) == (422, "signature_invalid")
    assert (no_id.status_code, no_id.json()["code"], no_id.json()["field"]) == (422, "command_id_required", "command_id")
    assert api.get(f"/rooms/{room}").json()["version"] == 3  # created, ann and bob joined: nothing else

    body = almanac("sign", "--room", room, "--player", "ann", "--command-id", "m2", "--key", str(key_file),
                   "--seen-version", "3", json.dumps(mine))
    signed = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json=body)
    assert signed.status_code == 200, signed.text
    resent = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json=body)
    assert resent.json()["duplicate"] and resent.json()["events"] == signed.json()["events"]
    assert api.post(f"/rooms/{room}/commands", headers=bearer(bob["token"]),
                    json={"command": {"kind": "mine", "ore": "gold"}}).status_code in (200, 422)

    report = api.get(f"/rooms/{room}/verification", headers=bearer(ann)).json()
    assert report["ok"], report
    assert (report["dice_scheme"], report["signing_players"], report["unsigned_players"]) == (3, ["ann"], ["bob"])
    assert (report["signed_joins"], report["unsigned_joins"]) == (["ann"], [])


def test_a_signing_player_ends_the_room_with_a_signed_end_and_a_minted_end_is_refused(api: TestClient, tmp_path):
    room, key_file, created = anns_signing_room(api, tmp_path, "signed-end")
    minted = api.post(f"/rooms/{room}/end", headers=bearer(created["token"]), json={"reason": "done"})
    assert (minted.status_code, minted.json()["code"]) == (422, "signature_required")

    body = almanac("sign", "--room", room, "--player", "ann", "--command-id", "end-1", "--key", str(key_file),
                   "--seen-version", str(created["version"]), json.dumps({"kind": "end_room", "reason": "done"}))
    ended = api.post(f"/rooms/{room}/end", headers=bearer(created["token"]),
                     json={"reason": "done", "command_id": "end-1", "signature": body["signature"],
                           "seen_version": body["seen_version"]})
    assert ended.status_code == 200 and ended.json()["events"][-1]["type"] == "room.ended", ended.text
    report = api.get(f"/rooms/{room}/verification", headers=bearer(created["token"])).json()
    assert report["ok"] and report["commands_signed"] == 1, report


def test_a_join_registering_a_key_is_signed_by_it_and_a_substituted_key_is_refused(api: TestClient, tmp_path):
    """The join carries the key's signature of (room, player, key, nonce commitment): without it, with another
    key's, or with the key swapped after signing (what an operator substituting the key would send), it is
    refused 422 and nothing is kept; the signed one is recorded and verify names the join signed."""
    room = f"signed-join-{secrets.token_hex(3)}"
    created = api.post("/rooms", json={"ruleset": "realm", "player": "host", "room": room,
                                       "options": {"players": ["host", "cleo"]}})
    assert created.status_code == 201, created.text
    cleo_key, other_key = tmp_path / "cleo.key", tmp_path / "other.key"
    almanac("player-key", str(cleo_key))
    other = almanac("player-key", str(other_key))["public_key"]
    join = almanac("sign", "--join", "--room", room, "--player", "cleo", "--key", str(cleo_key))

    unsigned = api.post(f"/rooms/{room}/join", json={k: v for k, v in join.items() if k != "signature"})
    swapped = api.post(f"/rooms/{room}/join", json={**join, "public_key": other})
    other_room = api.post(f"/rooms/{room}/join", json={**join, **almanac(
        "sign", "--join", "--room", "elsewhere", "--player", "cleo", "--key", str(cleo_key), "--nonce", join["nonce"])})
    assert (unsigned.status_code, unsigned.json()["code"], unsigned.json()["field"]) == (
        422, "signature_required", "signature")
    assert (swapped.status_code, swapped.json()["code"]) == (422, "signature_invalid")
    assert (other_room.status_code, other_room.json()["code"]) == (422, "signature_invalid")
    assert api.get(f"/rooms/{room}").json()["players"] == ["host"]  # nothing kept

    joined = api.post(f"/rooms/{room}/join", json=join)
    assert joined.status_code == 200, joined.text
    assert joined.json()["events"][-1]["event"]["public_key"] == join["public_key"]
    report = api.get(f"/rooms/{room}/verification", headers=bearer(joined.json()["token"])).json()
    assert report["ok"] and report["signed_joins"] == ["cleo"] and report["unsigned_joins"] == [], report


def test_a_creators_signed_join_names_its_room(api: TestClient, tmp_path):
    key_file = tmp_path / "dora.key"
    public_key = almanac("player-key", str(key_file))["public_key"]
    join = almanac("sign", "--join", "--room", "any", "--player", "dora", "--key", str(key_file))
    unnamed = api.post("/rooms", json={"ruleset": "realm", "player": "dora", "nonce": join["nonce"],
                                       "public_key": public_key, "join_signature": join["signature"]})
    assert (unnamed.status_code, unnamed.json()["code"]) == (422, "room_required")


def test_a_command_signed_against_a_version_the_room_is_not_at_is_answered_409_and_recorded_nowhere(
        api: TestClient, tmp_path):
    # Given ann's signing seat in a realm room at version 3 (created, ann and bob joined)
    room, key_file, created = anns_signing_room(api, tmp_path, "signed-moved")
    api.post(f"/rooms/{room}/join", json={"player": "bob"})
    ann, mine = created["token"], {"kind": "mine", "ore": "gold"}
    assert api.get(f"/rooms/{room}").json()["version"] == 3

    # When she sends a command signed over a version the room has not reached
    ahead = almanac("sign", "--room", room, "--player", "ann", "--command-id", "m1", "--key", str(key_file),
                    "--seen-version", "7", json.dumps(mine))
    moved = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json=ahead)

    # Then 409 version_moved names the field and the version to sign instead, and nothing is recorded
    assert moved.status_code == 409, moved.text
    assert (moved.json()["code"], moved.json()["field"], moved.json()["allowed"]) == (
        "version_moved", "seen_version", 3), moved.json()
    assert api.get(f"/rooms/{room}").json()["version"] == 3
    # and signed again over that version, with the same id, it is decided
    again = almanac("sign", "--room", room, "--player", "ann", "--command-id", "m1", "--key", str(key_file),
                    "--seen-version", "3", json.dumps(mine))
    decided = api.post(f"/rooms/{room}/commands", headers=bearer(ann), json=again)
    assert decided.status_code == 200 and decided.json()["first_version"] == 4, decided.text
