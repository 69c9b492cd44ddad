"""The Redis key scheme: every key of a room carries its shard as the hash tag (Redis Cluster ready)."""

from __future__ import annotations

import zlib


def shard_of(room: str, shard_count: int) -> int:
    """The shard a room lives on: CRC-32 of the room id, modulo the shard count (stable across runs)."""
    return zlib.crc32(room.encode()) % shard_count


def shard_tag(shard: int) -> str:
    return f"{{s{shard:02d}}}"


class Keys:
    """Key names for one shard count; ``Keys(16).events("r1")`` -> ``alm:{s07}:room:r1:events``."""

    def __init__(self, shard_count: int, prefix: str = "alm") -> None:
        self.shard_count = shard_count
        self.prefix = prefix

    def shard(self, room: str) -> int:
        return shard_of(room, self.shard_count)

    def _room(self, room: str, suffix: str) -> str:
        return f"{self.prefix}:{shard_tag(self.shard(room))}:room:{room}:{suffix}"

    def events(self, room: str) -> str:
        return self._room(room, "events")

    def version(self, room: str) -> str:
        return self._room(room, "version")

    def commands(self, room: str) -> str:
        return self._room(room, "commands")

    def rejected(self, room: str) -> str:
        return self._room(room, "rejected")

    def snapshot_index(self, room: str) -> str:
        return self._room(room, "snapshots:index")

    def snapshot_data(self, room: str) -> str:
        return self._room(room, "snapshots:data")

    def seed(self, room: str) -> str:
        return self._room(room, "seed")

    def command_outcome(self, room: str, command_id: str) -> str:
        # Dedupe lives in the room's shard so the append script can check it atomically.
        return f"{self.prefix}:{shard_tag(self.shard(room))}:cmd:{command_id}"

    def feed(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:feed"

    def shard_commands(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:commands"

    def rooms(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:rooms"

    def dead_letters(self, shard: int) -> str:
        return f"{self.prefix}:{shard_tag(shard)}:dead"
