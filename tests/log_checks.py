"""What every room's log must satisfy, checked from the store: the hash chain links, the state the engine loads
(snapshot + tail) equals a plain fold of the events, and each command that appended has its record."""

from __future__ import annotations

from almanac.events.envelope import GENESIS_HASH, Envelope
from almanac.events.hashing import envelope_hash, state_hash
from almanac.events.step import replay
from almanac.services.room_service import RoomService
from almanac.storage.redis_store import RedisEventStore


async def assert_log_verifies(store: RedisEventStore, room: str) -> list[Envelope]:
    """The room's events, after checking its chain, its loaded state against the fold, and its command records."""
    envelopes = await store.read(room)
    previous = GENESIS_HASH
    for envelope in envelopes:
        assert envelope.previous_hash == previous and envelope_hash(envelope) == envelope.hash
        previous = envelope.hash
    loaded, last_hash = await RoomService(store).load(room)
    assert state_hash(loaded) == state_hash(replay(envelopes)) and last_hash == previous
    # Every command that appended has its record at its first version (what `verify` re-decides).
    firsts: dict[str, int] = {}
    for envelope in envelopes:
        firsts.setdefault(envelope.command_id, envelope.version)
    assert sorted(version for version, _ in await store.commands(room)) == sorted(firsts.values())
    return envelopes
