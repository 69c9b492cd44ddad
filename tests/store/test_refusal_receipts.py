"""Refusals a player can prove: the deployment signs each refusal it answers, and the receipt holds it to it (issue 30).

A refusal writes no event, so the chain alone can neither show that a refusal happened nor that it was wrong. Given a
scheme-3 room of the counter rules (ann signs her commands, bob does not), the deployment's refusal answer carries a
receipt: the room, the version the command was refused at with the commitment head a checkpoint there signs, the
command's stored record and the code, signed by the checkpoint key. Then a bundle of the ended room, checked with the
receipt a player holds, proves the operator refused a command the rules accept (a false refusal), rejects a receipt
that is not the deployment's, and covers an honest refusal that otherwise rests on the operator's word.
"""

from __future__ import annotations

import asyncio
import base64
import json

import msgspec
from bundle_forgery import stranger_ring, with_refusal
from signed_rooms import (
    DEPLOYMENT,
    ROOM,
    WRONG_NONCE,
    anns_falsely_refused_roll,
    bobs_receipted_refusal,
    ended_room,
    whole_bundle,
)
from typer.testing import CliRunner

from almanac.events import codec, commitments as cm
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.step import CommandRecord, decode_record
from almanac.services.cli import _load_commands, app

KEYS = DEPLOYMENT.ring.document


async def test_an_honest_refusal_receipt_covers_the_refusal_and_the_bundle_verifies():
    # Given bob's refused reveal, answered with a receipt, and the bundle of the ended room
    room, receipt, record = await bobs_receipted_refusal()
    bundle = await whole_bundle(room)
    assert [entry["command"]["command_id"] for entry in bundle["refusals"]] == [receipt["command_id"]]
    # (bob holds the checkpoint his last read of the ended room carried: on its head)
    held = at_its_end(bundle)
    # Without the receipt, bob's (unsigned) refusal rests on the operator's word
    alone = verify_bundle(bundle, keys=KEYS, checkpoints=held)
    assert alone.status == "INCOMPLETE" and alone.unchecked == ["refusals"], alone.text()
    # When bob hands in his receipt, the refusal decided again at its version is refused with the signed code,
    # and the bundle's refusal is the one the deployment signed: VERIFIED
    verdict = verify_bundle(bundle, keys=KEYS, receipts=[receipt], checkpoints=held)
    assert verdict.ok and verdict.status == "VERIFIED", verdict.text()
    assert next(s for s in verdict.steps if s.name == "receipts").status == "passed"
    # And the bundle showing bob's refusal with another code than the one signed fails, naming the receipt
    recoded = json.loads(json.dumps(bundle))
    recoded["refusals"][0]["error"]["code"] = "nonce_reused"
    lied = verify_bundle(recoded, keys=KEYS, receipts=[receipt])
    assert not lied.ok and lied.failed.name == "refusals" and "refusal receipt" in lied.failed.detail, lied.text()


async def test_a_receipt_signs_nothing_the_player_did_not_know():
    # Given bob's receipt
    room, receipt, record = await bobs_receipted_refusal()
    # Then it holds exactly: the command bob sent (its record, stamped with the version it was refused at), who and
    # which command, the code bob was answered, and the commitment head a checkpoint at that version carries
    assert set(receipt) == set(cm.RECEIPT_FIELDS)
    sent = msgspec.structs.replace(record, refused_at_version=None)
    assert sent.body == {"kind": "reveal_nonce", "nonce": WRONG_NONCE} and sent.player == "bob"
    assert codec.encode(record) == base64.b64decode(receipt["raw"])
    checkpoint = await DEPLOYMENT.checkpoint(room.store, ROOM, receipt["version"])
    assert receipt["head"] == checkpoint["head"] and receipt["version"] == record.refused_at_version
    assert receipt["code"] == "nonce_mismatch" and cm.receipt_problem(receipt) is None
    assert cm.receipt_signature_valid(cm.trusted_keys(KEYS)[receipt["kid"]], receipt)


