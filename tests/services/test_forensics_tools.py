"""Fork and what-if, diff, explain, bisect on real Redis: given a realm room played through the engine's write path,
when an operator forks, explains or bisects it, then the answers match a brute-force fold of the log."""

from __future__ import annotations

import asyncio
import json

import pytest
from forensics_support import RealmTable, fold_each_version, mined, mining_tries
from test_cli_operator import ainvoke

from almanac.events import codec
from almanac.events.forensics.state_paths import parse_path, shown, value_at
from almanac.projections.read_model_rows import leaderboard_scores, project_room
from almanac.services.forensics import investigate as ft
from almanac.services.forensics.verify import verify_room
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore


@pytest.fixture
async def realm(redis_client, request, tier) -> RealmTable:
    """A realm@1 room of alice and bob with twelve mining tries (snapshots every 10 versions), ended: only
    an ended room may be forked (a fork's seats would otherwise show its players' hidden views). Every test
    runs twice: on the room live in Redis and on it archived (``tier``)."""
    table = RealmTable(tier.store(redis_client), f"fx-{request.node.name[:40]}")
    await table.create("realm@1")
    await table.play_mining(6)
    ended = await table.send("alice", {"kind": "end_room"})
    assert ended.accepted, ended.error
    await tier.settle(table.store, table.room)
    return table


# --- fork ---------------------------------------------------------------------------------------


async def test_a_fork_starts_from_the_parents_state_takes_other_commands_and_both_verify(realm) -> None:
    store, parent = realm.store, realm.room
    (first_try, _), *_ = await mining_tries(store, parent)
    at = first_try - 1  # just before alice's first mining try

    forked = await ft.fork(realm.loader, parent, at, f"{parent}-what-if", "auditor", 5)

    fork_room = forked["room"]
    (first,) = await store.read(fork_room)
    assert first.type == "room.forked" and first.version == 1
    (parent_at,) = await store.read(parent, at, at)
    assert first.previous_hash == parent_at.hash == forked["parent_hash"]  # the chain starts from the parent's
    base = await ft.state_at(realm.loader, parent, at)
    start = await ft.state_at(realm.loader, fork_room, 1)
    assert start.game == base.game and start.fork.parent == parent and start.fork.at == at
    assert start.players == () and start.seed_commitment != base.seed_commitment

    await realm.join(fork_room)  # the seats are the parent's
    cut = await realm.send("alice", {"kind": "cut_wood"}, fork_room)  # what if alice had cut wood instead?
    assert cut.accepted, cut.error

    for room in (parent, fork_room):
        report = await verify_room(store, room)
        assert report.ok, report.divergence
    report = await verify_room(store, fork_room)
    assert report.fork.parent == parent and report.commands_redecided == 4 and report.ruleset == "realm@1"
    same = await ft.diff(realm.loader, parent, fork_room, at=at, at_b=3)  # seated again, nothing played yet
    assert same["differences"] == []
    differences = (await ft.diff(realm.loader, parent, fork_room, at=at, at_b=4))["differences"]
    assert {"path": "state.actions_used.alice", "a": None, "b": 1} in differences  # absent: no action yet
    assert not any(row["path"].startswith(("state.cities.bob.", "room.")) for row in differences)


async def test_a_forks_dice_are_its_own_never_the_parents_future_rolls(realm) -> None:
    store, parent = realm.store, realm.room
    tries = await mining_tries(store, parent)
    at = tries[0][0] - 1
    fork_room = (await ft.fork(realm.loader, parent, at, None, "auditor", 5))["room"]
    await realm.join(fork_room)

    fork_rolls = []
    for player in ("alice", "bob") * 3:  # the same commands, in the same order, as the parent played after `at`
        fork_rolls.append(mined(await realm.mine(player, fork_room)).dice)

    parent_rolls = [event.dice for _, event in tries[:6]]
    assert all(mine != theirs for mine, theirs in zip(fork_rolls, parent_rolls, strict=True))
    report = await verify_room(store, fork_room)
    assert report.ok and report.seed == "stored" and report.seed_matches_commitment


async def test_a_fork_of_a_fork_folds_through_both_parents_and_verifies(realm) -> None:
    store, parent = realm.store, realm.room
    child = (await ft.fork(realm.loader, parent, 8, None, "auditor", 5))["room"]
    await realm.join(child)
    assert (await realm.send("alice", {"kind": "end_room"}, child)).accepted
    grandchild = (await ft.fork(realm.loader, child, 3, None, "auditor", 6))["room"]
    assert (await ft.state_at(realm.loader, grandchild, 1)).game == (await ft.state_at(realm.loader, parent, 8)).game
    assert (await verify_room(store, grandchild)).ok


