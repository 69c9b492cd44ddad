"""Redis-specific storage facts: key layout with shard hash tags, entry ids, feed, corrupt entries."""

from __future__ import annotations

import pytest
from store.test_store_contract import make_envelopes

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH
from almanac.events.errors import CorruptEventError
from almanac.storage.base import AppendRequest, Counted, Receipt, RejectRequest
from almanac.storage.keys import Keys, shard_of
from almanac.storage.redis_store import RedisEventStore


async def test_room_entries_have_the_version_as_stream_id_and_every_key_carries_the_shard_tag(redis_client):
    store = RedisEventStore(redis_client, shard_count=16)
    await store.append("r1", 0, "cmd-1", make_envelopes("r1", 1, 3, GENESIS_HASH), b"rec")

    tag = f"{{s{shard_of('r1', 16):02d}}}"
    keys = sorted(k.decode() for k in await redis_client.keys("*"))
    assert keys and all(tag in key for key in keys)
    ids = [entry_id for entry_id, _ in await redis_client.xrange(Keys(16).events("r1"))]
    assert ids == [b"1-0", b"2-0", b"3-0"]
    feed = await redis_client.xrange(Keys(16).feed(shard_of("r1", 16)))
    # One small entry per append, pointing into the room stream.
    assert [f for _, f in feed] == [{b"r": b"r1", b"v": b"1", b"l": b"3"}]


async def test_a_malformed_entry_is_an_error_naming_room_and_version_not_a_skip(redis_client):
    store = RedisEventStore(redis_client, shard_count=4)
    await store.append("r1", 0, "cmd-1", make_envelopes("r1", 1, 2, GENESIS_HASH))
    await redis_client.xadd(store.keys.events("r1"), {"e": b"\x93garbage"}, id="3-0")

    with pytest.raises(CorruptEventError) as error:
        await store.read("r1")

    assert error.value.room == "r1" and error.value.version == 3
    assert "room 'r1' version 3" in str(error.value)


async def test_an_entry_without_an_envelope_field_names_room_and_version(redis_client):
    store = RedisEventStore(redis_client, shard_count=4)
    await redis_client.xadd(store.keys.events("r2"), {"x": b"1"}, id="1-0")

    with pytest.raises(CorruptEventError, match="room 'r2' version 1"):
        await store.read("r2")


async def test_an_entry_claiming_another_version_is_corrupt(redis_client):
    store = RedisEventStore(redis_client, shard_count=4)
    envelope = make_envelopes("r3", 5, 1, GENESIS_HASH)[0]

    await redis_client.xadd(store.keys.events("r3"), {"e": codec.encode_envelope(envelope)}, id="1-0")

    with pytest.raises(CorruptEventError, match="version 1"):
        await store.read("r3")


async def test_an_ordered_write_acknowledges_and_publishes_with_each_write_that_takes_effect_only(redis_client):
    """A receipt (the engine's answer) goes out in the same script as its append or refusal, and never for
    a write that found a duplicate or was not tried."""
    store = RedisEventStore(redis_client, shard_count=4)
    keys = Keys(4)
    stream = keys.command_stream(keys.shard("r1"))
    ids = [await redis_client.xadd(stream, {"__data__": b"x"}) for _ in range(4)]
    await redis_client.xgroup_create(stream, "engine", id="0")
    await redis_client.xreadgroup("engine", "me", {stream: ">"})
    pubsub = redis_client.pubsub()
    await pubsub.psubscribe("answers:*")
    assert (await pubsub.get_message(timeout=2))["type"] == "psubscribe"

    def receipt(index: int) -> Receipt:
        return Receipt(stream=stream, group="engine", entry_id=ids[index], channel=f"answers:{index}",
                       message=f"outcome {index}".encode())

    first = make_envelopes("r1", 1, 1, GENESIS_HASH, command_id="a")
    again = make_envelopes("r1", 2, 1, first[-1].hash, command_id="a")
    results = await store.write_ordered([
        AppendRequest(room="r1", expected_version=0, command_id="a", envelopes=first, receipt=receipt(0)),
        RejectRequest(room="r1", command_id="no", error={"code": "x", "message": "no"}, record=b"r",
                      receipt=receipt(1)),
        AppendRequest(room="r1", expected_version=1, command_id="a", envelopes=again, receipt=receipt(2)),  # dup
        AppendRequest(room="r1", expected_version=2, command_id="b", envelopes=again, receipt=receipt(3)),  # skipped
    ])
    assert [type(result).__name__ for result in results] == ["AppendResult", "AppendResult", "AppendResult",
                                                             "NotAttempted"]
    assert results[2].duplicate
    pending = await redis_client.xpending_range(stream, "engine", "-", "+", 10)
    assert sorted(entry["message_id"] for entry in pending) == sorted(ids[2:])
    messages = []
    while (message := await pubsub.get_message(timeout=0.5)) is not None:
        messages.append((message["channel"], message["data"]))
    assert messages == [(b"answers:0", b"outcome 0"), (b"answers:1", b"outcome 1")]
    await pubsub.aclose()