async def test_the_operator_falsely_refuses_anns_valid_roll_and_her_receipt_proves_it():
    # Given ann's signed roll, which the rules accept at the version she saw, answered "refused" (game_over) by a
    # cheating operator with a receipt, and nothing recorded (so no bundle shows the refusal); she sent it again
    # under another id, and the room went on to its end
    room, receipt, refused = await anns_falsely_refused_roll()
    at = refused.refused_at_version
    bundle = await whole_bundle(room)
    # The operator's bundle of the room verifies, against the head ann's last read carried: the chain alone cannot
    # show a refusal that was never recorded
    assert verify_bundle(bundle, keys=KEYS, checkpoints=at_its_end(bundle)).ok
    # When ann hands in her receipt, the verifier decides her roll again at that version: the rules accept it
    verdict = verify_bundle(bundle, keys=KEYS, receipts=[receipt])
    # Then the verdict is NOT VERIFIED, the failed step naming her receipt
    assert not verdict.ok and verdict.status == "NOT VERIFIED", verdict.text()
    failed = verdict.failed
    assert failed.name == "receipts" and failed.version == at, verdict.text()
    assert "false refusal" in failed.detail and cm.receipt_label(receipt) in failed.detail, failed.detail
    # And showing the refusal in the bundle does not help the operator: the receipt is named first
    shown = with_refusal(bundle, refused, "game_over")
    again = verify_bundle(shown, keys=KEYS, receipts=[receipt])
    assert again.failed.name == "receipts" and "false refusal" in again.failed.detail, again.text()


async def test_a_forged_or_altered_receipt_is_refused():
    # Given bob's honest receipt and the bundle of the ended room
    room, receipt, _ = await bobs_receipted_refusal()
    bundle = await whole_bundle(room)
    record = decode_record(base64.b64decode(receipt["raw"]))
    # A receipt of a refusal that never happened, signed by a key that is not the deployment's
    invented = msgspec.structs.replace(record, command_id=f"{ROOM}:bob:invented")
    raw = codec.encode(invented)
    head = bytes.fromhex(receipt["head"])
    forged = stranger_ring().sign_refusal(ROOM, receipt["version"], head, invented, raw, "nonce_mismatch")
    # The honest receipt with its code changed after signing
    altered = {**receipt, "code": "nonce_reused"}
    # A well-signed receipt of another room
    elsewhere = {**receipt, "room": "another"}
    for bad, why in ((forged, "not in the trusted key set"), (altered, "signature is not valid"),
                     (elsewhere, "signature is not valid")):
        verdict = verify_bundle(bundle, keys=KEYS, receipts=[bad])
        assert not verdict.ok and verdict.failed.name == "receipts", verdict.text()
        assert why in verdict.failed.detail and cm.receipt_label(bad) in verdict.failed.detail, verdict.failed.detail
    # Receipts without a key set from outside, and one that is not a receipt, fail too (never an exception)
    assert verify_bundle(bundle, receipts=[receipt]).failed.name == "receipts"
    for junk in ({**receipt, "extra": 1}, {**receipt, "raw": "%%%"}, [1], "x"):
        assert verify_bundle(bundle, keys=KEYS, receipts=[junk]).failed.name == "receipts"


