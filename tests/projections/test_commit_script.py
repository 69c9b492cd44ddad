"""The shard commit script: the checkpoint compare-and-set guards every write, long writes are split."""

from __future__ import annotations

import pytest

from almanac.projections.model_writes import (
    COMMIT_SCRIPT,
    CheckpointConflict,
    ShardWrites,
    commit_heads,
    commit_shard,
)
from almanac.projections.projector import CheckpointMoved, Projector
from almanac.storage.keys import Keys

KEYS = Keys()


async def test_a_commit_writes_everything_and_moves_the_checkpoint(redis_client):
    script = redis_client.register_script(COMMIT_SCRIPT)
    writes = ShardWrites()
    writes.hset(KEYS.versions(3), "r1", 7)
    writes.sadd(KEYS.model_ledger_rooms(3, "trades"), "r1")
    rows = {f"row-{index}".encode(): index for index in range(3000)}  # far more than one unpack() takes
    writes.zadd(KEYS.model_ledger(3, "trades", "r1"), rows)
    writes.zrem(KEYS.model_ledger(3, "trades", "r1"), b"row-0")
    await commit_shard(script, KEYS.checkpoint(3), writes, expected="0-0", new_checkpoint="5-1")

    assert await redis_client.get(KEYS.checkpoint(3)) == b"5-1"
    assert await redis_client.hget(KEYS.versions(3), "r1") == b"7"
    assert await redis_client.zcard(KEYS.model_ledger(3, "trades", "r1")) == 2999
    assert await redis_client.zscore(KEYS.model_ledger(3, "trades", "r1"), b"row-2999") == 2999


async def test_a_moved_checkpoint_writes_nothing(redis_client):
    script = redis_client.register_script(COMMIT_SCRIPT)
    await redis_client.set(KEYS.checkpoint(1), "9-0")
    writes = ShardWrites()
    writes.hset(KEYS.versions(1), "r1", 1)
    with pytest.raises(CheckpointConflict) as conflict:
        await commit_shard(script, KEYS.checkpoint(1), writes, expected="8-0", new_checkpoint="10-0")
    assert conflict.value.current == "9-0"
    assert await redis_client.exists(KEYS.versions(1)) == 0
    assert await redis_client.get(KEYS.checkpoint(1)) == b"9-0"


async def test_a_delete_then_writes_and_no_check_replace_a_shards_rows(redis_client):
    script = redis_client.register_script(COMMIT_SCRIPT)
    await redis_client.hset(KEYS.summaries(2), mapping={"old": "x", "r": "y"})
    await redis_client.set(KEYS.checkpoint(2), "4-0")
    writes = ShardWrites()
    writes.delete(KEYS.summaries(2))
    writes.hset(KEYS.summaries(2), "r", "z")
    await commit_shard(script, KEYS.checkpoint(2), writes, expected=None, new_checkpoint=None)
    assert await redis_client.hgetall(KEYS.summaries(2)) == {b"r": b"z"}
    assert await redis_client.exists(KEYS.checkpoint(2)) == 0


async def test_the_projector_reports_a_checkpoint_moved_under_it(redis_client):
    projector = Projector(redis_client, 4)
    await projector.load_checkpoints()
    await redis_client.set(KEYS.checkpoint(0), "1-0")  # a rebuild or a second projector got there first
    with pytest.raises(CheckpointMoved):
        await projector._commit(0, [], "2-0")
    assert await redis_client.get(KEYS.checkpoint(0)) == b"1-0"


async def test_a_commit_naming_more_than_65_536_keys_writes_each_to_its_own(redis_client):
    """Given one commit naming 65,601 keys (a write each), then each key holds its own write: a head names its key
    by a 3-byte big-endian index into KEYS, and the indexes here pass 255 and 65,535, so every byte of it counts
    (a script or encoder that dropped or misread one would write to another key, or to none)."""
    script = redis_client.register_script(COMMIT_SCRIPT)
    writes = ShardWrites()
    rooms = [f"r{index}" for index in range(65_600)]
    for room in rooms:
        writes.zadd(KEYS.model_ledger(5, "trades", room), {room.encode(): 1})
    writes.hset(KEYS.summaries(5), "last", "x")  # the last key named: index 65,602 (KEYS[1] is the checkpoint)
    script_keys, args = writes.script_call(KEYS.checkpoint(5), "0-0", "1-0")
    # The heads as the projector's own stories read them: KEYS's indexes in order, across each byte's carry.
    assert [index for _, index, _ in commit_heads(args)] == list(range(2, len(script_keys) + 1))
    await commit_shard(script, KEYS.checkpoint(5), writes, expected="0-0", new_checkpoint="1-0")

    # Every key written, none twice: a key written in another's place would leave one missing.
    assert await redis_client.dbsize() == len(rooms) + 2
    # The rooms on either side of each byte's carry (room i is KEYS[i + 2]: index i + 2 in its head).
    for index in (0, 253, 254, 255, 65_533, 65_534, 65_535, 65_599):
        room = rooms[index]
        assert await redis_client.zrange(KEYS.model_ledger(5, "trades", room), 0, -1) == [room.encode()]
    assert await redis_client.hgetall(KEYS.summaries(5)) == {b"last": b"x"}
    assert await redis_client.get(KEYS.checkpoint(5)) == b"1-0"
