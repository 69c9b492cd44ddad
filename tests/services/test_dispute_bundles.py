"""Dispute bundles: a realm trade proven offline by a stranger, and every kind of forgery caught by a named step."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from bundle_forgery import rewrite
from typer.testing import CliRunner

from almanac.events import codec, readable
from almanac.events.copies import relabel
from almanac.events.forensics.bundle_check import verify_bundle
from almanac.services.cli import _load_commands, app
from almanac.services.forensics.verify import verify_room
from almanac.storage.export_store import ExportFileStore
from almanac.storage.redis_store import RedisEventStore

_load_commands()
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REALM = GOLDEN / "realm@1.json"  # an ended realm game (seed revealed) with trades: trade-24 is rolled with dice
ROOM = "golden-realm-v1"
runner = CliRunner()


def invoke(redis_url: str | None, *args: str):
    env = {"REDIS_URL": redis_url} if redis_url else {}
    return runner.invoke(app, list(args), env={**env, "COLUMNS": "200"})


async def ainvoke(redis_url: str | None, *args: str):
    return await asyncio.to_thread(invoke, redis_url, *args)


@pytest.fixture
async def trade_bundle(redis_client, redis_url, tier) -> dict:
    """Given the golden realm game imported into a real Redis (live, or archived: ``tier``), when
    `almanac dispute --trade trade-24` runs."""
    imported = await ainvoke(redis_url, "import", str(REALM))
    assert imported.exit_code == 0, imported.output
    await tier.settle(tier.store(redis_client), ROOM)
    result = await ainvoke(redis_url, "dispute", ROOM, "--trade", "trade-24")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def failed_step(bundle: dict) -> tuple[str, str]:
    verdict = verify_bundle(bundle, bundle["head"]["hash"])  # even with its own head vouched for
    assert not verdict.ok
    return verdict.failed.name, verdict.text()


# --- the stories ------------------------------------------------------------------------------


async def test_a_realm_trade_bundle_is_readable_and_verifies_offline_in_a_fresh_process(trade_bundle, tmp_path) -> None:
    bundle = trade_bundle
    assert bundle["ruleset"]["ref"] == "realm@1" and bundle["ruleset"]["fingerprint"].startswith("sha256:")
    assert bundle["seed"]["status"] == "revealed" and bundle["seed"]["revealed"]
    assert [e["version"] for e in bundle["events"]] == [24, 26, 27, 31, 32, 33, 34, 35, 36]
    rolled = next(e for e in bundle["events"] if e["type"] == "realm.trade_rolled")
    assert rolled["event"]["buyer"]["dice"] == ["star", "skull", "star"] and rolled["hash"] and rolled["summary"]
    file = tmp_path / "trade.json"
    file.write_text(json.dumps(bundle))
    # A stranger's machine: no REDIS_URL, no server; the verifier module must not even import redis.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS", "ALMANAC"))}
    head = bundle["head"]["hash"]  # as a player's client or an earlier export gives it
    script = ("import json, sys; from almanac.events.forensics.bundle_check import verify_bundle; "
              "v = verify_bundle(json.load(open(sys.argv[1])), sys.argv[2]); print(v.text()); "
              "assert 'redis' not in sys.modules and not any(m.startswith('almanac.services') or "
              "m.startswith('almanac.storage') for m in sys.modules), 'the verifier imported more than events'; "
              "sys.exit(0 if v.ok else 1)")
    done = subprocess.run([sys.executable, "-c", script, str(file), head], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    for step in ("format", "chain", "anchor", "readable", "rules", "subject", "seed", "end", "coverage", "redecide",
                 "refusals"):
        assert f"[passed] {step}" in done.stdout
    almanac = str(Path(sys.executable).with_name("almanac"))
    cli = subprocess.run([almanac, "verify-bundle", str(file), "--expect-head", head], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert cli.returncode == 0 and ": VERIFIED" in cli.stdout, cli.stdout + cli.stderr
    # Without a head from elsewhere the CLI says what it could not check and exits non-zero (3: INCOMPLETE)
    alone = subprocess.run([almanac, "verify-bundle", str(file)], env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert alone.returncode == 3 and "INCOMPLETE (not checked: anchor)" in alone.stdout, alone.stdout + alone.stderr


async def test_a_tampered_die_is_caught_by_redecide_even_with_the_chain_resealed(trade_bundle) -> None:
    def roll_better(event: dict) -> None:
        event["buyer"]["dice"] = ["star", "star", "star"]

    step, text = failed_step(rewrite(trade_bundle, 32, roll_better, reseal=True))
    assert step == "redecide" and "event.buyer" in text and "version 32" in text
    step, _ = failed_step(rewrite(trade_bundle, 32, roll_better, reseal=False))
    assert step == "chain"


async def test_a_failed_verification_names_the_differing_field_and_both_values(trade_bundle, tmp_path) -> None:
    # Given a bundle whose die at version 32 was changed (skull to star) and the chain re-sealed
    def roll_better(event: dict) -> None:
        event["buyer"]["dice"] = ["star", "star", "star"]

    file = tmp_path / "forged.json"
    file.write_text(json.dumps(rewrite(trade_bundle, 32, roll_better, reseal=True)))
    # When a stranger verifies it with the CLI
    result = await ainvoke(None, "verify-bundle", str(file))
    # Then the failure names the one die that differs, with both values, and prints no whole event
    assert result.exit_code == 1
    assert "(differs in: event.buyer.dice[1])" in result.stdout, result.stdout
    assert 'event.buyer.dice[1]: recorded "star", re-decided "skull"' in result.stdout
    assert "recorded:   {" not in result.stdout and '"transfers"' not in result.stdout
    # And a readable entry that lies is named to the field too, each side by what it is: the chained event
    # (the evidence) and the bundle's readable copy (the lie), never "recorded" for the tampered copy
    bundle = json.loads(json.dumps(trade_bundle))
    bundle["events"][4]["event"]["buyer"]["dice"][1] = "star"
    assert 'buyer.dice[1]: chained "skull", readable "star"' in verify_bundle(bundle).text()
    # And so is a readable command that lies: the stored record first, the readable copy second
    bundle = json.loads(json.dumps(trade_bundle))
    bundle["commands"][0]["command"]["command_id"] = "forged"
    shown = verify_bundle(bundle)
    assert shown.failed.name == "coverage" and ", readable \"forged\"" in shown.text(), shown.text()
    assert shown.failed.sides == ("stored", "readable")


async def test_a_tampered_transfer_is_caught_by_the_chain(trade_bundle) -> None:
    def more_wood(event: dict) -> None:
        event["transfers"][0]["amount"] = 9000

    step, text = failed_step(rewrite(trade_bundle, 36, more_wood, reseal=False))
    assert step == "chain" and "altered after sealing" in text and "version 36" in text


async def test_a_dropped_event_is_caught_by_the_chain(trade_bundle) -> None:
    bundle = json.loads(json.dumps(trade_bundle))
    del bundle["chain"]["envelopes"][29]
    bundle["head"]["version"] -= 1
    step, text = failed_step(bundle)
    assert step == "chain" and "version 30" in text


async def test_a_forged_chain_resealed_to_a_new_head_is_caught_by_redecide(trade_bundle) -> None:
    def steal(event: dict) -> None:
        event["transfers"][0]["amount"] = 1

    forged = rewrite(trade_bundle, 36, steal, reseal=True)
    step, text = failed_step(forged)
    assert step == "redecide" and "event.transfers" in text
    # And the head no longer matches the one the room published.
    assert not verify_bundle(forged, expect_head=trade_bundle["head"]["hash"]).ok


async def test_a_trade_step_left_out_of_the_bundle_is_caught_by_subject(trade_bundle) -> None:
    bundle = json.loads(json.dumps(trade_bundle))
    returned = bundle["events"].pop()  # the merchant's return: the goods that came back
    bundle["subject"]["story"] = [s for s in bundle["subject"]["story"] if s["version"] != returned["version"]]
    step, text = failed_step(bundle)
    assert step == "subject" and "left out" in text


async def test_a_readable_event_that_lies_about_its_bytes_is_caught(trade_bundle) -> None:
    bundle = json.loads(json.dumps(trade_bundle))
    bundle["events"][4]["event"]["buyer"]["dice"] = ["star", "star", "star"]
    step, _ = failed_step(bundle)
    assert step == "readable"


async def test_a_version_range_bundle_and_bad_requests(redis_client, redis_url, tier) -> None:
    assert (await ainvoke(redis_url, "import", str(REALM))).exit_code == 0
    await tier.settle(tier.store(redis_client), ROOM)
    ranged = await ainvoke(redis_url, "dispute", ROOM, "--versions", "30..40")
    assert ranged.exit_code == 0, ranged.output
    bundle = json.loads(ranged.stdout)
    assert [e["version"] for e in bundle["events"]] == list(range(30, 41))
    assert verify_bundle(bundle, bundle["head"]["hash"]).ok
    for args, message in [(["--versions", "9..999"], "versions 1..155"), (["--trade", "nosuch"], "no trade"),
                          (["--view", "nosuch", "--id", "x"], "no audit view"), (["--versions", "x"], "A..B"), ([], "exactly one")]:
        result = await ainvoke(redis_url, "dispute", ROOM, *args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)


async def test_a_room_that_has_not_ended_says_what_stays_unverified(redis_client, redis_url) -> None:
    store = RedisEventStore(redis_client)
    exported = ExportFileStore.open(REALM)
    document = exported.document(ROOM)
    # The same game cut before its end: no room.ended, so no revealed seed.
    ended_at = next(i for i, data in enumerate(document["envelopes"])
                    if codec.decode_envelope(base64.b64decode(data), ROOM, i + 1).type == "room.ended")
    cut = {**document, "seed": None, "envelopes": document["envelopes"][:ended_at],
           "commands": [c for c in document["commands"] if c[0] <= ended_at]}
    from almanac.storage.export_store import import_room
    await import_room(ExportFileStore.of_document(cut), store, ROOM)
    result = await ainvoke(redis_url, "dispute", ROOM, "--trade", "trade-24")
    bundle = json.loads(result.stdout)
    assert bundle["seed"]["status"] == "not_revealed" and "not ended" in bundle["seed"]["note"]
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    assert verdict.status == "INCOMPLETE" and verdict.unchecked == ["seed", "end", "redecide"], verdict.text()
    assert (await verify_room(store, ROOM)).chain_checked == ended_at


# --- export -> import --as -> verify ----------------------------------------------------------


async def test_a_room_imported_as_a_copy_sits_beside_the_original_and_verifies_as_its_history(
        redis_client, redis_url, tmp_path) -> None:
    store = RedisEventStore(redis_client)
    # Given the golden realm game (a format_version 1 file) imported, then exported in the readable format
    assert (await ainvoke(redis_url, "import", str(REALM))).exit_code == 0
    exported = await ainvoke(redis_url, "export", ROOM)
    document = json.loads(exported.stdout)
    assert document["format_version"] == 2 and document["head"]["version"] == 155
    file = tmp_path / "realm.json"
    file.write_text(exported.stdout)
    # When it is imported again as a copy
    copied = await ainvoke(redis_url, "import", str(file), "--as", "realm-copy")
    assert copied.exit_code == 0, copied.output
    # Then the copy is re-sealed under its own id, names its origin, and verifies as that origin's history
    original, copy = await store.read(ROOM), await store.read("realm-copy")
    assert [e.payload for e in original] == [e.payload for e in copy] and copy[0].room == "realm-copy"
    assert copy[-1].hash != original[-1].hash
    assert json.loads(await store.load_origin("realm-copy")) == {"room": ROOM, "version": 155,
                                                                 "hash": original[-1].hash}
    report = await verify_room(store, "realm-copy")
    assert report.ok and report.commands_redecided == 118 and "a copy of room" in report.notes[0], report
    assert (await verify_room(store, ROOM)).ok
    # Its export carries the origin, and a copy of the copy still names the first room
    again = json.loads((await ainvoke(redis_url, "export", "realm-copy")).stdout)
    assert again["origin"] == {"room": ROOM, "version": 155, "hash": original[-1].hash}
    (tmp_path / "copy.json").write_text(json.dumps(again))
    assert (await ainvoke(None, "verify", "--file", str(tmp_path / "copy.json"))).exit_code == 0
    assert (await ainvoke(redis_url, "import", str(tmp_path / "copy.json"), "--as", "copy-2")).exit_code == 0
    assert (await verify_room(store, "copy-2")).ok
    # A copy whose history was rewritten (re-sealed to hide it) is caught: it is no longer the origin's
    chain = await store.read("realm-copy")
    event = codec.to_builtins(codec.decode_event(chain[35]))
    event["transfers"][0]["amount"] = 1
    chain[35] = msgspec.structs.replace(chain[35], payload=codec.encode(event))
    forged = {**again, "room": "forged-copy", "events": [
        readable.event_entry(codec.encode_envelope(e), "forged-copy", e.version)
        for e in relabel(chain, "forged-copy")]}
    forged_store = ExportFileStore.of_document(forged)
    failed = await verify_room(forged_store, "forged-copy")
    assert not failed.ok and failed.divergence.check in ("redecide", "origin"), failed
    # And an existing id or a bad id is refused, changing nothing
    taken = await ainvoke(redis_url, "import", str(file), "--as", "realm-copy")
    assert taken.exit_code == 1 and "already exists" in taken.stderr
    bad = await ainvoke(redis_url, "import", str(file), "--as", "bad id!")
    assert bad.exit_code != 0 and "a room id is" in bad.output


async def test_a_format_version_1_file_still_imports_and_verifies(redis_client, redis_url) -> None:
    assert json.loads(REALM.read_text())["format_version"] == 1
    assert (await ainvoke(None, "verify", "--file", str(REALM))).exit_code == 0
    assert (await ainvoke(redis_url, "import", str(REALM))).exit_code == 0
    assert (await verify_room(RedisEventStore(redis_client), ROOM)).ok


async def test_a_copy_of_a_challenge_room_takes_new_commands_and_still_verifies(redis_client, redis_url, tmp_path) -> None:
    from almanac.services.room_service import CommandRecord, RoomService

    store = RedisEventStore(redis_client)
    service = RoomService(store)

    async def send(room: str, number: int, body: dict) -> None:
        outcome = await service.handle(CommandRecord(command_id=f"{room}-{number}", room=room, player="ann",
                                                     server_time_ms=1_000 * number, body=body))
        assert outcome.accepted, outcome.error

    # Given a challenge room (its dice come from a public seed, so a copy can play on)
    for number, body in enumerate([{"kind": "create_room", "ruleset": "counter", "challenge": "weekly-7"},
                                   {"kind": "join_room"}, {"kind": "roll", "dice": 3}, {"kind": "add", "amount": 4}]):
        await send("ch1", number, body)
    file = tmp_path / "ch1.json"
    file.write_text((await ainvoke(redis_url, "export", "ch1")).stdout)
    assert (await ainvoke(redis_url, "import", str(file), "--as", "ch1-copy")).exit_code == 0
    # When the copy takes commands of its own
    await send("ch1-copy", 10, {"kind": "roll", "dice": 2})
    await send("ch1-copy", 11, {"kind": "add", "amount": 1})
    # Then it verifies: its first versions as the origin's history, the rest decided again as the copy
    report = await verify_room(store, "ch1-copy")
    assert report.ok and report.commands_redecided == 6 and report.versions == 6, report
    # And a forged tail (re-sealed) is caught
    chain = await store.read("ch1-copy")
    event = codec.to_builtins(codec.decode_event(chain[4]))
    event["faces"] = [6] * len(event["faces"])
    chain[4] = msgspec.structs.replace(chain[4], payload=codec.encode(event))
    resealed = relabel(chain, "ch1-forged")
    exported = json.loads((await ainvoke(redis_url, "export", "ch1-copy")).stdout)
    forged = {**exported, "room": "ch1-forged", "events": [
        readable.event_entry(codec.encode_envelope(e), "ch1-forged", e.version) for e in resealed]}
    failed = await verify_room(ExportFileStore.of_document(forged), "ch1-forged")
    assert not failed.ok and (failed.divergence.check, failed.divergence.version) == ("redecide", 5), failed


@pytest.mark.parametrize("damage", [
    lambda b: b.update(events="nope"), lambda b: b.update(refusals=[1]), lambda b: b.update(commands=[{"raw": 5}]),
    lambda b: b["events"][0].update(version="7"), lambda b: b["chain"].update(envelopes=["!!"]),
    lambda b: b.update(head=None), lambda b: b["commands"][0].update(first_version=10**30),
    lambda b: b["events"].append({"version": 3}), lambda b: b.update(seed=[]),
])
async def test_a_damaged_bundle_is_a_failed_step_never_an_exception(trade_bundle, damage) -> None:
    bundle = json.loads(json.dumps(trade_bundle))
    damage(bundle)
    verdict = verify_bundle(bundle)
    assert not verdict.ok and verdict.failed is not None and verdict.failed.name in (
        "format", "chain", "readable", "coverage", "refusals")
    for hostile in ([], None, "x", {"format": "almanac-dispute-bundle", "format_version": 1}):
        assert not verify_bundle(hostile).ok


@pytest.mark.parametrize("content", [b"[" * 200_000 + b"]" * 200_000, b"\xff\xfe{}"])
async def test_a_file_too_deep_or_not_utf8_is_refused_by_the_cli_with_a_reason(tmp_path, content) -> None:
    # Given a hostile file: JSON nested past Python's recursion limit, or bytes that are not UTF-8
    file = tmp_path / "hostile.json"
    file.write_bytes(content)
    # When a stranger verifies it with the CLI
    result = await ainvoke(None, "verify-bundle", str(file))
    # Then it says what is wrong with the file (before: "unexpected RecursionError" / "UnicodeDecodeError")
    assert result.exit_code == 1 and "unexpected" not in result.output, result.output
    assert "nests too deeply" in result.output or "is not JSON" in result.output, result.output
