"""Redis-specific storage facts: key layout with shard hash tags, entry ids, feed, corrupt entries."""

from __future__ import annotations

import pytest
from store.test_store_contract import make_envelopes

from almanac.events import codec
from almanac.events.envelope import GENESIS_HASH
from almanac.events.errors import CorruptEventError
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
