"""A bundle's verdict names the room's dice scheme and which seats signed (issue 30): VERIFIED is not "nobody could have
acted for a player", and the verdict says for whom the operator could have."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from signed_rooms import ROOM, signing_room

from almanac.events.forensics.bundle_check import VERIFIED, verify_bundle
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.forensics.verify import verify_room
from almanac.storage.export_store import ExportFileStore

REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"  # an ended realm game from before schemes


async def test_a_bundle_of_a_room_nobody_signed_verifies_and_names_the_seats_the_operator_could_have_acted_for():
    # Given a new room where neither ann nor bob registered a key: every command of theirs came with a token alone
    _, bundle = await signing_room()

    # When a stranger verifies its bundle against the head they were given
    verdict = verify_bundle(bundle, bundle["head"]["hash"])

    # Then it verifies, and the verdict names the scheme and both seats as unsigned, with what that leaves open
    assert verdict.status == VERIFIED, verdict.text()
    seats = verdict.seats
    assert (seats.dice_scheme, seats.signing_players, seats.unsigned_players) == (3, [], ["ann", "bob"])
    assert seats.notes == ["players who do not sign (ann, bob): the operator could have acted for them with a token "
                           "it minted"]
    text = verdict.text().splitlines()
    assert text[0].endswith(": VERIFIED")
    assert "  seats: dice scheme 3; seats that sign their commands: none; seats that do not: ann, bob" in text
    assert "  note: players who do not sign (ann, bob): the operator could have acted for them with a token it " \
           "minted" in text


async def test_a_bundle_of_a_room_where_every_seat_signs_has_no_caveat():
    # Given a room where ann and bob each registered a key by a join signed with it, and signed every command
    _, bundle = await signing_room(ann_signs=True, bob_signs=True)

    # When it is verified
    verdict = verify_bundle(bundle, bundle["head"]["hash"])

    # Then it verifies with both seats signing, both joins signed by the key they registered, and no caveat
    assert verdict.status == VERIFIED, verdict.text()
    seats = verdict.seats
    assert (seats.signing_players, seats.unsigned_players, seats.signed_joins, seats.unsigned_joins) == (
        ["ann", "bob"], [], ["ann", "bob"], [])
    assert seats.notes == [] and "note:" not in verdict.text()


async def test_verify_and_the_bundle_verifier_say_the_same_of_the_seats():
    # Given a room where ann signs (her join signed by her key) and bob does not
    room, bundle = await signing_room(ann_signs=True)

    # When the operator's `almanac verify` and a stranger's bundle verifier each report who signed
    report = await verify_room(room.store, ROOM)
    seats = verify_bundle(bundle, bundle["head"]["hash"]).seats

    # Then they name the same scheme and seats, and the same caveat for bob, in the same words (one computation)
    assert report.ok, report.divergence
    assert (report.dice_scheme, report.signing_players, report.unsigned_players, report.signed_joins,
            report.unsigned_joins) == (seats.dice_scheme, seats.signing_players, seats.unsigned_players,
                                       seats.signed_joins, seats.unsigned_joins) == (3, ["ann"], ["bob"], ["ann"], [])
    assert seats.notes == ["players who do not sign (bob): the operator could have acted for them with a token it "
                           "minted"]
    assert all(note in report.notes for note in seats.notes)


def test_a_bundle_of_a_room_from_before_signed_seats_says_its_dice_are_keyed_by_version():
    # Given the golden realm game, played before dice schemes (scheme 1: the server's seed alone)
    store = ExportFileStore.open(REALM)
    room = "golden-realm-v1"
    bundle = json.loads(json.dumps(asyncio.run(dispute_bundle(store, room, 0, versions=(1, 3)))))

    # When its bundle is verified
    verdict = verify_bundle(bundle)

    # Then the verdict says which scheme and that nobody signed: the operator could steer rolls and act for anyone
    seats = verdict.seats
    assert seats.dice_scheme == 1 and seats.signing_players == [] and seats.unsigned_players, verdict.text()
    assert seats.notes[0].startswith("dice scheme 1: rolls are keyed by room and version and no command is signed")
    assert seats.notes[-1].startswith(f"players who do not sign ({', '.join(seats.unsigned_players)}): the operator")
    report = asyncio.run(verify_room(store, room))
    assert report.ok and report.unsigned_players == seats.unsigned_players
    assert all(note in report.notes for note in seats.notes)
