"""Reading the write side: a room's events and its state at a version, from its stream (and snapshots)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from almanac.events import codec, room as room_rules
from almanac.events.envelope import Envelope
from almanac.events.errors import CorruptEventError, UnusableSnapshotError
from almanac.events.room import RoomState
from almanac.projections.keys import StoreKeys
from almanac.projections.store import text

PAGE = 1000


async def room_events(
    client: Any, keys: StoreKeys, room: str, start: int = 1, end: int | None = None
) -> AsyncIterator[tuple[Envelope, Any]]:
    """(envelope, event) for ``start <= version <= end`` from the room's stream, page by page."""
    if end is not None and end < start:
        return
    low = f"{max(start, 1)}-0"
    high = "+" if end is None else f"{end}-0"
    key = keys.events(room)
    while True:
        entries = await client.xrange(key, low, high, count=PAGE)
        for entry_id, fields in entries:
            version = int(text(entry_id).split("-", 1)[0])
            data = fields.get(b"e", fields.get("e"))
            if data is None:
                raise CorruptEventError(room, version, "entry has no envelope field 'e'")
            envelope = codec.decode_envelope(data, room, version)
            yield envelope, codec.decode_event(envelope)
        if len(entries) < PAGE:
            return
        low = f"({text(entries[-1][0])}"


async def read_ranges(
    client: Any, keys: StoreKeys, ranges: list[tuple[str, int, int]]
) -> list[list[Envelope]]:
    """The envelopes of each (room, first version, last version), all in one pipelined round trip.

    Shard feed entries point into the room streams this way; every version of a range must be there.
    """
    async with client.pipeline(transaction=False) as pipe:
        for room, first, last in ranges:
            pipe.xrange(keys.events(room), f"{first}-0", f"{last}-0")
        replies = await pipe.execute()
    result = []
    for (room, first, last), entries in zip(ranges, replies, strict=True):
        envelopes = []
        for expected, (entry_id, fields) in enumerate(entries, start=first):
            version = int(text(entry_id).split("-", 1)[0])
            data = fields.get(b"e", fields.get("e"))
            if version != expected or data is None:
                raise CorruptEventError(room, expected, "the room stream lacks a version the shard feed names")
            envelopes.append(codec.decode_envelope(data, room, version))
        if len(envelopes) != last - first + 1:
            raise CorruptEventError(room, first + len(envelopes), "the room stream lacks a version the shard feed names")
        result.append(envelopes)
    return result


async def state_at(client: Any, keys: StoreKeys, room: str, version: int) -> RoomState | None:
    """The room's state at ``version`` (None at 0): the newest snapshot at or below it, then the tail."""
    if version <= 0:
        return None
    state: RoomState | None = None
    newest = await client.zrevrangebyscore(keys.snapshot_index(room), version, "-inf", start=0, num=1)
    if newest:
        data = await client.hget(keys.snapshot_data(room), newest[0])
        if data is not None:
            try:
                state, _ = codec.decode_snapshot(data)
            except UnusableSnapshotError:
                state = None  # an outdated snapshot: fold the room from its first event instead
    start = 1 if state is None else state.version + 1
    async for envelope, event in room_events(client, keys, room, start, version):
        state = room_rules.evolve(state, event, room, envelope.version)
    if state is None or state.version != version:
        raise CorruptEventError(room, version, "the room's stream ends before this version")
    return state