async def test_her_cli_reads_the_receipt_as_saved_and_names_the_false_refusal(tmp_path):
    # Given ann's receipt of the falsely refused roll, saved as the refusal answer carried it, and the key set
    room, receipt, _ = await anns_falsely_refused_roll()
    bundle, saved, keys = tmp_path / "bundle.json", tmp_path / "receipt.json", tmp_path / "keys.json"
    bundle.write_text(json.dumps(await whole_bundle(room)))
    saved.write_text(json.dumps(receipt))
    keys.write_text(json.dumps(KEYS))
    # When she runs `almanac verify-bundle --receipts` (no Redis, no server)
    result = await asyncio.to_thread(_invoke, "verify-bundle", str(bundle), "--receipts", str(saved), "--keys", str(keys))
    # Then it exits 1, the failed step naming her receipt
    assert result.exit_code == 1 and "[failed] receipts" in result.stdout and "false refusal" in result.stdout, result.output
    # and bob's honest receipt, in an almanac-receipts file with its key set, covers his refusal: exit 0
    room, receipt, _ = await bobs_receipted_refusal()
    whole = await whole_bundle(room)
    bundle.write_text(json.dumps(whole))
    saved.write_text(json.dumps({"format": "almanac-receipts", "format_version": 1, "keys": KEYS, "receipts": [receipt]}))
    held = tmp_path / "checkpoints.json"  # with the checkpoint his last read of the ended room carried
    held.write_text(json.dumps({"format": "almanac-checkpoints", "format_version": 1, "keys": KEYS,
                                "checkpoints": at_its_end(whole)}))
    result = await asyncio.to_thread(_invoke, "verify-bundle", str(bundle), "--receipts", str(saved),
                                     "--checkpoints", str(held))
    assert result.exit_code == 0 and "[passed] receipts" in result.stdout, result.output
    saved.write_text(json.dumps({"not": "a receipt"}))
    result = await asyncio.to_thread(_invoke, "verify-bundle", str(bundle), "--receipts", str(saved))
    assert result.exit_code != 0 and "not a receipt file" in result.output, result.output


def at_its_end(bundle: dict) -> list[dict]:
    """What a player holds who read the ended room: the checkpoint on its head (the same the bundle carries; held by
    a player, it anchors the head; carried by the bundle alone, it is only the operator's word)."""
    return [bundle["checkpoint"]]


def _invoke(*args: str):
    _load_commands()
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


async def test_a_receipt_the_operator_signs_for_a_refusal_it_invented_for_a_signing_seat_covers_nothing():
    # Given ann's ended room (ann signs her commands), its bundle shown with no refusal of hers but one the operator
    # invents: an unsigned roll "refused" signature_required, which ann never sent
    room, _ = await ended_room("ann")
    bundle = {**await whole_bundle(room), "refusals": []}
    invented = CommandRecord(command_id=f"{ROOM}:ann:invented", room=ROOM, player="ann", server_time_ms=4_500,
                             body={"kind": "roll", "dice": 6}, refused_at_version=2)
    forged = with_refusal(bundle, invented, "signature_required")
    # When the operator also signs a receipt of that refusal with the deployment's key and hands it in
    receipt = await DEPLOYMENT.refusal_receipt(room.store, codec.encode(invented), "signature_required")
    assert receipt is not None
    verdict = verify_bundle(forged, keys=KEYS, receipts=[receipt])
    # Then the refusal still rests on the operator's word: a receipt shows the deployment answered it, not that ann
    # sent it, and a signing seat's refusal is covered by her own signature alone
    assert verdict.status == "INCOMPLETE" and "refusals" in verdict.unchecked, verdict.text()


async def test_a_receipt_for_a_name_that_never_joined_covers_nothing():
    # Given bob's ended room, and a refusal the operator invents for mallory, who never joined it, with a receipt it
    # signs itself
    room, _, _ = await bobs_receipted_refusal()
    bundle = {**await whole_bundle(room), "refusals": []}
    invented = CommandRecord(command_id=f"{ROOM}:mallory:1", room=ROOM, player="mallory", server_time_ms=4_500,
                             body={"kind": "roll", "dice": 6}, refused_at_version=2)
    forged = with_refusal(bundle, invented, "not_joined")
    receipt = await DEPLOYMENT.refusal_receipt(room.store, codec.encode(invented), "not_joined")
    # When it is checked with that receipt, Then the refusal still rests on the operator's word
    verdict = verify_bundle(forged, keys=KEYS, receipts=[receipt], checkpoints=at_its_end(bundle))
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()
