"""The forger's attacks on dispute bundles (issue 30): each one gave VERIFIED before whole-chain bundles, each now fails."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import msgspec
import pytest
from bundle_forgery import (
    chain_of,
    copy,
    drop_command,
    forge,
    heal_a_missing_army,
    invented_refusal,
    replay_command,
    revealed_seed,
    with_event,
    with_record,
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


def played_realm_bundle(room: str, seasons: int, ended: bool, versions: tuple[int, int] | None = None) -> dict:
    """The bundle (of ``versions``, else of the whole room) of a realm room of its own (its own seed) with ``seasons``
    of mining played, ended by alice or still running: what an operator or a forger can make under any id."""
    store = MemoryEventStore()

    async def play() -> dict:
        table = RealmTable(store, room)
        await table.create("realm@1")
        await table.play_mining(seasons)
        if ended:
            assert (await table.send("alice", {"kind": "end_room"})).accepted
        return await dispute_bundle(store, room, 0, versions=versions or (1, await store.latest_version(room)))

    return json.loads(json.dumps(asyncio.run(play())))


def live_realm_bundle() -> dict:
    """The bundle of a realm room still running (a season of mining played), versions 1 to its head."""
    return played_realm_bundle("live-realm", 1, ended=False)


def vouched(bundle: dict):
    """The forged bundle verified against its OWN head, as if that head were vouched for: only the content can fail it."""
    return verify_bundle(bundle, bundle["head"]["hash"])


def test_the_honest_trade_bundle_verifies_against_its_head(honest) -> None:
    verdict = verify_bundle(honest, honest["head"]["hash"])
    assert verdict.ok, verdict.text()
    assert [s.name for s in verdict.steps] == ["format", "chain", "anchor", "readable", "rules", "subject", "seed",
                                               "end", "audience", "coverage", "redecide", "refusals"]


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
    invented = played_realm_bundle(ROOM, 2, ended=True, versions=(1, 3))
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
    bundle = live_realm_bundle()
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


@pytest.mark.parametrize("asked", ["realm@2", "board", "nonsense"])
def test_a_create_command_rewritten_to_ask_for_other_rules_fails(golden, asked) -> None:
    # Given a bundle of the room's first versions, and a forger who rewrites the stored create_room record (records
    # are not chained) so that alice appears to have asked for other rules than the room was created under
    honest = bundle_of(golden, versions=(1, 3))
    create = decode_record(base64.b64decode(honest["chain"]["commands"][0][1]))
    forged = with_record(honest, create.command_id, body={**create.body, "ruleset": asked})
    assert forged["commands"][0]["command"]["body"]["ruleset"] == asked  # what a person reading it sees
    # Then the command decided as it stands does not give the recorded room.created (before: the verifier pinned
    # any create_room to the room's own rules, so the lie verified)
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "redecide" and verdict.failed.version == 1, verdict.text()


def test_an_accepted_command_shown_as_refused_fails(golden) -> None:
    # Given a forger who marks alice's join (accepted: its events are in the chain) as refused at version 7
    honest = bundle_of(golden, versions=(1, 3))
    join = decode_record(base64.b64decode(honest["chain"]["commands"][1][1]))
    forged = with_record(honest, join.command_id, refused_at_version=7)
    # Then a refused command's record standing for chained events is a failed coverage step
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "coverage", verdict.text()


def test_a_bundle_whose_first_line_lies_about_who_may_read_it_fails() -> None:
    # Given a live realm room's bundle (AUDITORS ONLY: it carries every hidden value) whose first line a leaker
    # rewrites to say anyone may read it
    leaked = json.loads(json.dumps(live_realm_bundle()))
    leaked["audience"] = {"who": "anyone", "hidden_values": False,
                          "note": "anyone may read this bundle: the room has ended (its seed and hidden values are public)"}
    # Then the verifier tells who may read it from the chain (not ended) and the rules (they hide values), and
    # fails the line (before: it verified and repeated the lie under the verdict)
    verdict = verify_bundle(leaked, leaked["head"]["hash"])
    assert verdict.failed is not None and verdict.failed.name == "audience", verdict.text()
    assert verdict.failed.recorded["who"] == "auditors"


@pytest.mark.parametrize("lie", ["seed note", "a part no step reads", "export time", "chain about", "subject part"])
def test_a_word_no_step_checks_cannot_be_added_or_changed(honest, lie) -> None:
    # Given a forger who leaves the evidence intact but writes words a person reads (before: each verified)
    forged = copy(honest)
    if lie == "seed note":
        forged["seed"]["note"] = "every die of this room was checked by the league's auditor"
    elif lie == "a part no step reads":
        forged["verified_by"] = "the league's auditor, who found alice cheated"
    elif lie == "export time":
        forged["exported_at"] = "2020-01-01T00:00:00.000Z"
    elif lie == "chain about":
        forged["chain"]["about"] = "checked by the league"
    else:
        forged["subject"]["ruling"] = "bob wins the dispute"
    # Then the verdict is NOT VERIFIED: every word of a bundle is either checked against the chain or refused
    verdict = vouched(forged)
    assert verdict.status == "NOT VERIFIED", verdict.text()


def test_a_command_shown_twice_fails(honest) -> None:
    # Given a forger who lists a command of the trade twice (a reader takes it as sent twice), the chain untouched
    forged = copy(honest)
    forged["commands"].insert(1, forged["commands"][0])
    # Then the readable commands must be exactly those that decided the slice, each once (before: VERIFIED)
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "coverage", verdict.text()


@pytest.mark.parametrize("where", ["head as text", "head as a float", "command as a float", "record as a boolean",
                                   "format version as a float", "range as booleans"])
def test_a_number_written_as_another_type_is_refused(honest, golden, where) -> None:
    # Given numbers a lenient reader takes at face value (int("155") and int(24.0) and True == 1; before: VERIFIED,
    # and a head version as text kept POST /bundles/verify from comparing the bundle with the server's own chain)
    forged = copy(honest)
    if where == "head as text":
        forged["head"]["version"] = str(forged["head"]["version"])
    elif where == "head as a float":
        forged["head"]["version"] = float(forged["head"]["version"])
    elif where == "format version as a float":
        forged["format_version"] = 2.0
    elif where == "range as booleans":
        forged = bundle_of(golden, versions=(1, 1))
        forged["subject"].update({"from": True, "to": True})
    elif where == "command as a float":
        forged["commands"][0]["first_version"] = float(forged["commands"][0]["first_version"])
    else:
        forged["chain"]["commands"][0][0] = True
    verdict = vouched(forged)
    assert verdict.status == "NOT VERIFIED", verdict.text()


def test_an_expected_version_in_other_digits_is_refused(honest) -> None:
    # Given an expected head whose version is written in Arabic-Indic digits (str.isdigit() and int() accept them)
    verdict = verify_bundle(honest, "\u0661\u0665\u0665:" + honest["head"]["hash"])
    # Then it is not a version: the anchor step fails naming the form
    assert not verdict.ok and verdict.failed.name == "anchor" and "VERSION:HASH" in verdict.failed.detail


def test_a_command_replayed_later_in_a_history_decided_again_fails(golden) -> None:
    # Given an operator who decides bob's offer of trade-134 a second time, two commands after the first, and
    # decides the whole history again around it with the revealed seed (every event the rules' own, re-sealed)
    honest = bundle_of(golden, versions=(1, 1))
    forged = replay_command(honest, "golden-realm-v1-105", at=107)
    ids = [decode_record(base64.b64decode(raw)).command_id for _, raw in forged["chain"]["commands"]]
    assert ids.count("golden-realm-v1-105") == 2 and ids.index("golden-realm-v1-105") < 105
    # Then the verifier knows a command id is decided once (a resend gets the stored outcome): the replay fails
    # where it was decided again (before: every step passed, VERIFIED)
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "redecide" and "decided already" in verdict.failed.detail, \
        verdict.text()


@pytest.mark.parametrize("claim", [{"version": 2, "ref": "realm@2"}, {"name": "board", "ref": "board@1"}])
def test_a_rule_set_entry_claiming_other_rules_than_room_created_fails(honest, claim) -> None:
    # Given a bundle whose readable rule-set entry names other rules than its chained room.created does
    forged = copy(honest)
    forged["ruleset"].update(claim)
    # Then the rules step fails, the chained room.created first
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "rules" and verdict.failed.sides == ("chained", "readable")


def test_a_history_rewritten_after_the_last_head_a_player_holds_is_not_verified(golden) -> None:
    # Given a player who holds the chain's head at version 120 (an earlier answer), and, once the room has ended
    # (its seed public), anyone who decides the rest of the history again without alice's agreement to trade-134
    # (version 136): every event after 120 the rules' own, re-sealed
    honest = bundle_of(golden, versions=(1, 1))
    held = f"120:{chain_of(honest)[119].hash}"
    forged = drop_command(honest, "golden-realm-v1-106")
    assert chain_of(forged)[119].hash == chain_of(honest)[119].hash and forged["head"] != honest["head"]
    # Then the verdict is not VERIFIED: the anchor reaches version 120, and nothing vouches for what follows
    # (before: VERIFIED, the anchor step passing with a note)
    verdict = verify_bundle(forged, held)
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["anchor"], verdict.text()
    assert f"versions 121..{forged['head']['version']}" in verdict.text()
    # And the honest bundle against the same earlier head is INCOMPLETE alike; only a head at its end VERIFIES it
    assert verify_bundle(honest, held).unchecked == ["anchor"]
    assert verify_bundle(honest, held, anchors=[(f"155:{honest['head']['hash']}", "the server's own chain")]).ok


def test_a_bundle_of_a_trade_the_chain_never_held_fails(honest) -> None:
    # Given a forger who relabels an honest bundle as the story of a trade that never happened, with nothing in it
    # (the exporter answers 404 for such an item; "trade-999: VERIFIED" reads as if it took place)
    forged = copy(honest)
    forged["subject"].update({"item": "trade-999", "story": []})
    forged["events"], forged["commands"] = [], []
    # Then the subject step fails: the chain holds no such trade
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "subject" and "trade-999" in verdict.failed.detail, verdict.text()


def test_a_room_named_like_another_with_a_lookalike_letter_is_refused() -> None:
    # Given a forger's own game under "golden-re\u0430lm-v1" (a Cyrillic a): its verdict would read as the real room's
    invented = played_realm_bundle("golden-re\u0430lm-v1", 1, ended=True, versions=(1, 1))
    # Then it is no room id any deployment gives (ASCII letters, digits, _ . -): the format step fails
    verdict = vouched(invented)
    assert not verdict.ok and verdict.failed.name == "format" and "room id" in verdict.failed.detail, verdict.text()


@pytest.mark.parametrize("shown_as", [float, bool])
def test_a_readable_number_shown_as_another_type_fails(honest, shown_as) -> None:
    # Given a forger who shows a whole number of a readable event as 5.0 or true (Python's == takes them for 5 and 1)
    forged = copy(honest)
    event = next(e["event"] for e in forged["events"] if any(
        isinstance(v, int) and not isinstance(v, bool) and v in (0, 1) for v in e["event"].values()))
    key = next(k for k, v in event.items() if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1))
    event[key] = shown_as(event[key])
    # Then the readable entry is not the chained envelope (before: VERIFIED)
    verdict = vouched(forged)
    assert not verdict.ok and verdict.failed.name == "readable", verdict.text()
