"""Rule-set versions on the write path: a room is created under one version and kept to it forever."""

from __future__ import annotations

import json

import msgspec
import pytest
from counter_ruleset import COUNTER, CounterDecider

from almanac.events import codec, registry
from almanac.events.dice import Dice
from almanac.events.manifest import RuleSet
from almanac.services.cli.sim_commands import load_scenario, run_scenario
from almanac.services.forensics.verify import verify_room
from almanac.services.room_service import CommandRecord, RoomService


def record(command_id: str, player: str, body: dict, room: str, now_ms: int = 1_000) -> CommandRecord:
    return CommandRecord(command_id=command_id, room=room, player=player, server_time_ms=now_ms, body=body)


async def play_realm(service: RoomService, room: str, ruleset: str, commands: int = 60) -> None:
    """A realm room created as ``ruleset``, played by the manifest's bot, then ended (its seed revealed)."""
    players = ["alice", "bob"]
    await service.handle(record("create", "alice", {"kind": "create_room", "ruleset": ruleset,
                                                    "options": {"players": players, "years": 2}}, room))
    for player in players:
        await service.handle(record(f"join-{player}", player, {"kind": "join_room"}, room))
    chooser = Dice(b"versions test bot dice 32 bytes!", room, 0)
    for index in range(commands):
        state, _ = await service.load(room)
        if state.ended:
            return
        player = players[chooser.randbelow(2)]
        command = registry.manifest(ruleset).policy(state.game, player, chooser, 10_000 + index)
        if command is not None:
            body = codec.encode_command(command)
            await service.handle(record(f"c{index}", player, body, room, now_ms=10_000 + index))
    await service.handle(record("end", "alice", {"kind": "end_room"}, room, now_ms=99_999))


async def test_a_bare_name_gets_the_default_version_a_full_name_the_variant_and_each_records_its_fingerprint(store):
    service = RoomService(store)

    await service.handle(record("create", "alice", {"kind": "create_room", "ruleset": "realm"}, "seed-rules"))
    await service.handle(record("create", "alice", {"kind": "create_room", "ruleset": "realm@2"}, "variant"))

    ((seed_rules,), (variant,)) = await store.read("seed-rules"), await store.read("variant")
    assert registry.versions("realm") == [1, 2] and registry.default("realm").ref == "realm@1"
    for envelope, version in ((seed_rules, 1), (variant, 2)):
        created = codec.decode_event(envelope)
        assert (created.ruleset, created.ruleset_version) == ("realm", version)
        assert created.fingerprint == registry.at("realm", version).fingerprint
    # The envelope names the version (a bare name is version 1), so events decode with its types.
    assert (seed_rules.ruleset, variant.ruleset) == ("realm", "realm@2")
    state, _ = await service.load("variant")
    assert (state.ruleset, state.ruleset_version) == ("realm", 2)


async def test_rooms_of_realm_at_1_and_at_2_coexist_and_each_verifies_under_its_own_version(store):
    service = RoomService(store)
    await play_realm(service, "old-rules", "realm@1")
    await play_realm(service, "new-rules", "realm@2")

    old, new = await verify_room(store, "old-rules"), await verify_room(store, "new-rules")

    assert old.ok and new.ok, (old.divergence, new.divergence)
    assert (old.ruleset, new.ruleset) == ("realm@1", "realm@2")
    assert old.fingerprint_used == old.fingerprint_recorded == registry.at("realm", 1).fingerprint
    assert new.fingerprint_used == registry.at("realm", 2).fingerprint != old.fingerprint_used
    assert old.commands_redecided > 10 and new.commands_redecided > 10
    # A version-1 room writes what rooms wrote before versions existed: the bare name.
    assert {e.ruleset for e in await store.read("old-rules")} == {"realm"}
    assert {e.ruleset for e in await store.read("new-rules")} == {"realm@2"}


@pytest.fixture
def counter_at_2():
    registry.register(RuleSet(decider=CounterDecider(), version=2, source="counter_ruleset"))
    yield
    registry.unregister("counter", 2)


async def test_a_room_whose_version_is_not_installed_is_refused_clearly_and_never_folded(store, counter_at_2):
    service = RoomService(store)
    await service.handle(record("create", "alice", {"kind": "create_room", "ruleset": "counter@2"}, "c2"))
    await service.handle(record("join", "alice", {"kind": "join_room"}, "c2"))
    before = await store.read("c2")
    assert before[0].ruleset == "counter@2"

    registry.unregister("counter", 2)  # this node no longer has counter@2 (a node not yet upgraded)
    outcome = await RoomService(store).handle(record("add", "alice", {"kind": "add", "amount": 1}, "c2"))
    report = await verify_room(store, "c2")

    assert not outcome.accepted
    assert outcome.error["code"] == "ruleset_not_installed"
    assert outcome.error["message"].startswith("counter@2 is not installed on this node")
    assert await store.read("c2") == before and await store.rejections("c2") == []  # nothing stored
    assert await store.outcome("c2", "add") is None  # the same command may succeed on an upgraded node
    assert not report.ok and report.divergence.check == "ruleset"
    assert report.divergence.message.startswith("counter@2 is not installed on this node")