async def test_forks_are_refused_with_clear_errors_and_never_through_a_players_command(realm) -> None:
    store, parent = realm.store, realm.room
    latest = await store.latest_version(parent)
    cases = [
        (parent, latest + 1, None, 422, "version_out_of_range"),
        ("no-such-room", 1, None, 404, "room_not_found"),
        (parent, 2, parent, 422, "fork_base"),
    ]
    existing = (await ft.fork(realm.loader, parent, 2, None, "auditor", 5))["room"]
    cases.append((parent, 3, existing, 409, "room_exists"))
    for room, at, new_room, status, code in cases:
        with pytest.raises(ft.ForensicsError) as refused:
            await ft.fork(realm.loader, room, at, new_room, "auditor", 5)
        assert (refused.value.status, refused.value.code) == (status, code), refused.value.message
    # A player cannot start a fork through the command path: the engine refuses and nothing is written.
    sneaky = await realm.send("alice", {"kind": "fork_room", "parent": parent, "at": 2}, "sneaky-fork")
    assert not sneaky.accepted and sneaky.error["code"] == "fork_base"
    assert await store.latest_version("sneaky-fork") == 0


async def test_a_live_room_cannot_be_forked(redis_client) -> None:
    # Given a room still being played: whoever joined its fork as alice would read alice's hidden view
    live = RealmTable(RedisEventStore(redis_client), "fx-live-room")
    await live.create("realm@1")
    await live.play_mining(1)
    with pytest.raises(ft.ForensicsError) as refused:
        await ft.fork(live.loader, live.room, 3, None, "auditor", 5)
    assert (refused.value.status, refused.value.code) == (422, "parent_live")


async def test_verify_catches_a_fork_whose_parent_no_longer_has_the_linked_hash(realm, redis_client) -> None:
    store, parent = realm.store, realm.room
    fork_room = (await ft.fork(realm.loader, parent, 5, None, "auditor", 5))["room"]
    # The parent's log is replaced under the fork (another history restored under the same id).
    keys = store.keys
    await redis_client.delete(keys.events(parent), keys.version(parent), keys.commands(parent),
                              keys.snapshot_index(parent), keys.snapshot_data(parent))
    await redis_client.hdel(keys.pointer_bucket(parent), parent)
    store.forget_archived(parent)
    again = RealmTable(store, parent)
    again.sent = 500  # other command ids and times: another chain
    await again.create("realm@1")
    await again.play_mining(2)

    report = await verify_room(store, fork_room)

    assert not report.ok and report.divergence.check == "fork" and report.divergence.version == 1
    assert report.divergence.recorded != report.divergence.recomputed


async def test_a_forks_read_models_mark_it_and_give_the_leaderboard_nothing(realm) -> None:
    store, parent = realm.store, realm.room
    fork_room = (await ft.fork(realm.loader, parent, 9, None, "auditor", 5))["room"]
    await realm.join(fork_room)
    before, after = await ft.state_at(realm.loader, parent, 9), await ft.state_at(realm.loader, fork_room, 3)
    envelopes = await store.read(fork_room)

    update = project_room(before, after, [(e, codec.decode_event(e)) for e in envelopes])

    assert update.summary["fork"] == update.listing["fork"] == {"parent": parent, "at": 9}
    assert update.scores == {} and update.dropped_players == ()
    assert leaderboard_scores(before) != {} and leaderboard_scores(after) == {}
    real = project_room(None, await ft.state_at(realm.loader, parent, 9), [])
    assert real.summary["fork"] is None and real.scores


# --- explain ------------------------------------------------------------------------------------


async def test_explain_lists_exactly_the_versions_that_changed_a_value(realm) -> None:
    store, room = realm.store, realm.room
    states = await fold_each_version(store, room)
    for path_text in ("cities.alice.stock.gold", "scores.bob", "cities.bob.stock.stone", "room.players"):
        path = parse_path(path_text)
        values = [shown(value_at(state, path)) for state in states]
        expected = [v for v in range(1, len(values) + 1) if values[v - 1] != (values[v - 2] if v > 1 else None)]

        answer = await ft.explain(realm.loader, room, path_text)

        assert [c["version"] for c in answer["changes"]] == expected, path_text
        for change in answer["changes"]:
            assert change["after"] == values[change["version"] - 1]
        assert answer["value"] == values[-1]
    seen = await ft.explain(realm.loader, room, "view.alice.cities.alice.stock.stone")  # what alice saw change
    truth = await ft.explain(realm.loader, room, "cities.alice.stock.stone")
    assert [c["version"] for c in seen["changes"]] == [c["version"] for c in truth["changes"]]
    at = (await ft.explain(realm.loader, room, "cities.alice.stock.gold", at=10))
    assert all(c["version"] <= 10 for c in at["changes"]) and at["at"] == 10


