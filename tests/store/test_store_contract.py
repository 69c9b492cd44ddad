"""One contract suite run against every event-store implementation: in memory, on real Redis, as export files."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from counter_ruleset import Added

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import first_broken_link, seal
from almanac.storage.base import AppendRequest, NotAttempted, RejectRequest, VersionConflict


def make_envelopes(room: str, first_version: int, count: int, previous_hash: str, command_id: str = "c") -> list[Envelope]:
    envelopes = []
    for version in range(first_version, first_version + count):
        event_type, payload = codec.encode_event(Added(amount=version))
        envelope = seal(
            Envelope(
                room=room, version=version, ruleset="counter", type=event_type, payload=payload,
                command_id=command_id, player="alice", server_time_ms=1_000 + version, previous_hash=previous_hash,
            )
        )
        previous_hash = envelope.hash
        envelopes.append(envelope)
    return envelopes


async def test_an_append_at_the_expected_version_is_read_back_in_order(store):
    envelopes = make_envelopes("r1", 1, 5, GENESIS_HASH)
    result = await store.append("r1", 0, "cmd-1", envelopes, b"record")

    assert (result.outcome.first_version, result.outcome.last_version, result.duplicate) == (1, 5, False)
    assert await store.read("r1") == envelopes
    assert await store.latest_version("r1") == 5
    assert await store.rooms() == ["r1"]
    assert await store.commands("r1") == [(1, b"record")]


async def test_reading_a_range_and_up_to_a_version(store):
    envelopes = make_envelopes("r1", 1, 10, GENESIS_HASH)
    await store.append("r1", 0, "cmd-1", envelopes)

    assert [e.version for e in await store.read("r1", 3, 6)] == [3, 4, 5, 6]
    assert [e.version for e in await store.read("r1", 1, 2)] == [1, 2]
    assert [e.version for e in await store.read("r1", 9)] == [9, 10]
    assert await store.read("r1", 11) == []
    assert await store.read("unknown-room") == []
    assert await store.latest_version("unknown-room") == 0


async def test_an_append_at_a_stale_version_is_a_conflict_carrying_the_current_version(store):
    await store.append("r1", 0, "cmd-1", make_envelopes("r1", 1, 3, GENESIS_HASH))

    with pytest.raises(VersionConflict) as conflict:
        await store.append("r1", 1, "cmd-2", make_envelopes("r1", 2, 1, "x"))

    assert conflict.value.current == 3
    assert conflict.value.expected == 1
    assert await store.latest_version("r1") == 3


async def test_the_same_command_id_twice_appends_once_and_returns_the_first_outcome(store):
    first = await store.append("r1", 0, "cmd-1", make_envelopes("r1", 1, 2, GENESIS_HASH))
    # A replay after a crash between append and acknowledgement: the engine decides again and retries.
    again = await store.append("r1", 2, "cmd-1", make_envelopes("r1", 3, 2, "y"))

    assert again.duplicate
    assert again.outcome == first.outcome
    assert await store.latest_version("r1") == 2


async def test_a_rejection_is_recorded_for_audit_and_dedupes_its_command_id(store):
    error = {"code": "counter.amount_not_positive", "message": "amount must be at least 1"}
    first = await store.record_rejection("r1", "cmd-9", error, b"refused")
    again = await store.record_rejection("r1", "cmd-9", {"code": "other"}, b"refused again")

    assert not first.duplicate and again.duplicate
    assert again.outcome.error == error
    assert (await store.outcome("r1", "cmd-9")).error == error
    assert await store.rejections("r1") == [b"refused"]
    assert await store.latest_version("r1") == 0


async def test_two_writers_racing_at_the_same_version_one_wins_and_the_stream_has_no_gap(store):
    await store.append("r1", 0, "cmd-0", make_envelopes("r1", 1, 1, GENESIS_HASH))
    base = (await store.read("r1"))[-1].hash

    async def write(name: str):
        try:
            return await store.append("r1", 1, name, make_envelopes("r1", 2, 3, base, command_id=name))
        except VersionConflict as conflict:
            return conflict

    results = await asyncio.gather(*(write(f"writer-{i}") for i in range(8)))

    winners = [r for r in results if not isinstance(r, VersionConflict)]
    losers = [r for r in results if isinstance(r, VersionConflict)]
    assert len(winners) == 1 and len(losers) == 7
    assert all(loser.current == 4 for loser in losers)
    stored = await store.read("r1")
    assert [e.version for e in stored] == [1, 2, 3, 4]
    assert first_broken_link(stored, GENESIS_HASH) is None


async def test_snapshots_are_found_at_or_below_a_version(store):
    await store.save_snapshot("r1", 100, b"s100")
    await store.save_snapshot("r1", 200, b"s200")

    assert await store.latest_snapshot("r1") == (200, b"s200")
    assert await store.latest_snapshot("r1", 199) == (100, b"s100")
    assert await store.latest_snapshot("r1", 200) == (200, b"s200")
    assert await store.latest_snapshot("r1", 99) is None
    assert await store.latest_snapshot("other") is None


async def test_a_batch_of_snapshots_saved_together_is_found_room_by_room(store):
    await store.save_snapshot("r1", 100, b"r1-s100")
    await store.save_snapshots([("r1", 200, b"r1-s200"), ("r2", 100, b"r2-s100"), ("r3", 300, b"r3-s300")])
    assert await store.latest_snapshot("r1") == (200, b"r1-s200")
    assert await store.latest_snapshot("r1", 199) == (100, b"r1-s100")
    assert await store.latest_snapshot("r2") == (100, b"r2-s100")
    assert await store.latest_snapshot("r3", 299) is None and await store.latest_snapshot("r3") == (300, b"r3-s300")
    await store.save_snapshots([])


async def test_a_room_keeps_players_nonces_by_their_commitment_and_no_write_changes_another(store):
    ann, bob = b"a" * 32, b"b" * 32
    ann_commitment = await store.save_nonce("r1", ann)
    await store.save_nonce("r1", bob)
    await store.save_nonce("r1", ann)  # a repeated write of the same nonce is the same entry
    assert ann_commitment == hashlib.sha256(ann).hexdigest()
    assert await store.load_nonces("r1") == {ann_commitment: ann, hashlib.sha256(bob).hexdigest(): bob}
    assert await store.load_nonces("r2") == {}


async def test_a_room_keeps_its_first_secret_seed(store):
    assert await store.save_seed("r1", b"first")
    assert not await store.save_seed("r1", b"second")
    assert await store.load_seed("r1") == b"first"
    assert await store.load_seed("r2") is None


async def test_rooms_spread_over_shards_are_all_listed(store):
    for index in range(12):
        room = f"room-{index}"
        await store.append(room, 0, f"create-{index}", make_envelopes(room, 1, 1, GENESIS_HASH))

    assert await store.rooms() == sorted(f"room-{index}" for index in range(12))


async def test_what_a_store_wrote_is_read_back_by_a_new_one_over_the_same_files(tmp_path):
    """The export-file store's files are the storage: a store opened on them later reads everything back."""
    from almanac.storage.export_store import ExportFileStore

    writer = ExportFileStore(tmp_path / "rooms")
    envelopes = make_envelopes("r/1", 1, 3, GENESIS_HASH)
    await writer.append("r/1", 0, "cmd-1", envelopes, b"record")
    await writer.record_rejection("r/1", "cmd-2", {"code": "nope"}, b"refused")
    await writer.save_seed("r/1", b"seed")
    await writer.save_snapshot("r/1", 2, b"s2")

    reader = ExportFileStore(tmp_path / "rooms")
    assert await reader.read("r/1") == envelopes
    assert await reader.commands("r/1") == [(1, b"record")]
    assert await reader.rejections("r/1") == [b"refused"]
    assert (await reader.outcome("r/1", "cmd-2")).error == {"code": "nope"}
    assert (await reader.append("r/1", 3, "cmd-1", [])).duplicate
    assert await reader.load_seed("r/1") == b"seed"
    assert await reader.latest_snapshot("r/1") == (2, b"s2")
    assert await reader.rooms() == ["r/1"]


