"""The forger's attacks on dispute bundles (issue 30): each one gave VERIFIED before whole-chain bundles, each now fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import msgspec
import pytest
from bundle_forgery import (
    chain_of,
    copy,
    forge,
    heal_a_missing_army,
    invented_refusal,
    revealed_seed,
    with_event,
)
from forensics_support import RealmTable

from almanac.events import codec, readable
from almanac.events.errors import RuleError
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.events.step import decode_record, replay, step
from almanac.services.forensics.bundle import bundle_json, dispute_bundle
from almanac.storage.export_store import ExportFileStore
from almanac.storage.memory_store import MemoryEventStore

REALM = Path(__file__).resolve().parents[1] / "golden" / "realm@1.json"  # an ended realm game with trades
ROOM = "golden-realm-v1"
TRADE = range(24, 37)  # trade-24's events lie in versions 24..36 (the slice: 24, 26, 27, 31..36)


def bundle_of(store, **subject) -> dict:
    return json.loads(json.dumps(asyncio.run(dispute_bundle(store, ROOM, 0, **subject))))


@pytest.fixture(scope="module")
def golden() -> ExportFileStore:
    return ExportFileStore.open(REALM)


@pytest.fixture(scope="module")
def honest(golden) -> dict:
    """Given the bundle of realm trade-24 (the room has ended: its seed is revealed)."""
    return bundle_of(golden, view="trade", item="trade-24")


def vouched(bundle: dict):
    """The forged bundle verified against its OWN head, as if that head were vouched for: only the content can fail it."""
    return verify_bundle(bundle, bundle["head"]["hash"])


def test_the_honest_trade_bundle_verifies_against_its_head(honest) -> None:
    verdict = verify_bundle(honest, honest["head"]["hash"])
    assert verdict.ok, verdict.text()
    assert [s.name for s in verdict.steps] == ["format", "chain", "anchor", "readable", "rules", "subject", "seed",
                                               "end", "coverage", "redecide", "refusals"]


def test_an_event_before_the_slice_edited_and_resealed_fails(honest) -> None:
    # Given a forger who gives bob 9,000 stone less at version 9 (bob at -6000 stone), re-seals the chain and
    # decides the trade's commands again on that history (so the trade's events show bob's forged stock)
    def bob_loses_stone(event: dict) -> None:
        event.update(found="stone", amount=-9000)

    forged = forge(honest, lambda chain: [(old, with_event(e, bob_loses_stone) if old == 9 else e)
                                          for old, e in chain], rerun_slice=True)
    assert replay(chain_of(forged)[:9]).game.cities["bob"].stock["stone"] == -6000
    # Then re-deciding the whole chain (not only the trade) catches it where it happened
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "redecide" and verdict.failed.version == 9, verdict.text()


def test_an_event_after_the_slice_dropped_and_resealed_fails(honest) -> None:
    forged = forge(honest, lambda chain: [(old, e) for old, e in chain if old != 100])
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name in ("coverage", "redecide"), verdict.text()


def test_two_events_before_the_slice_swapped_and_resealed_fail(honest) -> None:
    def swap(chain):
        chain[4], chain[5] = chain[5], chain[4]  # versions 5 and 6: alice's smelting and her herbs
        return chain

    verdict = vouched(forge(honest, swap, rerun_slice=True))
    assert not verdict.ok and verdict.failed.name in ("coverage", "redecide") and verdict.failed.version == 5, \
        verdict.text()


def test_a_forged_nonce_reveal_inserted_and_the_slice_re_run_fails(honest) -> None:
    # Given a forger who inserts a room.nonce_revealed inside the trade and decides the trade's commands again
    # with step() on that history (so the trade's own events agree with their new versions)
    def insert(chain):
        after_the_merchant_left = chain[23][1]
        reveal = msgspec.structs.replace(after_the_merchant_left, type="room.nonce_revealed", command_id="reveal-1",
                                         player="alice", payload=codec.encode(
            {"type": "room.nonce_revealed", "player": "alice", "nonce": "00" * 32}))
        return chain[:24] + [(None, reveal)] + chain[24:]

    forged = forge(honest, insert, rerun_slice=True)
    assert [e["type"] for e in forged["events"]][0] == "realm.merchant_sent"
    # Then the inserted event is no command's event: the whole chain's coverage (or its re-decision) fails it
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name in ("coverage", "redecide"), verdict.text()


def test_an_invented_refusal_never_verifies_even_with_the_real_head(honest) -> None:
    # Given a refusal bob never sent, made consistent with the rules by a forger holding the seed
    chain = chain_of(honest)
    body = {"kind": "mine", "ore": "unobtainium"}
    record = msgspec.structs.replace(decode_record(readable.entry_record_bytes(honest["commands"][0])), player="bob",
                                     body=body)
    with pytest.raises(RuleError) as refused:
        step(replay(chain[:29]), chain[28].hash, record, revealed_seed(chain))
    forged = invented_refusal(honest, "bob", body, 29, refused.value.code)
    # Then the bundle is not VERIFIED, though its chain is the real one: refusals are not chained
    verdict = verify_bundle(forged, honest["head"]["hash"])
    assert not verdict.ok and verdict.status == "INCOMPLETE" and verdict.unchecked == ["refusals"], verdict.text()
    assert "operator's word" in verdict.text()


def test_a_bundle_cut_before_the_room_ended_is_incomplete_naming_what_was_not_checked(golden) -> None:
    document = golden.document(ROOM)
    ended = len(document["envelopes"]) - 1  # room.ended is the last version
    cut = {**document, "seed": None, "envelopes": document["envelopes"][:ended],
           "commands": [c for c in document["commands"] if c[0] <= ended]}
    bundle = bundle_of(ExportFileStore.of_document(cut), view="trade", item="trade-24")
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert not verdict.ok and verdict.status == "INCOMPLETE", verdict.text()
    assert verdict.unchecked == ["seed", "end", "redecide"]
    assert verdict.text().startswith(f"bundle of room {ROOM!r}: INCOMPLETE (not checked: seed, end, redecide)")


def test_a_bundle_without_command_records_is_incomplete(honest) -> None:
    stripped = copy(honest)
    del stripped["chain"]["commands"]
    verdict = verify_bundle(stripped, honest["head"]["hash"])
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["coverage", "redecide"], verdict.text()


def test_a_versions_bundle_with_from_after_to_is_refused(golden) -> None:
    bundle = bundle_of(golden, versions=(30, 40))
    backwards = copy(bundle)
    backwards["subject"].update({"from": 40, "to": 30})
    backwards["events"], backwards["commands"] = [], []
    verdict = verify_bundle(backwards, bundle["head"]["hash"])
    assert not verdict.ok and verdict.failed.name == "subject", verdict.text()


def test_a_whole_invented_room_is_not_verified_without_a_head_from_elsewhere(golden) -> None:
    # Given the operator's own game under the room's id: every command decided by the rules, its own seed
    store = MemoryEventStore()

    async def invent() -> dict:
        table = RealmTable(store, ROOM)
        await table.create("realm@1")
        await table.play_mining(2)
        assert (await table.send("alice", {"kind": "end_room"})).accepted
        return await dispute_bundle(store, ROOM, 0, versions=(1, 3))

    invented = json.loads(json.dumps(asyncio.run(invent())))
    # Then alone it is INCOMPLETE (nothing vouches for its head), and against the real room's head it fails
    alone = verify_bundle(invented)
    assert alone.status == "INCOMPLETE" and alone.unchecked == ["anchor"], alone.text()
    real_head = golden.document(ROOM)["envelopes"]
    real = bundle_of(golden, versions=(1, 1))["head"]["hash"]
    against = verify_bundle(invented, real)
    assert not against.ok and against.failed.name == "anchor", against.text()
    assert len(real_head) == 155


def test_an_army_healed_for_a_city_with_no_army_is_a_failed_step_not_an_exception(honest) -> None:
    # Given a forged event the rules cannot even fold: alice has had no army since version 4
    forged = heal_a_missing_army(honest)
    # Then it is a failed step naming where, never an AssertionError out of the verifier (nor a 500 over HTTP)
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "coverage" and verdict.failed.version == 7, verdict.text()


def test_a_live_rooms_bundle_says_on_its_first_line_that_it_is_for_auditors_only() -> None:
    # Given a realm room still running: its chain carries every player's hidden dice and stock
    store = MemoryEventStore()

    async def live() -> dict:
        table = RealmTable(store, "live-realm")
        await table.create("realm@1")
        await table.play_mining(1)
        head = await store.latest_version("live-realm")
        return await dispute_bundle(store, "live-realm", 0, versions=(1, head))

    bundle = asyncio.run(live())
    # Then the file's first line says who may read it, and the verdict repeats it
    first_line = bundle_json(bundle).splitlines()[0]
    assert first_line.startswith('{"audience": {"who": "auditors", "hidden_values": true')
    assert "AUDITORS ONLY" in first_line and "do not give it to a player" in first_line
    assert json.loads(bundle_json(bundle)) == json.loads(json.dumps(bundle))
    assert verify_bundle(bundle).text().splitlines()[1].startswith("  audience: AUDITORS ONLY")
    # And once the room has ended (seed and hidden values public), anyone may read it
    ended = json.loads(bundle_json(bundle_of(ExportFileStore.open(REALM), versions=(1, 2))))
    assert ended["audience"]["who"] == "anyone"


def test_another_seed_revealed_at_the_end_fails_the_seed_step(honest) -> None:
    # Given a forger who reveals a seed of their choosing in room.ended and re-seals (to make other dice agree)
    def another_seed(event: dict) -> None:
        event["revealed_seed"] = "11" * 32

    forged = forge(honest, lambda chain: [(old, with_event(e, another_seed) if old == 155 else e) for old, e in chain])
    forged["seed"]["revealed"] = "11" * 32
    # Then the seed does not hash to the commitment the room made at creation, before play
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "seed" and verdict.failed.sides == ("committed", "revealed")