async def test_explain_refuses_unknown_paths_and_versions_beyond_the_room(realm) -> None:
    store, room = realm.store, realm.room
    latest = await store.latest_version(room)
    for path, at, code in (("cities.carol.stock.gold", None, "path_not_found"), ("cities..gold", None, "invalid_path"),
                           ("view.mallory.cities", None, "path_not_found"), ("view", None, "invalid_path"),
                           ("cities.alice.stock.gold", latest + 1, "version_out_of_range")):
        with pytest.raises(ft.ForensicsError) as refused:
            await ft.explain(realm.loader, room, path, at)
        assert refused.value.code == code and refused.value.status == 422
    with pytest.raises(ft.ForensicsError) as missing:
        await ft.explain(realm.loader, "nowhere", "scores.alice")
    assert missing.value.status == 404
    with pytest.raises(ft.ForensicsError) as unknown:
        await ft.explain(realm.loader, room, "cities.carol.stock.gold")
    assert "alice" in unknown.value.allowed and "bob" in unknown.value.allowed


# --- bisect -------------------------------------------------------------------------------------


async def test_bisect_finds_the_first_version_a_linear_scan_finds(realm) -> None:
    store, room = realm.store, realm.room
    states = await fold_each_version(store, room)
    seasons = [value_at(s, parse_path("season_index")) for s in states]
    assert seasons == sorted(seasons) and seasons[-1] >= 1  # seasons only move on: the predicate is monotonic
    where = "season_index >= 1 and season_index < 1000"
    first = next(v for v, value in enumerate(seasons, start=1) if value >= 1)
    threshold = 1

    binary = await ft.bisect_where(realm.loader, room, where)
    linear = await ft.bisect_where(realm.loader, room, where, linear=True)

    assert binary["version"] == linear["version"] == first and binary["found"]
    assert binary["probes"] < len(states) // 2
    assert binary["event"]["version"] == first and binary["values"][0]["after"] >= threshold
    assert binary["values"][0]["before"] < threshold
    never = await ft.bisect_where(realm.loader, room, "cities.alice.stock.gold > 10000000000")
    assert not never["found"] and "latest version" in never["note"]
    start = await ft.bisect_where(realm.loader, room, "room.ended == false or scores.alice >= 0")
    assert start["version"] == 1


@pytest.mark.parametrize("where", ["cities.alice.gold >> 3", "cities.alice.gold > bob", "__import__('os') == 1",
                                   "cities.alice.gold > 1 and", "x", "a == 1 xor b == 2", ""])
async def test_bisect_refuses_expressions_outside_the_small_language(realm, where: str) -> None:
    with pytest.raises(ft.ForensicsError) as refused:
        await ft.bisect_where(realm.loader, realm.room, where)
    assert refused.value.code in ("invalid_expression", "invalid_path") and refused.value.field == "where"


async def test_bisect_against_realm_2_finds_the_first_mining_try_with_a_skull(realm) -> None:
    store, room = realm.store, realm.room
    skull_tries = [(v, e) for v, e in await mining_tries(store, room) if "skull" in e.dice]
    assert skull_tries, "twelve tries without a skull: pick another room id"
    version, recorded = skull_tries[0]
    assert recorded.outcome == "skull_stone"

    answer = await ft.bisect_against(realm.loader, room, "realm@2")

    assert answer["diverged"] and answer["version"] == version and answer["against"] == "realm@2"
    assert answer["recorded"]["event"]["outcome"] == "skull_stone"
    assert tuple(answer["other"]["event"]["dice"]) == recorded.dice  # the same roll, judged by other rules
    assert answer["other"]["event"]["outcome"] != "skull_stone"
    same = await ft.bisect_against(realm.loader, room, "realm@1")
    assert not same["diverged"] and same["commands_redecided"] == len(await store.commands(room))
    for against, status, code in (("realm@9", 404, "unknown_version"), ("realm", 422, "invalid_ruleset"),
                                  ("sectors@1", 422, "other_ruleset"), ("nothing@1", 404, "unknown_ruleset")):
        with pytest.raises(ft.ForensicsError) as refused:
            await ft.bisect_against(realm.loader, room, against)
        assert (refused.value.status, refused.value.code) == (status, code)


