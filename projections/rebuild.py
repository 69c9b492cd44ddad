"""Rebuild read models from the room streams (the source of truth), shard by shard, each shard in one script."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from almanac.events import codec
from almanac.events.step import advance
from almanac.projections.model_writes import (
    COMMIT_SCRIPT,
    CheckpointConflict,
    ShardWrites,
    commit_shard,
    model_keys_of_shard,
    queue_update,
    text,
)
from almanac.projections.read_model_rows import RoomUpdate, model_names, project_room
from almanac.storage.archive_index import archived_versions
from almanac.storage.keys import Keys
from almanac.storage.loader import RoomLoader
from almanac.storage.redis_store import RedisEventStore
from almanac.storage.retention import HOLD_MS

# A partial rebuild must land on the live checkpoint; a projector that keeps moving it wins after this many tries.
PARTIAL_ATTEMPTS = 5


class RebuildConflict(Exception):
    """The live projector kept moving a shard's checkpoint during a partial rebuild."""


async def fold_room(store: RedisEventStore, room: str, up_to: int | None = None) -> RoomUpdate | None:
    """A room's read-model update from nothing to ``up_to`` (latest when None); None for an empty room."""
    state = before = None
    events: list = []
    async for envelope in store.iterate(room, 1, up_to):
        if envelope.version == 1:  # a fork folds onto its parent's state, as the live projector's does
            state = before = await RoomLoader(store, cache_size=0).base_of(envelope)
        event = codec.decode_event(envelope)
        state = advance(state, envelope, event)
        events.append((envelope, event))
    return None if state is None else project_room(before, state, events)


async def rebuild(
    client: Any,
    shard_count: int,
    models: Iterable[str] | None = None,
    *,
    prefix: str = "alm",
    on_total: Callable[[int], None] | None = None,
    on_room: Callable[[str], None] | None = None,
    store: RedisEventStore | None = None,
) -> int:
    """Drop and rebuild the named read models (all when None) from the room streams; the number of rooms rebuilt.

    All models: every room to its latest version, and the checkpoint reset to the feed head read
    *before* the rooms, so a running projector resumes there and skips, by the projected versions,
    whatever the rebuild already covered. Some models only: every room to the version the live
    projection holds, so the rebuilt models agree with the untouched ones and the checkpoint.
    """
    every = model_names()
    models = every if models is None else tuple(m for m in every if m in set(models))
    # ``store``: the process's (services.bootstrap: it reads archived rooms from the archive tier), and its keys
    store = store or RedisEventStore(client, shard_count, prefix)
    keys = store.keys
    if on_total is not None:
        on_total(sum([len(await _rooms_of_shard(client, keys, shard)) for shard in range(shard_count)]))
    full = models == every
    script = client.register_script(COMMIT_SCRIPT)
    done = 0
    for shard in range(shard_count):
        if full:
            done += await _rebuild_shard_fully(client, script, store, keys, shard, on_room)
        else:
            done += await _rebuild_shard_partly(client, script, store, keys, shard, models, on_room)
    return done


async def _rooms_of_shard(client: Any, keys: Keys, shard: int) -> set[str]:
    """The shard's rooms: its room set and its archived rooms (a finished one leaves the set: storage.archive_index)."""
    return {text(r) for r in await client.smembers(keys.rooms(shard))} | set(await archived_versions(client, keys, shard))


async def rebuild_shard(client: Any, store: RedisEventStore, keys: Keys, shard: int,
                        on_room: Callable[[str], None] | None = None) -> int:
    """Rebuild every read model of one shard from its rooms' streams, its checkpoint set to the feed head
    read first; the number of rooms. (A projector starting with no checkpoint on a trimmed feed.)"""
    return await _rebuild_shard_fully(client, client.register_script(COMMIT_SCRIPT), store, keys, shard, on_room)


async def _rebuild_shard_fully(client: Any, script: Any, store: RedisEventStore, keys: Keys, shard: int,
                               on_room: Callable[[str], None] | None) -> int:
    # The feed keeps everything after the head read below until the commit (storage.retention: the hold).
    await client.set(keys.feed_hold(shard), "0-0", px=HOLD_MS)
    try:
        return await _rebuild_held_shard(client, script, store, keys, shard, on_room)
    finally:
        await client.delete(keys.feed_hold(shard))


async def _rebuild_held_shard(client: Any, script: Any, store: RedisEventStore, keys: Keys, shard: int,
                              on_room: Callable[[str], None] | None) -> int:
    head = await client.xrevrange(keys.feed(shard), "+", "-", count=1)
    # Rooms are listed after the head is read: every room with an event at or before the head is seen.
    rooms = sorted(await _rooms_of_shard(client, keys, shard))
    updates = []
    for room in rooms:
        update = await fold_room(store, room)
        if update is not None:
            updates.append(update)
        if on_room is not None:
            on_room(room)
    writes = ShardWrites()
    stale = await model_keys_of_shard(client, keys, shard, model_names())
    if stale:
        writes.delete(*stale)
    for update in updates:
        queue_update(writes, keys, shard, update)
    # No check: the rebuild wins; a running projector finds its checkpoint moved and resumes from the head.
    await commit_shard(script, keys.checkpoint(shard), writes, expected=None,
                       new_checkpoint=text(head[0][0]) if head else None)
    return len(rooms)


async def _rebuild_shard_partly(client: Any, script: Any, store: RedisEventStore, keys: Keys, shard: int,
                                models: tuple[str, ...], on_room: Callable[[str], None] | None) -> int:
    checkpoint = keys.checkpoint(shard)
    for _ in range(PARTIAL_ATTEMPTS):
        # Read the checkpoint first: the script writes only if it still holds this value, i.e. the live
        # models (and their versions read below) did not move meanwhile.
        seen = await client.get(checkpoint)
        expected = text(seen) if seen is not None else "0-0"
        versions = {text(r): int(v) for r, v in (await client.hgetall(keys.versions(shard))).items()}
        # finished archived rooms' projected versions are their pointers' (storage.archive_index)
        archived = await archived_versions(client, keys, shard)
        versions = {**archived, **versions}
        updates = []
        for room in sorted(versions):
            update = await fold_room(store, room, versions[room])
            if update is not None:
                updates.append(update)
        writes = ShardWrites()
        stale = await model_keys_of_shard(client, keys, shard, models)
        if stale:
            writes.delete(*stale)
        for update in updates:
            queue_update(writes, keys, shard, update, models)
            if "rooms" not in models and update.summary.get("ended"):
                # back on the archiver's list (the rooms model's zset, the projector's score): a finished archived
                # room's rows written again here leave Redis on its next pass (storage.archive_index)
                writes.zadd(keys.ended_rooms(shard), {update.room: update.summary.get("updated_at_ms", 0)})
        try:
            await commit_shard(script, checkpoint, writes, expected=expected, new_checkpoint=None,
                               keep_checkpoint=True)
        except CheckpointConflict:
            continue
        if on_room is not None:
            for room in sorted(versions):
                on_room(room)
        return len(versions)
    raise RebuildConflict(
        f"the projector kept moving shard {shard} during the rebuild; stop it, or rebuild all models"
    )
