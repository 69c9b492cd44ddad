"""The operator CLI and services/forensics/verify.py: sim, log, state, verify, audit, export/import, bad input."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from counter_ruleset import Add, Added, CounterDecider
from store_forgery import rewrite_in_memory
from typer.testing import CliRunner

from almanac.events import codec
from almanac.services.cli import _load_commands, app
from almanac.services.cli.sim_commands import load_scenario
from almanac.services.cli.verify_commands import print_report
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService
from almanac.storage.memory_store import MemoryEventStore
from almanac.storage.redis_store import RedisEventStore

_load_commands()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ALMANAC = Path(sys.executable).with_name("almanac")
runner = CliRunner()


async def play(store, path: Path) -> str:
    """Play a scenario into a store through RoomService (what the engine does), seed drawn by the server."""
    header, moves = load_scenario(path)
    service = RoomService(store, snapshot_every=10)
    await service.handle(CommandRecord(
        command_id="header", room=header.room, player=header.player, server_time_ms=header.time_ms,
        body={"kind": "create_room", "ruleset": header.ruleset, "options": header.options,
              "challenge": header.challenge}))
    for number, move in moves:
        await service.handle(CommandRecord(command_id=f"line-{number}", room=header.room, player=move.player,
                                           server_time_ms=move.time_ms, body=move.command))
    return header.room


async def counter_room(store, room: str = "c1", end: bool = True) -> None:
    service = RoomService(store)
    bodies = [{"kind": "create_room", "ruleset": "counter"}, {"kind": "join_room"}, {"kind": "add", "amount": 2},
              {"kind": "roll", "dice": 2}, {"kind": "add", "amount": 0}, {"kind": "add", "amount": 5}]
    if end:
        bodies.append({"kind": "end_room"})
    for index, body in enumerate(bodies):
        await service.handle(CommandRecord(command_id=f"{room}-{index}", room=room, player="ann",
                                           server_time_ms=1_000 * (index + 1), body=body))


def invoke(redis_url: str | None, *args: str):
    env = {"REDIS_URL": redis_url} if redis_url else {}
    return runner.invoke(app, list(args), env={**env, "COLUMNS": "200"})


async def ainvoke(redis_url: str | None, *args: str):
    """The CLI runs its own event loop: call it from a thread inside async tests."""
    return await asyncio.to_thread(invoke, redis_url, *args)


# --- sim --------------------------------------------------------------------------------------


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.jsonl")))
def test_sim_runs_each_example_and_is_deterministic(example: str) -> None:
    first = invoke(None, "sim", str(EXAMPLES / example), "--json")
    assert first.exit_code == 0, first.output
    document = json.loads(first.stdout)
    assert document["ruleset"] == example.removesuffix(".jsonl") and len(document["state_hash"]) == 64
    again = json.loads(invoke(None, "sim", str(EXAMPLES / example), "--json").stdout)
    assert again["state_hash"] == document["state_hash"]
    at_two = json.loads(invoke(None, "sim", str(EXAMPLES / example), "--json", "--at", "2").stdout)
    assert at_two["version"] == 2
    table = invoke(None, "sim", str(EXAMPLES / example))
    assert table.exit_code == 0 and f"state hash: {document['state_hash']}" in table.stdout


# --- log / state / audit on Redis ---------------------------------------------------------------


async def test_log_state_and_audit_read_a_room_from_redis(redis_client, redis_url, tier) -> None:
    store = tier.store(redis_client)
    room = await play(store, EXAMPLES / "realm.jsonl")
    refused = await RoomService(store).handle(CommandRecord(
        command_id="meddle", room=room, player="mallory", server_time_ms=1700000065000,
        body={"kind": "agree_trade", "trade_id": "trade-4"}))
    assert refused.error["code"] == "room_ended"
    await tier.settle(store, room)  # archived: the same answers from the archive
    log = await ainvoke(redis_url, "log", room, "--player", "bob", "--type", "realm.trade_", "--from", "2", "--to", "40")
    assert log.exit_code == 0, log.output
    assert "realm.trade_countered" in log.stdout and "alice" not in log.stdout.split("summary")[1].split("\n")[1]

    state = await ainvoke(redis_url, "state", room, "--at", "5", "--json")
    assert state.exit_code == 0 and json.loads(state.stdout)["version"] == 5
    by_time = await ainvoke(redis_url, "state", room, "--at-time", "1700000000000", "--json")
    assert json.loads(by_time.stdout)["version"] == 1
    diff = await ainvoke(redis_url, "state", room, "--at", "10", "--diff", "5", "--json")
    changes = json.loads(diff.stdout)
    assert changes["from"] == 5 and changes["to"] == 10
    assert {"path": "room.version", "before": 5, "after": 10} in changes["changes"]

    audit = await ainvoke(redis_url, "audit", room, "trade", "trade-4")
    assert audit.exit_code == 0, audit.output
    assert "step 1" in audit.stdout and "realm.merchant_sent" in audit.stdout
    assert "refused" in audit.stdout and "mallory" in audit.stdout and "room_ended" in audit.stdout


# --- verify ---------------------------------------------------------------------------------


async def test_verify_passes_every_example_room_and_the_cli_says_so(redis_client, redis_url, tier) -> None:
    store = tier.store(redis_client)
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        room = await play(store, path)
        await tier.settle(store, room)
        report = await verify_room(store, room)
        assert report.ok, report.divergence
        assert report.commands_redecided > 0 and report.seed in {"revealed", "stored", "challenge"}
    result = await ainvoke(redis_url, "verify", "--all")
    assert result.exit_code == 0, result.output
    assert f"{len(list(EXAMPLES.glob('*.jsonl')))} of" in result.stdout


async def test_verify_catches_a_tampered_event_even_when_the_chain_is_resealed() -> None:
    store = MemoryEventStore()
    await counter_room(store)
    def forged(envelope):
        return msgspec.structs.replace(envelope, payload=codec.encode(Added(amount=200)))

    # A plain edit: the entry no longer matches its own hash.
    await rewrite_in_memory(store, "c1", 3, forged, reseal=False)
    report = await verify_room(store, "c1")
    assert not report.ok and report.divergence.check == "chain" and report.divergence.version == 3

    # A forger who reseals the whole chain: the hashes agree, re-deciding the command does not.
    await rewrite_in_memory(store, "c1", 3, forged, reseal=True)
    report = await verify_room(store, "c1")
    assert not report.ok and report.divergence.check == "redecide" and report.divergence.version == 3
    assert report.divergence.recorded["event"]["amount"] == 200
    assert report.divergence.recomputed["event"]["amount"] == 2


async def test_verify_catches_a_changed_rule(monkeypatch, capsys) -> None:
    store = MemoryEventStore()
    await counter_room(store)
    assert (await verify_room(store, "c1")).ok
    original = CounterDecider.decide

    def generous_decide(self, state, command, ctx):
        return [Added(amount=event.amount + 1) if isinstance(event, Added) else event
                for event in original(self, state, command, ctx)]

    monkeypatch.setattr(CounterDecider, "decide", generous_decide)
    report = await verify_room(store, "c1")
    assert not report.ok and report.divergence.check == "redecide" and report.divergence.version == 3
    assert (report.divergence.recorded["event"]["amount"], report.divergence.recomputed["event"]["amount"]) == (2, 3)
    # And the operator reads the one field that differs, with both values, not two whole events
    print_report(report)
    printed = capsys.readouterr().out
    assert "event.amount: recorded 2, recomputed 3" in printed and '"type": "counter.added"' not in printed


async def test_verify_decides_each_refusal_again_and_catches_one_a_changed_rule_would_accept(monkeypatch) -> None:
    # Given a room where "add 0" was refused at version 4
    store = MemoryEventStore()
    await counter_room(store)
    report = await verify_room(store, "c1")
    assert report.ok and report.refusals_rechecked == 1
    original = CounterDecider.decide

    def lenient_decide(self, state, command, ctx):
        if isinstance(command, Add) and command.amount == 0:
            return [Added(amount=0)]
        return original(self, state, command, ctx)

    # When the rule changes so that it would accept it, then verify names the refusal and both sides
    monkeypatch.setattr(CounterDecider, "decide", lenient_decide)
    report = await verify_room(store, "c1")
    assert not report.ok and report.divergence.check == "refusal" and report.divergence.version == 5
    assert report.divergence.recorded["code"] == "counter.amount_not_positive"
    assert report.divergence.recomputed == "accepted"


async def test_verify_checks_the_revealed_seed_against_the_commitment() -> None:
    store = MemoryEventStore()
    await counter_room(store)
    report = await verify_room(store, "c1")
    assert report.ok and report.seed == "revealed" and report.seed_matches_commitment
    # A live room is checked with its stored seed; without one, only the chain is checked.
    live = MemoryEventStore()
    await counter_room(live, "c2", end=False)
    assert (await verify_room(live, "c2")).seed == "stored"
    live._seeds.clear()
    unseeded = await verify_room(live, "c2")
    assert unseeded.ok and unseeded.seed == "unavailable" and unseeded.commands_redecided == 0 and unseeded.notes


# --- export / import ----------------------------------------------------------------------------


async def test_export_verifies_offline_imports_and_a_tampered_file_fails(redis_client, redis_url, tmp_path,
                                                                         tier) -> None:
    await counter_room(store := tier.store(redis_client))
    await tier.settle(store, "c1")
    exported = await ainvoke(redis_url, "export", "c1")
    assert exported.exit_code == 0, exported.output
    document = json.loads(exported.stdout)
    assert document["format_version"] == 2 and document["seed"] and len(document["events"]) == 6
    assert len(document["rejections"]) == 1 and document["rejections"][0]["error"]["code"]
    # Readable: events decoded with their hashes, commands decoded.
    assert document["events"][2]["event"] == {"type": "counter.added", "amount": 2}
    assert all(e["hash"] and e["previous_hash"] and e["summary"] for e in document["events"])
    assert document["commands"][0]["command"]["body"]["kind"] == "create_room"
    assert document["head"] == {"version": 6, "hash": document["events"][-1]["hash"]}
    file = tmp_path / "c1.json"
    file.write_text(exported.stdout)
    offline = await ainvoke(None, "verify", "--file", str(file))
    assert offline.exit_code == 0 and "ok c1" in offline.stdout

    await redis_client.flushdb()
    imported = await ainvoke(redis_url, "import", str(file))
    assert imported.exit_code == 0, imported.output
    assert (await verify_room(RedisEventStore(redis_client), "c1")).ok
    again = await ainvoke(redis_url, "import", str(file))
    assert again.exit_code == 1 and "already exists" in again.stderr

    document["events"][3]["player"] = "mallory"  # a readable field: the envelope rebuilt from it no longer hashes
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(document))
    result = await ainvoke(None, "verify", "--file", str(tampered))
    assert result.exit_code == 1 and "FAILED c1: chain check at version 4" in result.stdout


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["state", "nosuch"], "room 'nosuch' not found"),
        (["log", "c1", "--from", "99"], "--from 99 is out of range"),
        (["state", "c1", "--at", "0"], "--at 0 is out of range"),
        (["state", "c1", "--diff", "50"], "--diff 50 is out of range"),
        (["audit", "c1", "trade", "t1"], "is a counter room"),
        (["verify"], "give exactly one of"),
        (["verify", "nosuch"], "room 'nosuch' not found"),
        (["sim", "/nonexistent.jsonl"], "cannot read"),
        (["verify", "--file", "/etc/hostname"], "is not an exported room"),
    ],
)
async def test_bad_input_gives_one_clear_line_and_a_nonzero_exit(redis_client, redis_url, args, message) -> None:
    await counter_room(RedisEventStore(redis_client))
    result = await ainvoke(redis_url, *args)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr


def test_a_malformed_scenario_line_in_a_real_process_is_one_line_without_traceback(tmp_path) -> None:
    scenario = tmp_path / "bad.jsonl"
    scenario.write_text('# header then a broken line\n{"ruleset": "realm", "options": {"players": ["a"]}}\n'
                        '{"player": "a", "command": {"kind": "join_room"}}\n')
    result = subprocess.run([str(ALMANAC), "sim", str(scenario)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "300"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {scenario}:3: not a valid scenario command line: Object missing required field `time_ms`"
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"player": "a", "time_ms": 5, "command": {"kind": "mine", "ore": "steel", "use_saved": 18446744073709551616}}',
         "invalid command: Expected `int` <= 1000000000000000 (field use_saved)"),
        ('{"player": "a", "time_ms": 5, "command": {"kind": "mine", "ore": "steel", "moon": "save"}}',
         "invalid command: unknown field 'moon' (field moon)"),
        ('{"player": "a", "time_ms": 5, "command": {"kind": []}}', "invalid command: unknown command kind"),
    ],
)
def test_a_command_outside_its_schema_stops_sim_with_one_line(tmp_path, line: str, message: str) -> None:
    # Given a scenario whose third line breaks the command schema, when it is simulated in a real
    # process, then one line names the file, the line and the field, and nothing is played.
    scenario = tmp_path / "hostile.jsonl"
    scenario.write_text('{"ruleset": "realm", "options": {"players": ["a", "b"]}}\n'
                        '{"player": "a", "time_ms": 1, "command": {"kind": "join_room"}}\n' + line + "\n")
    result = subprocess.run([str(ALMANAC), "sim", str(scenario)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "300"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (only,) = result.stderr.strip().splitlines()
    assert only.startswith(f"error: {scenario}:3: {message}"), only


def test_options_outside_their_schema_stop_sim_with_one_line(tmp_path) -> None:
    scenario = tmp_path / "hostile.jsonl"
    scenario.write_text('{"ruleset": "sectors", "options": {"years": 1000000000000000000000000000000}}\n')
    result = subprocess.run([str(ALMANAC), "sim", str(scenario)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {scenario}:1: invalid command: Expected `int` <= 1000 (field options.years)"
    ]


async def test_the_engine_never_records_a_command_outside_its_schema() -> None:
    # Given a room, when commands that break the schema reach the engine's RoomService directly (not
    # through the gateway), then each is answered as invalid and nothing is stored: no event, no
    # refusal record, no outcome under its id.
    store = MemoryEventStore()
    await counter_room(store, end=False)
    before, refused = await store.latest_version("c1"), len(await store.rejections("c1"))
    service = RoomService(store)
    bad = [{"kind": "add", "amount": 1, "junk": "x" * 60_000}, {"kind": []}, {"kind": "end_room", "reasn": "x"}]
    for index, body in enumerate(bad):
        record = CommandRecord(command_id=f"bad-{index}", room="c1", player="ann", server_time_ms=99_000, body=body)
        (outcome,) = await service.handle_many([record])
        alone = await service.handle(record)
        assert not outcome.accepted and outcome.error == alone.error
        assert outcome.error["code"] in {"invalid_command", "unknown_command"} and outcome.error["field"]
        assert await store.outcome("c1", f"bad-{index}") is None
    assert await store.latest_version("c1") == before
    assert len(await store.rejections("c1")) == refused


# --- archive --------------------------------------------------------------------------------------


async def test_the_archive_command_moves_an_ended_room_and_refuses_one_still_playing(redis_client, redis_url,
                                                                                     tmp_path, monkeypatch) -> None:
    from archive_support import archiving_store, file_archive_url  # noqa: PLC0415

    monkeypatch.setenv("ALMANAC_ARCHIVE_URL", url := file_archive_url(tmp_path / "archive"))
    store = archiving_store(redis_client, url)
    await counter_room(store, "c-ended")
    await counter_room(store, "c-playing", end=False)

    playing = await ainvoke(redis_url, "archive", "c-playing")
    assert playing.exit_code == 1 and "has not ended" in playing.output
    moved = await ainvoke(redis_url, "archive", "c-ended")
    assert moved.exit_code == 0 and "c-ended: archived" in moved.stdout, moved.output
    again = await ainvoke(redis_url, "archive", "c-ended")
    assert again.exit_code == 0 and "c-ended: already" in again.stdout
    verified = await ainvoke(redis_url, "verify", "--all")
    assert verified.exit_code == 0 and "2 of 2 rooms verified" in verified.stdout, verified.output
    assert not await redis_client.exists(store.keys.events("c-ended"))