# --- the CLI ------------------------------------------------------------------------------------


async def test_the_cli_forks_diffs_explains_and_bisects_with_one_line_errors(realm, redis_url) -> None:
    room = realm.room
    forked = await ainvoke(redis_url, "fork", room, "--at", "5", "--as", f"{room}-cli", "--json")
    assert forked.exit_code == 0, forked.output
    assert json.loads(forked.stdout)["room"] == f"{room}-cli"
    diff = await ainvoke(redis_url, "diff", room, f"{room}-cli", "--at", "5", "--at-b", "1", "--json")
    assert diff.exit_code == 0 and json.loads(diff.stdout)["differences"] == [  # the fork seats nobody yet
        {"path": "room.players[0]", "a": "alice", "b": None}, {"path": "room.players[1]", "a": "bob", "b": None}]
    explained = await ainvoke(redis_url, "explain", room, "actions_used.alice")
    assert explained.exit_code == 0 and "realm.mined" in explained.stdout, explained.output
    bisected = await ainvoke(redis_url, "bisect", room, "--against", "realm@2")
    assert bisected.exit_code == 0 and "first difference at version" in bisected.stdout
    for args, words in ((("explain", room, "cities.carol.gold"), "never had a value"),
                        (("bisect", room, "--where", "gold >> 1"), "expected"),
                        (("fork", room, "--at", "999"), "versions 1 to"),
                        (("bisect", room, "--against", "realm@9"), "not installed"),
                        (("bisect", room), "give --where")):
        failed = await ainvoke(redis_url, *args)
        assert failed.exit_code == 1 and words in failed.stderr and len(failed.stderr.strip().splitlines()) == 1, \
            (args, failed.stderr)



async def test_a_long_explain_gives_the_event_loop_back_so_a_gateway_keeps_answering_others() -> None:
    # Given a counter room of 2,000 additions in a store whose reads never suspend (in memory)
    from almanac.services.room_service import CommandRecord, RoomService  # noqa: PLC0415
    from almanac.storage.memory_store import MemoryEventStore  # noqa: PLC0415

    store = MemoryEventStore()
    service = RoomService(store)
    bodies = [{"kind": "create_room", "ruleset": "counter"}, {"kind": "join_room"}]
    bodies += [{"kind": "add", "amount": 1}] * 2_000
    for number, body in enumerate(bodies):
        outcome = await service.handle(CommandRecord(command_id=f"c{number}", room="long", player="p",
                                                     server_time_ms=number, body=body))
        assert outcome.accepted, outcome.error
    ticks = 0

    async def another_request() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    # When an auditor's explain folds the whole room while another task waits for the loop
    other = asyncio.create_task(another_request())
    await asyncio.sleep(0)
    started = ticks
    answer = await ft.explain(RoomLoader(store, 0), "long", "room.version")
    other.cancel()
    # Then the fold let the other task run every YIELD_EVERY events (it would not have run at all otherwise)
    assert answer["folded"] == len(bodies)
    assert ticks - started >= len(bodies) // ft.YIELD_EVERY


async def test_a_rebuild_folds_a_fork_onto_its_parent_and_gets_the_live_models_back(realm, redis_client) -> None:
    """Given a realm room, a fork of it played on and the live projector caught up, when an operator rebuilds
    every read model, then the fork folds onto its parent's state (it used to stop the rebuild with
    "a fork is folded onto its parent") and the rebuilt models equal the live ones, fork marks included."""
    from projection_games import dump_models

    from almanac.projections.projector import Projector
    from almanac.projections.rebuild import rebuild

    store, parent = realm.store, realm.room
    (first_try, _), *_ = await mining_tries(store, parent)
    fork_room = (await ft.fork(realm.loader, parent, first_try - 1, None, "auditor", 5))["room"]
    await realm.join(fork_room)
    assert (await realm.send("alice", {"kind": "cut_wood"}, fork_room)).accepted
    await Projector(redis_client, store.shard_count, store=store).drain()
    live = await dump_models(redis_client)
    summaries = {room.decode(): json.loads(row) for key, rows in live.items() if key.endswith(":rm:summary")
                 for room, row in rows.items()}
    assert summaries[fork_room]["fork"] == {"parent": parent, "at": first_try - 1}

    assert await rebuild(redis_client, store.shard_count, store=store) >= 2
    assert await dump_models(redis_client) == live