async def test_an_ordered_write_counts_each_limited_command_first_and_writes_nothing_past_the_limit(redis_client):
    """Given a client limit of 2 per window carried by the writes (storage.base.Counted), when a room's three
    appends, then a refusal of another room, are written in one call, then the first two are counted and
    appended, the third is answered CommandLimited with the window's remaining ms and nothing of it is
    written, and the refusal, counted under its own limit, is recorded: as the stream's submit counts."""
    store = RedisEventStore(redis_client, shard_count=1)
    keys = Keys(1)
    limit = Counted(key=keys.seat_rate("r1", "digest"), amount=2, window_ms=60_000)
    other = Counted(key=keys.seat_rate("r2", "other"), amount=1, window_ms=60_000)
    first = make_envelopes("r1", 1, 1, GENESIS_HASH, command_id="a")
    second = make_envelopes("r1", 2, 1, first[-1].hash, command_id="b")
    third = make_envelopes("r1", 3, 1, second[-1].hash, command_id="c")
    results = await store.write_ordered([
        AppendRequest(room="r1", expected_version=0, command_id="a", envelopes=first, counted=limit),
        AppendRequest(room="r1", expected_version=1, command_id="b", envelopes=second, counted=limit),
        AppendRequest(room="r1", expected_version=2, command_id="c", envelopes=third, counted=limit),
        RejectRequest(room="r2", command_id="no", error={"code": "x", "message": "no"}, record=b"r", counted=other),
    ])
    assert [type(result).__name__ for result in results] == ["AppendResult", "AppendResult", "CommandLimited",
                                                             "AppendResult"]
    assert results[2].key == limit.key and 0 < results[2].retry_ms <= 60_000
    assert await store.latest_version("r1") == 2 and await store.outcome("r1", "c") is None
    assert int(await redis_client.get(limit.key)) == 3  # every command counted, the refused one too
    assert 0 < await redis_client.pttl(limit.key) <= 60_000
    assert len(await store.rejections("r2")) == 1 and int(await redis_client.get(other.key)) == 1

    # A room's write that is not tried (after its earlier write did not take effect) is not counted either.
    results = await store.write_ordered([
        AppendRequest(room="r1", expected_version=0, command_id="late", envelopes=first),  # a conflict
        AppendRequest(room="r1", expected_version=1, command_id="later", envelopes=second, counted=limit),
    ])
    assert [type(result).__name__ for result in results] == ["VersionConflict", "NotAttempted"]
    assert int(await redis_client.get(limit.key)) == 3


async def test_a_window_opened_by_a_count_costs_one_redis_call_and_is_the_same_fixed_window(redis_client):
    """Given a seat with no window, when its command is written with its count (storage.base.Counted), then the count
    opened the window with one call (SET NX PX: no INCR, no PEXPIRE; a seat sends a few commands a minute, so most
    counts open a window, docs/capacity.md), the window is the limit's, and a second command in it is counted by
    INCR in the same window: the fixed window INCR then PEXPIRE made."""
    store = RedisEventStore(redis_client, shard_count=1)
    limit = Counted(key=Keys(1).seat_rate("w1", "digest"), amount=5, window_ms=60_000)
    first = make_envelopes("w1", 1, 1, GENESIS_HASH, command_id="a")
    await redis_client.config_resetstat()
    (result,) = await store.write_ordered([AppendRequest(room="w1", expected_version=0, command_id="a",
                                                         envelopes=first, counted=limit)])
    assert type(result).__name__ == "AppendResult"
    calls = await redis_client.info("commandstats")
    assert "cmdstat_incr" not in calls and "cmdstat_pexpire" not in calls, sorted(calls)
    assert int(await redis_client.get(limit.key)) == 1
    window = await redis_client.pttl(limit.key)
    assert 59_000 < window <= 60_000

    second = make_envelopes("w1", 2, 1, first[-1].hash, command_id="b")
    (result,) = await store.write_ordered([AppendRequest(room="w1", expected_version=1, command_id="b",
                                                         envelopes=second, counted=limit)])
    assert type(result).__name__ == "AppendResult"
    assert int(await redis_client.get(limit.key)) == 2
    assert 0 < await redis_client.pttl(limit.key) <= window  # the same window, not a new one


async def test_an_ordered_writes_reply_that_does_not_match_its_writes_is_an_error_not_a_guess(redis_client):
    """Each write (and each count before one) has one reply: a reply of another length is refused outright."""
    store = RedisEventStore(redis_client, shard_count=1)
    limit = Counted(key=Keys(1).seat_rate("r1", "digest"), amount=5, window_ms=1_000)
    first = make_envelopes("r1", 1, 1, GENESIS_HASH, command_id="a")
    requests = [AppendRequest(room="r1", expected_version=0, command_id="a", envelopes=first, counted=limit)]
    with pytest.raises(ValueError, match="for 1 writes"):
        store.ordered_results(requests, [[b"ok", b""]])  # the count's reply only
    with pytest.raises(ValueError):
        store.ordered_results(requests, [[b"ok", b""], [b"ok", b"1"], [b"ok", b"2"]])
