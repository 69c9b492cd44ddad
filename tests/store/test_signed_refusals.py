"""A refusal the player signed is covered by their signature; one the operator invented is not (issue 30).

Refusals write no event, so the chain cannot show that a refused command was sent. Given a scheme-3 room where
ann registered a key and bob did not, when ann's signed reveal with a wrong nonce is refused and the room ends,
then the bundle of the whole room VERIFIES: the verifier decides the refused command again, sees it refused with
the recorded code, and ann's signature shows she sent it. A refusal of bob's (unsigned), or one the operator
invents for ann (unsigned, or signed by a key of its own), leaves the verdict INCOMPLETE, resting on its word.
"""

from __future__ import annotations

import json

import msgspec
from bundle_forgery import records_of, with_refusal
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from signed_rooms import ROOM, WRONG_NONCE, Room, ended_room, signed

from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.step import CommandRecord
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import RoomService
from almanac.storage.memory_store import MemoryEventStore


async def test_a_refusal_the_player_signed_is_covered_and_the_bundle_verifies():
    room, bundle = await ended_room("ann")
    report = await verify_room(room.store, ROOM)
    assert report.ok and (report.refusals_rechecked, report.refusals_signed) == (1, 1), report
    assert len(bundle["refusals"]) == 1
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert verdict.ok and verdict.status == "VERIFIED", verdict.text()
    assert "covered by the signature" in next(s.detail for s in verdict.steps if s.name == "refusals")


async def test_a_refusal_of_a_player_who_does_not_sign_rests_on_the_operators_word():
    room, bundle = await ended_room("bob")
    report = await verify_room(room.store, ROOM)
    assert report.ok and (report.refusals_rechecked, report.refusals_signed) == (1, 0), report
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()


async def test_a_refusal_the_operator_invents_for_a_signing_player_is_not_covered():
    _, bundle = await ended_room("ann")
    at = bundle["refusals"][0]["command"]["refused_at_version"]  # where ann's real refusal stood
    base = CommandRecord(command_id=f"{ROOM}:ann:invented", room=ROOM, player="ann", server_time_ms=4_500,
                         body={"kind": "roll", "dice": 6}, refused_at_version=at)
    # Unsigned: the rules refuse it (signature_required), consistent, yet nothing shows ann sent it
    unsigned = verify_bundle(with_refusal(bundle, base, "signature_required"), bundle["head"]["hash"])
    # Signed by the operator's own key: refused signature_invalid, and not ann's signature either
    mallory = Ed25519PrivateKey.from_private_bytes(bytes(32))
    forged_record = msgspec.structs.replace(signed(base, key=mallory), refused_at_version=at)
    forged = verify_bundle(with_refusal(bundle, forged_record, "signature_invalid"), bundle["head"]["hash"])
    for verdict in (unsigned, forged):
        assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()
        assert "operator's word" in verdict.text()


async def test_a_signed_command_refused_after_the_room_moved_is_not_recorded_until_signed_again():
    # ann signs a reveal (wrong nonce) against the version she sees; bob rolls before it arrives.
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    seen = await room.store.latest_version(ROOM)
    await room.roll("b1", "bob")
    moved = await room.send("bad-reveal", "ann", {"kind": "reveal_nonce", "nonce": WRONG_NONCE}, sign=True, seen=seen)
    # Refused at another version than she signed, the refusal would not be hers to stand by: nothing is kept, the
    # answer names the version to sign instead
    assert (moved.error["code"], moved.error["field"], moved.error["allowed"]) == (
        "version_moved", "seen_version", seen + 1), moved.error
    assert await room.store.outcome(ROOM, "bad-reveal") is None and await room.store.rejections(ROOM) == []
    # Signed again over the version she now sees, with the same id: refused by the rules, and kept
    again = await room.send("bad-reveal", "ann", {"kind": "reveal_nonce", "nonce": WRONG_NONCE}, sign=True)
    assert again.error["code"] == "nonce_mismatch" and len(await room.store.rejections(ROOM)) == 1
    # A command the rules accept is decided at a later version than she saw (bob moved the room meanwhile) ...
    await room.roll("b2", "bob")
    assert (await room.send("a1", "ann", {"kind": "roll", "dice": 2}, sign=True, seen=seen)).accepted
    # ... but never before it: a version nobody has seen yet is not one she saw
    ahead = await room.send("a2", "ann", {"kind": "roll", "dice": 2}, sign=True, seen=99)
    assert ahead.error["code"] == "version_moved" and await room.store.outcome(ROOM, "a2") is None
    report = await verify_room(room.store, ROOM)
    assert report.ok and (report.refusals_rechecked, report.refusals_signed) == (1, 1), report


