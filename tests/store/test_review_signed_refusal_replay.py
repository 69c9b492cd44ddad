"""Adversarial review: a player's signature on a refused command covers the command, not the version it was
refused at, so an operator can show the same signed refusal again at another version and have it pass as
"covered by the signature" (issue 30: "an invented refusal fails").

ann sent one reveal with a wrong nonce, refused once. The operator adds a second refusal of the same signed
command at another version where the rules refuse it with the same code: the bundle claims ann sent it twice.
"""

from __future__ import annotations

import base64

import msgspec
from bundle_forgery import with_refusal
from signed_rooms import ROOM, ended_room

from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.step import decode_record
from almanac.services.forensics.verify import verify_room


async def test_a_signed_refusal_shown_again_at_another_version_is_not_covered_by_the_signature():
    _, bundle = await ended_room("ann")
    real = decode_record(base64.b64decode(bundle["refusals"][0]["raw"]))
    latest = bundle["head"]["version"]
    covered_elsewhere = []
    for version in range(0, latest + 1):
        if version == real.refused_at_version:
            continue
        replayed = msgspec.structs.replace(real, refused_at_version=version)
        verdict = verify_bundle(with_refusal(bundle, replayed, "nonce_mismatch"), bundle["head"]["hash"])
        if verdict.status == "VERIFIED":
            covered_elsewhere.append(version)
    assert covered_elsewhere == [], (f"ann's one signed refusal (at version {real.refused_at_version}) shown again at "
                                     f"versions {covered_elsewhere} verifies as covered by her signature")


async def test_a_refusal_signed_by_a_key_whose_join_was_not_signed_rests_on_the_operators_word():
    # An operator with Redis access writes ann's join itself, registering a key of its own with no signature (the
    # rules take an unsigned join, for logs from before signed joins), and signs "ann's" refused command with it.
    room, bundle = await ended_room("ann", ann_signs_join=False)
    report = await verify_room(room.store, ROOM)
    assert report.ok and report.unsigned_joins == ["ann"], report
    assert report.refusals_signed == 0, "a refusal signed by a key no signed join registered is counted as signed"
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()
    assert "covered by the signature" not in verdict.text()
