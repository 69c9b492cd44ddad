"""A refusal by the rules is answered with the deployment's signed receipt; POST /bundles/verify checks receipts and
says which seats signed (issue 30)."""

from __future__ import annotations

import msgspec
from fastapi.testclient import TestClient

from almanac.events import commitments as cm
from almanac.services.gateway.responses import BundleVerdict, Failure, RefusalReceipt


def test_a_refused_move_carries_a_receipt_that_covers_the_refusal_in_the_ended_rooms_bundle(api: TestClient,
                                                                                          auditor: str) -> None:
    keys = api.get("/.well-known/almanac-keys.json").json()
    # Given tess's board room, when she places an element that is not the current one
    created = api.post("/rooms", json={"ruleset": "board", "player": "tess"}).json()
    room, token = created["room"], {"Authorization": f"Bearer {created['token']}"}
    move = {"command_id": "wrong-element", "command": {"kind": "place_element", "element": 999, "row": 0,
                                                       "column": 0, "rotation": 0, "mirror": False}}
    refused = api.post(f"/rooms/{room}/commands", json=move, headers=token)
    # Then the 422 carries a receipt signed by a key of the published key set, for the version she was refused at
    assert refused.status_code == 422 and refused.json()["code"] == "board.not_current_element", refused.text
    receipt = refused.json()["receipt"]
    assert cm.receipt_problem(receipt) is None, receipt
    assert cm.receipt_signature_valid(cm.trusted_keys(keys)[receipt["kid"]], receipt)
    assert (receipt["room"], receipt["player"], receipt["version"]) == (room, "tess", created["version"])
    assert receipt["command_id"].endswith(":wrong-element") and receipt["code"] == "board.not_current_element"
    msgspec.convert(receipt, msgspec.defstruct("R", [], bases=(RefusalReceipt,), forbid_unknown_fields=True,
                                               kw_only=True))
    assert msgspec.convert(refused.json(), Failure).receipt is not None  # (the Error schema documents it)
    # and a resend of the same command id is answered the same refusal and the same receipt
    again = api.post(f"/rooms/{room}/commands", json=move, headers=token)
    assert again.status_code == 422 and again.json()["duplicate"] and again.json()["receipt"] == receipt, again.text

    # When she ends the room and has its bundle verified with her receipt
    assert api.post(f"/rooms/{room}/end", json={"reason": "done"}, headers=token).status_code == 200
    latest = api.get(f"/rooms/{room}", headers=token).json()["version"]
    bundle = api.get(f"/rooms/{room}/dispute?from=1&to={latest}", headers={"Authorization": f"Bearer {auditor}"})
    assert bundle.status_code == 200 and len(bundle.json()["refusals"]) == 1, bundle.text
    without = api.post("/bundles/verify", json={"bundle": bundle.json()}, headers=token).json()
    verdict = api.post("/bundles/verify", json={"bundle": bundle.json(), "receipts": [receipt]}, headers=token)
    # Then without it her (unsigned) refusal rests on the operator's word; with it the bundle VERIFIES
    assert without["status"] == "INCOMPLETE" and without["unchecked"] == ["refusals"], without["text"]
    assert verdict.status_code == 200 and verdict.json()["status"] == "VERIFIED", verdict.text
    # and the answer says which seats signed their commands, as the CLI prints it (typed in the OpenAPI)
    seats = verdict.json()["seats"]
    assert seats["unsigned_players"] == ["tess"] and seats["signing_players"] == [], seats
    assert "seats: dice scheme" in verdict.json()["text"]
    msgspec.convert(verdict.json(), msgspec.defstruct("V", [], bases=(BundleVerdict,), forbid_unknown_fields=True,
                                                      kw_only=True))
    spec = api.get("/openapi.json").json()["components"]["schemas"]
    assert "seats" in spec["BundleVerdict"]["properties"] and "receipts" in spec["VerifyBundleRequest"]["properties"]
    assert spec["Error"]["properties"]["receipt"]["$ref"].endswith("/RefusalReceipt")

    # A receipt altered after signing is a failed step naming it; one that is not a receipt is a 422 naming the field
    altered = {**receipt, "code": "game_over"}
    forged = api.post("/bundles/verify", json={"bundle": bundle.json(), "receipts": [altered]}, headers=token).json()
    assert forged["status"] == "NOT VERIFIED" and forged["seats"] is None, forged["text"]
    failed = next(s for s in forged["steps"] if s["status"] == "failed")
    assert failed["name"] == "receipts" and cm.receipt_label(altered) in failed["detail"], failed
    for bad in ({**receipt, "extra": 1}, {**receipt, "raw": "not base64!"}, {**receipt, "code": "X" * 101}):
        answer = api.post("/bundles/verify", json={"bundle": bundle.json(), "receipts": [bad]}, headers=token)
        assert answer.status_code == 422 and "receipts" in answer.json()["field"], answer.text
