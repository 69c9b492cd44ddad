"""One re-decide (issue 29): verify, the offline bundle verifier and ``bisect --against`` judge a re-decided event by
one rule (``events.forensics.redecide.same_event``), so a forgery one of them catches, all of them catch."""

from __future__ import annotations

import msgspec
from forensics_support import RealmTable, mining_tries
from store_forgery import rewrite_in_memory

from almanac.events.forensics.bundle_check import verify_bundle
from almanac.services.forensics.bundle import dispute_bundle
from almanac.services.forensics.investigate import bisect_against
from almanac.services.forensics.verify import verify_room
from almanac.storage.memory_store import MemoryEventStore


async def ended_realm_room(store: MemoryEventStore, room: str) -> RealmTable:
    table = RealmTable(store, room)
    await table.create("realm@1")
    await table.play_mining(3)
    ended = await table.send("alice", {"kind": "end_room"})
    assert ended.accepted, ended.error
    return table


async def test_an_event_re_timed_and_resealed_is_named_by_verify_the_bundle_and_bisect_alike() -> None:
    # Given an ended realm room whose first mining try's event was moved a second later, the chain resealed
    store = MemoryEventStore()
    table = await ended_realm_room(store, "retimed")
    (first_try, _), *_ = await mining_tries(store, table.room)
    await rewrite_in_memory(store, table.room, first_try, lambda envelope: msgspec.structs.replace(
        envelope, server_time_ms=envelope.server_time_ms + 1_000), reseal=True)

    # When it is verified, bundled and checked offline, and bisected against its own rules
    report = await verify_room(store, table.room)
    head = await store.latest_version(table.room)
    verdict = verify_bundle(await dispute_bundle(store, table.room, 0, versions=(1, head)))
    bisected = await bisect_against(table.loader, table.room, "realm@1")

    # Then all three name that version as where the recorded events are not what the command decides
    # (before one rule, bisect compared only an event's type, player, command and content, and said it was the same)
    assert (report.ok, report.divergence.check, report.divergence.version) == (False, "redecide", first_try)
    assert [s.name for s in verdict.steps if s.status == "passed"][:2] == ["format", "chain"]
    assert (verdict.ok, verdict.failed.name, verdict.failed.version) == (False, "redecide", first_try)
    assert "server_time_ms" in verdict.failed.detail
    assert bisected["diverged"] and bisected["version"] == first_try
    assert bisected["recorded"]["server_time_ms"] == bisected["other"]["server_time_ms"] + 1_000


async def test_an_untouched_room_decides_the_same_under_its_own_rules_everywhere() -> None:
    # Given the same room, untouched
    store = MemoryEventStore()
    table = await ended_realm_room(store, "untouched")
    head = await store.latest_version(table.room)

    # When it is verified, bundled and bisected against its own version, then every command decides again the same
    report = await verify_room(store, table.room)
    bundle = await dispute_bundle(store, table.room, 0, versions=(1, head))
    verdict = verify_bundle(bundle, bundle["head"]["hash"])
    bisected = await bisect_against(table.loader, table.room, "realm@1")
    assert report.ok and verdict.ok and not bisected["diverged"], (report.divergence, verdict.text())
    assert report.commands_redecided == bisected["commands_redecided"] > 0


async def test_a_nonce_committed_before_the_seed_is_named_by_verify_and_the_bundle_with_one_message() -> None:
    # Given an ended realm room (players commit to nonces) whose second player's join was moved to before the room's
    # creation, the chain resealed: the server could have picked its seed knowing that nonce
    store = MemoryEventStore()
    table = await ended_realm_room(store, "early-join")
    envelopes = await store.read(table.room)
    created = envelopes[0]
    join = next(e.version for e in envelopes[1:] if e.type == "room.player_joined")
    await rewrite_in_memory(store, table.room, join, lambda envelope: msgspec.structs.replace(
        envelope, server_time_ms=created.server_time_ms - 1), reseal=True)

    # When it is verified and bundled and checked offline
    report = await verify_room(store, table.room)
    head = await store.latest_version(table.room)
    verdict = verify_bundle(await dispute_bundle(store, table.room, 0, versions=(1, head)))

    # Then both name the order of the commitments at that join, in the same words (events.forensics.redecide's one
    # check; the bundle verifier used to say only that the join's event differs when decided again)
    assert (report.ok, report.divergence.check, report.divergence.version) == (False, "order", join)
    assert (verdict.ok, verdict.failed.name, verdict.failed.version) == (False, "redecide", join)
    assert verdict.failed.detail == report.divergence.message
    assert "committed to a nonce no later than the room committed to its seed" in verdict.failed.detail