def test_a_create_request_names_a_version_or_gets_the_default_and_a_missing_one_is_refused():
    assert registry.manifest("realm").version == 1  # the seed as written, although realm@2 is newer
    assert registry.manifest("realm@2").version == 2
    assert registry.stored("realm").version == 1  # an envelope's bare name is version 1, as before versions
    with pytest.raises(Exception) as missing:
        registry.manifest("realm@9")
    assert missing.value.code == "ruleset_not_installed"
    assert missing.value.message == "realm@9 is not installed on this node (installed versions of it: realm@1, realm@2)"
    with pytest.raises(Exception) as malformed:
        registry.manifest("realm@two")
    assert malformed.value.code == "unknown_ruleset"
    assert msgspec.json.decode(msgspec.json.encode(missing.value.to_dict()))["field"] == "ruleset"


def test_which_version_a_bare_name_means_is_the_manifests_choice_never_the_newest(counter_at_2):
    # Given counter@1 and counter@2 installed and neither marked: a bare name has no meaning (no silent newest)
    with pytest.raises(registry.RegistryError, match="none is marked"):
        registry.manifest("counter")
    assert registry.manifest("counter@2").version == 2  # a full name still works

    # When version 1 is marked the default, the bare name is version 1 although version 2 is newer
    registry.register(RuleSet(decider=CounterDecider(), version=1, default=True, source="counter_ruleset"))
    try:
        assert registry.manifest("counter").version == 1 and registry.get("counter@2") is not None
        # and two defaults contradict each other
        registry.register(RuleSet(decider=CounterDecider(), version=2, default=True, source="counter_ruleset"))
        with pytest.raises(registry.RegistryError, match="each is marked"):
            registry.manifest("counter")
    finally:
        registry.register(COUNTER)


def test_every_installed_rule_set_marks_its_default_version_explicitly():
    for name in registry.installed():
        marked = [version for version in registry.versions(name) if registry.at(name, version).default]
        assert marked == [registry.default(name).version], name


@pytest.mark.parametrize(("ruleset", "version"), [("realm", 1), ("realm@2", 2)])
async def test_a_scenario_file_names_its_rules_as_a_create_request_does(tmp_path, ruleset: str, version: int):
    scenario = tmp_path / "versions.jsonl"
    scenario.write_text(json.dumps({"ruleset": ruleset, "options": {"players": ["a", "b"]}}) + "\n"
                        '{"player": "a", "time_ms": 1, "command": {"kind": "join_room"}}\n')

    played, state = await run_scenario(*load_scenario(scenario))

    assert all(outcome.accepted for *_, outcome in played)
    assert (state.ruleset, state.ruleset_version) == ("realm", version)


async def test_verify_names_the_code_revision_of_a_room_and_says_when_its_fingerprint_matches_none(store):
    # Given a realm room created by this node's listed code, and one created by a node running realm@1
    # code of its own (the same Decider, another fingerprint: a build nobody listed)
    service = RoomService(store)
    listed = registry.at("realm", 1)
    await play_realm(service, "listed-code", "realm@1", commands=20)
    unlisted = RuleSet(decider=listed.decider, version=1, default=True, source="counter_ruleset", policy=listed.policy)
    registry.register(unlisted)
    try:
        await play_realm(service, "unlisted-code", "realm@1", commands=20)
    finally:
        registry.register(listed)

    # When both are verified here
    known, stranger = await verify_room(store, "listed-code"), await verify_room(store, "unlisted-code")

    # Then both decide the same, and verify names the revision of the first and says the second has none
    assert known.ok and stranger.ok, (known.divergence, stranger.divergence)
    revision = listed.revision(listed.fingerprint)
    assert known.code_revision == f"played under realm@1 code revision {revision.number} ({revision.date}: {revision.why})"
    assert stranger.fingerprint_recorded == unlisted.fingerprint != listed.fingerprint
    assert stranger.code_revision.startswith(f"played under realm@1 code with fingerprint {unlisted.fingerprint}, "
                                             "which matches NO known revision of realm@1")
    assert any(f"(code revision {revision.number})" in note for note in stranger.notes)