async def test_a_refusal_signed_in_the_old_form_names_no_version_and_rests_on_the_operators_word():
    # ann's client is one from before the v2 form: it signs the command but not the version it saw. The engine
    # still decides it (old clients keep playing), but her signature cannot show where she sent it.
    room, bundle = await ended_room("ann", old_form=True)
    report = await verify_room(room.store, ROOM)
    assert report.ok and (report.refusals_rechecked, report.refusals_signed) == (1, 0), report
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()
    assert "v1 form" in verdict.text()


async def test_a_signed_refusal_shown_twice_at_its_own_version_fails():
    # The one place a v2 refusal re-decides as refused is the version ann signed: the operator shows it there twice
    _, bundle = await ended_room("ann")
    forged = json.loads(json.dumps(bundle))
    forged["refusals"].append(forged["refusals"][0])
    verdict = verify_bundle(forged, bundle["head"]["hash"])
    assert verdict.status == "NOT VERIFIED" and "refused twice" in verdict.text(), verdict.text()


async def test_an_accepted_signed_command_shown_refused_at_the_version_its_player_saw_fails():
    # Given ann's room, where her roll "a1", signed over the version she saw, was accepted
    _, bundle = await ended_room("bob")
    accepted = next(record for record in records_of(bundle) if record.command_id == "a1")
    # When the operator copies that signed record to the refusals, at the one version her signature names
    forged = with_refusal(bundle, msgspec.structs.replace(accepted, refused_at_version=accepted.seen_version),
                          "nonce_mismatch")
    verdict = verify_bundle(forged, bundle["head"]["hash"])
    # Then the bundle does not verify: a command id is decided once
    assert verdict.status == "NOT VERIFIED" and "recorded accepted at version" in verdict.text(), verdict.text()


async def test_an_engine_whose_cached_room_another_moved_decides_a_signed_command_against_the_store():
    # Given ann's room cached by one engine at the version it last wrote, and another engine (a lapsed lease's
    # successor) that moved the room one version on with bob's roll
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    other = RoomService(room.store)
    bob = CommandRecord(command_id="b1", room=ROOM, player="bob", server_time_ms=9_000,
                        body={"kind": "roll", "dice": 5})
    assert (await other.handle(bob)).accepted
    seen = await room.store.latest_version(ROOM)
    # When ann, who saw that newest version, sends a signed roll to the first engine
    outcome = await room.send("a1", "ann", {"kind": "roll", "dice": 2}, sign=True, seen=seen)
    # Then it is decided against the store's version (its cache would have answered version_moved naming a
    # version the room has passed, for her to sign again)
    assert outcome.accepted and outcome.first_version == seen + 1, outcome.error


async def test_an_accepted_signed_command_shown_refused_in_a_live_rooms_bundle_fails_without_the_seed():
    # Given ann's live room (no seed in its bundle yet), where her signed roll "a1" was accepted
    room = await Room(MemoryEventStore()).open(ann_signs=True, ann_signs_join=True)
    await room.roll("a1", "ann", sign=True)
    await room.roll("b1", "bob")
    bundle = json.loads(json.dumps(await dispute_bundle(room.store, ROOM, 0,
                                                        versions=(1, await room.store.latest_version(ROOM)))))
    accepted = next(record for record in records_of(bundle) if record.command_id == "a1")
    # When the operator copies that record to the refusals at the version it names
    forged = with_refusal(bundle, msgspec.structs.replace(accepted, refused_at_version=accepted.seen_version),
                          "nonce_mismatch")
    verdict = verify_bundle(forged, bundle["head"]["hash"])
    # Then the bundle does not verify, though nothing can be decided again without the seed: the ids alone tell
    assert verdict.status == "NOT VERIFIED" and "recorded accepted at version" in verdict.text(), verdict.text()