async def test_an_ordered_write_skips_a_rooms_later_writes_once_one_does_not_take_effect(store):
    """``write_ordered``: a room's writes were decided one after another, so after a duplicate or a conflict
    the rest of that room is not tried; other rooms and refusals before it are unaffected."""
    first = make_envelopes("r1", 1, 1, GENESIS_HASH, command_id="a")
    await store.append("r1", 0, "a", first, b"rec")
    second = make_envelopes("r1", 2, 1, first[-1].hash, command_id="b")
    third = make_envelopes("r1", 3, 1, second[-1].hash, command_id="c")
    results = await store.write_ordered([
        RejectRequest(room="r1", command_id="no", error={"code": "x", "message": "no"}, record=b"refused"),
        AppendRequest(room="r1", expected_version=1, command_id="a", envelopes=second),  # a seen before: dup
        AppendRequest(room="r1", expected_version=2, command_id="c", envelopes=third),  # decided after it
        RejectRequest(room="r1", command_id="no-2", error={"code": "x", "message": "no"}, record=b"later"),
    ])
    assert not results[0].duplicate and results[1].duplicate
    assert isinstance(results[2], NotAttempted) and isinstance(results[3], NotAttempted)
    assert await store.latest_version("r1") == 1 and await store.outcome("r1", "c") is None
    assert await store.outcome("r1", "no-2") is None and (await store.outcome("r1", "no")).error["code"] == "x"

    results = await store.write_ordered([
        AppendRequest(room="r1", expected_version=5, command_id="d", envelopes=third),  # conflict
        AppendRequest(room="r3", expected_version=0, command_id="e", envelopes=make_envelopes("r3", 1, 2, GENESIS_HASH)),
        AppendRequest(room="r1", expected_version=6, command_id="f", envelopes=third),
    ])
    assert isinstance(results[0], VersionConflict) and isinstance(results[2], NotAttempted)
    assert results[1].outcome.last_version == 2 and await store.latest_version("r3") == 2
