"""Seat keys' digests (a player's way back to a seat, ``POST /rooms/{room}/seat``), kept in small bucketed hashes.

A seat's digest (the sha256 of the key its join answer carried, 32 raw bytes) is a field of one of the shard's
``Keys.seat_key_bucket`` hashes, named by the first 16 bytes of the sha256 of (room, player): Redis keeps a hash of
at most 128 fields of at most 64 bytes as one listpack, so a seat costs a listpack entry (~50 B) and no key of its own,
and a room's seats stay in Redis as they are when it is archived (a player reclaims a token to read their own view of
an archived room): nothing moves, so the archive's crash points are not touched. The first layout (one hash per room,
``Keys.first_layout_seat_keys``: player -> hex digest; ~265-285 B per two-seat room against ~160 B in the buckets
at 20,000 rooms, `almanac bench layouts`, docs/capacity.md) is still read when
the buckets have no digest for the seat; a new key for a seat removes its first-layout digest in the same
script (both keys carry the room's hash tag: one Cluster slot), so a key given before stops working.
"""

from __future__ import annotations

import hashlib
import secrets

import redis.asyncio as aioredis

from almanac.storage.keys import Keys

# KEYS: 1 the seat's bucket, 2 the room's first-layout hash. ARGV: 1 the seat's field, 2 its digest, 3 the player.
GRANT_SCRIPT = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[3])
"""


def seat_field(room: str, player: str) -> bytes:
    """A seat's field in its bucket: the first 16 bytes of the sha256 of (room, player), length-prefixed so no two
    seats share the encoding; 16 bytes keep a listpack entry small and a second preimage out of reach."""
    encoded = room.encode()
    return hashlib.sha256(len(encoded).to_bytes(4, "big") + encoded + player.encode()).digest()[:16]


def digest_of(seat_key: str) -> bytes:
    """What the server keeps of a seat key: its sha256, never the key."""
    return hashlib.sha256(seat_key.encode()).digest()


async def grant(client: aioredis.Redis, keys: Keys, room: str, player: str) -> str:
    """A new seat key for ``player`` in ``room``: its digest replaces the seat's digest (either layout) at once."""
    key = secrets.token_urlsafe(32)
    script = client.register_script(GRANT_SCRIPT)
    await script(keys=[keys.seat_key_bucket(room), keys.first_layout_seat_keys(room)],
                 args=[seat_field(room, player), digest_of(key), player])
    return key


async def kept_digest(client: aioredis.Redis, keys: Keys, room: str, player: str) -> bytes | None:
    """The digest kept for a seat (32 bytes), from its bucket or else from the first layout; None: no seat key."""
    bucketed = await client.hget(keys.seat_key_bucket(room), seat_field(room, player))
    if bucketed is not None:
        return bytes(bucketed)
    first_layout = await client.hget(keys.first_layout_seat_keys(room), player)  # granted before the buckets
    if first_layout is not None:
        try:
            return bytes.fromhex(first_layout.decode())
        except ValueError:
            return None
    return None


async def opens(client: aioredis.Redis, keys: Keys, room: str, player: str, seat_key: str) -> bool:
    """Whether ``seat_key`` is the key kept for the seat (compared in constant time)."""
    kept = await kept_digest(client, keys, room, player)
    return kept is not None and secrets.compare_digest(kept, digest_of(seat_key))
